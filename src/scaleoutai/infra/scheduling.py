"""A discrete-event cluster scheduler (Chapter 33): FIFO, EASY backfill and conservative backfill.

A machine of ``capacity`` identical nodes runs rigid jobs: job j arrives at submit_j, asks for size_j nodes
for runtime_j seconds and tells the scheduler an estimate_j >= runtime_j (the time limit). Jobs are
space-shared (each node runs one job) and never preempted. The policies (Section 2):

    FIFO          start jobs in arrival order; the first job that does not fit blocks all others.
    EASY          FIFO, then let later jobs jump ahead if they cannot delay the queue head: the head gets
                  a reservation at the shadow time (the earliest time, by the running jobs' estimates, when
                  enough nodes are free); a later job may start now if it fits and either ends (by its
                  estimate) before the shadow time or uses only the extra nodes the head will not need
                  (Lifka 1995; Mu'alem and Feitelson 2001).
    conservative  every job gets a reservation when it arrives, the earliest slot in the profile of free
                  nodes that delays nobody already reserved; when a job ends early the reservations are
                  re-planned in reservation order, which can only move each one earlier (Section 4).

The simulator is an event loop over a heap of completions and the sorted arrivals: nothing happens between
events, so the cost is O(events x work per event), not O(time). Time-sliced gang scheduling, dominant
resource fairness and placement live in ``sched_policies``, the metrics in ``sched_metrics``.
"""
from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "Schedule", "POLICIES", "make_trace", "generate_trace", "simulate", "simulate_fifo",
           "simulate_easy", "simulate_conservative"]

POLICIES = ("fifo", "easy", "conservative")


@dataclass(frozen=True)
class Trace:
    """Jobs sorted by submit time; job j is row j. ``gpus`` is the job's total GPU count (for accounting)."""

    submit: np.ndarray
    size: np.ndarray
    runtime: np.ndarray
    estimate: np.ndarray
    user: np.ndarray
    gpus: np.ndarray

    def __len__(self) -> int:
        return len(self.submit)

    def subset(self, idx: np.ndarray | slice) -> "Trace":
        """The jobs ``idx`` (keep them sorted by submit)."""
        return Trace(*(np.asarray(a)[idx] for a in (self.submit, self.size, self.runtime, self.estimate,
                                                      self.user, self.gpus)))


@dataclass
class Schedule:
    """What a policy did: start and end per job, the first reservation each job got (nan: never reserved),
    how many times any reservation moved later, and the timeline (t, busy nodes, queued jobs) after each event."""

    policy: str
    capacity: int
    start: np.ndarray
    end: np.ndarray
    reserved: np.ndarray
    reservation_increases: int = 0
    timeline: tuple[np.ndarray, np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0),) * 3)
    extra: dict = field(default_factory=dict)


def make_trace(jobs: list[tuple], users: list[int] | None = None, gpus: list[int] | None = None) -> Trace:
    """A trace from rows (submit, size, runtime[, estimate]); estimate defaults to runtime."""
    rows = [tuple(j) + ((j[2],) if len(j) == 3 else ()) for j in jobs]
    if any(len(r) != 4 for r in rows):
        raise ValueError("each job is (submit, size, runtime) or (submit, size, runtime, estimate)")
    a = np.array(rows, dtype=float).reshape(-1, 4)
    n = len(a)
    return _checked(Trace(a[:, 0], a[:, 1].astype(np.int64), a[:, 2], a[:, 3],
                          np.asarray(users if users is not None else np.zeros(n), dtype=np.int64),
                          np.asarray(gpus if gpus is not None else np.zeros(n), dtype=np.int64)))


def _checked(t: Trace) -> Trace:
    n = len(t.submit)
    if any(len(a) != n for a in (t.size, t.runtime, t.estimate, t.user, t.gpus)):
        raise ValueError("every field of a trace needs one entry per job")
    if n and (np.any(np.diff(t.submit) < 0) or t.submit[0] < 0):
        raise ValueError("sort the jobs by submit time (submit >= 0, non-decreasing)")
    if np.any(t.size < 1) or np.any(t.runtime <= 0):
        raise ValueError("every job needs size >= 1 node and runtime > 0")
    if np.any(t.estimate < t.runtime):
        raise ValueError("a user estimate must be >= the runtime (the job is killed at its limit otherwise)")
    return t


def generate_trace(n_jobs: int, capacity: int = 128, load: float = 0.85, seed: int = 0, *,
                   min_runtime: int = 10, max_runtime: int = 24 * 3600, estimate_unit: int = 60,
                   n_users: int = 16, gpus_per_node: int = 4) -> Trace:
    """A seeded synthetic workload in the spirit of Lublin and Feitelson (2003), whole seconds throughout.

    Sizes: 20% serial, the rest log-uniform on [1, capacity] with 75% rounded to a power of two. Runtimes:
    log-uniform on [min_runtime, max_runtime]. Estimates: runtime times a factor 10^U(0,1) (20% exact),
    rounded up to ``estimate_unit``. Arrivals: Poisson, rate set so that offered load = ``load``
    (sum size x runtime per second / capacity). Users: Zipf-like. GPUs: 0, 1, 2 or 4 per node.
    """
    if n_jobs < 1 or capacity < 1 or not 0 < load or not 1 <= min_runtime <= max_runtime:
        raise ValueError("need n_jobs >= 1, capacity >= 1, load > 0 and 1 <= min_runtime <= max_runtime")
    rng = np.random.default_rng(seed)
    lg = rng.uniform(0.0, math.log2(capacity), n_jobs)
    size = np.where(rng.random(n_jobs) < 0.75, np.round(2.0 ** np.round(lg)), np.ceil(2.0 ** lg))
    size = np.where(rng.random(n_jobs) < 0.2, 1, np.clip(size, 1, capacity)).astype(np.int64)
    runtime = np.round(np.exp(rng.uniform(math.log(min_runtime), math.log(max_runtime), n_jobs)))
    factor = np.where(rng.random(n_jobs) < 0.2, 1.0, 10.0 ** rng.uniform(0.0, 1.0, n_jobs))
    estimate = np.maximum(runtime, np.ceil(runtime * factor / estimate_unit) * estimate_unit)
    mean_gap = float(np.mean(size * runtime)) / (load * capacity)
    submit = np.floor(np.concatenate([[0.0], np.cumsum(rng.exponential(mean_gap, n_jobs - 1))]))
    w = 1.0 / np.arange(1, n_users + 1)
    user = rng.choice(n_users, size=n_jobs, p=w / w.sum())
    gpus = size * rng.choice([0, 1, 2, gpus_per_node], size=n_jobs, p=[0.4, 0.2, 0.2, 0.2])
    return _checked(Trace(submit, size, runtime.astype(float), estimate.astype(float), user, gpus))


class _Loop:
    """State shared by the policies: arrivals in order, a completion heap, free nodes, the timeline."""

    def __init__(self, trace: Trace, capacity: int, policy: str):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 node, got {capacity}")
        if len(trace) and int(trace.size.max()) > capacity:
            raise ValueError(f"a job asks for {int(trace.size.max())} nodes on a {capacity}-node machine: "
                             "drop it or raise capacity")
        n = len(trace)
        self.sub, self.size = trace.submit.tolist(), trace.size.tolist()
        self.run, self.est = trace.runtime.tolist(), trace.estimate.tolist()
        self.capacity, self.free, self.policy = capacity, capacity, policy
        self.start, self.end = [math.nan] * n, [math.nan] * n
        self.reserved, self.increases = [math.nan] * n, 0
        self.heap: list[tuple[float, int]] = []          # (actual end, job)
        self.by_est: list[tuple[float, int]] = []        # running jobs sorted by estimated end
        self.queue: list[int] = []
        self.tl_t: list[float] = []
        self.tl_busy: list[int] = []
        self.tl_q: list[int] = []

    def begin(self, j: int, now: float) -> None:
        self.free -= self.size[j]
        self.start[j] = now
        heapq.heappush(self.heap, (now + self.run[j], j))
        bisect.insort(self.by_est, (now + self.est[j], j))

    def reserve(self, j: int, t: float) -> None:
        if math.isnan(self.reserved[j]):
            self.reserved[j] = t

    def loop(self, schedule, next_time=lambda: math.inf) -> Schedule:
        """Advance event by event; ``schedule(now, changed, first_new)`` starts what it may."""
        n, i = len(self.sub), 0
        while i < n or self.heap or self.queue:
            now = min(self.sub[i] if i < n else math.inf, self.heap[0][0] if self.heap else math.inf,
                      next_time())
            if now == math.inf:
                raise RuntimeError(f"{self.policy}: jobs wait with nothing running (a scheduler bug)")
            changed = False
            while self.heap and self.heap[0][0] <= now:
                t, j = heapq.heappop(self.heap)
                self.end[j] = t
                self.free += self.size[j]
                del self.by_est[bisect.bisect_left(self.by_est, (self.start[j] + self.est[j], j))]
                changed = True
            first_new = len(self.queue)
            while i < n and self.sub[i] <= now:
                self.queue.append(i)
                i += 1
            schedule(now, changed, first_new)
            self.tl_t.append(now)
            self.tl_busy.append(self.capacity - self.free)
            self.tl_q.append(len(self.queue))
        return Schedule(self.policy, self.capacity, np.array(self.start), np.array(self.end),
                        np.array(self.reserved), self.increases,
                        (np.array(self.tl_t), np.array(self.tl_busy), np.array(self.tl_q)))

    def start_heads(self, now: float) -> None:
        q = self.queue
        k = 0
        while k < len(q) and self.size[q[k]] <= self.free:
            self.begin(q[k], now)
            k += 1
        del q[:k]


def simulate_fifo(trace: Trace, capacity: int) -> Schedule:
    """First come, first served: the head starts when it fits, nobody overtakes it."""
    s = _Loop(trace, capacity, "fifo")

    def schedule(now: float, changed: bool, first_new: int) -> None:
        if changed or first_new == 0:       # an arrival behind a blocked head changes nothing
            s.start_heads(now)
    return s.loop(schedule)


def _shadow(s: _Loop, head: int) -> tuple[float, int]:
    """The head's reservation: the earliest estimated end at which it fits, and the extra nodes left then."""
    avail, need = s.free, s.size[head]
    for t, j in s.by_est:
        avail += s.size[j]
        if avail >= need:
            return t, avail - need
    raise RuntimeError("the head never fits (size > capacity was checked)")


def simulate_easy(trace: Trace, capacity: int) -> Schedule:
    """EASY backfill: one reservation, for the queue head; later jobs start if they cannot delay it."""
    s = _Loop(trace, capacity, "easy")
    held: dict[int, float] = {}                      # head -> its current reservation

    def schedule(now: float, changed: bool, first_new: int) -> None:
        if changed or first_new == 0:
            s.start_heads(now)
            first_new = 1
        q = s.queue
        if not q:
            return
        head = q[0]
        shadow, extra = _shadow(s, head)
        s.reserve(head, shadow)
        if shadow > held.get(head, math.inf):
            s.increases += 1
        held.clear()
        held[head] = shadow
        # earlier queued jobs were already refused with the same shadow and fewer free nodes: scan only
        # the new arrivals unless something ended
        k = max(first_new, 1)
        while k < len(q) and s.free > 0:
            j = q[k]
            if s.size[j] <= s.free:
                if now + s.est[j] <= shadow:
                    s.begin(j, now)
                    del q[k]
                    continue
                if s.size[j] <= extra:
                    extra -= s.size[j]
                    s.begin(j, now)
                    del q[k]
                    continue
            k += 1
    return s.loop(schedule)


class _Profile:
    """Free nodes as a step function: free[k] on [times[k], times[k+1]), the last step lasting for ever."""

    def __init__(self, now: float, free: int, releases: list[tuple[float, int]]):
        self.times, self.free = [now], [free]
        for t, n in sorted(releases):
            if t <= self.times[-1]:
                self.free[-1] += n
            else:
                self.times.append(t)
                self.free.append(self.free[-1] + n)

    def earliest(self, size: int, dur: float, now: float) -> float:
        """The first time >= now from which ``size`` nodes stay free for ``dur``: two pointers, O(steps)."""
        T, F = self.times, self.free
        k = max(bisect.bisect_right(T, now) - 1, 0)
        while True:
            while F[k] < size:
                k += 1
            t0 = max(T[k], now)
            m = k + 1
            while m < len(T) and T[m] < t0 + dur and F[m] >= size:
                m += 1
            if m == len(T) or T[m] >= t0 + dur:
                return t0
            k = m                                    # any start before step m would overlap it

    def _cut(self, t: float) -> int:
        k = bisect.bisect_left(self.times, t)
        if k == len(self.times) or self.times[k] != t:
            self.times.insert(k, t)
            self.free.insert(k, self.free[k - 1])
        return k

    def take(self, t: float, size: int, dur: float) -> None:
        a, b = self._cut(t), self._cut(t + dur)
        for k in range(a, b):
            self.free[k] -= size


def simulate_conservative(trace: Trace, capacity: int) -> Schedule:
    """Conservative backfill: a reservation for every job at arrival; nobody may delay an earlier one."""
    s = _Loop(trace, capacity, "conservative")
    res: dict[int, float] = {}                        # queued job -> current reservation
    prof: list[_Profile] = []

    def replan(now: float, old: list[int]) -> None:
        p = _Profile(now, s.free, [(t, s.size[j]) for t, j in s.by_est])
        for j in sorted(old, key=lambda j: (res[j], j)):   # old reservation order: none moves later
            t = p.earliest(s.size[j], s.est[j], now)
            if t > res[j]:
                s.increases += 1
            res[j] = t
            p.take(t, s.size[j], s.est[j])
        prof[:] = [p]

    def schedule(now: float, changed: bool, first_new: int) -> None:
        if changed or not prof:
            replan(now, s.queue[:first_new])
        p = prof[0]
        for j in s.queue[first_new:]:
            t = p.earliest(s.size[j], s.est[j], now)
            res[j] = t
            s.reserve(j, t)
            p.take(t, s.size[j], s.est[j])
        due = [j for j in s.queue if res[j] <= now]
        if due:
            for j in due:
                s.begin(j, now)
                del res[j]
            s.queue[:] = [j for j in s.queue if j in res]

    def next_time() -> float:
        return min(res.values(), default=math.inf)
    return s.loop(schedule, next_time)


def simulate(trace: Trace, capacity: int, policy: str = "easy", **kw) -> Schedule:
    """Run one policy: 'fifo', 'easy', 'conservative' here; 'gang' from ``sched_policies``."""
    if policy == "gang":
        from .sched_policies import simulate_gang
        return simulate_gang(trace, capacity, **kw)
    fn = {"fifo": simulate_fifo, "easy": simulate_easy, "conservative": simulate_conservative}.get(policy)
    if fn is None:
        raise ValueError(f"unknown policy {policy!r}: use one of {POLICIES + ('gang',)}")
    return fn(trace, capacity, **kw)
