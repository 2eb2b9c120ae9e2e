"""The limited process: unprivileged, no network, hidden paths, rlimits, and nothing left running."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from scaleoutai.grading.sandbox import UID_BASE, Limits, _uid_alive, enter_sandbox, kill_uid, probe_mode

ROOT = Path(__file__).resolve().parents[1]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges and namespaces need root")
pytestmark = pytest.mark.timeout(60)


def in_sandbox(tmp_path: Path, probe, limits: Limits) -> dict:
    """Fork, enter the sandbox, run ``probe()`` there and return what it reports."""
    base = tmp_path / "base"
    work = base / "w"
    work.mkdir(parents=True)
    os.chmod(base, 0o711)
    if limits.mode != "none":
        os.chown(work, UID_BASE + 7, 65534)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            enter_sandbox(str(work), UID_BASE + 7, limits)
            out = probe()
        except BaseException as exc:  # noqa: BLE001
            out = {"setup": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    kill_uid(UID_BASE + 7)  # its children hold the pipe open too
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    return json.loads(data)


def _full(tmp_path, **kw) -> Limits:
    if os.geteuid() != 0 or probe_mode() != "full":
        pytest.skip("needs root and mount/network namespaces")
    return Limits(mode="full", hide=[str(ROOT / "grading"), str(ROOT / "labs"), str(tmp_path / "base")], **kw)


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


@root_only
def test_student_process_is_unprivileged_and_cannot_read_hidden_paths(tmp_path):
    def probe():
        return {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(),
                "grading": _try(lambda: os.listdir(ROOT / "grading")),
                "solution": _try(lambda: open(ROOT / "labs" / "lab04-ring-allreduce" / "lab04-ring-allreduce.py").read()),
                "write_here": _try(lambda: open("x", "w").write("ok")),
                "write_repo": _try(lambda: open(ROOT / "evil.txt", "w").write("x")),
                "numpy": __import__("numpy").__name__}
    out = in_sandbox(tmp_path, probe, _full(tmp_path))
    assert out.get("uid") == UID_BASE + 7 and out["gid"] == 65534, out
    assert out["grading"] == out["solution"] == "PermissionError"
    assert out["write_here"] == 2 and out["write_repo"] == "PermissionError" and out["numpy"] == "numpy"
    assert not (ROOT / "evil.txt").exists()


@root_only
def test_student_process_has_no_network_even_to_the_graders_loopback(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def probe():
        return {"loopback": _try(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close()),
                "internet": _try(lambda: socket.create_connection(("1.1.1.1", 80), timeout=1).close())}
    out = in_sandbox(tmp_path, probe, _full(tmp_path))
    listener.close()
    assert out["loopback"] == "ConnectionRefusedError" and out["internet"] not in (None,)


@root_only
def test_memory_process_and_file_size_caps_hold(tmp_path):
    def probe():
        res = {}
        try:
            bytearray(3 * 2**30)
            res["memory"] = "allocated"
        except MemoryError:
            res["memory"] = "MemoryError"
        pids = []
        try:
            for _ in range(20):
                pid = os.fork()
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                pids.append(pid)
            res["fork"] = "unlimited"
        except OSError as exc:
            res["fork"] = type(exc).__name__
        res["forked"] = len(pids)
        res["fsize"] = _try(lambda: open("big", "wb").write(b"x" * (3 * 2**20)))
        return res
    out = in_sandbox(tmp_path, probe, _full(tmp_path, memory_mb=1024, nproc=8, fsize_mb=2))
    assert out["memory"] == "MemoryError"
    assert out["fork"] == "BlockingIOError" and out["forked"] < 8
    assert out["fsize"] == "OSError"  # EFBIG: the write fails, the process is not killed
    assert not _uid_alive(UID_BASE + 7)  # kill_uid took the sleeping children too


@root_only
def test_kill_uid_ends_processes_that_left_the_process_group(tmp_path):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.setresuid(UID_BASE + 9, UID_BASE + 9, UID_BASE + 9)
        if os.fork() == 0:
            os.setsid()
        time.sleep(60)
        os._exit(0)
    time.sleep(0.3)
    assert _uid_alive(UID_BASE + 9)
    kill_uid(UID_BASE + 9)
    os.waitpid(pid, 0)
    assert not _uid_alive(UID_BASE + 9)


def test_without_isolation_the_sandbox_still_applies_rlimits_and_the_working_dir(tmp_path):
    def probe():
        import resource
        return {"cwd": os.getcwd(), "as": resource.getrlimit(resource.RLIMIT_AS)[0], "home": os.environ["HOME"]}
    out = in_sandbox(tmp_path, probe, Limits(mode="none", memory_mb=1500))
    assert out["cwd"].endswith("/w") and out["home"] == out["cwd"] and out["as"] == 1500 * 2**20
