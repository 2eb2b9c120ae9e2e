"""Process helpers every launcher and tool shares: free ports and ending whole process groups.

Each child is started with ``start_new_session=True`` so that it leads a process group: killing the
group also ends what it started (a Jupyter kernel, a torchrun agent's workers, slurmd's steps).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
from typing import Sequence


def free_ports(n: int = 1) -> list[int]:
    """n distinct TCP ports the OS considers free on loopback now (all held until all are chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One free loopback port (the rendezvous binds it a moment later)."""
    return free_ports(1)[0]


def _signal_groups(procs: Sequence[subprocess.Popen], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):  # not a group leader (or gone): the process itself
                p.send_signal(sig)


def kill(procs: Sequence[subprocess.Popen]) -> None:
    """SIGKILL each still-running process's whole group (children included) and reap it."""
    _signal_groups(procs, signal.SIGKILL)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
            pass


def stop(procs: Sequence[subprocess.Popen], grace: float = 10.0) -> None:
    """SIGTERM each process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
    _signal_groups(procs, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            kill([p])
