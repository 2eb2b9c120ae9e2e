# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 33. Cluster scheduling
#
# Every earlier chapter assumed that the $K$ workers were simply there. On a shared cluster they are
# not: a job asks for nodes, GPUs and time, waits in a queue, and a scheduler decides who runs next.
# That decision sets how long a researcher waits for an answer, how much of an expensive machine sits
# idle, and whether one team can crowd out the others. This chapter builds a discrete-event simulator
# of a batch cluster with four policies (FIFO, EASY backfill, conservative backfill, gang scheduling),
# the metrics that judge them, and dominant resource fairness for several resources at once. Then it
# turns to the clusters that train neural networks, where jobs can be preempted, nobody knows their
# runtimes and GPUs come in types: a Tiresias-style least-attained-service scheduler with priorities,
# tenant fair shares and a guard against starvation. It replays a small job set on a real Slurm, lays
# resource bundles out on a Ray cluster with placement groups, renders the Kubernetes manifest of a gang
# of pods, launches a gang all-or-nothing over the communicator while nodes fail, and measures the
# policies on a 10,000-job trace.
#
# **Prerequisites:** Chapter 3 (performance models: utilisation and queueing intuition), Appendix B
# (the cluster lab: `sbatch`, time limits, the private one-node Slurm), and Chapter 21 (hyperparameter
# search launches many jobs at once, which is what a scheduler sees).

# %% tags=["parameters"]
N_JOBS = 10000  # smoke: 2000
CAPACITY = 128
LOADS = [0.5, 0.7, 0.85, 0.95, 1.1]  # smoke: [0.6, 0.9]
SWEEP_JOBS = 3000  # smoke: 600
CHECK_SEEDS = 20  # smoke: 6
CAPACITIES = [1, 2, 3, 5, 16]
KS = [2, 3, 5, 9]
MPL = 4
DL_JOBS = 400  # smoke: 150
DL_LOAD = 2.5
THRESHOLDS = (3600.0, 36000.0)
RUN_SLURM = True
RUN_RAY = True  # smoke: False
RAY_NODES = 3  # smoke: 2
K8S_VALIDATE = True  # smoke: False
SEED = 0

# %% [markdown]
# `N_JOBS` jobs are generated for a machine of `CAPACITY` nodes; `LOADS` are the offered loads of the
# sweep in Section 7 (`SWEEP_JOBS` jobs each); `CHECK_SEEDS` seeded traces per machine size in
# `CAPACITIES` are checked against the reference; `KS` are the world sizes of the gang launch and
# `MPL` the number of time slices of gang scheduling. `DL_JOBS` deep-learning jobs at offered load
# `DL_LOAD` (relative to the largest GPU pool) go to the scheduler of Section 4's second half, whose
# least-attained-service queues split at `THRESHOLDS` GPU-seconds. `RUN_SLURM` and `RUN_RAY` switch the
# production runs of Section 5 (Slurm still skips, with the reason, where it cannot start); the Ray
# cluster has `RAY_NODES` nodes (two is the smallest on which PACK and SPREAD differ). The smoke run
# leaves Ray out: on a loaded two-core machine a local Ray cluster can miss Ray's own start-up
# timeouts; the full run and `tests/test_infra_scheduling.py` start it. `K8S_VALIDATE` checks the
# Kubernetes manifests against the API schema (loading the schema takes longer than the rest of the
# section, so the smoke run leaves it to the full run).
#
# ## 1. Motivation: which ceiling binds
#
# On a shared cluster the binding ceiling is neither FLOP/s nor bandwidth but the queue. A job that
# needs 64 of 128 nodes cannot start while 70 are busy, however fast each node is; if the scheduler
# lets nothing overtake it, the other 58 nodes sit idle too. Below, the same 10,000 jobs run under
# plain first-come-first-served and under backfilling: same machine, same jobs, a different rule.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, datasets
from scaleoutai.infra import sched_metrics as sm
from scaleoutai.infra import sched_policies as sp
from scaleoutai.infra import scheduling as sc
from scaleoutai.infra import slurm_compare as sl

trace = datasets.job_trace(N_JOBS, capacity=CAPACITY, load=0.85, seed=SEED)
for policy in ("fifo", "easy"):
    m = sm.metrics(trace, sc.simulate(trace, CAPACITY, policy))
    print(f"{policy:5s} utilisation {m['utilisation']:.2f}  mean wait {m['mean_wait'] / 3600:8.1f} h  "
          f"idle-while-waiting {m['fragmentation']:.2f}")

# %% [markdown]
# At an offered load of 0.85, FIFO cannot even keep up: the queue grows for the whole trace and the
# machine is idle about half the time while jobs wait. Backfilling keeps the queue bounded.
#
# ## 2. Core concepts
#
# **The workload.** Job $j$ arrives at $a_j$, asks for $s_j$ nodes (rigid: it cannot run on fewer)
# for a runtime $r_j$ it does not know, and states a time limit (the *user estimate*) $e_j \ge r_j$,
# after which it would be killed. Nodes are space-shared and jobs are not preempted.
# `datasets.job_trace` draws a Lublin-Feitelson-like workload: many serial and power-of-two jobs,
# log-uniform runtimes from seconds to a day, estimates inflated by up to 10x, Poisson arrivals scaled
# to an offered load $\rho = \sum_j s_j r_j / (C \cdot \text{span})$ on $C$ nodes.
#
# **Policies.** *FIFO* starts jobs in arrival order; the head that does not fit blocks everyone.
# *EASY backfill* (Lifka 1995) gives the head a reservation at the *shadow time*, the earliest time by
# the running jobs' estimates at which it fits; a later job may start now if it fits and either ends
# (by its estimate) before the shadow time or uses only the *extra* nodes the head will not need.
# *Conservative backfill* (Mu'alem and Feitelson 2001) gives every job a reservation on arrival; a
# job may start early only if it delays no reservation at all. *Gang scheduling* (Ousterhout 1982):
# here the time-sliced kind, where up to `MPL` sets of jobs take turns on the whole machine and all
# processes of a job run in the same slice; with quanta taken to zero, each of $R$ busy slices runs at
# rate $1/R$. (The other meaning, all-or-nothing allocation of a group, is `place_bundles` and
# `launch_gang` below.)
#
# **Metrics.** Wait $w_j = \text{start}_j - a_j$; bounded slowdown
# $\text{bsld}_j = \max(1, (w_j + r_j)/\max(r_j, \tau))$ with $\tau = 10$ s; utilisation
# $\sum_j s_j r_j / (C \cdot \text{makespan})$; *fragmentation*, the node-seconds left idle while some
# job waits, over $C \cdot \text{makespan}$; Jain's index $J(x) = (\sum x)^2 / (n \sum x^2)$ over the
# users' mean slowdowns (1: all equal).
#
# **Deep-learning jobs** break three assumptions above. Their runtime is unknown (a training run stops
# when the loss says so, or when its owner kills it), so there is no estimate to backfill with; they
# checkpoint, so a scheduler may *preempt* one and resume it later for the price of a restore; and the
# GPUs differ (an A100 runs a step about twice as fast as a V100). Tiresias (Gu et al., NSDI 2019)
# answers the first two with *least attained service* in two dimensions: job $j$'s attained service is
# $a_j = g_j \cdot t^{\text{run}}_j$ (GPUs times seconds run so far), and the job with the least goes
# first. Discretised: thresholds $T_1 < T_2 < \dots$ split the jobs into queues $Q_0$ ($a_j < T_1$),
# $Q_1$, ...; a lower queue always goes first and preempts a higher one, and inside a queue jobs go in
# arrival order. A new job starts at once in $Q_0$; a long one sinks as it runs, so short jobs do not
# wait behind it, and no estimate is needed. A shared cluster adds three rules: *priority classes*
# (production before research), *tenant fair shares* (tenant $i$ with weight $w_i$ should hold
# $w_i / \sum_k w_k$ of the GPUs when everyone has work: weighted max-min, which is DRF when GPUs are the
# only resource), and *promotion* (a job that has waited `promote_after` seconds goes back to $Q_0$:
# Tiresias's knob against starvation). Job sizes stay fixed here; Pollux (Qiao et al., OSDI 2021) also
# chooses each job's GPU count and batch size as it runs.
#
# The chapter's hand-worked example has 5 jobs on 8 nodes, all submitted at $t = 0$ as
# (size, runtime, estimate): (6, 6, 120), (4, 4, 60), (4, 5, 60), (2, 8, 180), (2, 3, 60).

# %%
small = sl.slurm_job_set()


def gantt(ax, tr, s, title):
    # stack each job on the lowest free rows it found (for the picture only: nodes are interchangeable)
    rows_free = np.zeros(8)
    for j in np.argsort(s.start, kind="stable"):
        rows = np.flatnonzero(rows_free <= s.start[j] + 1e-9)[: tr.size[j]]
        rows_free[rows] = s.end[j]
        for r in rows:
            ax.barh(r, s.end[j] - s.start[j], left=s.start[j], color=f"C{j}", edgecolor="k")
        ax.text(s.start[j] + 0.2, rows[0], f"job {j}", va="center", fontsize=8)
    ax.set_title(title)
    ax.set_xlabel("time (s)")


fig, axes = plt.subplots(1, 3, figsize=(13, 3), sharey=True)
for ax, policy in zip(axes, ("fifo", "easy", "conservative")):
    s = sc.simulate(small, 8, policy)
    gantt(ax, small, s, f"{policy}: starts {s.start.astype(int).tolist()}")
axes[0].set_ylabel("node")
plt.tight_layout()
plt.show()

# %% [markdown]
# Work it by hand. Job 0 takes 6 nodes at 0 and the head, job 1 (4 nodes), gets a reservation at
# 120 s, job 0's limit, with 4 nodes to spare then. FIFO starts nothing else until job 0 ends at 6.
# EASY lets job 3 (2 nodes, limit 180 s) start at 0, since it needs only 2 of the head's 4 spare
# nodes. Conservative backfill has already promised those 4 spare nodes to job 2 (reserved at 120
# beside job 1), so job 3 must wait; the short job 4 fits before 120 s and goes instead. Three rules,
# three start orders: FIFO 0,1,2,3,4; EASY 0,3,1,4,2; conservative 0,4,1,2,3.
#
# ## 3. The distribution and communication pattern
#
# A batch scheduler is a central controller: every node reports to it, it alone decides, and it talks
# to each node by messages (Slurm: slurmctld to each slurmd). Two patterns recur. **Planning** is a
# sweep over a profile of free nodes in time, event by event: the simulator holds a heap of
# completions and jumps from event to event, so its cost depends on the number of jobs, not on how
# long they run. **Gang start** is a small distributed protocol: all $s_j$ nodes of a job must start
# together or none, which is a two-phase commit between the controller and the nodes. Multi-resource
# sharing adds a third: **dominant resource fairness** (Ghodsi et al. 2011) equalises each user's
# largest share of any resource. The paper's example: 9 CPUs and 18 GB, user A's tasks need
# ⟨1 CPU, 4 GB⟩ (dominant: memory, 4/18 per task), user B's ⟨3 CPU, 1 GB⟩ (dominant: CPU, 3/9).

# %%
cap, dem = [9, 18], [[1, 4], [3, 1]]
tasks = sp.drf_allocate(cap, dem)
print("DRF tasks (progressive filling):", tasks.tolist(), " dominant shares:",
      np.round(sp.dominant_shares(cap, dem, tasks), 3).tolist())
print("LP water-filling (fluid):       ", np.round(sp.reference_drf_lp(cap, dem), 6).tolist())
assert tasks.tolist() == [3, 2]

# %% [markdown]
# By hand: with $x$ tasks for A and $y$ for B, DRF solves $\max \min(4x/18, 3y/9)$ subject to
# $x + 3y \le 9$ and $4x + y \le 18$; equal dominant shares give $x = 1.5y$, and the CPU constraint
# binds at $y = 2$, $x = 3$: both users hold 2/3 of their dominant resource.
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# EASY backfill in full: the event loop hands `schedule` the current time; it starts heads that fit,
# computes the head's shadow time and extra nodes from the running jobs sorted by estimated end, then
# scans the queue for jobs that can start without delaying it.

# %%
from scaleoutai.notebooks import show

show(sc.simulate_easy, sc._shadow)

# %% [markdown]
# The checks: for every machine size in `CAPACITIES` and `CHECK_SEEDS` traces each, the event
# simulator gives the same starts as `reference_simulate`, which steps time one second at a time and
# recomputes everything from scratch; and every policy's schedule passes `violations`: no more nodes
# in use than exist, every job runs once for exactly its runtime, FIFO in arrival order, no
# reservation ever moved later (EASY: the head's; conservative: anyone's).

# %%
for C in CAPACITIES:
    for seed in range(CHECK_SEEDS):
        tr = datasets.job_trace(30, capacity=C, load=1.3, seed=seed, min_runtime=1, max_runtime=30,
                               estimate_unit=1)
        for policy in ("fifo", "easy"):
            start, end = sm.reference_simulate(tr, C, policy)
            assert np.array_equal(sc.simulate(tr, C, policy).start, start), (C, seed, policy)
        for policy in ("fifo", "easy", "conservative", "gang"):
            assert sm.violations(tr, sc.simulate(tr, C, policy)) == [], (C, seed, policy)
print(f"event simulator == stepping reference and all invariants hold: {len(CAPACITIES) * CHECK_SEEDS} traces")

# %% [markdown]
# Conservative backfill keeps a profile of free nodes over time and, for each job, finds the earliest
# window in which its size fits for its whole estimate; when a job ends early it re-plans in
# reservation order, which can only move reservations earlier.

# %%
show(sc._Profile.earliest, sc.simulate_conservative)

# %% [markdown]
# **A scheduler for deep-learning jobs.** `sched_dl.simulate_dl` runs the rules of Section 2 on pools
# of GPUs: `Pool(name, gpus, speed)`, a job's $g_j$ GPUs all from one pool, `runtime` its work at speed
# 1 (on a pool of speed $s$ it does $s$ seconds of work per second). It jumps from event to event: an
# arrival, a completion, a running job crossing a threshold, a waiting job reaching its promotion time.
# At each event it walks the active jobs in scheduling order (priority class, then queue, then arrival;
# with tenant weights, progressive filling across tenants inside each class) and gives each a pool if
# one has room; a running job that gets none is preempted. A running job keeps its pool; a job that
# starts takes the fastest pool where it evicts nobody further down the order, else the fastest with
# room. A job that resumes first spends `restart_cost` seconds restoring its checkpoint.

# %%
from scaleoutai.infra import sched_dl as dl

show(dl.simulate_dl)

# %% [markdown]
# By hand, on 4 GPUs with one threshold at 40 GPU-seconds: job A (4 GPUs, 100 s) arrives at 0 and job
# B (1 GPU, 10 s) at 2. FIFO runs A to 100 and B from 100 to 110: completion times (JCT) 100 and 108.
# Under LAS, A reaches 40 GPU-s at $t = 10$ and sinks to $Q_1$; B, still in $Q_0$, preempts it and runs
# from 10 to 20; A needs all four GPUs, so it resumes only at 20 and ends at 110. JCTs 110 and 18: a
# mean of 64 instead of 104, paid for by a 10% longer A. Then GPU types and restore cost: one fast pool
# (2 GPUs, speed 2), A (2 GPUs, work 100) at 0, B (2 GPUs, work 20) at 10, threshold 20 GPU-s, 5 s to
# restore. B preempts A at 10 and ends at 20; A restores until 25 and does its last 80 units of work in
# 40 s, ending at 65. Add a slow pool (2 GPUs, speed 1) and B takes it instead of evicting A: B ends at
# 30, A at 50, nobody is preempted.

# %%
hand = sc.make_trace([(0, 4, 100), (2, 1, 10)])
for policy in ("fifo", "las"):
    s = dl.simulate_dl(hand, [dl.Pool("A100", 4)], policy, thresholds=(40,))
    print(f"{policy:4s} starts {s.start.astype(int).tolist()} ends {s.end.astype(int).tolist()} "
          f"JCT {(s.end - hand.submit).astype(int).tolist()}")
assert (s.end - hand.submit).tolist() == [110, 18]
two = sc.make_trace([(0, 2, 100), (10, 2, 20)])
for pools, ends in (([dl.Pool("A100", 2, 2.0)], [65, 20]),
                    ([dl.Pool("V100", 2, 1.0), dl.Pool("A100", 2, 2.0)], [50, 30])):
    s = dl.simulate_dl(two, pools, "las", thresholds=(20,), restart_cost=5)
    print(f"pools {[p.name for p in pools]}: ends {s.end.astype(int).tolist()} on "
          f"{[pools[k].name for k in s.extra['pool']]}, preemptions {s.extra['preemptions'].tolist()}")
    assert s.end.tolist() == ends

# %% [markdown]
# The checks: with `policy="fifo"` on one pool of speed 1 the DL scheduler is the batch simulator's
# FIFO, start for start, on the traces of the checks above; `tests/test_infra_sched_dl.py` also runs it
# against a brute-force reference that steps time by half a second and redoes every decision from
# scratch (preemption, restore, promotion, priorities, weights, two GPU types), on instances whose events
# all fall on that grid, so the two must agree exactly.

# %%
for C in CAPACITIES:
    for seed in range(CHECK_SEEDS):
        tr = datasets.job_trace(30, capacity=C, load=1.3, seed=seed, min_runtime=1, max_runtime=30,
                               estimate_unit=1)
        s = dl.simulate_dl(tr, [dl.Pool("gpu", C)], "fifo")
        assert np.array_equal(s.start, sc.simulate(tr, C, "fifo").start), (C, seed)
print(f"DL scheduler's FIFO == batch FIFO: {len(CAPACITIES) * CHECK_SEEDS} traces")

# %% [markdown]
# ## 5. The production library: Slurm and Ray placement groups
#
# **Slurm.** `BackfillSlurm` starts the private one-node Slurm of Appendix B with the node declared as
# 8 CPUs, `SchedulerType=sched/backfill`, `bf_interval=1` and FIFO priority. The five jobs are
# submitted while the partition is down (so Slurm sees them all at once), released together, and run
# as `sbatch -n size --time=limit --wrap "sleep runtime"`. We read the start times back from
# `scontrol show job` and compare the start order with our three policies.

# %%
reason = sl.unavailable_reason() if RUN_SLURM else "RUN_SLURM is False"
if reason:
    print("Slurm comparison skipped:", reason)
else:
    with sl.BackfillSlurm(cpus=8) as slurm:
        run = sl.run_on_slurm(small, slurm, timeout=60)
    print("Slurm starts (s):", run.start.astype(int).tolist(), " order:", sl.start_order(run.start),
          f" ({run.wall_s:.0f} s)")
    for policy in ("fifo", "easy", "conservative"):
        s = sc.simulate(small, 8, policy)
        print(f"{policy:12s} starts {s.start.astype(int).tolist()} order {sl.start_order(s.start)} "
              f"pairwise agreement with Slurm {sl.order_agreement(s.start, run.start):.2f}")
    assert sl.start_order(run.start) == sl.start_order(sc.simulate(small, 8, "conservative").start)

# %% [markdown]
# Slurm agrees with conservative backfill, not with EASY, and the one difference is job 3. That is
# Slurm's design: its backfill pass walks the pending jobs in priority order and plans a start time
# for every one it examines (up to `bf_max_job_test`), so a lower-priority job may start early only if
# it delays none of them; EASY protects the head alone. So job 3 (2 CPUs for up to 3 minutes) waits,
# because it would take CPUs promised to job 2, and job 4 (1 minute) backfills. The start *times*
# trail our prediction by about a second per step: Slurm notices a completion and runs its scheduler
# on a timer (`sched_interval`, `bf_interval`), not at the instant a job ends.
#
# **Ray placement groups** reserve a group of resource *bundles* across a cluster, all or nothing, with
# a strategy: PACK (as few nodes as possible), SPREAD (as many as possible), STRICT_PACK (one node or
# nothing), STRICT_SPREAD (one bundle per node or nothing). We start a `ray.cluster_utils.Cluster` of
# `RAY_NODES` nodes, 2 CPUs per node and a custom resource naming each node, place groups of 1-CPU
# bundles and compare where they land with `place_bundles`, our all-or-nothing gang placement.

# %%
if not RUN_RAY:
    print("Ray placement groups skipped: RUN_RAY is False")
else:
    import logging

    import ray
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    t0 = time.perf_counter()
    R = RAY_NODES
    rc = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"n0": 1},
                                                        "include_dashboard": False})
    try:
        for i in range(1, R):
            rc.add_node(num_cpus=2, resources={f"n{i}": 1})
        ray.init(address=rc.address, log_to_driver=False, logging_level=logging.ERROR)
        rc.wait_for_nodes()
        print(f"{R}-node Ray cluster up in {time.perf_counter() - t0:.1f} s")
        names = {f"n{i}" for i in range(R)}
        index = {n["NodeID"]: int(k[1:]) for n in ray.nodes() if n["Alive"] for k in n["Resources"]
                 if k in names}
        cases = [("PACK", 2), ("PACK", R), ("SPREAD", R), ("SPREAD", 2 * R - 1), ("STRICT_PACK", 2),
                 ("STRICT_PACK", 3), ("STRICT_SPREAD", R), ("STRICT_SPREAD", R + 1)]
        for strategy, k in dict.fromkeys(cases):       # R = 2 repeats PACK 2: once is enough
            bundles = [{"CPU": 1}] * k
            ours = sp.place_bundles(bundles, [{"CPU": 2}] * R, strategy)
            pg = placement_group(bundles, strategy=strategy)
            ready = pg.wait(timeout_seconds=10 if ours is not None else 2)
            table = placement_group_table(pg)
            remove_placement_group(pg)
            got = [index[table["bundles_to_node_id"][b]] for b in range(k)] if ready else None
            print(f"{strategy:13s} {k} bundles: Ray {table['state']:8s} {got}  ours {ours}")
            assert ready == (ours is not None)
            if ready:  # Ray picks node names its own way: compare bundles per node
                assert sorted(np.bincount(got, minlength=R)) == sorted(np.bincount(ours, minlength=R))
            deadline = time.perf_counter() + 10     # the removed group's CPUs come back asynchronously
            while ray.available_resources().get("CPU", 0) < 2 * R and time.perf_counter() < deadline:
                time.sleep(0.1)
    finally:
        ray.shutdown()
        rc.shutdown()

# %% [markdown]
# The shapes agree: PACK fills one node before opening another, SPREAD deals bundles round the nodes,
# STRICT_PACK of 3 CPUs on 2-CPU nodes and STRICT_SPREAD of one bundle more than there are nodes stay
# PENDING rather than start partly. Which node Ray picks first differs from run to run; the gang's shape
# does not.
#
# **Kubernetes.** Most GPU clusters outside HPC centres run Kubernetes, and `scaleout run --scale k8s`
# (Appendix B) turns a training script into a `batch/v1` *Indexed Job* of $K$ pods, one per node, each
# running `torchrun` with its completion index as node rank. Below is its dry-run output for a gang of
# $K = 4$ pods with one GPU each (the Job only: the launcher also renders a headless Service that gives
# each pod a DNS name).

# %%
import copy

from scaleoutai.cluster.launchers import k8s

K_PODS = 4
docs = k8s.render_k8s("train.py", nodes=K_PODS, nproc_per_node=1, gpus_per_node=1, ship_script=False)
job = docs[-1]
print(k8s.to_yaml([job]))
gang = copy.deepcopy(job)                     # what a gang-aware queue needs: two more lines
gang["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-a"
gang["spec"]["suspend"] = True
if K8S_VALIDATE:
    k8s.validate([docs[-2], job, gang])       # offline, Kubernetes 1.30 API schema, strict
    print("Service, Job and the Kueue Job fit the Kubernetes", k8s.SCHEMA_VERSION, "schema")
assert job["spec"]["parallelism"] == job["spec"]["completions"] == K_PODS

# %% [markdown]
# `parallelism: 4` asks for four pods, not for four pods *at once*. The default kube-scheduler places
# pods one at a time, so on a busy cluster three of them can start, hold their GPUs and wait at
# `torchrun`'s rendezvous for a fourth that finds no room: the partial start that Section 6's
# `launch_gang` refuses, and with two such jobs, a deadlock. The launcher has no gang annotation today;
# that is the next step. With Kueue the Job carries a `kueue.x-k8s.io/queue-name` label and is created
# with `suspend: true` (the two lines added above); Kueue admits it only when its queue's quota holds all
# four pods and then unsuspends it, and its `waitForPodsReady` option evicts an admitted gang that does
# not become ready in time. The scheduler-plugins *coscheduling* plugin does the same inside the
# scheduler: a `PodGroup` with `minMember: 4`, and no pod of the group binds until all four fit.
# Kueue's `ClusterQueue`s with cohorts and borrowing limits are how Kubernetes expresses the tenant
# shares of Section 4's scheduler.
#
# ## 6. Failures: an all-or-nothing gang launch while nodes fail
#
# A gang job must start on all its nodes or none, also when a node dies during the launch.
# `launch_gang` is a two-phase start on the communicator: the controller (rank 0) asks each node in
# turn to reserve itself and waits for that node's ack (it always knows whom it waits for); only when
# every node has acked does it send GO. A crashed node or a lost ack aborts the gang, and every node
# still alive is told to release. A node lost after GO fails the running job, which must be requeued
# whole (Slurm does the same when a node of a job dies).

# %%
show(sp.launch_gang)

# %%
net = cluster.Network(alpha=0.01, beta=0.0)
for K in KS:
    res = sp.run_gang_launch(K, 2.0, network=net)
    assert all(v["status"] == "ran" for v in res.values[1:])
    print(f"K={K}: ran on {K - 1} nodes, done at t = {res.values[0]['t']:.2f} s")
for name, faults in [("node 3 crashes before acking", cluster.Faults(crash={3: 0})),
                     ("node 2's ack is lost", cluster.Faults(drop={2: {0}})),
                     ("node 3 crashes while running", cluster.Faults(crash={3: 1}))]:
    res = sp.run_gang_launch(5, 2.0, network=net, faults=faults)
    nodes = [v["status"] if isinstance(v, dict) else "crashed" for v in res.values[1:]]
    print(f"{name:30s} -> controller: {res.values[0]['status']:8s} nodes: {nodes}")
    if res.values[0]["status"] == "aborted":
        assert all(s in ("released", "crashed") for s in nodes)   # nobody ran a piece of the gang

# %% [markdown]
# Before GO, a failure costs only messages: nobody computed. After GO it costs the whole job's work
# on every node, which is why real schedulers checkpoint long jobs (Chapter 18) and drain a node that
# misbehaves before they hand it another gang.
#
# ## 7. Measuring it
#
# First the simulator itself: jobs simulated per second on the `N_JOBS`-job trace, and each policy's
# metrics on the same trace.

# %%
rows, scheds = {}, {}
for policy in ("fifo", "easy", "conservative", "gang"):
    t0 = time.perf_counter()
    s = sc.simulate(trace, CAPACITY, policy, **({"mpl": MPL} if policy == "gang" else {}))
    dt = time.perf_counter() - t0
    m = sm.metrics(trace, s)
    rows[policy], scheds[policy] = m, s
    print(f"{policy:12s} {len(trace) / dt:9.0f} jobs/s  util {m['utilisation']:.2f}  "
          f"mean wait {m['mean_wait'] / 3600:7.1f} h  mean bsld {m['mean_bsld']:9.1f}  "
          f"frag {m['fragmentation']:.2f}  Jain {m['jain_users_bsld']:.2f}")

# %% [markdown]
# Then how the policies degrade as the offered load rises: mean bounded slowdown against load, the
# classic picture. (FIFO leaves the plot early: its queue grows without bound well below $\rho = 1$.)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for policy in ("fifo", "easy", "conservative", "gang"):
    b, u = [], []
    for load in LOADS:
        tr = datasets.job_trace(SWEEP_JOBS, capacity=CAPACITY, load=load, seed=SEED + 1)
        m = sm.metrics(tr, sc.simulate(tr, CAPACITY, policy))
        b.append(m["mean_bsld"])
        u.append(m["utilisation"])
    axes[0].semilogy(LOADS, b, "o-", label=policy)
    axes[1].plot(LOADS, u, "o-", label=policy)
axes[0].set_xlabel("offered load")
axes[0].set_ylabel("mean bounded slowdown")
axes[1].set_xlabel("offered load")
axes[1].set_ylabel("utilisation")
axes[1].plot(LOADS, np.minimum(LOADS, 1), "k:", label="offered")
axes[0].legend()
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Backfilling buys most of the difference: EASY and conservative track the offered load closely until
# the machine saturates, while FIFO's head-of-line blocking wastes capacity at every load. Gang
# time-slicing beats FIFO but falls far behind backfilling. Does it at least help the short jobs, at the
# long ones' expense, as time-slicing is meant to? Split the jobs at ten minutes of runtime and compare
# with EASY.

# %%
short = trace.runtime < 600
bs = {}
for policy in ("easy", "gang"):
    s = scheds[policy]
    bsld = np.maximum(1.0, (s.end - trace.submit) / np.maximum(trace.runtime, 10.0))
    bs[policy] = (bsld[short].mean(), np.median(bsld[short]), bsld[~short].mean())
    print(f"{policy:5s} short jobs ({short.sum()}): mean bsld {bs[policy][0]:8.1f}  median {bs[policy][1]:7.1f}   "
          f"long jobs: mean bsld {bs[policy][2]:7.1f}")
assert bs["gang"][0] > 5 * bs["easy"][0] and bs["gang"][1] > bs["easy"][1] and bs["gang"][2] > bs["easy"][2]

# %% [markdown]
# No: short jobs fare far worse under gang scheduling than under EASY, in mean and in median, and so do
# long ones. Two reasons. Admission into the `MPL` rows is FIFO: once the rows are full, a wide job at
# the head blocks everything behind it, short jobs included, and nothing backfills around it. And every running
# job progresses at $1/R$ of full speed with $R$ busy rows, less the switch cost: a slice of $q$
# seconds followed by a switch of $c$ seconds (on GPUs a context switch means saving and restoring the
# job's memory, effectively a checkpoint) gives each job $q / (R(q + c))$, and all processes of a job
# must wait for their common slot, the gang synchronisation that makes one slow node slow the whole job.
# Gandiva (Xiao et al., OSDI 2018) makes the switch cheap for deep-learning jobs by suspending them at
# mini-batch boundaries, where the state to save is smallest.
#
# Time-slicing does help short jobs in one regime: a long job holds the whole machine and short ones
# arrive behind it. Below, an 8-node machine runs a one-hour job on all 8 nodes, and twenty one-minute
# serial jobs arrive during its first seven minutes. EASY cannot backfill them (no node is free), so they
# wait for the hour; gang scheduling with two rows starts each at once at half speed, for the long job's
# price of a few minutes more. A switch cost eats into the gain (with half of each slice lost to
# switching, the short jobs take more than twice as long as with a free switch), but in this regime
# time-slicing still wins by an order of magnitude.

# %%
burst = sc.make_trace([(0, 8, 3600)] + [(10 + 20 * k, 1, 60) for k in range(20)])
regime = {}
for name, policy, kw in (("EASY", "easy", {}), ("gang, free switch", "gang", {"mpl": 2}),
                         ("gang, switch 10%", "gang", {"mpl": 2, "switch_cost": 0.1}),
                         ("gang, switch 50%", "gang", {"mpl": 2, "switch_cost": 0.5})):
    s = sc.simulate(burst, 8, policy, **kw)
    bsld = np.maximum(1.0, (s.end - burst.submit) / np.maximum(burst.runtime, 10.0))
    regime[name] = (bsld[1:].mean(), bsld[0])
    print(f"{name:18s} short jobs: mean bsld {bsld[1:].mean():5.1f}   the 1-hour job: bsld {bsld[0]:.2f}")
assert regime["gang, free switch"][0] < regime["gang, switch 10%"][0] < regime["gang, switch 50%"][0]
assert regime["gang, switch 50%"][0] > 2 * regime["gang, free switch"][0]
assert regime["gang, switch 50%"][0] < regime["EASY"][0] / 10

# %% [markdown]
# Accurate estimates matter too: the better the estimate, the tighter the shadow time and the more
# backfilling fits.

# %%
exact = datasets.JobTrace(trace.submit, trace.size, trace.runtime, trace.runtime, trace.user, trace.gpus)
for name, tr in (("user estimates", trace), ("exact estimates", exact)):
    m = sm.metrics(tr, sc.simulate(tr, CAPACITY, "easy"))
    print(f"EASY with {name:16s} mean wait {m['mean_wait'] / 3600:6.2f} h  mean bsld {m['mean_bsld']:8.1f}")

# %% [markdown]
# **The deep-learning scheduler.** `DL_JOBS` jobs of the same generator (sizes up to 16 GPUs, runtimes
# log-uniform from 10 s to a day: heavy-tailed, a few jobs hold most of the work) go to two GPU pools,
# 16 V100-class GPUs at speed 1 and 16 A100-class at speed 2. We compare FIFO; *one queue* (LAS with no
# thresholds: arrival order, but a job that does not fit no longer blocks those behind it, and an earlier
# job preempts later ones when it needs their GPUs); 2D-LAS; LAS with a 60 s checkpoint restore on every
# resume; and LAS with promotion after 6 hours of waiting. JCT is the job completion time
# (`mean_response` of `sched_metrics.metrics`), "longest wait" the longest time any job waited at a
# stretch.

# %%
pools = [dl.Pool("V100", 16, 1.0), dl.Pool("A100", 16, 2.0)]
dtr = datasets.job_trace(DL_JOBS, capacity=16, load=DL_LOAD, seed=SEED)
runs = {"FIFO": dict(policy="fifo"), "one queue": dict(thresholds=()), "LAS": dict(thresholds=THRESHOLDS),
        "LAS, restore 60 s": dict(thresholds=THRESHOLDS, restart_cost=60.0),
        "LAS, promote 6 h": dict(thresholds=THRESHOLDS, promote_after=6 * 3600.0)}
jct, longest = {}, {}
for name, kw in runs.items():
    s = dl.simulate_dl(dtr, pools, **kw)
    jct[name] = s.end - dtr.submit
    print(f"{name:18s} mean JCT {jct[name].mean() / 3600:6.1f} h  median {np.median(jct[name]) / 3600:5.2f} h  "
          f"longest wait {s.extra['max_spell'].max() / 3600:6.1f} h  preemptions {s.extra['preemptions'].sum():4d}")
    longest[name] = s.extra["max_spell"].max()
assert jct["LAS"].mean() < jct["FIFO"].mean() / 2 and np.median(jct["LAS"]) < np.median(jct["FIFO"]) / 10
assert jct["LAS"].mean() < jct["one queue"].mean() and np.median(jct["LAS"]) < np.median(jct["one queue"]) / 5
assert jct["LAS, restore 60 s"].mean() < 1.15 * jct["LAS"].mean()
assert longest["LAS, promote 6 h"] <= 6 * 3600 + 1e-6 < longest["LAS"]

# %% [markdown]
# LAS cuts the mean JCT several-fold against FIFO and the median by well over an order of magnitude.
# Part of that is only the end of head-of-line blocking, which one queue already buys; the rest is
# least attained service: against one queue, LAS still lowers the mean and cuts the median several-fold,
# because most jobs are short and no longer wait behind the long ones. The price is preemptions, each a
# checkpoint and a restore; a 60 s restore raises the mean JCT by only a few percent, because a job is
# preempted when it crosses a threshold or a lower queue needs its GPUs, not at every arrival (the point
# of discretising the queues). Plain LAS lets the biggest jobs wait for many hours at a stretch;
# promotion after 6 hours caps every wait at exactly 6 hours, for more preemptions and almost no change
# in the mean. To see the cap work where LAS alone starves a job, starve one on purpose: a 4-GPU job
# sinks to $Q_1$ after 10 s while 4-GPU jobs of 5 s arrive every 5 s and keep $Q_0$ full.

# %%
stream = sc.make_trace([(0, 4, 1000)] + [(1 + 5 * k, 4, 5) for k in range(400)])
for limit in (math.inf, 300.0, 100.0):
    s = dl.simulate_dl(stream, [dl.Pool("A100", 4)], thresholds=(40.0,), promote_after=limit)
    print(f"promote_after {limit:5.0f} s: the long job's longest wait {s.extra['max_spell'][0]:6.0f} s, "
          f"preempted {s.extra['preemptions'][0]} times")
    assert limit == math.inf or abs(s.extra["max_spell"][0] - limit) < 1e-6

# %% [markdown]
# Without promotion the long job waits for the whole 2000 s stream; with it, never longer than the knob:
# it is promoted to $Q_0$ with the earliest arrival there, so it preempts at once. Finally, tenant
# shares: three tenants flood a 64-GPU cluster (32 + 32 GPUs of the two types) at $t = 0$ with jobs of
# 1, 2 or 4 GPUs, weights 1 : 2 : 3. While all three still have work queued, each should hold its
# weight's share of the GPU-seconds; a tenant can be off by at most one job (4 of 64 GPUs).

# %%
rng = np.random.default_rng(SEED)
flood = sc.make_trace([(0, int(rng.choice([1, 2, 4])), float(rng.integers(100, 2000))) for _ in range(240)],
                      users=np.arange(240) % 3)
weights = [1.0, 2.0, 3.0]
fair = dl.simulate_dl(flood, [dl.Pool("V100", 32, 1.0), dl.Pool("A100", 32, 2.0)], thresholds=(2000.0,),
                      weights=weights)
busy_until = min(fair.end[flood.user == u].max() for u in range(3))
share = dl.tenant_shares(fair, 0.0, 0.8 * busy_until)
print("GPU-second shares", np.round(share, 3).tolist(), " weights say", np.round(np.array(weights) / 6, 3).tolist())
assert np.allclose(share, np.array(weights) / sum(weights), atol=4 / 64)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for name in ("FIFO", "one queue", "LAS", "LAS, promote 6 h"):
    x = np.sort(jct[name]) / 3600
    axes[0].semilogx(x, np.arange(1, len(x) + 1) / len(x), label=name)
axes[0].set_xlabel("job completion time (h)")
axes[0].set_ylabel("fraction of jobs")
axes[0].legend()
t, held = fair.extra["alloc"]
axes[1].stackplot(t, held.T, step="post", labels=[f"tenant {u} (weight {w:.0f})" for u, w in enumerate(weights)])
axes[1].axvline(busy_until, color="k", ls=":")
axes[1].set_xlabel("time (s)")
axes[1].set_ylabel("GPUs held")
axes[1].legend(loc="lower left", fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Left: under LAS most jobs finish within the hour; under FIFO most wait behind the long ones, and
# under one queue behind the long ones that arrived earlier.
# Right: the three tenants hold close to a sixth, a third and a half of the 64 GPUs until the first runs
# out of work (dotted line); then the others take its share, since fair sharing leaves no GPU idle while
# someone waits.

# %% [markdown]
# ## 8. Exercises
#
# 1. Add a `max_queue_depth` to EASY (Slurm's `bf_max_job_test`): backfill only among the first $d$
#    queued jobs. Plot mean slowdown and simulator speed against $d$.
# 2. Shortest-job-first backfill: order the backfill candidates by estimate instead of arrival. Does it
#    help slowdown? What happens to the largest jobs' waits?
# 3. Give `simulate_gang` a finite quantum $q$ and a context-switch cost; find the $q$ at which gang
#    scheduling beats EASY on mean bounded slowdown for the `N_JOBS` trace, if one exists.
# 4. Extend `drf_allocate` to weighted DRF (each user $i$ has a weight $w_i$; equalise $s_i / w_i$) and
#    check it against `reference_drf_lp` with the weights folded into the demands.
# 5. Make `launch_gang` tolerate a lost GO: the controller resends after a timeout, and nodes ignore a
#    duplicate. Test it with `cluster.Faults(loss=0.2, seed=...)` on every rank.
# 6. Replay the job set of Section 5 on Slurm with `SchedulerParameters=bf_max_job_test=1`. Which
#    policy does Slurm match now, and why?
# 7. **Lab 33 (`labs/lab33-easy-backfill`): EASY over CPUs and GPUs, online.** The simulators here schedule
#    one resource and know each runtime when a job starts. Build EASY backfill as an online scheduler
#    (arrivals and ends in, start decisions out) for jobs that ask for CPUs *and* GPUs and state a limit
#    they may overrun (a job is killed at its limit), then drive it from a controller whose K login nodes
#    hold the jobs and report when they end. Graded on legality (both capacities, the head's reservation)
#    and start for start against a single-machine simulator, for integer and float times.
# 8. Sweep the single threshold $T_1$ of 2D-LAS (`thresholds=(T1,)`) from 10 to $10^9$ GPU-seconds on
#    the deep-learning trace of Section 7 (400 jobs) and plot mean JCT, median JCT and preemptions
#    against $T_1$. What does LAS become at either end of the sweep, and why is the best $T_1$ in
#    between?
#
# ## 9. Research directions
#
# - **Scheduling deep-learning jobs by what they learn.** Xiao et al., "Gandiva: Introspective cluster
#   scheduling for deep learning", OSDI 2018: time-slices and migrates GPU jobs using their iteration
#   structure; Gu et al., "Tiresias: A GPU cluster manager for distributed deep learning", NSDI 2019:
#   least-attained-service without runtime estimates, the discretised 2D-LAS that Section 4 builds (its
#   promotion knob is relative, a multiple of the job's last run, where ours is a fixed wait). Open: how
#   much do they gain over backfilling when jobs are elastic?
# - **Learned and global schedulers for training clusters.** Hu et al., "Lucid: A non-intrusive,
#   scalable and interpretable scheduler for deep learning training jobs", ASPLOS 2023: predicts job
#   priorities and packing with interpretable models and reports mean JCT up to 1.3x lower than the
#   preemptive Tiresias; the queue order of Section 4 would come from a model instead of attained
#   service. Choudhury et al., "MAST: Global scheduling of ML training across geo-distributed
#   datacenters at hyperscale", OSDI 2024: Meta's scheduler places training jobs and their data across
#   regions; the pools of Section 4 become datacenters and placement a search over regions. Open: a
#   starvation bound like the promotion knob's for a scheduler whose order is learned.
# - **Heterogeneity-aware fairness.** Narayanan et al., "Heterogeneity-aware cluster scheduling
#   policies for deep learning workloads" (Gavel), OSDI 2020: recasts max-min fairness, makespan and
#   finish-time fairness as LPs over GPU types. Jayaram Subramanya et al., "Sia: Heterogeneity-aware,
#   goodput-optimized ML-cluster scheduling", SOSP 2023: matches elastic jobs to GPU types and counts
#   with a formulation that still solves quickly at thousands of GPUs. Open: DRF-like guarantees when a
#   task's demand depends on which accelerator it lands on.
# - **Co-adapting the job and the scheduler.** Qiao et al., "Pollux: Co-adaptive cluster scheduling for
#   goodput-optimized deep learning", OSDI 2021: the scheduler also picks each job's batch size and
#   GPU count. Open: stability and fairness when every job's speed-up curve is learned online.
# - **Learned schedulers.** Mao et al., "Learning scheduling algorithms for data processing clusters"
#   (Decima), SIGCOMM 2019: reinforcement learning over job DAGs. Open: guarantees (no starvation, no
#   reservation delays) for a learned policy, which backfilling gives by construction.
# - **Finish-time fairness.** Mahajan et al., "Themis: Fair and efficient GPU cluster scheduling",
#   NSDI 2020: auctions for GPU leases. Open: fairness across users whose jobs have very different
#   placement sensitivities.
# - **Clusters that train large language models.** Hu et al., "Characterization of Large Language Model
#   Development in the Datacenter", NSDI 2024: a six-month trace of one GPU datacenter shows pretraining,
#   evaluation jobs and failures behaving unlike earlier deep-learning workloads. Ye et al., "Deep
#   Learning Workload Scheduling in GPU Datacenters: A Survey", ACM Computing Surveys 2024: the schedulers
#   for training and inference sorted by objective and by how they use resources. Open: gang placement
#   that leaves room for the small jobs without preempting week-long runs.
#
# ## What's next
#
# Chapter 34 (Edge and fog computing) leaves the data centre: the nodes become phones, gateways and
# small servers with slow, unreliable links, and placing work means choosing between the device, the
# nearby fog node and the distant cloud, with the latency and energy models of Chapter 3.
