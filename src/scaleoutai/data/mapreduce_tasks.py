"""MapReduce with map tasks, a master and speculative backup tasks (Chapter 6, Section 6).

The records are cut into M contiguous map tasks (M > K). Rank 0 is the master (as in Dean & Ghemawat,
OSDI 2004); ranks 1..K-1 are map workers. Each worker heartbeats the master every ``heartbeat``
seconds of its own clock (its status: idle, running task t at progress p, or done with t) and the
master answers every heartbeat: run task t, go on, abort, keep or drop an output, wait, or stop.
The master reads the heartbeats round-robin; since every worker, a straggler included, beats once per
interval, the master is never stuck behind a slow worker for more than one beat.

Backups (the LATE rule of Zaharia et al., OSDI 2008, one copy at most): when an idle worker w asks for
work and no task is left unstarted, the master estimates each running task's finish from its last
heartbeat, finish = t_beat + elapsed (1 - p) / p, and starts a copy of the latest-finishing one on w if
    finish > now + margin * (w's seconds per nominal second) * C_t,     C_t = map_seconds * |task t|.
The first copy to finish is kept, the other is aborted at its next heartbeat or its output dropped,
so every task's pairs enter the shuffle exactly once. Reducers receive them in task order, hence in
record order: the result equals ``reference_mapreduce`` exactly, with or without backups, for any K.
"""
from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, block_bounds
from .mapreduce import Mapper, Reducer, _group, decode, encode, partition_of

IDLE, RUNNING, DONE = 0, 1, 2                 # worker -> master: status of a heartbeat
NONE, GO, ABORT, KEEP, DROP = 0, 1, 2, 3, 4   # master -> worker: verdict on the task the beat was about
WAIT, RUN, STOP = 0, 1, 2                     # master -> worker: what an idle worker does next


@dataclass
class TaskStats:
    """One rank's view of a task-based job; rank 0's holds the whole schedule.

    schedule: (task, worker, start, end, "primary" | "backup", "won" | "lost" | "aborted") per copy.
    wasted_seconds: nominal map work spent on copies whose output was not used (the price of backups).
    """

    tasks: int = 0
    backups_launched: int = 0
    backups_won: int = 0
    wasted_seconds: float = 0.0
    map_phase_end: float = 0.0
    tasks_kept: int = 0
    heartbeats: int = 0
    bytes_sent: int = 0
    schedule: list[tuple[int, int, float, float, str, str]] = field(default_factory=list)


def _now(comm: Comm, t0: float) -> float:
    """The rank's clock: simulated seconds, or wall seconds on real processes."""
    return comm.clock if hasattr(comm, "clock") else time.perf_counter() - t0


def _map_task(records: Sequence[Any], mapper: Mapper, combiner: Reducer | None, R: int, K: int
              ) -> list[list]:
    """Map (and combine) one task's records; its pairs bucketed by destination rank p mod K."""
    pairs = [pair for record in records for pair in mapper(record)]
    if combiner is not None:
        pairs = [(key, combiner(key, values)) for key, values in _group(pairs).items()]
    buckets: list[list] = [[] for _ in range(K)]
    for key, value in pairs:
        buckets[partition_of(key, R) % K].append((key, value))
    return buckets


class _Master:
    """Rank 0's scheduling state; ``handle`` turns one heartbeat into one reply."""

    def __init__(self, sizes: list[int], map_seconds: float, backups: bool, margin: float, stats: TaskStats):
        self.cost = [map_seconds * n for n in sizes]
        self.todo = list(range(len(sizes)))           # tasks never started, in order
        self.done: dict[int, int] = {}                # task -> worker whose copy won
        self.copies: dict[int, dict[int, list]] = {}  # task -> {worker: [start, progress, elapsed, t_beat, kind]}
        self.rate: dict[int, list[float]] = {}        # worker -> [elapsed, nominal] over its finished copies
        self.backups, self.margin, self.stats = backups, margin, stats

    def _close(self, task: int, w: int, end: float, outcome: str) -> None:
        start, progress, _, _, kind = self.copies[task].pop(w)
        self.stats.schedule.append((task, w, start, end, kind, outcome))
        if outcome != "won":
            self.stats.wasted_seconds += self.cost[task] * (1.0 if outcome == "lost" else progress)

    def _backup_for(self, w: int, now: float) -> int | None:
        elapsed, nominal = self.rate.get(w, [0.0, 0.0])
        if not self.backups or nominal <= 0:
            return None  # no finished task yet: nothing to judge w's speed by
        best, best_finish = None, -np.inf
        for task, running in sorted(self.copies.items()):
            if task in self.done or len(running) != 1 or w in running:
                continue
            _, p, el, t_beat, _ = next(iter(running.values()))
            if p <= 0:
                continue
            finish = t_beat + el * (1.0 - p) / p
            if finish > now + self.margin * elapsed / nominal * self.cost[task] and finish > best_finish:
                best, best_finish = task, finish
        return best

    def handle(self, w: int, beat: np.ndarray) -> np.ndarray:
        ts, status, task, progress, elapsed = float(beat[0]), int(beat[1]), int(beat[2]), float(beat[3]), float(beat[4])
        verdict, idle = NONE, status == IDLE
        if status == RUNNING:
            if task in self.done:
                verdict, idle = ABORT, True
                self._close(task, w, ts, "aborted")
            else:
                verdict = GO
                self.copies[task][w][1:4] = [progress, elapsed, ts]
        elif status == DONE:
            idle, won = True, task not in self.done
            verdict = KEEP if won else DROP
            if won:
                self.done[task] = w
                r = self.rate.setdefault(w, [0.0, 0.0])
                r[0] += elapsed
                r[1] += self.cost[task]
                if self.copies[task][w][4] == "backup":
                    self.stats.backups_won += 1
            self._close(task, w, ts, "won" if won else "lost")
        op, nxt = WAIT, -1
        if idle:
            if self.todo:
                op, nxt = RUN, self.todo.pop(0)
                self.copies[nxt] = {w: [ts, 0.0, 0.0, ts, "primary"]}
            elif len(self.done) == len(self.cost):
                op = STOP
                self.stats.map_phase_end = max(self.stats.map_phase_end, ts)
            else:
                backup = self._backup_for(w, ts)
                if backup is not None:
                    op, nxt = RUN, backup
                    self.copies[nxt][w] = [ts, 0.0, 0.0, ts, "backup"]
                    self.stats.backups_launched += 1
        return np.array([verdict, op, nxt], dtype=np.float64)


def _worker(comm: Comm, tasks: list[Sequence[Any]], cost: list[float], h: float, t0: float,
            run: Any) -> dict[int, list[list]]:
    """A map worker: heartbeat every h seconds of its own clock until the master says stop."""
    kept: dict[int, list[list]] = {}
    task, done, start, out, factor = -1, 0.0, 0.0, None, 8.0  # a short first slice measures the real factor
    status = IDLE
    while True:
        now = _now(comm, t0)
        p = done / cost[task] if task >= 0 and cost[task] > 0 else 0.0
        comm.send(np.array([now, status, task, p, now - start], dtype=np.float64), 0)
        verdict, op, nxt = (int(v) for v in comm.recv(0))
        if verdict == KEEP:
            kept[task] = out
        if verdict in (ABORT, KEEP, DROP):
            task, out = -1, None
        if task < 0:
            if op == STOP:
                return kept
            if op == RUN:
                task, done, start = nxt, 0.0, _now(comm, t0)
        if task < 0:
            comm.compute(h / factor)  # idle: wait one heartbeat (compute is the only clock a rank has)
            status = IDLE
            continue
        # Work for one heartbeat: a slice that takes h on this rank's clock, or what is left of the task.
        left = cost[task] - done
        last = left <= h / factor * (1 + 1e-9)
        piece = left if last else h / factor
        before = _now(comm, t0)
        comm.compute(piece)
        if piece > 0:
            factor = max(1e-9, (_now(comm, t0) - before) / piece)
        done += piece
        if last:
            out = run(tasks[task])
            status = DONE
        else:
            status = RUNNING


def run_mapreduce_tasks(comm: Comm, records: Sequence[Any], mapper: Mapper, reducer: Reducer,
                        combiner: Reducer | None = None, partitions: int | None = None,
                        tasks: int | None = None, map_seconds: float = 0.0, reduce_seconds: float = 0.0,
                        backups: bool = True, heartbeat: float | None = None, margin: float = 1.25
                        ) -> tuple[dict[Hashable, Any], TaskStats]:
    """MapReduce with M map tasks scheduled by rank 0 and optional speculative backups.

    Returns (this rank's reduced keys, its TaskStats). ``tasks`` M defaults to 4 (K - 1), at most the
    number of records; task t is ``block_bounds(len(records), M)[t]`` and costs ``map_seconds`` per
    record of compute. ``heartbeat`` defaults to an eighth of a mean task. Partition p is reduced on
    rank p mod K (rank 0 reduces too). With K = 1 rank 0 runs every task itself.
    """
    K, r = comm.size, comm.rank
    R = K if partitions is None else int(partitions)
    if R < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    if map_seconds < 0 or reduce_seconds < 0 or margin < 1:
        raise ValueError("need map_seconds >= 0, reduce_seconds >= 0 and margin >= 1")
    M = min(len(records), 4 * max(K - 1, 1) if tasks is None else int(tasks))
    if tasks is not None and int(tasks) < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    bounds = block_bounds(len(records), M) if M > 0 else []
    parts = [records[lo:hi] for lo, hi in bounds]
    cost = [map_seconds * len(p) for p in parts]
    h = (sum(cost) / M / 8 if M else 0.0) if heartbeat is None else float(heartbeat)
    if h < 0:
        raise ValueError(f"heartbeat must be >= 0 seconds, got {heartbeat}")
    stats = TaskStats(tasks=M)
    if K > 1:
        comm.barrier()  # a common time origin, so that the master may compare the workers' heartbeats
    t0 = time.perf_counter()

    def run(part: Sequence[Any]) -> list[list]:
        return _map_task(part, mapper, combiner, R, K)

    kept: dict[int, list[list]] = {}
    if K == 1:
        for t, part in enumerate(parts):
            start = _now(comm, t0)
            comm.compute(cost[t])
            kept[t] = run(part)
            stats.schedule.append((t, 0, start, _now(comm, t0), "primary", "won"))
        stats.map_phase_end = _now(comm, t0)
    elif r == 0:
        master, active = _Master([len(p) for p in parts], map_seconds, backups, margin, stats), list(range(1, K))
        while active:  # round-robin: one heartbeat from each live worker per round
            for w in list(active):
                reply = master.handle(w, comm.recv(w))
                stats.heartbeats += 1
                comm.send(reply, w)
                if int(reply[1]) == STOP:
                    active.remove(w)
    else:
        kept = _worker(comm, parts, cost, h, t0, run)
    stats.tasks_kept = len(kept)
    # The shuffle: every kept task's bucket for rank d, tagged with its task id, in one all-to-all.
    outgoing = [encode([(t, kept[t][d]) for t in sorted(kept)]) for d in range(K)]
    stats.bytes_sent = sum(b.nbytes for d, b in enumerate(outgoing) if d != r)
    received = all_to_all(comm, outgoing)
    by_task = sorted((item for src in range(K) for item in decode(received[src])), key=lambda item: item[0])
    incoming = [pair for _, pairs in by_task for pair in pairs]  # task order = record order
    comm.compute(reduce_seconds * len(incoming))
    return {key: reducer(key, values) for key, values in _group(incoming).items()}, stats
