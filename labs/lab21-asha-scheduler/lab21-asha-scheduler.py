# %% [markdown]
# # Lab 21: PASHA, an ASHA that grows its maximum resource only while the ranking changes
#
# Chapter 21's ASHA (Li et al. 2020) fixes the rungs r_k = min_resource · eta^k, k = 0..s (the largest
# with r_s <= max_resource), and keeps promoting until some trials reach r_s. Its research directions
# ask how to choose that maximum without knowing the learning curves: when the ranking at a small
# resource already predicts the ranking at a larger one, every epoch past that point is wasted. PASHA
# (progressive ASHA, Bohdal, Balles, Wistuba, Archambeau and Seeger 2023) starts with only the two
# lowest rungs and adds a rung only when the two top rungs disagree on the order of the trials. The
# chapter does not build it; in this lab you do, in a simplified deterministic form of PASHA's soft
# ranking, and then drive it over K ranks.
#
# **The scheduler.** `PASHA(eta, min_resource, max_resource, max_trials, eps)` keeps the same rungs as
# ASHA and an attribute `top`, the highest rung jobs may reach now: `top = min(1, s)` at the start,
# and it never shrinks.
#
# 1. `next_job()` looks at rungs k = top-1, top-2, ..., 0 (highest first) and promotes the best trial that
#    is among the top floor(n_k / eta) of the n_k results seen at rung k and has not been promoted from k
#    yet; it runs at rung k+1 (so never above `top`). Otherwise it starts a new trial at rung 0 (trials
#    are numbered 0, 1, 2, ...) until `max_trials` exist; then it returns `None`.
# 2. `on_result(trial, rung, score)` records the score. If `rung == top < s`, it then tests the ranking:
#    over the trials with a result at rung `top` (each also has one at `top - 1`), two trials a and b
#    **disagree** when a beats b at `top` by more than eps and b beats a at `top - 1` by more than eps
#    (`S[top][a] - S[top][b] > eps and S[top-1][b] - S[top-1][a] > eps`, in float64). If any pair
#    disagrees, `top` grows by one. Only then is the trial's fate returned: `"stop"` at rung s,
#    `"promote"` if `rung < top` and the trial is now promotable from its rung, `"continue"` otherwise
#    (a trial paused at the current top is not stopped: it may be promoted once the top grows).
# 3. `best()` returns `(trial, score)`: the best score at the highest rung any trial reached.
#
# A higher score is better and **ties go to the older trial** (the lower number), in promotions and in
# `best()`.
#
# **The driver.** `pasha_search(comm, curves, eta, min_resource, max_resource, eps, time_per_unit)`:
# rank 0 schedules, ranks 1..K-1 train. Trial t at rung k scores `curves[t, k]` (a table standing in for
# training; `len(curves)` is max_trials; rank 0's copy is all NaN, so only workers can score), and a job
# at rung k trains `units = r_k - r_{k-1}` (r_0 at rung 0), taking `comm.compute(time_per_unit * units)`.
# Rank 0 sends each job as **one** float64 message `[trial, rung, units]`; the worker answers with one
# float64 message `[score]`; at the end every worker gets the stop message `[-1, -1, -1]`. Rank 0 plays
# the network: it notes when each busy worker's job ends (the time it handed the job out plus
# `time_per_unit * units`) and receives next from the worker whose job ends first (ties: the lower
# rank). At the start and after each result it hands a job to every idle worker, lowest rank first,
# until `next_job()` returns `None`; when no worker is busy it stops them all. Rank 0 returns
# `np.array([best_trial, best_score, top])` in float64; a worker returns the number of jobs it ran.
#
# **What the grader checks.** It replays hand-built and seeded random sequences of results against
# its own PASHA and compares every decision, every job and the value of `top` after every event; then
# it runs `pasha_search` for K = 2..9 on its own simulator (and once on 2 real processes) and checks the
# best trial, the final top, the jobs per worker, and, from the messages it carries, one job message and
# one result per job, their contents, and the makespan of the asynchronous schedule. `scaleoutai.parallel`
# (the chapter's ASHA and its driver) is unimportable in the grader: write the scheduler yourself.

# %% tags=["parameters"]
K = 5  # smoke: 3
TRIALS = 27  # smoke: 9

# %%
import bisect
import heapq
import itertools

import numpy as np

from scaleoutai import cluster

DECISIONS = {"continue": 0, "promote": 1, "stop": 2}


def replay(eta, min_resource, max_resource, max_trials, eps, events):
    """Given (the grader calls it; leave it as it is): feed rows (kind, trial, rung, score) to a fresh
    PASHA, kind 0 = on_result, kind 1 = next_job; one output row each: [decision code, -1, -1, top] or
    [-1, trial, rung, top] (-1, -1 for None), top read after the call; an unknown decision is code 9."""
    sched = PASHA(eta, min_resource, max_resource, max_trials, eps)
    out = []
    for kind, trial, rung, score in np.asarray(events, dtype=np.float64).reshape(-1, 4):
        if int(kind) == 0:
            code = DECISIONS.get(sched.on_result(int(trial), int(rung), float(score)), 9)
            out.append([code, -1, -1, int(sched.top)])
        else:
            nxt = sched.next_job()
            out.append([-1, -1, -1, int(sched.top)] if nxt is None else [-1, int(nxt[0]), int(nxt[1]), int(sched.top)])
    return np.array(out, dtype=np.int64).reshape(-1, 4)


# %%
class PASHA:
    """Progressive ASHA over trials 0..max_trials-1; a higher score is better."""

    def __init__(self, eta, min_resource, max_resource, max_trials, eps):
        ### BEGIN SOLUTION
        self.eta, self.cap, self.eps = int(eta), int(max_trials), float(eps)
        res = [float(min_resource)]
        while res[-1] * self.eta <= max_resource * (1 + 1e-12):
            res.append(res[-1] * self.eta)
        self.resources = res
        self.last = len(res) - 1                   # s, the highest rung there is
        self.top = min(1, self.last)               # the highest rung jobs may reach now
        self.results = {k: {} for k in range(len(res))}   # rung -> {trial: score}
        self.moved_up = {k: set() for k in range(len(res))}
        self.n_started = 0
        ### END SOLUTION

    def ranked(self, rung):
        """Trials with a result at ``rung``, best first (ties: the older trial first)."""
        ### BEGIN SOLUTION
        at = self.results[rung]
        return sorted(at, key=lambda trial: (-at[trial], trial))
        ### END SOLUTION

    def disagree(self):
        """True when two trials at rung ``top`` are ordered the other way at ``top - 1`` (by more than eps)."""
        ### BEGIN SOLUTION
        hi, lo = self.results[self.top], self.results[self.top - 1]
        ahead = [(a, b) for a in hi for b in hi if hi[a] - hi[b] > self.eps]   # a beats b at the top
        return any(lo[b] - lo[a] > self.eps for a, b in ahead)                # ... and b beats a below
        ### END SOLUTION

    def on_result(self, trial, rung, score):
        """Record a result, grow ``top`` if the two top rungs disagree; return "promote", "continue" or "stop"."""
        ### BEGIN SOLUTION
        self.results[rung][trial] = float(score)
        if rung == self.top < self.last and self.disagree():
            self.top += 1
        fate = "continue"
        if rung == self.last:
            fate = "stop"
        elif rung < self.top and trial not in self.moved_up[rung]:
            quota = len(self.results[rung]) // self.eta
            fate = "promote" if trial in self.ranked(rung)[:quota] else fate
        return fate
        ### END SOLUTION

    def next_job(self):
        """(trial, rung) to run now, or None."""
        ### BEGIN SOLUTION
        for k in range(self.top - 1, -1, -1):
            quota = len(self.results[k]) // self.eta
            waiting = [t for t in self.ranked(k)[:quota] if t not in self.moved_up[k]]
            if waiting:
                self.moved_up[k].add(waiting[0])
                return waiting[0], k + 1
        fresh = self.n_started
        self.n_started = min(self.cap, fresh + 1)
        return (fresh, 0) if fresh < self.cap else None
        ### END SOLUTION

    def best(self):
        """(trial, score): the best score at the highest rung any trial reached; ties to the older trial."""
        ### BEGIN SOLUTION
        reached = [k for k in self.results if self.results[k]]
        k = max(reached)
        winner = self.ranked(k)[0]
        return winner, self.results[k][winner]
        ### END SOLUTION


# %%
def pasha_search(comm, curves, eta, min_resource, max_resource, eps, time_per_unit):
    """Rank 0 schedules with PASHA, ranks 1..K-1 train; see the introduction for the protocol."""
    ### BEGIN SOLUTION
    if comm.rank > 0:
        for ran in itertools.count():
            trial, rung, units = comm.recv(0)
            if trial < 0:
                return np.array(ran)
            comm.compute(time_per_unit * units)
            comm.send(np.array([curves[int(trial), int(rung)]], dtype=np.float64), 0)
    sched = PASHA(eta, min_resource, max_resource, len(curves), eps)
    free = list(range(1, comm.size))               # kept sorted: the lowest rank is served first
    running = []                                   # heap of (end time, worker, trial, rung)

    def hand_out(now):
        while free and (job := sched.next_job()) is not None:
            trial, rung = job
            units = sched.resources[rung] - (sched.resources[rung - 1] if rung > 0 else 0.0)
            worker = free.pop(0)
            comm.send(np.array([trial, rung, units], dtype=np.float64), worker)
            heapq.heappush(running, (now + time_per_unit * units, worker, trial, rung))

    hand_out(0.0)
    while running:
        clock, worker, trial, rung = heapq.heappop(running)
        sched.on_result(trial, rung, float(comm.recv(worker)[0]))
        bisect.insort(free, worker)
        hand_out(clock)
    for worker in range(1, comm.size):
        comm.send(np.array([-1.0, -1.0, -1.0]), worker)
    trial, score = sched.best()
    return np.array([trial, score, sched.top], dtype=np.float64)
    ### END SOLUTION


# %% [markdown]
# Two families of learning curves. In the first every rung ranks the trials alike (trial t scores
# q_t - 2^-k at rung k), so the two lowest rungs never disagree: PASHA stays at `top = 1`, trains far
# less than ASHA would, and still ends on the trial with the largest q_t. In the second, slow starters
# finish best (the order flips between rungs), so PASHA must keep growing.

# %% tags=["demo"]
rng = np.random.default_rng(21)
quality = rng.uniform(0, 1, TRIALS)
steady = quality[:, None] - 0.5 ** np.arange(4)[None, :]
crossing = quality[:, None] * (np.arange(4)[None, :] - 0.5)  # the order flips between rungs 0 and 1
try:
    for name, curves in (("steady", steady), ("crossing", crossing)):
        res = cluster.run(pasha_search, K, backend="sim", args=(curves, 3, 1, 27, 0.01, 0.1), timeout=60)
        best_trial, best_score, top = res.values[0]
        print(f"{name}: best trial {int(best_trial)} (score {best_score:.3f}), top rung {int(top)}, "
              f"jobs per worker {[int(v) for v in res.values[1:]]}, makespan {res.sim_time:.2f} s")
        if name == "steady":
            assert int(top) == 1 and int(best_trial) == int(np.argmax(quality)), "steady curves: stay at rung 1"
        else:
            assert int(top) > 1, "crossing curves: the two top rungs disagree, so the top must grow"
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
