# %% [markdown]
# # Lab 10: 1-bit sign compression with error feedback (EF-SignSGD)
#
# Chapter 10 sent the k largest entries of each gradient and showed that **error feedback** lets a
# biased compressor train as well as the dense all-reduce. Its research directions name the compressor
# that made the idea famous and that the course does not implement: **signSGD**, one bit per
# coordinate. Plain signSGD does not converge when the workers' data disagree; Karimireddy, Rebjock,
# Stich and Jaggi (ICML 2019, "Error Feedback Fixes SignSGD and other Gradient Compression Schemes")
# scale the signs and add error feedback, and it does. Here you build that compressor, its bit-packed
# wire format and its all-reduce, and check the property that makes error feedback work.
#
# **The compressor.** For a vector p of length d (float32 or float64),
#
# $$C(p) = \frac{\lVert p\rVert_1}{d}\,\mathrm{sign}(p),\qquad \mathrm{sign}(p_i) = +1 \text{ if } p_i \ge 0,
# \quad -1 \text{ if } p_i < 0.$$
#
# There is no third value: zero, and **negative zero** (`-0.0 >= 0` is true), are +1. A vector of length
# 0 has scale 0.
#
# **The wire format.** `sign_compress(p)` returns `(bits, scale)`:
#
# - `bits`: a uint8 array of exactly ceil(d/8) bytes; coordinate i is bit 7 - (i mod 8) of byte i // 8
#   (coordinate 0 in the most significant bit: `np.packbits`' default `bitorder="big"`), 1 for +,
#   0 for -, and the padding bits of the last byte are 0;
# - `scale`: a 1-element array of p's dtype holding ||p||_1 / d, computed in p's dtype.
#
# `sign_decompress(bits, scale, d)` returns C(p) (length d, the scale's dtype).
#
# **The property.** C is a *delta-approximate* compressor: for every p != 0,
#
# $$\lVert C(p) - p\rVert_2^2 = \Bigl(1 - \frac{\lVert p\rVert_1^2}{d\,\lVert p\rVert_2^2}\Bigr)\lVert p\rVert_2^2,$$
#
# an equality (expand the square: <sign(p), p> = ||p||_1), and the factor is below 1, so the compressor
# always removes part of the error. That is why the scale must be the **L1 norm over d**: an unscaled
# sign, or a scale of ||p||_2 / d or max |p_i|, breaks the identity. The grader checks it on your C(p).
#
# **The all-reduce with error feedback.** `ef_sign_allreduce(comm, grad, residual)` runs on every rank of
# K = comm.size. Rank r:
#
# 1. forms p_r = grad_r + e_r (error feedback: the scale is of p_r, not of the gradient);
# 2. compresses its own p_r: (bits_r, scale_r) = sign_compress(p_r);
# 3. exchanges them with every rank in an all-gather of **one uint8 frame per rank**: the ceil(d/8) bytes
#    of bits followed by the scale's bytes (`scale.view(np.uint8)`); `scaleoutai.collectives.all_gather`
#    may be used;
# 4. returns `(avg, new_residual)`: avg = (1/K) sum_q C(p_q), the same on every rank, in grad's dtype;
#    new_residual = p_r - C(p_r), what this rank's bits did not carry.
#
# **What the grader checks** (on its own transport: it counts every byte a rank sends):
#
# - `sign_compress`: the exact bytes on hand-built vectors (zeros, negative zero, ties, all equal,
#   d = 0, d = 1, d not a multiple of 8), float32 and float64; `sign_decompress(sign_compress(p))`
#   equals C(p); the delta identity above holds for your C(p);
# - `avg` on every rank and each rank's residual over several consecutive steps for K = 1, 2, 3, 5, 7,
#   d < K, float32 (rtol 1e-5) and float64 (rtol 1e-12), and on 2 real processes;
# - bytes: each rank sends at most steps x (K-1) x (ceil(d/8) + 8 + 16) bytes (one frame per hop, a
#   scale of at most 8 bytes, the 16 bytes of a message's header): an int8 or float per coordinate is
#   8 to 64 times too much;
# - training: 150 full-batch steps of least squares on 4 disagreeing shards reach a loss within 1.05x of
#   the least-squares optimum with error feedback, while the same compressor without feedback (residual
#   always zero) stays above 1.1x: a dense all-reduce disguised as compression does not stall, and fails.
#
# `scaleoutai.ml` (the course's top-k, QSGD and PowerSGD compressors) cannot be imported in the grader.

# %% tags=["parameters"]
K = 4  # smoke: 2
STEPS = 150  # smoke: 20

# %%
import numpy as np

from scaleoutai import cluster
from scaleoutai.collectives import all_gather


# %%
def sign_compress(p):
    """(bits, scale): ceil(d/8) uint8 bytes of signs (1 for p_i >= 0, big-endian bit order) and
    a 1-element array of p's dtype holding ||p||_1 / d (0 when d = 0)."""
    ### BEGIN SOLUTION
    p = np.asarray(p)
    if p.dtype not in (np.float32, np.float64) or p.ndim != 1:
        raise TypeError(f"sign_compress packs a float32 or float64 vector, not {p.dtype} {p.shape}")
    d = p.size
    total = np.abs(p).sum(dtype=p.dtype)
    scale = np.zeros(1, dtype=p.dtype)
    if d > 0:
        scale[0] = total / p.dtype.type(d)
    nonneg = np.greater_equal(p, 0)  # -0.0 >= 0 holds: both zeros are +
    padded = np.zeros(-(-d // 8) * 8, dtype=np.uint8)
    padded[:d] = nonneg
    weights = np.array([128, 64, 32, 16, 8, 4, 2, 1], dtype=np.uint16)
    bits = (padded.reshape(-1, 8) * weights).sum(axis=1).astype(np.uint8)
    return bits, scale
    ### END SOLUTION


# %%
def sign_decompress(bits, scale, d):
    """C(p): +scale where the bit is 1, -scale where it is 0, for the first d coordinates."""
    ### BEGIN SOLUTION
    bits = np.asarray(bits, dtype=np.uint8)
    if bits.size != -(-int(d) // 8):
        raise ValueError(f"{bits.size} bytes cannot hold {d} signs: expected ceil(d/8) = {-(-int(d) // 8)}")
    scale = np.asarray(scale)
    if scale.shape != (1,) or scale.dtype.kind != "f":
        raise ValueError(f"the scale is a 1-element float array, got {scale.dtype} of shape {scale.shape}")
    shifts = np.arange(7, -1, -1, dtype=np.uint8)
    plus = ((bits[:, None] >> shifts) & 1).reshape(-1)[:int(d)].astype(bool)
    s = scale[0]
    return np.where(plus, s, -s).astype(scale.dtype)
    ### END SOLUTION


# %%
def ef_sign_allreduce(comm, grad, residual):
    """(avg, new_residual): the mean over ranks of C(grad + residual), and what this rank kept back."""
    ### BEGIN SOLUTION
    grad, residual = np.asarray(grad), np.asarray(residual)
    if grad.ndim != 1 or grad.shape != residual.shape:
        raise ValueError(f"grad {grad.shape} and residual {residual.shape} must be flat and of one length")
    p = grad + residual
    d, nbytes = p.size, -(-p.size // 8)
    bits, scale = sign_compress(p)
    frame = np.concatenate([bits, scale.view(np.uint8)])  # one message per hop: signs, then the scale
    every = all_gather(comm, frame)
    if every.size != comm.size * frame.size:
        raise RuntimeError(f"got {every.size} bytes, not {comm.size} frames of {frame.size}: is d the same everywhere?")
    every = every.reshape(comm.size, frame.size)
    total = np.zeros(d, dtype=p.dtype)
    for q in range(comm.size):
        their_bits, their_scale = every[q, :nbytes], every[q, nbytes:].copy().view(p.dtype)
        total += sign_decompress(their_bits, their_scale, d)
    mine = sign_decompress(bits, scale, d)
    avg = (total / p.dtype.type(comm.size)).astype(grad.dtype, copy=False)
    return avg, (p - mine).astype(grad.dtype, copy=False)
    ### END SOLUTION


# %% [markdown]
# Training with it (given): rank r holds its shard of rows and scales its mean-squared-error gradient
# by K n_r / N, so that the plain mean over ranks is the full-batch gradient. With `feedback=False` the
# residual is thrown away every step: that is plain (scaled) signSGD.

# %%
def train_ef_sign(comm, X_shard, y_shard, N, w0, lr, steps, feedback=True):
    w, residual = w0.copy(), np.zeros_like(w0)
    for _ in range(int(steps)):
        g = 2.0 * X_shard.T @ (X_shard @ w - y_shard) * (comm.size / N)
        avg, residual = ef_sign_allreduce(comm, g, residual if feedback else np.zeros_like(w))
        w = w - lr * avg
    return w


# %% tags=["demo"]
rng = np.random.default_rng(10)
d, rows = 50, 50
parts = []
for r in range(K):
    Xr = rng.standard_normal((rows, d))
    parts.append((Xr, Xr @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)))
X, y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
best = np.mean((X @ np.linalg.lstsq(X, y, rcond=None)[0] - y) ** 2)


def worker(comm, feedback):
    Xr, yr = parts[comm.rank]
    return train_ef_sign(comm, Xr, yr, len(y), np.zeros(d), 0.02, STEPS, feedback)


try:
    probe = np.array([0.5, -3.0, 0.0, -0.0, 2.0, -1.5, 1.0, -0.25, 4.0])
    c = sign_decompress(*sign_compress(probe), probe.size)
    gap = np.sum((c - probe) ** 2) - (np.sum(probe ** 2) - np.abs(probe).sum() ** 2 / probe.size)
    print("C(probe) =", c.tolist(), f"(delta identity off by {gap:.1e})")
    for fb in (True, False):
        res = cluster.run(worker, K, args=(fb,))
        loss = np.mean((X @ res.values[0] - y) ** 2)
        print(f"feedback={fb}: loss after {STEPS} steps {loss / best:.3f}x the optimum; "
              f"bytes sent per rank {[s.bytes_sent for s in res.stats]}")
        if STEPS >= 150:
            assert (loss <= 1.05 * best) if fb else (loss > 1.1 * best)
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))


# %% [markdown]
# ## Grader entry points (given: leave this cell as it is)

# %%
def grader_bits(p):
    return np.asarray(sign_compress(p)[0])


def grader_compressor(p):
    return np.asarray(sign_decompress(*sign_compress(p), p.size))


def grader_ef_steps(comm, grads, residual):
    """Rows 0..steps-1: avg after each step; last row: this rank's residual after the last step."""
    rows = []
    for g in grads:
        avg, residual = ef_sign_allreduce(comm, g, residual)
        rows.append(np.asarray(avg))
    return np.stack(rows + [np.asarray(residual)])


def grader_train(comm, X_shard, y_shard, N, w0, lr, steps, feedback):
    return train_ef_sign(comm, X_shard, y_shard, int(N), w0, float(lr), int(steps), bool(feedback))


# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
