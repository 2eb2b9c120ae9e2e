# %% [markdown]
# # Lab 21: an ASHA scheduler that promotes the right trials
#
# Chapter 21's asynchronous successive halving (ASHA, Li et al. 2020) trains many trials briefly and
# gives more resource only to the best. Rungs have resources r_k = min_resource · eta^k for
# k = 0..s, the largest with r_s <= max_resource. Unlike synchronous successive halving there is no
# barrier: whenever a worker is free, the scheduler
#
# 1. looks at rungs k = s-1, s-2, ..., 0 (highest first) and promotes the best trial that is among the
#    top floor(n_k / eta) of the n_k results seen so far at rung k and has not been promoted from rung k
#    yet; it runs at rung k+1;
# 2. if no trial is promotable, starts a new trial at rung 0 (trials are numbered 0, 1, 2, ...), until
#    `max_trials` trials exist; then there is nothing to do (`None`).
#
# A higher score is better, and **ties go to the older trial** (the lower number).
#
# `on_result(trial, rung, score)` records a result and returns the trial's fate as of now:
# `"stop"` at the top rung s; `"promote"` if the trial is now among the top floor(n_k / eta) at its
# rung and has not been promoted from it; `"continue"` otherwise (paused: as rung k fills up it may
# still be promoted). `next_job()` returns `(trial, rung)` or `None` and marks a promotion as done.
# `best()` returns `(trial, score)`: the best score at the highest rung any trial reached.
#
# Then `asha_search(comm, curves, eta, min_resource, max_resource, time_per_unit)` runs it on K ranks:
# rank 0 schedules, ranks 1..K-1 train. Trial t at rung k scores `curves[t, k]` (a table standing in
# for real training; `len(curves)` is max_trials), and a job from r_from (r_{k-1}, or 0 at rung 0) to
# r_k takes `comm.compute(time_per_unit * (r_k - r_from))`. `comm.recv(src)` needs a source, so rank 0
# plays the network: it notes when each busy worker's job ends (the time it handed the job out plus
# the job's duration) and receives next from the worker whose job ends first (ties: the lower rank).
# At the start and after each result, rank 0 hands a job to every idle worker, lowest rank first,
# until `next_job()` returns `None`; when no worker is busy it tells every worker to stop. Rank 0
# returns `np.array([best_trial, best_score])`; a worker returns the number of jobs it ran.
#
# The grader feeds your class hand-built and seeded random sequences of results (with ties) and checks
# every decision and every job against its own scheduler, then runs `asha_search` for K = 2..9.

# %% tags=["parameters"]
K = 5  # smoke: 3
TRIALS = 27  # smoke: 9

# %%
import numpy as np

from scaleoutai import cluster

DECISIONS = {"continue": 0, "promote": 1, "stop": 2}


def replay(eta, min_resource, max_resource, max_trials, events):
    """Given (the grader calls it; leave it as it is): feed rows (kind, trial, rung, score) to a fresh
    ASHA, kind 0 = on_result, kind 1 = next_job; one output row each: [decision code, -1, -1] or
    [-1, trial, rung] (-1, -1 for None); an unknown decision is code 9."""
    sched = ASHA(eta, min_resource, max_resource, max_trials)
    out = []
    for kind, trial, rung, score in np.asarray(events, dtype=np.float64):
        if int(kind) == 0:
            out.append([DECISIONS.get(sched.on_result(int(trial), int(rung), float(score)), 9), -1, -1])
        else:
            nxt = sched.next_job()
            out.append([-1, -1, -1] if nxt is None else [-1, int(nxt[0]), int(nxt[1])])
    return np.array(out, dtype=np.int64).reshape(-1, 3)


# %%
class ASHA:
    """Asynchronous successive halving over trials 0..max_trials-1; a higher score is better."""

    def __init__(self, eta, min_resource, max_resource, max_trials):
        ### BEGIN SOLUTION
        self.eta, self.max_trials = int(eta), int(max_trials)
        self.rungs = [float(min_resource)]
        while self.rungs[-1] * self.eta <= max_resource * (1 + 1e-12):
            self.rungs.append(self.rungs[-1] * self.eta)
        self.scores = [{} for _ in self.rungs]  # rung -> {trial: score}
        self.promoted = [set() for _ in self.rungs]
        self.started = 0
        ### END SOLUTION

    def promotable(self, rung):
        """Trials in the top floor(n / eta) at ``rung`` not yet promoted from it, best first."""
        ### BEGIN SOLUTION
        seen = self.scores[rung]
        order = sorted(seen, key=lambda t: (-seen[t], t))
        return [t for t in order[:len(seen) // self.eta] if t not in self.promoted[rung]]
        ### END SOLUTION

    def on_result(self, trial, rung, score):
        """Record a result; return "promote", "continue" or "stop"."""
        ### BEGIN SOLUTION
        self.scores[rung][trial] = float(score)
        if rung == len(self.rungs) - 1:
            return "stop"
        return "promote" if trial in self.promotable(rung) else "continue"
        ### END SOLUTION

    def next_job(self):
        """(trial, rung) to run now, or None."""
        ### BEGIN SOLUTION
        for k in reversed(range(len(self.rungs) - 1)):
            ready = self.promotable(k)
            if ready:
                self.promoted[k].add(ready[0])
                return ready[0], k + 1
        if self.started < self.max_trials:
            self.started += 1
            return self.started - 1, 0
        return None
        ### END SOLUTION

    def best(self):
        """(trial, score): the best score at the highest rung any trial reached; ties to the older trial."""
        ### BEGIN SOLUTION
        top = max(k for k in range(len(self.rungs)) if self.scores[k])
        seen = self.scores[top]
        t = min(seen, key=lambda q: (-seen[q], q))
        return t, seen[t]
        ### END SOLUTION


# %%
def asha_search(comm, curves, eta, min_resource, max_resource, time_per_unit):
    """Rank 0 schedules with ASHA, ranks 1..K-1 train; see the introduction for the protocol."""
    ### BEGIN SOLUTION
    if comm.rank > 0:
        jobs = 0
        while True:
            msg = comm.recv(0)
            if msg[0] < 0:
                return np.array(jobs)
            trial, rung, r_from, r_to = int(msg[0]), int(msg[1]), msg[2], msg[3]
            comm.compute(time_per_unit * (r_to - r_from))
            comm.send(np.array([curves[trial, rung]]), 0)
            jobs += 1
    sched = ASHA(eta, min_resource, max_resource, len(curves))
    now, busy, idle = 0.0, {}, list(range(1, comm.size))
    while True:
        while idle:
            job = sched.next_job()
            if job is None:
                break
            w = idle.pop(0)
            trial, rung = job
            r_from = sched.rungs[rung - 1] if rung else 0.0
            comm.send(np.array([trial, rung, r_from, sched.rungs[rung]], dtype=np.float64), w)
            busy[w] = (now + time_per_unit * (sched.rungs[rung] - r_from), trial, rung)
        if not busy:
            break
        w = min(busy, key=lambda q: (busy[q][0], q))
        now, trial, rung = busy.pop(w)
        sched.on_result(trial, rung, float(comm.recv(w)[0]))
        idle = sorted(idle + [w])
    for w in range(1, comm.size):
        comm.send(np.array([-1.0]), w)
    trial, score = sched.best()
    return np.array([trial, score], dtype=np.float64)
    ### END SOLUTION


# %% [markdown]
# Learning curves with a known best trial: trial t has quality q_t and scores q_t - 2^-k at rung k,
# so every rung ranks the trials alike and ASHA should end on the trial with the largest q_t.

# %%
rng = np.random.default_rng(21)
quality = rng.uniform(0, 1, TRIALS)
curves = quality[:, None] - 0.5 ** np.arange(4)[None, :]
try:
    res = cluster.run(asha_search, K, backend="sim", args=(curves, 3, 1, 27, 0.1), timeout=60)
    print("best trial and score:", res.values[0], "| the true best trial:", int(np.argmax(quality)))
    print("jobs per worker:", [int(v) for v in res.values[1:]], "| makespan", round(res.sim_time, 2), "s")
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(ASHA, asha_search)
