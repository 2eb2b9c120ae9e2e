"""The contract net protocol (Chapter 27; Smith 1980): a manager allocates tasks to contractors by auction.

Rank 0 is the manager, contractor c runs on rank c + 1 and alone knows its capability (position, speed),
so only it can price a task: cost(t, c) = ||p_c - q_t|| + work_t / speed_c. One *phase* allocates the
pending tasks one after another (announce to every live contractor, collect one bid from each, award to
the lowest), then lets every contractor execute what it won (``comm.compute(cost)``) and report one
result per task. A bid is cost + load * (work already won this phase), or a refusal (inf) once a
contractor holds ``capacity`` tasks. A contractor that crashes (its recv raises PeerCrashedError on the
manager) loses the tasks it had not reported; they are re-announced to the survivors in the next phase,
so every task completes exactly once. With unbounded capacity and load = 0 the greedy auction is the
optimal assignment; otherwise ``optimal_assignment`` (linear_sum_assignment) is the yardstick.

The rest of the chapter: ``dai_csp`` (graphs, the ABT and DBA agents), ``dai_rounds`` (those agents over
the communicator in synchronous rounds), ``dai_blackboard`` (a blackboard system), ``dai_ray`` (this
protocol on Ray actors).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm

__all__ = ["ANNOUNCE", "BID", "AWARD", "GO", "RESULT", "STOP", "make_market", "cost_matrix", "make_bid",
           "task_value", "reference_contract_net", "optimal_assignment", "crash_mid_task", "contract_net",
           "run_contract_net"]

ANNOUNCE, BID, AWARD, GO, RESULT, STOP = range(6)  # message kinds: the first number of every message


def make_market(n_tasks: int, n_contractors: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tasks (T, 3) = x, y, work in [1, 3]; contractors (C, 3) = x, y, speed in [0.5, 2]; unit square."""
    if n_tasks < 0 or n_contractors < 1:
        raise ValueError(f"a market needs n_tasks >= 0 and n_contractors >= 1, got {n_tasks}, {n_contractors}")
    rng = np.random.default_rng(seed)
    tasks = np.column_stack([rng.random((n_tasks, 2)), rng.uniform(1.0, 3.0, n_tasks)])
    contractors = np.column_stack([rng.random((n_contractors, 2)), rng.uniform(0.5, 2.0, n_contractors)])
    return tasks, contractors


def _cost(task: np.ndarray, me: np.ndarray) -> float:
    return float(np.hypot(task[0] - me[0], task[1] - me[1]) + task[2] / me[2])


def cost_matrix(tasks: np.ndarray, contractors: np.ndarray) -> np.ndarray:
    """costs[t, c] = ||p_c - q_t|| + work_t / speed_c, exactly as contractor c prices task t."""
    return np.array([[_cost(t, c) for c in contractors] for t in tasks]).reshape(len(tasks), len(contractors))


def make_bid(cost: float, held_work: float, held: int, capacity: int | None, load: float) -> float:
    """A contractor's bid: cost + load * held_work, or inf (a refusal) when it already holds ``capacity``."""
    if capacity is not None and held >= capacity:
        return float("inf")
    return cost + load * held_work


def task_value(task: np.ndarray) -> float:
    """What executing a task produces (any deterministic function of the task will do)."""
    return float(np.sin(7.0 * task[0]) * task[2] + task[1])


def _check(tasks: np.ndarray, capacity: int | None, load: float) -> None:
    if np.ndim(tasks) != 2 or np.shape(tasks)[1] != 3:
        raise ValueError(f"tasks must be a (T, 3) array of x, y, work, got shape {np.shape(tasks)}")
    if capacity is not None and capacity < 1:
        raise ValueError(f"capacity must be None (unbounded) or >= 1 task per phase, got {capacity}")
    if load < 0:
        raise ValueError(f"load must be >= 0 (a busy contractor bids higher, never lower), got {load}")


def reference_contract_net(tasks: np.ndarray, contractors: np.ndarray, capacity: int | None = None,
                           load: float = 0.0, crash: dict[int, int] | None = None) -> dict[str, Any]:
    """The greedy sequential auction on one machine, phase by phase; ``crash={c: n}`` stops contractor c at
    its (n+1)-th message (bids, then results), as ``Faults(crash={c + 1: n})`` does to rank c + 1."""
    _check(tasks, capacity, load)
    costs, C = cost_matrix(tasks, contractors), len(contractors)
    crash = dict(crash or {})
    sent, alive = [0] * C, list(range(C))
    pending, done_by, awards, phase = list(range(len(tasks))), {}, [], 0

    def speaks(c: int) -> bool:  # contractor c sends one message, unless this is where it crashes
        if c in crash and sent[c] >= crash[c]:
            alive.remove(c)
            return False
        sent[c] += 1
        return True

    while pending and alive:
        held: dict[int, list[int]] = {c: [] for c in alive}
        work = dict.fromkeys(alive, 0.0)
        for t in pending:
            bids = {c: make_bid(costs[t, c], work[c], len(held[c]), capacity, load) for c in list(alive) if speaks(c)}
            finite = [(b, c) for c, b in bids.items() if np.isfinite(b)]
            if finite:
                b, c = min(finite)
                held[c].append(t)
                work[c] += costs[t, c]
                awards.append((phase, t, c, b))
        for c in sorted(held):
            for t in held[c]:
                if c not in alive or not speaks(c):
                    break
                done_by[t] = c
        pending = [t for t in range(len(tasks)) if t not in done_by]
        phase += 1
    return {"done_by": done_by, "awards": awards, "phases": phase, "alive": alive,
            "values": {t: task_value(tasks[t]) for t in done_by}, "sent": sent,
            "total_cost": float(sum(costs[t, c] for t, c in done_by.items()))}


def optimal_assignment(costs: np.ndarray, capacity: int | None = None) -> tuple[dict[int, int], float]:
    """The cheapest allocation with at most ``capacity`` tasks per contractor: linear_sum_assignment on
    each contractor's column repeated ``capacity`` times (T times when unbounded). Returns {t: c}, total."""
    from scipy.optimize import linear_sum_assignment

    T, C = costs.shape
    slots = T if capacity is None else capacity
    if slots * C < T:
        raise ValueError(f"{T} tasks do not fit {C} contractors x capacity {capacity}: raise capacity")
    rows, cols = linear_sum_assignment(np.repeat(costs, slots, axis=1))
    plan = {int(t): int(s) // slots for t, s in zip(rows, cols)}
    return plan, float(sum(costs[t, c] for t, c in plan.items()))


def crash_mid_task(tasks: np.ndarray, contractors: np.ndarray, contractor: int, done: int = 0,
                   capacity: int | None = None, load: float = 0.0) -> cluster.Faults:
    """Faults that crash ``contractor`` (rank contractor + 1) as it reports its (done+1)-th result of the
    first phase: after its bids and ``done`` results, i.e. mid-task, with the work done but not reported."""
    ref = reference_contract_net(tasks, contractors, capacity, load)
    won = sum(1 for p, _, c, _ in ref["awards"] if p == 0 and c == contractor)
    if not 0 <= done < won:
        raise ValueError(f"contractor {contractor} wins {won} tasks in phase 0: choose 0 <= done < {won}")
    return cluster.Faults(crash={contractor + 1: len(tasks) + done})


def contract_net(comm: Comm, tasks: np.ndarray, contractors: np.ndarray, capacity: int | None = None,
                 load: float = 0.0, seconds_per_cost: float = 1e-3) -> dict[str, Any] | None:
    """Per rank: the manager (rank 0) or contractor ``comm.rank - 1``. Chapter 27, Section 4.

    Every message is a float64 array [kind, task, value]. A contractor waits on the manager only; the
    manager waits on one named contractor at a time, so the protocol never needs a receive-from-any.
    """
    if comm.rank > 0:
        return _contractor(comm, tasks, contractors[comm.rank - 1], capacity, load, seconds_per_cost)
    alive, T = list(range(1, comm.size)), len(tasks)
    pending, done_by, values, awards, lost, phase = list(range(T)), {}, {}, [], [], 0
    while pending and alive:
        held: dict[int, list[int]] = {r: [] for r in alive}
        for t in pending:
            for r in alive:
                comm.send(np.array([ANNOUNCE, t, 0.0]), r)
            bids = []
            for r in list(alive):
                try:
                    bids.append((float(comm.recv(r)[2]), r))
                except cluster.PeerCrashedError:
                    alive.remove(r)  # a crash while bidding: what it held this phase is re-announced
                    lost += held.pop(r)
            finite = [(b, r) for b, r in bids if np.isfinite(b)]
            if finite:
                b, r = min(finite)  # lowest bid, then lowest rank
                comm.send(np.array([AWARD, t, b]), r)
                held[r].append(t)
                awards.append((phase, t, r - 1, b))
        for r in alive:
            comm.send(np.array([GO, len(held[r]), 0.0]), r)
        for r in list(alive):
            for k, t in enumerate(held[r]):
                try:
                    _, tt, v = comm.recv(r)
                except cluster.PeerCrashedError:  # crashed mid-task: re-announce what it did not report
                    alive.remove(r)
                    lost += held[r][k:]
                    break
                done_by[int(tt)], values[int(tt)] = r - 1, float(v)
        pending = [t for t in range(T) if t not in done_by]
        phase += 1
    for r in alive:
        comm.send(np.array([STOP, 0, 0.0]), r)
    return {"done_by": done_by, "values": values, "awards": awards, "phases": phase,
            "alive": [r - 1 for r in alive], "reannounced": sorted(set(lost))}


def _contractor(comm: Comm, tasks: np.ndarray, me: np.ndarray, capacity: int | None, load: float,
                seconds_per_cost: float) -> None:
    held: list[int] = []
    work = 0.0
    while True:
        kind, t, _ = comm.recv(0)
        t = int(t)
        if kind == ANNOUNCE:
            comm.send(np.array([BID, t, make_bid(_cost(tasks[t], me), work, len(held), capacity, load)]), 0)
        elif kind == AWARD:
            held.append(t)
            work += _cost(tasks[t], me)
        elif kind == GO:
            for s in held:
                comm.compute(_cost(tasks[s], me) * seconds_per_cost)  # the work itself
                comm.send(np.array([RESULT, s, task_value(tasks[s])]), 0)
            held, work = [], 0.0
        else:
            return None


def run_contract_net(tasks: np.ndarray, contractors: np.ndarray, capacity: int | None = None,
                     load: float = 0.0, faults: cluster.Faults | None = None,
                     network: cluster.Network | None = None, seconds_per_cost: float = 1e-3,
                     timeout: float = 60.0) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: a manager and len(contractors) contractors, K = C + 1 ranks; returns rank 0's record."""
    tasks, contractors = np.asarray(tasks, dtype=np.float64), np.asarray(contractors, dtype=np.float64)
    _check(tasks, capacity, load)
    if np.ndim(contractors) != 2 or contractors.shape[1] != 3 or len(contractors) < 1:
        raise ValueError(f"contractors must be a (C, 3) array of x, y, speed with C >= 1 (the contract net "
                         f"needs K >= 2 ranks: a manager and a contractor), got shape {contractors.shape}")
    res = cluster.run(contract_net, len(contractors) + 1, args=(tasks, contractors),
                      kwargs=dict(capacity=capacity, load=load, seconds_per_cost=seconds_per_cost),
                      faults=faults, network=network, timeout=timeout)
    return res.values[0], res
