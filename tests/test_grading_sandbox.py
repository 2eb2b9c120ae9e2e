"""The sandbox's walls: a new root holding only what student code needs, no network, an unprivileged
uid, stubs over forbidden modules, capped memory, processes, files and temporary space."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from scaleoutai.grading.jail import (HOME, Limits, enter_jail, import_roots, kill_uid, module_file, probe_mode, uid_alive,
                                    unshare_all)
from scaleoutai.grading.sandbox import UID_BASE

ROOT = Path(__file__).resolve().parents[1]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges and namespaces need root")
pytestmark = pytest.mark.timeout(60)
UID = UID_BASE + 4000  # far from the uids a grading batch of these tests reserves


def in_jail(tmp_path: Path, probe, limits: Limits) -> dict:
    """Build a sandbox as the zygote does (new namespaces, then pid 1 enters the jail), run ``probe()``."""
    work, root = tmp_path / "sub" / "w", tmp_path / "sub" / ".root"
    work.mkdir(parents=True)
    root.mkdir()
    if limits.mode != "none":
        os.chown(work, UID, 65534)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if limits.mode == "full":
                unshare_all()
                child = os.fork()
                if child:
                    os.waitpid(child, 0)
                    os._exit(0)
            enter_jail(str(root), str(work), UID, import_roots(), limits)
            out = probe()
        except BaseException as exc:  # noqa: BLE001
            out = {"setup": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    kill_uid(UID)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    return json.loads(data)


def _full(**kw) -> Limits:
    if os.geteuid() != 0 or probe_mode() != "full":
        pytest.skip("needs root and mount/network namespaces")
    return Limits(mode="full", **kw)


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


def test_import_roots_hold_the_library_and_packages_but_no_test_or_working_folder():
    roots = import_roots()
    assert str(ROOT / "src") in roots or any(Path(p, "scaleoutai").is_dir() for p in roots)
    assert str(ROOT / "tests") not in roots and os.getcwd() not in roots


def test_module_file_finds_modules_and_packages_without_importing_them():
    roots = import_roots()
    assert module_file("scaleoutai.collectives", roots).endswith("collectives.py")
    assert module_file("scaleoutai.parallel", roots).endswith("parallel")
    assert module_file("scaleoutai.no_such_thing", roots) is None


@root_only
def test_the_new_root_holds_no_course_repository_and_is_read_only_but_home(tmp_path):
    def probe():
        return {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(),
                "grading": _try(lambda: os.listdir(ROOT / "grading")),
                "git": _try(lambda: open(ROOT / ".git" / "HEAD").read()),
                "solution": _try(lambda: open(ROOT / "labs" / "lab04-ring-allreduce" / "lab04-ring-allreduce.py").read()),
                "write_home": _try(lambda: open("x", "w").write("ok")),
                "write_root": _try(lambda: open("/evil.txt", "w").write("x")),
                "write_lib": _try(lambda: open(os.path.join(os.path.dirname(json.__file__), "evil.py"), "w").write("")),
                "numpy": __import__("numpy").__name__, "pids": [p for p in os.listdir("/proc") if p.isdigit()],
                "tmp": os.listdir("/tmp")}
    out = in_jail(tmp_path, probe, _full())
    assert out.get("uid") == UID and out["gid"] == 65534, out
    assert out["grading"] == out["git"] == out["solution"] == "FileNotFoundError"
    assert out["write_home"] == 2 and out["cwd"] == HOME and out["numpy"] == "numpy"
    assert out["write_root"] in ("OSError", "PermissionError") and out["write_lib"] in ("OSError", "PermissionError")
    assert out["pids"] == ["1"] and out["tmp"] == []


@root_only
def test_no_network_even_to_the_graders_loopback(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def probe():
        return {"loopback": _try(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close()),
                "internet": _try(lambda: socket.create_connection(("1.1.1.1", 80), timeout=1).close())}
    out = in_jail(tmp_path, probe, _full())
    listener.close()
    assert out["loopback"] == "ConnectionRefusedError" and out["internet"] not in (None,)


@root_only
def test_a_forbidden_module_is_unimportable_by_any_path(tmp_path):
    target = module_file("scaleoutai.collectives", import_roots())

    def probe():
        import importlib.machinery
        import sys

        sys.modules.pop("scaleoutai.collectives", None)  # forked from pytest, which may have imported it;
        res = {}  # the zygote never has
        try:
            import scaleoutai.collectives  # noqa: F401
            res["import"] = "imported"
        except ImportError as exc:
            res["import"] = str(exc)
        try:
            importlib.machinery.SourceFileLoader("x", target).load_module()
            res["by_file"] = "imported"
        except ImportError:
            res["by_file"] = "ImportError"
        res["source"] = open(target).read()
        return res
    out = in_jail(tmp_path, probe, _full(unimportable=[["scaleoutai.collectives", target]]))
    assert "scaleoutai.collectives is not available while this lab is graded" in out["import"]
    assert out["by_file"] == "ImportError"
    assert "def ring_allreduce" not in out["source"]


@root_only
def test_memory_process_file_and_temporary_space_caps_hold(tmp_path):
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
        res["shm"] = _try(lambda: [open(f"/dev/shm/f{i}", "wb").write(b"x" * 2**20) for i in range(8)])
        return res
    out = in_jail(tmp_path, probe, _full(memory_mb=1024, nproc=8, fsize_mb=2, tmp_mb=4))
    assert out["memory"] == "MemoryError"
    assert out["fork"] == "BlockingIOError" and out["forked"] < 8
    assert out["fsize"] == "OSError"  # EFBIG: the write fails, the process is not killed
    assert out["shm"] == "OSError"  # ENOSPC: 4 MB of /dev/shm
    assert not uid_alive(UID)  # kill_uid took the sleeping children too


@root_only
def test_kill_uid_ends_processes_that_left_the_process_group(tmp_path):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.setresuid(UID + 2, UID + 2, UID + 2)
        if os.fork() == 0:
            os.setsid()
        time.sleep(60)
        os._exit(0)
    time.sleep(0.3)
    assert uid_alive(UID + 2)
    kill_uid(UID + 2)
    os.waitpid(pid, 0)
    assert not uid_alive(UID + 2)


def test_without_isolation_the_sandbox_still_applies_rlimits_and_the_working_dir(tmp_path):
    def probe():
        import resource
        return {"cwd": os.getcwd(), "as": resource.getrlimit(resource.RLIMIT_AS)[0], "home": os.environ["HOME"]}
    out = in_jail(tmp_path, probe, Limits(mode="none", memory_mb=1500))
    assert out["cwd"].endswith("/w") and out["home"] == out["cwd"] and out["as"] == 1500 * 2**20
