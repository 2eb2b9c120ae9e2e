# %% [markdown]
# # Lab 16: ZeRO-sharded Adam equals Adam; a tensor-parallel MLP equals the dense one
#
# Chapter 16 splits what data parallelism replicates. Two of its tools, each in a few lines of NumPy
# on the course's simulated cluster, each checked against one machine.
#
# ## Part 1: ZeRO stage 2
#
# Adam keeps two moments m and v per parameter: with Ψ parameters, plain DDP holds 2Ψ optimizer values
# **on every rank**. ZeRO gives each rank one block of the flat parameter vector: rank r owns block r of
# `np.array_split(np.arange(Ψ), K)` and keeps the Adam moments for that block only, 2Ψ/K values
# (blocks differ by one element when K does not divide Ψ, and are empty when K > Ψ). One step of
# **stage 2** (gradients sharded as well):
#
# 1. **reduce-scatter** the local gradients: rank r receives block r of their sum (and never holds
#    the full summed gradient);
# 2. t <- t + 1, then Adam on the owned block:
#    m = β1 m + (1-β1) g,  v = β2 v + (1-β2) g²,  p -= lr (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε);
# 3. **all-gather** the updated blocks, so every rank holds the full new parameter vector.
#
# Use `reduce_scatter` and `all_gather` from `scaleoutai.collectives` (block r of `reduce_scatter`
# is block r of `np.array_split`) and, if you like, `adam_update` from `scaleoutai.nn`;
# not `scaleoutai.parallel.zero`. Write `zero_init(comm, params_flat)`, which returns this rank's state
# as a dict (the moments of its block and the step count), and
# `zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas, eps)`, which updates `state` in
# place and returns the new full parameter vector.
#
# Each step costs a rank at most 2(K-1)·⌈Ψ/K⌉ values sent: the same as one ring all-reduce, although
# stage 2 holds K times less optimizer state. (Stage 1 would all-reduce the gradients and all-gather the
# parameters: 1.5 times the traffic.)
#
# ## Part 2: the Megatron MLP
#
# The block's MLP is y = GELU(x W1 + b1) W2 + b2 with W1 of shape (d, d_ff) and W2 of shape (d_ff, d).
# Rank r holds columns `np.array_split(range(d_ff), K)[r]` of W1 and b1 (column parallel) and the same
# rows of W2 (row parallel); x and b2 are replicated. GELU acts element by element, so rank r computes
# GELU(x W1_r + b1_r) W2_r without communication, and **one all-reduce** of these T×d partial outputs
# (b2 added once, after the sum) gives y on every rank. A rank may hold no columns at all (K > d_ff):
# its partial output is zero. Use `gelu` from `scaleoutai.nn` and `ring_allreduce`, and
# return y in the dtype of x (check: `gelu` may hand float32 input back as float64).
#
# **What the grader checks** (K = 1 to 8, more ranks than elements or columns, tiny gradients, float32
# and float64, random cases, on the simulator and on 2 real processes):
#
# - ZeRO: after N steps every rank's parameters equal single-process Adam on the summed gradients to
#   |got - expected| <= atol + rtol·|expected|, (rtol, atol) = (1e-9, 1e-9·(1 + max|expected|)) in
#   float64 and (1e-4, 1e-4·(1 + max|expected|)) in float32; the floating-point arrays in `state` hold
#   at most 2·⌈Ψ/K⌉ and at least 2·⌊Ψ/K⌋ values; each rank sends at most N·2(K-1)·⌈Ψ/K⌉ values;
# - Megatron MLP: y equals the dense MLP on every rank to the same tolerances; each rank sends at most
#   2(K-1) messages and 2(K-1)·⌈T·d/K⌉ values (activations move, weights stay).
#
# Byte bounds allow a 16-byte header (the message's dtype and shape) for each of the messages they
# allow: N·2(K-1) for ZeRO, 2(K-1) for the MLP, each a 1-D array as the collectives send them.

# %% tags=["parameters"]
K = 4  # smoke: 2
PSI = 1_000  # smoke: 50
STEPS = 10  # smoke: 3
T, D, D_FF = 8, 16, 64  # smoke: 4, 8, 16

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_gather, reduce_scatter, ring_allreduce
from scaleoutai.nn import adam_update, gelu


# %%
def zero_init(comm, params_flat):
    """This rank's ZeRO state: Adam moments m, v for its block of np.array_split, and t = 0."""
    ### BEGIN SOLUTION
    owned = np.array_split(np.arange(params_flat.size), comm.size)[comm.rank]
    return {"m": np.zeros(owned.size, params_flat.dtype), "v": np.zeros(owned.size, params_flat.dtype),
            "t": 0, "lo": int(owned[0]) if owned.size else 0}
    ### END SOLUTION


# %%
def zero2_adam_step(comm, params_flat, grad_flat, state, lr, betas=(0.9, 0.999), eps=1e-8):
    """Reduce-scatter the gradients, Adam on the owned block, all-gather the parameters."""
    ### BEGIN SOLUTION
    g_block = reduce_scatter(comm, grad_flat)
    state["t"] += 1
    lo = state["lo"]
    p_block = params_flat[lo:lo + g_block.size].copy()
    adam_update(p_block, g_block, state["m"], state["v"], state["t"], lr, betas, eps)
    return all_gather(comm, p_block)
    ### END SOLUTION


# %%
def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    """y = all-reduce_r(GELU(x W1_r + b1_r) W2_r) + b2 on every rank: exactly one all-reduce."""
    ### BEGIN SOLUTION
    partial = (gelu(x @ W1_shard + b1_shard) @ W2_shard).astype(x.dtype, copy=False)
    return ring_allreduce(comm, partial) + b2
    ### END SOLUTION


# %% [markdown]
# Compare with one machine: Adam on the summed gradients, and the dense MLP.

# %%
rng = np.random.default_rng(16)
p0 = rng.standard_normal(PSI)
local_grads = rng.standard_normal((STEPS, K, PSI))  # local_grads[s, r]: rank r's gradient at step s


def zero_worker(comm):
    state = zero_init(comm, p0)
    params = p0
    for s in range(STEPS):
        params = zero2_adam_step(comm, params, local_grads[s, comm.rank], state, 0.01)
    return params, sum(a.size for a in state.values() if isinstance(a, np.ndarray))


x = rng.standard_normal((T, D))
W1, b1 = rng.standard_normal((D, D_FF)) / np.sqrt(D), 0.1 * rng.standard_normal(D_FF)
W2, b2 = rng.standard_normal((D_FF, D)) / np.sqrt(D_FF), 0.1 * rng.standard_normal(D)
columns = np.array_split(np.arange(D_FF), K)


def tp_worker(comm):
    c = columns[comm.rank]
    return megatron_mlp_forward(comm, x, W1[:, c], b1[c], W2[c], b2)


try:
    reference, m_ref, v_ref = p0.copy(), np.zeros(PSI), np.zeros(PSI)
    for s in range(STEPS):
        adam_update(reference, local_grads[s].sum(axis=0), m_ref, v_ref, s + 1, 0.01)
    res = cluster.run(zero_worker, K, backend="sim")
    print("ZeRO-2 vs Adam, largest difference:", max(float(np.abs(p - reference).max()) for p, _ in res.values))
    print(f"optimizer values held per rank: {[held for _, held in res.values]} (plain Adam: {2 * PSI})")
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats])
    dense = gelu(x @ W1 + b1) @ W2 + b2
    res = cluster.run(tp_worker, K, backend="sim")
    print("Megatron MLP vs dense, largest difference:", max(float(np.abs(y - dense).max()) for y in res.values))
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% [markdown]
# ## Grader entry point (given: leave this cell as it is)
#
# The grader hands your code plain arrays: `grads[s]` is this rank's local gradient at step s. It gets
# back the final parameters followed by one number, the count of floating-point values your `state`
# arrays hold.

# %%
def grader_zero_adam(comm, params_flat, grads, lr):
    state = zero_init(comm, params_flat)
    params = params_flat
    for g in grads:
        params = zero2_adam_step(comm, params, g, state, lr)
    held = sum(a.size for a in state.values() if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    params = np.asarray(params)
    return np.concatenate([params, np.array([held], dtype=params.dtype)])


# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(zero_init, zero2_adam_step, megatron_mlp_forward)
