"""The grader's end of the network: every rank is a sandbox, every message crosses the grader.

For a simulated case the grader runs ``cluster.run(backend="sim")`` itself, with one proxy thread per
rank: the proxy hands its sandbox that rank's own arguments, then performs each request (send, recv,
barrier, compute) on the grader's simulated communicator. So the alpha-beta clock, the message and
byte counts, the trace, the recorded payloads and the injected faults all live in the grader; nothing
a student's process does can change them, and a rank that never asks for another rank's data never
has it. A "process" case runs the ranks as real processes joined by gloo in one sandbox, graded on
its result. Each rank sandbox lives for the whole submission unless a case ends abnormally.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaleoutai import cluster
from scaleoutai.cluster.sim_comm import _Crash

from .channel import Channel, ChannelClosed, ChannelTimeout, pair
from .checks import MAX_NDIM, Case, Plan, envelope_bytes
from .jail import Limits
from .zygote import SetupFailed, Zygote
from ..cluster import Comm

MAX_MESSAGES, MAX_BYTES = 200_000, 256 << 20  # per case, all ranks together
MAX_REQUESTS = 20_000  # uncounted requests (barrier, compute) per rank and case: each costs the grader work
RANK_HEADER_CAP = 16 << 10  # a rank's request header: op, destination, array spec, an error's text
CELLS_HEADER_CAP = 512 << 10  # the one report of a sandbox's cells: errors and 64 KB of output, escaped
GLOO_PORT = 29500  # the gloo sandbox has a network namespace of its own: no one else holds this port


class StudentError(Exception):
    """The student's function raised; the text is the rank's own short traceback."""


@dataclass
class Outcome:
    """What one case produced, as the grader observed it."""

    meta: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    trace: list = field(default_factory=list)  # cluster.TraceEvent: sender, receiver, bytes, sim time
    messages: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # (src, dst, payload)


@dataclass
class _Returned:
    meta: dict
    arrays: list[np.ndarray]


class SubmissionRun:
    """The sandboxes of one submission: rank sandboxes started on demand, reset after a failure."""

    def __init__(self, zygote: Zygote, tag: str, uids: list[int], cpu: int | None, subwork: str, limits: Limits,
                 cells: list[dict], plan: Plan):
        self.z, self.tag, self.uids, self.cpu, self.subwork = zygote, tag, uids, cpu, subwork
        self.limits, self.cells, self.plan = limits, cells, plan
        self.deadline = time.monotonic() + limits.timeout
        self.ranks: dict[int, tuple[Channel, str]] = {}
        self.cells_report: dict | None = None  # rank 0's first run of the cells
        self.cells_failure = ""  # "exit" or "timeout" when rank 0 never finished its cells
        self.confinement = ""
        self._n = 0

    def _uid(self, r: int) -> int:
        """With namespaces every rank sees only its own root, /proc and network, so the ranks of one
        submission share a uid (files they write to a lab's shared folder stay readable to each other,
        as on a cluster); without them, each rank gets a uid of its own."""
        return self.uids[0] if self.limits.mode == "full" else self.uids[r]

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def _spawn(self, name: str, uid: int, count: int, report: bool) -> tuple[list[Channel], str]:
        """A sandbox of ``count`` ranks; its working folder ``name`` outlives it (a restarted rank finds
        what it wrote before, as a restarted process finds its disk)."""
        self._n += 1
        key = f"{self.tag}-{name}-{self._n}"
        ends = [pair() for _ in range(count)]
        self.confinement = self.z.spawn(key, name, [theirs for _, theirs in ends], uid, self.subwork, self.limits,
                                        self.cpu, report, lifetime=self.limits.timeout + 30)
        chans = [ch for ch, _ in ends]
        code = np.frombuffer(json.dumps(self.cells).encode(), dtype=np.uint8)  # up to the notebook cap
        for ch in chans:
            ch.send({"op": "hello"}, [code])
        return chans, key

    def _cells(self, ch: Channel, first: bool) -> None:
        head, _ = ch.recv(timeout=max(0.1, self.left()), payload_cap=0, header_cap=CELLS_HEADER_CAP)
        if head["op"] != "cells":
            raise ChannelClosed("the sandbox answered out of turn")
        if first:
            errors = head.get("errors") if isinstance(head.get("errors"), list) else []
            self.cells_report = {"errors": errors[:20], "log": str(head.get("log", ""))[:64 * 1024]}

    def ensure(self, count: int) -> list[Channel]:
        """Channels to ranks 0..count-1, starting (and running the cells in) the missing ones."""
        new = {}
        for r in range(count):
            if r not in self.ranks:
                (ch,), key = self._spawn(f"r{r}", self._uid(r), 1, report=r == 0 and self.cells_report is None)
                self.ranks[r] = (ch, key)
                new[r] = ch
        for r, ch in new.items():
            self._cells(ch, first=r == 0 and self.cells_report is None)
        return [self.ranks[r][0] for r in range(count)]

    def reset(self, ranks: range | list[int]) -> None:
        for r in ranks:
            if r in self.ranks:
                ch, key = self.ranks.pop(r)
                self.z.kill(key)
                ch.close()

    def close(self) -> None:
        self.reset(list(self.ranks))
        self.z.release(self.subwork, self.uids)

    def _args(self, case: Case, r: int) -> tuple[list[dict], list[np.ndarray]]:
        specs, arrays = [], []
        for spec in case.args:
            if "value" in spec:
                specs.append({"kind": "value", "value": spec["value"]})
            else:
                key = f"{spec['key']}/{r}" if spec.get("per_rank") else spec["key"]
                specs.append({"kind": "array"})
                arrays.append(self.plan.inputs[key])
        return specs, arrays

    def _message(self, case: Case, r: int, mode: str, **extra: Any) -> tuple[dict, list[np.ndarray]]:
        specs, arrays = self._args(case, r)
        head = {"op": "case", "id": case.id, "fn": case.fn, "mode": mode, "rank": r, "size": case.world_size,
                "args": specs, **extra}
        return head, arrays

    def run(self, case: Case) -> Outcome:
        """Run one case and return what the grader saw; a failure is an Outcome with meta["error"]."""
        timeout = min(case.timeout, self.left())
        if timeout <= 0.2:
            return Outcome({"ok": False, "error": "not run: the submission's time limit was used up"})
        try:
            if case.mode == "call":
                return self._call(case, timeout)
            if case.backend == "process":
                return self._gloo(case, timeout)
            return self._sim(case, timeout)
        except SetupFailed:
            raise
        except ChannelTimeout:
            self.reset(range(case.world_size))
            return Outcome({"ok": False, "error": f"did not finish within {timeout:g} s (an infinite loop, or a "
                                                  f"recv that nobody sends to?)"})
        except ChannelClosed as exc:
            self.reset(range(case.world_size))
            return Outcome({"ok": False, "error": f"the process running your code ended before it returned "
                                                  f"(os._exit, a crash or {_memory(self.limits)}?): {exc}"})

    def _call(self, case: Case, timeout: float) -> Outcome:
        (ch,) = self.ensure(1)
        extra = {"fsize_kill": case.data.get("fsize_kill")} if case.data.get("fsize_kill") is not None else {}
        ch.send(*self._message(case, 0, "call", **extra))
        head, arrays = ch.recv(timeout=timeout, header_cap=RANK_HEADER_CAP)
        if head["op"] == "error":
            return Outcome({"ok": False, "error": str(head.get("text", "failed"))[:3000]})
        if head["op"] != "done":
            raise ChannelClosed("unexpected answer")
        meta, out = _rank_meta(head, arrays, 0)
        return Outcome({"ok": True, "ranks": [meta]}, out)

    def _gloo(self, case: Case, timeout: float) -> Outcome:
        K = case.world_size
        chans, key = self._spawn("gloo", self._uid(len(self.uids) - 1), K, report=False)
        try:
            for ch in chans:
                self._cells(ch, first=False)
            for r, ch in enumerate(chans):
                ch.send(*self._message(case, r, "gloo", port=GLOO_PORT, timeout=timeout))
            deadline = time.monotonic() + timeout
            metas, arrays = [], {}
            for r, ch in enumerate(chans):
                head, got = ch.recv(timeout=max(0.05, deadline - time.monotonic()), header_cap=RANK_HEADER_CAP)
                if head["op"] == "error":
                    return Outcome({"ok": False, "error": f"rank {r} failed: {str(head.get('text', ''))[:3000]}"})
                if head["op"] != "done":
                    raise ChannelClosed("unexpected answer")
                meta, out = _rank_meta(head, got, r)
                metas.append(meta)
                arrays.update(out)
            return Outcome({"ok": True, "ranks": metas}, arrays)
        finally:
            self.z.kill(key)
            for ch in chans:
                ch.close()

    def _sim(self, case: Case, timeout: float) -> Outcome:
        K = case.world_size
        chans = self.ensure(K)
        deadline = time.monotonic() + timeout
        record = bool(case.data.get("record_messages"))
        messages: list[tuple[int, int, np.ndarray]] = []
        sent = [0, 0]  # messages and bytes of this case: what the grader holds for the ranks is bounded

        def proxy(comm: Comm) -> _Returned:
            r = comm.rank
            ch = chans[r]
            ch.send(*self._message(case, r, "spmd"))
            requests = 0
            while True:
                head, arrays = ch.recv(timeout=max(0.05, deadline - time.monotonic()), header_cap=RANK_HEADER_CAP)
                op = head["op"]
                if op == "send":
                    if len(arrays) != 1:
                        raise StudentError("a send carried no array")
                    arr = arrays[0]
                    if arr.ndim > MAX_NDIM:
                        raise StudentError(f"a send of an array with {arr.ndim} dimensions; the graded communicator "
                                           f"carries at most {MAX_NDIM} (reshape it before sending)")
                    wire = pack(arr)  # the header travels, and is counted, like the payload
                    sent[0] += 1
                    sent[1] += wire.nbytes
                    if sent[0] > MAX_MESSAGES or sent[1] > MAX_BYTES:
                        raise StudentError(f"the ranks sent more than {MAX_MESSAGES} messages or {MAX_BYTES >> 20} MB "
                                           f"in one case; look for a send inside a loop that never ends")
                    try:
                        comm.send(wire, head.get("dst"))
                    except _Crash:
                        ch.send({"op": "crashed"})
                        raise
                    if record:
                        messages.append((r, int(head["dst"]), arr))
                elif op == "recv":
                    try:
                        got = comm.recv(head.get("src"))
                    except cluster.PeerCrashedError:
                        ch.send({"op": "peer_crashed"})
                        continue
                    ch.send({"op": "data"}, [unpack(got)])
                elif op in ("barrier", "compute"):
                    requests += 1
                    if requests > MAX_REQUESTS:
                        raise StudentError(f"rank {r} made more than {MAX_REQUESTS} barrier or compute calls in one "
                                           f"case; look for one inside a loop that never ends")
                    if op == "barrier":  # it synchronises the grader's clocks; the rank learns nothing but "done"
                        comm.barrier()
                        ch.send({"op": "ok"})
                        continue
                    s = head.get("seconds")
                    if not (isinstance(s, (int, float)) and math.isfinite(s) and 0 <= s < 1e9):
                        raise StudentError(f"compute(seconds={s!r}) needs a finite number of seconds >= 0")
                    comm.compute(float(s))
                elif op == "done":
                    return _Returned(head.get("meta") if isinstance(head.get("meta"), dict) else {}, arrays)
                elif op == "error":
                    raise StudentError(str(head.get("text", "failed"))[:3000])
                else:
                    raise StudentError(f"the rank sent an unknown request {op[:20]!r}")

        crash = {int(r): int(n) for r, n in case.faults.get("crash", {}).items()}
        try:
            res = cluster.run(proxy, K, backend="sim", faults=cluster.Faults(crash=crash) if crash else None,
                              timeout=timeout, trace=True)
        except cluster.RunTimeout:
            self.reset(range(K))
            return Outcome({"ok": False, "error": f"did not finish within {timeout:g} s (an infinite loop, or a "
                                                  f"recv that nobody sends to?)"})
        except cluster.RankError as exc:
            self.reset(range(K))
            return Outcome({"ok": False, "error": _rank_error(exc, self.limits)})
        except cluster.ClusterError as exc:  # DeadlockError names who waits for whom
            self.reset(range(K))
            return Outcome({"ok": False, "error": str(exc)[:3000]})
        if crash:
            self.reset(range(K))  # crashed ranks' processes are in an unknown state
        metas, arrays = [], {}
        for r, v in enumerate(res.values):
            if isinstance(v, cluster.RankCrashed):
                metas.append({"type": "crashed", "crashed": True})
                continue
            meta, out = _rank_meta({"meta": v.meta}, v.arrays, r)
            metas.append(meta)
            arrays.update(out)
        meta = {"ok": True, "ranks": metas, "stats": [s.as_dict() for s in res.stats], "sim_time": res.sim_time}
        return Outcome(meta, arrays, res.trace or [], messages)


def pack(arr: np.ndarray) -> np.ndarray:
    """One message on the grader's simulated network: its header (dtype, ndim, shape) then its bytes.

    The simulator charges the whole wire, so ``bytes_sent`` and the alpha-beta time count the header:
    a shape cannot carry data for free (``checks.envelope_bytes``)."""
    head = np.zeros(1 + arr.ndim, dtype="<i8")
    code = arr.dtype.str.encode().ljust(4, b" ")
    head[0] = int.from_bytes(code, "little") | (arr.ndim << 32)
    head[1:] = arr.shape
    wire = np.empty(head.nbytes + arr.nbytes, dtype=np.uint8)
    wire[:head.nbytes] = head.view(np.uint8)
    if arr.nbytes:
        wire[head.nbytes:] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    assert wire.nbytes == envelope_bytes(arr.ndim) + arr.nbytes
    return wire


def unpack(wire: np.ndarray) -> np.ndarray:
    """The array ``pack`` put on the wire (the grader packed it, so it is well-formed)."""
    first = int(wire[:8].view("<i8")[0])
    ndim, code = first >> 32, (first & 0xFFFFFFFF).to_bytes(4, "little").decode().strip()
    shape = tuple(int(n) for n in wire[8:8 * (1 + ndim)].view("<i8"))
    return wire[8 * (1 + ndim):].view(np.dtype(code)).reshape(shape).copy()


def _rank_meta(head: dict, arrays: list[np.ndarray], r: int) -> tuple[dict, dict[str, np.ndarray]]:
    """The trusted part of a rank's answer: its value's type name and, if it is numbers, the array."""
    raw = head.get("meta") if isinstance(head.get("meta"), dict) else {}
    meta = {"type": str(raw.get("type", "?"))[:40]}
    if raw.get("note"):
        meta["note"] = str(raw["note"])[:80]
    if raw.get("stored") and len(arrays) == 1:
        meta.update(stored=True, dtype=arrays[0].dtype.str, shape=list(arrays[0].shape))
        return meta, {f"r{r}": arrays[0]}
    return meta, {}


def _memory(limits: Limits) -> str:
    return (f"the memory limit of {limits.memory_mb} MB per process and {limits.submission_mb} MB for the "
            f"whole submission")


def _rank_error(exc: cluster.RankError, limits: Limits) -> str:
    cause = exc.__cause__
    if isinstance(cause, StudentError):
        return f"rank {exc.rank} failed: {cause}"
    if isinstance(cause, ChannelClosed) and "over the cap" in str(cause):
        return f"rank {exc.rank} sent the grader a frame it refuses: {cause}"
    if isinstance(cause, ChannelClosed):
        return f"rank {exc.rank}'s process ended before it returned (os._exit, a crash or {_memory(limits)}?)"
    if isinstance(cause, ChannelTimeout):
        return f"rank {exc.rank} did not finish in time (an infinite loop, or a recv that nobody sends to?)"
    return f"rank {exc.rank} failed: {exc.summary}"[:3000]

