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
# # Chapter 2. Distributed-systems concepts
#
# Chapter 1 split a gradient over $K$ workers and found the answer exact. It quietly assumed that every
# worker answered, promptly and honestly, and that "before" and "after" meant the same thing on every
# machine. None of that holds on a real cluster. This chapter builds the vocabulary the rest of the
# book relies on: failure models, logical time, leader election, a majority-replicated log, and the
# arithmetic that says how many machines survive how many faults. Everything runs on the simulated
# cluster, where faults are injected deterministically, and the production shortcut is Ray's actor
# restarts.
#
# **Prerequisites:** Chapter 1 (Why scale out: the communicator, `cluster.run` and the ring of $K$
# workers). Background: basic probability (independent failures), and what a process, a message and a
# timeout are.

# %% tags=["parameters"]
K = 5  # smoke: 5
ENTRIES = 20  # smoke: 4
K_SWEEP = [3, 5, 7, 9, 15, 21]  # smoke: [3, 5, 7]
RANDOM_EVENTS = 40  # smoke: 12
SEED = 0

# %%
import itertools
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.foundations.clocks import causal_order, concurrent, happened_before, plot_spacetime, run_clocks
from scaleoutai.foundations.consensus import bully_election, majority, max_faults, min_nodes, replicate_log

rng = np.random.default_rng(SEED)
COMMANDS = list(range(100, 100 + ENTRIES))

# %% [markdown]
# ## 1. Motivation: which ceiling binds?
#
# Here the ceiling is not memory or FLOP/s but **reliability**. If one machine fails on a given day
# with probability $p$, a job that needs all $K$ of them survives the day with probability $(1-p)^K$.
# A failure that is rare on one machine is routine on a thousand: coordination must be designed for
# it, not hoped around.

# %%
p_fail = 1e-3  # one failure per machine every ~3 years
for k_ in (1, 8, 64, 1024, 16384):
    print(f"K={k_:6d}: P(at least one machine fails today) = {1 - (1 - p_fail) ** k_:6.1%}")

# %% [markdown]
# ## 2. Core concepts
#
# ### Failure models
#
# A failure model states what a faulty process may do. From mildest to worst:
#
# | model | what goes wrong | simulator |
# |---|---|---|
# | crash-stop (fail-stop) | a process halts and never returns | `Faults(crash={r: n})`: rank r halts at its (n+1)-th send |
# | omission | some messages are never sent or never delivered | a send the code skips: the receiver waits forever |
# | Byzantine | a process sends arbitrary, even conflicting, values | a rank that lies in what it sends |
# | straggler (performance) | a process is correct but slow | `Faults(slow={r: f})`: its compute takes f times longer |
#
# The simulator is *synchronous with a perfect failure detector*: a `recv` from a crashed rank raises
# `PeerCrashedError` instead of hanging. Real networks give no such oracle; they give timeouts, which
# cannot tell "crashed" from "slow". Keep that gap in mind: it is why real consensus protocols are
# harder than the ones below.

# %%
def ping(comm):
    if comm.rank == 0:
        comm.send(np.array([42]), 1)
        try:
            return int(comm.recv(1)[0])
        except cluster.PeerCrashedError as err:
            return f"rank 0 detected: {err}"
    msg = comm.recv(0)
    comm.send(msg + 1, 0)
    return "replied"

print("no fault  :", cluster.run(ping, 2).values)
print("crash-stop:", cluster.run(ping, 2, faults=cluster.Faults(crash={1: 0})).values)

# %% [markdown]
# A Byzantine worker is worse than a crashed one: it answers, with a wrong value. The mean of the
# workers' reports is ruined by one liar; the median survives as long as fewer than half lie (Chapter 35
# builds robust aggregation on this).

# %%
def report(comm, liar):
    from scaleoutai.collectives import gather
    value = np.array([1e9 if comm.rank == liar else 1.0 + 0.01 * comm.rank])
    return gather(comm, value, root=0)

reports = cluster.run(report, K, args=(K - 1,)).values[0]
print(f"reports {np.round(reports, 2)} -> mean {reports.mean():.3g}, median {np.median(reports):.3g}")
assert np.median(reports) < 2 and reports.mean() > 1e8

# %% [markdown]
# A straggler slows everyone who waits for it. Each rank works for one simulated second and then
# meets the others at a barrier:

# %%
def work_then_barrier(comm):
    comm.compute(1.0)
    comm.barrier()
    return comm.clock

fast = cluster.run(work_then_barrier, K)
slow = cluster.run(work_then_barrier, K, faults=cluster.Faults(slow={2: 4.0}))
print(f"makespan {fast.sim_time:.1f} s without a straggler, {slow.sim_time:.1f} s with one 4x-slow rank")
assert slow.sim_time == 4.0 * fast.sim_time

# %% [markdown]
# ### How many faults can K machines survive?
#
# To survive $f$ crashes, a decision must be backed by a **quorum** that still exists after $f$ machines
# vanish, and any two quorums must overlap so that two decisions cannot contradict each other.
# Majorities of $\lfloor K/2 \rfloor + 1$ do both exactly when $K \ge 2f+1$. Against $f$ Byzantine
# processes, which can tell different quorums different stories, the overlap must contain at least one
# honest process beyond the liars: $K \ge 3f+1$.

# %%
print(f"{'K':>3} {'majority':>8} {'crash f':>8} {'Byzantine f':>11}")
for k_ in (1, 2, 3, 4, 5, 7, 10):
    print(f"{k_:3d} {majority(k_):8d} {max_faults(k_, 'crash'):8d} {max_faults(k_, 'byzantine'):11d}")
    assert min_nodes(max_faults(k_), "crash") <= k_ < min_nodes(max_faults(k_) + 1, "crash")
    assert all(a & b for a, b in itertools.combinations([set(q) for q in itertools.combinations(range(k_), majority(k_))], 2))

# %% [markdown]
# ### Logical time: Lamport and vector clocks
#
# Machines' wall clocks drift, so "a happened before b" cannot be read off timestamps. Lamport's
# **happened-before** relation $\to$ uses only what the processes can observe: $a \to b$ if $a$ precedes
# $b$ on the same process, or $a$ sends a message that $b$ receives, or by transitivity. Events related
# by neither direction are **concurrent**, $a \parallel b$.
#
# * A **Lamport clock** is one counter per process: tick on every event, and on a receive jump to
#   $\max(\text{own}, \text{received}) + 1$. It guarantees $a \to b \Rightarrow L(a) < L(b)$, but
#   not the converse.
# * A **vector clock** keeps one counter per process. Merge by elementwise max on receive, then tick.
#   Then $a \to b \iff V(a) \le V(b)$ elementwise and $V(a) \ne V(b)$: it decides happened-before exactly.
#
# `run_clocks` runs a script of local, send and receive events on the simulated cluster; every message
# carries the sender's clocks appended to its payload as one int64 array. `causal_order` computes the
# same relation the slow way, by graph reachability, without any clocks: the reference.

# %%
SCRIPT = [
    [("send", 1), ("local",), ("recv", 2)],
    [("local",), ("recv", 0), ("send", 2)],
    [("local",), ("recv", 1), ("send", 0)],
]
events, res = run_clocks(SCRIPT, trace=True)
ev = {(e.rank, e.index): e for evs in events for e in evs}
after = causal_order(SCRIPT)
for a, b in itertools.permutations(ev, 2):
    assert happened_before(ev[a].vector, ev[b].vector) == (b in after[a])
    if b in after[a]:
        assert ev[a].lamport < ev[b].lamport
a2, b1 = ev[(0, 1)], ev[(1, 0)]
print(f"a2 {a2.vector} and b1 {b1.vector}: concurrent={concurrent(a2.vector, b1.vector)}, "
      f"yet Lamport says {a2.lamport} vs {b1.lamport}")
fig, ax = plt.subplots(figsize=(9, 3))
plot_spacetime(events, ax=ax);

# %% [markdown]
# Every pair of events is classified identically by the vector clocks and by the reference graph. Now
# a random run on $K$ ranks, where nobody could list the pairs by hand:

# %%
def random_script(k_, n, rng):
    script = [[] for _ in range(k_)]
    for _ in range(n):
        if rng.random() < 0.3:
            script[int(rng.integers(k_))].append(("local",))
        src, dst = (int(v) for v in rng.choice(k_, size=2, replace=False))
        script[src].append(("send", dst))
        script[dst].append(("recv", src))
    return script

script = random_script(K, RANDOM_EVENTS, rng)
events, _ = run_clocks(script)
ev = {(e.rank, e.index): e for evs in events for e in evs}
after = causal_order(script)
pairs = list(itertools.permutations(ev, 2))
hb = sum(b in after[a] for a, b in pairs)
assert all(happened_before(ev[a].vector, ev[b].vector) == (b in after[a]) for a, b in pairs)
lamport_only = sum(ev[a].lamport < ev[b].lamport and b not in after[a] for a, b in pairs)
print(f"{len(ev)} events, {len(pairs)} ordered pairs: {hb} in happened-before, all matched by vector clocks; "
      f"{lamport_only} more pairs have L(a) < L(b) although a and b are concurrent")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# **Leader election (bully).** Many protocols are simpler with one coordinator, so the ranks first agree
# on who it is. Rank $r$ sends ELECTION to every higher rank; a live higher rank answers OK ("stand
# down, I outrank you"); a rank that hears no OK leads and sends COORDINATOR to every lower rank, and
# ranks that stood down forward the winner's name downward. $O(K^2)$ messages, and the highest rank
# that survives wins.
#
# **Majority-replicated log (Raft, simplified).** The leader turns each client command into a log entry
# and sends it (AppendEntries) to every follower; each follower appends and acknowledges. An entry is
# **committed**, safe to apply, once a majority including the leader stores it: any future majority
# overlaps this one, so the entry cannot be lost while at most $\lfloor (K-1)/2 \rfloor$ ranks crash.
# The commit index travels on the next AppendEntries. Per entry: $K-1$ messages out, $K-1$ acks back.

# %%
res = cluster.run(replicate_log, K, args=(COMMANDS[:3],), trace=True)
cluster.plot_timeline(res, title=f"3 log entries on K={K}: AppendEntries fan out, acks fan in");

# %% [markdown]
# ## 4. A minimal from-scratch implementation
#
# `bully_election(comm)` and `replicate_log(comm, commands, leader=0)` in `scaleoutai.foundations.consensus` are
# plain send/recv code on the communicator. In `bully_election` read what a rank does when a higher
# rank stays silent (it takes over) and why the highest live rank always wins. In `replicate_log` read
# the two phases of every entry: the leader's AppendEntries fan-out, then the majority of acks after
# which, and only after which, the entry is committed. Without faults every rank elects rank $K-1$, and
# every follower ends with the leader's log, fully committed.

# %%
from scaleoutai.notebooks import show

show(bully_election, replicate_log, majority)

# %% [markdown]
# The fault-free runs:

# %% tags=["slide-code"]
res = cluster.run(bully_election, K)
assert res.values == [K - 1] * K
res = cluster.run(replicate_log, K, args=(COMMANDS,))
for v in res.values:
    assert v["log"] == COMMANDS and v["commit_index"] == ENTRIES - 1
print(f"K={K}: all elect rank {K - 1}; all {K} logs equal the {ENTRIES} commands, commit index {ENTRIES - 1}")

# %% [markdown]
# ## 5. The same task with a production library: Ray actors with restarts
#
# Production systems rarely hand-roll election and replication for the application; they lean on a
# runtime that watches processes and restarts them. A Ray **actor** is a stateful process; with
# `max_restarts=1` Ray restarts it once if it dies, and `max_task_retries=1` re-runs the call that was
# in flight. Below, the actor crashes (the process exits) on a call, is restarted, and the retried call
# succeeds in a new process. Notice what a restart does *not* do: the counter starts again from zero.
# Restarting buys liveness; keeping state needs a checkpoint (Chapter 18) or a replicated log like the
# one above. A second crash exceeds `max_restarts` and the actor is gone for good. Ray reports each
# dying worker process on stderr (the `(raylet)` lines below): that is the expected, injected crash.

# %%
import logging
import os
import shutil
import tempfile

import ray

flags = tempfile.mkdtemp(prefix="ch02-ray-")  # crash markers: they outlive the actor's process
t0 = time.perf_counter()
for attempt in (1, 2):  # a local Ray gives its raylet a fixed 30 s to start; a busy machine can miss it
    try:
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                 object_store_memory=100 * 2**20)
        break
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception on start-up timeout
        ray.shutdown()
        if attempt == 2:
            raise
        print(f"Ray did not start ({exc}); trying once more")
startup = time.perf_counter() - t0
try:
    @ray.remote(max_restarts=1, max_task_retries=1)
    class Counter:
        def __init__(self):
            self.n = 0

        def step(self, crash_flag=None):
            self.n += 1
            if crash_flag and not os.path.exists(crash_flag):  # crash the first time only
                open(crash_flag, "w").close()
                os._exit(1)
            return self.n, os.getpid()

    actor = Counter.remote()
    first = [ray.get(actor.step.remote()) for _ in range(3)]
    after_crash = ray.get(actor.step.remote(os.path.join(flags, "crash1")))  # crashes, restarts, retries
    assert [n for n, _ in first] == [1, 2, 3] and after_crash[0] == 1 and after_crash[1] != first[0][1]
    print(f"before: counts {[n for n, _ in first]} in pid {first[0][1]}; "
          f"after one crash: count {after_crash[0]} in new pid {after_crash[1]} (state lost)")
    try:
        ray.get(actor.step.remote(os.path.join(flags, "crash2")))
        raise AssertionError("a second crash must exceed max_restarts=1")
    except ray.exceptions.RayActorError as err:
        print(f"second crash: {type(err).__name__}, the actor is gone (max_restarts=1 used up)")
finally:
    ray.shutdown()
    shutil.rmtree(flags, ignore_errors=True)
print(f"Ray start-up took {startup:.1f} s; the whole cell {time.perf_counter() - t0:.1f} s")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# ### Elections with crashes
#
# Crashing the top rank before it says anything hands leadership to the next one. Crashing it *during*
# the announcement is the subtle case: some ranks heard "rank $K-1$ leads", others did not. Because
# announcements go to the highest ranks first and are forwarded down, the survivors still agree. We
# check agreement for every crash point of the top rank and of the top two ranks.

# %%
def survivors(res):
    return {r: v for r, v in enumerate(res.values) if not isinstance(v, cluster.RankCrashed)}

live = survivors(cluster.run(bully_election, K, faults=cluster.Faults(crash={K - 1: 0})))
assert set(live.values()) == {K - 2}
print(f"rank {K - 1} crashed before the election: survivors {sorted(live)} elect {K - 2}")
checked = 0
for crash in [{K - 1: n} for n in range(2 * K)] + [{K - 1: n, K - 2: m} for n in range(K) for m in range(K)]:
    live = survivors(cluster.run(bully_election, K, faults=cluster.Faults(crash=crash)))
    assert len(set(live.values())) == 1 and min(live.values()) >= max(live), (crash, live)
    checked += 1
print(f"{checked} crash schedules: the survivors always agree on one leader")

# %% [markdown]
# ### The replicated log under crashes
#
# With $f$ crashed followers the leader still collects $K - f$ copies of each entry (its own included).
# Entries commit when $K - f \ge \lfloor K/2 \rfloor + 1$, that is when $f < K/2$:

# %%
rows = []
for f in range(K):
    crash = {r: 0 for r in range(K - f, K)}  # followers that crash before acknowledging anything
    res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash=crash))
    leader = res.values[0]
    committed = leader["commit_index"] + 1
    rows.append((f, leader["acks"][0], committed))
    assert committed == (ENTRIES if f < K / 2 else 0), (f, committed)
    for v in survivors(res).values():
        assert v["log"] == COMMANDS and v["commit_index"] == leader["commit_index"]
for f, held, committed in rows:
    print(f"K={K}, f={f} crashed followers: {held} copies per entry (need {majority(K)}) -> "
          f"{committed}/{ENTRIES} entries committed")

# %% [markdown]
# Crashes can also land in the middle of the run. Here two of three followers acknowledge the first
# two entries and then crash: those two entries stay committed (a majority held them), every later
# entry sits uncommitted in the leader's log. And if the *leader* crashes, the followers detect it and
# stop; what is committed survives on a majority, and a new election (above) picks the next leader.

# %%
res = cluster.run(replicate_log, 3, args=(COMMANDS,), faults=cluster.Faults(crash={1: 2, 2: 2}))
print("acks per entry:", res.values[0]["acks"], "-> commit index", res.values[0]["commit_index"])
assert res.values[0]["commit_index"] == 1
res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash={0: 2 * (K - 1)}))
print("leader crashed after 2 entries; followers hold", [v["log"] for v in survivors(res).values()])
assert all(v["log"] == COMMANDS[:2] for v in survivors(res).values())

# %% [markdown]
# ### Omission and deadlock
#
# An omission fault is a message that never arrives, and a crash detector cannot see it: the sender is
# alive. Below, rank 0 "loses" its request and waits for a reply; rank 1 waits for the request. On a
# real cluster both would hang until a timeout. The simulator sees that every live rank waits and
# nothing is in flight, and raises `DeadlockError` naming who waits for whom.

# %% tags=["slide-code"]
def lost_request(comm):
    if comm.rank == 0:
        # the request to rank 1 is dropped here: an omission fault
        return comm.recv(1)
    request = comm.recv(0)
    comm.send(request, 0)

try:
    cluster.run(lost_request, 2, timeout=30)
    raise AssertionError("the run must deadlock")
except cluster.DeadlockError as err:
    print(err)
    assert set(err.waiting) == {0, 1}

# %% [markdown]
# ## 7. Evaluation: what replication costs
#
# Replication trades messages for survival. Per committed entry the leader sends $K-1$ AppendEntries and
# receives $K-1$ acks, so traffic grows linearly with $K$, while the tolerated crashes grow only as
# $\lfloor (K-1)/2 \rfloor$. Each step of $f$ costs two more replicas. We measure messages and bytes per
# committed entry on the simulator (the final heartbeat is amortised over the entries) and the
# simulated commit latency under an alpha-beta network.

# %%
net = cluster.Network(alpha=5e-5, beta=1e-9)
msgs, nbytes, latency = [], [], []
for k_ in K_SWEEP:
    res = cluster.run(replicate_log, k_, args=(COMMANDS,), network=net)
    sent = sum(s.messages_sent for s in res.stats)
    assert sent == (k_ - 1) * (ENTRIES + 1) + (k_ - 1) * ENTRIES and res.values[0]["commit_index"] == ENTRIES - 1
    msgs.append(sent / ENTRIES)
    nbytes.append(sum(s.bytes_sent for s in res.stats) / ENTRIES)
    latency.append(res.stats[0].sim_time / ENTRIES)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
axes[0].plot(K_SWEEP, msgs, "o-", label="messages / entry")
axes[0].plot(K_SWEEP, [max_faults(k_) for k_ in K_SWEEP], "s--", label="crashes tolerated f")
axes[0].set_xlabel("replicas K")
axes[0].legend()
axes[0].set_title("cost and benefit of replication")
axes[1].plot(K_SWEEP, np.array(latency) * 1e3, "o-", color="C2")
axes[1].set_xlabel("replicas K")
axes[1].set_ylabel("ms per committed entry")
axes[1].set_title("simulated commit latency (alpha = 50 us)")
for k_, m, b in zip(K_SWEEP, msgs, nbytes):
    print(f"K={k_:2d}: {m:5.1f} messages, {b:6.0f} bytes per committed entry; tolerates {max_faults(k_)} crashes")

# %% [markdown]
# The leader sends its AppendEntries one after another, so commit latency grows linearly in $K$ too;
# real systems pipeline and batch entries to amortise it, and keep $K$ small (3 or 5 replicas of the
# coordination state), while the data-parallel workers of Chapter 1 can number in the thousands.
#
# ## 8. Exercises
#
# 1. **Lamport is not enough.** Find the smallest script (fewest events) in which two concurrent events
#    get Lamport timestamps 1 and 2. Then show that $L(a) < L(b)$ and $V(a) \not\le V(b)$ can both hold.
# 2. **Byzantine arithmetic.** With $K = 3$ and one liar, show by example that a majority vote can be
#    split so that the two honest ranks decide differently when the liar tells each a different story,
#    and explain why $K = 4 = 3f+1$ repairs it.
# 3. **Election cost.** Count the messages of `bully_election` without faults as a function of $K$, then
#    measure it with `res.stats`. Which ranks send the most?
# 4. **Leader crash.** Combine the two protocols: run `replicate_log`, crash the leader mid-way, elect a
#    new leader among the survivors with `bully_election`, and let it continue replicating. Which
#    entries are safe to keep, and why must the new leader hold every committed entry?
# 5. **Stragglers and quorums.** Make one follower 10x slower with `Faults(slow=...)` and `comm.compute`
#    before each ack. Does the leader need to wait for it? Change `replicate_log` to commit after the
#    first majority of acks and measure the latency gain.
# 6. **Lab 2** (`labs/lab02-vector-clocks`, graded): use vector timestamps during the run, not after
#    it: causal broadcast with a hold-back queue, so that no rank delivers a message before its causes.
#    The grader reorders the links and reads your timestamps on the wire.
#
# ## 9. Research directions
#
# - **Consensus that stays fast when the network is not.** Majority replication pays a round trip to a
#   quorum for every entry, and one slow or distant replica in that quorum stretches every commit. Cutting
#   that latency (leaderless protocols, flexible quorums, consensus offloaded to the network) without
#   weakening safety is an active line of work, and it decides how fast a training job's coordinator or
#   a serving system's metadata store can go.
#   - Ongaro and Ousterhout, "In Search of an Understandable Consensus Algorithm", USENIX ATC, 2014.
#     Raft: leader election and log replication split into parts a reader can check, the design our
#     `replicate_log` follows.
#   - Howard, Malkhi and Spiegelman, "Flexible Paxos: Quorum Intersection Revisited", OPODIS, 2016.
#     Shows that only the quorums of different phases must intersect, which allows smaller, faster
#     replication quorums.
#   - Ryabinin, Gotsman and Sutra, "SwiftPaxos: Fast Geo-Replicated State Machines", NSDI, 2024. Commits a
#     command in two message delays when replicas agree on its order and in three otherwise, by letting
#     each replica vote for the order it saw before it follows the leader.
# - **Failure detection and gray failures.** A timeout cannot tell a dead machine from a slow one, and in
#   large clusters the common failures are partial: a node that answers heartbeats but corrupts data or
#   runs at a tenth of its speed. Detecting those reliably, and deciding when to evict, is still largely
#   engineering folklore.
#   - Chandra and Toueg, "Unreliable Failure Detectors for Reliable Distributed Systems", Journal of the
#     ACM, 1996. Characterises exactly how good a failure detector must be for consensus to be solvable.
#   - Huang, Guo, Zhang, Li, Tang, Sun, Wang, Chen, Zhou and Zhou, "Gray Failure: The Achilles' Heel of
#     Cloud-Scale Systems", HotOS, 2017. Names the partial failures that simple detectors miss and why they
#     dominate incidents in large clouds.
#   - Lu et al., "Perseus: A Fail-Slow Detection Framework for Cloud Storage Systems", FAST, 2023. Finds
#     drives that still answer but have become slow, with a light regression of latency against load that
#     flags outliers drive by drive, over a fleet of about a quarter of a million drives.
# - **Time and order at scale.** Vector clocks grow with the number of processes, and physical clocks
#   drift. Ordering events cheaply across thousands of machines, with bounded clock uncertainty, remains
#   a trade-off between metadata size, hardware support and the guarantees offered.
#   - Lamport, "Time, Clocks, and the Ordering of Events in a Distributed System", Communications of the
#     ACM, 1978. Defines happened-before and logical clocks, the basis of Section 2.
#   - Corbett et al., "Spanner: Google's Globally-Distributed Database", OSDI, 2012. Bounds clock
#     uncertainty with TrueTime so that commit order can follow real time across data centres.
# - **Machines that compute wrongly without failing.** A failure detector assumes a faulty node stops or
#   slows down; a processor that silently returns wrong results passes every heartbeat and can corrupt a
#   checkpoint or a gradient sum. How often this happens, how to test for it in production, and how a
#   distributed job should defend itself (redundant computation, checksums on reductions) are open.
#   - Dixit et al., "Silent Data Corruptions at Scale", arXiv preprint, 2021. Reports hundreds of CPUs in a
#     large fleet that produced wrong results without raising any hardware error.
#   - Wang, Zhang, Wei, Wang, Wu and Luo, "Understanding Silent Data Corruptions in a Large Production CPU
#     Population", SOSP, 2023. Studies silent corruption across more than a million processors: which
#     instructions are affected, how reproducible the errors are, and how temperature triggers the rare
#     ones.
#
# ## What's next
#
# Chapter 3 (Performance models) puts numbers on what this chapter only counted: the $\alpha$-$\beta$
# cost of each message, Amdahl's and Gustafson's laws, and what a straggler does to a synchronous step.
# The failure models come back in Chapter 18 (Elastic and fault-tolerant training), where a crashed
# rank must not lose a training run.
