"""The zygote's side: serve spawn/kill/release requests, and build each sandbox it forks.

The zygote (see ``zygote.py`` for the grader's handle) forks every sandbox of a batch. ``spawn`` forks
a sandbox whose ranks each get one channel descriptor (passed with SCM_RIGHTS by the grader), ``kill``
ends one, ``release`` drops a submission's working folders and processes. A sandbox reports a
successful set-up on a pipe that is closed before student code runs, so a student cannot forge a
set-up failure. In full mode the zygote lives in a private mount namespace, and each submission's
working folders are a size-capped tmpfs that only its sandboxes see.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import time

from .cgroups import confine_cpu, join_submission_groups, make_submission_groups, remove_submission_groups
from .jail import (MS_BIND, MS_NODEV, MS_NOSUID, PR_SET_PDEATHSIG, Limits, enter_jail, kill_uid, libc, mount, umount,
                   unshare_all)

UID_BASE = 61000  # uids 61000.. are the sandboxes' uids; no passwd entry is needed to run as one
UIDS_PER_SLOT = 16  # one uid per rank: ranks of one submission cannot read or signal each other


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
        cpu = confine_cpu(job.get("cpu"))
        if job.get("groups") and not join_submission_groups(job["groups"]):
            raise OSError("the submission's memory and pids cgroups are gone")
        cpu += " memory=cgroup" if job.get("groups") else " memory=rlimit"
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


def _prepare_work(job: dict, mounted: dict[str, str]) -> None:
    """The submission's cgroups and tmpfs (once) and this sandbox's folder in it, owned by its uid."""
    sub = job["subwork"]
    if sub not in mounted:
        os.makedirs(sub, mode=0o711, exist_ok=True)
        lim = job["limits"]
        if lim["mode"] != "none":  # before the tmpfs: its pages are charged to the writer's group
            mounted[sub] = os.path.basename(sub) if make_submission_groups(
                os.path.basename(sub), lim["submission_mb"], lim["nproc"]) else ""
        else:
            mounted[sub] = ""
        if lim["mode"] == "full":
            mount("tmpfs", sub, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0711,size={lim['disk_mb']}m")
    job["groups"] = mounted[sub]
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
            _bind_into_student_folder(common, target)
        elif not os.path.lexists(target):
            os.symlink(common, target)


def _bind_into_student_folder(src: str, target: str) -> None:
    """Bind ``src`` at ``target``, a path in a folder the student owns: never through a link the student
    planted there (as root, a followed link could mount over any path of the zygote)."""
    if os.path.islink(target) or (os.path.lexists(target) and not os.path.isdir(target)):
        os.unlink(target)
    os.makedirs(target, exist_ok=True)
    fd = os.open(target, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)  # pins the folder just checked
    try:
        mount(src, f"/proc/self/fd/{fd}", None, MS_BIND)
    finally:
        os.close(fd)


def zygote_loop(sock: socket.socket) -> None:
    """Serve spawn/kill/release requests; answer {op: setup|exit, key, ...}."""
    from .rank import serve  # noqa: F401 - warm: the sandbox's code is loaded before any fork

    running: dict[int, dict] = {}  # pid -> job
    status: dict[int, tuple[int, dict, bytes]] = {}  # status pipe -> (pid, job, bytes so far)
    mounted: dict[str, str] = {}  # a submission's working folder -> its cgroups' tag ("" without)
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
                    groups = mounted.pop(job["subwork"], "")
                    if groups:
                        _reap(running, reply)  # the killed sandboxes leave the groups once reaped
                        remove_submission_groups(groups)
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
    for sub, groups in mounted.items():
        try:
            umount(sub)
        except OSError:
            pass
        if groups:
            remove_submission_groups(groups)


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


