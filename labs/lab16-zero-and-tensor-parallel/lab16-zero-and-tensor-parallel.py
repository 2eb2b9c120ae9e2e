# %% [markdown]
# # Lab 16: ZeRO++ weights: sharded Adam with an int8, block-scaled all-gather
#
# Chapter 16 shards Adam's state over K ranks (ZeRO) and pays for it on the wire: ZeRO-3 and FSDP
# all-gather the parameters for every forward and backward pass, and its research directions ask how to
# keep that gain on slow links between nodes. ZeRO++ (Wang et al., 2023) answers with **qwZ**: the
# parameters travel as **int8 codes with one scale per small block**, a quarter to an eighth of the bytes
# of a full-precision gather, while every owner keeps an exact master copy of its own shard, so Adam
# itself loses nothing. The chapter's ZeRO gathers its parameters in full precision; this lab builds the
# quantized gather and the bookkeeping that keeps quantization out of the optimizer.
#
# ## What to build
#
# Rank r owns block r of `np.array_split(np.arange(Ψ), K)` of the flat parameter vector: n_r values
# (blocks differ by one when K does not divide Ψ, and are empty when K > Ψ). It keeps, between steps,
# only its **master shard** (the exact parameters of its block) and Adam's moments m and v for it:
# 3·n_r values, in the parameters' dtype.
#
# **Block quantization** (`quantize_blocks`, `dequantize_blocks`). Cut a shard into quantization blocks
# of `qblock` consecutive values (`x[0:qblock]`, `x[qblock:2*qblock]`, ...; the last block may be
# shorter). Block j gets the scale s_j = max|x in block j| / 127 (in x's dtype) and the codes
# q = round(x / s_j) as `np.int8`, all within [-127, 127]; a block of zeros has s_j = 0 and codes 0
# (no division by zero). Dequantizing gives q·s_j in the scale's dtype, and |q·s_j - x| <= s_j / 2.
# One scale per block, not per shard: a shard that mixes large and tiny parameters would lose the tiny
# ones to a single scale.
#
# **One step** (`qwz_adam_step`):
#
# 1. **reduce-scatter** the local gradients: rank r receives block r of their sum;
# 2. t <- t + 1, then Adam on the master shard:
#    m = β1 m + (1-β1) g,  v = β2 v + (1-β2) g²,  p -= lr (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε);
# 3. quantize the updated master shard and **all-gather the int8 codes and the scales** (two all-gathers,
#    or one of a packed int8 buffer), then dequantize every rank's shard with its own scales. Return the
#    full dequantized vector Ψ, in the parameters' dtype: the weights every rank uses for its next
#    forward pass, and the same on every rank, the owner's own block included.
#
# Never run Adam on the dequantized weights: the rounding error would enter the master copy step after
# step. Use `reduce_scatter` and `all_gather` from `scaleoutai.collectives` and, if you like,
# `adam_update` from `scaleoutai.nn`. In the grader `scaleoutai.parallel` (the chapter's ZeRO, DDP and
# tensor parallelism), `scaleoutai.serving` (int8 weight quantization) and `scaleoutai.ml`
# (compressed collectives) are **unimportable**; write the quantization yourself.
#
# **What the grader checks** (K = 1 to 7, more ranks than parameters, uneven shards, `qblock` that does
# not divide a shard, blocks of zeros, shards mixing parameters of size 10 and 0.001, float32 and
# float64, seeded random cases, on the simulator and on 2 real processes):
#
# - every rank's master shard after N steps equals single-process Adam on the summed gradients to
#   |got - expected| <= atol + rtol·|expected|, (rtol, atol) = (1e-9, 1e-9·(1 + max|expected|)) in float64
#   and (1e-4, 1e-4·(1 + max|expected|)) in float32;
# - every rank's returned weights equal the grader's own quantize-dequantize of those Adam parameters,
#   block by block (a value that sits on a rounding tie may go either way);
# - the floating-point arrays in `state` hold at most 3·⌈Ψ/K⌉ and at least 3·⌊Ψ/K⌋ values;
# - from the messages the grader records: after every step each owner sends its shard's codes as an
#   `int8` array; and each rank sends at most, per step, (K-1)·⌈Ψ/K⌉ values of the gradients'
#   dtype (the reduce-scatter), (K-1)·⌈Ψ/K⌉ bytes of codes and (K-1)·⌈⌈Ψ/K⌉/qblock⌉ scales, plus a
#   16-byte header for each of 3(K-1) messages. A full-precision all-gather sends 4 to 8 times the
#   bytes of the codes.

# %% tags=["parameters"]
K = 4  # smoke: 2
PSI = 1_000  # smoke: 50
STEPS = 10  # smoke: 3
QBLOCK = 32  # smoke: 8

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_gather, reduce_scatter
from scaleoutai.nn import adam_update


# %%
def quantize_blocks(x, qblock):
    """int8 codes of x and one scale max|block|/127 per block of qblock values (x's dtype)."""
    ### BEGIN SOLUTION
    if int(qblock) < 1:
        raise ValueError(f"qblock must be at least 1, got {qblock}")
    x = np.ravel(np.asarray(x))
    n_blocks = -(-x.size // qblock)
    scales = np.zeros(n_blocks, dtype=x.dtype)
    codes = np.zeros(x.size, dtype=np.int8)
    for j in range(n_blocks):
        part = x[j * qblock:(j + 1) * qblock]
        top = np.abs(part).max()
        if top == 0:
            continue  # a block of zeros: scale 0, codes 0
        scales[j] = top / x.dtype.type(127)
        q = np.rint(part / scales[j])
        codes[j * qblock:(j + 1) * qblock] = np.clip(q, -127, 127).astype(np.int8)
    return codes, scales
    ### END SOLUTION


# %%
def dequantize_blocks(codes, scales, qblock):
    """codes * the scale of their block, in the scales' dtype."""
    ### BEGIN SOLUTION
    codes, scales = np.asarray(codes), np.asarray(scales)
    per_value = np.repeat(scales, qblock)[:codes.size]
    return codes.astype(scales.dtype) * per_value
    ### END SOLUTION


# %%
def zero_init(comm, params_flat):
    """This rank's state: its exact master shard, Adam's m and v for it, t = 0 (and where it starts)."""
    ### BEGIN SOLUTION
    n, K, r = params_flat.size, comm.size, comm.rank
    sizes = [n // K + (j < n % K) for j in range(K)]
    lo = sum(sizes[:r])
    master = np.array(params_flat[lo:lo + sizes[r]], copy=True)
    return {"master": master, "m": np.zeros_like(master), "v": np.zeros_like(master), "t": 0, "lo": lo}
    ### END SOLUTION


# %%
def qwz_adam_step(comm, grad_flat, state, lr, qblock, betas=(0.9, 0.999), eps=1e-8):
    """Reduce-scatter, Adam on the master shard, int8 all-gather; returns the dequantized weights (Psi)."""
    ### BEGIN SOLUTION
    n, K = grad_flat.size, comm.size
    g_mine = reduce_scatter(comm, grad_flat)  # my block of the summed gradient
    state["t"] = t = state["t"] + 1
    b1, b2 = betas
    master = state["master"]
    state["m"][:] = b1 * state["m"] + (1 - b1) * g_mine
    state["v"][:] = b2 * state["v"] + (1 - b2) * np.square(g_mine)
    m_hat = state["m"] / (1 - b1 ** t)
    v_hat = state["v"] / (1 - b2 ** t)
    master -= (lr * m_hat / (np.sqrt(v_hat) + eps)).astype(master.dtype, copy=False)
    codes, scales = quantize_blocks(master, qblock)
    all_codes = all_gather(comm, codes)  # n int8 codes
    all_scales = all_gather(comm, scales)  # one scale per block of every shard
    sizes = [n // K + (j < n % K) for j in range(K)]
    n_blocks = [-(-size // qblock) for size in sizes]
    code_at = np.concatenate([[0], np.cumsum(sizes)])
    scale_at = np.concatenate([[0], np.cumsum(n_blocks)])
    weights = np.empty(n, dtype=master.dtype)
    for j in range(K):  # every rank's shard, dequantized with that rank's own scales
        lo, hi = code_at[j], code_at[j + 1]
        weights[lo:hi] = dequantize_blocks(all_codes[lo:hi], all_scales[scale_at[j]:scale_at[j + 1]], qblock)
    return weights
    ### END SOLUTION


# %% [markdown]
# Compare with one machine: the master shards against Adam on the summed gradients, the weights
# against the error bound s_j / 2, and the bytes against a full-precision all-gather.

# %% tags=["demo"]
rng = np.random.default_rng(16)
p0 = rng.standard_normal(PSI) * 10.0 ** rng.uniform(-3, 1, size=PSI)  # parameters of many sizes
local_grads = rng.standard_normal((STEPS, K, PSI))  # local_grads[s, r]: rank r's gradient at step s


def qwz_worker(comm):
    state = zero_init(comm, p0)
    weights = p0
    for s in range(STEPS):
        weights = qwz_adam_step(comm, local_grads[s, comm.rank], state, 0.01, QBLOCK)
    return weights, state["master"], state["lo"]


try:
    reference, m_ref, v_ref = p0.copy(), np.zeros(PSI), np.zeros(PSI)
    for s in range(STEPS):
        adam_update(reference, local_grads[s].sum(axis=0), m_ref, v_ref, s + 1, 0.01)
    res = cluster.run(qwz_worker, K, backend="sim")
    for r, (w, master, lo) in enumerate(res.values):
        assert np.allclose(master, reference[lo:lo + master.size], rtol=1e-9, atol=1e-9), f"rank {r}'s master"
        assert np.array_equal(w, res.values[0][0]), f"rank {r}'s weights differ from rank 0's"
    err = np.abs(res.values[0][0] - reference)
    half_step = np.concatenate([np.repeat(quantize_blocks(b, QBLOCK)[1], QBLOCK)[:b.size]
                                for b in np.array_split(reference, K)]) / 2
    print(f"master shards == Adam; weights: largest error {err.max():.2e}, at most "
          f"{(err / np.maximum(half_step, 1e-300)).max():.3f} of its block's bound s_j / 2")
    full = STEPS * 2 * (K - 1) * -(-PSI // K) * 8
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats], f"(full-precision ZeRO: about {full})")
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% [markdown]
# ## Grader entry point (given: leave this cell as it is)
#
# The grader hands your code plain arrays: `grads[s]` is this rank's local gradient at step s. It gets
# back the final weights, then your master shard, then one number: the count of floating-point values
# your `state` arrays hold.

# %%
def grader_qwz_adam(comm, params_flat, grads, lr, qblock):
    state = zero_init(comm, params_flat)
    weights = params_flat
    for g in grads:
        weights = qwz_adam_step(comm, g, state, lr, qblock)
    held = sum(a.size for a in state.values() if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    weights = np.asarray(weights)
    return np.concatenate([weights.ravel(), np.asarray(state["master"], weights.dtype).ravel(),
                           np.array([held], dtype=weights.dtype)])


# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
