"""Chapter 2: logical time. Lamport clocks order events; vector clocks decide happened-before exactly.

Happened-before (->) is the smallest relation with: a -> b if a precedes b on the same rank, or a is
the send of a message and b its receive; and transitivity. Lamport: a -> b implies L(a) < L(b) (not
conversely). Vector clocks: a -> b if and only if V(a) <= V(b) elementwise and V(a) != V(b).

    causal_order(script)    the naive reference: build the event graph and take its transitive closure
    run_clocks(script)      the distributed way: every rank keeps clocks, messages carry them

A script gives each rank a list of events: ("local",), ("send", dst) or ("recv", src).
Every event (local, send, receive) is one tick of the rank's own clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..cluster import Comm

__all__ = ["LamportClock", "VectorClock", "happened_before", "concurrent", "ClockEvent", "clock_worker",
           "run_clocks", "causal_order", "check_script", "plot_spacetime"]

Event = tuple  # ("local",) | ("send", dst) | ("recv", src)


class LamportClock:
    """One counter per rank: tick on every event; on receive, jump past the sender: max(mine, theirs) + 1."""

    def __init__(self) -> None:
        self.time = 0

    def tick(self) -> int:
        self.time += 1
        return self.time

    def send(self) -> int:
        """Tick, and return the timestamp that travels with the message."""
        return self.tick()

    def receive(self, stamp: int) -> int:
        self.time = max(self.time, int(stamp)) + 1
        return self.time


class VectorClock:
    """K counters per rank; entry j counts the events of rank j that this rank knows have happened."""

    def __init__(self, rank: int, size: int):
        if not 0 <= rank < size:
            raise ValueError(f"rank={rank} is not in 0..{size - 1}")
        self.rank = rank
        self.v = np.zeros(size, dtype=np.int64)

    def tick(self) -> np.ndarray:
        self.v[self.rank] += 1
        return self.v.copy()

    def send(self) -> np.ndarray:
        """Tick, and return a copy of the vector that travels with the message."""
        return self.tick()

    def merge(self, other: np.ndarray) -> np.ndarray:
        """Elementwise max with a received vector (what this rank now knows), without ticking."""
        other = np.asarray(other, dtype=np.int64)
        if other.shape != self.v.shape:
            raise ValueError(f"vector clocks of different sizes: {self.v.shape} vs {other.shape}")
        np.maximum(self.v, other, out=self.v)
        return self.v.copy()

    def receive(self, other: np.ndarray) -> np.ndarray:
        """Merge, then tick: the receive is a new event of this rank."""
        self.merge(other)
        return self.tick()


def happened_before(a: np.ndarray, b: np.ndarray) -> bool:
    """a -> b  iff  a <= b in every entry and a != b (vector timestamps of two events)."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all(a <= b) and np.any(a < b))


def concurrent(a: np.ndarray, b: np.ndarray) -> bool:
    """a || b: neither happened before the other (and they are different events)."""
    return not happened_before(a, b) and not happened_before(b, a) and not np.array_equal(a, b)


@dataclass(frozen=True)
class ClockEvent:
    """One event of a run: its rank, index on that rank, kind, peer, and both timestamps."""

    rank: int
    index: int
    kind: str
    peer: int | None
    lamport: int
    vector: tuple[int, ...]


def check_script(script: Sequence[Sequence[Event]]) -> int:
    """Validate a script; return K. Every send needs a matching recv (same pair, same count)."""
    K = len(script)
    if K < 1:
        raise ValueError("a script needs at least one rank: a list of event lists")
    sends: dict[tuple[int, int], int] = {}
    recvs: dict[tuple[int, int], int] = {}
    for r, events in enumerate(script):
        for i, ev in enumerate(events):
            kind = ev[0] if isinstance(ev, (tuple, list)) and ev else None
            if kind == "local" and len(ev) == 1:
                continue
            if kind in ("send", "recv") and len(ev) == 2 and isinstance(ev[1], int) and 0 <= ev[1] < K \
                    and ev[1] != r:
                table = sends if kind == "send" else recvs
                pair = (r, ev[1]) if kind == "send" else (ev[1], r)
                table[pair] = table.get(pair, 0) + 1
                continue
            raise ValueError(f"rank {r} event {i} is {ev!r}: use ('local',), ('send', dst) or ('recv', src) "
                             f"with a peer in 0..{K - 1} other than {r}")
    if sends != recvs:
        bad = sorted(set(sends.items()) ^ set(recvs.items()))
        raise ValueError(f"sends and receives do not match per (sender, receiver) pair: {bad}")
    return K


def clock_worker(comm: Comm, script: Sequence[Sequence[Event]], payload_size: int = 1) -> list[ClockEvent]:
    """Run this rank's part of ``script``; each message is [payload..., lamport, vector...] as int64."""
    lam, vec = LamportClock(), VectorClock(comm.rank, comm.size)
    out = []
    for i, ev in enumerate(script[comm.rank]):
        kind, peer = ev[0], (ev[1] if len(ev) > 1 else None)
        if kind == "local":
            lt, vt = lam.tick(), vec.tick()
        elif kind == "send":
            lt, vt = lam.send(), vec.send()
            payload = np.full(payload_size, comm.rank, dtype=np.int64)  # the application's data
            comm.send(np.concatenate([payload, [lt], vt]), peer)
        else:
            msg = comm.recv(peer)
            stamp, their_v = msg[payload_size], msg[payload_size + 1:]
            lt, vt = lam.receive(stamp), vec.receive(their_v)
        out.append(ClockEvent(comm.rank, i, kind, peer, int(lt), tuple(int(t) for t in vt)))
    return out


def run_clocks(script: Sequence[Sequence[Event]], backend: str = "sim", trace: bool = False,
               timeout: float = 60.0) -> tuple[list[list[ClockEvent]], Any]:
    """Run ``script`` on a cluster of K = len(script) ranks; return each rank's events and the RunResult."""
    from .. import cluster

    K = check_script(script)
    res = cluster.run(clock_worker, K, backend=backend, args=([list(map(tuple, s)) for s in script],),
                      trace=trace, timeout=timeout, quiet=True)
    return res.values, res


def causal_order(script: Sequence[Sequence[Event]]) -> dict[tuple[int, int], set[tuple[int, int]]]:
    """Reference happened-before without clocks: for each event (rank, index), the set of events it precedes.

    Edges: program order on each rank, and the n-th send r->s to the n-th recv of s from r (FIFO links).
    """
    check_script(script)
    succ: dict[tuple[int, int], list[tuple[int, int]]] = {}
    pending: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for r, events in enumerate(script):
        for i, ev in enumerate(events):
            succ[(r, i)] = [(r, i + 1)] if i + 1 < len(events) else []
            if ev[0] == "send":
                pending.setdefault((r, ev[1]), []).append((r, i))
    for r, events in enumerate(script):
        for i, ev in enumerate(events):
            if ev[0] == "recv":
                succ[pending[(ev[1], r)].pop(0)].append((r, i))
    after: dict[tuple[int, int], set[tuple[int, int]]] = {}

    def reach(e: tuple[int, int]) -> set[tuple[int, int]]:
        if e not in after:
            found: set[tuple[int, int]] = set()
            stack = list(succ[e])
            while stack:
                x = stack.pop()
                if x not in found:
                    found.add(x)
                    stack.extend(succ[x])
            after[e] = found
        return after[e]

    for e in succ:
        reach(e)
    return after


def plot_spacetime(events: list[list[ClockEvent]], ax: Any = None, show: str = "vector") -> Any:
    """Space-time diagram: one horizontal line per rank, events as dots labelled with their clock."""
    import matplotlib.pyplot as plt

    K = len(events)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.9 * K + 1.2))
    # x position: Lamport time, a valid topological order of the events
    pos = {(e.rank, e.index): (e.lamport, e.rank) for evs in events for e in evs}
    sends: dict[tuple[int, int], list[ClockEvent]] = {}
    for evs in events:
        for e in evs:
            if e.kind == "send":
                sends.setdefault((e.rank, e.peer), []).append(e)
    for r in range(K):
        xs = [pos[(e.rank, e.index)][0] for e in events[r]] or [0]
        ax.plot([0.5, max(xs) + 0.5], [r, r], color="lightgray", zorder=0)
    for evs in events:
        for e in evs:
            x, y = pos[(e.rank, e.index)]
            color = {"local": "tab:gray", "send": "tab:blue", "recv": "tab:orange"}[e.kind]
            ax.scatter([x], [y], color=color, zorder=3)
            label = str(list(e.vector)) if show == "vector" else str(e.lamport)
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7)
            if e.kind == "recv":
                s = sends[(e.peer, e.rank)].pop(0)
                ax.annotate("", xy=(x, y), xytext=pos[(s.rank, s.index)],
                            arrowprops=dict(arrowstyle="->", color="tab:blue", lw=0.8))
    ax.set_yticks(range(K), [f"rank {r}" for r in range(K)])
    ax.invert_yaxis()
    ax.set_xlabel("Lamport time")
    ax.set_title(f"space-time diagram ({show} clocks on each event)")
    return ax
