"""A throwaway redis-server for Chapter 9: free port, temporary directory, no persistence, always stopped.

    with redis_server() as server:
        client = server.client()
"""
from __future__ import annotations

import ctypes
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..cluster.procs import free_port, kill, stop

INSTALL_HINT = ("redis-server is not installed: run `bash environments/data/install-ci.sh` as root, "
                "or install the redis-server package of your distribution")


def _die_with_parent() -> None:
    # Linux: SIGKILL the server when the process that started it dies (a kernel stopped after a failed
    # cell, a killed test run), so no redis-server outlives its notebook.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover - not Linux
        pass


@dataclass
class RedisServer:
    """A running redis-server: its process, port and working directory."""

    proc: subprocess.Popen
    port: int
    workdir: str

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)


def start_redis(workdir: str, timeout: float = 10.0) -> RedisServer:
    """Start ``redis-server --port <free> --save "" --appendonly no --dir workdir``; wait for PING."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_die_with_parent)
    server = RedisServer(proc, port, workdir)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with status {proc.returncode} on port {port}")
            try:
                if server.client().ping():
                    return server
            except redis.exceptions.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server did not answer PING on port {port} within {timeout} s")
            time.sleep(0.05)
    except BaseException:
        kill([proc])
        raise


def stop_redis(server: RedisServer) -> None:
    """SIGTERM, then SIGKILL after 5 s: nothing is left running."""
    stop([server.proc], grace=5.0)


@contextmanager
def redis_server(workdir: str | None = None) -> Iterator[RedisServer]:
    """A redis-server for the ``with`` block, in ``workdir`` or a temporary directory removed after."""
    tmp = tempfile.mkdtemp(prefix="redis-") if workdir is None else None
    server = start_redis(workdir or tmp)
    try:
        yield server
    finally:
        stop_redis(server)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
