"""Lab 21: PASHA, an ASHA that grows its maximum resource only while the ranking changes."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

UNIMPORTABLE = ("scaleoutai.parallel",)  # the chapter's ASHA (hpo_halving) and its driver (hpo)

NAMES = {0: "continue", 1: "promote", 2: "stop"}
ASKS = ("the lab asks for PASHA: jobs never above the current top rung, which starts at 1 and grows only when "
        "two trials swap places by more than eps between the two top rungs; the chapter's ASHA does not")


class Reference:
    """The grader's PASHA; with eps=None it is the chapter's ASHA (top = s from the start, never a test)."""

    def __init__(self, eta: int, lo: float, hi: float, max_trials: int, eps: float | None = None):
        self.eta, self.cap, self.eps, self.r = eta, max_trials, eps, [float(lo)]
        while self.r[-1] * eta <= hi * (1 + 1e-12):
            self.r.append(self.r[-1] * eta)
        self.s = len(self.r) - 1
        self.top = self.s if eps is None else min(1, self.s)
        self.seen: list[dict[int, float]] = [dict() for _ in self.r]
        self.done: list[set[int]] = [set() for _ in self.r]
        self.n = 0

    def ready(self, k: int) -> list[int]:
        ranked = sorted(self.seen[k].items(), key=lambda kv: (-kv[1], kv[0]))
        return [t for t, _ in ranked[:len(ranked) // self.eta] if t not in self.done[k]]

    def _swap(self) -> bool:
        up, low, e = self.seen[self.top], self.seen[self.top - 1], self.eps
        return any(up[a] - up[b] > e and low[b] - low[a] > e for a in up for b in up)

    def result(self, trial: int, k: int, score: float) -> int:
        self.seen[k][trial] = score
        if self.eps is not None and k == self.top < self.s and self._swap():
            self.top += 1
        return 2 if k == self.s else int(k < self.top and trial in self.ready(k))

    def job(self) -> tuple[int, int] | None:
        for k in range(self.top - 1, -1, -1):
            cand = self.ready(k)
            if cand:
                self.done[k].add(cand[0])
                return cand[0], k + 1
        if self.n == self.cap:
            return None
        self.n += 1
        return self.n - 1, 0

    def units(self, k: int) -> float:
        return self.r[k] - (self.r[k - 1] if k else 0.0)

    def best(self) -> tuple[int, float]:
        k = max(i for i, s in enumerate(self.seen) if s)
        return min(self.seen[k].items(), key=lambda kv: (-kv[1], kv[0]))


def simulate(sched: Reference, workers: int, score, tpu: float, duration=None):
    """The asynchronous loop: free workers (lowest first) take jobs; the earliest finish (ties: lower
    worker) reports next. Returns events [(kind, trial, rung, score)], jobs per worker, best; leaves the
    makespan and each worker's jobs (trial, rung, units, score) on ``sched``."""
    events, now, busy, idle, jobs = [], 0.0, {}, list(range(1, workers + 1)), [0] * (workers + 1)
    sched.handed = {w: [] for w in idle}
    while True:
        while idle:
            job = sched.job()
            events.append((1, -1, -1, 0.0))
            if job is None:
                break
            w = idle.pop(0)
            t, k = job
            span = duration(t, k) if duration else tpu * sched.units(k)
            busy[w] = (now + span, t, k)
            sched.handed[w].append((t, k, sched.units(k), score(t, k)))
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


J = (1, 0, 0, 0)  # next_job()
# hand-built sequences (eta, min, max, max_trials, events); they are also valid ASHA runs (tests/ checks
# that), because each top grows before ASHA would promote past it. HAND_EPS[i] is case i's eps.
HAND = [
    ("eta=3, rungs 1-3-9: two trials swap places between rungs 0 and 1",
     (3, 1, 9, 6, [J, J, J, (0, 0, 0, .5), (0, 1, 0, .9), (0, 2, 0, .7), J, J, (0, 1, 1, .95), (0, 3, 0, .99), J,
                   (0, 3, 1, .2), J, (0, 4, 0, .1), J, (0, 5, 0, .8), J, J])),
    ("eta=2, rungs 1-2-4, eps=0.25, ties go to the older trial, then a swap by more than eps",
     (2, 1, 4, 4, [J, J, (0, 1, 0, .5), (0, 0, 0, .5), J, J, (0, 2, 0, 1.0), (0, 0, 1, .5), J, J, (0, 2, 1, 0.0),
                   (0, 3, 0, .25), J, J, (0, 0, 2, .75), J])),
    ("eta=4, rungs 2-8-32, one promotion per four results, no swap",
     (4, 2, 32, 9, [J] * 4 + [(0, 3, 0, .1), (0, 2, 0, .2), (0, 1, 0, .3), (0, 0, 0, .4)] + [J] * 3
      + [(0, 0, 1, .6), (0, 4, 0, .8)] + [J] * 2)),
]
HAND_EPS = [0.0, 0.25, 0.0]
HAND_MORE = [  # the boundaries of the new rule: (label, (eta, min, max, max_trials, eps, events))
    ("eta=2, a swap by exactly eps is no disagreement, so the trial pauses at rung 1",
     (2, 1, 4, 4, .25, [J, J, (0, 0, 0, .125), (0, 1, 0, .75), J, J, (0, 1, 1, .5), (0, 2, 0, 0.0), J,
                        (0, 3, 0, .375), J, (0, 3, 1, .75), J])),
    ("eta=2, the result that grows the top is promoted at once",
     (2, 1, 8, 4, 0.0, [J, J, (0, 0, 0, .5), (0, 1, 0, .75), J, J, (0, 2, 0, .625), (0, 1, 1, .25), J,
                        (0, 3, 0, 0.0), J, J, (0, 2, 1, .5), J, (0, 2, 2, .5), J])),
    ("eta=2, rungs 1-2-4-8, the top grows rung by rung up to the last, which stops",
     (2, 1, 8, 4, 0.0, [J, J, (0, 0, 0, .25), (0, 1, 0, .5), J, J, (0, 1, 1, .5), (0, 2, 0, .75), J, J,
                        (0, 2, 1, .25), (0, 3, 0, 1.0), J, J, (0, 1, 2, .25), (0, 3, 1, .75), J, J,
                        (0, 3, 2, .125), J, (0, 1, 3, .5), J])),
    ("eta=3, equal scores at the top rung never disagree",
     (3, 1, 9, 6, 0.0, [J, J, J, (0, 0, 0, .5), (0, 1, 0, .5), (0, 2, 0, .5), J, J, (0, 0, 1, .5), (0, 3, 0, .75),
                        J, J, (0, 3, 1, .5), (0, 4, 0, .25), J, J, (0, 5, 0, .5), J])),
    ("a single rung (max_resource < min_resource * eta): top = 0 and every result is final",
     (3, 1, 2, 3, 0.0, [J, J, (0, 1, 0, .4), (0, 0, 0, .9), J, J, (0, 2, 0, .1), J])),
    ("two rungs: top = s = 1 from the start",
     (2, 1, 2, 3, 0.0, [J, J, J, (0, 0, 0, .5), (0, 1, 0, .5), J, (0, 2, 0, .5), J, (0, 0, 1, .7), J])),
    ("eta=2, rungs 1-2-4-8: after one growth rungs 2 and 1 agree, so the top stays at 2",
     (2, 1, 8, 4, 0.0, [J, J, (0, 0, 0, .25), (0, 1, 0, .5), J, J, (0, 1, 1, .5), (0, 2, 0, .75), J, J,
                        (0, 2, 1, .25), (0, 3, 0, 1.0), J, J, (0, 1, 2, .5), (0, 3, 1, .75), J, J, (0, 3, 2, .75), J])),
    ("eps larger than every gap: the top stays at 1 and trials pause there",
     (2, 1, 4, 4, 9.0, [J, J, (0, 0, 0, .2), (0, 1, 0, .8), J, J, (0, 1, 1, .1), (0, 2, 0, .9), J, J,
                        (0, 2, 1, .7), (0, 3, 0, .3), J, J])),
]
RANDOM = [(3, 1, 27, 30, 4, 0.0), (2, 1, 8, 20, 3, .25), (3, 1, 9, 12, 1, 0.0), (4, 1, 16, 40, 6, .25),
          (2, 2, 16, 16, 9, .5)]  # (eta, min, max, trials, workers, eps)
# (K, eta, min, max, trials, time per unit, eps, curves, backend)
DRIVER = [(2, 3, 1, 9, 9, 1.0, 0.0, "crossing", "sim"), (3, 2, 1, 8, 12, 0.5, .05, "noisy", "sim"),
          (4, 3, 1, 27, 20, 0.1, .05, "noisy", "sim"), (6, 2, 1, 4, 15, 1.0, 0.0, "steady", "sim"),
          (9, 3, 1, 9, 5, 0.25, 0.0, "crossing", "sim"), (5, 2, 1, 8, 14, 0.25, .25, "ties", "sim"),
          (7, 2, 1, 16, 18, 0.1, 0.0, "crossing", "sim"), (2, 2, 1, 8, 8, 0.01, 0.0, "crossing", "process")]  # real sleeps: keep them short
PROPERTY = 3  # seeded random replays and 2 drivers with every parameter drawn
SHAPES = {"steady": "rankings that never change (the top stays at 1)", "crossing": "slow starters finish best",
          "noisy": "noisy curves", "ties": "scores on a grid of 1/4 (ties)"}


def curves_of(rng: np.random.Generator, shape: str, cap: int, rungs: int) -> np.ndarray:
    k = np.arange(rungs)[None, :]
    q = rng.uniform(0, 1, size=(cap, 1))
    if shape == "steady":
        return q - 0.5 ** k
    if shape == "crossing":
        return q * (k - 0.5) + 0.5 * rng.uniform(0, 1, size=(cap, rungs)) * (k == 0)
    if shape == "noisy":
        return q - 0.5 ** k + 0.08 * rng.standard_normal((cap, rungs))
    return rng.integers(0, 5, size=(cap, rungs)) / 4.0


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (label, (eta, lo, hi, cap, raw)) in enumerate(HAND):
        _add_replay(p, f"h{i}", label, (eta, lo, hi, cap, HAND_EPS[i]), raw)
    for i, (label, (eta, lo, hi, cap, eps, raw)) in enumerate(HAND_MORE):
        _add_replay(p, f"b{i}", label, (eta, lo, hi, cap, eps), raw)
    cases = list(RANDOM)
    for _ in range(PROPERTY):
        eta, lo = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        hi = lo * eta ** int(rng.integers(0, 4)) + int(rng.integers(0, eta))
        cases.append((eta, lo, hi, int(rng.integers(4, 41)), int(rng.integers(1, 9)), float(rng.choice([0, .25, .5]))))
    for i, (eta, lo, hi, cap, workers, eps) in enumerate(cases):
        _add_random(p, f"q{i}", rng, eta, lo, hi, cap, workers, eps,
                    "seeded random case" if i >= len(RANDOM) else "seeded random results")
    drivers = list(DRIVER)
    for _ in range(2):
        K, eta, lo = int(rng.integers(2, 10)), int(rng.integers(2, 5)), int(rng.integers(1, 3))
        hi, cap, tpu = lo * eta ** int(rng.integers(1, 4)), int(rng.integers(3, 25)), float(rng.choice([.1, .25, 1.]))
        drivers.append((K, eta, lo, hi, cap, tpu, float(rng.choice([0, .05])), str(rng.choice(list(SHAPES))), "sim"))
    for i, (K, eta, lo, hi, cap, tpu, eps, shape, backend) in enumerate(drivers):
        curves = curves_of(rng, shape, cap, len(Reference(eta, lo, hi, cap).r))
        note = (f", eps {eps:g}, time per unit {tpu:g}, {'seeded random case, ' if i >= len(DRIVER) else ''}"
                f"{SHAPES[shape]}, {'simulator' if backend == 'sim' else '2 real processes'}")
        _add_driver(p, f"d{i}", K, (eta, lo, hi, cap, eps), tpu, curves, backend, note)
    return p


def _add_replay(p: Plan, cid: str, label: str, cfg: tuple, raw) -> None:
    events = np.array(raw, dtype=np.float64).reshape(-1, 4)
    p.add(Case(id=cid, fn="replay", label=label, mode="call", timeout=5,
               args=[{"value": v} for v in cfg], data={"cfg": cfg}), shared={"events": events})


def _add_random(p: Plan, cid: str, rng: np.random.Generator, eta: int, lo: int, hi: int, cap: int, workers: int,
                eps: float, what: str) -> None:
    """Results of coarse scores (many ties) in the order an asynchronous run with random job lengths gives."""
    grid = rng.integers(0, 6, size=(cap, 8)) / 4.0
    spans = rng.uniform(0.5, 2.0, size=(cap, 8))
    ev, _, _ = simulate(Reference(eta, lo, hi, cap, eps), workers, lambda t, k: float(grid[t, k]), 1.0,
                        lambda t, k: float(spans[t, k]))
    _add_replay(p, cid, f"{what}, eta={eta}, resources {lo}..{hi}, {cap} trials, {workers} workers, eps {eps:g}",
                (eta, lo, hi, cap, eps), ev)


def _add_driver(p: Plan, cid: str, K: int, cfg: tuple, tpu: float, curves: np.ndarray, backend: str, note: str):
    eta, lo, hi, cap, eps = cfg
    case = Case(id=cid, fn="pasha_search", label=f"K={K}, eta={eta}, resources {lo}..{hi}, {cap} trials{note}",
                world_size=K, backend=backend, timeout=30 if backend == "process" else 10,
                data={"cfg": cfg, "tpu": tpu, "curves": curves, "record_messages": backend == "sim"})
    for r in range(K):  # only workers can train: the driver's copy of the curves is all NaN
        p.inputs[f"{cid}/curves/{r}"] = np.full_like(curves, np.nan) if r == 0 else curves
    case.args = [{"key": f"{cid}/curves", "per_rank": True}] + [{"value": v} for v in (eta, lo, hi, eps, tpu)]
    p.cases.append(case)


def _compare(res: CaseResult, what: str):
    ev = res.shared("events")
    sched = Reference(*res.case.data["cfg"])
    got = res.value(0, "replay table", shape=(len(ev), 4))
    ok = total = 0
    first = ""
    say = lambda r: "None" if r[1] < 0 else f"(trial {r[1]}, rung {r[2]})"  # noqa: E731
    for i, (kind, t, k, s) in enumerate(ev):
        call = f"on_result(trial {int(t)}, rung {int(k)}, score {s:g})" if kind == 0 else "next_job()"
        want = (sched.result(int(t), int(k), float(s)), -1, -1) if kind == 0 else (-1, *(sched.job() or (-1, -1)))
        row = tuple(int(x) for x in got[i])
        if what == "growth":
            total, ok = total + 1, ok + (row[3] == sched.top)
            if row[3] != sched.top and not first:
                first = (f"event {i}: after {call} top is {row[3]} but should be {sched.top} (it starts at min(1, s) "
                         f"and grows by one when a result at the top rung makes two trials there swap places by "
                         f"more than eps against rung top-1)")
        elif (what == "decisions") == (kind == 0):
            total, ok = total + 1, ok + (row[:3] == want)
            if row[:3] != want and not first:
                first = (f"event {i}: {call} returned {NAMES.get(row[0], repr(row[0]))!r} but should return "
                         f"{NAMES[want[0]]!r} (the top is tested before the fate is decided; a trial at the top "
                         f"rung pauses)" if kind == 0 else
                         f"event {i}: next_job() returned {say(row)} but should return {say(want)} (rungs top-1 "
                         f"down to 0, best promotable trial first, then a new trial, then None)")
    if ok < total:
        raise Fail(f"{ok} of {total} {'top values' if what == 'growth' else what} right; first wrong one: {first}"
                   + (f"; {ASKS}" if what == "growth" else ""))
    return 1.0, ""


def decisions(res: CaseResult):
    return _compare(res, "decisions")


def jobs(res: CaseResult):
    return _compare(res, "jobs")


def growth(res: CaseResult):
    return _compare(res, "growth")


def _schedule(res: CaseResult) -> Reference:
    curves, K = res.case.data["curves"], res.case.world_size
    ref = Reference(*res.case.data["cfg"])
    simulate(ref, K - 1, lambda t, k: float(curves[t, k]), res.case.data["tpu"])
    return ref


def _right(res: CaseResult) -> None:
    ref, K = _schedule(res), res.case.world_size
    bt, bs = ref.best()
    got = res.value(0, "[best trial, best score, top]", shape=(3,))
    err = abs(float(got[1]) - bs)  # compared in float64
    if int(got[0]) == bt and 1e-12 < err <= 1e-6 * max(1.0, abs(bs)):
        raise Fail(f"rank 0 reports the right trial, but its score {float(got[1])!r} has lost digits (an array of "
                   f"dtype {got.dtype}): return the score as its worker sent it, in float64")
    if int(got[2]) != ref.top:
        raise Fail(f"rank 0 reports a final top rung of {int(got[2])}, not the one PASHA reaches on these curves; {ASKS}")
    if int(got[0]) != bt or not err <= 1e-12:
        raise Fail(f"rank 0 reports trial {int(got[0])} with score {got[1]:.4g}, not the best trial of the PASHA "
                   f"schedule: receive from the worker whose job ends first, and hand jobs to idle workers lowest rank first")
    for w in range(1, K):
        n = res.value(w, "job count", array_only=False)  # a 0-d value comes back with shape (1,)
        if n.size != 1:
            raise Fail(f"worker {w} returned {n.size} numbers; return the number of jobs it ran")
        if int(n.reshape(-1)[0]) != len(ref.handed[w]):
            raise Fail(f"worker {w} ran {int(n.reshape(-1)[0])} jobs, not the number the asynchronous schedule gives it: "
                       f"a worker takes a new job as soon as its result is in (ties in finish time: the lower rank first)")


def driver(res: CaseResult):
    _right(res)
    return 1.0, ""


def protocol(res: CaseResult):
    """From the grader's recorded messages and clock: a star around the driver, one [trial, rung, units] per job
    in the schedule's order, one [score] back per job, one stop, and the makespan of the asynchronous schedule."""
    graded_after(lambda: _right(res), "the best trial, the top and the job counts")
    ref, K, msgs = _schedule(res), res.case.world_size, res.messages
    for s, t, _ in msgs:
        if 0 not in (s, t):
            raise Fail(f"worker {s} sent a message to worker {t}; workers talk only to the driver (rank 0)")
    for w in range(1, K):
        mine = ref.handed[w]
        down = [a for s, t, a in msgs if s == 0 and t == w]
        up = [a for s, t, a in msgs if s == w and t == 0]
        if len(down) != len(mine) + 1 or len(up) != len(mine):
            raise Fail(f"worker {w} got {len(down)} and sent {len(up)} messages for its {len(mine)} jobs: one message "
                       f"per job ([trial, rung, units] together), one [score] back, one stop")
        for a, (t, k, u, sc) in zip(down, mine):
            if a.dtype != np.float64 or a.shape != (3,) or tuple(a.tolist()) != (t, k, u):
                raise Fail(f"a job message to worker {w} is not the float64 [trial, rung, units] of the job the schedule "
                           f"hands it next (units = r_k - r_(k-1), r_0 at rung 0)")
        for a, (t, k, u, sc) in zip(up, mine):
            if a.dtype != np.float64 or a.size != 1 or not a.reshape(-1)[0] == sc:
                raise Fail(f"worker {w}'s reply is not the float64 [score] of the job it was sent")
        if down[-1].size < 1 or not down[-1].reshape(-1)[0] < 0:
            raise Fail(f"the driver's last message to worker {w} is not the stop [-1, -1, -1]")
    took, makespan = res.meta.get("sim_time"), ref.finished_at
    slack = 1e-3 * max(1, len(msgs)) + 0.01 * makespan  # message latencies on the simulated network
    if not isinstance(took, (int, float)) or took > makespan + slack:
        raise Fail(f"the search took {took:.4g} simulated seconds, the asynchronous schedule {makespan:.4g}: hand out "
                   f"a job the moment a worker is idle, let the workers train in parallel, each for time_per_unit * units")
    return 1.0, ""


TESTS = [
    Test("decisions", "on_result: promote, continue (paused at the top) or stop, after the top is tested",
         select=lambda c: c.fn == "replay", check=decisions),
    Test("jobs", "next_job promotes from rung top-1 down to 0, then starts new trials",
         select=lambda c: c.fn == "replay", check=jobs),
    Test("growth", "the top rung after every event: starts at 1, grows only when two trials swap by more than eps",
         select=lambda c: c.fn == "replay", check=growth),
    Test("driver", "pasha_search: the best trial, the final top and the jobs per worker (K = 2..9, 2 real processes)",
         select=lambda c: c.fn == "pasha_search", check=driver),
    Test("protocol", "from the grader's messages: one job and one result per job, their contents, the makespan",
         select=lambda c: c.fn == "pasha_search" and c.backend == "sim", check=protocol),
]
