"""A deep-learning cluster scheduler: Tiresias-style discretised 2D-LAS (Chapter 33, Section 4).

Deep-learning jobs differ from the batch jobs of ``scheduling``: nobody knows their runtime (no estimate
to backfill with), they checkpoint, so they can be *preempted* and resumed, and the GPUs come in types of
different speeds. Tiresias (Gu et al., NSDI 2019) schedules them by *least attained service* in two
dimensions: a job's attained service is GPUs x seconds it has run, a_j = g_j * t_run. Discretised:
thresholds T_1 < T_2 < ... split the jobs into queues Q_0 (a_j < T_1), Q_1, ...; a lower queue always
goes first and preempts a higher one, and inside a queue jobs go in arrival order. So a new job starts at
once, and a long job sinks as it runs: short jobs finish without waiting behind it, with no estimate.

On top of that, as a shared cluster needs it (the rules apply in this order):
    priority   a higher ``priority`` class always goes before a lower one (production before research).
    fairness   with ``weights`` (one per tenant = ``trace.user``), each class is filled by *progressive
               filling*: the next job comes from the tenant with the smallest GPUs_held / weight whose
               jobs are not exhausted; under saturation tenant i holds ~ weight_i / sum(weights) of the
               GPUs (weighted max-min, which is DRF when GPUs are the only resource).
    promotion  a job that has waited ``promote_after`` seconds in one spell goes back to Q_0 with its
               queue service reset (Tiresias's starvation knob): no job waits much longer than that.
    restart    a job that resumes (after preemption or on another GPU type) first spends ``restart_cost``
               seconds restoring its checkpoint; attained service counts that time, progress does not.
    placement  a job's g_j GPUs come from one pool (no gang across GPU types); a running job keeps its
               pool if it still has room; a job that starts takes the fastest pool where it evicts no
               running job further down the order, else the fastest with room. ``runtime``
               is the work at speed 1: on a pool of speed s it progresses s seconds of work per second.

``policy="fifo"`` is the baseline: arrival order, no preemption, the first job that does not fit blocks
the rest; on one pool of speed 1 it is ``scheduling.simulate_fifo`` start for start. The loop jumps from
event to event (arrival, completion, a running job crossing a threshold, a waiting job's promotion).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..datasets import JobTrace
from .scheduling import Schedule

__all__ = ["Pool", "simulate_dl", "queue_of", "tenant_shares"]

_EPS = 1e-9


@dataclass(frozen=True)
class Pool:
    """A set of interchangeable GPUs of one type: ``gpus`` of them, each ``speed`` x the reference GPU."""

    name: str
    gpus: int
    speed: float = 1.0


def queue_of(service: float, thresholds: Sequence[float]) -> int:
    """The LAS queue of a job that attained ``service`` GPU-seconds: how many thresholds it has reached."""
    return sum(1 for th in thresholds if service >= th * (1 - 1e-12) - _EPS)


def _check(trace: JobTrace, pools: Sequence[Pool], policy: str, thresholds: Sequence[float],
           weights: Sequence[float] | None, restart_cost: float, promote_after: float) -> None:
    if policy not in ("las", "fifo"):
        raise ValueError(f"unknown policy {policy!r}: use 'las' or 'fifo'")
    if not pools or any(p.gpus < 1 or p.speed <= 0 for p in pools):
        raise ValueError("need at least one pool, each with >= 1 GPU and speed > 0")
    if len(trace) and int(trace.size.max()) > max(p.gpus for p in pools):
        raise ValueError(f"a job asks for {int(trace.size.max())} GPUs; the largest pool has "
                         f"{max(p.gpus for p in pools)} (a job's GPUs come from one pool)")
    if list(thresholds) != sorted(thresholds) or any(th <= 0 for th in thresholds):
        raise ValueError("thresholds must be positive and increasing (GPU-seconds)")
    if weights is not None and (len(weights) <= int(trace.user.max(initial=0)) or min(weights) <= 0):
        raise ValueError("weights: one positive weight per tenant id 0..max(trace.user)")
    if restart_cost < 0 or promote_after <= 0:
        raise ValueError("need restart_cost >= 0 and promote_after > 0")


def simulate_dl(trace: JobTrace, pools: Sequence[Pool], policy: str = "las",
                thresholds: Sequence[float] = (3600.0,), priority: Sequence[int] | None = None,
                weights: Sequence[float] | None = None, promote_after: float = math.inf,
                restart_cost: float = 0.0) -> Schedule:
    """Run the DL scheduler; ``trace.size`` is GPUs per job, ``trace.runtime`` its work at speed 1.

    Returns a ``Schedule`` over all GPUs (so ``sched_metrics.metrics`` applies: ``mean_response`` is the
    mean job completion time) whose ``extra`` holds per job ``preemptions`` and ``max_spell`` (the
    longest time it waited at a stretch), the ``pool`` it ended on, and ``alloc`` = (event times,
    GPUs held per tenant from each event on) for ``tenant_shares``.
    """
    _check(trace, pools, policy, thresholds, weights, restart_cost, promote_after)
    n = len(trace)
    sub, g = trace.submit.tolist(), [int(x) for x in trace.size]
    ten = [int(u) for u in trace.user]
    prio = [0] * n if priority is None else [int(p) for p in priority]
    speed = [p.speed for p in pools]
    rem = trace.runtime.astype(float).tolist()          # work left, in speed-1 seconds
    svc = [0.0] * n                                     # attained service since the last promotion
    ovh = [0.0] * n                                     # restore time left before progress resumes
    pool = [-1] * n                                     # pool while running, else -1
    ran_before = [False] * n
    start, end = [math.nan] * n, [math.nan] * n
    wait_since, promoted = [math.nan] * n, [False] * n
    spell, preempt, last = [0.0] * n, [0] * n, [-1] * n
    n_ten = int(trace.user.max(initial=0)) + 1
    order_in = sorted(range(n), key=lambda j: (sub[j], j))
    i, now, active = 0, 0.0, set()                      # active: arrived and not finished
    tl_t, tl_b, tl_q, alloc = [], [], [], []
    fastest = sorted(range(len(pools)), key=lambda k: (-speed[k], k))

    def next_event() -> float:
        t = sub[order_in[i]] if i < n else math.inf
        for j in active:
            if pool[j] >= 0:
                t = min(t, now + ovh[j] + rem[j] / speed[pool[j]])
                q = queue_of(svc[j], thresholds)
                if policy == "las" and q < len(thresholds):
                    t = min(t, now + (thresholds[q] - svc[j]) / g[j])
            elif policy == "las" and not promoted[j] and promote_after < math.inf:
                t = min(t, wait_since[j] + promote_after)
        return t

    def advance(dt: float) -> None:
        for j in active:
            if pool[j] >= 0:
                used = min(ovh[j], dt)
                ovh[j] -= used
                rem[j] -= (dt - used) * speed[pool[j]]
                svc[j] += g[j] * dt

    def key(j: int) -> tuple:
        if policy == "fifo":
            return (pool[j] < 0, sub[j], j)             # running jobs are never preempted
        return (-prio[j], queue_of(svc[j], thresholds), sub[j], j)

    def choose() -> dict[int, int]:
        """Walk the jobs in scheduling order and give each a pool if one has room: job -> pool."""
        free = [p.gpus for p in pools]
        claim = [0] * len(pools)                        # GPUs of running jobs not yet walked past
        for j in active:
            if pool[j] >= 0:
                claim[pool[j]] += g[j]
        got: dict[int, int] = {}

        def place(j: int) -> bool:
            if pool[j] >= 0:
                claim[pool[j]] -= g[j]
            k = pool[j] if pool[j] >= 0 and free[pool[j]] >= g[j] else next(
                (k for k in fastest if free[k] - claim[k] >= g[j]), -1)   # evict nobody if it can
            k = k if k >= 0 else next((k for k in fastest if free[k] >= g[j]), -1)
            if k < 0:
                return False
            free[k] -= g[j]
            got[j] = k
            return True
        jobs = sorted(active, key=key)
        if policy == "fifo":
            for j in jobs:
                if not place(j):
                    break                               # head-of-line blocking
            return got
        if weights is None:
            for j in jobs:
                if place(j) and not any(free):
                    break                               # every GPU is handed out
            return got
        by_cls: dict[int, list[list[int]]] = {}
        for j in jobs:                                  # still in scheduling order inside each list
            by_cls.setdefault(prio[j], [[] for _ in range(n_ten)])[ten[j]].append(j)
        held = [0] * n_ten
        for cls in sorted(by_cls, reverse=True):
            lists = by_cls[cls]
            heap = [(held[t] / weights[t], t, 0) for t in range(n_ten) if lists[t]]
            heapq.heapify(heap)
            while heap and any(free):                   # progressive filling over tenants
                _, t, k = heapq.heappop(heap)
                if place(lists[t][k]):
                    held[t] += g[lists[t][k]]
                if k + 1 < len(lists[t]):
                    heapq.heappush(heap, (held[t] / weights[t], t, k + 1))
        return got

    while i < n or active:
        t = next_event()
        advance(t - now)
        now = t
        for j in [j for j in active if pool[j] >= 0 and rem[j] <= _EPS * max(1.0, trace.runtime[j])]:
            end[j], pool[j] = now, -1
            active.discard(j)
        while i < n and sub[order_in[i]] <= now:
            j = order_in[i]
            active.add(j)
            wait_since[j] = now
            i += 1
        for j in active:
            if pool[j] < 0 and not promoted[j] and policy == "las" and now >= wait_since[j] + promote_after - _EPS:
                promoted[j], svc[j] = True, 0.0
        got = choose()
        for j in active:
            new = got.get(j, -1)
            if pool[j] >= 0 and new != pool[j]:         # preempted, or moved to another pool
                preempt[j] += 1
                if new < 0:
                    wait_since[j], promoted[j] = now, False
            if new >= 0 and new != pool[j]:
                if pool[j] < 0:
                    spell[j] = max(spell[j], now - wait_since[j])
                if math.isnan(start[j]):
                    start[j] = now
                ovh[j] = restart_cost if ran_before[j] else 0.0
                ran_before[j] = True
            pool[j] = new
            last[j] = new if new >= 0 else last[j]
        busy = [0] * n_ten
        for j in active:
            if pool[j] >= 0:
                busy[ten[j]] += g[j]
        tl_t.append(now)
        tl_b.append(sum(busy))
        tl_q.append(sum(1 for j in active if pool[j] < 0))
        alloc.append(busy)
    return Schedule(f"dl-{policy}", sum(p.gpus for p in pools), np.array(start), np.array(end),
                    np.full(n, math.nan), 0, (np.array(tl_t), np.array(tl_b), np.array(tl_q)),
                    {"preemptions": np.array(preempt), "max_spell": np.array(spell), "pool": np.array(last),
                     "alloc": (np.array(tl_t), np.array(alloc, dtype=float).reshape(len(tl_t), n_ten))})


def tenant_shares(sched: Schedule, t0: float, t1: float) -> np.ndarray:
    """Each tenant's fraction of the GPU-seconds handed out in [t0, t1] (from ``extra['alloc']``)."""
    times, held = sched.extra["alloc"]
    edges = np.clip(np.append(times, max(t1, times[-1])), t0, t1)
    gpu_s = (np.diff(edges)[:, None] * held).sum(axis=0)
    total = gpu_s.sum()
    if total <= 0:
        raise ValueError(f"no GPU was busy in [{t0}, {t1}]")
    return gpu_s / total
