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
# # Chapter 6. MapReduce
#
# Part I distributed a computation whose data fitted on every worker. Part II distributes the data
# itself. MapReduce is the smallest complete answer: every worker **maps** its own block of records to
# key-value pairs, a **shuffle** sends every pair to the worker that owns its key, and each worker
# **reduces** the values of its keys. The shuffle is the all-to-all of Chapter 4, and it returns in
# Chapter 15 as the reduce-scatter inside every all-reduce. This chapter builds the whole job on the
# communicator, checks it against the sequential job for every $K$, measures what the shuffle moves,
# and runs the same word count with Ray Data.
#
# **Prerequisites:** Chapter 4 (Communication primitives: all-to-all and its $\alpha$-$\beta$ cost) and
# Chapter 5 (Evaluation discipline: $S_p$, $E_p$ and cost from measurements); Chapter 3 for stragglers.
# Background: Python dictionaries and hashing, and the idea of a group-by in SQL or pandas.

# %% tags=["parameters"]
N_LINES = 20_000  # smoke: 2_000
WORDS_PER_LINE = 10
VOCAB = 5_000  # smoke: 500
KS = [1, 2, 3, 4, 6, 8, 12, 16]  # smoke: [1, 2, 3, 5, 8]
MAP_SECONDS = 2e-5  # simulated map cost per line
REDUCE_SECONDS = 1e-6  # simulated reduce cost per value
ALPHA = 1e-5
BETA = 1e-9
SEED = 0

# %% [markdown]
# `N_LINES` lines of generated text (`WORDS_PER_LINE` words each, drawn from `VOCAB` words with Zipf
# frequencies, as in natural text) are the input; `KS` are the world sizes; `MAP_SECONDS` and
# `REDUCE_SECONDS` are the simulated costs of mapping a line and reducing a value; `ALPHA` and `BETA`
# describe the simulated network.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling here is reading the data. A single disk or network link streams a few hundred megabytes to
# a few gigabytes per second, so one machine needs minutes per terabyte just to *see* a web crawl, a
# click log or a pretraining corpus, before it computes anything. Split the records over $K$ machines that
# each read their own block and the scan time falls as $1/K$; what stops it is the data that must move
# between machines to bring each key's values together.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.data import mapreduce as mr
from scaleoutai.data import mapreduce_tasks as mt

corpus_tb, read_gbs = 10.0, 1.0  # a 10 TB corpus, each machine reading at 1 GB/s
for K in (1, 10, 100, 1000):
    print(f"K = {K:>4}: scan time {corpus_tb * 1e12 / (K * read_gbs * 1e9) / 3600:8.2f} h")

# %% [markdown]
# ## 2. Core concepts
#
# A job is three functions. `mapper(record)` returns key-value pairs; an optional `combiner(key,
# values)` pre-reduces the pairs a worker produced for one key before they leave it; `reducer(key,
# values)` turns all values of a key into the result. **Hash partitioning** decides where a key goes:
# partition `stable_hash(key) mod R` of $R$ partitions, partition $p$ living on rank $p \bmod K$. The hash
# must be the same in every process; Python's own `hash` of a string is salted per process, so the
# library hashes the key's text with BLAKE2.
#
# The **sequential reference** is the definition: map every record in order, group by key, reduce each
# key. The distributed job must give exactly the same dictionary. Here is word count on three lines:

# %%
lines = datasets.zipf_lines(N_LINES, WORDS_PER_LINE, VOCAB, seed=SEED)
print(lines[:3])
tiny = ["the cat sat", "the dog sat", "a cat ran"]
print(mr.reference_mapreduce(tiny, mr.word_count_mapper, mr.sum_reducer))
reference = mr.reference_mapreduce(lines, mr.word_count_mapper, mr.sum_reducer)
top = sorted(reference.items(), key=lambda kv: -kv[1])[:5]
print(f"{N_LINES} lines, {sum(reference.values())} words, {len(reference)} distinct; most frequent: {top}")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Rank $r$ maps block $r$ of the records, so the map phase needs no communication. The shuffle is one
# all-to-all: rank $r$ sends to rank $j$ the pairs whose partition lives on $j$. With keys spread
# uniformly a fraction $(K-1)/K$ of every rank's pairs leaves it, so the shuffle moves almost all of the
# mapped data once, in $K-1$ rounds of $\alpha + \frac{n}{K}\beta$ for $n$ bytes per rank. The reduce phase
# is local again. The timeline below shows the three phases on 4 simulated ranks.

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)


def word_count(comm, lines, combiner=None):
    mine, stats = mr.run_mapreduce(comm, lines, mr.word_count_mapper, mr.sum_reducer, combiner,
                                   map_seconds=MAP_SECONDS, reduce_seconds=REDUCE_SECONDS)
    return mine, stats, comm.clock


traced = cluster.run(word_count, 4, args=(lines[:400],), network=net, trace=True)
cluster.plot_timeline(traced, title="word count on K = 4: map (no messages), shuffle (all-to-all), reduce")
plt.show()

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `mr.run_mapreduce` is the whole job. Read it in the order of Section 3: the block of records this rank
# maps, the combiner, the partition of every pair and the list it joins, the single `all_to_all` (pairs
# travel pickled inside a `uint8` array, the communicator's payload type), and the reduce over the pairs
# received, concatenated in rank order. That order is the invariant that makes the result exact: blocks
# are contiguous, so the values of a key reach its reducer in record order, as in the sequential job.

# %%
from scaleoutai.notebooks import show

show(mr.run_mapreduce, mr.partition_of)

# %% [markdown]
# The check, for every $K$ in `KS` and for $K$ larger than the number of records (ranks with an empty
# block still take part in the shuffle), with and without the combiner:

# %%
def full_result(comm, records, mapper, reducer, combiner=None):
    return mr.gather_result(comm, mr.run_mapreduce(comm, records, mapper, reducer, combiner)[0])


for K in KS:
    for combiner in (None, mr.sum_reducer):
        res = cluster.run(full_result, K, args=(lines, mr.word_count_mapper, mr.sum_reducer, combiner), timeout=120)
        assert all(v == reference for v in res.values), (K, combiner)
few = lines[:5]
res = cluster.run(full_result, 8, args=(few, mr.word_count_mapper, mr.sum_reducer), timeout=60)
assert all(v == mr.reference_mapreduce(few, mr.word_count_mapper, mr.sum_reducer) for v in res.values)
print(f"word count equals the sequential job for K in {KS} (with and without combiner) and for K = 8 > 5 lines")

# %% [markdown]
# The same machinery runs any job. An **inverted index** maps a document to (word, document id) once
# per distinct word and reduces to the sorted list of documents; a reduce-side **join** tags each row
# with its side, shuffles both tables by the join key, and pairs the left and right rows of each key.

# %%
docs = list(enumerate(lines[:300]))
orders = [("L", f"w{i % 50}", f"order-{i}") for i in range(200)]
users = [("R", f"w{i}", f"user-{i}") for i in range(0, 50, 3)]
for name, records, mapper, reducer in (("inverted index", docs, mr.index_mapper, mr.postings_reducer),
                                       ("join", orders + users, mr.join_mapper, mr.join_reducer)):
    want = mr.reference_mapreduce(records, mapper, reducer)
    for K in KS:
        res = cluster.run(full_result, K, args=(records, mapper, reducer), timeout=120)
        assert all(v == want for v in res.values), (name, K)
    print(f"{name}: {len(want)} keys, equal to the sequential job for K in {KS}")
joined = mr.reference_mapreduce(orders + users, mr.join_mapper, mr.join_reducer)
assert sum(len(v) for v in joined.values()) == sum(1 for _, k, _ in orders if int(k[1:]) % 3 == 0)  # inner join

# %% [markdown]
# ## 5. The same task with a production library: Ray Data
#
# Ray Data expresses the job as a dataset pipeline: `map_batches` splits lines into words a batch at a
# time, and `groupby("word").count()` is the shuffle and the reduce (a hash aggregation over
# partitions). One Ray session serves the whole notebook; it starts before the timed region and stops
# at the end of the cell.

# %%
import logging
import warnings

logging.getLogger("ray").setLevel(logging.ERROR)  # Ray Data reports every stage at INFO level
warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
import ray  # noqa: E402
import ray.data  # noqa: E402


def split_words(batch):
    return {"word": np.array([w for line in batch["line"] for w in line.split()], dtype=object)}


t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
         object_store_memory=200 * 2**20)
try:
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    # four blocks, as our K = 4 map blocks: Ray Data would cut a list into up to 200 blocks, one task each
    ds = ray.data.from_items([{"line": line} for line in lines], override_num_blocks=4)
    counted = ds.map_batches(split_words, batch_format="numpy").groupby("word", num_partitions=4).count()
    rows = counted.take_all()
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
ray_counts = {row["word"]: row["count()"] for row in rows}
assert ray_counts == reference  # the same words, the same counts
print(f"Ray Data word count == ours == sequential: {len(ray_counts)} words "
      f"(Ray start-up {startup:.1f} s, job {ray_seconds:.1f} s)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Skew.** Natural keys are not uniform: a Zipf law makes a few words very frequent, and all values of
# a key go to one reducer. Without a combiner the rank that owns the hottest words receives far more
# pairs than the mean; the combiner collapses each rank's pairs to one per key before the shuffle.

# %%
K = max(KS)
for combiner in (None, mr.sum_reducer):
    res = cluster.run(word_count, K, args=(lines, combiner), network=net, timeout=120)
    received = np.zeros(K)
    for _, stats, _ in res.values:
        for p, n_pairs in stats.per_partition.items():
            received[p % K] += n_pairs
    label = "with combiner" if combiner else "no combiner"
    print(f"{label:>13}: pairs received per rank: max {received.max():.0f}, mean {received.mean():.0f} "
          f"(max / mean {received.max() / received.mean():.2f}); simulated job {max(c for *_, c in res.values) * 1e3:.1f} ms")
    if combiner is None:
        skew_no_combiner = received.max() / received.mean()
assert skew_no_combiner > 1.0

# %% [markdown]
# **A straggler.** The job ends when the slowest rank's map and reduce end. One rank 4x slower stretches
# the whole job by about that factor, because each rank maps one fixed block.
#
# **A crash.** A rank that dies mid-job ends the group with its traceback, and its block must be mapped
# again: map output lives only on the mapper, so the classic design re-executes the lost tasks.

# %%
straggle = {}
for slow in (None, {1: 4.0}):
    res = cluster.run(word_count, 4, args=(lines,), network=net, timeout=120,
                      faults=cluster.Faults(slow=slow or {}))
    straggle[bool(slow)] = res.sim_time
print(f"K = 4: {straggle[False] * 1e3:.1f} ms simulated; with rank 1 4x slower {straggle[True] * 1e3:.1f} ms "
      f"({straggle[True] / straggle[False]:.2f}x)")
assert 2.0 < straggle[True] / straggle[False] <= 4.0 + 1e-9
try:
    cluster.run(word_count, 4, args=(lines,), network=net, timeout=60, faults=cluster.Faults(crash={2: 0}))
    raise AssertionError("the crash was not reported")
except cluster.RankError as err:
    assert "rank 2, which has crashed" in str(err), err  # the injected crash, not some other failure
    print("a crashed mapper ends the job:", str(err).splitlines()[0])

# %% [markdown]
# **Map tasks and backup tasks.** The MapReduce paper's two answers to a straggler. First, cut the input
# into many more map tasks than workers and let a master hand the next task to whichever worker asks:
# a slow worker simply takes fewer tasks. Second, near the end of the map phase, when a worker is idle
# and tasks are still running, start a *backup copy* of the task expected to finish last; the first copy
# to finish wins and the other is aborted or its output dropped, so every task's pairs enter the shuffle
# exactly once and the result is still the sequential job's. `run_mapreduce_tasks` does both: rank 0 is
# the master, every worker heartbeats it every `heartbeat` seconds of its own clock with its progress,
# and the master launches a backup only when the estimated finish of the running copy is later than an
# idle worker could finish a fresh copy (the rule of LATE, Zaharia et al. 2008), so without a straggler
# it launches none.

# %%
show(mt._Master._backup_for)

# %%
STRAGGLER, K_TASKS = 5.0, 5


def task_job(comm, records, tasks, backups):
    mine, stats = mt.run_mapreduce_tasks(comm, records, mr.word_count_mapper, mr.sum_reducer, mr.sum_reducer,
                                         tasks=tasks, map_seconds=MAP_SECONDS, reduce_seconds=REDUCE_SECONDS,
                                         backups=backups)
    return mr.gather_result(comm, mine), stats


def static_job(comm, records):
    return mr.run_mapreduce(comm, records, mr.word_count_mapper, mr.sum_reducer, mr.sum_reducer,
                            map_seconds=MAP_SECONDS, reduce_seconds=REDUCE_SECONDS)[1]


rows, schedules = [], {}
for slow in ({}, {1: STRAGGLER}):
    faults = cluster.Faults(slow=slow)
    blocks = cluster.run(static_job, K_TASKS, args=(lines,), network=net, faults=faults, timeout=120).sim_time
    rows.append(("static blocks", bool(slow), blocks, 0, 0.0))
    for per_worker in (1, 4):
        M = per_worker * (K_TASKS - 1)
        for backups in (False, True):
            res = cluster.run(task_job, K_TASKS, args=(lines, M, backups), network=net, faults=faults, timeout=120)
            assert all(v[0] == reference for v in res.values)  # exact with and without backups
            st = res.values[0][1]
            rows.append((f"M = {M} tasks, backups {'on' if backups else 'off'}", bool(slow), res.sim_time,
                         st.backups_launched, st.wasted_seconds))
            schedules[(M, backups, bool(slow))] = (st.schedule, res.sim_time)
            if not slow:
                assert st.backups_launched == 0  # no straggler, no backup
print(f"K = {K_TASKS} (rank 0 is the master of the task runs), rank 1 {STRAGGLER:g}x slower where marked")
print(f"{'job':>28} {'straggler':>9} {'T (ms)':>8} {'backups':>8} {'wasted map (ms)':>16}")
for name, slow, t, nb, wasted in rows:
    print(f"{name:>28} {'yes' if slow else 'no':>9} {t * 1e3:>8.2f} {nb:>8} {wasted * 1e3:>16.2f}")
makespan = {(name, slow): t for name, slow, t, _, _ in rows}
for M in (K_TASKS - 1, 4 * (K_TASKS - 1)):
    on, off = makespan[(f"M = {M} tasks, backups on", True)], makespan[(f"M = {M} tasks, backups off", True)]
    assert on < off if M == K_TASKS - 1 else on <= off  # with many small tasks the pull alone may hide it

# %% [markdown]
# The timeline of the map tasks under the straggler, one bar per copy: with one task per worker the
# straggler's task sets the map phase until an idle worker's backup copy overtakes it (the hatched bar
# is the straggler's aborted copy, the work backups waste).

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3.2), sharey=True)
for ax, backups in zip(axes, (False, True)):
    sched, total = schedules[(K_TASKS - 1, backups, True)]
    for task, w, start, end, kind, outcome in sched:
        ax.barh(w, (end - start) * 1e3, left=start * 1e3, color="C1" if kind == "backup" else "C0",
                hatch="//" if outcome != "won" else None, alpha=0.5 if outcome != "won" else 0.9, edgecolor="k")
        ax.text((start + end) / 2 * 1e3, w, str(task), ha="center", va="center", fontsize=8)
    ax.axvline(total * 1e3, color="k", ls="--", lw=1)
    ax.set(xlabel="simulated time (ms)", title=f"backups {'on' if backups else 'off'}: job {total * 1e3:.1f} ms")
axes[0].set(ylabel="worker rank", yticks=range(1, K_TASKS))
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# On the simulator the map and reduce costs are `MAP_SECONDS` per line and `REDUCE_SECONDS` per value,
# and the shuffle pays $\alpha$ and $\beta$. The shuffle bytes each rank sends are measured and compared
# with the uniform model $(K-1)/K$ of its mapped pairs; the combiner's saving is the ratio of pairs before
# and after it.

# %%
times, sent_frac, combined = {}, {}, {}
for K in KS:
    res = cluster.run(word_count, K, args=(lines, mr.sum_reducer), network=net, timeout=120)
    times[K] = res.sim_time
    stats = [s for _, s, _ in res.values]
    sent_frac[K] = sum(s.pairs_sent for s in stats) / max(1, sum(s.pairs_after_combine for s in stats))
    combined[K] = sum(s.pairs_mapped for s in stats) / max(1, sum(s.pairs_after_combine for s in stats))
table = perf.scaling_table(times)
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'sent / (K-1)/K':>15} {'combiner x':>11} {'USD per 1000 jobs':>18}")
for row in table:
    K = row["p"]
    cost = perf.run_cost(price.price_per_hour, K, 1000 * row["time"])
    model = mr.shuffle_fraction(K)
    ratio = sent_frac[K] / model if K > 1 else float("nan")
    print(f"{K:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {ratio:>15.2f} "
          f"{combined[K]:>11.1f} {cost:>18.4f}")
    if K > 1:
        assert abs(sent_frac[K] - model) < 0.1  # near the uniform model
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
perf.plot_scaling(times, ax=axes[0], title="word count on the simulator")
axes[1].plot(KS[1:], [sent_frac[K] for K in KS[1:]], "o", label="measured share of pairs sent")
k_fine = np.linspace(2, max(KS), 100)
axes[1].plot(k_fine, (k_fine - 1) / k_fine, "-", label="model (K-1)/K")
axes[1].set(xlabel="workers K", ylabel="share of a rank's pairs that leave it", title="the shuffle")
axes[1].legend()
plt.show()
assert table[-1]["speedup"] > 1.0

# %% [markdown]
# The speedup bends because the map work shrinks as $1/K$ while the shuffle's latency term grows with
# $K-1$ rounds, and because the most loaded reducer, not the mean one, sets the reduce time.
#
# ## 8. Exercises
#
# 1. **Partitions.** Run with $R = 4K$ partitions instead of $K$. Does the most loaded rank receive
#    fewer pairs? Why can more partitions than workers help with skew, and what do they cost?
# 2. **A range partitioner.** Replace the hash by ranges of sorted keys (sample the keys first to pick
#    the boundaries) and produce a globally sorted output. Compare the balance with hashing.
# 3. **Backup tasks.** In Section 6, sweep the straggler factor (1.5, 2, 5, 10) and the `margin` of
#    `run_mapreduce_tasks` (1, 1.25, 2, 4). Plot the job time and the wasted map work against the factor.
#    Which margin would you pick for a cluster where one machine in twenty is 2x slow?
# 4. **Map-side join.** When one table is small, broadcast it to every rank and join during the map,
#    with no shuffle of the large table. Measure the shuffle bytes of both joins.
# 5. **Combiner algebra.** Which reducers can be used as their own combiner? Give one (the mean) that
#    cannot, and a pair (sum, count) that makes it possible.
#
# ## 9. Research directions
#
# - **Stragglers and speculative execution.** Backup tasks hide slow machines, but launching too many
#   wastes the cluster and launching too late does not help. Estimating which task will finish last,
#   early enough to act, remains a scheduling problem with no general solution.
#   - Dean and Ghemawat, "MapReduce: Simplified Data Processing on Large Clusters", OSDI, 2004. The
#     programming model, the shuffle, and backup tasks for stragglers.
#   - Zaharia, Konwinski, Joseph, Katz and Stoica, "Improving MapReduce Performance in Heterogeneous
#     Environments", OSDI, 2008. LATE: speculate on the task with the longest estimated time left.
#   - Ananthanarayanan et al., "Reining in the Outliers in Map-Reduce Clusters using Mantri", OSDI, 2010.
#     Finds the causes of outliers and restarts or duplicates tasks by cause.
# - **Skew.** A hot key sends all its values to one reducer, and hashing cannot split it. Detecting skew
#   at run time and splitting or replicating hot keys without changing the result is still studied, for
#   joins in particular.
#   - Kwon, Balazinska, Howe and Rolia, "SkewTune: Mitigating Skew in MapReduce Applications", SIGMOD,
#     2012. Repartitions the remaining input of a straggling task while the job runs.
#   - Song et al., "Bala-Join: An Adaptive Hash Join for Balancing Communication and Computation in
#     Geo-Distributed SQL Databases", arXiv preprint, 2026. Detects skewed join keys while the join runs
#     and spreads their rows by partial replication instead of sending each hot key to a single node.
# - **Shuffles at the speed of the network.** The shuffle moves almost all mapped data once, through
#   disks in the original design. Keeping it in memory, pushing it across fast networks, and resuming it
#   after a failure without recomputing everything are the design points of the systems that followed.
#   - Zaharia et al., "Resilient Distributed Datasets: A Fault-Tolerant Abstraction for In-Memory Cluster
#     Computing", NSDI, 2012. In-memory datasets with lineage, the basis of Spark (Chapter 7).
#   - Moritz et al., "Ray: A Distributed Framework for Emerging AI Applications", OSDI, 2018. The task and
#     actor runtime under Ray Data, the library of Section 5.
#   - Luan et al., "Exoshuffle: An Extensible Shuffle Architecture", SIGCOMM, 2023. Builds the shuffle as a
#     library over the distributed futures of Ray rather than inside a batch engine, and still matches
#     dedicated shuffle systems at scale.
# - **Heterogeneous pipelines for learning.** MapReduce assumes every task needs the same resources; a
#   pipeline that feeds accelerators mixes CPU-bound decoding with GPU-bound inference or training, and its
#   slowest stage sets the pace. Scheduling such pipelines elastically, and recovering them after a failure
#   without rerunning the whole job, is open.
#   - Murray, Simsa, Klimovic and Indyk, "tf.data: A Machine Learning Data Processing Framework", VLDB,
#     2021. Input pipelines as composable dataflow operators, and a fleet-wide study of how much of a
#     training job's resources they consume.
#   - Luan et al., "The Streaming Batch Model for Efficient and Fault-Tolerant Heterogeneous Execution",
#     arXiv preprint, 2025. The execution model of Ray Data: partitions are created and streamed between
#     CPU and GPU operators, while lineage still allows recovery as in batch processing.
#
# ## What's next
#
# Chapter 7 (Spark and DataFrames) keeps the shuffle but hides it behind a lazy plan of DataFrame
# operations: narrow steps run where the data is, every wide step is a shuffle like this one, and a lost
# partition is recomputed from its lineage. Chapter 15 (Data parallelism) meets the same all-to-all again,
# inside the reduce-scatter of every gradient all-reduce.
