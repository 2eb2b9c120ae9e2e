"""Lab 21: an ASHA scheduler that promotes the right trials."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test

UNIMPORTABLE = ("scaleoutai.parallel",)  # the answer: ASHA and its driver

NAMES = {0: "continue", 1: "promote", 2: "stop"}


class Reference:
    """The grader's ASHA (same rule as scaleoutai.parallel.hpo.ASHA, trials without configs)."""

    def __init__(self, eta: int, lo: float, hi: float, max_trials: int):
        self.eta, self.cap, self.r = eta, max_trials, [float(lo)]
        while self.r[-1] * eta <= hi * (1 + 1e-12):
            self.r.append(self.r[-1] * eta)
        self.seen: list[dict[int, float]] = [dict() for _ in self.r]
        self.done: list[set[int]] = [set() for _ in self.r]
        self.n = 0

    def ready(self, k: int) -> list[int]:
        ranked = sorted(self.seen[k].items(), key=lambda kv: (-kv[1], kv[0]))
        return [t for t, _ in ranked[:len(ranked) // self.eta] if t not in self.done[k]]

    def result(self, trial: int, k: int, score: float) -> int:
        self.seen[k][trial] = score
        return 2 if k + 1 == len(self.r) else int(trial in self.ready(k))

    def job(self) -> tuple[int, int] | None:
        for k in range(len(self.r) - 2, -1, -1):
            cand = self.ready(k)
            if cand:
                self.done[k].add(cand[0])
                return cand[0], k + 1
        if self.n == self.cap:
            return None
        self.n += 1
        return self.n - 1, 0

    def best(self) -> tuple[int, float]:
        k = max(i for i, s in enumerate(self.seen) if s)
        return min(self.seen[k].items(), key=lambda kv: (-kv[1], kv[0]))


def simulate(sched: Reference, workers: int, score, tpu: float, duration=None):
    """The asynchronous loop: free workers (lowest first) take jobs; the earliest finish (ties: lower
    worker) reports next. Returns events [(kind, trial, rung, score)], jobs per worker, best."""
    events, now, busy, idle, jobs = [], 0.0, {}, list(range(1, workers + 1)), [0] * (workers + 1)
    while True:
        while idle:
            job = sched.job()
            events.append((1, -1, -1, 0.0))
            if job is None:
                break
            w = idle.pop(0)
            t, k = job
            span = duration(t, k) if duration else tpu * (sched.r[k] - (sched.r[k - 1] if k else 0.0))
            busy[w] = (now + span, t, k)
        if not busy:
            sched.finished_at = now  # the makespan of the asynchronous schedule
            return events, jobs[1:], sched.best()
        w = min(busy, key=lambda q: (busy[q][0], q))
        now, t, k = busy.pop(w)
        jobs[w] += 1
        s = score(t, k)
        events.append((0, t, k, s))
        sched.result(t, k, s)
        idle = sorted(idle + [w])


# hand-built sequences: (eta, min, max, max_trials, events)
HAND = [
    ("eta=3, rungs 1-3-9, the textbook example",
     (3, 1, 9, 6, [(1, 0, 0, 0), (1, 0, 0, 0), (1, 0, 0, 0), (0, 0, 0, .5), (0, 1, 0, .9), (0, 2, 0, .7), (1, 0, 0, 0),
                   (1, 0, 0, 0), (0, 1, 1, .95), (0, 3, 0, .99), (1, 0, 0, 0), (0, 3, 1, .2), (1, 0, 0, 0),
                   (0, 4, 0, .1), (1, 0, 0, 0), (0, 5, 0, .8), (1, 0, 0, 0), (1, 0, 0, 0)])),
    ("eta=2, equal scores (ties go to the older trial)",
     (2, 1, 4, 4, [(1, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, .5), (0, 0, 0, .5), (1, 0, 0, 0), (1, 0, 0, 0),
                   (0, 2, 0, .5), (0, 0, 1, .4), (1, 0, 0, 0), (1, 0, 0, 0), (0, 3, 0, .5), (1, 0, 0, 0),
                   (0, 1, 1, .4), (1, 0, 0, 0), (0, 0, 2, .1), (1, 0, 0, 0)])),
    ("eta=4, a single promotion per four results",
     (4, 2, 32, 9, [(1, 0, 0, 0)] * 4 + [(0, 3, 0, .1), (0, 2, 0, .2), (0, 1, 0, .3), (0, 0, 0, .4)]
      + [(1, 0, 0, 0)] * 3 + [(0, 0, 1, .6), (0, 4, 0, .8)] + [(1, 0, 0, 0)] * 2)),
]
J = (1, 0, 0, 0)  # next_job()
HAND_MORE = [  # the boundaries of the rules
    ("eta=2, equal scores, the older trial reports first (ties go to the older trial)",
     (2, 1, 2, 3, [J, J, J, (0, 0, 0, .5), (0, 1, 0, .5), J, (0, 2, 0, .5), J, (0, 0, 1, .7), J])),
    ("eta=2, scores 1e-9 apart (closer than float32 can tell)",
     (2, 1, 4, 4, [J, J, (0, 0, 0, .5), (0, 1, 0, .5 + 1e-9), J, J, (0, 1, 1, .3), (0, 2, 0, .3 + 1e-9), J,
                   (0, 3, 0, .3), J, (0, 2, 1, .3 - 1e-9), J, J])),
    ("a single rung (max_resource < min_resource * eta): every result is final",
     (3, 1, 2, 3, [J, J, (0, 1, 0, .4), (0, 0, 0, .9), J, J, (0, 2, 0, .1), J])),
    ("every trial started, promotions still pending (max_trials reached first)",
     (2, 1, 4, 2, [J, J, J, (0, 0, 0, .3), (0, 1, 0, .6), J, J, (0, 1, 1, .2), J])),
]
RANDOM = [(3, 1, 27, 30, 4), (2, 1, 8, 20, 3), (3, 1, 9, 12, 1), (4, 1, 16, 40, 6), (2, 2, 16, 16, 9)]
# (K, eta, min, max, trials, time per unit)
DRIVER = [(2, 3, 1, 9, 9, 1.0), (3, 2, 1, 8, 12, 0.5), (4, 3, 1, 27, 20, 0.1), (6, 2, 1, 4, 15, 1.0),
          (9, 3, 1, 9, 5, 0.25)]
# (K, eta, min, max, trials, time per unit, curves): "ties" scores on a coarse grid (equal best scores at the top
# rung, equal finish times), "falling" scores that drop with more resource (the best of rung 0 is not the best)
DRIVER_MORE = [(4, 2, 1, 4, 10, 1.0, "ties"), (5, 3, 1, 9, 14, 0.1, "falling"), (3, 2, 1, 8, 9, 0.3, "ties")]
PROPERTY = 3  # seeded random replays and 2 drivers with every parameter drawn


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (label, (eta, lo, hi, cap, raw)) in enumerate(HAND):
        _add_replay(p, f"h{i}", label, (eta, lo, hi, cap), np.array(raw, dtype=np.float64).reshape(-1, 4))
    for i, (eta, lo, hi, cap, workers) in enumerate(RANDOM):
        _add_random(p, f"q{i}", rng, eta, lo, hi, cap, workers, "seeded random results")
    for i, (K, eta, lo, hi, cap, tpu) in enumerate(DRIVER):
        rungs = len(Reference(eta, lo, hi, cap).r)
        quality = rng.uniform(0, 1, size=(cap, 1))
        curves = quality - 0.5 ** np.arange(rungs)[None, :] + 0.05 * rng.standard_normal((cap, rungs))
        _add_driver(p, f"d{i}", K, eta, lo, hi, cap, tpu, curves)
    for i, (label, (eta, lo, hi, cap, raw)) in enumerate(HAND_MORE):
        _add_replay(p, f"b{i}", label, (eta, lo, hi, cap), np.array(raw, dtype=np.float64).reshape(-1, 4))
    for i in range(PROPERTY):
        eta, lo = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        hi = lo * eta ** int(rng.integers(0, 4)) + int(rng.integers(0, eta))
        _add_random(p, f"p{i}", rng, eta, lo, hi, int(rng.integers(4, 41)), int(rng.integers(1, 9)),
                    "seeded random case")
    drivers = list(DRIVER_MORE)
    for _ in range(2):
        K, eta = int(rng.integers(2, 10)), int(rng.integers(2, 5))
        lo, cap = int(rng.integers(1, 3)), int(rng.integers(3, 25))
        hi, tpu = lo * eta ** int(rng.integers(1, 4)), float(rng.choice([0.1, 0.25, 1.0]))
        drivers.append((K, eta, lo, hi, cap, tpu, str(rng.choice(["ties", "falling", "rising"]))))
    for i, (K, eta, lo, hi, cap, tpu, shape) in enumerate(drivers):
        rungs = len(Reference(eta, lo, hi, cap).r)
        if shape == "ties":
            curves = rng.integers(0, 4, size=(cap, rungs)) / 4.0
        else:
            quality = rng.uniform(0, 1, size=(cap, 1))
            curves = quality + (1 if shape == "falling" else -1) * 0.5 ** np.arange(rungs)[None, :]
        what = {"ties": "scores on a grid of 1/4 (ties)", "falling": "scores that fall with more resource",
                "rising": "scores that rise with more resource"}[shape]
        _add_driver(p, f"e{i}", K, eta, lo, hi, cap, tpu, curves,
                    f", time per unit {tpu:g}, {'seeded random case, ' if i >= len(DRIVER_MORE) else ''}{what}")
    return p


def _add_replay(p: Plan, cid: str, label: str, cfg: tuple, events: np.ndarray) -> None:
    eta, lo, hi, cap = cfg
    p.add(Case(id=cid, fn="replay", label=label, mode="call", timeout=5,
               args=[{"value": eta}, {"value": lo}, {"value": hi}, {"value": cap}], data={"cfg": cfg}),
          shared={"events": events})


def _add_random(p: Plan, cid: str, rng: np.random.Generator, eta: int, lo: int, hi: int, cap: int, workers: int,
                what: str) -> None:
    """Results of coarse scores (many ties) in the order an asynchronous run with random job lengths gives."""
    grid = rng.integers(0, 6, size=(cap, 8)) / 5.0
    spans = rng.uniform(0.5, 2.0, size=(cap, 8))
    ev, _, _ = simulate(Reference(eta, lo, hi, cap), workers, lambda t, k: float(grid[t, k]), 1.0,
                        lambda t, k: float(spans[t, k]))
    _add_replay(p, cid, f"{what}, eta={eta}, resources {lo}..{hi}, {cap} trials, {workers} workers", (eta, lo, hi, cap),
                np.array(ev, dtype=np.float64))


def _add_driver(p: Plan, cid: str, K: int, eta: int, lo: int, hi: int, cap: int, tpu: float, curves: np.ndarray,
                note: str = "") -> None:
    case = Case(id=cid, fn="asha_search", label=f"K={K}, eta={eta}, resources {lo}..{hi}, {cap} trials{note}",
                world_size=K, timeout=10, data={"cfg": (eta, lo, hi, cap), "tpu": tpu, "curves": curves})
    for r in range(K):  # only workers can train: the driver's copy of the curves is all NaN
        p.inputs[f"{cid}/curves/{r}"] = np.full_like(curves, np.nan) if r == 0 else curves
    case.args = [{"key": f"{cid}/curves", "per_rank": True}, {"value": eta}, {"value": lo}, {"value": hi},
                 {"value": tpu}]
    p.cases.append(case)


def _compare(res: CaseResult, want_kind: int):
    ev = res.shared("events")
    sched = Reference(*res.case.data["cfg"])
    got = res.value(0, "replay table", shape=(len(ev), 3))
    ok = total = 0
    first = ""
    for i, (kind, t, k, s) in enumerate(ev):
        if int(kind) == 0:
            want = (sched.result(int(t), int(k), float(s)), -1, -1)
        else:
            job = sched.job()
            want = (-1, -1, -1) if job is None else (-1, *job)
        if int(kind) != want_kind:
            continue
        total += 1
        row = tuple(int(x) for x in got[i])
        if row == want:
            ok += 1
        elif not first:
            if want_kind == 0:
                first = (f"event {i}: on_result(trial {int(t)}, rung {int(k)}, score {s:g}) returned "
                         f"{NAMES.get(row[0], repr(row[0]))!r} but should return {NAMES[want[0]]!r}; "
                         f"{len(sched.seen[int(k)])} results are in at rung {int(k)}")
            else:
                say = lambda r: "None" if r[1] < 0 else f"(trial {r[1]}, rung {r[2]})"  # noqa: E731
                first = (f"event {i}: next_job() returned {say(row)} but should return {say(want)} "
                         f"(highest rung first, best promotable trial first, then a new trial, then None)")
    if ok < total:
        raise Fail(f"{ok} of {total} {'decisions' if want_kind == 0 else 'jobs'} right; first wrong one: {first}")
    return 1.0, ""


def decisions(res: CaseResult):
    return _compare(res, 0)


def jobs(res: CaseResult):
    return _compare(res, 1)


def driver(res: CaseResult):
    eta, lo, hi, cap = res.case.data["cfg"]
    curves, K = res.case.data["curves"], res.case.world_size
    ref = Reference(eta, lo, hi, cap)
    _, per_worker, (bt, bs) = simulate(ref, K - 1, lambda t, k: float(curves[t, k]), res.case.data["tpu"])
    got = res.value(0, "[best trial, best score]", shape=(2,))
    err = abs(float(got[1]) - bs)  # compared in float64
    if int(got[0]) == bt and 1e-12 < err <= 1e-6 * max(1.0, abs(bs)):
        raise Fail(f"rank 0 reports the right trial, but its score {float(got[1])!r} has lost digits (an array of "
                   f"dtype {got.dtype}): return the score as its worker sent it, in float64")
    if int(got[0]) != bt or not err <= 1e-12:
        raise Fail(f"rank 0 reports trial {int(got[0])} with score {got[1]:.4g}, not the best trial of the ASHA "
                   f"schedule: receive from the worker whose job ends first, and hand jobs to idle workers lowest rank first")
    for w in range(1, K):
        n = res.value(w, "job count", array_only=False)  # a 0-d value comes back with shape (1,)
        if n.size != 1:
            raise Fail(f"worker {w} returned {n.size} numbers; return the number of jobs it ran")
        if int(n.reshape(-1)[0]) != per_worker[w - 1]:
            raise Fail(f"worker {w} ran {int(n.reshape(-1)[0])} jobs, not the number the asynchronous schedule gives it: a worker "
                       f"takes a new job as soon as its result is in (ties in finish time: the lower rank first)")
    _protocol(res, per_worker, ref.finished_at)
    return 1.0, ""


def _protocol(res: CaseResult, per_worker: list[int], makespan: float) -> None:
    """From the grader's trace: a star around the driver, one job message per job (plus one stop), one
    result per job, and the simulated makespan of the asynchronous schedule (no worker waits for another)."""
    K = res.case.world_size
    sends = [e for e in res.trace if e.kind == "send"]
    for e in sends:
        if 0 not in (e.rank, e.peer):
            raise Fail(f"worker {e.rank} sent a message to worker {e.peer}; workers talk only to the driver (rank 0)")
    for w in range(1, K):
        jobs = per_worker[w - 1]
        results = sum(1 for e in sends if e.rank == w)
        handed = sum(1 for e in sends if e.rank == 0 and e.peer == w)
        if results != jobs:
            raise Fail(f"worker {w} sent {results} messages to the driver; it runs {jobs} jobs and sends one result each")
        if handed != jobs + 1:
            raise Fail(f"the driver sent worker {w} {handed} messages for the {jobs} jobs the worker ran: send one message "
                       f"per job (trial, rung and resources together) and one stop message")
    took = res.meta.get("sim_time")
    slack = 1e-3 * max(1, len(sends)) + 0.01 * makespan  # message latencies on the simulated network
    if not isinstance(took, (int, float)) or took > makespan + slack:
        raise Fail(f"the search took {took:.4g} simulated seconds, the asynchronous schedule {makespan:.4g}: "
                   f"hand out a job the moment a worker is idle and let the workers train in parallel")


TESTS = [
    Test("decisions", "on_result promotes exactly the top floor(n/eta) at each rung (hand-built and random results)",
         select=lambda c: c.fn == "replay", check=decisions),
    Test("jobs", "next_job promotes from the highest rung first, then starts new trials",
         select=lambda c: c.fn == "replay", check=jobs),
    Test("driver", "asha_search finds the reference's best trial with the same schedule, messages and makespan (K = 2..9)",
         select=lambda c: c.fn == "asha_search", check=driver),
]
