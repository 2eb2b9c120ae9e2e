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
# # Chapter 15. Data parallelism
#
# Data parallelism is the first thing anyone does with a second GPU, and for good reason: every worker
# keeps a full copy of the model, takes a slice of the batch, and the workers agree on one gradient
# with a single all-reduce per step. Done right, the $K$ replicas follow *exactly* the trajectory a
# single device would follow on the global batch. This chapter builds distributed data parallel (DDP)
# from scratch on the simulated cluster, shows why production systems bucket their gradients, checks
# gradient accumulation, frozen and tied parameters, looks at mixed precision (the per-node enabler
# that makes each replica cheap enough to scale), and then trains the same network with
# `torch.nn.parallel.DistributedDataParallel` on real processes and demands the same parameters.
#
# **Prerequisites:** Chapter 1 (Why scale out: the gradient decomposes over shards), Chapter 3
# (Performance models: $S_p$, $E_p$, the $\alpha$-$\beta$ model) and Chapter 4 (Communication
# primitives: the ring all-reduce); Chapter 5 for how the timings are taken. Background:
# backpropagation through an MLP, SGD and Adam, and floating-point formats (float32, bfloat16).

# %% tags=["parameters"]
SIZES = [32, 64, 64, 16]  # smoke: [16, 32, 8]
B = 120  # smoke: 30
STEPS = 50  # smoke: 5
LR = 0.05
KS = [1, 2, 3, 5, 8, 12]  # smoke: [1, 2, 3, 5, 8]
ALPHA = 1e-5
BETA = 1e-9
BUCKET_SIZES = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]  # smoke: [64, 512, 4096, 32768, 262144]
COMM_SIZES = [256, 512, 512, 512, 256]  # smoke: [64, 128, 128, 64]
DDP_STEPS = 20  # smoke: 4
TIME_SIZES = [1024, 1024, 1024, 1024]  # smoke: [512, 512, 512]
TIME_B = 1024  # smoke: 512
TIME_REPEATS = 5  # smoke: 2
SEED = 0

# %% [markdown]
# `SIZES` are the layer widths of the multilayer perceptron (MLP) used for the correctness checks, `B`
# the global batch, `STEPS` the training steps after which parameters are compared, `KS` the world sizes
# (a world size larger than the batch, where some workers get no data at all, is checked separately).
# `ALPHA` and `BETA` are the simulated network's latency (s per message) and inverse bandwidth
# (s per byte). `COMM_SIZES` is a deeper network whose gradient traffic we count; `TIME_SIZES` and
# `TIME_B` define the compute-bound MLP timed on real processes in the evaluation.
#
# ## 1. Motivation: which ceiling binds
#
# Training a network is dominated by three matrix products per layer (forward, and two in backward),
# about $6\,B\,\Psi$ floating-point operations per step for $\Psi$ parameters and a batch of $B$
# samples. When the model fits on one device but a step on the batch you need takes too long, the
# binding ceiling is **compute**. Data parallelism cuts the compute per worker by $K$: worker $k$ takes
# a local batch of $b$ samples and the global batch is
#
# $$B = K \cdot b .$$
#
# What it does *not* cut is memory per worker (every replica holds the whole model, its gradients and
# its optimizer state: Chapter 16 removes that) nor the gradient traffic: every step each worker must
# contribute $\Psi$ gradient values to an all-reduce, whatever $K$ is.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, nn, perf
from scaleoutai.collectives import ring_allreduce
from scaleoutai.parallel import ddp

psi_demo, flop_rate = 1.0e9, 100e12  # a 1 B-parameter model on a device doing 100 TFLOP/s
for b_glob in (256, 4096):
    t_step = 6 * b_glob * 2048 * psi_demo / flop_rate  # 2048 tokens per sample
    print(f"B = {b_glob:>5} sequences of 2048 tokens: {t_step:8.1f} s per step on one device, "
          f"{t_step / 64:6.2f} s on K = 64 (b = {b_glob // 64})")

# %% [markdown]
# ## 2. Core concepts
#
# **Exact gradient decomposition.** With a mean loss $L = \frac{1}{B}\sum_{i=1}^{B} \ell_i$ and worker
# $k$ holding the index set $S_k$ of $n_k$ samples,
#
# $$\nabla L = \sum_{k=1}^{K} \frac{n_k}{B}\, \nabla L_k, \qquad L_k = \frac{1}{n_k}\sum_{i\in S_k}\ell_i .$$
#
# Each worker scales its local mean gradient by $n_k / B$ and the sum over workers is the full-batch
# gradient, for uneven shards too and for empty ones ($n_k = 0$). `ddp.local_gradient` applies exactly
# this weight; with equal shards it reduces to the familiar "average the gradients" of DDP.
#
# **Replicas stay identical.** All workers start from the same parameters, apply the same summed
# gradient with the same deterministic optimizer, so after every step they still agree. No parameters
# are ever sent, only gradients.
#
# **Gradient accumulation** splits each worker's shard into `accum` micro-batches and sums their
# weighted gradients before communicating: the same step with $1/\text{accum}$ of the activation memory,
# at the price of serial micro-batches. So $B = K \cdot b \cdot \text{accum}$ in general.
#
# Below, the decomposition is checked against the single-device gradient for every world size in `KS`.

# %%
rng = np.random.default_rng(SEED)
params0 = nn.mlp_init(SIZES, seed=SEED)
X = rng.standard_normal((B, SIZES[0]))
Y = rng.standard_normal((B, SIZES[-1]))
_, g_ref = ddp.mlp_mse(params0, X, Y)
for K in KS + [B + 7]:
    parts = [ddp.local_gradient(params0, x, y, B) for x, y in zip(np.array_split(X, K), np.array_split(Y, K))]
    g_sum = {k: sum(p[1][k] for p in parts) for k in g_ref}
    shard_sizes = [len(x) for x in np.array_split(X, K)]
    for k in g_ref:
        np.testing.assert_allclose(g_sum[k], g_ref[k], rtol=1e-10, atol=1e-12)
    print(f"K = {K:>3}: shard sizes {min(shard_sizes)}..{max(shard_sizes)}, "
          f"sum of weighted local gradients == full-batch gradient (rtol 1e-10)")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# One DDP step on worker $k$: forward and backward on the local shard, then an **all-reduce** (sum) of
# the gradient, then the same optimizer step everywhere. The ring all-reduce of Chapter 4 sends each
# worker $2\frac{K-1}{K}n$ bytes for an $n$-byte vector in $2(K-1)$ messages: bandwidth-optimal, but it
# pays $2(K-1)\alpha$ of latency *per call*.
#
# That is why the way gradients are grouped matters:
#
# * **naive**: one all-reduce per parameter tensor. A network with $T$ tensors pays $T \cdot 2(K-1)$
#   latencies per step: deadly for models with hundreds of small tensors (biases, norms).
# * **bucketed**: tensors are packed into buckets of about `bucket_bytes` and each bucket is one
#   all-reduce. Bytes are unchanged, messages fall by the number of tensors per bucket. Buckets are
#   filled in *reverse* registration order, because that is the order backward produces gradients:
#   bucket 0 (the last layers) is complete while backward is still busy with the first layers, and a
#   real DDP starts its all-reduce right away, **overlapping** communication with computation.
#
# The simulator counts every message and byte. Here are both schemes on the deeper `COMM_SIZES`
# network at $K = 4$, one step each:

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)
pc = nn.mlp_init(COMM_SIZES, seed=1, dtype=np.float32)
Xc = rng.standard_normal((64, COMM_SIZES[0])).astype(np.float32)
Yc = rng.standard_normal((64, COMM_SIZES[-1])).astype(np.float32)
n_tensors, grad_bytes = len(pc), sum(v.nbytes for v in pc.values())
Kc = 4


def one_step(comm, bucket_bytes):
    return ddp.train_ddp(comm, [(Xc, Yc)], pc, 1, LR, bucket_bytes=bucket_bytes)[0]


def comm_profile(bucket_bytes):
    res = cluster.run(one_step, Kc, args=(bucket_bytes,), network=net, timeout=60)
    for v in res.values[1:]:  # replicas identical after the step
        assert all(np.array_equal(v[k], res.values[0][k]) for k in v)
    return res


naive = comm_profile(None)
assert all(s.messages_sent == n_tensors * 2 * (Kc - 1) for s in naive.stats)
assert sum(s.bytes_sent for s in naive.stats) == 2 * (Kc - 1) * grad_bytes  # ring: each step moves n bytes in all
profile = {}
for bb in BUCKET_SIZES:
    r = comm_profile(bb)
    n_buckets = len(ddp.make_buckets(pc, bb))
    assert all(s.messages_sent == n_buckets * 2 * (Kc - 1) for s in r.stats)
    assert sum(s.bytes_sent for s in r.stats) == sum(s.bytes_sent for s in naive.stats)
    profile[bb] = (n_buckets, r.stats[0].messages_sent, r.stats[0].bytes_sent, r.sim_time)
print(f"{n_tensors} tensors, {grad_bytes} gradient bytes, K = {Kc}")
print(f"{'scheme':>22} {'all-reduces':>11} {'msgs/rank':>9} {'bytes/rank':>10} {'sim time ms':>11}")
print(f"{'naive (per tensor)':>22} {n_tensors:>11} {naive.stats[0].messages_sent:>9} "
      f"{naive.stats[0].bytes_sent:>10} {naive.sim_time * 1e3:>11.3f}")
for bb, (nb, m, by, t) in profile.items():
    print(f"{'bucket ' + str(bb) + ' B':>22} {nb:>11} {m:>9} {by:>10} {t * 1e3:>11.3f}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
bbs = list(profile)
ax1.semilogx(bbs, [profile[b][1] for b in bbs], "o-", label="bucketed")
ax1.axhline(naive.stats[0].messages_sent, color="tab:red", ls="--", label="naive (one all-reduce per tensor)")
ax1.set(xlabel="bucket size (bytes)", ylabel="messages sent per rank per step",
        title=f"{n_tensors} gradient tensors, K = {Kc}")
ax1.legend()
ax2.semilogx(bbs, [profile[b][3] * 1e3 for b in bbs], "o-", label="bucketed (simulated)")
ax2.axhline(naive.sim_time * 1e3, color="tab:red", ls="--", label="naive (simulated)")
ring_once = perf.collective_time("ring_allreduce", grad_bytes, Kc, ALPHA, BETA)
ax2.axhline(ring_once * 1e3, color="gray", ls=":", label="one ring all-reduce of everything (model)")
ax2.set(xlabel="bucket size (bytes)", ylabel="communication time per step (ms)",
        title=rf"$\alpha$ = {ALPHA:g} s, $\beta$ = {BETA:g} s/B")
ax2.legend(fontsize="small")
fig.tight_layout()

# %% [markdown]
# Bytes per rank are the same for every scheme; only the number of messages, and with it the latency
# term, changes. As the bucket grows the time falls to that of one all-reduce of the whole gradient.
# Why not always one giant bucket? Because of **overlap**: the all-reduce of a bucket can only start
# once its last gradient exists. With one bucket nothing overlaps and the step costs
# $T_\text{bwd} + T_\text{comm}$; with many buckets the step costs about
# $\max(T_\text{bwd}, T_\text{comm}) + T_\text{last bucket}$. PyTorch's default bucket is 25 MB,
# large enough to amortise $\alpha$ and small enough to overlap. A back-of-envelope for a 1 B-parameter
# fp16 gradient on 64 workers on a 100 Gb/s network:

# %%
g_bytes, a_dc, b_dc, K_dc = 2e9, 10e-6, 1 / 12.5e9, 64
t_bwd = 0.8  # seconds of backward per step, say
for bucket in (1e6, 25e6, 2e9):
    n_b = int(np.ceil(g_bytes / bucket))
    t_bucket = perf.collective_time("ring_allreduce", bucket, K_dc, a_dc, b_dc)
    t_comm = n_b * t_bucket
    overlapped = max(t_bwd, t_comm) + t_bucket if n_b > 1 else t_bwd + t_comm
    print(f"bucket {bucket / 1e6:7.0f} MB: {n_b:>5} all-reduces, comm {t_comm:5.2f} s, "
          f"no overlap {t_bwd + t_comm:5.2f} s, overlapped step ~{overlapped:5.2f} s")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `ddp.train_ddp(comm, data, params0, steps, lr, bucket_bytes=None | int, accum=1, optimizer=...)` is
# the whole algorithm: `local_gradient` on this rank's `np.array_split` shard, `combine_tied`, then
# `naive_ddp_step` or `bucketed_ddp_step` (ring all-reduce per tensor or per bucket), then SGD or Adam.
# `ddp.reference_train` is the single-device reference on the full batch. The claim to check: after
# `STEPS` steps every replica's parameters equal the single-device parameters. Tolerance: relative and
# absolute $10^{-9}$ in float64 (the sums are taken in a different order, so equality is up to rounding
# that grows slowly with the number of steps), and $10^{-4}$ in float32.
#
# Read the two pieces that make it DDP. `local_gradient` weights this rank's shard by its share of the
# global batch, so the all-reduced *sum* is the full-batch gradient even when $B$ does not divide by
# $K$. `make_buckets` packs gradients in reverse order (the order the backward pass produces them) into
# buckets, closing one as soon as it holds at least `bucket_bytes`, and `bucketed_ddp_step` flattens
# each bucket into one buffer so that one ring all-reduce moves it, then cuts the result back into
# tensors.

# %%
from scaleoutai.notebooks import show

show(ddp.local_gradient, ddp.make_buckets, ddp.bucketed_ddp_step)

# %%
data = [(rng.standard_normal((B, SIZES[0])), rng.standard_normal((B, SIZES[-1]))) for _ in range(3)]
TOL = {np.float64: dict(rtol=1e-9, atol=1e-9), np.float32: dict(rtol=1e-4, atol=1e-4)}


def assert_params_close(got, want, dtype=np.float64):
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], **TOL[dtype], err_msg=k)


checked = 0
for optimizer in ("sgd", "adam"):
    lr = LR if optimizer == "sgd" else 1e-2
    ref, ref_losses = ddp.reference_train(data, params0, STEPS, lr, optimizer=optimizer)
    for K in KS:
        for bucket in (None, 2048):
            res = cluster.run(ddp.train_ddp, K, args=(data, params0, STEPS, lr),
                              kwargs=dict(bucket_bytes=bucket, optimizer=optimizer), timeout=120)
            for p, losses in res.values:
                assert_params_close(p, ref)
            np.testing.assert_allclose(np.sum([v[1] for v in res.values], axis=0), ref_losses, rtol=1e-9)
            checked += 1
print(f"{checked} DDP runs (sgd/adam x K in {KS} x naive/bucketed): every replica == single device "
      f"after {STEPS} steps (float64, rtol = atol = 1e-9); summed loss shares == full-batch loss")

data32 = [(x.astype(np.float32), y.astype(np.float32)) for x, y in data]
p32 = nn.mlp_init(SIZES, seed=SEED, dtype=np.float32)
ref32, _ = ddp.reference_train(data32, p32, STEPS, LR)
res = cluster.run(ddp.train_ddp, 3, args=(data32, p32, STEPS, LR), kwargs=dict(bucket_bytes=1024))
assert_params_close(res.values[0][0], ref32, np.float32)
assert res.values[0][0]["W0"].dtype == np.float32
print("float32, K = 3, bucketed: == single device within 1e-4")

tiny = [(x[:5], y[:5]) for x, y in data]  # K = 8 workers, B = 5 samples: three workers hold nothing
ref_tiny, _ = ddp.reference_train(tiny, params0, STEPS, LR)
res = cluster.run(ddp.train_ddp, 8, args=(tiny, params0, STEPS, LR), kwargs=dict(bucket_bytes=2048))
for p, _ in res.values:
    assert_params_close(p, ref_tiny)
print("K = 8 > B = 5 (three empty shards): every replica == single device")

# %% [markdown]
# ### Gradient accumulation
#
# Same global batch, same step, fewer samples in memory at once. With $K = 2$ workers and `accum = 4`
# micro-batches, each worker holds $b/4$ samples at a time; the parameters must still match the
# single device, including when the micro-batches are uneven.

# %%
for K, accum in ((1, 4), (2, 4), (3, 5)):
    res = cluster.run(ddp.train_ddp, K, args=(data, params0, STEPS, LR), kwargs=dict(bucket_bytes=4096, accum=accum))
    ref, _ = ddp.reference_train(data, params0, STEPS, LR)
    for p, _ in res.values:
        assert_params_close(p, ref)
    b_local = [len(x) for x in np.array_split(data[0][0], K)]
    micro = [len(m) for m in np.array_split(np.arange(b_local[0]), accum)]
    print(f"K = {K}, accum = {accum}: micro-batches of {micro} samples on rank 0, B = {B}: "
          f"parameters == single device")

# %% [markdown]
# ### Frozen parameters and tied weights
#
# Fine-tuning often **freezes** part of the network: frozen tensors get no gradient all-reduce and no
# update. Language models **tie** weights (the input embedding and the output projection are one
# matrix): two names, one array. The gradient of a tied array is the sum of the gradients of its uses;
# DDP must communicate it once, not once per name. Below `W1` is literally the same array as `W0`
# (both square), and in a second run `W0`/`b0` are frozen. We count the tensors communicated and
# compare with the single-device reference.

# %%
sq = nn.mlp_init([SIZES[1]] * 4, seed=3)
sq["W1"] = sq["W0"]  # tie: one array under two names
Xs = [(rng.standard_normal((B, SIZES[1])), rng.standard_normal((B, SIZES[1])))]
for frozen in ((), ("W2", "b2")):
    groups = ddp.param_groups(sq, frozen)
    ref, _ = ddp.reference_train(Xs, sq, STEPS, 0.01, frozen=frozen)
    assert ref["W1"] is ref["W0"]  # the tie survives training
    res = cluster.run(ddp.train_ddp, 3, args=(Xs, sq, STEPS, 0.01), kwargs=dict(frozen=frozen), network=net)
    p = res.values[0][0]
    assert p["W1"] is p["W0"]
    assert_params_close(p, ref)
    for k in frozen:
        np.testing.assert_array_equal(p[k], sq[k])
    assert res.stats[0].messages_sent == STEPS * len(groups) * 2 * (3 - 1)
    print(f"frozen={list(frozen)}: {len(sq)} names, {len(groups)} tensors all-reduced per step "
          f"(W0/W1 once); parameters == single device")

# %% [markdown]
# ### Mixed precision: the per-node enabler
#
# Scaling out multiplies whatever one replica does, so first make each replica cheap. Modern
# accelerators run fp16/bf16 matrix products several times faster than fp32 and the 2-byte gradients
# halve the all-reduce bytes. Two traps make naive half precision fail, and both come from its
# 10-bit (fp16) or 7-bit (bf16) mantissa:
#
# 1. **Accumulating many small numbers** in fp16 stalls: once the running sum $s$ is large enough that
#    half its unit in the last place exceeds the addend, $s + x$ rounds back to $s$.
# 2. **Small updates vanish**: $w - \eta g$ rounds to $w$ when $\eta g < \text{ulp}(w)/2$, so a model
#    stored in fp16 stops learning long before its fp32 twin.
#
# The cure is the mixed-precision recipe: keep an fp32 **master** copy of the weights (and fp32
# optimizer state and accumulators), compute forward and backward in 16-bit on a cast copy. Memory per
# parameter with Adam: 2 (fp16 weights) + 2 (fp16 gradient) + 4 (master) + 4 + 4 (Adam m, v) = 16 bytes,
# the figure Chapter 16 shards.

# %%
x_small = np.full(10_000, 1e-4)
s16 = np.cumsum(x_small.astype(np.float16), dtype=np.float16)[-1]  # sequential fp16 accumulator
s32 = np.cumsum(x_small.astype(np.float16), dtype=np.float32)[-1]  # same fp16 inputs, fp32 accumulator
print(f"sum of 10,000 x 1e-4 (exact 1.0): fp16 accumulator {float(s16):.4f}, fp32 accumulator {float(s32):.4f}")
print(f"ulp(0.25) in fp16 = {float(np.spacing(np.float16(0.25))):.3g}: above 2 x 1e-4, so the sum stalls near 0.25")
assert abs(float(s16) - 1.0) > 0.5 and abs(float(s32) - 1.0) < 1e-3
w16 = np.float16(1.0)
print(f"fp16 weight 1.0 minus update 1e-4 = {float(w16 - np.float16(1e-4))} (update lost), "
      f"fp32: {float(np.float32(1.0) - np.float32(1e-4)):.6f}")
assert w16 - np.float16(1e-4) == w16


# %%
def train_precision(mode, steps, lr=2e-3):
    """'fp64' reference; 'fp16' weights stored and updated in fp16; 'mixed' fp16 compute + fp32 master."""
    master = {k: v.astype(np.float64 if mode == "fp64" else np.float32) for k, v in params0.items()}
    gap = []
    ref_p = {k: v.copy() for k, v in params0.items()}
    for s in range(steps):
        x, y = data[s % len(data)]
        _, g_ref64 = ddp.mlp_mse(ref_p, x, y)
        nn.sgd_step(ref_p, g_ref64, lr)
        if mode == "fp64":
            work, xs_, ys_ = master, x, y
        else:
            work = {k: v.astype(np.float16) for k, v in master.items()} if mode == "mixed" else master
            xs_, ys_ = x.astype(np.float16), y.astype(np.float16)
        _, g = ddp.mlp_mse(work, xs_, ys_)
        if mode == "fp16":
            for k in master:
                master[k] = (master[k].astype(np.float16) - np.float16(lr) * g[k].astype(np.float16))
        else:
            nn.sgd_step(master, {k: v.astype(master[k].dtype) for k, v in g.items()}, lr)
        gap.append(max(float(np.abs(master[k].astype(np.float64) - ref_p[k]).max()) for k in master))
    return gap


PREC_STEPS = max(STEPS, 30)
gaps = {mode: train_precision(mode, PREC_STEPS) for mode in ("fp16", "mixed")}
fig, ax = plt.subplots(figsize=(7, 4))
for mode, g in gaps.items():
    ax.semilogy(range(1, PREC_STEPS + 1), g, label={"fp16": "fp16 weights, fp16 update",
                                                   "mixed": "fp16 compute, fp32 master"}[mode])
ax.set(xlabel="step", ylabel="max |w - w_fp64|", title="distance from the float64 trajectory (SGD, lr 2e-3)")
ax.legend()
print(f"after {PREC_STEPS} steps: pure fp16 is {gaps['fp16'][-1]:.2e} from fp64, mixed {gaps['mixed'][-1]:.2e}")
assert gaps["mixed"][-1] < gaps["fp16"][-1]

# %% [markdown]
# Both runs compute the gradient in fp16, so neither tracks float64 exactly; but the pure-fp16 model
# drifts further because its updates are rounded away. With bf16 (8-bit exponent, like fp32) the
# overflow problems of fp16 disappear and loss scaling is unnecessary, but the mantissa is even
# shorter, so the fp32 master copy is just as essential.
#
# ## 5. The same task with a production library: `torch.nn.parallel.DistributedDataParallel`
#
# PyTorch's DDP does what `train_ddp` does, in C++: at construction it broadcasts rank 0's parameters
# and checks that all ranks registered the same shapes; it registers an autograd hook on every
# parameter; when the last gradient of a bucket (default 25 MB, reverse order) is ready, it launches an
# asynchronous all-reduce and divides by $K$; `optimizer.step()` then runs locally.
#
# The worker below runs on `2` real processes (gloo). It builds a `torch.nn.Sequential` with the *same
# initial weights* as our NumPy MLP (a torch `Linear` stores $W^\top$), trains it with DDP on its shard,
# trains the from-scratch `train_ddp` over the same processes, and on rank 0 trains plain single-process
# torch on the full batch. All in float64, SGD, `DDP_STEPS` steps. The same worker then times the
# compute-bound MLP for the evaluation section (one BLAS thread per process).

# %%
def production_worker(comm, params0, data, steps, lr, time_params, time_data, repeats):
    import time

    import numpy as np
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from scaleoutai.parallel import ddp

    def torch_mlp(p):
        n = sum(k.startswith("W") for k in p)
        layers = []
        for i in range(n):
            lin = nn.Linear(*p[f"W{i}"].shape).double()
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(p[f"W{i}"].T.copy()))
                lin.bias.copy_(torch.from_numpy(p[f"b{i}"]))
            layers += [lin] + ([nn.ReLU()] if i < n - 1 else [])
        return nn.Sequential(*layers)

    def as_params(model):
        lins = [m for m in model.modules() if isinstance(m, nn.Linear)]
        out = {}
        for i, lin in enumerate(lins):
            out[f"W{i}"] = lin.weight.detach().numpy().T.copy()
            out[f"b{i}"] = lin.bias.detach().numpy().copy()
        return out

    def train_torch(model, shard):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        for s in range(steps):
            X, Y = data[s % len(data)]
            x, y = (torch.from_numpy(np.array_split(a, comm.size)[comm.rank] if shard else a) for a in (X, Y))
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return as_params(model.module if shard else model)

    out = {"torch_ddp": train_torch(DDP(torch_mlp(params0)), shard=True),
           "scratch": ddp.train_ddp(comm, data, params0, steps, lr, bucket_bytes=1 << 14)[0]}
    if comm.rank == 0:
        out["torch_single"] = train_torch(torch_mlp(params0), shard=False)

    def ddp_steps():
        comm.barrier()
        ddp.train_ddp(comm, time_data, time_params, 1, lr, bucket_bytes=1 << 22)
        comm.barrier()

    from scaleoutai import perf
    out["t2"] = perf.measure(ddp_steps, warmup=1, repeats=repeats).median
    out["threads"] = torch.get_num_threads()
    return out


torch_data = [(x, y) for x, y in data]  # B is divisible by 2, so DDP's 1/K average == n_k / B weights
assert B % 2 == 0
tp = nn.mlp_init(TIME_SIZES, seed=5, dtype=np.float32)
tX = rng.standard_normal((TIME_B, TIME_SIZES[0])).astype(np.float32)
tY = rng.standard_normal((TIME_B, TIME_SIZES[-1])).astype(np.float32)
t0 = time.perf_counter()
prod = cluster.run(production_worker, 2, backend="process",
                   args=(params0, torch_data, DDP_STEPS, LR, tp, [(tX, tY)], TIME_REPEATS), timeout=300, quiet=True)
print(f"process run (2 ranks, torch DDP + from-scratch + timing): {time.perf_counter() - t0:.1f} s wall")
ref, _ = ddp.reference_train(torch_data, params0, DDP_STEPS, LR)
for r, v in enumerate(prod.values):
    for k in ref:
        np.testing.assert_allclose(v["torch_ddp"][k], v["scratch"][k], rtol=1e-10, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(v["torch_ddp"][k], ref[k], rtol=1e-10, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(prod.values[0]["torch_single"][k], v["torch_ddp"][k], rtol=1e-10, atol=1e-12)
print(f"after {DDP_STEPS} SGD steps (float64): torch DDP == from-scratch train_ddp == torch single process "
      f"== NumPy reference_train, on both ranks (rtol 1e-10, atol 1e-12)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# Synchronous data parallelism is only as reliable and as fast as its worst worker.
#
# **A crashed worker stalls everyone.** Every all-reduce needs every rank. Below rank 1 dies at its
# sixth message, in the middle of the first ring: its neighbour waits for a message that will never
# come. The simulator reports the crash instead of hanging; a real job hangs until the collective
# timeout (`timeout=` in `init_process_group`, 10 to 30 minutes by default) and then every rank fails.
# The fix is restart from a checkpoint on a new set of workers (Chapter 18).

# %%
try:
    cluster.run(ddp.train_ddp, 3, args=(data, params0, STEPS, LR), kwargs=dict(bucket_bytes=4096),
                faults=cluster.Faults(crash={1: 5}), timeout=30)
    raise AssertionError("the run should have failed")
except cluster.RankError as exc:
    print("crash at rank 1 ->", str(exc).splitlines()[0])


# %% [markdown]
# **A straggler sets the pace.** A step ends when the slowest worker's gradient arrives. With a
# simulated compute time per step and rank 1 three times slower, every rank's step takes three times
# as long: synchronous DDP pays the maximum, not the mean (Chapter 3's straggler model).

# %%
def timed_steps(comm, steps, t_compute):
    g = {"w": np.ones(1024, np.float32)}
    for _ in range(steps):
        comm.compute(t_compute)
        ddp.bucketed_ddp_step(comm, g, 1 << 20)
    return comm.clock


for slow in ({}, {1: 3.0}):
    r = cluster.run(timed_steps, 4, args=(10, 0.01), network=net, faults=cluster.Faults(slow=slow))
    print(f"slow={slow}: every rank finishes at {r.sim_time:.3f} s simulated "
          f"(rank clocks {[round(c, 3) for c in r.values]})")

# %% [markdown]
# **Replicas silently diverge** when ranks disagree on *which* tensor is which. Suppose rank 1 lists
# its parameters in a different order (a different code path, a dict built differently). With equal
# shapes the all-reduces still match up, add `W0` on one rank to `W1` on the other, and nothing fails:
# the replicas just stop being copies of one model. This is why torch DDP verifies the parameter
# shapes and order across ranks when it is constructed, and why our `flatten` always sorts the keys.

# %%
sq2 = nn.mlp_init([8, 8, 8], seed=4)
Xd = [(rng.standard_normal((12, 8)), rng.standard_normal((12, 8)))]


def shuffled_order(comm):
    p = sq2 if comm.rank == 0 else {k: sq2[k] for k in ("W1", "b1", "W0", "b0")}
    return ddp.train_ddp(comm, Xd, p, 3, 0.1)[0]


v = cluster.run(shuffled_order, 2).values
gap = max(float(np.abs(v[0][k] - v[1][k]).max()) for k in v[0])
print(f"no error raised, but the two replicas now differ by up to {gap:.3f}")
assert gap > 1e-3

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# The process run above timed one DDP step of the `TIME_SIZES` MLP on a global batch of `TIME_B`
# samples with $K = 2$ processes, each with one BLAS thread (the cluster gives each process
# `cores // K` threads). The baseline $T_1$ is one process doing the same step on the full batch with
# the same single BLAS thread, timed here in the notebook's process. With $T_K$ the step time on $K$
# workers,
#
# $$S_K = \frac{T_1}{T_K}, \qquad E_K = \frac{S_K}{K}.$$
#
# On a shared 2-core machine the figure depends on what else is running, and at smoke size the step
# lasts only tens of milliseconds, so the all-reduce of a multi-MiB gradient over loopback weighs
# heavily. Compute grows with $B$ while the gradient does not, so $E_K$ rises with the batch:
# `benchmarks/bench_ddp_efficiency.py` sweeps $B$ on a quiet machine. Here we only report the figure.

# %%
from threadpoolctl import threadpool_limits

with threadpool_limits(limits=prod.values[0]["threads"]):
    t1 = perf.measure(ddp.reference_train, [(tX, tY)], tp, 1, LR, warmup=1, repeats=TIME_REPEATS).median
t2 = max(v["t2"] for v in prod.values)
flops = 6 * TIME_B * sum(v.size for v in tp.values())
rows = perf.scaling_table({1: t1, 2: t2})
print(f"MLP {TIME_SIZES}, B = {TIME_B}, {flops / 1e9:.2f} GFLOP per step, "
      f"{prod.values[0]['threads']} BLAS thread(s) per process, load average {np.round(os.getloadavg(), 1)}")
print(f"{'K':>3} {'step s':>8} {'S_K':>6} {'E_K':>6} {'GFLOP/s per worker':>19}")
for row in rows:
    print(f"{row['p']:>3} {row['time']:8.3f} {row['speedup']:6.2f} {row['efficiency']:6.2f} "
          f"{flops / row['time'] / row['p'] / 1e9:19.1f}")
ax = perf.plot_scaling({1: t1, 2: t2}, title="data-parallel step, 1 vs 2 processes (measured)")
cost = perf.run_cost(3.0, np.array([1, 2]), np.array([t1, t2]) * 10_000)
print(f"10,000 steps at $3 per worker-hour: K=1 ${cost[0]:.2f}, K=2 ${cost[1]:.2f} "
      f"(cost ratio {cost[1] / cost[0]:.2f} = 1 / E_2)")

# %% [markdown]
# Cost is workers times time: a run on $K$ workers costs $1/E_K$ times the single-worker run, so
# efficiency is literally the price of speed.
#
# **On a GPU.** The cell below runs the torch training step of a larger MLP in bf16 on the GPU, when
# there is one, and reports the **model FLOP utilisation** (MFU): achieved $6 B \Psi$ FLOP per second
# divided by the device's peak dense bf16 rate. The peak is looked up by device name (H100/H200 SXM:
# 989 TFLOP/s, A100: 312 TFLOP/s, L4: 121 TFLOP/s); for another device it is not guessed.

# %%
import torch

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}


def gpu_mfu(width=4096, depth=4, batch=8192, steps=20):
    dev = torch.device("cuda")
    layers = []
    for i in range(depth):
        layers += [torch.nn.Linear(width, width)] + ([torch.nn.ReLU()] if i < depth - 1 else [])
    model = torch.nn.Sequential(*layers).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=dev, dtype=torch.bfloat16)
    y = torch.randn(batch, width, device=dev, dtype=torch.bfloat16)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t) / steps
    n_params = sum(p.numel() for p in model.parameters())
    return 6 * batch * n_params / dt, torch.cuda.get_device_name()


if torch.cuda.is_available():
    achieved, name = gpu_mfu()
    peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
    print(f"{name}: {achieved / 1e12:.1f} TFLOP/s achieved in bf16")
    print(f"MFU = {achieved / peak:.1%} of the {peak / 1e12:.0f} TFLOP/s dense bf16 peak" if peak else
          "peak for this device not in PEAK_BF16: add it to compute MFU")
else:
    print("SKIPPED (no CUDA device): on a GPU this cell trains a 4 x 4096-wide MLP in bf16 (batch 8192, "
          "20 timed steps) and reports MFU = 6 B Psi / step time / peak bf16 FLOP/s "
          "(H100/H200 989, A100 312 TFLOP/s).")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Lab 15.** Take bucketing across nodes: on nodes of $G$ ranks, reduce each bucket to the node's
#    leader, run a ring all-reduce among the leaders only, and broadcast back inside the node, so that
#    only leaders use the slower links between nodes. Show that it equals single-process training and
#    count the bytes that cross nodes, against the flat ring of this chapter.
# 2. Extend the message-count cell to a network with 100 bias-only layers. At which bucket size does the
#    latency term fall below 10% of the bandwidth term for $K = 8$? Compare with $\alpha/\beta$.
# 3. Learning rate and $B$: train with $K = 1, 2, 4, 8$ at a fixed local batch $b$, so that $B = K b$
#    grows. Which learning-rate rule (constant, linear in $K$, square root) keeps the loss curve per
#    sample seen closest to $K = 1$?
# 4. Write an overlap simulator: backward of layer $i$ as `comm.compute(t_i)`, and the all-reduce of a
#    bucket started as soon as its gradients exist. Plot the step time against bucket size.
# 5. Replace the fp32 master in `train_precision` with bf16 storage (emulate it by zeroing the low 16
#    bits of float32). How far does it drift, and does stochastic rounding help?
# 6. Make `shuffled_order` fail loudly: add a check, before the first step, that all ranks agree on the
#    names and shapes of the parameters (one all-gather of a hash).
#
# ## 9. Research directions
#
# - **Large batches without losing accuracy.** Data parallelism grows the global batch $B = K b$, and
#   past a problem-dependent critical batch size more samples per step stop buying fewer steps. Learning
#   rate rules, layer-wise adaptive optimizers and warm-up push that limit out, but predicting it for a
#   new model and dataset is still largely empirical.
#   - Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", arXiv technical report,
#     2017. The linear learning-rate scaling rule with warm-up, up to a batch of 8192 images.
#   - McCandlish, Kaplan, Amodei and the OpenAI Dota Team, "An Empirical Model of Large-Batch Training",
#     arXiv technical report, 2018. The gradient noise scale as a predictor of the largest useful batch.
#   - You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", ICLR, 2020.
#     LAMB: a layer-wise trust ratio that keeps very large batches stable.
# - **Hiding the all-reduce completely.** Bucketing overlaps communication with the backward pass, but
#   the last bucket, the optimizer step and stragglers still sit on the critical path. Scheduling
#   communication by priority, overlapping it with the next forward pass, or relaxing synchronisation
#   without hurting convergence are active topics.
#   - Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB, 2020.
#     The bucketing and overlap design of `DistributedDataParallel` built in this chapter.
#   - Jayarajan, Wei, Gibson, Fedorova and Pekhimenko, "Priority-based Parameter Propagation for
#     Distributed DNN Training", MLSys, 2019. Sends the gradients the next forward pass needs first.
# - **Lower precision end to end.** Mixed precision made each replica cheap; 8-bit and narrower formats
#   for weights, activations and the all-reduce itself cut memory and traffic again, but keeping training
#   stable and the summation accurate at those widths is open.
#   - Micikevicius et al., "Mixed Precision Training", ICLR, 2018. Half-precision arithmetic with an
#     fp32 master copy and loss scaling, the recipe of Section 4.
#   - Micikevicius et al., "FP8 Formats for Deep Learning", arXiv technical report, 2022. The E4M3 and
#     E5M2 formats and the scaling they need.
#   - Peng et al., "FP8-LM: Training FP8 Large Language Models", arXiv preprint, 2023. Extends 8-bit
#     formats from the matrix multiplies to gradients, optimizer states and the gradient all-reduce, with
#     scaling that keeps training stable.
# - **Sharding the replicas.** Plain data parallelism keeps $K$ full copies of the $\Psi$ parameters, their
#   gradients and the optimizer state; sharding them across the replicas (ZeRO, FSDP) divides that memory
#   by $K$ but turns the one all-reduce into an all-gather before each layer and a reduce-scatter after it.
#   Overlapping those collectives with compute, and shrinking them on slow links, without giving back the
#   memory saved, is current work.
#   - Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB, 2023. The
#     design of fully sharded data parallelism in PyTorch: flat parameter units gathered just in time,
#     prefetching, and how it works with the caching allocator.
#   - Wang et al., "ZeRO++: Extremely Efficient Collective Communication for Large Model Training", ICLR,
#     2024. Quantizes the weight all-gather and the gradient exchange and keeps a secondary shard inside
#     each node, cutting the cross-node traffic of ZeRO about four times.
#
# ## What's next
#
# Chapter 16 (Model and sharded parallelism) removes data parallelism's hidden assumption, that every
# replica holds the whole model and its optimizer state: ZeRO shards that state over the same $K$
# workers, tensor parallelism splits each layer, and pipeline parallelism splits the stack of layers.
# Chapter 18 (Elastic and fault-tolerant training) then asks what happens to a data-parallel job when
# one of its $K$ replicas dies.
