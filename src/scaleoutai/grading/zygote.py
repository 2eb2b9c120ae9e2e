"""The grader's handle on the zygote: a clean, warm process that forks every sandbox of a batch.

It is a fresh interpreter started with a minimal environment (nothing of the grader's variables exists
anywhere in its memory), before any hidden test is imported. It preloads numpy, torch and the
communicator once; ``sandbox.zygote_loop`` serves the requests this handle sends.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import asdict

from .jail import CLONE_NEWNS, MS_PRIVATE, MS_REC, PR_SET_PDEATHSIG, Limits, check, import_roots, libc, mount

ZYGOTE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR", "PYTHONDONTWRITEBYTECODE": "1",
              "MPLBACKEND": "Agg", "HOME": "/nonexistent"}


class SetupFailed(RuntimeError):
    """The sandbox could not be built (reported by trusted code, never by the student's)."""


class Zygote:
    """The grader's handle: ``spawn(...)`` waits for the sandbox's set-up report; ``kill``; ``release``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = ("import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
                "from scaleoutai.grading.zygote import _zygote_main; _zygote_main(int(sys.argv[2]), sys.argv[3])")
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
        from .sandbox import zygote_loop

        zygote_loop(socket.socket(fileno=fd))
    finally:
        os._exit(0)
