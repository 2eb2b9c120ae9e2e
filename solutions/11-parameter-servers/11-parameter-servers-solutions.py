# %% [markdown]
# # Chapter 11 solutions: Parameter servers
#
# Worked solutions to the exercises of `chapters/11-parameter-servers` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.
#
# Sizes are the chapter's smoke sizes (200 users, 1 000 items, 20 000 ratings, rows of 8). Exercises 2
# and 4 count traffic by replaying exactly the keys each worker pulls at each clock (the batches are a
# deterministic function of the seed); the replay is checked against the server's own counters first.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only contend

import numpy as np  # noqa: E402

from scaleoutai import cluster, datasets  # noqa: E402
from scaleoutai.collectives import block_range  # noqa: E402
from scaleoutai.ml import paramserver as ps  # noqa: E402
from scaleoutai.ml import paramserver_server as pss  # noqa: E402

N_USERS, N_ITEMS, N_RATINGS, DIM, BATCH, SEED = 200, 1_000, 20_000, 8, 128, 0
users, items, r = datasets.low_rank_ratings(N_USERS, N_ITEMS, N_RATINGS, seed=SEED)  # the smoke data
n_rows = N_USERS + N_ITEMS
net = cluster.Network(beta=1e-9, alpha=1e-5)


def full_loss(table):
    """The loss on every rating (less noisy than the last batches' loss)."""
    e = np.einsum("ij,ij->i", table[users], table[N_USERS + items]) - r
    return float(e @ e / (2 * len(r)))


def worker_keys(c, k, K):
    """The keys worker k of K pulls at clock c (what train_worker computes)."""
    lo, hi = block_range(BATCH, K, k)
    idx = ps.batch_indices(len(r), BATCH, c, SEED)
    idx = idx[lo:hi]
    return np.unique(np.concatenate([users[idx], N_USERS + items[idx]]))


# %% [markdown]
# ## Exercise 1 (analysis): the staleness bound against the learning rate
#
# **Setup.** $M = 2$ servers, $K = 8$ workers with jittered compute (Section 7's straggler model), 40
# clocks of $B = 128$, bounds $s \in \{0, 4, 16\}$, learning rates 10, 20 (the chapter's) and 36. The
# final loss is measured on *all* ratings, which is far less noisy than the last batches' loss.
#
# **What the runs show.** At $\eta = 10$ and $20$ the loss rises slowly and monotonically with $s$:
# stale reads cost accuracy, a little. Halving the rate shrinks the relative gap between $s = 16$ and
# BSP, the "smaller rate recovers it" of the exercise. At the larger rate $\eta = 36$ the surprise is the
# other way round: **BSP** is the one that suffers (its loss doubles), while $s = 4$ and $16$ stay close
# to the good runs.
#
# **Relation to the SSP bound.** Ho et al. bound the regret of SSP by $O\big(F L \sqrt{2(s+1)K T}\big)$
# with step size $\eta_t = \sigma/\sqrt t$, $\sigma \propto 1/(L\sqrt{2(s+1)K})$. The staleness term
# is the error a stale read introduces, at most the $(s+1)K$ updates it missed times the step:
# $\propto \eta\, L^2 (s+1) K$. It is linear in $\eta$, so a smaller rate compensates a larger $s$
# ($\eta \propto 1/\sqrt{s+1}$ keeps the bound). The bound is a worst case and says nothing about BSP's
# own step: in this server SSP applies each worker's push **as it arrives** (K sub-steps of about
# $\eta/K$ each per clock, each seeing the previous ones, like Gauss-Seidel), while BSP applies the
# sum at once (one Jacobi step in $u$ and $v$ together). For the bilinear loss $u\cdot v$ the
# simultaneous step overshoots first, so at the edge of stability the asynchronous updates are *more*
# stable. The exercise's premise (larger rate, staleness starts to hurt) holds for the sweep at the
# chapter's rate; at a rate near BSP's stability limit the ordering flips.
#
# > Note for the instructor: expect students to report the flip at large $\eta$; it is a property of
# > applying pushes one by one, not a bug. The staleness cost itself is small on this problem (about
# > 1 % at $s = 16$), so ask for losses on the full data, not the last batch.

# %%
sweep = {}
for lr in (10.0, 20.0, 36.0):
    for s in (0, 4, 16):
        res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 2, 8, BATCH, 40, lr, staleness=s,
                                 compute_s=2e-5, jitter=1.0, network=net)
        assert res.max_gap <= s  # the server enforces the bound
        sweep[(lr, s)] = full_loss(res.table)
    print(f"lr {lr:>4}: full-data loss " + ", ".join(f"s={s} {sweep[(lr, s)]:.4f}" for s in (0, 4, 16)))
gap = {lr: sweep[(lr, 16)] / sweep[(lr, 0)] - 1 for lr in (10.0, 20.0)}
assert sweep[(20.0, 0)] < sweep[(20.0, 4)] < sweep[(20.0, 16)]  # staleness costs accuracy at the chapter's rate
assert 0 < gap[10.0] < gap[20.0]  # and a smaller rate shrinks the cost
assert sweep[(36.0, 0)] > 1.5 * sweep[(36.0, 4)]  # near BSP's stability limit the one-shot step suffers first
# BSP itself is the one-machine reference (s = 0 equals reference_train)
bsp = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 2, 8, BATCH, 40, 20.0, compute_s=2e-5,
                         jitter=1.0, network=net).table
assert np.abs(bsp - ps.reference_train(n_rows, DIM, users, items, r, N_USERS, BATCH, 40, 20.0)[0]).max() < 1e-10

# %% [markdown]
# ## Exercise 2 (coding): replicating the hottest items on every server
#
# **Scheme.** The 10 most rated items get a copy on every server. A worker reads a hot row from "its"
# server, $k \bmod M$ (any copy is as good, all copies see every write), and pushes a hot row's gradient
# to **all** $M$ copies. Everything else is as before.
#
# **Load.** Items are numbered by popularity, so range sharding gives server 0 the keys $0..299$: all
# 200 users *and* the 100 most popular items. It answers most rows (about 86 % here). Reading the 10
# hot rows round-robin moves their share to the other servers, and the max/mean load falls, but only
# from about 3.4 to 3.1: server 0 still owns every user and items 11-100. Replicating a handful of keys
# fixes a hot *key*; a hot *range* is a sharding problem, which hash sharding (Section 6) solves for free.
#
# **Extra push bytes.** Each hot row a worker pushes now travels $M$ times instead of once: extra
# $= (M-1) \times (\text{hot rows pushed}) \times (d \cdot 8 + 8)$ bytes (a float64 row and its int64 key).
# The counts below replay each worker's keys; the replay of the unreplicated run reproduces the
# servers' own `rows_served` counters exactly.

# %%
M, K, STEPS = 4, 4, 20
hot_items = np.argsort(np.bincount(items, minlength=N_ITEMS))[::-1][:10]
hot = set((N_USERS + hot_items).tolist())


def replay_load(sharding, replicate_hot):
    served = np.zeros(M, dtype=np.int64)
    extra_push_rows = 0
    for c in range(STEPS):
        for k in range(K):
            keys = worker_keys(c, k, K)
            is_hot = np.isin(keys, list(hot)) if replicate_hot else np.zeros(len(keys), bool)
            own = pss.owner_of(keys[~is_hot], n_rows, M, sharding)
            served += np.bincount(own, minlength=M)
            served[k % M] += int(is_hot.sum())
            extra_push_rows += (M - 1) * int(is_hot.sum())
    return served, extra_push_rows


for sharding in ("range", "hash"):
    lib = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, M, K, BATCH, STEPS, 20.0,
                             sharding=sharding).rows_served
    mine, _ = replay_load(sharding, False)
    assert np.array_equal(mine, lib)  # the replay is the servers' own count
before, _ = replay_load("range", False)
after, extra_rows = replay_load("range", True)
pushed_rows = sum(len(worker_keys(c, k, K)) for c in range(STEPS) for k in range(K))
extra_bytes = extra_rows * (DIM * 8 + 8)
imb = lambda x: x.max() / x.mean()  # noqa: E731
print(f"range sharding, rows served per server: {before.tolist()} (max/mean {imb(before):.2f}) -> "
      f"{after.tolist()} (max/mean {imb(after):.2f})")
print(f"extra push traffic: {extra_rows} rows = {extra_bytes / 1e3:.1f} kB over {STEPS} clocks, "
      f"{extra_rows / pushed_rows:.0%} more push rows")
assert before.sum() == after.sum() and imb(after) < imb(before)
assert np.argmax(before) == pss.owner_of(np.array([N_USERS + hot_items[0]]), n_rows, M, "range")[0]

# %% [markdown]
# ## Exercise 3 (conceptual): chain replication instead of primary-backup
#
# With a chain of three servers head $\to$ middle $\to$ tail, a push enters at the head, is applied
# there and forwarded; each server applies and forwards; the **tail** applies it and acknowledges, and
# only then is the write complete. Reads go to the tail, which by construction has applied every
# acknowledged write and nothing else, so reads are strongly consistent without any coordination.
#
# *Cost of a write.* Three hops in sequence plus the acknowledgement: latency about $3(\alpha + n\beta)$
# plus the ack instead of primary-backup's one round trip to the primary (which forwards to the backup
# in parallel or before acknowledging: $\approx 2$ hops). Bytes: the gradient rows cross three links,
# $3n$ per push against $2n$ for primary-backup; the head and the middle forward, so every server's
# outbound link carries the pushes of the shards for which it is not the tail. Read cost is unchanged
# (one hop), and reads no longer load the head: the tail serves them, the head absorbs writes, which
# spreads a skewed read/write mix better than a primary that does both.
#
# *Crashes survived.* A chain of $n$ servers tolerates $n - 1 = 2$ crashes: as long as one server
# remains, it holds every acknowledged write (the tail's writes are a subset of every predecessor's).
# Repair is local: a failed head is replaced by its successor, a failed tail by its predecessor (which
# may hold writes the tail never acked; they become visible, which is safe since no client saw them
# fail), a failed middle is spliced out and its predecessor re-sends what the successor may have missed.
# Primary-backup with one backup tolerates one crash. The price of chain replication is write latency
# linear in the chain length, which matters for a parameter server's push-heavy traffic.

# %% [markdown]
# ## Exercise 4 (analysis): a worker-side cache of rows at most $s$ clocks old
#
# **Rule.** A worker keeps every row it pulled with the clock of the pull; at clock $c$ it reuses a
# cached row pulled at clock $c' \ge c - s$ and pulls the others. This is consistent with SSP: the reused
# row misses at most the updates of the last $s$ clocks, which the bound allows anyway.
#
# **Derivation for one key.** Let $p$ be the probability that the key appears in a worker's batch at
# a clock. After a pull the next $s$ clocks are covered; in them the key appears $p\,s$ times on average,
# all served from the cache. Then the next appearance pulls again. So the share of a key's reads that the
# cache saves is $\dfrac{p s}{1 + p s}$: near $s/(s+1)$ for the hottest items ($p$ close to 1), near 0
# for the long tail ($p \ll 1/s$). Hot items are where the bytes are saved; we check the formula on the
# hottest item against the replayed counts (the replay uses the real batches, so the appearances are
# not exactly independent; the tolerance allows for that).

# %%
def cache_replay(s, K=4, steps=200):
    """Rows pulled with and without a cache of window s, overall and for the hottest item."""
    top = N_USERS + hot_items[0]
    needed = pulled = top_needed = top_pulled = 0
    for k in range(K):
        cached = {}
        for c in range(steps):
            keys = worker_keys(c, k, K)
            fresh = [key for key in keys.tolist() if key not in cached or c - cached[key] > s]
            for key in fresh:
                cached[key] = c
            needed, pulled = needed + len(keys), pulled + len(fresh)
            top_needed += int(top in keys)
            top_pulled += int(top in fresh)
    return needed, pulled, top_needed, top_pulled


n0, p0, t0_needed, t0_pulled = cache_replay(0)
assert n0 == p0  # s = 0: no reuse
p_top = t0_needed / (4 * 200)  # the hottest item's appearance probability per worker and clock
for s in (1, 2, 4, 8):
    needed, pulled, top_needed, top_pulled = cache_replay(s)
    saved = 1 - pulled / needed
    top_saved = 1 - top_pulled / top_needed
    predicted = p_top * s / (1 + p_top * s)
    print(f"s={s}: rows pulled {pulled} of {needed} ({saved:.1%} saved, {(needed - pulled) * DIM * 8 / 1e3:.0f} kB); "
          f"hottest item: {top_saved:.1%} saved, formula {predicted:.1%}")
    assert abs(top_saved - predicted) < 0.06
    assert top_saved > saved  # the hot items save far more than the average row

# %% [markdown]
# ## Exercise 5 (analysis): the crash with SGD and with Adagrad
#
# **Runs.** With replicas on, a server crash leaves the final table identical to the run without a
# crash for **both** optimizers (checked below). That works because the backup applies every push to
# its copy of the shard, and `_Replica` keeps the Adagrad accumulator $G$ next to the rows: the backup
# holds exactly the state the primary had.
#
# **Why the state must travel with the rows.** Adagrad's update is
# $w \leftarrow w - \eta\, g / (\sqrt{G} + \epsilon)$ with $G$ the sum of all past squared gradients of
# that entry. The step size of every future update depends on $G$. A backup that replicated the rows
# but not $G$ would, after failover, restart with $G = 0$: its next steps would be
# $\eta g/\epsilon$-sized or, once a first gradient arrives, as large as the very first steps of
# training, and the table would diverge from the crash-free run (and can blow up). SGD has no state
# beyond the rows, so replicating rows is enough. The one-machine replay below makes this concrete:
# losing $G$ for one shard at clock 10 changes the table; for SGD there is nothing to lose. The same
# holds for momentum and Adam's moments, and it is why ZeRO (Chapter 16) shards and checkpoints the
# optimizer state with the parameters.

# %%
def train_with_state_loss(optimizer, lose_at=None, shard=0, servers=3, steps=20, lr=0.1):
    """reference_train's loop, optionally zeroing the optimizer state of one shard at a clock."""
    table = ps.init_rows(np.arange(n_rows), DIM, SEED)
    acc = None if optimizer == "sgd" else np.zeros_like(table)
    mine = pss.owner_of(np.arange(n_rows), n_rows, servers, "range") == shard
    for c in range(steps):
        if c == lose_at and acc is not None:
            acc[mine] = 0.0
        idx = ps.batch_indices(len(r), BATCH, c, SEED)
        both = np.concatenate([users[idx], N_USERS + items[idx]])
        keys, inv = np.unique(both, return_inverse=True)
        _, g = ps._grads(table[keys], inv[:len(idx)], inv[len(idx):], r[idx], BATCH)
        rows = table[keys]
        a = acc[keys] if acc is not None else None
        ps._apply(rows, a, g, lr)
        table[keys] = rows
        if acc is not None:
            acc[keys] = a
    return table


for optimizer in ("sgd", "adagrad"):
    kw = dict(replicate=True, optimizer=optimizer, lr=0.1, network=net)
    base = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 3, 4, BATCH, 20,
                              **kw)
    crashed = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 3, 4, BATCH, 20,
                                 faults=cluster.Faults(crash={0: 30}), **kw)
    assert crashed.dead == [0] and np.array_equal(crashed.table, base.table)
    intact = train_with_state_loss(optimizer)
    assert np.abs(intact - base.table).max() < 1e-10  # the replay is the BSP run
    lost = train_with_state_loss(optimizer, lose_at=10)
    diff = float(np.abs(lost - intact).max())
    print(f"{optimizer}: crash with replicated state -> identical table; losing shard 0's optimizer "
          f"state at clock 10 changes the table by up to {diff:.3g}")
    assert (diff == 0.0) if optimizer == "sgd" else (diff > 1e-3)


# %% [markdown]
# ## Exercise 6 (lab): Lab 11, an elastic parameter server with lazy momentum
#
# The lab is `labs/lab11-embedding-paramserver`. Its reference solution is the solution blocks of
# `labs/lab11-embedding-paramserver/lab11-embedding-paramserver.py`; its hidden tests, rubric and mutants
# are in `grading/lab11-embedding-paramserver/` (`tests.py`, `rubric.yaml`, `mutants/`). The grader checks
# the ring key by key, the final rows and every clock's loss against single-machine heavy-ball momentum on
# the whole table, every recorded pull against the rows of that moment, and from its own record of the
# messages the routing on each clock's ring and the one migration message per old server at the join.
#
# **Key ideas of the answer.** Momentum moves every row at every step, pushed or not, so a server keeps a
# per-row clock and, when a row is touched, applies the missed steps in closed form or by a short loop
# (v = mu v, w -= lr v per missed step). Placement is a pure function of the membership, so workers and
# servers agree on every clock's ring without talking; at the join, the old owner catches each moving row
# up to the step before the join and hands over values and velocities together, and forgets them.
#
# **Mistakes the mutants make.** Updating a row only when pushed (`lazy_no_catchup`); updating the weights
# before the velocity; migrating rows without velocity or without their missed steps; keeping a moved copy;
# routing the previous clock's push by the previous ring; hashing int32 keys; pulling the whole batch.

