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
# # Chapter 8. Distributed storage and data loading
#
# Chapters 6 and 7 assumed every worker could read its block of the input. This chapter opens that
# box. A dataset larger than one disk is cut into **shards** spread over storage nodes; **consistent
# hashing** decides which node holds which key so that a node joining or leaving moves only a small
# share of the data; **replication** keeps every key readable when a node dies; and on the training side
# a **distributed sampler** tells each of $K$ workers which samples to read this epoch, without a single
# message, so that together they read the whole epoch exactly once. We build each piece on NumPy and
# the communicator, check it against a single-machine reference, and run torch's `DistributedSampler` on
# real processes to show it picks the very same indices.
#
# **Prerequisites:** Chapter 6 (MapReduce: `stable_hash` and hash partitioning) and Chapter 7 (Spark and
# DataFrames: partitions); Chapter 4 for the all-gather and Chapter 5 for $S_K$, $E_K$ and cost.
# Background: files, byte offsets and what a random read costs on a disk or an object store.

# %% tags=["parameters"]
N_KEYS = 20_000  # smoke: 3_000
NODE_COUNTS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]  # smoke: [1, 2, 4, 8]
VNODES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]  # smoke: [1, 4, 16, 64]
N_RECORDS = 4_000  # smoke: 400
SHARDS = 8  # smoke: 4
KS = [1, 2, 3, 4, 6, 8, 9, 12, 16]  # smoke: [1, 2, 3, 5, 8, 9]
EPOCHS = 3  # smoke: 2
SEED = 0

# %% [markdown]
# `N_KEYS` keys are placed on rings of `NODE_COUNTS` nodes with `VNODES` virtual nodes each; `N_RECORDS`
# variable-length records are written into `SHARDS` files; `KS` are the world sizes of the data loaders
# and `EPOCHS` the epochs they read.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling is the bytes a training step must read. A step of $K$ workers with $b$ samples each reads
# $B = K b$ samples; at a few hundred kilobytes per sample (an image, a long token sequence) and several
# steps per second, a node needs hundreds of megabytes per second, sustained, for every epoch, from a
# dataset that does not fit on its disk. When storage falls behind, accelerators idle: a *data stall*.
# The arithmetic below is per node, for 8 accelerators each consuming `rate` samples per second.

# %%
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.data import sampler as sp
from scaleoutai.data import storage as st

sample_kb, accelerators = 150, 8
for rate in (100, 500, 2_000):  # samples per second per accelerator
    need = rate * accelerators * sample_kb * 1e3
    print(f"{rate:>5} samples/s per accelerator -> {need / 1e9:5.2f} GB/s per node "
          f"(one NVMe disk ~ 3 GB/s, one object-store stream ~ 0.1 GB/s)")

# %% [markdown]
# ## 2. Core concepts
#
# **Placement.** With $n$ storage nodes, the simplest rule puts key $k$ on node `stable_hash(k) mod n`.
# It balances well, but add one node and almost every key changes node: the modulus changed. **Consistent
# hashing** maps nodes and keys onto the same circle of $2^{64}$ positions; a key belongs to the first
# node point clockwise from its hash. A node that joins takes only the arc before its points, about
# $1/(n+1)$ of the keys, all from its neighbours; a node that leaves hands its $1/n$ to the next points.
# One point per node gives arcs of very unequal length, so each physical node owns many **virtual
# nodes** (points). **Replication** $r$ stores each key on the next $r$ distinct physical nodes clockwise;
# reads survive $r-1$ failures.
#
# **Shards and the sampler.** The $N$ samples are written in $S$ shard files, each with an index of byte
# offsets so a sample can be read by its global index. Each epoch every worker needs its own list of
# indices: together the lists must cover the epoch, every list must have the same length (a worker with
# an extra batch would wait forever in the next gradient all-reduce), and the order must change from epoch
# to epoch. Here is a ring of 4 nodes and where a few keys live:

# %%
ring = st.HashRing(["A", "B", "C", "D"], vnodes=8, replicas=2)
for key in ("user:1", "user:2", "img/0007.jpg", "doc-42"):
    print(f"{key:>13}: primary {ring.owner(key)}, replicas {ring.owners(key)}, modulo rule "
          f"{st.naive_owners(key, ring.nodes)[0]}")
print("keys per node:", ring.load([f"k{i}" for i in range(N_KEYS)]))

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# The sampler is the rare distributed algorithm with **no communication at all**: every rank derives
# the epoch's permutation from the shared `seed + epoch`, pads it to a multiple of $K$, and takes every
# $K$-th entry starting at its own rank. Agreement comes from determinism, not from messages. The
# figure shows which rank reads each position of the epoch for $K = 3$ and $n = 10$ (two samples read
# twice: the padding), in two epochs.

# %%
fig, axes = plt.subplots(2, 1, figsize=(9, 2.8))
for ax, epoch in zip(axes, (0, 1)):
    order = np.resize(sp.epoch_order(10, epoch, SEED), 12)
    owner = np.arange(12) % 3
    ax.imshow(owner[None, :], cmap="Pastel1", aspect="auto", vmin=0, vmax=8)
    for pos, idx in enumerate(order):
        ax.text(pos, 0, f"{idx}" + ("*" if pos >= 10 else ""), ha="center", va="center")
    ax.set(yticks=[], xticks=range(12), ylabel=f"epoch {epoch}")
axes[1].set_xlabel("position in the padded order (colour: rank = position mod K; * = padding, read twice)")
plt.tight_layout()
plt.show()

# %% [markdown]
# Reading is where the bytes move: a rank's indices are scattered over all shards, so every rank reads
# from every storage node, an all-to-all between storage and compute in every epoch.
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# `sp.shard_indices` is the sampler in five lines: the order, padding by repeating from the start (or
# dropping the tail with `drop_last=True`), `order[rank::K]`, and `start` for resuming. `HashRing` keeps
# the sorted points of all virtual nodes and finds a key's owners by binary search.

# %%
from scaleoutai.notebooks import show

show(sp.shard_indices, st.HashRing.owners, st.HashRing.add)

# %% [markdown]
# The check: on the simulator, for every $K$ in `KS` (with $K$ larger than the data included), every
# rank computes its list alone and an all-gather shows that the lists equal the single-machine
# reference, cover every sample, and have equal lengths.

# %%
for K in KS:
    for n in (N_RECORDS, 7):
        for drop_last in (False, True):
            res = cluster.run(sp.run_sampler, K, args=(n, 1, SEED, True, drop_last), timeout=60)
            want = sp.reference_epoch(n, K, 1, SEED, drop_last=drop_last)
            assert all(np.array_equal(mine, want[r]) for r, (mine, _) in enumerate(res.values))
            counts = sp.epoch_counts(want, n)
            assert (counts.max(initial=0) <= 1) if drop_last else (counts.min() >= 1)
print(f"sampler equals the reference for K in {KS}, n = {N_RECORDS} and n = 7 (K > n), padded and dropped")

# %% [markdown]
# Keys moved when one node joins $n$ nodes, measured over `N_KEYS` keys, for the ring (128 virtual nodes)
# and for the modulo rule, against $1/(n+1)$ and $n/(n+1)$; and the load imbalance (most loaded node over
# the mean) against the number of virtual nodes, for 10 nodes.

# %%
keys = [f"key-{i}" for i in range(N_KEYS)]
moved_ring, moved_mod = [], []
for n in NODE_COUNTS:
    moved_ring.append(st.moved_fraction(st.HashRing(range(n), 128), st.HashRing(range(n + 1), 128), keys))
    moved_mod.append(st.moved_fraction(list(range(n)), list(range(n + 1)), keys))
    assert abs(moved_mod[-1] - st.expected_moved_fraction(n, scheme="modulo")) < 0.05
    assert moved_ring[-1] < 1.5 * st.expected_moved_fraction(n) + 0.02
imbalance = [st.load_imbalance(st.HashRing(range(10), v).load(keys)) for v in VNODES]
assert imbalance[-1] < imbalance[0]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
ns = np.array(NODE_COUNTS)
axes[0].plot(ns, moved_ring, "o", label="consistent hashing (measured)")
axes[0].plot(ns, 1 / (ns + 1), "-", label="1/(n+1)")
axes[0].plot(ns, moved_mod, "s", label="hash mod n (measured)")
axes[0].plot(ns, ns / (ns + 1), "--", label="n/(n+1)")
axes[0].set(xlabel="nodes n before the join", ylabel="share of keys moved", title="one node joins")
axes[0].legend()
axes[1].semilogx(VNODES, imbalance, "o-")
axes[1].axhline(1.0, color="k", lw=0.8)
axes[1].set(xlabel="virtual nodes per physical node", ylabel="max load / mean load", title="balance on 10 nodes")
plt.tight_layout()
plt.show()

# %% [markdown]
# Now the shard files: `N_RECORDS` token records of random length, written in `SHARDS` files (each to a
# temporary name, then renamed), read back by global index in a random order and compared with the
# records in memory.

# %%
records = datasets.make_records(N_RECORDS, seed=SEED)
workdir = Path(tempfile.mkdtemp(prefix="ch08-"))
ds = st.write_sharded(workdir / "data", records, SHARDS)
reader = st.BlockReader(ds, block_bytes=4096)
assert all(np.array_equal(reader.read(int(i)), records[i]) for i in np.random.default_rng(SEED).permutation(N_RECORDS))
print(f"{N_RECORDS} records, {sum(r.nbytes for r in records) / 1e6:.2f} MB in {SHARDS} shards: "
      f"{sorted(p.name for p in (workdir / 'data').iterdir())[:3]} ...; every record reads back equal")

# %% [markdown]
# **Read amplification** is bytes fetched from storage over bytes of the records asked for. Storage
# serves blocks, not records: an SSD pages, an object store serves ranged requests with a large fixed
# cost each, so readers fetch big blocks. Read the records in file order and every fetched byte is used;
# read them in the sampler's shuffled order and each record drags in a whole block, most of it wasted.

# %%
blocks = [512, 4096, 65536, None]
names = ["512 B", "4 KB", "64 KB", "whole shard"]
epoch_order = sp.shard_indices(N_RECORDS, 1, 0, 0, SEED)
amp = {"file order": [st.read_amplification(ds, range(N_RECORDS), b) for b in blocks],
       "sampler order": [st.read_amplification(ds, epoch_order, b) for b in blocks]}
assert max(amp["file order"]) < 1.01 and amp["sampler order"][-1] > 10
mean_record = np.mean([r.nbytes for r in records])
x = np.arange(len(blocks))
plt.figure(figsize=(7, 3.6))
for j, (label, values) in enumerate(amp.items()):
    plt.bar(x + 0.4 * j - 0.2, values, width=0.4, label=label)
plt.yscale("log")
plt.xticks(x, names)
plt.ylabel("bytes read / bytes needed")
plt.title(f"read amplification (mean record {mean_record:.0f} B)")
plt.legend()
plt.show()
for label, values in amp.items():
    print(f"{label:>13}: " + ", ".join(f"{nm} {v:.1f}x" for nm, v in zip(names, values)))

# %% [markdown]
# ## 5. The same task with a production library: torch's DistributedSampler
#
# `torch.utils.data.DistributedSampler(dataset, num_replicas=K, rank=r, shuffle, seed, drop_last)` with
# `set_epoch(e)` before each epoch is what PyTorch training scripts use. Its rule is ours: the
# permutation of `torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))`, padding by
# repeating from the start, `indices[rank::K]`. On 2 real processes (gloo), each process builds torch's
# sampler and ours and compares them for several epochs and both `drop_last` settings.

# %%
def compare_with_torch(comm, n, epochs, seed):
    from torch.utils.data import DistributedSampler

    out = []
    for drop_last in (False, True):
        sampler = DistributedSampler(range(n), num_replicas=comm.size, rank=comm.rank, shuffle=True, seed=seed,
                                     drop_last=drop_last)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            theirs = np.fromiter(iter(sampler), dtype=np.int64)
            exact = sp.shard_indices(n, comm.size, comm.rank, epoch, seed, drop_last=drop_last, generator="torch")
            numpy_order = sp.shard_indices(n, comm.size, comm.rank, epoch, seed, drop_last=drop_last)
            out.append((drop_last, epoch, np.array_equal(theirs, exact), len(theirs) == len(numpy_order),
                        len(np.intersect1d(theirs, numpy_order)) / max(1, len(theirs))))
    return out


n_torch = N_RECORDS + 3  # uneven for K = 2: one padded sample
t0 = time.perf_counter()
res = cluster.run(compare_with_torch, 2, backend="process", args=(n_torch, EPOCHS, SEED), timeout=180, quiet=True)
torch_seconds = time.perf_counter() - t0
rows = [row for values in res.values for row in values]
assert len(rows) == 2 * 2 * EPOCHS  # both processes ran every comparison
assert all(exact and same_len for _, _, exact, same_len, _ in rows)
overlap = np.mean([o for *_, o in rows])
print(f"torch DistributedSampler == ours (torch generator) index for index on 2 processes, n = {n_torch}, "
      f"epochs 0..{EPOCHS - 1}, drop_last False and True ({torch_seconds:.1f} s with process start-up)")
print(f"with NumPy's generator: same sizes and the same padding rule; a rank's indices overlap torch's "
      f"by {overlap:.2f} on average (1/K = 0.50 expected for independent orders)")

# %% [markdown]
# So the one difference between our default and torch is the random generator of step 1: NumPy's
# `default_rng(seed + epoch).permutation(n)` and `torch.randperm` are different streams. Both give the
# same sizes, padding and exactly-once property; the per-rank *sets* differ (about half in common for
# $K = 2$), and with `drop_last=True` different samples are dropped. Code that must reproduce a torch run
# index for index uses `generator="torch"`, which calls torch only inside that branch.
#
# ## 6. Failure modes and fault tolerance
#
# **A storage node leaves.** With replication $r = 3$ and one node gone, every key is still readable from
# a live replica, and the ring rebuilt without the node moved only the keys that node owned.

# %%
nodes = [f"n{i}" for i in range(8)]
ring3 = st.HashRing(nodes, vnodes=64, replicas=3)
before = ring3.owner_of_each(keys)
down = {"n5"}
served = [st.live_owner(ring3, k, down) for k in keys]
assert not down & set(served)
failover = sum(b in down for b in before)
ring3.remove("n5")
after = ring3.owner_of_each(keys)
moved = sum(a != b for a, b in zip(before, after))
assert moved == failover  # only n5's keys changed owner
print(f"n5 down: all {len(keys)} keys readable; {failover} reads ({failover / len(keys):.3f} of keys, "
      f"1/n = {1 / len(nodes):.3f}) served by the next replica; after removal exactly those {moved} keys moved")

# %% [markdown]
# **A crash mid-epoch.** Each rank reads its list in batches of `b` and checkpoints the number of steps
# done. A rank that restarts must continue at position `steps_done * b` of the same epoch's list:
# restarting at 0 reads the first batches twice (biasing the epoch towards them), guessing wrong skips
# samples. Below, rank 1 dies during step 3 (a crash ends the whole group, as on a real cluster), the job
# restarts from the checkpoint of 3 finished steps, and the samples read across both runs are exactly the epoch.

# %%
def train_epoch(comm, n, epoch, seed, b, start_step=0, crash_step=None):
    mine = sp.shard_indices(n, comm.size, comm.rank, epoch, seed, start=sp.resume_position(start_step, b))
    read = []
    for step in range(start_step, start_step + -(-len(mine) // b)):
        batch = mine[(step - start_step) * b:(step - start_step + 1) * b]
        if step == crash_step and comm.rank == 1:
            raise RuntimeError(f"rank 1 lost power at step {step}")  # the injected crash
        read.append(batch)
        comm.barrier()  # stand-in for the gradient all-reduce of the step
    return np.concatenate(read) if read else np.zeros(0, np.int64)


K_CRASH, b, steps_done = 4, 8, 3
n_crash = K_CRASH * b * 6 + 5  # uneven: padded
try:
    cluster.run(train_epoch, K_CRASH, args=(n_crash, 1, SEED, b, 0, steps_done), timeout=60)
    raise AssertionError("the crash was not reported")
except cluster.RankError as err:
    assert "lost power at step" in str(err), err  # the injected crash, not some other failure
    print("crashed:", str(err).strip().splitlines()[0])
first = [sp.shard_indices(n_crash, K_CRASH, r, 1, SEED)[:steps_done * b] for r in range(K_CRASH)]
resumed = cluster.run(train_epoch, K_CRASH, args=(n_crash, 1, SEED, b, steps_done), timeout=60).values
from_zero = cluster.run(train_epoch, K_CRASH, args=(n_crash, 1, SEED, b, 0), timeout=60).values
whole = sp.epoch_counts(sp.reference_epoch(n_crash, K_CRASH, 1, SEED), n_crash)
good = sp.epoch_counts([np.concatenate([f, r]) for f, r in zip(first, resumed)], n_crash)
bad = sp.epoch_counts([np.concatenate([f, r]) for f, r in zip(first, from_zero)], n_crash)
assert np.array_equal(good, whole)
print(f"resume at step {steps_done}: counts equal one clean epoch; restart from 0: {int((bad > whole).sum())} "
      f"samples read once too often")

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# Loading one epoch: every rank reads its sampler list from the shard files through a block reader. The
# bytes and fetches each rank makes are measured; the time is modelled for a network store with a cost
# per request $\alpha_s$ and a bandwidth $1/\beta_s$ per reader, the same $\alpha$-$\beta$ shape as the
# network of Chapter 4: $T_K = \max_r(\text{fetches}_r\,\alpha_s + \text{bytes}_r\,\beta_s)$. A rank that
# fetches whole shards pays little latency but reads far more than it needs.

# %%
ALPHA_S, BETA_S = 1e-3, 1 / 200e6  # 1 ms per request, 200 MB/s per reader
loads = {}
for block in (4096, 65536):
    times = {}
    for K in KS:
        res = cluster.run(st.run_loader, K, args=(str(workdir / "data"), 0, SEED, False, block), timeout=120)
        assert sp.epoch_counts([m for m, _, _ in res.values], N_RECORDS).min() == 1
        assert all(all(np.array_equal(a, records[i]) for a, i in zip(got, m)) for m, got, _ in res.values)
        times[K] = max(s["fetches"] * ALPHA_S + s["bytes_read"] * BETA_S for _, _, s in res.values)
        if K == KS[-1]:
            per_rank = max(s["bytes_read"] for _, _, s in res.values)
    loads[block] = times
    print(f"block {block} B: largest rank reads {per_rank / 1e6:.2f} MB at K = {KS[-1]}")
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'K':>3} {'T_K 4KB (s)':>12} {'samples/s':>10} {'S_K':>6} {'E_K':>5} {'T_K 64KB (s)':>13} "
      f"{'USD per 100 epochs':>19}")
table = perf.scaling_table(loads[4096])
for row, K in zip(table, KS):
    cost = perf.run_cost(price.price_per_hour, K, 100 * row["time"])
    print(f"{K:>3} {row['time']:>12.3f} {N_RECORDS / row['time']:>10.0f} {row['speedup']:>6.2f} "
          f"{row['efficiency']:>5.2f} {loads[65536][K]:>13.3f} {cost:>19.5f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
assert table[-1]["speedup"] > 1.0
fig, ax = plt.subplots(figsize=(6, 3.8))
perf.plot_scaling(loads[4096], ax=ax, title="loading one epoch (modelled store, measured bytes)")
plt.show()

# %%
shutil.rmtree(workdir)

# %% [markdown]
# The load spreads evenly because the sampler gives every rank the same count, and the time falls close
# to $1/K$. What keeps $E_K$ below 1 is the most loaded rank: records differ in length, so equal counts
# are not equal bytes, and with fewer records per rank the spread between ranks grows. Larger blocks make
# every $T_K$ worse, not better, because the sampler's order is random: each request still brings one
# useful record. The cost per epoch stays almost flat in $K$, the signature of a well-balanced job.
#
# ## 8. Exercises
#
# 1. **Shard-aware shuffling.** Shuffle the order of shards, then the records inside a window of
#    $w$ shards at a time. Measure read amplification with 64 KB blocks and how close the order is to a
#    full shuffle (e.g. the distance of each record from its file position) as $w$ grows.
# 2. **Bounded loads.** Cap each node at $(1 + \epsilon)$ times the mean load and send overflow keys
#    clockwise. Plot the imbalance and the keys moved on a join for $\epsilon = 0.1, 0.25, 1$.
# 3. **Jump hash.** Implement jump consistent hashing (no ring, $O(\log n)$ time, no memory) and compare
#    its moved fraction and balance with the ring. What can it not do that the ring can?
# 4. **Elastic resume.** A job of $K = 4$ crashes after 3 steps and restarts on $K = 3$. Which samples of
#    the epoch are still unread? Write the resume rule that reads each of them exactly once.
# 5. **Lab 8.** The elastic sampler: resume an epoch exactly when $K$ changes, and agree on the resume point
#    with a few integers: `labs/lab08-sharded-sampler`.
#
# ## 9. Research directions
#
# - **Placement under churn and skew.** Consistent hashing bounds the keys that move, but real
#   clusters have hot keys and nodes of unequal capacity; bounding load and movement together, and
#   placing replicas across failure domains, are still design points with trade-offs.
#   - Karger, Lehman, Leighton, Panigrahy, Levine and Lewin, "Consistent Hashing and Random Trees:
#     Distributed Caching Protocols for Relieving Hot Spots on the World Wide Web", STOC, 1997. The ring.
#   - DeCandia et al., "Dynamo: Amazon's Highly Available Key-value Store", SOSP, 2007. Virtual nodes,
#     preference lists of replicas, sloppy quorums.
#   - Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA, 2018. Caps every
#     node's load with few extra moves.
# - **File systems for training data.** Large sequential chunks suit MapReduce scans; training reads
#   small random samples many times. Which layout, chunk size and caching serve both is open.
#   - Ghemawat, Gobioff and Leung, "The Google File System", SOSP, 2003. Large chunks, replicas on
#     different racks, a single master for metadata.
#   - An et al., "Fire-Flyer AI-HPC: A Cost-Effective Software-Hardware Co-Design for Deep Learning", SC,
#     2024. A 10,000-GPU training cluster whose distributed file system, 3FS, serves training data and
#     checkpoints over the same network that carries the computation.
# - **Data stalls.** Accelerators get faster than storage and preprocessing; knowing when a job is
#   input-bound and sharing cached and preprocessed data between jobs and epochs are active topics.
#   - Mohan, Phanishayee, Raniwala and Chidambaram, "Analyzing and Mitigating Data Stalls in DNN
#     Training", VLDB, 2021. Measures stalls and proposes coordinated caching and preprocessing.
#   - Audibert, Chen, Graur, Klimovic, Simsa and Thekkath, "tf.data service: A Case for Disaggregating ML
#     Input Data Processing", SoCC, 2023. Moves preprocessing onto separate CPU workers that scale with the
#     job, shares preprocessed data between jobs, and coordinates reads so that workers get batches of
#     similar size.
# - **Randomness versus locality.** Full shuffles give the statistics SGD expects but random reads;
#   shard-level shuffles read sequentially but correlate a batch. How much shuffling convergence really
#   needs is not settled.
#   - Meng, Chen, Wang, Ma and Liu, "Convergence Analysis of Distributed Stochastic Gradient Descent with
#     Shuffling", Neurocomputing, 2019. Bounds for SGD with partial, per-worker shuffling.
#   - Cooper et al., "Coordinating Distributed Example Orders for Provably Accelerated Training", NeurIPS,
#     2023. Orders each worker's examples from stale gradients instead of shuffling at random, and proves
#     faster convergence than random reshuffling across $K$ workers.
#
# ## What's next
#
# Chapter 9 (Stream processing) turns the bounded dataset of this chapter into an unbounded one: records
# arrive over time, are cut into event-time windows, and a crash must neither lose nor duplicate them,
# the streaming form of the exactly-once promise that the resumable sampler keeps for an epoch.
