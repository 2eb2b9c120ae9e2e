"""The limited process that runs student code (Chapter 1 labs, grading).

A *zygote* is forked from the grader before any hidden test is imported. It preloads numpy, torch and
the communicator once, then forks one child per submission. The child, still root, enters a private
mount and network namespace, hides ``grading/``, ``labs/``, the results and every other submission
under empty read-only tmpfs mounts, brings up its own loopback (for the process backend), drops to an
unprivileged uid of its own (one per job slot, so ``RLIMIT_NPROC`` and file permissions separate
concurrent students), applies rlimits and runs ``driver.main``. The zygote enforces the wall-clock
timeout and kills every process of the slot's uid afterwards (``kill(-1)`` as that uid), so a fork bomb
that calls ``setsid`` still dies. Without root the child only gets rlimits, a timeout and its own
working directory; ``Limits.mode`` says which one ran ("full", "uid" or "none").
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

log = logging.getLogger("scaleoutai.grading")

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
UID_BASE = 61000  # uids 61000.. are the job slots; no passwd entry is needed to run as one
SETUP_FAILED = 86  # exit status of a child whose sandbox could not be built (fail closed)
DRIVER_FAILED = 87  # the trusted driver itself failed before handing anything back


@dataclass
class Limits:
    """What one submission may use. ``memory_mb`` is RLIMIT_AS per process (torch maps ~1 GB)."""

    timeout: float = 60.0
    memory_mb: int = 2048
    nproc: int = 64
    fsize_mb: int = 64
    nofile: int = 256
    hide: list[str] = field(default_factory=list)  # paths the student must not see
    mode: str = "auto"  # "full": namespaces + uid drop; "uid": uid drop only; "none"; "auto": best that works


def is_root() -> bool:
    return os.geteuid() == 0


_libc = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _loopback_up() -> None:
    """A new network namespace has only ``lo``, and it is down: bring it up (SIOCSIFFLAGS)."""
    import fcntl

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, req)[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 0x1 | 0x40))  # IFF_UP | IFF_RUNNING
    finally:
        s.close()


def _blocked_ancestor(path: str) -> str | None:
    """The topmost ancestor of ``path`` that others cannot traverse (e.g. /root, mode 700)."""
    parts = os.path.abspath(path).split(os.sep)[1:]
    cur = ""
    for p in parts[:-1]:
        cur += os.sep + p
        try:
            if not os.stat(cur).st_mode & 0o001:
                return cur
        except OSError:
            return None
    return None


def _reveal_interpreter(extra: list[str]) -> None:
    """Make the Python prefix, sys.path and ``extra`` reachable when under a private dir (/root, 0700).

    The private directory is covered by a tmpfs (so nothing else in it shows) and only the needed
    subtrees are bound back read-only, through O_PATH descriptors opened before the cover.
    """
    extra = [os.path.realpath(p) for p in extra]
    needed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(
        sys.executable)), *sys.path, *extra) if p and os.path.isdir(p)}
    groups: dict[str, list[str]] = {}
    for p in sorted(needed):
        top = _blocked_ancestor(p)
        if top:
            groups.setdefault(top, []).append(p)
    for top, paths in groups.items():
        paths = [p for p in paths if not any(p != q and p.startswith(q + os.sep) for q in paths)]
        fds = {p: os.open(p, os.O_PATH) for p in paths}
        _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for p, fd in fds.items():
            os.makedirs(p, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
            if p not in extra:
                _mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
            os.close(fd)
        _mount(None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")


def _hide(paths: list[str], keep: str) -> None:
    """Cover each path with an empty read-only mount; ``keep`` (the working dir) is bound back."""
    keep_fd = os.open(keep, os.O_PATH)
    for p in sorted({os.path.realpath(p) for p in paths if os.path.lexists(p)}, key=len, reverse=True):
        holds_keep = keep.startswith(p + os.sep)
        if os.path.isdir(p):  # tmpfs modes are fixed at mount time: 0711 only where the working dir sits
            _mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={'0711' if holds_keep else '0000'},size=64k")
        else:
            _mount("/dev/null", p, None, MS_BIND)
        if holds_keep:
            os.makedirs(keep, exist_ok=True)
            _mount(f"/proc/self/fd/{keep_fd}", keep, None, MS_BIND)
        if os.path.isdir(p):
            _mount(None, p, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.close(keep_fd)


def enter_sandbox(workdir: str, uid: int, limits: Limits) -> None:
    """Called in the forked child: namespaces, hidden paths, uid drop, rlimits. Raises on failure."""
    os.setsid()
    if limits.mode == "full":
        _check(libc().unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _loopback_up()
        _reveal_interpreter([workdir])
        _hide(limits.hide, keep=workdir)
    if limits.mode in ("full", "uid"):
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(uid, uid, uid)
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    mb = 1 << 20
    for lim, val in ((resource.RLIMIT_AS, limits.memory_mb * mb), (resource.RLIMIT_FSIZE, limits.fsize_mb * mb),
                     (resource.RLIMIT_NPROC, limits.nproc), (resource.RLIMIT_NOFILE, limits.nofile),
                     (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(lim, (val, val))
    cpu = int(limits.timeout) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG, no kill
    os.chdir(workdir)
    home = workdir
    os.environ.clear()
    os.environ.update({"HOME": home, "TMPDIR": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                       "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
                       "TORCH_CPP_LOG_LEVEL": "ERROR", "PYTHONDONTWRITEBYTECODE": "1"})


def probe_mode() -> str:
    """The strongest isolation this machine allows: "full" (root, namespaces), "uid" (root), "none"."""
    if not is_root():
        return "none"
    pid = os.fork()
    if pid == 0:
        try:
            _check(libc().unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")
            _loopback_up()
        except BaseException:  # noqa: BLE001
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return "full" if os.waitstatus_to_exitcode(status) == 0 else "uid"


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``: a helper that becomes ``uid`` calls kill(-1, SIGKILL)."""
    if not is_root():
        return
    for _ in range(5):
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if not _uid_alive(uid):
            return


def _uid_alive(uid: int) -> bool:
    """Whether a live (non-zombie) process of ``uid`` exists."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    with open(f"/proc/{d}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            return True
            except (OSError, IndexError):
                pass
    return False


def _preload() -> None:
    """Import once in the zygote what every child needs, so each fork starts warm."""
    import numpy  # noqa: F401

    from scaleoutai import cluster  # noqa: F401
    from scaleoutai.cluster import process, sim, spawn  # noqa: F401
    from scaleoutai.grading import driver  # noqa: F401
    try:
        import cloudpickle  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError:  # pragma: no cover - the process backend then fails inside the child
        pass


def _child(job: dict) -> None:
    os.closerange(3, 65536)  # the zygote's pipes must not reach student code
    if job.get("cpu") is not None:  # a fork bomb then saturates its own core, not its neighbour's
        os.sched_setaffinity(0, {job["cpu"]})
    try:
        enter_sandbox(job["workdir"], job["uid"], Limits(**job["limits"]))
    except BaseException as exc:  # noqa: BLE001 - fail closed: never run student code half-isolated
        try:
            with open(os.path.join(job["workdir"], "setup_error.txt"), "w") as f:
                f.write(f"{type(exc).__name__}: {exc}")
        except OSError:
            pass
        os._exit(SETUP_FAILED)
    try:
        from scaleoutai.grading import driver

        driver.main(job["workdir"])
    except BaseException:  # noqa: BLE001 - never fall back into the zygote's loop
        import traceback

        try:
            with open(os.path.join(job["workdir"], "driver_error.txt"), "w") as f:
                f.write(traceback.format_exc()[-2000:])
        except OSError:
            pass
    os._exit(DRIVER_FAILED)


def zygote_loop(rfd: int, wfd: int) -> None:
    """Serve jobs: read JSON lines {id, workdir, uid, limits}; answer {id, status, signal, timed_out, wall}."""
    libc().prctl(PR_SET_CHILD_SUBREAPER, 1)
    _preload()
    running: dict[int, tuple[dict, float]] = {}
    buf = b""
    out = os.fdopen(wfd, "w", buffering=1)
    closed = False
    while not closed or running:
        ready, _, _ = select.select([] if closed else [rfd], [], [], 0.02)
        if ready:
            chunk = os.read(rfd, 65536)
            closed = not chunk
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                job = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(rfd)
                    _child(job)
                running[pid] = (job, time.monotonic())
        while True:  # reap direct children and orphans re-parented to us (subreaper)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in running:
                job, t0 = running.pop(pid)
                kill_uid(job["uid"])
                out.write(json.dumps({"id": job["id"], "status": os.waitstatus_to_exitcode(status),
                                      "timed_out": job.get("_timed_out", False),
                                      "wall": time.monotonic() - t0}) + "\n")
        now = time.monotonic()
        for pid, (job, t0) in running.items():
            if now - t0 > job["limits"]["timeout"] and not job.get("_timed_out"):
                job["_timed_out"] = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                kill_uid(job["uid"])
    out.close()


class Zygote:
    """Handle on the zygote process: ``submit(job)`` and ``poll()`` for finished jobs."""

    def __init__(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        import subprocess

        # A fresh interpreter, not a fork of the grader: sandboxes inherit nothing of the caller (no hidden
        # test in memory, no threads, and not a caller's multi-GB address space that RLIMIT_AS would count).
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
        self._proc = subprocess.Popen([sys.executable, "-m", "scaleoutai.grading.sandbox", str(req_r), str(rep_w)],
                                      pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL, env=env)
        self.pid = self._proc.pid
        os.close(req_r)
        os.close(rep_w)
        self._w = os.fdopen(req_w, "w", buffering=1)
        self._r = rep_r
        self._buf = b""

    def submit(self, job_id: str, workdir: str, uid: int, limits: Limits, cpu: int | None = None) -> None:
        self._w.write(json.dumps({"id": job_id, "workdir": workdir, "uid": uid, "limits": asdict(limits),
                                  "cpu": cpu}) + "\n")

    def poll(self, timeout: float) -> list[dict]:
        ready, _, _ = select.select([self._r], [], [], timeout)
        if ready:
            chunk = os.read(self._r, 65536)
            if not chunk:
                raise RuntimeError("the grader's sandbox process (zygote) died; rerun to resume the batch")
            self._buf += chunk
        done = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            done.append(json.loads(line))
        return done

    def close(self) -> None:
        self._w.close()
        self._proc.wait()
        os.close(self._r)


if __name__ == "__main__":  # the zygote: python -m scaleoutai.grading.sandbox REQUEST_FD REPLY_FD
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a killed grader takes its sandboxes along
    try:
        zygote_loop(int(sys.argv[1]), int(sys.argv[2]))
    finally:
        os._exit(0)
