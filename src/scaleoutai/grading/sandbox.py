"""The zygote: a clean, warm process that forks every sandbox of a grading batch.

It is a fresh interpreter started with a minimal environment (nothing of the grader's variables exists
anywhere in its memory), before any hidden test is imported. It preloads numpy, torch and the
communicator once, then serves requests on a SOCK_SEQPACKET socket: ``spawn`` forks a sandbox whose
ranks each get one channel descriptor (passed with SCM_RIGHTS by the grader), ``kill`` ends one, and
``release`` drops a submission's working folders. A sandbox reports a successful set-up on a pipe that
is closed before student code runs, so a student cannot forge a set-up failure. In full mode the
zygote lives in a private mount namespace, and each submission's working folders are a size-capped
tmpfs that only its sandboxes see.
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict

from .jail import (CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_REC, PR_SET_PDEATHSIG, Limits, check,
                   enter_jail, import_roots, libc, loopback_up, mount, umount, unshare_all)

log = logging.getLogger("scaleoutai.grading")

UID_BASE = 61000  # uids 61000.. are the sandboxes' uids; no passwd entry is needed to run as one
UIDS_PER_SLOT = 16  # one uid per rank: ranks of one submission cannot read or signal each other
ZYGOTE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR", "PYTHONDONTWRITEBYTECODE": "1",
              "MPLBACKEND": "Agg", "HOME": "/nonexistent"}


def is_root() -> bool:
    return os.geteuid() == 0


def probe_mode() -> str:
    """The strongest isolation this machine allows: "full" (root, namespaces), "uid" (root), "none"."""
    if not is_root():
        return "none"
    pid = os.fork()
    if pid == 0:
        try:
            unshare_all()
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")
            loopback_up()
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
        if not uid_alive(uid):
            return


def uid_alive(uid: int) -> bool:
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


def _confine_cpu(cpu: int | None) -> str:
    """Join a cpuset cgroup holding one core (a student cannot leave it: /sys is not in the sandbox)."""
    if cpu is None:
        return "none"
    base = "/sys/fs/cgroup/cpuset"
    try:
        group = f"{base}/scaleout-grader/cpu{cpu}"
        if not os.path.isdir(group):
            os.makedirs(group, exist_ok=True)
            mems = open(f"{base}/cpuset.mems").read().strip()
            for d in (f"{base}/scaleout-grader", group):
                with open(f"{d}/cpuset.mems", "w") as f:
                    f.write(mems)
            with open(f"{base}/scaleout-grader/cpuset.cpus", "w") as f:
                f.write(open(f"{base}/cpuset.cpus").read().strip())
            with open(f"{group}/cpuset.cpus", "w") as f:
                f.write(str(cpu))
        with open(f"{group}/tasks", "w") as f:
            f.write(str(os.getpid()))
        return "cgroup"
    except OSError:
        os.sched_setaffinity(0, {cpu})
        return "affinity"


def _sandbox(job: dict, fds: list[int], status_w: int) -> None:
    """The forked sandbox: walls first (reporting on ``status_w``), then one rank per channel."""
    limits = Limits(**job["limits"])
    keep = {*fds, status_w}
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.setsid()
    try:
        cpu = _confine_cpu(job.get("cpu"))
        if limits.mode == "full":
            unshare_all()
            pid = os.fork()  # the child is pid 1 of the new PID namespace
            if pid:
                os.close(status_w)
                for fd in fds:
                    os.close(fd)
                _, status = os.waitpid(pid, 0)
                os._exit(min(255, max(0, os.waitstatus_to_exitcode(status))))
            libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        enter_jail(job["root"], job["work"], job["uid"], job["roots"], limits)
    except BaseException as exc:  # noqa: BLE001 - fail closed: never run student code half-isolated
        os.write(status_w, f"error {type(exc).__name__}: {exc}"[:2000].encode())
        os._exit(1)
    os.write(status_w, f"ok {cpu}".encode())
    os.close(status_w)
    if limits.mode == "full":
        _init_of_namespace(fds)
    from .rank import serve

    for i, fd in enumerate(fds[1:], 1):  # a real-process (gloo) sandbox: one process per rank
        if os.fork() == 0:
            for other in fds:
                if other != fd:
                    os.close(other)
            serve(fd, report_output=False)
    for fd in fds[1:]:
        os.close(fd)
    serve(fds[0], report_output=job.get("report", False))


def _init_of_namespace(fds: list[int]) -> None:
    """Stay pid 1 of the sandbox's PID namespace and run the ranks as its children: the kernel drops
    default-action signals sent to a namespace's init (a write past RLIMIT_FSIZE would then only fail
    instead of killing the writer), and an init reaps what the ranks leave behind."""
    rank = os.fork()
    if rank == 0:
        return
    for fd in fds:
        os.close(fd)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if pid == rank:
            os._exit(min(255, max(0, os.waitstatus_to_exitcode(status))) or (128 + 9 if status else 0))


def _prepare_work(job: dict, mounted: set[str]) -> None:
    """The submission's tmpfs (once) and this sandbox's folder in it, owned by its uid."""
    sub = job["subwork"]
    if sub not in mounted:
        os.makedirs(sub, mode=0o711, exist_ok=True)
        if job["limits"]["mode"] == "full":
            mount("tmpfs", sub, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0711,size={job['limits']['disk_mb']}m")
        mounted.add(sub)
    os.makedirs(job["work"], mode=0o700, exist_ok=True)
    os.makedirs(job["root"], mode=0o755, exist_ok=True)
    shared = job["limits"]["shared"]
    if job["limits"]["mode"] != "none":
        os.chown(job["work"], job["uid"], 65534)
    if shared:  # one folder every rank of the submission sees, like a cluster's shared file system
        common = os.path.join(sub, ".shared")
        os.makedirs(common, mode=0o770, exist_ok=True)
        os.chmod(common, 0o2770)
        if job["limits"]["mode"] != "none":
            os.chown(common, 0, 65534)
        target = os.path.join(job["work"], shared)
        if job["limits"]["mode"] == "full":
            os.makedirs(target, exist_ok=True)
            mount(common, target, None, MS_BIND)
        elif not os.path.lexists(target):
            os.symlink(common, target)


def zygote_loop(sock: socket.socket) -> None:
    """Serve spawn/kill/release requests; answer {op: setup|exit, key, ...}."""
    from .rank import serve  # noqa: F401 - warm: the sandbox's code is loaded before any fork

    running: dict[int, dict] = {}  # pid -> job
    status: dict[int, tuple[int, dict, bytes]] = {}  # status pipe -> (pid, job, bytes so far)
    mounted: set[str] = set()
    closed = False

    def reply(msg: dict) -> None:
        try:
            sock.send(json.dumps(msg).encode())
        except OSError:
            pass

    while not closed or running:
        ready, _, _ = select.select(([] if closed else [sock]) + list(status), [], [], 0.05)
        for r in ready:
            if r is sock:
                try:
                    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 64)
                except OSError:
                    data, fds = b"", []
                if not data:
                    closed = True
                    continue
                job = json.loads(data)
                if job["op"] == "spawn":
                    try:
                        _prepare_work(job, mounted)
                    except OSError as exc:
                        reply({"op": "setup", "key": job["key"], "ok": False, "error": f"working folder: {exc}"})
                        for fd in fds:
                            os.close(fd)
                        continue
                    sr, sw = os.pipe()
                    pid = os.fork()
                    if pid == 0:
                        os.close(sr)
                        sock.close()
                        _sandbox(job, fds, sw)
                        os._exit(1)
                    os.close(sw)
                    for fd in fds:
                        os.close(fd)
                    running[pid] = dict(job, t0=time.monotonic())
                    status[sr] = (pid, job, b"")
                elif job["op"] == "kill":
                    for pid, j in running.items():
                        if j["key"] == job["key"]:
                            _kill(pid, j)
                elif job["op"] == "release":
                    if job.get("mode") != "none":
                        for uid in job.get("uids", []):
                            kill_uid(uid)
                    if job["subwork"] in mounted and job.get("mode") == "full":
                        try:
                            umount(job["subwork"])
                        except OSError:
                            pass
                    mounted.discard(job["subwork"])
            else:
                pid, job, got = status[r]
                chunk = os.read(r, 4096)
                if chunk:
                    status[r] = (pid, job, got + chunk)
                    continue
                os.close(r)
                del status[r]
                text = got.decode(errors="replace")
                ok = text.startswith("ok")
                reply({"op": "setup", "key": job["key"], "ok": ok, "cpu": text[3:] if ok else "",
                       "error": "" if ok else (text[6:] or "the sandbox died while it was being built")})
        _reap(running, reply)
    for sub in mounted:
        try:
            umount(sub)
        except OSError:
            pass


def _kill(pid: int, job: dict) -> None:
    """End one sandbox. In full mode its PID namespace dies with its first process (setsid or not), and
    the ranks of a submission share a uid, so the uid-wide kill waits for ``release``."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if job["limits"]["mode"] == "uid":
        kill_uid(job["uid"])


def _reap(running: dict[int, dict], reply) -> None:
    now = time.monotonic()
    for pid, job in running.items():  # a safety net: the grader ends sandboxes itself, well before this
        if now - job["t0"] > job["lifetime"] and not job.get("_late"):
            job["_late"] = True
            _kill(pid, job)
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        job = running.pop(pid, None)
        if job is not None:
            _kill(pid, job)
            reply({"op": "exit", "key": job["key"], "status": os.waitstatus_to_exitcode(st)})


class SetupFailed(RuntimeError):
    """The sandbox could not be built (reported by trusted code, never by the student's)."""


class Zygote:
    """The grader's handle: ``spawn(...)`` waits for the sandbox's set-up report; ``kill``; ``release``."""

    def __init__(self, mode: str) -> None:
        import subprocess

        self.mode = mode
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = ("import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
                "from scaleoutai.grading.sandbox import _zygote_main; _zygote_main(int(sys.argv[2]), sys.argv[3])")
        self.roots = import_roots()
        self._proc = subprocess.Popen([sys.executable, "-P", "-c", boot, json.dumps(self.roots), str(theirs.fileno()),
                                       mode], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, cwd="/",
                                      env=ZYGOTE_ENV)
        theirs.close()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._setup: dict[str, dict] = {}
        self.exits: dict[str, int] = {}
        self._dead = False
        self._reader = threading.Thread(target=self._read, daemon=True, name="zygote-reader")
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._dead = True
                    self._cond.notify_all()
                    return
                msg = json.loads(data)
                (self._setup if msg["op"] == "setup" else self.exits)[msg["key"]] = msg if msg["op"] == "setup" \
                    else msg["status"]
                self._cond.notify_all()

    def spawn(self, key: str, folder: str, socks: list[socket.socket], uid: int, subwork: str, limits: Limits,
              cpu: int | None, report: bool, lifetime: float) -> str:
        """Fork a sandbox whose ranks talk on ``socks`` and work in ``subwork/folder``; returns how its
        CPU is confined."""
        job = {"op": "spawn", "key": key, "uid": uid, "subwork": subwork, "work": f"{subwork}/{folder}",
               "root": f"{subwork}/.root-{key}", "limits": asdict(limits), "cpu": cpu, "report": report,
               "roots": self.roots, "lifetime": lifetime}
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(job).encode()], [s.fileno() for s in socks])
        for s in socks:
            s.close()
        with self._cond:
            if not self._cond.wait_for(lambda: key in self._setup or self._dead, timeout=60):
                raise SetupFailed("the sandbox did not report within 60 s")
            if self._dead:
                raise RuntimeError("the grader's sandbox process (zygote) died; rerun to resume the batch")
            msg = self._setup.pop(key)
        if not msg["ok"]:
            raise SetupFailed(msg["error"])
        return msg["cpu"]

    def kill(self, key: str) -> None:
        with self._lock:
            self._sock.send(json.dumps({"op": "kill", "key": key}).encode())

    def release(self, subwork: str, uids: list[int]) -> None:
        """Drop a submission's working folders and end every process left under its uids."""
        with self._lock:
            self._sock.send(json.dumps({"op": "release", "subwork": subwork, "mode": self.mode,
                                        "uids": uids}).encode())

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self._proc.wait()
        self._sock.close()


def _zygote_main(fd: int, mode: str) -> None:
    libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a killed grader takes its sandboxes along
    try:
        if mode == "full":  # working folders and sandbox roots mounted here stay out of the host's view
            check(libc().unshare(CLONE_NEWNS), "unshare")
            mount(None, "/", None, MS_REC | MS_PRIVATE)
        import numpy  # noqa: F401
        try:
            import torch  # noqa: F401 - one import for every rank of the batch
        except ImportError:  # pragma: no cover
            pass
        from scaleoutai.cluster import _worker, process  # noqa: F401
        zygote_loop(socket.socket(fileno=fd))
    finally:
        os._exit(0)
