# %% [markdown]
# # Lab 15: bucketed DDP equals single-process training
#
# Chapter 15's claim is exact, not approximate: K data-parallel workers that each see a shard of the
# global batch and sum their gradients with an all-reduce take **the same steps** as one machine that
# sees the whole batch. Here you build that DDP loop yourself, with the one optimisation every real DDP
# has: gradient **buckets**.
#
# **The model** is the course's NumPy MLP: `mlp_forward(params, x)` returns `(out, cache)`,
# `mse_loss(out, y)` returns `(loss, dL/dout)` with L the mean over all B·d_out output entries, and
# `mlp_backward(params, cache, dy)` returns `(dx, grads)`. `params` is a dict
# `{"W0", "b0", "W1", "b1", ...}` in the order the layers were registered.
#
# **Shards and weights.** Rank r takes shard r of `np.array_split(X, K)` (and of `Y`): shards differ by
# one row when K does not divide B, and are empty when K > B. The global loss is a mean over B rows, so
# rank r contributes its shard-mean gradient times n_r / B (nothing for an empty shard); the **sum**
# of these over ranks is exactly the full-batch gradient.
#
# **Buckets.** One all-reduce per tensor pays the latency α of 2(K-1) messages per tensor. DDP instead
# packs tensors into buckets of about `bucket_bytes` bytes, in **reverse** registration order (the order
# backward produces them, so a real DDP can send bucket 0 while backward still runs). The rule, which
# the grader counts on:
#
# 1. walk the tensors from last to first, appending each to the open bucket;
# 2. close the bucket as soon as it holds **at least** `bucket_bytes` bytes;
# 3. a last, partly filled bucket is sent too.
#
# Each bucket is flattened into one vector (`np.concatenate` of the raveled tensors) and summed with
# **one ring all-reduce**. You may import `ring_allreduce` from `scaleoutai.collectives` (the one you
# wrote in lab 4 works as well); do not use `scaleoutai.parallel.ddp`, which holds the course's answer.
#
# **Frozen parameters** (names in `frozen`) are neither communicated nor updated.
#
# **What the grader checks** (K = 1 to 7, uneven batches and K > B, buckets filled to exactly
# `bucket_bytes`, float32 and float64, random cases, on the simulator and on 2 real processes):
#
# - `bucketed_allreduce` returns the sum over ranks of every tensor, same keys, shapes and dtype;
# - after `steps` SGD steps, `ddp_train`'s parameters on every rank equal single-process training to
#   |got - expected| <= atol + rtol·|expected| with (rtol, atol) = (1e-9, 1e-9·(1 + max|expected|)) in
#   float64 and (1e-4, 1e-4·(1 + max|expected|)) in float32;
# - every rank sends exactly (number of buckets) × 2(K-1) messages per all-reduce of the gradients, and
#   at most 2(K-1)·⌈n_b/K⌉ values per bucket of n_b values (plus a 16-byte header per message of a 1-D
#   array, the grader's count of a message's dtype and shape);
# - a frozen tensor comes back bit-for-bit unchanged and is never sent.

# %% tags=["parameters"]
K = 4  # smoke: 2
B = 64  # smoke: 10
STEPS = 20  # smoke: 3
BUCKET_BYTES = 256  # smoke: 256

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import ring_allreduce
from scaleoutai.nn import mlp_backward, mlp_forward, mlp_init, mse_loss


# %%
def bucketed_allreduce(comm, grads, bucket_bytes):
    """Sum every tensor of ``grads`` over ranks: one ring all-reduce per bucket, buckets in reverse order.

    Returns a new dict with the same keys, shapes and dtypes.
    """
    ### BEGIN SOLUTION
    buckets, current, size = [], [], 0
    for name in reversed(list(grads)):
        current.append(name)
        size += grads[name].nbytes
        if size >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    summed = {}
    for bucket in buckets:
        flat = ring_allreduce(comm, np.concatenate([grads[name].ravel() for name in bucket]))
        offset = 0
        for name in bucket:
            count = grads[name].size
            summed[name] = flat[offset:offset + count].reshape(grads[name].shape)
            offset += count
    return {name: summed[name] for name in grads}
    ### END SOLUTION


# %%
def ddp_train(comm, X, Y, params, steps, lr, bucket_bytes, frozen=()):
    """``steps`` SGD steps of data-parallel training on the global batch (X, Y); returns the parameters.

    Rank r trains on shard r of np.array_split; frozen names are neither sent nor updated.
    """
    ### BEGIN SOLUTION
    size, rank = comm.size, comm.rank
    x_mine, y_mine = np.array_split(X, size)[rank], np.array_split(Y, size)[rank]
    weight = len(x_mine) / len(X)
    p = {name: value.copy() for name, value in params.items()}
    trainable = [name for name in p if name not in frozen]
    for _ in range(int(steps)):
        if len(x_mine):
            out, cache = mlp_forward(p, x_mine)
            _, dy = mse_loss(out, y_mine)
            _, g = mlp_backward(p, cache, dy)
            local = {name: g[name] * weight for name in trainable}
        else:  # an empty shard still joins every all-reduce, with zeros
            local = {name: np.zeros_like(p[name]) for name in trainable}
        total = bucketed_allreduce(comm, local, bucket_bytes)
        for name in trainable:
            p[name] -= lr * total[name]
    return p
    ### END SOLUTION


# %% [markdown]
# One machine, for comparison: full-batch gradient, plain SGD, frozen tensors left alone.

# %%
def train_one_machine(X, Y, params, steps, lr, frozen=()):
    weights = dict((key, array.copy()) for key, array in params.items())
    for step in range(steps):
        prediction, saved = mlp_forward(weights, X)
        grads = mlp_backward(weights, saved, mse_loss(prediction, Y)[1])[1]
        for key in weights:
            if key not in frozen:
                weights[key] = weights[key] - lr * grads[key]
    return weights


rng = np.random.default_rng(15)
X = rng.standard_normal((B + 1, 5))  # B + 1 rows: the shards are uneven
Y = rng.standard_normal((B + 1, 2))
params0 = mlp_init([5, 16, 8, 2], seed=1)
try:
    res = cluster.run(ddp_train, K, backend="sim", args=(X, Y, params0, STEPS, 0.05, BUCKET_BYTES, ("W0",)))
    expected = train_one_machine(X, Y, params0, STEPS, 0.05, frozen=("W0",))
    worst = max(float(np.abs(res.values[r][n] - expected[n]).max()) for r in range(K) for n in expected)
    print(f"largest difference from one machine after {STEPS} steps: {worst:.2e}")
    print("messages sent per rank:", [s.messages_sent for s in res.stats])
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% [markdown]
# ## Grader entry points (given: leave this cell as it is)
#
# The grader hands your code plain arrays, so these two adapters rebuild the dictionaries, call your
# functions and flatten what they return (in the order of `names`). Each rank process receives only
# its own shard of the batch: the rows of the other ranks are NaN in the X and Y your code sees.

# %%
def _as_dict(flat, names, shapes):
    out, offset = {}, 0
    for name, shape in zip(names, shapes):
        count = int(np.prod(shape))
        out[name] = flat[offset:offset + count].reshape(shape).copy()
        offset += count
    return out


def _as_flat(tensors, names):
    return np.concatenate([np.asarray(tensors[name]).ravel() for name in names])


def grader_bucketed_allreduce(comm, flat, names, shapes, bucket_bytes):
    return _as_flat(bucketed_allreduce(comm, _as_dict(flat, names, shapes), bucket_bytes), names)


def grader_ddp_train(comm, X_shard, Y_shard, B, flat, names, shapes, steps, lr, bucket_bytes, frozen):
    # The grader hands each rank its own shard only, as a cluster would: the other ranks' rows are NaN.
    rows = np.array_split(np.arange(B), comm.size)[comm.rank]
    X = np.full((B, X_shard.shape[1]), np.nan, dtype=X_shard.dtype)
    Y = np.full((B, Y_shard.shape[1]), np.nan, dtype=Y_shard.dtype)
    X[rows], Y[rows] = X_shard, Y_shard
    params = _as_dict(flat, names, shapes)
    return _as_flat(ddp_train(comm, X, Y, params, steps, lr, bucket_bytes, tuple(frozen)), names)


# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(bucketed_allreduce, ddp_train)
