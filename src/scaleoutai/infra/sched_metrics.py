"""What a schedule is worth, and whether it is legal (Chapter 33, Sections 4 and 7).

Per job j: wait_j = start_j - submit_j, response_j = end_j - submit_j and bounded slowdown
bsld_j = max(1, response_j / max(runtime_j, tau)) (tau = 10 s keeps one-second jobs from dominating;
Feitelson et al. 1997). Machine: makespan, utilisation = sum_j size_j runtime_j / (capacity x span),
fragmentation = (node-seconds idle while some job waits) / (capacity x span). Fairness: Jain's index
J(x) = (sum x)^2 / (n sum x^2), 1 when all equal, 1/n when one gets everything (Jain, Chiu and Hawe 1984).

``reference_simulate`` is the single-machine reference of the event simulator: it steps time one unit at a
time on integer traces and recomputes every decision from scratch, with no heap and no shortcuts.
"""
from __future__ import annotations

import math

import numpy as np

from ..datasets import JobTrace
from .scheduling import Schedule

__all__ = ["jain_index", "metrics", "busy_profile", "violations", "reference_simulate"]


def jain_index(x: np.ndarray | list[float]) -> float:
    """(sum x)^2 / (n sum x^2) for x >= 0; 1.0 for an all-zero vector (nobody is treated worse)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0 or np.any(x < 0):
        raise ValueError("Jain's index needs a non-empty vector of non-negative values")
    sq = float(np.sum(x * x))
    return 1.0 if sq == 0 else float(np.sum(x)) ** 2 / (x.size * sq)


def metrics(trace: JobTrace, sched: Schedule, tau: float = 10.0) -> dict[str, float]:
    """Makespan, waits, response, bounded slowdown, utilisation, fragmentation, Jain over users' slowdowns."""
    wait = sched.start - trace.submit
    resp = sched.end - trace.submit
    bsld = np.maximum(1.0, resp / np.maximum(trace.runtime, tau))
    t0, t1 = float(trace.submit.min()), float(sched.end.max())
    span = max(t1 - t0, 1e-12)
    t, busy, queued = sched.timeline
    dt = np.diff(np.append(t, t1))
    idle_waiting = float(np.sum((sched.capacity - busy) * (queued > 0) * dt))
    per_user = [float(bsld[trace.user == u].mean()) for u in np.unique(trace.user)]
    return {"makespan": t1 - t0, "mean_wait": float(wait.mean()), "p95_wait": float(np.percentile(wait, 95)),
            "max_wait": float(wait.max()), "mean_response": float(resp.mean()), "mean_bsld": float(bsld.mean()),
            "utilisation": float(np.sum(trace.size * trace.runtime)) / (sched.capacity * span),
            "fragmentation": idle_waiting / (sched.capacity * span), "jain_users_bsld": jain_index(per_user)}


def busy_profile(trace: JobTrace, sched: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in use just after each start/end time (ends first at equal times): the sweep the checks use."""
    times = np.concatenate([sched.start, sched.end])
    delta = np.concatenate([trace.size, -trace.size])
    order = np.lexsort((delta, times))               # at a tie the release (negative) comes first
    return times[order], np.cumsum(delta[order])


def violations(trace: JobTrace, sched: Schedule, atol: float = 1e-9) -> list[str]:
    """Every broken invariant of Section 4, as sentences (an empty list: the schedule is legal)."""
    out = []
    s, e = sched.start, sched.end
    if np.any(np.isnan(s)) or np.any(np.isnan(e)):
        return [f"{int(np.sum(np.isnan(e)))} jobs never ran"]
    if np.any(s < trace.submit - atol):
        out.append("a job started before it was submitted")
    gang = sched.policy == "gang"
    ran = e - s
    if gang and np.any(ran < trace.runtime - atol):
        out.append("a gang-scheduled job finished faster than its runtime")
    if not gang and not np.allclose(ran, trace.runtime, rtol=0, atol=atol):
        out.append("a job did not run exactly once for its runtime")
    if gang:
        rows = sched.extra["row"]
        for r in np.unique(rows):
            sub = trace.subset(rows == r)
            sub_s = Schedule("gang-row", sched.capacity, s[rows == r], e[rows == r], s[rows == r])
            if busy_profile(sub, sub_s)[1].max() > sched.capacity:
                out.append(f"gang row {r} holds more nodes than the machine has")
        if len(np.unique(rows)) > sched.extra["mpl"]:
            out.append("more gang rows than the multiprogramming level")
    elif len(s) and busy_profile(trace, sched)[1].max() > sched.capacity:
        out.append("more nodes in use than the machine has")
    if sched.policy == "fifo" and np.any(np.diff(s) < -atol):
        out.append("FIFO started a job before an earlier arrival")
    if sched.policy in ("easy", "conservative"):
        if np.any(s > sched.reserved + atol):
            out.append("a job started after its first reservation")
        if sched.reservation_increases:
            out.append(f"a reservation moved later {sched.reservation_increases} times")
    if sched.policy == "conservative" and np.any(np.isnan(sched.reserved)):
        out.append("conservative backfill left a job without a reservation")
    return out


def reference_simulate(trace: JobTrace, capacity: int, policy: str = "easy") -> tuple[np.ndarray, np.ndarray]:
    """FIFO or EASY by stepping time 1 unit at a time (integer traces): (start, end), no event queue."""
    if policy not in ("fifo", "easy"):
        raise ValueError("the stepping reference covers 'fifo' and 'easy'")
    if not all(np.array_equal(a, np.round(a)) for a in (trace.submit, trace.runtime, trace.estimate)):
        raise ValueError("the stepping reference needs whole-unit submit, runtime and estimate")
    n = len(trace)
    start, end = np.full(n, math.nan), np.full(n, math.nan)
    t, arrived, queue = 0, 0, []
    while np.isnan(end).any():
        while arrived < n and trace.submit[arrived] <= t:
            queue.append(arrived)
            arrived += 1

        def free() -> int:
            running = (start <= t) & (end > t)
            return capacity - int(trace.size[running].sum())
        while queue and trace.size[queue[0]] <= free():
            j = queue.pop(0)
            start[j], end[j] = t, t + trace.runtime[j]
        if policy == "easy" and queue:
            for j in list(queue[1:]):
                running = np.flatnonzero((start <= t) & (end > t))
                ends = sorted((start[r] + trace.estimate[r], trace.size[r]) for r in running)
                avail, need, shadow = free(), trace.size[queue[0]], math.inf
                for te, sz in ends:
                    avail += sz
                    if avail >= need:
                        shadow, extra = te, avail - need
                        break
                fits_now = trace.size[j] <= free()
                if fits_now and (t + trace.estimate[j] <= shadow or trace.size[j] <= extra):
                    queue.remove(j)
                    start[j], end[j] = t, t + trace.runtime[j]
        t += 1
    return start, end
