# %% [markdown]
# # Chapter 38 solutions: Recommendation at scale
#
# Worked solutions to the exercises of `chapters/38-recommendation-at-scale` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.
#
# Sizes are the chapter's smoke sizes (1,500 users, 1,000 items, 300 feature ids, $d = 16$, hidden 32,
# output 16); byte counts use a batch of 2,048 pairs on $K = 8$ ranks, training a batch of 128. Byte
# counts are exact counts of what the protocol would send (8-byte ids and float64 numbers, as in the
# chapter), checked against the chapter's `step_bytes` where the two overlap.

# %%
import math

import numpy as np
import torch

from scaleoutai import cluster
from scaleoutai.cases import recsys as rc
from scaleoutai.cases import recsys_shard as rs
from scaleoutai.cases import recsys_train as rt
from scaleoutai.collectives import block_range
from scaleoutai.data import storage
from scaleoutai.datasets.recsys import recsys_interactions

torch.set_num_threads(1)
SEED, D, HIDDEN, OUT = 0, 16, 32, 16
data = recsys_interactions(1500, 1000, 300, per_user=12, test_per_user=2, sharpness=5.0, seed=SEED)
params0 = rc.init_two_tower(data.n_features, data.n_items, d=D, hidden=HIDDEN, out=OUT, seed=SEED + 1)
n_mlp = int(sum(params0[name].size for name in rc.MLP_KEYS))
K8, B_EVAL = 8, 2048
rows_eval = rc.batch_rows(len(data.train_items), B_EVAL, 0)


def rank_blocks(B, K):
    return [block_range(B, K, r) for r in range(K)]


def bags_of(rows):
    """The user bags and the item 'bags' (one id each) of a batch, as (ids, offsets) pairs."""
    ids, offsets, _ = data.bags(data.train_users[np.asarray(rows)])
    return (ids, offsets), (data.train_items[rows], np.arange(len(rows)))


def rowwise_bytes(owner, ids, offsets, K, d=D):
    """Row-wise sharding counted by brute force: 16 B per remote entry, 2 d 8 B per remote segment."""
    ends = np.append(offsets, len(ids))
    total = 0
    for r, (lo, hi) in enumerate(rank_blocks(len(offsets), K)):
        for bag in range(lo, hi):
            own = owner[ids[ends[bag]:ends[bag + 1]]]
            remote = own[own != r]
            total += 16 * len(remote) + 2 * d * 8 * len(set(remote.tolist()))
    return total


# %% [markdown]
# ## Exercise 1 (analysis): column-wise and table-wise sharding
#
# **Byte counts per step** (per table; $B$ bags, $K$ ranks, bag length $L$, entries $E = BL$, 8-byte
# numbers; "remote" means on another rank):
#
# - *Row-wise* (the chapter): 16 bytes per remote entry (local row and segment) plus $2 \cdot 8d$ per
#   remote segment (a pooled vector out, its gradient back). A bag of $L$ random ids touches
#   $K(1 - (1 - 1/K)^L)$ owners, so the vector bytes grow with $L$ up to $K$ segments per bag.
# - *Column-wise*: every rank holds $d/K$ columns of every row, so every rank serves every lookup: the
#   requester sends every id (8 B) and each bag's offset (8 B) to the $K - 1$ others, and gets $d/K$
#   numbers per bag back from each, out and back: $8(K-1)(E + B) + 2 \cdot 8 d B (K-1)/K$. Vector bytes
#   no longer depend on $L$, but the ids are broadcast, $K - 1$ times each.
# - *Table-wise*: a whole table on one rank; the $(K-1)/K$ share of bags held elsewhere send all their
#   ids there (16 B each) and get one vector per bag: $(16E + 2\cdot 8dB)(K-1)/K$, the fewest vector bytes
#   possible. Its problems are memory (the table must fit one rank) and load (one rank serves every
#   lookup of that table), unless there are at least $K$ tables of similar traffic to spread.
#
# **Where each wins.** Many small tables (DLRM's 26 categorical features, $L = 1$): table-wise, the same
# bytes as row-wise at $L = 1$ (one id, one vector) with every table whole on one rank, so the load spreads
# by assigning tables to ranks. One huge table: row-wise, the only scheme that splits memory *and* sends
# each id to one rank (table-wise cannot hold it; column-wise splits memory but broadcasts every id).
# Long bags: the vectors dominate row-wise (up to $K$ segments per bag), so column-wise wins from $L = 2$
# up to about $L = 32$ here, and loses again for very long bags ($L = 64$), where broadcasting $8(K-1)L$
# bytes of ids per bag costs more than row-wise's $K$ vectors. Table-wise moves the fewest bytes at every
# $L$ (one vector per bag), which is why long bags of a *moderate* table are often given a table-wise
# placement. On the chapter's data the user-feature bags (3 to 8 ids) already favour column-wise over
# row-wise. The code verifies the brute-force row-wise count against the chapter's `step_bytes` first.
#
# %%
def colwise_bytes(ids, offsets, K, d=D):
    return 8 * (K - 1) * (len(ids) + len(offsets)) + 2 * 8 * d * len(offsets) * (K - 1) // K


def tablewise_bytes(ids, offsets, K, d=D, holder=0):
    ends = np.append(offsets, len(ids))
    total = 0
    for r, (lo, hi) in enumerate(rank_blocks(len(offsets), K)):
        if r != holder:
            total += 16 * int(ends[hi] - ends[lo]) + 2 * 8 * d * (hi - lo)
    return total


pu, pi = rt.placements(data, K8)
lib = rt.step_bytes(data, pu, pi, rows_eval, D, OUT, n_mlp)
(u_ids, u_off), (i_ids, i_off) = bags_of(rows_eval)
assert rowwise_bytes(pu.owner, u_ids, u_off, K8) == lib["user ids"] + lib["user vectors"]
assert rowwise_bytes(pi.owner, i_ids, i_off, K8) == lib["item ids"] + lib["item vectors"]
for name, (ids, off), owner in (("user features", (u_ids, u_off), pu.owner), ("items", (i_ids, i_off), pi.owner)):
    print(f"{name:>13}: row-wise {rowwise_bytes(owner, ids, off, K8) / 1e3:7.1f} kB, column-wise "
          f"{colwise_bytes(ids, off, K8) / 1e3:7.1f} kB, table-wise {tablewise_bytes(ids, off, K8) / 1e3:7.1f} kB")

# long bags: random ids of one big table, bag length L, B = 2048, K = 8
g = np.random.default_rng(SEED)
V_big = 10 ** 6
owner_big = np.arange(V_big) % K8
cross = None
for L in (1, 2, 4, 8, 16, 32, 64):
    ids = g.integers(0, V_big, B_EVAL * L)
    off = np.arange(0, B_EVAL * L, L)
    row, col, tab = rowwise_bytes(owner_big, ids, off, K8), colwise_bytes(ids, off, K8), tablewise_bytes(ids, off, K8)
    segs = K8 * (1 - (1 - 1 / K8) ** L) * (K8 - 1) / K8        # expected remote segments per bag
    expect_row = B_EVAL * (16 * L * (K8 - 1) / K8 + 2 * 8 * D * segs)
    assert abs(row / expect_row - 1) < 0.02                       # the formula above
    assert tab < row                                               # one vector per bag beats up to K
    if cross is None and col < row:
        cross = L
    print(f"L = {L:2d}: row-wise {row / 1e6:6.2f} MB, column-wise {col / 1e6:6.2f} MB, table-wise {tab / 1e6:6.2f} MB")
print("column-wise first beats row-wise at bag length", cross)

# %% [markdown]
# ## Exercise 2 (coding): send each hot row once
#
# **Answer.** Within one step, rank $r$ asks owner $j$ for each *distinct* row once (8 bytes: its local
# row) and gets the row back once ($8d$ bytes), then pools every bag locally from the received rows; the
# row gradients are summed per distinct row on the requester before going back ($8d$ bytes). Bytes:
# $8 u_{rj} + 2 \cdot 8 d\, u_{rj}$ for $u_{rj}$ distinct rows, against the chapter's $16 e_{rj} + 2\cdot 8 d\, s_{rj}$
# ($e$ entries, $s$ segments). It saves wherever distinct rows are fewer than segments. Under the Zipf ids
# of this data both tables repeat heavily within a rank's block of 256 pairs: the item table saves about a
# third, and the user-feature table about three quarters (only 300 feature ids, bags of 3 to 8, so a
# block's bags cover far fewer distinct rows than (bag, owner) segments). Dedup loses only when a rank's
# bags share few ids and each bag has many entries at one owner (pooling at the owner then merges more
# than dedup does); a per-table choice of the smaller count is the robust policy. Correctness: pooling
# from the deduplicated rows is the same arithmetic, checked against torch's `embedding_bag`.
#
# %%
def dedup_bytes(owner, ids, offsets, K, d=D):
    ends = np.append(offsets, len(ids))
    total = 0
    for r, (lo, hi) in enumerate(rank_blocks(len(offsets), K)):
        mine = ids[ends[lo]:ends[hi]]
        distinct = np.unique(mine[owner[mine] != r])
        total += 8 * len(distinct) + 2 * 8 * d * len(distinct)
    return total


def pooled_from_distinct(table, ids, offsets):
    """Fetch each distinct row once, then pool every bag from the fetched copy."""
    uniq, inv = np.unique(ids, return_inverse=True)
    fetched = table[uniq]
    sizes = np.diff(np.append(offsets, len(ids)))
    bag = np.repeat(np.arange(len(offsets)), sizes)
    out = np.zeros((len(offsets), table.shape[1]))
    np.add.at(out, bag, fetched[inv.ravel()])
    return out


want = torch.nn.functional.embedding_bag(torch.as_tensor(u_ids), torch.as_tensor(params0["user_table"]),
                                         torch.as_tensor(u_off), mode="sum").numpy()
assert np.allclose(pooled_from_distinct(params0["user_table"], u_ids, u_off), want, rtol=0, atol=1e-12)
save = {}
for name, (ids, off), owner in (("user features", (u_ids, u_off), pu.owner), ("items", (i_ids, i_off), pi.owner)):
    before, after = rowwise_bytes(owner, ids, off, K8), dedup_bytes(owner, ids, off, K8)
    save[name] = 1 - after / before
    print(f"{name:>13}: {before / 1e3:7.1f} kB -> {after / 1e3:7.1f} kB with one copy per distinct row "
          f"({save[name]:+.0%} saved)")
assert save["items"] > 0.2 and save["user features"] > 0.2          # repeats of hot ids within a block

# %% [markdown]
# ## Exercise 3 (analysis): local negatives only
#
# **Answer.** Using only the rank's own $b = B/K$ items as negatives removes the all-gather of item
# vectors and the reduce-scatter of their gradients: $2(K-1)B\,o\,8$ bytes per step (0.46 MB at $K = 8$,
# $B = 2048$, $o = 16$, the chapter's "negatives" line exactly). The loss changes: each row's softmax runs
# over $b$ candidates instead of $B$, a *different* objective with $b - 1$ negatives. For the same
# parameters it can only be lower (removing terms from a log-sum-exp lowers it, checked below), so the
# loss values of different $K$ are not comparable; at $K = 1$ it is the chapter's loss exactly.
#
# The expected effect on quality is a weaker signal as $K$ grows with $B$ fixed (fewer, and under Zipf
# sampling mostly popular, negatives), hence lower recall. The code trains, on one machine, the model
# whose loss is the mean over $K$ blocks of block-local in-batch softmax (what the sharded run with local
# negatives computes: each rank's loss needs nothing from the others) for $K = 1, 4, 16$ at $B = 128$, 300
# Adagrad steps, without logQ.
#
# > Note for the instructor: on the chapter's small catalogue (1,000 items) recall@20 does not measurably
# > fall: 0.199, 0.194 and 0.201 for 128, 32 and 8 negatives per row. Two effects cancel: fewer negatives
# > give less contrast, but they also penalise popular items less (the in-batch popularity bias that logQ
# > corrects grows with $B$), which helps recall on held-out items. To show the degradation the exercise
# > expects, use a larger catalogue, train longer, or add logQ to both runs.
#
# %%
def train_local_negatives(K, steps=300, B=128, lr=0.1):
    model = rc.reference_model(params0)
    opt = rc.make_optimizer(model, "adagrad", lr)
    losses = []
    for s in range(steps):
        b = rc.make_batch(data, rc.batch_rows(len(data.train_items), B, s))
        u, v = model(torch.as_tensor(b["ids"]), torch.as_tensor(b["offsets"]), None, torch.as_tensor(b["items"]))
        loss = 0.0
        for lo, hi in rank_blocks(B, K):                 # each rank: its users against its own items
            logits = u[lo:hi] @ v[lo:hi].T
            loss = loss + torch.nn.functional.cross_entropy(logits, torch.arange(hi - lo), reduction="sum") / B
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return rc.to_params(model), losses


ref_params, ref_losses = rc.reference_train(data, params0, 5, 128, 0.1, optimizer="adagrad")
p1, l1 = train_local_negatives(1, steps=5)
assert np.allclose(l1, ref_losses, rtol=1e-12)                     # K = 1 is the chapter's loss
every_tenth = np.arange(0, len(data.train_items) + 1, 10)         # 10 train picks per user
seen = rc.csr_lists(every_tenth, data.train_items)
held = rc.csr_lists(data.test_offsets, data.test_items)
rec = {}
for K in (1, 4, 16):
    p, losses = train_local_negatives(K)
    rec[K] = rc.recall_at_k(rc.topk_items(*rc.tower_vectors(p, data), 20, seen), held, 20)
    print(f"K = {K:2d} ({128 // K} negatives per row): final loss {np.mean(losses[-20:]):.3f}, recall@20 {rec[K]:.3f}, "
          f"bytes saved per step {2 * (K - 1) * 128 * OUT * 8 / 1e3:.1f} kB")
# the same parameters, fewer candidates: each block's log-sum-exp drops terms, so the loss can only fall
b0 = rc.make_batch(data, rc.batch_rows(len(data.train_items), 128, 0))
with torch.no_grad():
    u0, v0 = rc.reference_model(params0)(torch.as_tensor(b0["ids"]), torch.as_tensor(b0["offsets"]), None,
                                         torch.as_tensor(b0["items"]))
    block_loss = {K: sum(float(torch.nn.functional.cross_entropy(u0[lo:hi] @ v0[lo:hi].T, torch.arange(hi - lo),
                                                                   reduction="sum")) for lo, hi in rank_blocks(128, K)) / 128
                  for K in (1, 4, 16)}
assert block_loss[1] >= block_loss[4] >= block_loss[16]
assert max(rec.values()) - min(rec.values()) < 0.02                 # no measurable recall loss here (see note)
assert 2 * (K8 - 1) * B_EVAL * OUT * 8 == lib["negatives (all-gather + reduce-scatter)"]

# %% [markdown]
# ## Exercise 4 (analysis): re-sharding that moves little
#
# **Answer.** With `mod`, going from 8 ranks to 7 keeps a row in place only if $x \bmod 8 = x \bmod 7$,
# which holds exactly for $x \bmod 56 < 7$: **7/8 of the rows move** (and their Adagrad state with them).
# With $S = 64$ virtual shards ($x \mapsto x \bmod 64$) assigned round-robin to the 8 ranks, a lost rank's
# 8 virtual shards are handed to the survivors and nothing else changes: **only the lost rank's rows move,
# 1/8 of them**, the minimum possible. The price is balance: 64 shards over 7 ranks give some ranks 10
# shards and others 9 (up to 11% above the mean); more virtual shards make it finer. Consistent hashing
# (the course's `HashRing` with 64 virtual nodes per rank) also moves only the lost node's keys, with a
# looser balance that depends on the ring's random points.

# %%
V = data.n_features + data.n_items
x = np.arange(V)
moved_mod = int(np.sum(x % 8 != x % 7))
assert moved_mod == V - int(np.sum(x % 56 < 7))
S_V = 64
shard_rank = np.arange(S_V) % 8
lost = 5
new_rank = shard_rank.copy()
orphans = np.flatnonzero(shard_rank == lost)
survivors = [r for r in range(8) if r != lost]
new_rank[orphans] = [survivors[i % 7] for i in range(len(orphans))]
before, after = shard_rank[x % S_V], new_rank[x % S_V]
moved_virtual = int(np.sum(before != after))
assert moved_virtual == int(np.sum(before == lost))               # only the lost rank's rows
ring = storage.HashRing(list(range(8)), vnodes=64)
own_before = np.array(ring.owner_of_each([int(i) for i in x]))
ring.remove(lost)
own_after = np.array(ring.owner_of_each([int(i) for i in x]))
moved_ring = int(np.sum(own_before != own_after))
assert moved_ring == int(np.sum(own_before == lost))
load_v = np.bincount(after, minlength=8)[survivors]
print(f"{V} rows, rank {lost} of 8 lost: mod moves {moved_mod} ({moved_mod / V:.0%}), virtual shards move "
      f"{moved_virtual} ({moved_virtual / V:.0%}), consistent hashing moves {moved_ring} ({moved_ring / V:.0%}); "
      f"virtual-shard load max/mean {load_v.max() / load_v.mean():.2f}")

# %% [markdown]
# ## Exercise 5 (analysis): a frequency-aware placement
#
# **Answer.** Greedy placement (rows by training lookup count, largest first, each to the rank with the
# least load so far: Graham's LPT rule) balances the *count* of lookups each owner serves, up to one
# row: the greedy invariant gives $\max_j \text{load}_j \le \frac{1}{K}\sum_x c_x + \max_x c_x$ (asserted on
# the counts it placed). Measured on an evaluation batch it is the best balanced of the three (max/mean
# owner load 1.02 against 1.30 for `mod`), at the same bytes: placement does not change how many entries
# are remote (about $(K-1)/K$ for any placement that ignores who asks). Replicating the 32 hottest rows of
# each table balances almost as well (1.03) and, here, also *saves* bytes (about 14%): the hot rows'
# remote entries and segments disappear, and that outweighs the $2(K-1)\,h\,d\,8$ bytes of gradient
# all-reduce it adds ($h = 64$ rows in all: 115 kB). The trade-offs: greedy needs a lookup table of
# owners (no formula), which must be rebuilt as popularity drifts; replication costs $h\,d$ numbers of
# memory per rank and, with large $K$ or many replicated rows, an all-reduce that grows with $K$.
#
# %%
def greedy_placement(counts, K):
    order = np.lexsort((np.arange(len(counts)), -counts))
    owner, load = np.empty(len(counts), dtype=np.int64), np.zeros(K)
    for xid in order:
        j = int(np.argmin(load))
        owner[xid] = j
        load[j] += counts[xid]
    local = np.empty(len(counts), dtype=np.int64)
    for j in range(K):
        mine = np.flatnonzero(owner == j)
        local[mine] = np.arange(len(mine))
    assert load.max() <= counts.sum() / K + counts.max()            # Graham's bound for the greedy rule
    return rs.Placement(owner, local, K, np.zeros(0, dtype=np.int64))


cu = np.bincount(data.bag_ids, minlength=data.n_features).astype(float)
ci = np.bincount(data.train_items, minlength=data.n_items).astype(float)
schemes = {"mod": rt.placements(data, K8), "greedy by count": (greedy_placement(cu, K8), greedy_placement(ci, K8)),
           "mod + 32 hot replicated": rt.placements(data, K8, "mod", (32, 32))}
res5 = {}
for name, (pu_s, pi_s) in schemes.items():
    load = rs.owner_load(pu_s, u_ids) + rs.owner_load(pi_s, i_ids)
    nbytes = sum(rt.step_bytes(data, pu_s, pi_s, rows_eval, D, OUT, n_mlp).values())
    res5[name] = (load.max() / load.mean(), nbytes)
    print(f"{name:>24}: max/mean owner load {res5[name][0]:.3f}, bytes per step {nbytes / 1e6:.3f} MB")
rep_lines = rt.step_bytes(data, *schemes["mod + 32 hot replicated"], rows_eval, D, OUT, n_mlp)
assert (rep_lines["user replicas (fused all-reduce)"] + rep_lines["item replicas (fused all-reduce)"]
        == 2 * (K8 - 1) * (32 + 32) * D * 8)                       # the added all-reduce, as derived
assert res5["greedy by count"][0] < res5["mod"][0] and res5["mod + 32 hot replicated"][0] < res5["mod"][0]
assert res5["mod + 32 hot replicated"][1] < res5["mod"][1]           # hot lookups saved > all-reduce added

# %% [markdown]
# ## Exercise 6 (coding): row-wise Adagrad
#
# **Answer.** Keep one accumulator $a_x$ per row: $a_x \mathrel{+}= \frac{1}{d}\lVert g_x\rVert^2$ and
# $e_x \mathrel{-}= \eta\, g_x / (\sqrt{a_x} + \epsilon)$ (the rule of DLRM's fused row-wise Adagrad; the MLPs
# keep per-coordinate Adagrad). **Yes, the sharded run still equals a dense reference**, because the
# accumulator of a row depends only on that row's gradients, which its owner receives in full (the
# reverse all-to-all sums every contribution before the update), exactly as the per-coordinate state
# did. The reference below is written for it: the dense torch model, torch's Adagrad for the MLPs and the
# row-wise rule applied to the full gradient of each table. The sharded run uses the chapter's
# `train_sharded` with the accumulators passed in as $(V, 1)$ state and the update rule swapped for one
# that recognises the row-wise shape. **Savings:** optimizer state for the tables falls from $Vd$ to $V$
# numbers, $1 - 1/d = 94\%$ at $d = 16$, so a table plus its state goes from $2Vd$ to $V(d+1)$ numbers
# (47% less memory per rank for the table part), and checkpoints shrink the same way.

# %%
EPS = rc.ADAGRAD_EPS


def update_rowwise_or_not(p, grad, acc, lr):
    """Row-wise Adagrad when the state has one column per row, the chapter's rule otherwise."""
    if acc is not None and acc.ndim == 2 and acc.shape[1] == 1 and p.shape[1] != 1:
        acc += (grad * grad).mean(axis=1, keepdims=True)
        p -= lr * grad / (np.sqrt(acc) + EPS)
    else:
        chapter_update(p, grad, acc, lr)


def dense_rowwise(params, steps, B, lr):
    model = rc.reference_model(params)
    opt = torch.optim.Adagrad(model.mlp.parameters(), lr=lr, eps=EPS)
    acc = {"users": np.zeros((params["user_table"].shape[0], 1)), "items": np.zeros((params["item_table"].shape[0], 1))}
    for s in range(steps):
        b = rc.make_batch(data, rc.batch_rows(len(data.train_items), B, s))
        u, v = model(torch.as_tensor(b["ids"]), torch.as_tensor(b["offsets"]), None, torch.as_tensor(b["items"]))
        loss = torch.nn.functional.cross_entropy(u @ v.T, torch.arange(len(u)))
        opt.zero_grad()
        model.users.weight.grad = model.items.weight.grad = None
        loss.backward()
        opt.step()
        with torch.no_grad():
            for name in ("users", "items"):
                weight = getattr(model, name).weight
                grad = weight.grad.numpy()
                acc[name] += (grad * grad).mean(axis=1, keepdims=True)
                weight -= torch.as_tensor(lr * grad / (np.sqrt(acc[name]) + EPS))
    return rc.to_params(model)


STEPS6, B6, LR6 = 4, 128, 0.1
want = dense_rowwise(params0, STEPS6, B6, LR6)
state = {k: np.zeros_like(v) for k, v in params0.items()}
state["user_table"] = np.zeros((data.n_features, 1))
state["item_table"] = np.zeros((data.n_items, 1))
chapter_update = rt.apply_update
rt.apply_update = update_rowwise_or_not
try:
    got = rt.run_sharded(data, params0, 3, STEPS6, B6, LR6, optimizer="adagrad", state=state)
finally:
    rt.apply_update = chapter_update
gap = max(float(np.abs(got.params[k] - want[k]).max()) for k in want)
assert gap < 1e-10, gap
assert got.state["user_table"].shape == (data.n_features, 1)
per_coord = rt.memory_per_rank(pu, pi, D, n_mlp, 8, "adagrad")
rowwise_mem = (pu.rows_per_rank() + pi.rows_per_rank()) * (D + 1) * 8 + 2 * n_mlp * 8
saving = 1 - (pu.rows_per_rank() + pi.rows_per_rank()) * (D + 1) / ((pu.rows_per_rank() + pi.rows_per_rank()) * 2 * D)
assert np.allclose(saving, 1 - (D + 1) / (2 * D))
print(f"sharded row-wise Adagrad (K = 3, {STEPS6} steps) == dense reference, largest gap {gap:.1e}; "
      f"largest rank {per_coord.max() / 1e3:.1f} kB -> {rowwise_mem.max() / 1e3:.1f} kB "
      f"(table part {saving[0]:.0%} smaller)")

# %% [markdown]
# ## Exercise 7 (lab): Lab 38, a training step of the row-sharded EmbeddingBag that moves each row once
#
# The lab is `labs/lab38-sharded-embedding-backward`. It asks for Exercises 2 and 6 built as one
# distributed step (the chapter's `sharded_bag_forward` and `sharded_bag_backward`, which send a (local
# row, segment) pair per entry and a partial sum per (bag, owner) segment both ways, are the starting
# point, not the answer). Its reference solution is the solution blocks of
# `labs/lab38-sharded-embedding-backward/lab38-sharded-embedding-backward.py`; its hidden tests and
# mutants are in `grading/lab38-sharded-embedding-backward/` (`tests.py`, `rubric.yaml`, `mutants/`).
#
# **Key ideas of the answer.** Rank r takes the distinct ids of its bags in increasing order with the
# inverse map (ids == uniq[inv]) and sends each owner j one int64 message of the distinct ids j owns,
# empty if none, so every owner knows when it has heard everyone. Owner j finds each asked id's local
# row by a binary search in its own sorted ids (never id // K: placements are arbitrary) and replies
# with those rows in the order asked. Rank r pools every bag from its single copy of each row, locally,
# so the per-sample weights never travel; mean divides by the bag length and an empty bag stays zero.
# The backward is the transpose: entry e of bag b contributes w_e G[b] (sum) or G[b]/|b| (mean) to its
# id, added with np.add.at (a fancy-index += keeps one duplicate), and r sends owner j one summed row
# per id of its request. The owner adds the rows from every rank, its own bags included, and updates
# only the rows somebody asked for: SGD, or row-wise Adagrad with one accumulator per row, a += mean of
# g squared over the d columns first, then e -= lr g / (sqrt(a) + eps). Each row's gradient is complete
# on its owner before the update, so the result equals one dense step for every K.
#
# **What it grades.** Pooled bags and updated rows and accumulators against torch's embedding_bag and
# one step on the whole table (K = 1, 2, 3, 5, 8 and K > V, mod, block, random and one-owner placements,
# ranks without rows or bags, empty bags, sum, mean and weights, float32 and float64, 2 real processes),
# and, from the grader's recorded messages on bags that repeat hot ids, exactly one request of the
# distinct ids, one reply of exactly those rows and one summed gradient row per id per ordered pair,
# and nothing else (55 points). The chapter's protocol pasted keeps 45. **Mistakes the mutants catch:**
# the mean's 1/|b| or the weights forgotten in the backward, duplicates overwritten, the stale or summed
# Adagrad accumulator, the owner's own gradients dropped, local rows by id // K, np.add.reduceat on empty
# bags, int32 ids or float64 rows on the wire, the whole shard sent back, a table all-gather on the side.
