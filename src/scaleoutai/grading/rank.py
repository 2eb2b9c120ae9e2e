"""Runs inside one sandboxed rank: execute the student's cells, then serve the grader's cases.

The process holds a single channel to the grader and nothing else: no inputs on disk, no peer to talk
to. For each case the grader sends this rank's own arguments; ``comm.send``/``comm.recv`` become
requests on the channel, and the grader's side (``hub``) moves the bytes, keeps the simulated clock,
counts them and injects faults. Nothing here decides a score: the grader treats every frame as hostile.
"""
from __future__ import annotations

import io
import math
import os
import sys
import traceback
from typing import Any

import numpy as np

from scaleoutai.cluster.core import Communicator, PeerCrashedError

from .channel import Channel

STDOUT_CAP = 64 * 1024
ARRAY_CAP = 16 * 1024 * 1024


class _Crashed(BaseException):
    """The grader injected a crash into this rank: unwind (a BaseException, like the simulator's)."""


class _Aborted(BaseException):
    """The grader ended the case (another rank failed, a deadlock, the time limit)."""


class _Capped(io.TextIOBase):
    """A stdout that keeps the first STDOUT_CAP characters in memory and drops the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n = 0

    def write(self, s: str) -> int:
        room = STDOUT_CAP - self.n
        if room > 0:
            self.parts.append(s[:room])
            self.n += min(len(s), room)
        return len(s)

    def writable(self) -> bool:
        return True

    def text(self) -> str:
        return "".join(self.parts)


class GraderComm(Communicator):
    """The communicator of a graded rank: every message goes through the grader, who counts it.

    ``comm.stats`` counts locally for the student's own use; the grade uses the grader's figures.
    """

    backend = "sim"

    def __init__(self, ch: Channel, rank: int, size: int):
        super().__init__(rank, size)
        self._ch = ch
        self._dead: type[BaseException] | None = None

    def _reply(self, want: str) -> tuple[dict, list[np.ndarray]]:
        if self._dead:
            raise self._dead
        head, arrays = self._ch.recv()
        if head["op"] == "crashed":
            self._dead = _Crashed
        elif head["op"] != want and head["op"] != "peer_crashed":
            self._dead = _Aborted
        if self._dead:
            raise self._dead
        return head, arrays

    def _send(self, arr: np.ndarray, dst: int) -> None:
        if self._dead:
            raise self._dead
        self._ch.send({"op": "send", "dst": dst}, [arr])
        self._count_send(arr.nbytes)

    def _recv(self, src: int) -> np.ndarray:
        self._ch.send({"op": "recv", "src": src})
        head, arrays = self._reply("data")
        if head["op"] == "peer_crashed":
            raise PeerCrashedError(self.rank, src)
        self._count_recv(arrays[0].nbytes)
        return arrays[0]

    def barrier(self) -> None:
        self._ch.send({"op": "barrier"})
        self._reply("ok")

    def compute(self, seconds: float) -> None:
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"compute(seconds={seconds!r}): give a finite number of seconds >= 0")
        self._ch.send({"op": "compute", "seconds": float(seconds)})

    @property
    def clock(self) -> float:
        """Not readable while a lab is graded: after a barrier a rank's clock is the latest of all clocks,
        so reading it would pass a value between ranks outside any counted message."""
        raise RuntimeError("comm.clock is not available while a lab is graded: a rank learns about the others "
                           "only from the messages it receives (the grader still keeps the simulated time)")


def short_error(exc: BaseException, tb: str = "", limit: int = 1500) -> str:
    if isinstance(exc, SystemExit):
        text = f"called sys.exit({exc.code!r}); a notebook for grading must not exit"
    else:
        text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError):
        text += " (the submission ran out of its memory limit)"
    return (text + ("\n" + tb[-limit:] if tb else ""))[:limit * 2]


def student_frames(tb: str) -> str:
    """The lines of a traceback that point into the student's cells, not into the communicator."""
    lines = tb.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if "<cell" in line:
            keep += [x.strip() for x in lines[i:i + 2]]
    return ("\n" + "\n".join(keep[-6:])) if keep else ""


def record(value: Any) -> tuple[dict, list[np.ndarray]]:
    """A return value as (meta, [array]) when it is numbers; otherwise only its type."""
    meta: dict[str, Any] = {"type": type(value).__name__[:40]}
    if isinstance(value, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - ragged lists and the like
            meta["note"] = f"not convertible to an array: {type(exc).__name__}"
            return meta, []
        if arr.dtype.hasobject or arr.dtype.kind not in "biufc":
            meta["note"] = f"holds {arr.dtype} values, not numbers"
        elif arr.nbytes > ARRAY_CAP:
            meta["note"] = f"too large to hand back ({arr.nbytes} bytes)"
        else:
            meta["stored"] = True
            return meta, [arr]
    return meta, []


def exec_cells(cells: list[dict], ns: dict) -> list[dict]:
    """Execute code cells in order like a notebook run with errors allowed; report each failure."""
    report = []
    for i, cell in enumerate(cells):
        if cell.get("skip"):
            continue
        try:
            exec(compile(cell["source"], f"<cell {i + 1}>", "exec"), ns)  # noqa: S102 - the sandbox's job
        except BaseException as exc:  # noqa: BLE001 - SystemExit included
            report.append({"cell": i + 1, "error": short_error(exc, traceback.format_exc(limit=-2), 600)})
    return report


def _run_case(ch: Channel, ns: dict, case: dict, arrays: list[np.ndarray]) -> None:
    fn = ns.get(case["fn"])
    if not callable(fn):
        ch.send({"op": "error", "text": f"the notebook defines no function named {case['fn']}()"})
        return
    args, it = [], iter(arrays)
    for spec in case["args"]:
        args.append(spec["value"] if spec.get("kind") == "value" else next(it))
    rank, size = int(case.get("rank", 0)), int(case.get("size", 1))
    if case.get("fsize_kill") is not None:  # the grader kills this writer at a chosen byte (lab 18)
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGXFSZ})  # blocked, it would only fail the write
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(case["fsize_kill"]),) * 2)
    try:
        if case["mode"] == "call":
            value = fn(*args)
        elif case["mode"] == "gloo":
            from scaleoutai.cluster._worker import call_rank, join_group

            comm = join_group(rank, size, int(case["port"]), float(case["timeout"]), host_store=True)
            value = call_rank(fn, comm, tuple(args))
        else:
            value = fn(GraderComm(ch, rank, size), *args)
    except (_Crashed, _Aborted):
        return
    except BaseException as exc:  # noqa: BLE001 - SystemExit included
        ch.send({"op": "error", "text": short_error(exc) + student_frames(traceback.format_exc())})
        return
    meta, out = record(value)
    ch.send({"op": "done", "meta": meta}, out)


def serve(fd: int, report_output: bool) -> None:
    """The rank's life: cells once, then cases until the grader closes the channel."""
    import socket

    ch = Channel(socket.socket(fileno=fd))
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # C-level library noise never reaches the student's feedback
        os.dup2(null, target)
    out = _Capped()
    sys.stdout = sys.stderr = out
    _, (code,) = ch.recv()
    import json

    cells = json.loads(code.tobytes().decode())
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    errors = exec_cells(cells, ns)
    if not report_output:
        out.parts.clear()
    ch.send({"op": "cells", "errors": errors, "log": out.text() if report_output else ""})
    while True:
        head, arrays = ch.recv()
        if head["op"] == "case":
            _run_case(ch, ns, head, arrays)
        elif head["op"] == "exit":
            break
    sys.stdout.flush()
    os._exit(0)
