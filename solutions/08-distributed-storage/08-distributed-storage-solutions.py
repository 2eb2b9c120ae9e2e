# %% [markdown]
# # Chapter 8 solutions: Distributed storage and data loading
#
# Worked solutions to the exercises of `chapters/08-distributed-storage` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, datasets
from scaleoutai.data import sampler as sp
from scaleoutai.data import storage as st
from scaleoutai.data.mapreduce import stable_hash

SEED = 0
N_REC, N_SHARDS = 2_000, 8
KEYS = [f"key-{i}" for i in range(8_000)]

# %% [markdown]
# ## Exercise 1 (coding): shuffling shards, then records inside a window of shards
#
# **Answer.** The loader permutes the $S$ shards, then walks them $w$ at a time: it reads the $w$
# shards of a window (sequentially, into a buffer of $w$ shards) and emits their records in a random
# order. Two measures as $w$ grows from 1 to $S$:
#
# - *Read amplification with 64 KB blocks.* With a buffer that holds the whole window every block is
#   fetched once, so amplification is exactly 1 for every $w$: the price of a larger window is memory
#   ($w$ shards), not bytes. A reader that keeps only one 64 KB block (the chapter's reader) thrashes:
#   consecutive records come from different blocks, and amplification grows with $w$ toward the full
#   shuffle's value.
# - *Closeness to a full shuffle.* The suggested statistic, the mean distance
#   $|\text{pos}_{\text{epoch}}(i) - i|$ of a record from its file position, is $(n^2-1)/(3n) \approx n/3$
#   for a uniform permutation (the mean of $|U - V|$ for two independent uniforms is $1/3$), and
#   $w = S$ gives exactly a uniform permutation. But it saturates at once: with $w = 1$ a record already
#   moves by its shard's displacement, $\frac{S^2-1}{3S}$ shards of $n/S$ records on average, about
#   $\frac{n}{3}(1 - 1/S^2)$. Distance cannot tell a shard-level shuffle from a full one. What differs
#   is what SGD feels: **how many shards feed one batch**. A batch of $b$ records drawn from a window of
#   $w$ equal shards meets $w\,(1 - (1 - 1/w)^b)$ distinct shards in expectation (each shard is missed
#   with probability $(1-1/w)^b$): 1 for $w = 1$, nearly $w$ once $b \gg w$. So the window size is the
#   number of shards a batch mixes, bought with $w$ shards of buffer memory.

# %%
def window_order(ds, w, epoch_seed):
    """Epoch order: shuffle the shards, then the records of each window of ``w`` shards."""
    rng = np.random.default_rng(epoch_seed)
    shards = rng.permutation(ds.shards)
    out = []
    for i in range(0, ds.shards, w):
        members = np.concatenate([np.arange(ds.starts[s], ds.starts[s + 1]) for s in shards[i:i + w]])
        out.append(rng.permutation(members))
    return np.concatenate(out)


def mean_displacement(order):
    return float(np.mean(np.abs(np.arange(len(order)) - np.asarray(order))))


workdir = Path(tempfile.mkdtemp(prefix="ch08-sol-"))
try:
    records = datasets.make_records(N_REC, seed=SEED)
    ds = st.write_sharded(workdir / "data", records, N_SHARDS)
    block = 65536
    blocks_per_shard = max(-(-ds.shard_bytes(s) // block) for s in range(ds.shards))
    rows = []
    for w in (1, 2, 4, 8):
        orders = [window_order(ds, w, SEED + e) for e in range(5)]
        assert all(np.array_equal(np.sort(o), np.arange(N_REC)) for o in orders)  # still exactly once
        buffered = st.read_amplification(ds, orders[0], block, cache_blocks=w * blocks_per_shard)
        one_block = st.read_amplification(ds, orders[0], block, cache_blocks=1)
        dist = np.mean([mean_displacement(o) for o in orders])
        shard_of = np.searchsorted(ds.starts, orders[0], side="right") - 1
        mix = np.mean([len(np.unique(shard_of[j:j + 32])) for j in range(0, N_REC, 32)])
        rows.append((w, buffered, one_block, dist, mix))
        print(f"w={w}: amplification {buffered:.3f} (window buffer), {one_block:.2f} (one block); "
              f"mean distance {dist:.0f} (full shuffle {N_REC / 3:.0f}); shards per batch {mix:.2f}")
    full = st.read_amplification(ds, sp.epoch_order(N_REC, 0, SEED), block, cache_blocks=1)
finally:
    shutil.rmtree(workdir)

w_, buf, one, dist, mix = map(np.array, zip(*rows))
assert np.allclose(buf, 1.0)  # every block fetched once when the window fits in the buffer
assert np.all(np.diff(one) > 0) and one[-1] <= full * 1.05  # a one-block reader thrashes more as w grows
assert abs(dist[-1] - (N_REC ** 2 - 1) / (3 * N_REC)) < 0.05 * N_REC / 3  # w = S: a uniform permutation
assert dist[0] > 0.9 * N_REC / 3 * (1 - 1 / N_SHARDS ** 2)  # w = 1 already moves records by whole shards
expected_mix = w_ * (1 - (1 - 1 / w_) ** 32)
assert np.all(np.abs(mix - expected_mix) < 0.15)  # (batches that straddle two windows add a little)
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(w_, one, "o-", label="1-block reader")
ax.plot(w_, buf, "s-", label="window buffer")
ax.set(xlabel="window w (shards)", ylabel="read amplification", yscale="log")
ax.legend()
plt.close(fig)

# %% [markdown]
# ## Exercise 2 (coding): consistent hashing with bounded loads
#
# **Rule.** With $m$ keys and $n$ nodes each node may hold at most $c = \lceil (1+\epsilon)\, m / n
# \rceil$ keys. Keys are placed one at a time, in a fixed order; a key goes to the first node clockwise
# from its hash **that still has room**, skipping full nodes (Mirrokni, Thorup and Zadimoghaddam).
# By construction the imbalance is at most $c/(m/n) \le 1 + \epsilon + n/m$.
#
# **Moves on a join.** The new node takes the keys it would own on the plain ring (about $1/(n+1)$),
# which frees room on its neighbours, and the overflow chains shift: keys that had been pushed past a
# full node may now land earlier. The smaller $\epsilon$, the longer the overflow chains and the more
# keys move; the paper bounds the extra moves by $O(1/\epsilon^2)$ times the plain ring's. With
# $\epsilon = 1$ no node reaches the cap (the plain ring with 8 virtual nodes is about 1.6 times the
# mean at most), so the placement *is* the plain ring's, exactly.

# %%
def bounded_owners(ring, keys, eps):
    """Primary node of every key under a cap of ceil((1 + eps) m / n) keys per node."""
    cap = int(np.ceil((1 + eps) * len(keys) / len(ring.nodes)))
    load = np.zeros(len(ring.nodes), dtype=np.int64)
    slots = ring._slots(keys)
    points = len(ring._owner)
    out = []
    for slot in slots:
        s = int(slot)
        while load[ring._owner[s]] >= cap:
            s = (s + 1) % points
        node = int(ring._owner[s])
        load[node] += 1
        out.append(ring.nodes[node])
    return out


n_nodes = 10
before_ring = st.HashRing(range(n_nodes), vnodes=8)  # few vnodes: the plain ring is unbalanced
after_ring = st.HashRing(range(n_nodes + 1), vnodes=8)
plain_moved = st.moved_fraction(before_ring, after_ring, KEYS)
plain_imb = st.load_imbalance(before_ring.load(KEYS))
results = {}
for eps in (0.1, 0.25, 1.0):
    b = bounded_owners(before_ring, KEYS, eps)
    a = bounded_owners(after_ring, KEYS, eps)
    counts = np.bincount(b, minlength=n_nodes)
    imb = counts.max() / counts.mean()
    moved = np.mean([x != y for x, y in zip(b, a)])
    results[eps] = (imb, moved)
    assert imb <= 1 + eps + n_nodes / len(KEYS)  # the cap holds
    print(f"eps={eps}: imbalance {imb:.3f} (plain ring {plain_imb:.3f}); moved on a join {moved:.3f} "
          f"(plain ring {plain_moved:.3f}, 1/(n+1) = {1 / (n_nodes + 1):.3f})")
assert results[0.1][1] > results[0.25][1] > results[1.0][1]  # tighter caps move more keys
assert results[0.1][0] < results[0.25][0] < plain_imb  # and balance better
assert results[1.0] == (plain_imb, plain_moved)  # a cap above the natural imbalance never binds
fig, axes = plt.subplots(1, 2, figsize=(8, 3))
eps_list = sorted(results)
axes[0].plot(eps_list, [results[e][0] for e in eps_list], "o-")
axes[0].set(xlabel="epsilon", ylabel="max load / mean")
axes[1].plot(eps_list, [results[e][1] for e in eps_list], "o-")
axes[1].set(xlabel="epsilon", ylabel="share of keys moved on a join")
plt.close(fig)

# %% [markdown]
# ## Exercise 3 (coding): jump consistent hashing against the ring
#
# **Algorithm** (Lamping and Veach, 2014). Follow a key's bucket as the number of buckets grows from 1
# to $n$: at each size $j+1$ the key jumps to the new bucket $j$ with probability $1/(j+1)$, else stays.
# A linear congruential generator seeded by the key draws the *next* size at which it jumps, so the loop
# runs only over jumps: $\sum_j 1/(j+1) = O(\log n)$ iterations, no table, no memory.
#
# **Properties.** Going from $n$ to $n+1$ buckets, a key moves only if it jumps to the new bucket $n$,
# with probability $1/(n+1)$: the optimum, with *no* variance from virtual nodes, and loads are
# multinomial with equal probabilities (max/mean $\approx 1 + 3\sqrt{n/m}$). The ring needs hundreds of
# virtual nodes to approach that balance.
#
# **What it cannot do.** Buckets are the numbers $0..n-1$: only the *last* bucket can be removed. A
# named node that fails in the middle cannot leave without renumbering (moving many keys), there are
# no weights or heterogeneous capacities, and replica sets "next distinct node clockwise" have no
# analogue, so failover, `live_owner` and arbitrary membership changes need the ring (or a mapping layer
# of logical buckets to physical nodes on top).

# %%
def jump_hash(key, n):
    """Bucket in 0..n-1 of a 64-bit integer key (jump consistent hashing)."""
    key &= (1 << 64) - 1
    b, j = -1, 0
    while j < n:
        b = j
        key = (key * 2862933555777941757 + 1) & ((1 << 64) - 1)
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b


hashes = [stable_hash(k) for k in KEYS]
m = len(KEYS)
for n in (4, 10, 25):
    before = np.array([jump_hash(h, n) for h in hashes])
    after = np.array([jump_hash(h, n + 1) for h in hashes])
    moved = before != after
    assert np.all(after[moved] == n)  # every moved key goes to the new bucket, never between old ones
    p = 1 / (n + 1)
    assert abs(moved.mean() - p) < 4 * np.sqrt(p * (1 - p) / m)  # binomial(m, 1/(n+1)) moves
    counts = np.bincount(before, minlength=n)
    jump_imb = counts.max() / counts.mean()
    ring_imb = st.load_imbalance(st.HashRing(range(n), vnodes=16).load(KEYS))
    ring_moved = st.moved_fraction(st.HashRing(range(n), 16), st.HashRing(range(n + 1), 16), KEYS)
    assert jump_imb < 1 + 4 * np.sqrt(n / m)  # multinomial spread, no virtual nodes needed
    print(f"n={n}: jump moved {moved.mean():.4f} (1/(n+1) = {p:.4f}), ring {ring_moved:.4f}; "
          f"imbalance jump {jump_imb:.3f}, ring (16 vnodes) {ring_imb:.3f}")

# %% [markdown]
# ## Exercise 4 (coding): resuming an epoch on fewer workers
#
# **Which samples are unread.** On $K = 4$ rank $r$ reads positions $r, r+K, r+2K, \dots$ of the
# epoch's padded order $\pi$; after 3 steps of $b$ samples it has read its first $3b$ entries, i.e. the
# positions $jK + r$ with $j < 3b$. Over all ranks that is exactly the **prefix** $\pi[0:3bK]$: the
# interleaved split reads the order front to back, $K$ at a time. The unread samples are the suffix
# $\pi[3bK:n]$ (assuming $3bK \le n$; padding only appears at the very end).
#
# **Resume rule on $K'$.** Every rank recomputes the same $\pi$ (seed + epoch), takes the suffix
# $\pi[sbK:n]$, pads it to a multiple of $K'$ by repeating from its start, and reads
# `suffix[r::K']`. Each unread sample is read once (plus at most $K'-1$ padded repeats), no sample of
# the prefix twice, and all $K'$ lists have equal length, so no rank waits alone at the all-reduce. The
# chapter's `start = steps * b` is wrong here. On $K'$ ranks it skips $s b$ entries of each *new* list,
# i.e. the prefix $\pi[0:sbK']$. Shrinking ($K' < K$) rereads the $sb(K-K')$ samples of
# $\pi[sbK':sbK]$; growing ($K' > K$) skips the $sb(K'-K)$ samples of $\pi[sbK:sbK']$ for the whole
# epoch. Both are checked below (24 rereads going to 3 ranks, 96 never-read samples going to 8).

# %%
def elastic_resume(n, K_old, steps_done, b, K_new, rank, epoch, seed):
    """Indices rank ``rank`` of ``K_new`` reads to finish an epoch that ``K_old`` ranks began."""
    consumed = steps_done * b * K_old
    rest = sp.epoch_order(n, epoch, seed)[consumed:]
    per_rank = -(-len(rest) // K_new)
    return np.resize(rest, per_rank * K_new)[rank::K_new].copy()


def resume_worker(comm, n, K_old, steps_done, b, epoch, seed):
    return elastic_resume(n, K_old, steps_done, b, comm.size, comm.rank, epoch, seed)


n, b, steps_done, epoch = 203, 8, 3, 1
first = [sp.shard_indices(n, 4, r, epoch, SEED)[:steps_done * b] for r in range(4)]
order = sp.epoch_order(n, epoch, SEED)
assert np.array_equal(np.sort(np.concatenate(first)), np.sort(order[:steps_done * b * 4]))  # the prefix
second = cluster.run(resume_worker, 3, args=(n, 4, steps_done, b, epoch, SEED), timeout=60).values
assert len({len(x) for x in second}) == 1  # equal lengths on the 3 ranks
counts = sp.epoch_counts(first + second, n)
assert counts.min() == 1 and counts.sum() - n <= 3 - 1  # each sample once, at most K'-1 padding repeats
naive = [sp.shard_indices(n, 3, r, epoch, SEED, start=steps_done * b) for r in range(3)]
bad = sp.epoch_counts(first + naive, n)
pad3 = 3 * -(-n // 3) - n  # the naive K'=3 lists pad with order[0], already read in the first run
assert (bad == 0).sum() == 0 and (bad > 1).sum() == steps_done * b * (4 - 3) + pad3
grown = [sp.shard_indices(n, 8, r, epoch, SEED, start=steps_done * b) for r in range(8)]
assert (sp.epoch_counts(first + grown, n) == 0).sum() == steps_done * b * (8 - 4)
counts8 = sp.epoch_counts(first + [elastic_resume(n, 4, steps_done, b, 8, r, epoch, SEED) for r in range(8)], n)
assert counts8.min() == 1 and counts8.sum() - n <= 8 - 1  # the rule also works when growing
print(f"elastic resume: all {n} samples read, {counts.sum() - n} padded repeat(s); the old offset rereads "
      f"{(bad > 1).sum()} samples on K'=3 and never reads {steps_done * b * 4} on K'=8")

# %% [markdown]
# ## Exercise 5 (lab): Lab 8, the elastic sampler
#
# The lab is `labs/lab08-sharded-sampler`. Its reference solution is the solution blocks of
# `labs/lab08-sharded-sampler/lab08-sharded-sampler.py`; the hidden tests, rubric and mutants are in
# `grading/lab08-sharded-sampler/` (`tests.py`, `rubric.yaml`, `mutants/`). It is Exercise 4 made
# exact and distributed: the chapter's sampler resumes only on the same K; the lab's resumes when K
# changes, any number of times in an epoch.
#
# **Key ideas the answer must have.** The student writes `resume_indices` and `agree_progress`. The
# epoch is read along a tape whose position p holds `order[p % n]` (the permutation of `seed + epoch`,
# then the order again as padding: the lab fixes this, where Exercise 4's sketch repeats the suffix). A
# run of K ranks that starts at tape position c gives rank r the positions $c + r + Kj$ for
# $j < \lceil (n-c)/K \rceil$ (or the floor with `drop_last`, none once $c \ge n$): so every completed
# step reads the next $Kb$ positions, the job's progress is one global count, and a second or third
# change of K resumes exactly too. With $c = 0$ it is torch's `DistributedSampler`. `agree_progress`
# turns each saved row `(epoch, start, K_old, done)` into the progress `epoch * n + start + K_old * done`
# (K_old from the row, in int64: it passes $2^{31}$), takes the minimum locally (a rank without rows
# contributes the identity, not 0), and all-reduces the minimum of one integer with `comm.send`/`recv`
# (the reference uses a dissemination all-reduce: $\lceil\log_2 K\rceil$ messages per rank, fine for any K
# because min is idempotent); every rank then decodes `[g // n, g % n]`.
#
# **Mistakes the rubric catches** (from `mutants/`):
# - the course's `shard_indices` with `start = consumed // K` (`pasted_course`, `library_answer`): right
#   when K is unchanged (`same_k`), wrong after a change (`k_changes`, `schedules`); restarting the epoch
#   on the new K (`restart_epoch`) or skipping `consumed` entries of each rank's list (`skips_consumed_per_rank`);
# - the wrong list: no padding, so unequal counts (`unequal_counts`), the course's length
#   $\lceil n/K\rceil - \lfloor c/K \rfloor$ (`course_length`), a contiguous block of the remainder, which
#   reads no prefix of the tape when the run is interrupted (`block_of_remainder`, caught by the
#   multi-change `schedules`), padding from the unread samples (`remainder_padding`), int32 indices or
#   torch's permutation (`int32_indices`, `torch_permutation`: consistent, so `schedules` pass);
# - the wrong agreement: the new K interpreting the old rows, max instead of min, `done` off by one,
#   epoch and position reduced apart, ranks without rows reporting 0, progress computed in the int32 the
#   rows came in, rank 0 keeping the answer, or no message at all (`new_k_reads_old_rows`, `max_not_min`,
#   `done_plus_one`, `elementwise_min`, `empty_rank_zero`, `keeps_row_dtype`, `rank0_only`,
#   `local_only`), caught by `agree`; and the right answer with every
#   rank's rows sent to rank 0 (`gathers_rows`), caught by `traffic`.
