# %% [markdown]
# # Lab 33: EASY backfill over CPUs and GPUs, online, with jobs killed at their limit
#
# Chapter 33's simulators schedule **one** resource (nodes) and know every job's runtime in advance:
# the event loop pushes `now + runtime` on its heap the moment a job starts, and the trace promises
# runtime <= estimate. A GPU cluster is not like that. A job asks for CPUs **and** GPUs; the scheduler
# sees only what the user typed (the request and a time limit), learns that a job ended when it ends,
# and the job may run past its limit, in which case it is **killed at the limit**. This lab builds EASY
# backfill for that world: two resources, an online scheduler (events in, start decisions out), and a
# central controller that drives it over the communicator while K login nodes hold the jobs.
#
# **The machine and the jobs.** The machine has `cpus` CPUs and `gpus` GPUs. Job j arrives at
# `submit_j`, asks for `c_j >= 1` CPUs and `g_j >= 0` GPUs (never more than the machine has) and states a
# limit `l_j > 0`. Once started at `s_j` it holds its CPUs and GPUs until it ends at
# `s_j + min(r_j, l_j)`: its true runtime `r_j` if that is within the limit, else it is killed at
# `s_j + l_j`. Jobs are rigid and never preempted. The queue is FIFO by (submit, job id).
#
# **The rule (EASY over two resources).** Decisions happen only at events (an arrival or an end); at an
# event time t, first every job that ended at or before t releases what it held, then every job
# submitted at or before t joins the queue, then:
#
# 1. **Heads.** While the queue's head fits in what is free now (CPUs *and* GPUs), start it.
# 2. **The head's reservation.** If a head is left, walk the running jobs by their *limit* end
#    `s_i + l_i` (the only end the scheduler can count on). The **shadow time** S is the earliest such
#    time at which the head fits in both resources, counting **every** job whose limit end is at or
#    before S as released (several jobs can reach their limit at the same time: all of them count,
#    unlike the chapter's `_shadow`, which stops at the first job of a tie). The **extra** CPUs and GPUs
#    are what is free at S minus the head's request, one number per resource.
# 3. **Backfill.** Scan the rest of the queue in order once. A job that fits now starts if either it
#    ends by its limit no later than S (`t + l_j <= S`), or it fits in the extra of **both** resources
#    (`c_j <= extra_cpus` and `g_j <= extra_gpus`); a job started by this second rule takes its CPUs and
#    GPUs out of the extra. The first rule is tested first and takes nothing out of the extra.
#
# Because a job ends by its limit at the latest, the head starts no later than any reservation it was
# given, in either resource. Times are integers or floats; compare them exactly as written above.
#
# **What you write.**
#
# * `EasyBackfill2(cpus, gpus)`, the online scheduler: `submit(job, t, cpus, gpus, limit)`,
#   `finish(job, t)`, `decide(t) -> list of job ids to start at t`, heads first, then the backfilled jobs
#   in queue order. It never sees a runtime.
# * `replay(cpus, gpus, jobs, runtimes)`: the single-machine event loop around it. `jobs` is an (n, 4)
#   array of rows (submit, c, g, l) in submission order (job j is row j), int64 or float64;
#   `runtimes` (n,) the true runtimes, which only the loop uses, to know when a started job ends
#   (`s + min(r, l)`). Returns the start times, float64 (n,).
# * `easy_cluster(comm, cpus, gpus, jobs, runtimes)`: K ranks. Rank r is a login node holding its own
#   jobs only: `jobs` is (n_r, 5) with rows (id, submit, c, g, l), ids global and distinct, and
#   `runtimes` (n_r,). Rank 0 is also the controller. Every rank returns the start times of its own
#   jobs, float64 (n_r,), in the order of its rows. The controller never learns a runtime: a login node
#   reports when its job ends.
#
# **The messages** (the grader counts them on its own side of the network, so the format is fixed):
#
# | when | who | what |
# |---|---|---|
# | first | rank r > 0 to 0 | its `jobs` table as given, (n_r, 5), nothing else (no runtimes) |
# | per start of a job of rank r > 0 | 0 to r | `[id, t]`, float64 (2,) |
# | the reply | r to 0 | `[end]`, float64 (1,): `t + min(r_j, l_j)` |
# | at the end | 0 to each r > 0 | `[-1, -1]`, float64 (2,) |
#
# Rank 0's own jobs need no message. So rank r > 0 sends exactly n_r + 1 messages and receives n_r + 1.
#
# **What the grader checks.** `replay` against the grader's own single-machine simulator on seeded
# traces (empty, one job, one resource, two resources, integer times with ties everywhere, float times,
# jobs killed at their limit), and the legality of every schedule you return, recomputed from your start
# times: no start before submission, never more CPUs or GPUs in use than the machine has, and at every
# event the queue's head starts no later than its two-resource reservation. `easy_cluster` for K = 1, 2,
# 3, 5, 8 (more ranks than jobs, ranks without jobs), uneven shares and 2 real processes: every rank's
# starts; and, from its own trace and recorded messages, the protocol above (a table without runtimes,
# one start per job, an end equal to `t + min(r, l)`, one stop). `scaleoutai.infra` (the chapter's
# simulators) cannot be imported in the grader.

# %% tags=["parameters"]
K = 4  # smoke: 3
N_JOBS = 300  # smoke: 60
CPUS = 64
GPUS = 8
SEED = 0

# %%
import heapq

import numpy as np

from scaleoutai import cluster


# %%
class EasyBackfill2:
    """Online EASY backfill over CPUs and GPUs. Sees requests and limits, never runtimes."""

    def __init__(self, cpus, gpus):
        ### BEGIN SOLUTION
        self.room = [int(cpus), int(gpus)]  # free CPUs and GPUs now
        self.waiting = []  # (submit, job), kept in FIFO order
        self.ask = {}  # job -> (cpus, gpus, limit)
        self.deadline = {}  # running job -> its limit end, s + l
        ### END SOLUTION

    def submit(self, job, t, cpus, gpus, limit):
        """Job ``job`` arrives at ``t`` asking for ``cpus`` CPUs and ``gpus`` GPUs for at most ``limit``."""
        ### BEGIN SOLUTION
        self.ask[job] = (int(cpus), int(gpus), limit)
        pos = len(self.waiting)
        while pos and self.waiting[pos - 1] > (t, job):  # arrivals come in order: usually no move
            pos -= 1
        self.waiting.insert(pos, (t, job))
        ### END SOLUTION

    def finish(self, job, t):
        """Running job ``job`` ended at ``t`` (by itself or killed at its limit): its CPUs and GPUs are free."""
        ### BEGIN SOLUTION
        c, g, _ = self.ask[job]
        self.deadline.pop(job)
        self.room[0] += c
        self.room[1] += g
        ### END SOLUTION

    def reservation(self):
        """(shadow time, extra CPUs, extra GPUs) of the queue's head, or None with an empty queue."""
        ### BEGIN SOLUTION
        if not self.waiting:
            return None
        need_c, need_g, _ = self.ask[self.waiting[0][1]]
        have_c, have_g = self.room
        if need_c <= have_c and need_g <= have_g:
            return None  # the head fits now: decide() starts it
        by_end = sorted(self.deadline.items(), key=lambda kv: (kv[1], kv[0]))
        k = 0
        while k < len(by_end):
            when = by_end[k][1]
            while k < len(by_end) and by_end[k][1] == when:  # a tie releases all at once
                c, g, _ = self.ask[by_end[k][0]]
                have_c, have_g = have_c + c, have_g + g
                k += 1
            if need_c <= have_c and need_g <= have_g:
                return when, have_c - need_c, have_g - need_g
        raise RuntimeError("the head never fits: it asks for more than the machine has")
        ### END SOLUTION

    def decide(self, t):
        """The jobs to start at ``t``: queue heads that fit, then backfilled jobs in queue order (see above)."""
        ### BEGIN SOLUTION
        go = []

        def launch(job):
            c, g, limit = self.ask[job]
            self.room[0] -= c
            self.room[1] -= g
            self.deadline[job] = t + limit
            go.append(job)
        while self.waiting:
            c, g, _ = self.ask[self.waiting[0][1]]
            if c > self.room[0] or g > self.room[1]:
                break
            launch(self.waiting.pop(0)[1])
        if not self.waiting:
            return go
        shadow, spare_c, spare_g = self.reservation()
        still = self.waiting[:1]
        for entry in self.waiting[1:]:
            c, g, limit = self.ask[entry[1]]
            if c <= self.room[0] and g <= self.room[1]:
                if t + limit <= shadow:  # gone by its limit before the head needs anything
                    launch(entry[1])
                    continue
                if c <= spare_c and g <= spare_g:  # lives on what the head leaves at the shadow
                    spare_c, spare_g = spare_c - c, spare_g - g
                    launch(entry[1])
                    continue
            still.append(entry)
        self.waiting = still
        return go
        ### END SOLUTION


# %%
def run_events(cpus, gpus, arrivals, launch):
    """The event loop: arrivals are (submit, id, c, g, l) sorted by (submit, id); launch(id, t) starts a
    job and returns its end time. Returns {id: start}."""
    ### BEGIN SOLUTION
    sched, started = EasyBackfill2(cpus, gpus), {}
    pending, nxt = [], 0  # (end, id) of running jobs; the next arrival
    while nxt < len(arrivals) or pending:
        t = min(arrivals[nxt][0] if nxt < len(arrivals) else float("inf"), pending[0][0] if pending else float("inf"))
        while pending and pending[0][0] <= t:
            done, job = heapq.heappop(pending)
            sched.finish(job, done)
        while nxt < len(arrivals) and arrivals[nxt][0] <= t:
            sub, job, c, g, limit = arrivals[nxt]
            sched.submit(job, sub, c, g, limit)
            nxt += 1
        for job in sched.decide(t):
            started[job] = t
            heapq.heappush(pending, (launch(job, t), job))
    return started
    ### END SOLUTION


# %%
def replay(cpus, gpus, jobs, runtimes):
    """One machine: the start time of every job (float64, row order)."""
    ### BEGIN SOLUTION
    jobs = np.asarray(jobs).reshape(-1, 4)
    runtimes = np.asarray(runtimes).reshape(-1)
    rows = [(jobs[j, 0].item(), j, int(jobs[j, 1]), int(jobs[j, 2]), jobs[j, 3].item()) for j in range(len(jobs))]
    started = run_events(cpus, gpus, rows, lambda j, t: t + min(runtimes[j].item(), rows[j][4]))
    out = np.full(len(jobs), np.nan)
    for j, t in started.items():
        out[j] = t
    return out
    ### END SOLUTION


# %%
def easy_cluster(comm, cpus, gpus, jobs, runtimes):
    """K login nodes, rank 0 the controller: every rank returns its own jobs' start times (float64)."""
    ### BEGIN SOLUTION
    jobs = np.asarray(jobs).reshape(-1, 5)
    runtimes = np.asarray(runtimes).reshape(-1)
    mine = np.full(len(jobs), np.nan)
    where = {int(jobs[r, 0]): r for r in range(len(jobs))}
    if comm.rank > 0:  # a login node: hand over the table, then answer starts until told to stop
        comm.send(np.ascontiguousarray(jobs), 0)
        while True:
            job, t = comm.recv(0).tolist()
            if job < 0:
                return mine
            r = where[int(job)]
            mine[r] = t
            comm.send(np.array([t + min(runtimes[r].item(), jobs[r, 4].item())]), 0)
    owner = {j: 0 for j in where}
    rows = [(jobs[r, 1].item(), int(jobs[r, 0]), int(jobs[r, 2]), int(jobs[r, 3]), jobs[r, 4].item())
            for r in range(len(jobs))]
    for peer in range(1, comm.size):
        table = np.asarray(comm.recv(peer)).reshape(-1, 5)
        for row in table:
            owner[int(row[0])] = peer
            rows.append((row[1].item(), int(row[0]), int(row[2]), int(row[3]), row[4].item()))
    rows.sort(key=lambda a: (a[0], a[1]))

    def launch(job, t):
        if owner[job] == 0:
            r = where[job]
            mine[r] = t
            return t + min(runtimes[r].item(), jobs[r, 4].item())
        comm.send(np.array([float(job), float(t)]), owner[job])
        return comm.recv(owner[job])[0].item()
    run_events(cpus, gpus, rows, launch)
    for peer in range(1, comm.size):
        comm.send(np.array([-1.0, -1.0]), peer)
    return mine
    ### END SOLUTION


# %% [markdown]
# Try it. A seeded trace of GPU jobs (a few big multi-GPU jobs among many small ones, limits up to 4x
# the runtime, and one job in ten running past its limit) is scheduled once by `replay` and once by
# `easy_cluster` on the simulator with the jobs dealt to K login nodes at random; the two must agree
# start for start, and the schedule must never use more CPUs or GPUs than the machine has.

# %% tags=["demo"]
def make_jobs(n, cpus, gpus, seed):
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 30 * n, n))
    c = rng.integers(1, cpus // 2 + 1, n)
    g = np.where(rng.random(n) < 0.6, rng.integers(0, gpus + 1, n), 0)
    runtime = rng.uniform(10, 400, n)
    limit = runtime * rng.uniform(1, 4, n)
    killed = rng.random(n) < 0.1
    limit[killed] = runtime[killed] * rng.uniform(0.3, 0.9, killed.sum())
    return np.stack([submit, c, g, limit], axis=1), runtime


def worker(comm, cpus, gpus, table, runtime, owners):
    ids = np.flatnonzero(owners == comm.rank)
    return easy_cluster(comm, cpus, gpus, np.column_stack([ids, table[ids]]), runtime[ids])


try:
    table, runtime = make_jobs(N_JOBS, CPUS, GPUS, SEED)
    start = replay(CPUS, GPUS, table, runtime)
    end = start + np.minimum(runtime, table[:, 3])
    for col, cap in ((1, CPUS), (2, GPUS)):
        busy = max(table[(start <= t) & (end > t), col].sum() for t in start)
        assert busy <= cap, f"column {col}: {busy} in use on a machine of {cap}"
    owners = np.random.default_rng(SEED + 1).integers(0, K, N_JOBS)
    res = cluster.run(worker, K, backend="sim", args=(CPUS, GPUS, table, runtime, owners), timeout=60)
    both = np.full(N_JOBS, np.nan)
    for r in range(K):
        both[owners == r] = res.values[r]
    assert np.array_equal(both, start), "easy_cluster and replay disagree"
    print(f"{N_JOBS} jobs, mean wait {np.mean(start - table[:, 0]):.1f} s, "
          f"{int((runtime > table[:, 3]).sum())} killed at their limit; messages sent per rank:",
          [s.messages_sent for s in res.stats])
except (NotImplementedError, cluster.RankError) as err:
    print("not there yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
