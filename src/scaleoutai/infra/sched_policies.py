"""Gang scheduling, dominant resource fairness and gang placement of bundles (Chapter 33, Sections 2 and 4).

Gang scheduling here is *time-sliced co-scheduling* (Ousterhout 1982; Feitelson and Rudolph 1992): an
Ousterhout matrix of at most ``mpl`` rows, each row a set of jobs that fits the machine side by side;
the rows take turns, and all processes of a job run in the same slot. We take the quantum to zero
(processor sharing between rows): with R non-empty rows every running job progresses at rate
(1 - switch_cost) / R (switch_cost = 0 when R = 1). Then a virtual clock V with dV/dt = rate orders
completions: a job admitted at V0 ends when V = V0 + runtime, so one heap of virtual end times suffices.

``place_bundles`` is the other meaning of "gang": *all-or-nothing allocation* of a group of resource
bundles to nodes, as Ray placement groups do (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD): either every
bundle gets a node or the group stays pending.

Dominant resource fairness (Ghodsi et al., NSDI 2011): user i's dominant share is max_r used_ir / cap_r;
DRF equalises dominant shares by progressive filling, giving one task at a time to the user with the
lowest dominant share whose next task still fits.
"""
from __future__ import annotations

import heapq
import math
from typing import Sequence

import numpy as np

from ..datasets import JobTrace
from .scheduling import Schedule

__all__ = ["simulate_gang", "drf_allocate", "reference_drf_lp", "dominant_shares", "place_bundles",
           "STRATEGIES", "launch_gang", "run_gang_launch"]

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def simulate_gang(trace: JobTrace, capacity: int, mpl: int = 4, switch_cost: float = 0.0) -> Schedule:
    """Time-sliced gang scheduling: FIFO admission into the first matrix row with room (at most ``mpl``)."""
    if mpl < 1 or not 0 <= switch_cost < 1:
        raise ValueError("need mpl >= 1 rows and 0 <= switch_cost < 1")
    if len(trace) and int(trace.size.max()) > capacity:
        raise ValueError(f"a job asks for {int(trace.size.max())} nodes on a {capacity}-node machine")
    sub, size, run = trace.submit.tolist(), trace.size.tolist(), trace.runtime.tolist()
    n = len(sub)
    start, end, row = [math.nan] * n, [math.nan] * n, [-1] * n
    used: list[int] = []                                # nodes held in each row
    jobs_in: list[int] = []                             # jobs in each row
    heap: list[tuple[float, int]] = []                  # (virtual end, job)
    queue: list[int] = []
    now = v = 0.0
    i = 0
    tl_t, tl_b, tl_q = [], [], []

    def rows() -> int:
        return sum(1 for c in jobs_in if c)

    def rate() -> float:
        r = rows()
        return 0.0 if r == 0 else (1.0 - (switch_cost if r > 1 else 0.0)) / r

    while i < n or heap:
        t_arr = sub[i] if i < n else math.inf
        r = rate()
        t_end = now + (heap[0][0] - v) / r if heap else math.inf
        if t_end <= t_arr:
            now, v = t_end, heap[0][0]                  # land exactly on the virtual end: no drift
        else:
            v += (t_arr - now) * r
            now = t_arr
        while heap and heap[0][0] <= v:
            _, j = heapq.heappop(heap)
            end[j] = now
            used[row[j]] -= size[j]
            jobs_in[row[j]] -= 1
        while i < n and sub[i] <= now:
            queue.append(i)
            i += 1
        while queue:                                    # strict FIFO admission
            j = queue[0]
            k = next((k for k in range(len(used)) if used[k] + size[j] <= capacity), None)
            if k is None and len(used) < mpl:
                used.append(0)
                jobs_in.append(0)
                k = len(used) - 1
            if k is None:
                break
            queue.pop(0)
            used[k] += size[j]
            jobs_in[k] += 1
            row[j], start[j] = k, now
            heapq.heappush(heap, (v + run[j], j))
        r = rows()
        tl_t.append(now)
        tl_b.append(sum(used) / r if r else 0.0)       # nodes busy on average over the time slices
        tl_q.append(len(queue))
    return Schedule("gang", capacity, np.array(start), np.array(end), np.full(n, math.nan), 0,
                    (np.array(tl_t), np.array(tl_b), np.array(tl_q)),
                    {"row": np.array(row), "mpl": mpl, "switch_cost": switch_cost})


def _drf_input(capacity: Sequence[float], demands: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    cap = np.asarray(capacity, dtype=float)
    d = np.atleast_2d(np.asarray(demands, dtype=float))
    if cap.ndim != 1 or np.any(cap <= 0) or d.shape[1] != cap.size or np.any(d < 0) or np.any(d.sum(1) <= 0):
        raise ValueError("capacity: one positive amount per resource; demands: one row per user, one "
                         "non-negative amount per resource, not all zero")
    return cap, d


def dominant_shares(capacity: Sequence[float], demands: Sequence[Sequence[float]],
                    tasks: Sequence[float]) -> np.ndarray:
    """s_i = tasks_i max_r demand_ir / cap_r."""
    cap, d = _drf_input(capacity, demands)
    return np.asarray(tasks, dtype=float) * (d / cap).max(axis=1)


def drf_allocate(capacity: Sequence[float], demands: Sequence[Sequence[float]],
                 max_tasks: Sequence[int] | None = None) -> np.ndarray:
    """Progressive filling: give the next task to the lowest dominant share (ties: lower index) while it fits.

    A user whose next task no longer fits (or who reached ``max_tasks``) drops out; the others go on, so
    the result is Pareto efficient: no user could run one more task.
    """
    cap, d = _drf_input(capacity, demands)
    n = len(d)
    limit = np.full(n, np.iinfo(np.int64).max) if max_tasks is None else np.asarray(max_tasks, dtype=np.int64)
    dom = (d / cap).max(axis=1)
    tasks = np.zeros(n, dtype=np.int64)
    used = np.zeros_like(cap)
    heap = [(0.0, i) for i in range(n) if limit[i] > 0]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        if np.all(used + d[i] <= cap * (1 + 1e-12)):
            used += d[i]
            tasks[i] += 1
            if tasks[i] < limit[i]:
                heapq.heappush(heap, (tasks[i] * dom[i], i))
    return tasks


def reference_drf_lp(capacity: Sequence[float], demands: Sequence[Sequence[float]]) -> np.ndarray:
    """Continuous DRF by water-filling with linear programs (scipy): raise the common dominant share t of
    the unfrozen users, x_i = t / dom_i tasks, subject to sum_i x_i d_i <= cap; freeze every user that needs
    a resource the LP saturated; repeat. Returns the (fractional) tasks per user."""
    from scipy.optimize import linprog

    cap, d = _drf_input(capacity, demands)
    dom = (d / cap).max(axis=1)
    x = np.zeros(len(d))
    frozen = np.zeros(len(d), dtype=bool)
    while not frozen.all():
        base = x @ d
        per_t = (d[~frozen] / dom[~frozen, None]).sum(axis=0)      # resource use per unit of t
        t_now = float(dom[~frozen][0] * x[~frozen][0])
        res = linprog(c=[-1.0], A_ub=per_t[:, None], b_ub=cap - base + per_t * t_now, bounds=[(t_now, None)])
        if res.status != 0:
            raise RuntimeError(f"DRF water-filling LP failed: {res.message}")
        t = float(res.x[0])
        x[~frozen] = t / dom[~frozen]
        full = (x @ d) >= cap * (1 - 1e-9)
        newly = ~frozen & (d[:, full] > 0).any(axis=1)
        if not newly.any():
            raise RuntimeError("DRF water-filling made no progress")
        frozen |= newly
    return x


def _fits(free: dict[str, float], b: dict[str, float]) -> bool:
    return all(free.get(k, 0.0) >= v - 1e-12 for k, v in b.items())


def _take(free: dict[str, float], b: dict[str, float]) -> None:
    for k, v in b.items():
        free[k] = free.get(k, 0.0) - v


def place_bundles(bundles: Sequence[dict[str, float]], nodes: Sequence[dict[str, float]],
                  strategy: str = "PACK") -> list[int] | None:
    """All-or-nothing gang placement: the node index of every bundle, or None (the group stays pending).

    STRICT_PACK: all bundles on one node (the first that holds their sum). PACK: that node if there is
    one, else each bundle on the first node already used that fits, else on the unused node with the
    most free resources. STRICT_SPREAD: every bundle on a different node (a bipartite matching).
    SPREAD: each bundle on the node that fits with the fewest bundles so far (ties: lower index).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: use one of {STRATEGIES}")
    free = [dict(nd) for nd in nodes]
    if strategy in ("STRICT_PACK", "PACK"):
        total: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0.0) + v
        one = next((i for i, f in enumerate(free) if _fits(f, total)), None)
        if one is not None:
            return [one] * len(bundles)
        if strategy == "STRICT_PACK":
            return None
    if strategy == "STRICT_SPREAD":
        match: dict[int, int] = {}                      # node -> bundle (Kuhn's augmenting paths)

        def augment(b: int, seen: set[int]) -> bool:
            for nd in range(len(free)):
                if nd not in seen and _fits(free[nd], bundles[b]):
                    seen.add(nd)
                    if nd not in match or augment(match[nd], seen):
                        match[nd] = b
                        return True
            return False
        if not all(augment(b, set()) for b in range(len(bundles))):
            return None
        return [nd for b in range(len(bundles)) for nd, bb in match.items() if bb == b]
    out: list[int] = []
    count = [0] * len(free)
    for b in bundles:
        fit = [i for i in range(len(free)) if _fits(free[i], b)]
        if not fit:
            return None
        if strategy == "PACK":
            used = [i for i in fit if count[i]]
            i = used[0] if used else max(fit, key=lambda i: (sum(free[i].values()), -i))
        else:
            i = min(fit, key=lambda i: (count[i], i))
        _take(free[i], b)
        count[i] += 1
        out.append(i)
    return out


# ---- all-or-nothing gang launch over the communicator (Section 6) ----
_RESERVE, _GO, _ABORT, _ACK, _DONE = 1.0, 2.0, 3.0, 4.0, 5.0


def launch_gang(comm, runtime: float, coordinator: int = 0) -> dict:
    """Launch one gang job on every other rank, all or nothing: a two-phase start.

    Phase 1: the coordinator asks each node in turn (rank order, so it always knows whom it waits for)
    to reserve itself and waits for that node's ack. Phase 2, only if every node acked: GO to all, each
    runs ``comm.compute(runtime)`` and reports DONE. A node that crashed (PeerCrashedError) or an ack
    that was lost (MessageLostError) aborts the gang: every node that can still hear gets ABORT and
    releases, so no node ever runs a piece of a gang that did not start whole. The coordinator's own
    commands are assumed delivered (losing one would need a retransmit layer, Chapter 2).
    A node lost after GO fails the running gang ("failed": the whole job must be requeued, as Slurm
    does when a node of a job dies). Returns, on the coordinator, {"status": "ran"|"aborted"|"failed", "failed": rank|None, "t": clock};
    on a node, {"status": "ran"|"released"}.
    """
    from ..cluster import MessageLostError, PeerCrashedError

    if runtime < 0 or not 0 <= coordinator < comm.size:
        raise ValueError("launch_gang needs runtime >= 0 and a coordinator rank inside the world")
    if comm.rank != coordinator:
        while True:
            cmd = float(comm.recv(coordinator)[0])
            if cmd == _RESERVE:
                comm.send(np.array([_ACK]), coordinator)
            elif cmd == _GO:
                comm.compute(runtime)
                comm.send(np.array([_DONE]), coordinator)
                return {"status": "ran"}
            else:
                return {"status": "released"}
    nodes = [r for r in range(comm.size) if r != coordinator]
    failed, dead = None, None
    for r in nodes:
        comm.send(np.array([_RESERVE]), r)
        try:
            comm.recv(r)
        except PeerCrashedError:
            failed = dead = r
            break
        except MessageLostError:            # the node is alive and thinks it reserved: it must hear ABORT
            failed = r
            break
    if failed is not None:
        for r in nodes:
            if r != dead:
                comm.send(np.array([_ABORT]), r)
        return {"status": "aborted", "failed": failed, "t": comm.clock}
    for r in nodes:
        comm.send(np.array([_GO]), r)
    for r in nodes:                        # a node lost mid-run fails the whole gang: requeue it whole
        try:
            comm.recv(r)
        except (PeerCrashedError, MessageLostError):
            failed = r if failed is None else failed
    return {"status": "ran" if failed is None else "failed", "failed": failed, "t": comm.clock}


def run_gang_launch(world_size: int, runtime: float = 1.0, faults=None, network=None, timeout: float = 30.0):
    """Driver: ``launch_gang`` on ``world_size`` ranks (rank 0 coordinates); returns the RunResult."""
    from .. import cluster

    if world_size < 2:
        raise ValueError("a gang launch needs a coordinator and at least one node: world_size >= 2")
    return cluster.run(launch_gang, world_size, args=(runtime,), faults=faults, network=network, timeout=timeout)
