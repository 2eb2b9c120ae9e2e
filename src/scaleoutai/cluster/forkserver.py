"""A warm server that forks the ranks of ``cluster.run(..., backend="process")``.

A fresh interpreter per rank spends about 2.5 s of CPU importing torch before it sends a byte; on a
laptop or a 2-core CI machine that start-up, not the algorithm, dominated every small run. The server
is started once per driving process with torch, numpy and the worker preloaded, and forks each rank
(as multiprocessing's forkserver does): a rank then starts in milliseconds, in its own session (so
``procs.kill`` ends its whole group), with the driver's environment, working folder and an output pipe
the driver relays. Ranks set PR_SET_PDEATHSIG, and the server exits when the driver's end of its socket
closes, so a dead driver leaves no rank behind. ``SCALEOUT_FORKSERVER=0`` starts ranks as fresh
interpreters instead (the old path, also the fallback wherever the server cannot start).
"""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from typing import IO, Any

_SERVER: dict[int, "_Server | None"] = {}  # by driver pid: a forked driver needs a server of its own
_LOCK = threading.Lock()  # the handles of running ranks
_CREATE = threading.Lock()  # one server per driver, however many threads call cluster.run


class Forked:
    """The driver's handle on one forked rank, shaped like the ``subprocess.Popen`` the launchers use."""

    def __init__(self, pid: int, stdout: IO[bytes]):
        self.pid, self.stdout, self.returncode = pid, stdout, None
        self._done = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


class _Server:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        code = ("import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
                "from scaleoutai.cluster.forkserver import serve; serve(int(sys.argv[2]))")
        self.proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path), str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self.sock, self.file = ours, ours.makefile("rb")
        self.pids: "queue.Queue[int]" = queue.Queue()
        self.children: dict[int, Forked] = {}
        self.early: dict[int, int] = {}  # exits reported before the driver registered the handle
        self.request = threading.Lock()  # a request and its pid reply travel as a pair
        self.alive = True
        if self._read() != {"ready": True}:
            raise OSError("the rank server did not start")
        threading.Thread(target=self._listen, daemon=True, name="scaleout-forkserver").start()

    def _read(self) -> dict[str, Any]:
        line = self.file.readline()
        if not line:
            raise OSError("the rank server closed its socket")
        return json.loads(line)

    def _listen(self) -> None:
        try:
            while True:
                msg = self._read()
                if "pid" in msg:
                    self.pids.put(msg["pid"])
                elif "exit" in msg:
                    with _LOCK:
                        child = self.children.pop(msg["exit"], None)
                        if child is None:
                            self.early[msg["exit"]] = msg["code"]
                    if child is not None:
                        child._exited(msg["code"])
        except (OSError, ValueError):
            self.alive = False
            self.pids.put(-1)
            with _LOCK:
                for child in self.children.values():
                    child._exited(-9)
                self.children.clear()

    def start(self, argv: list[str], env: dict[str, str]) -> Forked:
        r, w = os.pipe()
        try:
            request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode() + b"\n"
            with self.request:
                socket.send_fds(self.sock, [request], [w])
                pid = self.pids.get(timeout=60)
        except (OSError, queue.Empty):  # a dead or hung server: the caller starts a fresh interpreter
            pid = -1
        finally:
            os.close(w)
        if pid < 0:
            os.close(r)
            self.alive = False
            raise OSError("the rank server could not fork")
        child = Forked(pid, os.fdopen(r, "rb"))
        with _LOCK:
            self.children[pid] = child
            code = self.early.pop(pid, None)
        if code is not None:
            child._exited(code)
        return child


def start_rank(argv: list[str], env: dict[str, str]) -> Forked | None:
    """Fork ``python -m scaleoutai.cluster._worker *argv`` from the warm server; None if there is none."""
    if os.environ.get("SCALEOUT_FORKSERVER", "1") == "0" or not hasattr(socket, "send_fds"):
        return None
    with _CREATE:
        if os.getpid() not in _SERVER:
            try:
                _SERVER[os.getpid()] = _Server()
            except (OSError, ValueError):
                _SERVER[os.getpid()] = None
        server = _SERVER[os.getpid()]
    if server is None or not server.alive:
        return None
    try:
        return server.start(argv, env)
    except OSError:
        return None


def _child(request: dict[str, Any], fd: int) -> None:
    os.setsid()  # a session of its own: killing the group ends the rank and what it started
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import torch

    try:  # the server imported torch before this rank's OMP_NUM_THREADS existed
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    except ValueError:  # a nested OpenMP setting such as "4,2": torch's own default then
        pass
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    sys.argv = ["-m", *request["argv"]]
    from scaleoutai.cluster._worker import main

    os._exit(main(request["argv"]) or 0)


def serve(fd: int) -> None:
    """The server's loop: fork a rank per request, report each rank's exit status; end with the driver."""
    import select
    import signal

    import numpy  # noqa: F401 - preloaded for every rank
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    import cloudpickle  # noqa: F401

    from scaleoutai.cluster import _worker, process  # noqa: F401

    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()  # SIGCHLD writes a byte here: an ended rank wakes the loop, no polling
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.sendall(b'{"ready": true}\n')
    buf, pending = b"", []  # a request may arrive in pieces; its descriptor comes with the first
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        while True:  # reap every rank that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.sendall(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        if sock not in ready:
            continue
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        if not data:
            os._exit(0)  # the driver is gone: the ranks die with us (PR_SET_PDEATHSIG)
        buf += data
        pending += fds
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            out = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    sock.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(json.loads(line), out)
                finally:
                    os._exit(1)
            os.close(out)
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
