# %% [markdown]
# # Chapter 33 solutions: Cluster scheduling
#
# Worked solutions to the exercises of `chapters/33-cluster-scheduling` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.
#
# The policy variants of Exercises 1 and 2 reuse the chapter's event loop (`scheduling._Loop`,
# `scheduling._shadow`) and are checked against a second-by-second stepping reference written here
# from scratch, in the spirit of `sched_metrics.reference_simulate`. The simulator is fast, so the
# chapter's full 10,000-job trace is used throughout; the file runs in a few seconds.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, datasets
from scaleoutai.infra import sched_dl as dl
from scaleoutai.infra import sched_metrics as sm
from scaleoutai.infra import sched_policies as sp
from scaleoutai.infra import scheduling as sc
from scaleoutai.infra import slurm_compare as sl

N_JOBS, C, SEED = 10000, 128, 0
TRACE = datasets.job_trace(N_JOBS, capacity=C, load=0.85, seed=SEED)

# %% [markdown]
# ## Exercise 1 (coding): EASY with a bounded backfill window
#
# **Answer.** With a window of $d$ queued jobs (the head counts as one, as Slurm's `bf_max_job_test`
# counts it), $d = 1$ is exactly FIFO and $d = \infty$ is exactly the chapter's EASY. On the 10,000-job
# trace at $\rho = 0.85$ the mean bounded slowdown falls by two orders of magnitude as $d$ grows from 1 to
# about 64 and is essentially flat after that (within 5% of unlimited EASY): backfill candidates are
# found among the first few dozen jobs of the queue. The simulator's speed falls only modestly with $d$
# (a few tens of percent on this machine: each event tests at most $d - 1$ jobs, and the EASY queue is
# short once backfilling works); a production scheduler caps $d$ because its queue can hold tens of thousands of jobs and each test
# costs a walk over a node/time profile.
#
# **Design.** Per event: start the heads that fit, compute the head's shadow time and extra nodes
# (`_shadow`), then test only the jobs at queue positions $2..d$. One subtlety: when a job in the window
# backfills, the window slides and a job that was at position $d+1$ enters it. The pass is therefore
# repeated until it starts nothing (a fixpoint); otherwise the result would depend on how often the
# scheduler happens to be invoked. Free nodes and extra nodes only decrease during a pass, so a job once
# refused at this instant stays refused, and the fixpoint is reached in at most $d$ passes.
#
# **Checks.** (i) $d=1$ against `simulate_fifo` and $d=\infty$ against `simulate_easy`, start for start;
# (ii) the event version against a stepping reference that advances one second at a time and recomputes
# free nodes, shadow time and extra nodes from scratch before every single test; (iii) the chapter's
# `violations` (no over-subscription, each job runs once, the head's reservation never moves later).

# %%
def easy_variant(trace, capacity, depth=None, order="arrival"):
    """EASY backfill that tests only the first ``depth`` queued jobs (head included; None: all of them),
    taking the candidates in arrival order or, with order="sjf", by shortest estimate first."""
    s = sc._Loop(trace, capacity, "easy")
    held = {}

    def schedule(now, changed, first_new):
        s.start_heads(now)
        q = s.queue
        if not q:
            return
        head = q[0]
        shadow, extra = sc._shadow(s, head)
        s.reserve(head, shadow)
        if shadow > held.get(head, math.inf):
            s.increases += 1
        held.clear()
        held[head] = shadow
        while True:
            window = q[1:depth] if depth is not None else q[1:]
            if order == "sjf":
                window = sorted(window, key=lambda j: (s.est[j], j))
            started = False
            for j in window:
                if s.size[j] > s.free:
                    continue
                if now + s.est[j] <= shadow:
                    pass                                  # gone (by its limit) before the head starts
                elif s.size[j] <= extra:
                    extra -= s.size[j]                     # runs on nodes the head will not need
                else:
                    continue
                s.begin(j, now)
                q.remove(j)
                started = True
            if not started or depth is None:
                break
    return s.loop(schedule)


def stepping_easy(trace, capacity, depth=None, order="arrival"):
    """Independent reference: whole-second steps, everything recomputed from scratch before each test."""
    n = len(trace)
    size, run, est = trace.size, trace.runtime, trace.estimate
    sub = trace.submit
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    t, arrived, queue = 0, 0, []

    def running():
        return np.flatnonzero((start <= t) & (end > t))

    def free():
        return capacity - int(size[running()].sum())

    while np.isnan(end).any():
        while arrived < n and sub[arrived] <= t:
            queue.append(arrived)
            arrived += 1
        while queue and size[queue[0]] <= free():
            j = queue.pop(0)
            start[j], end[j] = t, t + run[j]
        progress = bool(queue)
        while progress:
            progress = False
            window = queue[1:depth] if depth is not None else queue[1:]
            if order == "sjf":
                window = sorted(window, key=lambda j: (est[j], j))
            for j in window:
                # the head's reservation from the running jobs' limits, recomputed now
                avail, need = free(), size[queue[0]]
                for te, sz in sorted((start[r] + est[r], size[r]) for r in running()):
                    avail += sz
                    if avail >= need:
                        shadow, spare = te, avail - need
                        break
                if size[j] <= free() and (t + est[j] <= shadow or size[j] <= spare):
                    queue.remove(j)
                    start[j], end[j] = t, t + run[j]
                    progress = depth is not None
        t += 1
    return start, end


for cap in (3, 5, 16):
    for seed in range(4):
        tr = datasets.job_trace(30, capacity=cap, load=1.3, seed=seed, min_runtime=1, max_runtime=30,
                                estimate_unit=1)
        assert np.array_equal(easy_variant(tr, cap, 1).start, sc.simulate(tr, cap, "fifo").start)
        assert np.array_equal(easy_variant(tr, cap, None).start, sc.simulate(tr, cap, "easy").start)
        for depth in (2, 3, None):
            for order in ("arrival", "sjf"):
                s = easy_variant(tr, cap, depth, order)
                assert np.array_equal(s.start, stepping_easy(tr, cap, depth, order)[0]), (cap, seed, depth, order)
                assert sm.violations(tr, s) == [], (cap, seed, depth, order)
print("bounded-window and SJF EASY == stepping reference on 12 traces; d=1 is FIFO, d=inf is EASY")

DEPTHS = [1, 2, 3, 4, 8, 16, 32, 64, None]
bsld, speed = [], []
for d in DEPTHS:
    t0 = time.perf_counter()
    s = easy_variant(TRACE, C, d)
    speed.append(N_JOBS / (time.perf_counter() - t0))
    bsld.append(sm.metrics(TRACE, s)["mean_bsld"])
    print(f"d = {str(d):>4}: mean bsld {bsld[-1]:9.1f}   {speed[-1]:8.0f} jobs/s")
fifo_b = sm.metrics(TRACE, sc.simulate(TRACE, C, "fifo"))["mean_bsld"]
easy_b = sm.metrics(TRACE, sc.simulate(TRACE, C, "easy"))["mean_bsld"]
assert bsld[0] == fifo_b and bsld[-1] == easy_b        # the two ends are the chapter's policies
assert bsld[-1] < bsld[0] / 10                          # backfilling is what rescues FIFO
assert bsld[DEPTHS.index(64)] < 1.05 * bsld[-1]           # a window of 64 is as good as unlimited

fig, ax = plt.subplots(1, 2, figsize=(10, 3))
xs = [d if d is not None else 2 * DEPTHS[-2] for d in DEPTHS]
ax[0].loglog(xs, bsld, "o-")
ax[0].set_xlabel("window d (last point: unlimited)")
ax[0].set_ylabel("mean bounded slowdown")
ax[1].semilogx(xs, speed, "o-")
ax[1].set_xlabel("window d")
ax[1].set_ylabel("simulated jobs per second")
plt.tight_layout()
plt.close(fig)

# %% [markdown]
# ## Exercise 2 (analysis): shortest-estimate-first backfilling
#
# **Answer: it does not help here, and the widest jobs pay.** On the 10,000-job trace at $\rho = 0.85$,
# taking backfill candidates shortest-estimate-first instead of in arrival order leaves the mean bounded
# slowdown about the same (slightly worse: 591 against 563), while the mean wait of the widest 5% of jobs
# nearly doubles (about 121 h to 221 h) and their maximum wait rises from about 297 h to 511 h.
#
# *Why not better:* the chapter's EASY already lets a short job through whatever its queue position,
# because "ends by its limit before the shadow time" is a test on the job alone; reordering only
# decides who gets the *extra* nodes and the holes when several candidates compete, which is rare.
#
# *Why the widest jobs wait longer:* a wide job never backfills (it does not fit a hole); it starts
# only as the head, protected by its reservation in both variants. But SJF keeps deferring the long
# narrow jobs (their worst wait also doubles, 179 h to 368 h), so more of them are still in the queue,
# *ahead* of a wide job in arrival order, when it arrives; each takes its turn as head first, and that
# pushes the wide job's turn later. The head guarantee bounds the wait of the job at the front, not
# the time it takes to get to the front. That is the classic starvation caveat of SJF ordering.
#
# **Why the head is safe in both.** A backfilled job either ends by its limit before the shadow time or
# uses only the extra nodes; neither can delay the head (the `violations` check of "no reservation
# moved later" holds for both orderings, asserted in Exercise 1 and again here).

# %%
big = TRACE.size >= np.percentile(TRACE.size, 95)
long_narrow = (TRACE.size <= 2) & (TRACE.estimate >= np.percentile(TRACE.estimate, 90))
res = {}
for order in ("arrival", "sjf"):
    s = easy_variant(TRACE, C, None, order)
    assert sm.violations(TRACE, s) == []
    w = s.start - TRACE.submit
    res[order] = (sm.metrics(TRACE, s)["mean_bsld"], w[big].mean(), w[big].max(), w[long_narrow].max())
    print(f"{order:8s} mean bsld {res[order][0]:8.1f}  widest 5%: mean wait {res[order][1] / 3600:6.1f} h, "
          f"max {res[order][2] / 3600:6.1f} h   long narrow max wait {res[order][3] / 3600:6.1f} h")
# arrival order with no window limit is exactly the chapter's EASY
assert res["arrival"][0] == easy_b
# SJF reorders only among jobs that cannot delay the head: mean slowdown moves by little (under 20%),
# while deferring long narrow jobs costs the widest jobs (they wait behind them)
assert abs(res["sjf"][0] / res["arrival"][0] - 1) < 0.2
assert res["sjf"][1] > res["arrival"][1] and res["sjf"][3] > res["arrival"][3]

# %% [markdown]
# ## Exercise 3 (analysis): gang scheduling with a finite quantum and a switch cost
#
# **Answer: no such $q$ exists for this trace.** Gang scheduling loses to EASY on mean bounded
# slowdown by well over an order of magnitude even in its most favourable setting (zero switch cost),
# and every finite quantum only adds overhead.
#
# **Derivation.** With $R$ busy rows, quantum $q$ and a context switch of $c$ seconds between slices,
# one round of the Ousterhout matrix lasts $R(q + c)$ and each job computes for $q$ of it, so its
# progress rate is
# $$\frac{q}{R(q+c)} = \frac{1}{R}\Bigl(1 - \frac{c}{q+c}\Bigr),$$
# which is `simulate_gang`'s fluid model with `switch_cost` $= c/(q+c)$ (no cost when $R = 1$, as
# there). The fluid model is the $q \to 0$ limit of the throughput; a finite quantum additionally delays
# a job's end by at most one round, $R(q+c) \le \mathrm{MPL}(q+c)$, because its last piece of work may
# have to wait for its slice. So the bsld of gang with $(q, c)$ is at least that of the fluid model with
# overhead $c/(q+c)$, and that is at least the fluid model with zero overhead (verified on a grid below:
# slowdown rises monotonically with the overhead). Small $q$ wastes a fraction $c/(q+c)$ of the
# machine; large $q$ makes the overhead vanish but leaves the zero-cost gang, which already loses.
# Why it loses: admission is strict FIFO into at most `MPL` rows, so a wide head still blocks the queue
# once the rows are full, and time-slicing divides every running job's speed by $R$, stretching the
# many long jobs of this workload. EASY instead fills holes with work that runs at full speed.
#
# For $c = 1$ s the code prints the overhead fraction at several quanta (for example $q = 10$ s wastes
# 9%, $q = 600$ s wastes 0.17%).

# %%
g = {}
for frac in (0.0, 0.001, 0.01, 0.05, 0.2):
    g[frac] = sm.metrics(TRACE, sc.simulate(TRACE, C, "gang", mpl=4, switch_cost=frac))["mean_bsld"]
fr = sorted(g)
assert all(g[a] <= g[b] for a, b in zip(fr, fr[1:]))     # more overhead, never better
assert g[0.0] > 10 * easy_b                              # even free switching loses to EASY
for q in (1, 10, 60, 600, 3600):
    cost = 1.0 / (q + 1.0)                               # c = 1 s of switch per slice
    assert math.isclose(q / (q + 1.0), 1 - cost)         # useful fraction of a slice
    print(f"q = {q:5d} s: switch overhead {cost:.4f} of the machine")
print({k: round(v, 1) for k, v in g.items()}, " EASY:", round(easy_b, 1))

# %% [markdown]
# ## Exercise 4 (coding): weighted dominant resource fairness
#
# **Answer.** Progressive filling with the priority "dominant share divided by weight": the next task
# goes to the user with the smallest $s_i / w_i$ whose next task still fits. For the check, the weights
# are folded into the demands by *replication*: with integer weights, a user of weight $w_i$ is the
# same as $w_i$ unweighted copies of that user (each copy gets dominant share $t$, so the user gets
# $w_i t$, i.e. $s_i/w_i = t$ for everyone). `reference_drf_lp` on the replicated demand rows, summed per
# user, is the fluid weighted DRF.
#
# Hand example (the chapter's 9 CPUs and 18 GB, A $\langle 1, 4\rangle$, B $\langle 3, 1\rangle$,
# $w_A = 1$, $w_B = 2$): equal $s_i / w_i$ means $\frac{4x}{18} = \frac{1}{2}\cdot\frac{3y}{9}$, i.e.
# $x = 0.75y$; the CPUs bind, $x + 3y = 9 \Rightarrow y = 2.4, x = 1.8$ (memory $9.6 \le 18$). Scaled by
# 10 (90 CPUs, 180 GB) the fluid answer is $(18, 24)$ tasks, which is integral, and progressive filling
# must reproduce it exactly. In general the integral allocation differs from the fluid one because
# tasks are indivisible: the last task of a user may not fit where the fluid solution would place a
# fraction of one, and which users are still "filling" when a resource saturates can change, so users
# end a few tasks away from the fluid values (observed: up to about 3). That is an $O(1)$-task effect:
# scaling the capacities by $M$ leaves the absolute gap at a few tasks while the allocations grow like
# $M$, so integral DRF converges to the fluid LP in relative terms. The random cases check exactly that,
# plus feasibility and Pareto efficiency (no user's next task fits).

# %%
import heapq


def weighted_drf(capacity, demands, weights):
    """Weighted DRF by progressive filling: the next task to the smallest s_i / w_i whose task still fits."""
    cap = np.asarray(capacity, dtype=float)
    d = np.array(demands, dtype=float, ndmin=2)
    w = np.asarray(weights, dtype=float)
    if np.any(w <= 0):
        raise ValueError("weights must be positive")
    dom = (d / cap).max(axis=1)
    tasks = np.zeros(len(d), dtype=np.int64)
    used = np.zeros_like(cap)
    heap = [(0.0, i) for i in range(len(d))]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        if (used + d[i] <= cap + 1e-9).all():
            used += d[i]
            tasks[i] += 1
            heapq.heappush(heap, (tasks[i] * dom[i] / w[i], i))
    return tasks


def fluid_weighted(capacity, demands, weights):
    rows = [i for i, wi in enumerate(weights) for _ in range(int(wi))]
    x = sp.reference_drf_lp(capacity, np.asarray(demands, dtype=float)[rows])
    return np.bincount(rows, weights=x, minlength=len(weights))


# unit weights: exactly the library's DRF
assert weighted_drf([9, 18], [[1, 4], [3, 1]], [1, 1]).tolist() == sp.drf_allocate([9, 18], [[1, 4], [3, 1]]).tolist()
# the hand example, scaled by 10
assert np.allclose(fluid_weighted([90, 180], [[1, 4], [3, 1]], [1, 2]), [18, 24])
assert weighted_drf([90, 180], [[1, 4], [3, 1]], [1, 2]).tolist() == [18, 24]
dev = {}
for M in (1, 20):                                        # the same random cases, capacity scaled by M
    rng = np.random.default_rng(SEED)
    dev[M] = []
    for _ in range(20):
        n, r = rng.integers(2, 4), rng.integers(2, 4)
        cap = rng.integers(50, 200, r).astype(float) * M
        dem = rng.integers(1, 6, (n, r)).astype(float)
        w = rng.integers(1, 4, n)
        got, fluid = weighted_drf(cap, dem, w), fluid_weighted(cap, dem, w)
        assert np.all(got @ dem <= cap + 1e-9)           # feasible
        # Pareto: nobody's next task fits any more
        assert all(np.any(got @ dem + dem[i] > cap + 1e-9) for i in range(n))
        dev[M].append((np.abs(got - fluid).max(), fluid.max()))
abs1, abs20 = max(a for a, _ in dev[1]), max(a for a, _ in dev[20])
rel1, rel20 = max(a / f for a, f in dev[1]), max(a / f for a, f in dev[20])
assert abs20 <= 2 * abs1 + 1                             # a few tasks, not growing with the machine
assert rel20 < rel1 / 5                                  # so the relative gap shrinks like 1/M
print(f"largest gap to the fluid LP: {abs1:.2f} tasks at 1x, {abs20:.2f} at 20x "
      f"(relative {rel1:.3f} -> {rel20:.4f})")
print("weighted DRF: unit weights = library DRF, hand example exact")

# %% [markdown]
# ## Exercise 5 (coding): a gang launch that survives lost messages
#
# **Answer.** Make every controller command a stop-and-wait exchange with retransmission, and make the
# node idempotent:
#
# - The simulator surfaces a lost message at its receiver when it was due (`MessageLostError`); that
#   is the receiver's timeout, as in Chapter 34's offloading. A node whose command was lost answers
#   NACK; a controller whose reply was lost (a lost ACK/DONE, or a lost NACK) times out and resends
#   the same command. Each command thus gets exactly one reply event and each reply exactly one receive
#   event, so the two sides never fall out of step.
# - The node ignores duplicates: a second RESERVE is acked again; a second GO after it has run is
#   answered DONE again *without* running (a `ran` flag), so the job runs exactly once per node.
# - Ending the conversation is the two-generals problem: whoever sends last cannot know it arrived.
#   The node leaves when it receives the final RELEASE (no reply); the controller does not wait for a
#   reply but sends RELEASE $m$ times (the analogue of TCP's TIME_WAIT linger). Extra copies and any
#   NACK the node sends for a lost copy simply stay unread. A node stays stuck only if all $m$ copies
#   are lost: probability $q^m$ ($0.2^8 \approx 2.6\times10^{-6}$ per node).
# - A crashed node (`PeerCrashedError`) still aborts the gang before GO, as in the chapter.
#
# Check: with `Faults(loss=0.2, seed=s)` (every rank's sends lossy) for 25 seeds and $K = 5$, every
# gang runs, each node computes exactly once, and the controller needed at least one resend on some
# seeds; the chapter's `launch_gang` under the same faults fails or aborts on some of them.

# %%
RESERVE, GO, RELEASE, ACK, DONE, NACK = 1.0, 2.0, 3.0, 4.0, 5.0, 6.0
M_RELEASE = 8


def launch_gang_lossy(comm, runtime):
    """All-or-nothing gang start over lossy links: resend on timeout, idempotent nodes, repeated release."""
    if comm.rank != 0:
        reserved = ran = False
        computed = 0
        while True:
            try:
                cmd = float(comm.recv(0)[0])
            except cluster.MessageLostError:      # nothing came when due: tell the controller
                comm.send(np.array([DONE if ran else NACK]), 0)
                continue
            if cmd == RESERVE:
                reserved = True
                comm.send(np.array([ACK]), 0)
            elif cmd == GO:
                if not ran:                          # a duplicate GO is answered, never re-run
                    comm.compute(runtime)
                    ran, computed = True, computed + 1
                comm.send(np.array([DONE]), 0)
            else:
                return {"status": "ran" if ran else "released", "computed": computed, "reserved": reserved}
    nodes = list(range(1, comm.size))
    resends = 0

    def exchange(r, cmd, want):
        nonlocal resends
        while True:
            comm.send(np.array([cmd]), r)
            try:
                if float(comm.recv(r)[0]) == want:
                    return
            except cluster.MessageLostError:
                pass
            resends += 1

    status = "ran"
    for r in nodes:
        try:
            exchange(r, RESERVE, ACK)
        except cluster.PeerCrashedError:
            status = "aborted"
            break
    if status == "ran":
        for r in nodes:
            exchange(r, GO, DONE)
    for r in nodes:
        for _ in range(M_RELEASE):
            comm.send(np.array([RELEASE]), r)
    return {"status": status, "resends": resends, "t": comm.clock}


K = 5
net = cluster.Network(alpha=1e-2, beta=0.0)
total_resends, old_broken = 0, 0
for seed in range(25):
    faults = cluster.Faults(loss=0.2, seed=seed)
    res = cluster.run(launch_gang_lossy, K, args=(2.0,), network=net, faults=faults, timeout=30)
    assert res.values[0]["status"] == "ran", seed
    assert all(v["status"] == "ran" and v["computed"] == 1 for v in res.values[1:]), seed
    total_resends += res.values[0]["resends"]
    try:
        old = sp.run_gang_launch(K, 2.0, network=net, faults=cluster.Faults(loss=0.2, seed=seed))
        old_broken += old.values[0]["status"] != "ran"
    except cluster.ClusterError:                     # deadlock or a rank error: the old protocol broke
        old_broken += 1
assert total_resends > 0 and old_broken > 0
# no loss: no resend, and the same result as the chapter's protocol
res = cluster.run(launch_gang_lossy, K, args=(2.0,), network=net, timeout=30)
assert res.values[0]["resends"] == 0 and all(v["computed"] == 1 for v in res.values[1:])
# a crash before acking still aborts and nobody computes
res = cluster.run(launch_gang_lossy, K, args=(2.0,), network=net, faults=cluster.Faults(crash={3: 0}), timeout=30)
assert res.values[0]["status"] == "aborted"
assert all(isinstance(v, cluster.RankCrashed) or v["computed"] == 0 for v in res.values[1:])
print(f"25 lossy seeds: every gang ran exactly once per node, {total_resends} resends in all; "
      f"the chapter's launch_gang broke on {old_broken} of them")

# %% [markdown]
# ## Exercise 6 (analysis): Slurm with `bf_max_job_test=1`
#
# **Answer: Slurm then matches FIFO**, start order 0, 1, 2, 3, 4. With a backfill window of one job,
# the backfill pass only looks at the top-priority pending job (the blocked head, job 1), plans its
# reservation and stops; no lower-priority job is ever considered for an early start. Slurm's main
# scheduling loop walks the queue in priority order and, within a partition, stops at the first job
# that cannot start (so that low-priority jobs do not starve the top one). What is left is plain
# first-come-first-served: job 0 at 0; job 1 when job 0 ends (6 s) alongside job 2 (4 + 4 = 8 CPUs);
# job 3 and job 4 when job 1 ends at 10 s (2 + 2 CPUs beside job 2). Real Slurm shows the same order
# with each start a second or so late (its scheduler runs on a timer, as in the chapter).
#
# This machine runs no Slurm for the solutions, so the code checks the same claim on our simulator:
# Exercise 1's window $d = 1$ is the analogue of `bf_max_job_test=1`, and it reproduces FIFO on the
# job set; even $d = 2$ does (the second job, job 2, needs 4 CPUs while only 2 are idle), and $d = 4$
# (job 3 inside the window) gives back EASY's order.

# %%
small = sl.slurm_job_set()
fifo = sc.simulate(small, 8, "fifo")
for d in (1, 2):
    assert sl.start_order(easy_variant(small, 8, d).start) == sl.start_order(fifo.start) == [0, 1, 2, 3, 4]
assert fifo.start.tolist() == [0, 6, 6, 10, 10]          # the hand-worked times above
assert sl.start_order(easy_variant(small, 8, 4).start) == sl.start_order(sc.simulate(small, 8, "easy").start)
print("window 1 and 2: FIFO order", sl.start_order(fifo.start), "; window 4: EASY order",
      sl.start_order(easy_variant(small, 8, 4).start))


# %% [markdown]
# ## Exercise 7 (lab): Lab 33, EASY backfill over CPUs and GPUs, online, with jobs killed at their limit
#
# The lab is `labs/lab33-easy-backfill`. Its reference solution is the solution blocks of
# `labs/lab33-easy-backfill/lab33-easy-backfill.py`; its hidden tests, rubric and mutants are in
# `grading/lab33-easy-backfill/` (`tests.py`, `rubric.yaml`, `mutants/`). The grader compares `replay`
# start for start with its own simulator (written from scratch in `tests.py`, re-deriving the running set
# at every event) on seeded traces: empty and one-job traces, one resource, two resources with integer
# times (bursts, so many limit ends tie) and float times, and jobs killed at their limit; it checks the
# legality of every returned schedule itself (no start before submission, CPUs and GPUs within capacity,
# the head never after its two-resource reservation at any event); and it runs `easy_cluster` for K = 1,
# 2, 3, 5, 8 (more ranks than jobs), a rank without jobs and 2 real processes, reading the protocol from
# its own trace (a job table without runtimes, one [id, t] start and one end reply per job, one stop).
#
# **Key ideas of the answer.** The scheduler keeps free CPUs and GPUs, the FIFO queue and, per running
# job, its limit end s + l, the only end it may plan with. At an event it starts heads while both
# resources fit; the head's shadow time is the first limit end, walking them in order and releasing
# every job of a tie together, at which the head fits in both resources, and the extra is one number
# per resource, what is free then minus the head's request. A later job that fits now starts if it ends
# by its limit no later than the shadow time, or if it fits in both extras, which it then reduces. The
# head is safe in both resources because every job ends by s + l, killed there if it runs longer: so
# the event loop (or the login node that owns the job) reports the end s + min(r, l), and the scheduler
# never sees r. The chapter's `simulate_easy` pasted in fails three ways: its shadow and extra count one
# resource, its shadow walk stops at the first job of a tie, and its jobs end at their runtime; the
# `pasted_course` mutant keeps under half the points.


# %% [markdown]
# ## Exercise 8 (analysis): where to put the LAS threshold
#
# **Answer.** Mean JCT against $T_1$ is U-shaped: on the chapter's 400-job trace (two pools, 16 GPUs at
# speed 1 and 16 at speed 2, offered load 2.5 of the speed-1 pool) it is lowest for $T_1$ between about
# an hour and ten hours of GPU time, and worse at both ends. Preemptions fall from hundreds to a few
# dozen as $T_1$ grows.
#
# **Large $T_1$.** Once $T_1$ exceeds every job's service, nobody ever leaves $Q_0$, so LAS *is* the
# single queue of Section 7, schedule for schedule: arrival order, work-conserving (a job that does not
# fit no longer blocks the ones behind it) and preemptive only when an earlier job needs a later one's
# GPUs. Long jobs that arrived early hold the GPUs and short ones wait behind them: the median JCT is
# hours.
#
# **Small $T_1$.** Every job crosses $T_1$ after $T_1 / g_j$ seconds, so it gets only a brief head start
# in $Q_0$ and then joins $Q_1$, which again runs in arrival order: LAS is nearly the single queue again,
# plus a preemption for almost every arrival (each new job evicts someone for its few seconds in $Q_0$).
# The mean JCT is close to the single queue's, and preemptions are the most of the sweep.
#
# **In between**, $Q_0$ holds exactly the jobs that are still short: a job has to prove it is long (by
# attaining $T_1$) before it yields, and a heavy-tailed workload means most jobs never do. That is why
# Tiresias picks its thresholds from the workload's service distribution. With two thresholds, as in the
# chapter, a third queue separates the very long jobs from the merely long.

# %%
DL_POOLS = [dl.Pool("V100", 16, 1.0), dl.Pool("A100", 16, 2.0)]
DL_TRACE = datasets.job_trace(400, capacity=16, load=2.5, seed=SEED)
sweep = {}
for T1 in (10.0, 60.0, 600.0, 3600.0, 36000.0, 360000.0, 1e9):
    s = dl.simulate_dl(DL_TRACE, DL_POOLS, thresholds=(T1,))
    j = s.end - DL_TRACE.submit
    sweep[T1] = (j.mean(), np.median(j), int(s.extra["preemptions"].sum()))
    print(f"T1 = {T1:10.0f} GPU-s: mean JCT {j.mean() / 3600:5.2f} h  median {np.median(j) / 3600:5.2f} h  "
          f"preemptions {sweep[T1][2]}")
one = dl.simulate_dl(DL_TRACE, DL_POOLS, thresholds=())
assert np.array_equal(one.end, dl.simulate_dl(DL_TRACE, DL_POOLS, thresholds=(1e9,)).end)   # large end
ts = sorted(sweep)
best = min(ts, key=lambda t: sweep[t][0])
assert ts[0] < best < ts[-1] and 3600.0 <= best <= 36000.0                # U-shaped, best inside
assert sweep[best][0] < 0.8 * min(sweep[ts[0]][0], sweep[ts[-1]][0])
assert sweep[ts[0]][2] == max(v[2] for v in sweep.values())               # tiny T1: most preemptions
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.semilogx(ts, [sweep[t][0] / 3600 for t in ts], "o-", label="mean JCT")
ax.semilogx(ts, [sweep[t][1] / 3600 for t in ts], "s-", label="median JCT")
ax.set_xlabel("threshold $T_1$ (GPU-seconds)")
ax.set_ylabel("hours")
ax.legend()
plt.tight_layout()
plt.show()
