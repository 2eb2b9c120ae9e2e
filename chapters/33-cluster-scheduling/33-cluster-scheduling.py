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
# the metrics that judge them, and dominant resource fairness for several resources at once; then it
# replays a small job set on a real Slurm, lays resource bundles out on a three-node Ray cluster with
# placement groups, launches a gang all-or-nothing over the communicator while nodes fail, and
# measures the policies on a 10,000-job trace.
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
RUN_SLURM = True
RUN_RAY = True  # smoke: False
SEED = 0

# %% [markdown]
# `N_JOBS` jobs are generated for a machine of `CAPACITY` nodes; `LOADS` are the offered loads of the
# sweep in Section 7 (`SWEEP_JOBS` jobs each); `CHECK_SEEDS` seeded traces per machine size in
# `CAPACITIES` are checked against the reference; `KS` are the world sizes of the gang launch and
# `MPL` the number of time slices of gang scheduling. `RUN_SLURM` and `RUN_RAY` switch the production
# runs of Section 5 (Slurm still skips, with the reason, where it cannot start). The smoke run leaves
# the three-node Ray cluster out to stay within a minute on a two-core machine; the full run and
# `tests/test_infra_scheduling.py` start it.
#
# ## 1. Motivation: which ceiling binds
#
# On a shared cluster the binding ceiling is neither FLOP/s nor bandwidth but the queue. A job that
# needs 64 of 128 nodes cannot start while 70 are busy, however fast each node is; if the scheduler
# lets nothing overtake it, the other 58 nodes sit idle too. Below, the same 10,000 jobs run under
# plain first-come-first-served and under backfilling: same machine, same jobs, a different rule.

# %%
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
# nothing), STRICT_SPREAD (one bundle per node or nothing). We start a three-node
# `ray.cluster_utils.Cluster`, 2 CPUs per node and a custom resource naming each node, place groups of
# 1-CPU bundles and compare where they land with `place_bundles`, our all-or-nothing gang placement.

# %%
if not RUN_RAY:
    print("Ray placement groups skipped: RUN_RAY is False")
else:
    import logging

    import ray
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    t0 = time.perf_counter()
    rc = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"n0": 1},
                                                        "include_dashboard": False})
    try:
        for i in (1, 2):
            rc.add_node(num_cpus=2, resources={f"n{i}": 1})
        ray.init(address=rc.address, log_to_driver=False, logging_level=logging.ERROR)
        rc.wait_for_nodes()
        print(f"3-node Ray cluster up in {time.perf_counter() - t0:.1f} s")
        index = {n["NodeID"]: int(k[1:]) for n in ray.nodes() if n["Alive"] for k in n["Resources"]
                 if k in ("n0", "n1", "n2")}
        for strategy, k in [("PACK", 2), ("PACK", 3), ("SPREAD", 3), ("SPREAD", 5), ("STRICT_PACK", 2),
                            ("STRICT_PACK", 3), ("STRICT_SPREAD", 3), ("STRICT_SPREAD", 4)]:
            bundles = [{"CPU": 1}] * k
            ours = sp.place_bundles(bundles, [{"CPU": 2}] * 3, strategy)
            pg = placement_group(bundles, strategy=strategy)
            ready = pg.wait(timeout_seconds=10 if ours is not None else 2)
            table = placement_group_table(pg)
            remove_placement_group(pg)
            got = [index[table["bundles_to_node_id"][b]] for b in range(k)] if ready else None
            print(f"{strategy:13s} {k} bundles: Ray {table['state']:8s} {got}  ours {ours}")
            assert ready == (ours is not None)
            if ready:  # Ray picks node names its own way: compare bundles per node
                assert sorted(np.bincount(got, minlength=3)) == sorted(np.bincount(ours, minlength=3))
            time.sleep(0.2)
    finally:
        ray.shutdown()
        rc.shutdown()

# %% [markdown]
# The shapes agree: PACK fills one node before opening another, SPREAD deals bundles round the nodes,
# STRICT_PACK of 3 CPUs on 2-CPU nodes and STRICT_SPREAD of 4 bundles on 3 nodes stay PENDING rather
# than start partly. Which node Ray picks first differs from run to run; the gang's shape does not.
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
rows = {}
for policy in ("fifo", "easy", "conservative", "gang"):
    t0 = time.perf_counter()
    s = sc.simulate(trace, CAPACITY, policy, **({"mpl": MPL} if policy == "gang" else {}))
    dt = time.perf_counter() - t0
    m = sm.metrics(trace, s)
    rows[policy] = m
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
# time-slicing helps short jobs (their slowdown) but stretches long ones. Accurate estimates matter
# too: the better the estimate, the tighter the shadow time and the more backfilling fits.

# %%
exact = datasets.JobTrace(trace.submit, trace.size, trace.runtime, trace.runtime, trace.user, trace.gpus)
for name, tr in (("user estimates", trace), ("exact estimates", exact)):
    m = sm.metrics(tr, sc.simulate(tr, CAPACITY, "easy"))
    print(f"EASY with {name:16s} mean wait {m['mean_wait'] / 3600:6.2f} h  mean bsld {m['mean_bsld']:8.1f}")

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
#
# ## 9. Research directions
#
# - **Scheduling deep-learning jobs by what they learn.** Xiao et al., "Gandiva: Introspective cluster
#   scheduling for deep learning", OSDI 2018: time-slices and migrates GPU jobs using their iteration
#   structure; Gu et al., "Tiresias: A GPU cluster manager for distributed deep learning", NSDI 2019:
#   least-attained-service without runtime estimates. Open: how much do they gain over backfilling
#   when jobs are elastic?
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
