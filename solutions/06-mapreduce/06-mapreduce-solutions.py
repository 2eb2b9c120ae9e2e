# %% [markdown]
# # Chapter 6 solutions: MapReduce
#
# Worked solutions to the exercises of `chapters/06-mapreduce` (the instructor's manual, never in the
# student edition). Each exercise: the answer, the derivation or argument, and for the coding and analysis
# exercises code that computes it and asserts it.

# %%
import bisect
import heapq
from collections import Counter

import numpy as np

from scaleoutai import cluster, collectives, datasets
from scaleoutai.data import mapreduce as mr
from scaleoutai.data import mapreduce_tasks as mt

SEED = 0
gen = np.random.default_rng(SEED)
net = cluster.Network(1e-5, 1e-9)
MAP_SECONDS, REDUCE_SECONDS = 2e-5, 1e-6
lines = datasets.zipf_lines(4_000, 10, 2_000, seed=SEED)  # a smaller corpus than the chapter's, same law
counts = mr.reference_mapreduce(lines, mr.word_count_mapper, mr.sum_reducer)
TOTAL = sum(counts.values())

# %% [markdown]
# ## Exercise 1 (analysis): more partitions than workers
#
# **What the load is.** Without a combiner every occurrence of word $w$ is one pair, and all of them go to
# partition $h(w) \bmod R$, reduced on rank $(h(w) \bmod R) \bmod K$. So rank $j$ receives
# $L_j = \sum_w c_w\,[\,(h(w) \bmod R) \bmod K = j\,]$ pairs, where $c_w$ is the count of $w$: a quantity we can
# predict from the sequential counts alone, and the code checks the simulator's statistics against it.
#
# **Does $R = 4K$ help?** Not with the library's placement rule, and not even by chance: partition $p$ lives on rank
# $p \bmod K$, and since $K$ divides $4K$, $(h \bmod 4K) \bmod K = h \bmod K$. Every key lands on exactly the same rank
# as with $R = K$, so every rank receives exactly the same pairs; the code asserts the loads are identical. Two things
# bound the maximum from below whatever the partitioner: the mean $\text{TOTAL}/K$, and the **count of the hottest
# key**, since one key's pairs can never be split by any key partitioner. With Zipf text the hottest word is several
# per cent of all pairs, so at $K = 16$ it alone exceeds the mean load by more than 2x.
#
# > Note for the instructor: the exercise suggests the most loaded rank might receive fewer pairs with $R = 4K$. With
# > `run_mapreduce`'s rule "partition $p$ on rank $p \bmod K$" the placement is provably unchanged for any $R$ that is a
# > multiple of $K$; a difference appears only with another placement (below) or with an $R$ that $K$ does not divide.
#
# **Why more partitions can help.** They make the assignment of *partitions to ranks* a separate, flexible step:
# a master that knows (or samples) the partition sizes can place $4K$ pieces on $K$ ranks like a bin-packing
# problem, e.g. greedy largest-first (LPT), which ends within $4/3$ of the optimum; and with many small
# partitions a rank that finishes early can take another one (the task pool of Section 6). The finer the pieces,
# the closer the balance can get to the lower bound. **What they cost:** more shuffle segments (in Hadoop,
# $M \times R$ files and as many connections), more per-partition overhead and smaller, less efficient transfers,
# and a balance step that needs statistics. The code measures the three assignments.

# %%
def received_load(comm, records, partitions):
    _, st = mr.run_mapreduce(comm, records, mr.word_count_mapper, mr.sum_reducer, partitions=partitions)
    return st.per_partition


def predicted_partition_sizes(R):
    sizes = Counter()
    for w, c in counts.items():
        sizes[mr.partition_of(w, R)] += c
    return sizes


def lpt(sizes, K_):
    """Greedy longest-processing-time assignment of partitions to K ranks; returns the rank loads."""
    heap = [(0, j) for j in range(K_)]
    for p, s in sorted(sizes.items(), key=lambda kv: -kv[1]):
        load, j = heapq.heappop(heap)
        heapq.heappush(heap, (load + s, j))
    return sorted(load for load, _ in heap)


hottest = max(counts.values())
for K_ in (8, 16):
    summary = {}
    for R in (K_, 4 * K_):
        res = cluster.run(received_load, K_, args=(lines, R), network=net, timeout=120)
        per_part = Counter()
        for d in res.values:
            per_part.update(d)
        assert dict(per_part) == dict(predicted_partition_sizes(R))  # stats == the prediction from the counts
        loads = np.zeros(K_)
        for p, n_pairs in per_part.items():
            loads[p % K_] += n_pairs
        summary[f"R={R}, p mod K"] = loads.max()
        if R == K_:
            loads_r_equals_k = loads.copy()
        else:
            assert np.array_equal(loads, loads_r_equals_k)  # (h mod 4K) mod K == h mod K: the same placement
            summary[f"R={R}, LPT"] = max(lpt(per_part, K_))
    lower = max(TOTAL / K_, hottest)
    assert all(v >= lower - 1e-9 for v in summary.values())  # nobody beats the lower bound
    assert summary[f"R={4 * K_}, LPT"] <= summary[f"R={4 * K_}, p mod K"]
    print(f"K = {K_:2d}: max pairs per rank " + ", ".join(f"{k}: {v:.0f}" for k, v in summary.items())
          + f"; lower bound max(mean {TOTAL / K_:.0f}, hottest key {hottest})")

# %% [markdown]
# ## Exercise 2 (coding): a range partitioner and a globally sorted output
#
# **The job.** Each rank maps its block, draws a seeded sample of the keys of its pairs, and all ranks
# all-gather the samples. The sorted union of samples gives $K - 1$ boundaries at its $j/K$ quantiles; a key goes
# to the rank $j$ with $b_{j} \le$ key $< b_{j+1}$ (`bisect`). After the all-to-all each rank reduces its keys and
# **sorts** them; since every key on rank $j$ is below every key on rank $j+1$, concatenating the rank outputs in
# rank order is the globally sorted result (TeraSort's design).
#
# **Balance.** Sampling *pairs* (not distinct keys) puts the boundaries at quantiles of the pair distribution, so
# ranges of frequent words are narrow and ranges of rare words wide, which balances the pair counts, except that
# a single hot key still cannot be cut: the rank holding the hottest word carries at least its count, exactly as
# with hashing. Hashing spreads keys uniformly at random and needs no sampling round, but gives no order. On this
# Zipf corpus, with 200 sampled keys per rank, the range partitioner is in fact *better* balanced than hashing
# (max/mean about 1.5 against 2.1 at $K = 8$), because its boundaries follow the pair distribution, while hashing
# can put two hot words on one rank; both stay above the hottest key's count. The code asserts the sorted
# output, the load accounting and that lower bound, and prints the two balances.

# %%
def allgather_objects(comm, obj):
    """Every rank's picklable object, in rank order (sizes first, then the bytes)."""
    payload = mr.encode(obj)
    sizes = collectives.all_gather(comm, np.array([payload.nbytes], dtype=np.int64))
    blob = collectives.all_gather(comm, payload)
    out, start = [], 0
    for n in sizes:
        out.append(mr.decode(blob[start:start + int(n)]))
        start += int(n)
    return out


def range_sorted_count(comm, records, sample_per_rank, seed):
    """Word count with a sampled range partitioner; returns (sorted (word, count) list of this rank, pairs received)."""
    K, r = comm.size, comm.rank
    lo, hi = collectives.block_range(len(records), K, r)
    pairs = [pair for rec in records[lo:hi] for pair in mr.word_count_mapper(rec)]
    rs = np.random.default_rng([seed, r])
    picks = rs.choice(len(pairs), size=min(sample_per_rank, len(pairs)), replace=False) if pairs else []
    sample = sorted(k for part in allgather_objects(comm, [pairs[i][0] for i in picks]) for k in part)
    bounds = [sample[(j * len(sample)) // K] for j in range(1, K)] if sample else []
    outgoing = [[] for _ in range(K)]
    for key, value in pairs:
        outgoing[bisect.bisect_right(bounds, key)].append((key, value))
    got = collectives.all_to_all(comm, [mr.encode(o) for o in outgoing])
    incoming = [pair for src in range(K) for pair in mr.decode(got[src])]
    reduced = {}
    for key, value in incoming:
        reduced[key] = reduced.get(key, 0) + value
    return sorted(reduced.items()), len(incoming), bounds


want_sorted = sorted(counts.items())
for K_ in (1, 2, 5, 8, 16):
    res = cluster.run(range_sorted_count, K_, args=(lines, 200, SEED), network=net, timeout=120)
    concatenated = [kv for part, _, _ in res.values for kv in part]
    assert concatenated == want_sorted  # globally sorted, and the counts are right
    bounds = res.values[0][2]
    assert all(v[2] == bounds for v in res.values)  # every rank drew the same boundaries
    loads = [n for _, n, _ in res.values]
    assert loads == [sum(c for w, c in counts.items() if bisect.bisect_right(bounds, w) == j) for j in range(K_)]
    if K_ > 1:
        hash_loads = np.zeros(K_)
        for w, c in counts.items():
            hash_loads[mr.partition_of(w, K_)] += c
        print(f"K = {K_:2d}: max/mean pairs, range {max(loads) / np.mean(loads):.2f}, "
              f"hash {hash_loads.max() / hash_loads.mean():.2f}")
        assert max(loads) >= hottest and hash_loads.max() >= hottest

# %% [markdown]
# ## Exercise 3 (analysis): sweeping the straggler factor and the margin of the backup rule
#
# **The rule.** With $K = 5$ (rank 0 the master) and $M = 4$ equal tasks of nominal cost $c$ ($500$ lines
# $\times$ 20 µs $= 10$ ms here), a worker that finishes its task at about $c$ is idle. The master launches a
# backup of the straggler's task when the straggler's estimated finish, $f c$, is later than the idle worker
# could finish a fresh copy with the margin, $\text{now} + \text{margin}\cdot c \approx (1 + \text{margin})c$. So
# **a backup is launched iff $f > 1 + \text{margin}$**, up to the heartbeat granularity. When launched, the backup
# ends the map phase at about $2c$ (plus a heartbeat or two) instead of $fc$; the straggler's copy is aborted and its
# work until then, about $t_\text{end}/f$ of nominal work, is wasted. When not launched the map phase takes $fc$.
#
# **Results** (the code asserts each): $f = 1.5$ and $f = 2$ never trigger a backup at any margin $\ge 1$ (at
# $f = 2$, $f c = (1+1)c$ exactly: no strict gain, so margin 1 refrains too); $f = 5$ triggers it for margins 1, 1.25
# and 2 but not 4 ($5 = 1 + 4$); $f = 10$ triggers it for all four margins. Waste is a small fraction of $c$ and falls
# as $f$ grows (the straggler did less before being aborted).
#
# **Which margin for a cluster where one machine in twenty is 2x slow?** A backup cannot help a 2x straggler with
# one task per worker: the copy would finish at about $2c$, no earlier than the straggler, and would only waste work.
# Choose a margin that keeps quiet at $f = 2$ with room for estimation noise in the heartbeats, **1.25 to 2** (the
# default 1.25 is fine; 2 is safer when progress estimates are noisy), and fight the mild 2x stragglers with *more
# tasks per worker* instead (Section 6: with $M = 4(K-1)$ the pull scheduler gives the slow machine fewer tasks).
# Keep a margin below about 4 so that the rare 5x-10x machine (a failing disk) still gets a backup.

# %%
lines3 = lines[:2_000]
ref3 = mr.reference_mapreduce(lines3, mr.word_count_mapper, mr.sum_reducer)
c_task = MAP_SECONDS * len(lines3) / 4


def task_job(comm, records, backups, margin):
    mine, st = mt.run_mapreduce_tasks(comm, records, mr.word_count_mapper, mr.sum_reducer, mr.sum_reducer,
                                      tasks=4, map_seconds=MAP_SECONDS, reduce_seconds=REDUCE_SECONDS,
                                      backups=backups, margin=margin)
    return mr.gather_result(comm, mine), st


rows3 = []
for f in (1.5, 2.0, 5.0, 10.0):
    faults = cluster.Faults(slow={1: f})
    off = cluster.run(task_job, 5, args=(lines3, False, 1.25), network=net, faults=faults, timeout=120)
    assert off.values[0][0] == ref3 and off.values[0][1].map_phase_end >= f * c_task
    for margin in (1.0, 1.25, 2.0, 4.0):
        res = cluster.run(task_job, 5, args=(lines3, True, margin), network=net, faults=faults, timeout=120)
        result, st = res.values[0]
        assert result == ref3  # exact with or without backups
        launched = f > 1 + margin
        assert st.backups_launched == int(launched), (f, margin, st.backups_launched)
        if launched:
            assert st.map_phase_end < 2.5 * c_task and res.sim_time < off.sim_time
            assert abs(st.wasted_seconds - st.map_phase_end / f) < 0.15 * st.map_phase_end / f
        else:
            assert st.wasted_seconds == 0 and np.isclose(res.sim_time, off.sim_time)
        rows3.append((f, margin, res.sim_time, st.backups_launched, st.wasted_seconds))
print(f"{'factor':>6} {'margin':>6} {'job ms':>7} {'backups':>7} {'wasted ms':>9}")
for f, margin, t, nb, w in rows3:
    print(f"{f:6.1f} {margin:6.2f} {t * 1e3:7.2f} {nb:7d} {w * 1e3:9.2f}")

# %% [markdown]
# ## Exercise 4 (coding): a map-side (broadcast) join
#
# **The job.** The small table (users) is broadcast from rank 0 with the binomial tree (`collectives.broadcast`);
# every rank builds a dictionary key $\to$ right rows and joins its own block of the large table (orders) during
# the map, in order. No row of the large table moves. Merging the ranks' outputs in rank order keeps the left
# rows in input order, so the result is identical to the reduce-side join of the chapter (same pairs, same order).
#
# **Traffic.** Reduce-side: both tables are shuffled, so about $\frac{K-1}{K}$ of *all* rows leave their rank.
# Map-side: the broadcast delivers the small table once to each of the $K - 1$ other ranks,
# $(K-1)\,|\text{small}|$ bytes in total. Map-side wins when $(K-1)|\text{small}| < \frac{K-1}{K}(|\text{large}| +
# |\text{small}|)$, roughly when the small table is smaller than $1/K$ of the large one; it also removes the skew of
# hot join keys (no reducer receives all the rows of one key). Its limit is memory: every rank must hold the whole
# small table. The code measures both with the communicator's byte counts.

# %%
orders = [("L", f"u{int(i)}", f"order-{n}") for n, i in enumerate(gen.zipf(1.5, size=6_000) % 300)]
users = [("R", f"u{i}", f"user-{i}") for i in range(0, 300, 3)]
want_join = mr.reference_mapreduce(orders + users, mr.join_mapper, mr.join_reducer)
want_join = {k: v for k, v in want_join.items() if v}  # an inner join keeps keys with matches only


def reduce_side_join(comm, rows):
    mine, st = mr.run_mapreduce(comm, rows, mr.join_mapper, mr.join_reducer)
    return {k: v for k, v in mr.gather_result(comm, mine).items() if v}, st.bytes_sent


def map_side_join(comm, large, small):
    before = comm.stats.bytes_sent
    table = collectives.broadcast(comm, mr.encode(small) if comm.rank == 0 else None, root=0)
    shipped = comm.stats.bytes_sent - before
    right = {}
    for _, key, payload in mr.decode(table):
        right.setdefault(key, []).append(payload)
    lo, hi = collectives.block_range(len(large), comm.size, comm.rank)
    joined = {}
    for _, key, payload in large[lo:hi]:
        for b in right.get(key, []):
            joined.setdefault(key, []).append((payload, b))
    parts = allgather_objects(comm, joined)
    merged = {}
    for part in parts:  # rank order = input order of the large table
        for key, pairs in part.items():
            merged.setdefault(key, []).extend(pairs)
    return merged, shipped


small_bytes = mr.encode(users).nbytes
for K_ in (2, 4, 8):
    rs = cluster.run(reduce_side_join, K_, args=(orders + users,), network=net, timeout=120)
    ms = cluster.run(map_side_join, K_, args=(orders, users), network=net, timeout=120)
    assert all(v[0] == want_join for v in rs.values) and all(v[0] == want_join for v in ms.values)
    shuffle_bytes = sum(v[1] for v in rs.values)
    broadcast_bytes = sum(v[1] for v in ms.values)
    assert broadcast_bytes == (K_ - 1) * small_bytes  # each other rank receives the table exactly once
    assert broadcast_bytes < shuffle_bytes
    print(f"K = {K_}: reduce-side shuffle {shuffle_bytes / 1e3:7.1f} kB, map-side broadcast "
          f"{broadcast_bytes / 1e3:6.1f} kB")

# %% [markdown]
# ## Exercise 5 (analysis): which reducers can be their own combiner
#
# **Condition.** A combiner runs on arbitrary, unequal groups of a key's values (whatever one rank mapped), and the
# reducer then sees the combined values. Using the reducer $g$ as combiner is correct exactly when
# $g(g(A_1), \dots, g(A_m)) = g(A_1 \cup \dots \cup A_m)$ for **every** split of the values into groups: $g$ must be
# an associative and commutative aggregation whose output has the same type as its inputs. Sum, max, min, product,
# set union, logical and/or, and "top-$k$ largest" qualify. (For float sums the grouping changes the rounding, as in
# Chapter 1: equal up to the last bits, not bit for bit.) A count does not directly: count of counts is wrong,
# the combiner must be a *sum* of partial counts.
#
# **The mean cannot.** $\text{mean}(\text{mean}(A_1), \text{mean}(A_2)) = \frac{\bar a_1 + \bar a_2}{2} \ne
# \frac{|A_1|\bar a_1 + |A_2|\bar a_2}{|A_1| + |A_2|}$ unless the groups have equal sizes (or equal means): the
# combiner throws away the group sizes. **The fix** is to carry them: the mapper emits $(x, 1)$, the combiner adds
# pairs component-wise, $(s_1, n_1) + (s_2, n_2) = (s_1 + s_2, n_1 + n_2)$, which is associative and commutative, and
# the reducer adds the pairs and returns $s/n$. The median has no such fixed-size summary (it needs all values,
# or an approximate sketch such as a t-digest).
#
# **Check.** A property test over random splits for each candidate, and the real job: a per-word mean of integer
# "scores" run by `run_mapreduce` with the mean as combiner (wrong for some word, for $K > 1$) and with the
# (sum, count) combiner (exact for every $K$).

# %%
def splits_agree(g, values, trials=200):
    """Does g(g(A_1), ..., g(A_m)) == g(all) hold over random splits of values?"""
    for _ in range(trials):
        cuts = sorted(gen.choice(np.arange(1, len(values)), size=gen.integers(1, 4), replace=False))
        groups = np.split(np.asarray(values, dtype=object), cuts)
        if g([g(list(grp)) for grp in groups]) != g(list(values)):
            return False
    return True


ints = [int(v) for v in gen.integers(0, 50, size=13)]
candidates = {"sum": sum, "max": max, "min": min, "union": lambda xs: frozenset().union(*xs),
              "mean": lambda xs: sum(xs) / len(xs), "count": len}
results5 = {}
for name, g in candidates.items():
    data = [frozenset({v % 5}) for v in ints] if name == "union" else ints
    results5[name] = splits_agree(g, data)
assert results5 == {"sum": True, "max": True, "min": True, "union": True, "mean": False, "count": False}

scored = [(f"w{int(gen.integers(0, 6))}", int(gen.integers(0, 100))) for _ in range(500)]
true_mean = {}
for w, s in scored:
    true_mean.setdefault(w, []).append(s)
true_mean = {w: sum(v) / len(v) for w, v in true_mean.items()}


def mean_job(comm, records, pairs_ok):
    if pairs_ok:
        mapper = lambda rec: [(rec[0], (rec[1], 1))]
        combiner = lambda key, vals: (sum(s for s, _ in vals), sum(n for _, n in vals))
        reducer = lambda key, vals: sum(s for s, _ in vals) / sum(n for _, n in vals)
    else:
        mapper = lambda rec: [(rec[0], rec[1])]
        combiner = reducer = lambda key, vals: sum(vals) / len(vals)
    mine, _ = mr.run_mapreduce(comm, records, mapper, reducer, combiner)
    return mr.gather_result(comm, mine)


for K_ in (1, 3, 7):
    wrong = cluster.run(mean_job, K_, args=(scored, False), network=net).values[0]
    right = cluster.run(mean_job, K_, args=(scored, True), network=net).values[0]
    assert right.keys() == true_mean.keys() and all(np.isclose(right[w], true_mean[w], rtol=1e-12) for w in right)
    max_err = max(abs(wrong[w] - true_mean[w]) for w in true_mean)
    assert (max_err > 1e-6) == (K_ > 1)  # with one rank there is one group: the mean combiner is harmless
    print(f"K = {K_}: mean-as-combiner max error {max_err:.3f}; (sum, count) combiner exact")
