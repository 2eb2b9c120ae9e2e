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
# # Chapter 38. Recommendation at scale
#
# A recommender's first stage, retrieval, picks a few hundred candidates out of millions of items for
# every request. The standard model is a two-tower network: one tower maps a user to a vector, the other
# maps an item to a vector, and the score is their inner product, so retrieval is a maximum inner
# product search over precomputed item vectors. Nearly all of the parameters sit in embedding tables, one
# row per user feature and per item id. Those tables outgrow any single machine long before the towers'
# MLPs do. This case study builds a two-tower retriever in torch, then shards its tables by rows over
# $K$ ranks by hand: the lookup is an all-to-all of ids, then an all-to-all of the looked-up vectors,
# and the backward sends the gradient rows back the same way (DLRM-style model parallelism for the
# tables, data parallelism for the MLPs). We check the sharded model against torch's own dense
# `nn.EmbeddingBag` step by step, count its bytes against the alpha-beta model, measure what Zipf-skewed
# ids do to the shards' load, lose a shard and resume on fewer ranks, and log speedup, efficiency and
# cost to MLflow.
#
# **Prerequisites:** Chapter 11 (Parameter servers: embedding tables, sparse updates and hot keys),
# Chapter 15 (Data parallelism: the all-reduce of gradients, $B = K b$), Chapter 17 (Expert
# parallelism: the all-to-all dispatch and combine), and Chapter 4 for the communicator and its
# collectives. Background: softmax cross-entropy, an MLP trained with autograd.

# %% tags=["parameters"]
N_USERS = 4000  # smoke: 1500
N_ITEMS = 2000  # smoke: 1000
N_FEATURES = 500  # smoke: 300
DIM = 16
HIDDEN = 32
OUT = 16
BATCH = 256  # smoke: 128
STEPS = 600  # smoke: 300
LR = 0.1
TRAIN_K = 4
CHECK_KS = [1, 2, 3, 5, 24]
KS = [1, 2, 3, 4, 6, 8]  # smoke: [1, 2, 4, 8]
EVAL_BATCH = 4096  # smoke: 2048
TOP_K = 20
INSTANCE_TYPE = "aws-c7i.xlarge"
SEED = 0

# %% [markdown]
# `N_USERS` users, each described by a bag of a few of `N_FEATURES` feature ids, pick items among
# `N_ITEMS`; the tables have rows of `DIM` numbers, the towers a hidden layer of `HIDDEN` and an output of
# `OUT`. Training runs `STEPS` Adagrad steps of global batch `BATCH` at learning rate $\eta$ = `LR` on
# `TRAIN_K` ranks; `CHECK_KS` are the world sizes of the correctness checks (the last one larger than the
# rows a check batch touches), `KS` those of the scaling curve, timed at global batch `EVAL_BATCH`.
# Retrieval is judged at `TOP_K`; costs use the hourly price of `INSTANCE_TYPE`.
#
# ## 1. Motivation: which ceiling binds
#
# Memory. A production retriever has an item table with a row per item and user tables with a row per
# feature value (ids of pages, queries, places, hashed crosses), often billions of rows in all. At 128
# float32 numbers a row, a billion rows are half a terabyte, and Adagrad keeps one more number per
# parameter. The towers' MLPs are a few million parameters. Compute per example is small: a few rows are
# read and two small MLPs run. So the table must be split over machines, and the question of this
# chapter is how to split it so that a step moves little data.

# %%
import tempfile
import time
from pathlib import Path

import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch

from scaleoutai import capstone, cluster, collectives, perf
from scaleoutai.cases import recsys as rc
from scaleoutai.cases import recsys_shard as rs
from scaleoutai.cases import recsys_train as rt
from scaleoutai.datasets.recsys import recsys_interactions

warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
torch.set_num_threads(1)  # the simulator runs every rank in one thread; on 2 shared cores more threads only contend
rows, dim, itemsize, gpu_bytes = 1e9, 128, 4, 80e9
table = rows * dim * itemsize
print(f"a table of {rows:.0e} rows x {dim} float32: {table / 1e9:.0f} GB, "
      f"{2 * table / 1e9:.0f} GB with Adagrad's state; "
      f"at least {int(np.ceil(2 * table / gpu_bytes))} GPUs of 80 GB just to hold it")
print(f"two MLPs of 4 M parameters: {2 * 4e6 * itemsize / 1e6:.0f} MB, replicated on every rank without a thought")

# %% [markdown]
# ## 2. Core concepts
#
# **Two towers.** The user tower pools the embeddings of the user's feature ids with an **EmbeddingBag**
# (the sum, the mean, or a weighted sum of a variable-length bag of rows, without materialising the
# rows) and passes the result through an MLP to $u$; the item tower looks up the item's row and passes it
# through another MLP to $v$. The score is $s = u \cdot v$.
#
# **In-batch sampled softmax.** For a batch of $B$ observed (user, item) pairs, the other $B - 1$ items of
# the batch serve as negatives: $L = -\frac{1}{B}\sum_i \log \frac{e^{s_{ii}}}{\sum_j e^{s_{ij}}}$. Popular
# items show up as negatives more often than the rest, so the loss pushes them down; the **logQ
# correction** subtracts $\log q_j$ (the item's sampling frequency) from $s_{ij}$ to undo that bias.
#
# **Skewed ids.** Item and feature popularity follow a Zipf law: a few ids take a large share of all
# lookups. The generator below draws users whose bags of features determine their hidden taste, and items
# picked by taste and by a Zipf prior (item 0 is the hottest id); each user's last two picks are held out.

# %%
data = recsys_interactions(N_USERS, N_ITEMS, N_FEATURES, per_user=12, test_per_user=2, sharpness=5.0, seed=SEED)
counts = np.bincount(data.train_items, minlength=N_ITEMS)
feature_counts = np.bincount(data.bag_ids, minlength=N_FEATURES)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for name, c in (("items", counts), ("user features", feature_counts)):
    axes[0].loglog(np.arange(1, len(c) + 1), np.sort(c)[::-1], label=name)
axes[0].set(xlabel="popularity rank", ylabel="lookups in the train set", title="Zipf-skewed ids")
axes[0].legend()
axes[1].hist(np.diff(data.bag_offsets), bins=np.arange(2.5, 9.5), rwidth=0.8)
axes[1].set(xlabel="features in the user's bag", ylabel="users", title="bag lengths (EmbeddingBag inputs)")
plt.tight_layout()
plt.show()
print(f"{len(data.train_items)} train pairs, {len(data.test_items)} held out; the hottest 1% of items take "
      f"{np.sort(counts)[::-1][:N_ITEMS // 100].sum() / counts.sum():.1%} of the lookups")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Rank $r$ of $K$ holds the rows of each table that a **placement** gives it (row-wise sharding: `mod`
# puts id $x$ on rank $x \bmod K$, `range` cuts contiguous blocks with the course's split rule, `hash`
# scatters ids by a hash) and takes block $r$ of the global batch, $b \approx B / K$ pairs. One step:
#
# 1. **ids out.** Each bag is split by owner; a (bag, owner) pair is a *segment*. Rank $r$ sends every
#    owner $j$ the (local row, segment) pairs it needs: an all-to-all of ids (and of the weights).
# 2. **vectors back.** Owner $j$ sums each segment's rows and returns one vector per segment: a second
#    all-to-all. Rank $r$ adds its segments into pooled bag vectors.
# 3. **towers.** The MLPs are replicated; each rank runs them on its $b$ rows. The in-batch negatives are
#    the whole batch, so the $b \times$ `OUT` item vectors are all-gathered, and the gradient of the gathered
#    matrix is reduce-scattered back to the rows' ranks.
# 4. **backward.** The MLP gradients are ring-all-reduced (data parallelism). The pooled gradient of each
#    bag goes back to the owners of its segments (the reverse all-to-all), and each owner adds
#    $w_x g$ into the rows it holds and takes the optimizer step on them. The optimizer state (Adagrad's
#    sum of squared gradients) lives with the rows.
#
# The bytes of one lookup from $r$ to $j$ are $16 n_{rj}$ for the ids of $n_{rj}$ entries plus
# $2 \cdot d \cdot 8 \, s_{rj}$ for the $s_{rj}$ pooled vectors and their gradients (float64 here). The table's
# size $V$ appears nowhere. The timeline shows one step on 4 ranks.

# %%
params0 = rc.init_two_tower(N_FEATURES, N_ITEMS, d=DIM, hidden=HIDDEN, out=OUT, seed=SEED + 1)
n_mlp = sum(params0[k].size for k in rc.MLP_KEYS)
log_q = np.log((counts + 1) / (counts + 1).sum())  # logQ: the smoothed train frequency of each item
net = cluster.Network(alpha=2e-5, beta=1 / 1.25e9)  # 20 us per message, 10 Gb/s links
traced = rt.run_sharded(data, params0, 4, 1, BATCH, LR, optimizer="adagrad", log_q=log_q, network=net, trace=True)
cluster.plot_timeline(traced.result, title="one step on 4 ranks: ids, vectors, negatives, grads back, all-reduce")
plt.show()
pu4, pi4 = rt.placements(data, 4)
model = rt.step_bytes(data, pu4, pi4, rc.batch_rows(len(data.train_items), BATCH, 0), DIM, OUT, n_mlp)
sent = sum(s.bytes_sent for s in traced.result.stats)
for phase, nbytes in model.items():
    if nbytes:
        print(f"{phase:>42}: {nbytes / 1e3:8.1f} kB")
print(f"{'counted in all':>42}: {sum(model.values()) / 1e3:8.1f} kB;  sent (simulator): {sent / 1e3:.1f} kB")
assert sent == sum(model.values())

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# The lookup and its backward over `collectives.all_to_all`, then the step that composes them with the
# towers (torch autograd on each rank's rows) and the collectives of the data-parallel part.

# %%
from scaleoutai.notebooks import show

show(rs.place_rows, rs.sharded_bag_forward, rs.sharded_bag_backward, rt.sharded_step)

# %% [markdown]
# The check, for every $K$ in `CHECK_KS` (the last one larger than the rows a batch of 16 touches, so
# some ranks hold none of them and some hold no pairs at all), for sum, mean and weighted pooling, SGD
# and Adagrad, float64 and float32: three steps of the sharded model equal three steps of the dense torch
# model, every parameter. Tolerances: $10^{-10}$ in float64 and $2 \cdot 10^{-5}$ in float32 (the
# partial sums are added in another order).

# %%
small = recsys_interactions(150, 97, 41, per_user=6, test_per_user=1, bag_size=(2, 6), seed=SEED + 3)
touched = len(np.unique(small.train_items[rc.batch_rows(len(small.train_items), 16, 0)]))
assert CHECK_KS[-1] > touched
worst = {}
for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-5)):
    p_small = rc.init_two_tower(small.n_features, small.n_items, d=8, hidden=12, out=6, seed=1, dtype=dtype)
    for mode, weighted, opt, lr in (("sum", False, "sgd", 0.5), ("mean", False, "adagrad", 0.05),
                                    ("sum", True, "adagrad", 0.05)):
        want, _ = rc.reference_train(small, p_small, 3, 16, lr, mode=mode, weighted=weighted, optimizer=opt)
        for K, scheme in zip(CHECK_KS, ["mod", "range", "hash", "mod", "range"]):
            got = rt.run_sharded(small, p_small, K, 3, 16, lr, scheme=scheme, mode=mode, weighted=weighted,
                                 optimizer=opt, replicate=(1, 2) if K == 3 else (0, 0)).params
            err = max(float(np.abs(got[k] - want[k]).max()) for k in want)
            assert err <= tol, (dtype, mode, weighted, K, err)
            worst[np.dtype(dtype).name] = max(worst.get(np.dtype(dtype).name, 0.0), err)
print(f"sharded == dense torch for K in {CHECK_KS} (a batch touches {touched} items), 3 modes x 2 optimizers; "
      f"worst gap {worst}")

# %% [markdown]
# **Training.** The model of the rest of the chapter is trained by the sharded implementation on
# `TRAIN_K` ranks of the simulator, Adagrad with logQ correction, and compared at the end with the dense
# torch model trained on one machine from the same start.

# %%
t0 = time.perf_counter()
trained = rt.run_sharded(data, params0, TRAIN_K, STEPS, BATCH, LR, optimizer="adagrad", log_q=log_q, timeout=1200)
t_sharded = time.perf_counter() - t0
t0 = time.perf_counter()
dense, dense_losses = rc.reference_train(data, params0, STEPS, BATCH, LR, optimizer="adagrad", log_q=log_q)
t_dense = time.perf_counter() - t0
gap = max(float(np.abs(trained.params[k] - dense[k]).max()) for k in dense)
assert gap < 1e-8, gap
plt.figure(figsize=(7, 3.5))
plt.plot(trained.losses, lw=0.8, label=f"sharded, K = {TRAIN_K}")
plt.plot(dense_losses, "--", lw=0.8, label="dense torch model")
plt.gca().set(xlabel="step", ylabel="in-batch softmax loss (logQ)", title="the same training curve")
plt.legend()
plt.show()
print(f"{STEPS} steps: sharded on the simulator {t_sharded:.1f} s, dense {t_dense:.1f} s (wall, this machine); "
      f"largest parameter gap {gap:.1e}")

# %% [markdown]
# ## 5. The same task with a production library: torch's EmbeddingBag and all_to_all_single
#
# **`torch.nn.EmbeddingBag`** is the production layer, and the dense model above is built from it: the
# sharded model equals it through training. Here is the lookup alone, once more, against
# `torch.nn.functional.embedding_bag` on a batch of the real data, with weights, on 5 ranks.
#
# **`torch.distributed.all_to_all_single`** is the collective that TorchRec-style systems use for the
# exchange. On real processes (`backend="process"`, gloo, $K = 2$) each rank does the lookup twice: with
# our exchange, and with three `all_to_all_single` calls (the counts, the ids and weights, then one
# weighted row per id back, pooled by the requester: the unpooled variant). Gloo implements
# `all_to_all_single` on CPU tensors with uneven splits, which we checked before writing this cell. In
# the same processes, three training steps must equal the dense model.

# %%
import torch.distributed  # noqa: E402


def torch_lookup(comm, p, shard, ids, offsets, weights):
    """Row-wise lookup with torch.distributed.all_to_all_single: counts, ids and weights out, rows back."""
    dist = torch.distributed
    bag = np.repeat(np.arange(len(offsets)), np.diff(np.append(offsets, len(ids))))
    order = np.argsort(p.owner[ids], kind="stable")  # entries grouped by owner rank
    send = np.bincount(p.owner[ids], minlength=comm.size).tolist()
    recv_t = torch.empty(comm.size, dtype=torch.int64)
    dist.all_to_all_single(recv_t, torch.tensor(send, dtype=torch.int64))
    recv = recv_t.tolist()
    rows_in, w_in = torch.empty(sum(recv), dtype=torch.int64), torch.empty(sum(recv), dtype=torch.float64)
    dist.all_to_all_single(rows_in, torch.tensor(p.local[ids[order]]), recv, send)
    dist.all_to_all_single(w_in, torch.tensor(weights[order]), recv, send)
    back = torch.empty((len(ids), shard["rows"].shape[1]), dtype=torch.float64)
    dist.all_to_all_single(back, torch.tensor(shard["rows"])[rows_in] * w_in[:, None], send, recv)
    pooled = torch.zeros((len(offsets), back.shape[1]), dtype=torch.float64)
    return pooled.index_add_(0, torch.tensor(bag[order]), back).numpy()


def production_check(comm, data, params, steps, B, lr):
    pu, pi = rt.placements(data, comm.size)
    shard = rs.shard_table(params["user_table"], pu, comm.rank)
    lo, hi = collectives.block_range(B, comm.size, comm.rank)
    ids, offsets, w = data.bags(data.train_users[rc.batch_rows(len(data.train_items), B, 0)[lo:hi]])
    ours, _ = rs.sharded_bag_forward(comm, pu, shard, ids, offsets, w)
    theirs = torch_lookup(comm, pu, shard, ids, offsets, w)
    out = rt.train_sharded(comm, data, params, pu, pi, steps, B, lr, optimizer="adagrad")
    return {"ours": ours, "torch": theirs, "ids": (ids, offsets, w), "trained": out}


assert torch.distributed.is_available() and torch.distributed.is_gloo_available()
t0 = time.perf_counter()
prod = cluster.run(production_check, 2, backend="process", args=(data, params0, 3, BATCH, LR), timeout=300, quiet=True)
t_prod = time.perf_counter() - t0
weight = torch.tensor(params0["user_table"])
for r, v in enumerate(prod.values):
    ids, offsets, w = v["ids"]
    want = torch.nn.functional.embedding_bag(torch.tensor(ids), weight, torch.tensor(offsets), mode="sum",
                                             per_sample_weights=torch.tensor(w)).numpy()
    assert np.allclose(v["ours"], want, rtol=0, atol=1e-12) and np.allclose(v["torch"], want, rtol=0, atol=1e-12)
want3, _ = rc.reference_train(data, params0, 3, BATCH, LR, optimizer="adagrad")
mlp3 = prod.values[0]["trained"]["mlp"]
items3 = rs.gather_table([v["trained"]["item"] for v in prod.values], N_ITEMS)
assert all(np.allclose(mlp3[k], want3[k], rtol=0, atol=1e-10) for k in rc.MLP_KEYS)
assert np.allclose(items3, want3["item_table"], rtol=0, atol=1e-10)
print(f"gloo, 2 processes ({t_prod:.1f} s with start-up): our lookup == all_to_all_single lookup == "
      f"torch embedding_bag; 3 training steps == the dense model")

# %% [markdown]
# The unpooled variant sends one vector per id instead of one per (bag, owner) segment. With bags of 3 to
# 8 features spread over $K$ owners that is up to twice as many vectors here, and many more for the long
# bags of production features (watch histories of hundreds of ids): pooling at the owner is what
# TorchRec's row-wise sharding does with its reduce-scatter.
#
# **FAISS** is the production library for the retrieval stage. `IndexFlatIP` is the exact inner-product
# search, so its top-$k$ over the trained item vectors must equal our brute-force top-$k$.

# %%
import faiss  # noqa: E402

U, V = rc.tower_vectors(trained.params, data)
index = faiss.IndexFlatIP(OUT)
index.add(np.ascontiguousarray(V, dtype=np.float32))
_, faiss_top = index.search(np.ascontiguousarray(U, dtype=np.float32), TOP_K)
ours_top = rc.topk_items(U.astype(np.float32), V.astype(np.float32), TOP_K)
agree = float(np.mean(faiss_top == ours_top))
assert agree > 0.999, agree  # float32 ties may order differently, nothing else
print(f"FAISS IndexFlatIP top-{TOP_K} == brute force for {agree:.2%} of the {ours_top.size} positions")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A lost shard.** With tables sharded, every rank holds rows nobody else has: if one crashes, no step
# can run (every bag may need its rows), unlike data parallelism, where any replica could carry on.
# The remedy is a checkpoint of the shards, rows and optimizer state, written atomically every few
# steps, and a restart that **re-shards**: the rows are redistributed over the survivors by the new
# placement. Here rank 2 of 4 crashes in step 7, after the checkpoint of step 6; the run stops with the
# rank named, and 3 ranks resume from step 6.

# %%
WORK = Path(tempfile.mkdtemp(prefix="ch38-"))
CKPT = WORK / "ckpt"
CKPT.mkdir()
FAIL_STEPS = 10
uninterrupted, _ = rc.reference_train(data, params0, FAIL_STEPS, BATCH, LR, optimizer="adagrad", log_q=log_q)
one_step = rt.run_sharded(data, params0, 4, 1, BATCH, LR, optimizer="adagrad", log_q=log_q)
per_step = one_step.result.stats[2].messages_sent  # rank 2's sends per step
try:
    rt.run_sharded(data, params0, 4, FAIL_STEPS, BATCH, LR, optimizer="adagrad", log_q=log_q, ckpt_dir=str(CKPT),
                   ckpt_every=3, faults=cluster.Faults(crash={2: 6 * per_step + 5}))
    raise AssertionError("the crash was not noticed")
except cluster.ClusterError as exc:
    message = str(exc).splitlines()[0]
assert "rank 2" in message
print("the step failed:", message)
step, params_ck, state_ck = rt.load_checkpoint(CKPT, N_FEATURES, N_ITEMS)
old, new = rt.placements(data, 4), rt.placements(data, 3)
moved = [(a.owner != b.owner).mean() for a, b in zip(old, new)]
resumed = rt.run_sharded(data, params_ck, 3, FAIL_STEPS - step, BATCH, LR, optimizer="adagrad", log_q=log_q,
                         start_step=step, state=state_ck)
gap = max(float(np.abs(resumed.params[k] - uninterrupted[k]).max()) for k in uninterrupted)
assert step == 6 and gap < 1e-10, (step, gap)
cold = rt.run_sharded(data, params_ck, 3, FAIL_STEPS - step, BATCH, LR, optimizer="adagrad", log_q=log_q,
                      start_step=step, state=None)  # the rows without their Adagrad sums
cold_gap = max(float(np.abs(cold.params[k] - uninterrupted[k]).max()) for k in uninterrupted)
assert cold_gap > 1e-3
print(f"resumed from step {step} on 3 ranks: {moved[0]:.0%} of feature rows and {moved[1]:.0%} of item rows "
      f"changed owner; final model == uninterrupted run (gap {gap:.1e}); "
      f"without the optimizer state: gap {cold_gap:.2f}")

# %% [markdown]
# Two lessons. The optimizer state is part of the shard: resuming the rows without their Adagrad sums
# gives another model. And `mod` placement moves most rows when $K$ changes ($x \bmod 4$ and $x \bmod 3$
# rarely agree); consistent hashing or a fixed set of virtual shards would move only the lost rank's rows
# (Exercise 4).
#
# **A straggling owner.** The owner of hot rows serves more lookups than the rest, and every rank waits
# for its partial sums. Section 7 measures that skew; a rank that is simply slow (`Faults(slow=...)`)
# shows the same symptom, since the all-to-all waits for its slowest peer.

# %%
slow = rt.run_sharded(data, params0, 4, 1, BATCH, LR, optimizer="adagrad", network=net, flop_time=1e-9,
                      faults=cluster.Faults(slow={1: 3.0}))
fast = rt.run_sharded(data, params0, 4, 1, BATCH, LR, optimizer="adagrad", network=net, flop_time=1e-9)
print(f"one step, K = 4: {fast.result.sim_time * 1e3:.1f} ms; rank 1 three times slower: "
      f"{slow.result.sim_time * 1e3:.1f} ms for everyone")
assert slow.result.sim_time > 2 * fast.result.sim_time

# %% [markdown]
# ## 7. Evaluation: quality, bytes, memory, skew, speedup and cost
#
# **Quality.** Recall@k (the share of a user's held-out items found in the top $k$) and NDCG@k (hits
# weighted by $1/\log_2(\text{rank} + 1)$, normalised by the best possible) of the trained model, against
# the popularity baseline (the most frequent train items) and a model trained without logQ correction.
# The user's own train items are masked out of every list.

# %%
seen = rc.csr_lists(np.arange(0, len(data.train_items) + 1, 10), data.train_items)
test = rc.csr_lists(data.test_offsets, data.test_items)
no_logq, _ = rc.reference_train(data, params0, STEPS, BATCH, LR, optimizer="adagrad")
lists = {"popularity": rc.popularity_topk(data.train_items, N_ITEMS, N_USERS, TOP_K, seen),
         "two towers, no logQ": rc.topk_items(*rc.tower_vectors(no_logq, data), TOP_K, seen),
         "two towers, logQ (sharded)": rc.topk_items(U, V, TOP_K, seen)}
scores = {}
for name, top in lists.items():
    scores[name] = [(rc.recall_at_k(top, test, k), rc.ndcg_at_k(top, test, k)) for k in (5, 10, TOP_K)]
    print(f"{name:>28}: " + "  ".join(f"recall@{k} {r:.3f} NDCG@{k} {n:.3f}"
                                       for k, (r, n) in zip((5, 10, TOP_K), scores[name])))
assert scores["two towers, logQ (sharded)"][-1][0] > 1.5 * scores["popularity"][-1][0]
assert scores["two towers, logQ (sharded)"][-1][1] > scores["two towers, no logQ"][-1][1]

# %% [markdown]
# **Bytes per step: sharding against replication.** The data-parallel alternative keeps both tables on
# every rank and ring-all-reduces their full gradient, $2(K-1)(V_u + V_i) d$ numbers per step in all,
# however few rows the batch touched (Chapter 11's parameter servers send only touched rows, at the price of
# a server tier). The sharded step's bytes depend on the batch alone. Measured on the simulator for
# every $K$ of `KS`, then the model as the tables grow.

# %%
rows_eval = rc.batch_rows(len(data.train_items), EVAL_BATCH, 0)
measured, modelled, replicated = {}, {}, {}
for K in KS:
    run = rt.run_sharded(data, params0, K, 1, EVAL_BATCH, LR, optimizer="adagrad", network=net)
    measured[K] = sum(s.bytes_sent for s in run.result.stats)
    pu, pi = rt.placements(data, K)
    modelled[K] = sum(rt.step_bytes(data, pu, pi, rows_eval, DIM, OUT, n_mlp).values())
    replicated[K] = rt.replicated_step_bytes(N_FEATURES, N_ITEMS, DIM, n_mlp, K, EVAL_BATCH, OUT)
    assert measured[K] == modelled[K]
Vs = np.logspace(3, 9, 13)
Kc = KS[-1]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
axes[0].plot(KS, [measured[K] / 1e6 for K in KS], "o-", label="sharded (measured = counted)")
axes[0].plot(KS, [replicated[K] / 1e6 for K in KS], "s--", label="replicated tables + all-reduce")
axes[0].set(xlabel="K", ylabel="MB per step, all ranks", title=f"this model (V = {N_FEATURES} + {N_ITEMS} rows)")
axes[0].legend()
axes[1].loglog(Vs, [measured[Kc]] * len(Vs), label="sharded: independent of V")
axes[1].loglog(Vs, [rt.replicated_step_bytes(int(v) // 2, int(v) // 2, DIM, n_mlp, Kc, EVAL_BATCH, OUT) for v in Vs],
               "--", label="replicated: grows with V")
axes[1].set(xlabel="table rows V", ylabel="bytes per step, all ranks", title=f"as the tables grow (K = {Kc})")
axes[1].legend()
plt.tight_layout()
plt.show()
cross = next(v for v in Vs
             if rt.replicated_step_bytes(int(v) // 2, int(v) // 2, DIM, n_mlp, Kc, EVAL_BATCH, OUT) > measured[Kc])
print(f"K = {Kc}: sharded {measured[Kc] / 1e6:.2f} MB per step; replication costs more beyond about {cross:.0e} rows")

# %% [markdown]
# For this toy model the two designs move about the same bytes: its 2,500 rows are fewer than the rows a
# batch of `EVAL_BATCH` pairs touches, so all-reducing the whole table is no waste. The crossover sits at a
# few thousand rows; a production table is a million times larger, and there the replicated design would
# move terabytes per step while the sharded one still moves what the batch needs.

# %% [markdown]
# **Memory per rank.** Each rank holds its rows of both tables and their Adagrad state, plus a copy of the
# MLPs: the table part falls as $1/K$, the MLP part does not. Measured from the shards the ranks hold
# after training (`nbytes` of their arrays), against the count.

# %%
mem = {}
for K in KS:
    pu, pi = rt.placements(data, K)
    mem[K] = rt.memory_per_rank(pu, pi, DIM, n_mlp, 8, "adagrad")
shard_bytes = [sum(v[t][a].nbytes for t in ("user", "item") for a in ("rows", "acc", "replica", "rep_acc"))
               for v in trained.result.values]
assert [b + 2 * n_mlp * 8 for b in shard_bytes] == list(mem[TRAIN_K])
plt.figure(figsize=(7, 3.8))
plt.plot(KS, [mem[K].max() / 1e3 for K in KS], "o-", label="largest rank")
plt.plot(KS, [mem[1][0] / K / 1e3 for K in KS], "k:", label="ideal 1/K")
plt.axhline(2 * n_mlp * 8 / 1e3, color="grey", ls="--", label="MLPs + their state (replicated)")
plt.gca().set(xlabel="K", ylabel="kB of parameters and state per rank", title="memory per rank")
plt.legend()
plt.show()
print("kB on the largest rank:", {K: round(float(mem[K].max()) / 1e3, 1) for K in KS})

# %% [markdown]
# **Hot ids.** Under Zipf ids a row-wise placement gives some owners far more lookups than others.
# `range` puts all the hottest ids on rank 0; `mod` and `hash` spread them, but the single hottest rows
# still weigh; replicating the hottest rows on every rank (their lookups are served locally, their
# gradients all-reduced) flattens what is left. We count the lookups each owner serves in one batch of
# `EVAL_BATCH` pairs on 8 ranks, and time the lookups alone (forward and backward of both tables) on the
# simulator, charging the owner 10 ns per number it reads or writes (random rows of a table far larger
# than any cache). The replicated rows' gradients need an all-reduce, but `sharded_step` fuses it with the
# MLPs' all-reduce that runs anyway, which adds their bytes and no message, so the lookups do not wait
# for it.

# %%
def lookup_only(comm, data, params, pu, pi, rows):
    lo, hi = collectives.block_range(len(rows), comm.size, comm.rank)
    ids, offsets, w = data.bags(data.train_users[rows[lo:hi]])
    for table, p, args in (("user_table", pu, (ids, offsets, w)),
                           ("item_table", pi, (data.train_items[rows[lo:hi]], np.arange(hi - lo), None))):
        shard = rs.shard_table(params[table], p, comm.rank)
        pooled, ctx = rs.sharded_bag_forward(comm, p, shard, *args, flop_time=1e-8)
        rs.sharded_bag_backward(comm, p, shard, ctx, np.ones_like(pooled), flop_time=1e-8, reduce_replica=False)
    return None


K_SKEW = 8
skew = {}
for name, scheme, rep in (("range", "range", (0, 0)), ("mod", "mod", (0, 0)), ("hash", "hash", (0, 0)),
                          ("mod + 32 hot rows replicated", "mod", (32, 32))):
    pu, pi = rt.placements(data, K_SKEW, scheme, rep)
    ids, _, _ = data.bags(data.train_users[rows_eval])
    load = rs.owner_load(pu, ids) + rs.owner_load(pi, data.train_items[rows_eval])
    res = cluster.run(lookup_only, K_SKEW, args=(data, params0, pu, pi, rows_eval), network=net)
    skew[name] = (load.max() / load.mean(), res.sim_time, load)
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for i, (name, (imb, t, load)) in enumerate(skew.items()):
    axes[0].bar(np.arange(K_SKEW) + 0.2 * i - 0.3, load, width=0.2, label=name)
axes[0].set(xlabel="owner rank", ylabel="lookups served", title=f"load per owner, one batch of {EVAL_BATCH}")
axes[0].legend(fontsize=7)
axes[1].bar(range(len(skew)), [t * 1e3 for _, t, _ in skew.values()])
axes[1].set_xticks(range(len(skew)), [n.replace(" + ", "\n+ ") for n in skew], fontsize=7)
axes[1].set(ylabel="ms (simulated)", title="lookup forward + backward")
plt.tight_layout()
plt.show()
for name, (imb, t, _) in skew.items():
    print(f"{name:>30}: max/mean load {imb:.2f}, lookups {t * 1e3:.2f} ms")
assert skew["range"][0] > skew["mod"][0] > skew["mod + 32 hot rows replicated"][0]
assert skew["range"][1] > skew["mod"][1] > skew["mod + 32 hot rows replicated"][1]

# %% [markdown]
# **Speedup, efficiency and cost.** Strong scaling at a fixed global batch `EVAL_BATCH`, on the simulator:
# compute is charged per rank at $10^{-10}$ s per floating-point operation (the towers, the $b \times B$
# in-batch logits, the owners' pooling), messages on the 10 Gb/s network above. Two cores cannot show
# the speedup of eight machines, so the times are simulated, and each run is logged to MLflow from inside
# the ranks with `capstone.track` (rank 0 writes; the wall time it records is the simulator's, not a
# cluster's), with the simulated step time as a metric. We read the runs back from the store.

# %%
URI = f"sqlite:///{WORK}/mlflow.db"
EXPERIMENT = "ch38-recsys"
FLOP_TIME = 1e-10


def tracked_steps(comm, data, params, pu, pi, steps, B):
    with capstone.track(comm, experiment=EXPERIMENT, uri=URI, instance_type=INSTANCE_TYPE, startup_time=0.0,
                        baseline=comm.size == 1, params={"batch": B, "steps": steps, "alpha": net.alpha,
                                                         "beta": net.beta, "flop_time": FLOP_TIME},
                        problem="two-tower retrieval, sharded embedding tables") as run:
        start = comm.clock
        rt.train_sharded(comm, data, params, pu, pi, steps, B, LR, optimizer="adagrad", flop_time=FLOP_TIME)
        comm.barrier()
        run.log_items(B * steps)
        run.log_metric("sim_step_time", (comm.clock - start) / steps)


t0 = time.perf_counter()
for K in KS:
    pu, pi = rt.placements(data, K)
    cluster.run(tracked_steps, K, args=(data, params0, pu, pi, 1, EVAL_BATCH), network=net, timeout=600)
runs = capstone.load_runs(EXPERIMENT, uri=URI)
assert sorted(int(r["world_size"]) for r in runs) == sorted(KS) and all(r["status"] == "FINISHED" for r in runs)
times = {int(r["world_size"]): float(r["sim_step_time"]) for r in runs}
table = perf.scaling_table(times)
price = capstone.lookup(INSTANCE_TYPE)
print(f"{'K':>3} {'step (ms)':>9} {'S_K':>6} {'E_K':>5} {'USD per 1M steps':>17}   ({len(runs)} MLflow runs, "
      f"{time.perf_counter() - t0:.1f} s)")
for row in table:
    print(f"{row['p']:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} "
          f"{perf.run_cost(price.price_per_hour, row['p'], 1e6 * row['time']):>17.2f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
perf.plot_scaling(times, ax=axes[0], title=f"sharded two-tower step, B = {EVAL_BATCH} (simulated)")
axes[1].plot(KS, [perf.run_cost(price.price_per_hour, K, 1e6 * times[K]) for K in KS], "o-")
axes[1].set(xlabel="K", ylabel="USD per million steps", title=f"cost on {INSTANCE_TYPE}")
plt.tight_layout()
plt.show()
assert table[-1]["speedup"] > 0.5 * KS[-1]

# %% [markdown]
# The in-batch logits ($b \times B \times$ `OUT` per rank) dominate the compute at this batch, and they
# shrink as $1/K$; the bytes grow with $K$ (more of each bag lives on other ranks, and the all-reduces
# and the all-gather cost $2(K-1)/K$ of their size), so efficiency falls slowly. The cost per step stays
# roughly flat while efficiency is high: more ranks for a shorter time. For production tables the
# comparison that matters is not against one rank, which could not hold the table, but against the
# replicated design, whose all-reduce grows with $V$.
#
# ## 8. Exercises
#
# 1. **Column-wise and table-wise sharding.** Split each row's $d$ numbers over the ranks instead of the
#    rows, or give each whole table to one rank. Count the bytes of a step for each and find where each
#    wins (many small tables; one huge table; long bags).
# 2. **Deduplicate ids.** A batch asks for the same hot row many times. Send each distinct (row, owner)
#    once and reuse the vector. How many bytes does it save under the Zipf ids of Section 7?
# 3. **Cross-rank negatives or local negatives.** Drop the all-gather and use only each rank's $b$ items as
#    negatives. What happens to the bytes, to the loss (it no longer equals the dense model's), and to
#    recall@20 as $K$ grows with $B$ fixed?
# 4. **Re-sharding that moves little.** Replace `mod` by a fixed set of $S \gg K$ virtual shards assigned
#    to ranks (or by consistent hashing). Count the rows that move when a rank of 8 is lost.
# 5. **A frequency-aware placement.** Assign rows to ranks greedily by their lookup count (largest first,
#    to the least loaded rank) and compare with replication of the hottest rows, in load and bytes.
# 6. **Row-wise Adagrad.** Keep one accumulator per row instead of one per number (the DLRM optimizer).
#    Does the sharded run still equal a dense reference you write for it? What does it save?
# 7. **Lab 38: a training step that moves each row once.** Put Exercises 2 and 6 into one step of the
#    row-sharded EmbeddingBag, forward, backward and update: each rank asks each owner for the distinct ids
#    of its bags once, pools its bags locally (sum, mean, per-sample weights), returns one gradient row per
#    distinct id, and each owner applies SGD or row-wise Adagrad to the rows it was asked for. It must
#    equal torch's EmbeddingBag and one optimizer step on the whole table for any $K$, placement and bag,
#    empty ones included, and the grader reads every message (`labs/lab38-sharded-embedding-backward`).
#
# ## 9. Research directions
#
# - **Placement under skew and change.** Which rows to shard, replicate or cache on each device, when the
#   popularity of ids drifts daily and devices differ, is a combinatorial problem still solved largely
#   by heuristics and learned cost models.
#   - Naumov, Mudigere, Shi, Huang, Sundaraman, Park, Wang, Gupta, Wu, Azzolini et al., "Deep Learning
#     Recommendation Model for Personalization and Recommendation Systems", arXiv preprint, 2019. DLRM:
#     model-parallel tables with all-to-all, data-parallel MLPs.
#   - Zha, Feng, Yan, Li, Sun, Lai and Hu, "DreamShard: Generalizable Embedding Table Placement for
#     Recommender Systems", NeurIPS, 2022. A learned cost model and reinforcement learning for placing tables.
# - **Training systems for trillion-parameter tables.** Mixing model and data parallelism, caching hot rows
#   on GPUs and keeping the rest in host memory or SSD, and overlapping the all-to-all with compute are
#   the substance of current production systems; their limits at the next order of magnitude are open.
#   - Mudigere, Hao, Huang, Jia, Tulloch, Sridharan, Liu, Ozdal, Nie, Park et al., "Software-Hardware
#     Co-design for Fast and Scalable Training of Deep Learning Recommendation Models", ISCA, 2022.
#   - Ivchenko, Van Der Staay, Taylor, Liu, Feng, Kindi, Sudarshanam, Sefati et al., "TorchRec: a PyTorch
#     Domain Library for Recommendation Systems", RecSys, 2022. Sharding plans and the embedding
#     all-to-all in open source.
#   - Zhai et al., "Actions Speak Louder than Words: Trillion-Parameter Sequential Transducers for
#     Generative Recommendations", ICML, 2024. Recasts ranking and retrieval as sequence transduction over
#     user actions; quality grows as a power law of training compute up to 1.5 trillion parameters.
#   - Zhang et al., "Wukong: Towards a Scaling Law for Large-Scale Recommendation", ICML, 2024. Stacked
#     factorization machines that scale dense compute rather than embedding tables, holding a scaling law
#     over two orders of magnitude of model complexity.
# - **Smaller tables.** Hashing several ids into one row, compositional embeddings and mixed-dimension
#   rows cut memory at some cost in quality; how to choose per feature, and how the choice interacts with
#   sharding, is open.
#   - Shi, Mudigere, Naumov and Yang, "Compositional Embeddings Using Complementary Partitions for
#     Memory-Efficient Recommendation Systems", KDD, 2020. The quotient-remainder trick.
#   - Rajput et al., "Recommender Systems with Generative Retrieval", NeurIPS, 2023. Items become short
#     tuples of shared codewords learned from their content, and a sequence model decodes the next item's
#     codes instead of looking up one embedding row per item.
# - **Sampling bias in two-tower training.** In-batch negatives over-sample popular items; the logQ
#   correction fixes the bias only when the sampling frequencies are known, and mixing in uniform
#   negatives changes the trade-off. Which corrections are right for streaming data is still debated.
#   - Yi, Yang, Hong, Cheng, Heldt, Kumthekar, Zhao, Wei and Chi, "Sampling-Bias-Corrected Neural
#     Modeling for Large Corpus Item Recommendations", RecSys, 2019. The logQ correction with streaming
#     frequency estimates.
#
# ## What's next
#
# Chapter 39 (Robotics swarms) moves from one data centre to many small machines in the field: it
# composes the multi-agent reinforcement learning of Chapter 30 and the swarm algorithms of Chapter 31,
# where the communication budget is a radio link rather than a 10 Gb/s switch.
