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
# # Chapter 16. Model and sharded parallelism
#
# Data parallelism (Chapter 15) copies the whole model onto every worker. When the model, its
# gradients and its optimizer state no longer fit on one device, copying is not an option: the model
# itself must be cut. There are three ways to cut it, and this chapter builds each from scratch and
# checks it against single-device training:
#
# * **sharding the training state** (ZeRO stages 1-3, FSDP): still data parallel, but every worker keeps
#   only $1/K$ of the optimizer state, gradients and finally parameters, and gathers what it needs;
# * **tensor parallelism** (Megatron-LM): every weight matrix is split across workers, by columns or by
#   rows, and activations are all-reduced inside each layer;
# * **pipeline parallelism** (GPipe, 1F1B): consecutive layers live on different workers and
#   micro-batches flow through them like cars on an assembly line, leaving a **bubble** of idle time.
#
# Activation checkpointing, the fourth tool, trades recomputation for activation memory on one device.
# Then we run the production versions, `torch.distributed.fsdp.fully_shard` (FSDP2), DTensor tensor
# parallelism and `torch.distributed.pipelining`, on real processes and demand the same numbers.
#
# **Prerequisites:** Chapter 3 (speedup $S_p$, efficiency $E_p$, critical paths and stragglers),
# Chapter 4 (send/recv, all-reduce, reduce-scatter and all-gather with their $\alpha$-$\beta$ costs) and
# Chapter 15 (data parallelism, $B = K b$, mixed precision); background: backpropagation through an MLP,
# the Adam optimizer, and the layers of a transformer block (attention and the feed-forward MLP).

# %% tags=["parameters"]
SIZES = [16, 32, 32, 8]  # smoke: [12, 24, 8]
B = 48  # smoke: 24
STEPS = 20  # smoke: 4
LR = 1e-2
KS = [1, 2, 3, 5, 8, 16]  # smoke: [1, 2, 3, 5, 8]
MEM_K = 4
D_MODEL = 32  # smoke: 16
N_HEADS = 4
D_FF = 64  # smoke: 32
SEQ = 8  # smoke: 5
TP_KS = [1, 2, 3, 4, 8]  # smoke: [1, 2, 3, 8]
PIPE_SIZES = [32, 32, 32, 32, 32, 32, 32, 32, 32]  # smoke: [16, 16, 16, 16, 16]
P_STAGES = 4
MS = [1, 2, 4, 8, 16, 32]  # smoke: [1, 2, 4, 8, 16]
CKPT_LAYERS = 16  # smoke: 9
SEED = 0

# %% [markdown]
# `SIZES`, `B` and `STEPS` define the MLP and the training run used for ZeRO, checked for the world
# sizes `KS` (most of which do not divide the parameter count, so the shards are uneven). `MEM_K` is
# the world size of the memory table. `D_MODEL`, `N_HEADS`, `D_FF` and `SEQ` define
# the transformer block split by tensor parallelism over `TP_KS` ranks. `PIPE_SIZES` is the MLP cut into
# `P_STAGES` pipeline stages, `MS` the micro-batch counts; `CKPT_LAYERS` the depth of the network whose
# activations we checkpoint.
#
# ## 1. Motivation: which ceiling binds
#
# Here the binding ceiling is **memory per device**. Training with Adam in mixed precision keeps, per
# parameter, 2 bytes of fp16 weights, 2 bytes of fp16 gradient and 12 bytes of fp32 optimizer state
# (master weights, first and second moments): $16\Psi$ bytes for a model of $\Psi$ parameters, before a
# single activation is stored.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, collectives, nn
from scaleoutai.parallel import ddp, pipeline, tensor, zero

for name, psi in (("1.3 B", 1.3e9), ("7.5 B", 7.5e9), ("70 B", 70e9)):
    need = zero.memory_model(int(psi), 1, 0)["total"]
    print(f"{name:>6} parameters: {need / 2**30:7.0f} GiB of training state on one device (80 GiB GPU)")

# %% [markdown]
# A 7.5 B-parameter model needs about 112 GiB before activations: no single 80 GiB accelerator can
# train it, however small the batch. Data parallelism does not help, because every replica needs the
# same 112 GiB.
#
# ## 2. Core concepts
#
# **ZeRO** (Zero Redundancy Optimizer) removes the redundancy of data parallelism in three stages. With
# $K$ workers, per worker:
#
# | stage | shards | bytes per worker |
# |---|---|---|
# | 0 (DDP) | nothing | $2\Psi + 2\Psi + 12\Psi$ |
# | 1 | optimizer state | $2\Psi + 2\Psi + 12\Psi/K$ |
# | 2 | + gradients | $2\Psi + (2 + 12)\Psi/K$ |
# | 3 (FSDP) | + parameters | $16\Psi/K$ |
#
# Worker $r$ *owns* block $r$ of the flat parameter vector (the `np.array_split` block), runs Adam
# only on that block, and the collectives of Chapter 4 move the rest: reduce-scatter hands each worker
# the summed gradient of its block, all-gather rebuilds the parameters.
#
# **Tensor parallelism** splits a linear layer $y = xW$. *Column-parallel*: $W = [W_0 | \dots | W_{K-1}]$,
# worker $r$ computes $y_r = xW_r$, no communication. *Row-parallel*: $W$ split by rows, the input
# arrives split by columns, $y = \sum_r x_r W_r$: one all-reduce. A column layer followed by an
# elementwise nonlinearity followed by a row layer (the Megatron MLP) needs exactly one all-reduce in
# forward and one in backward.
#
# **Pipeline parallelism** gives each of $p$ workers a stage of consecutive layers and cuts the batch into
# $m$ micro-batches. With equal stage times a synchronous pipeline is idle for a fraction
#
# $$\text{bubble} = \frac{p-1}{m+p-1}$$
#
# of its time, so $m \gg p$ is needed. GPipe runs all forwards then all backwards (every stage stashes
# $m$ micro-batches of activations); 1F1B alternates one forward and one backward after a warm-up and
# stashes at most $p - s$ on stage $s$, with the same bubble.
#
# The memory model, for the 7.5 B model on $K = 64$ workers (the example of the ZeRO paper):

# %%
psi75 = int(7.5e9)
print(f"{'stage':>5} {'params GiB':>10} {'grads GiB':>9} {'optim GiB':>9} {'total GiB':>9}")
for stage in range(4):
    mm = zero.memory_model(psi75, 64, stage)
    print(f"{stage:>5} {mm['params'] / 2**30:>10.2f} {mm['grads'] / 2**30:>9.2f} "
          f"{mm['optimizer'] / 2**30:>9.2f} {mm['total'] / 2**30:>9.2f}")
assert np.isclose(zero.memory_model(psi75, 64, 0)["total"], 16 * psi75)
assert np.isclose(zero.memory_model(psi75, 64, 3)["total"], 16 * psi75 / 64)

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Per training step, in units of the gradient vector ($\Psi$ elements), bytes sent per worker (ring
# algorithms, factor $\frac{K-1}{K}$ omitted):
#
# * stage 0: all-reduce gradients, $2\Psi$;
# * stage 1 (as implemented here): all-reduce gradients (every worker still holds all of them), update
#   my block, all-gather parameters: $3\Psi$;
# * stage 2: reduce-scatter gradients, update, all-gather parameters: $2\Psi$, the *same* traffic as
#   DDP for $1/K$ of the gradient and optimizer memory;
# * stage 3: all-gather parameters before the forward pass, reduce-scatter gradients: $2\Psi$ here,
#   because we keep the gathered parameters through the backward pass. FSDP frees them after each
#   layer's forward and gathers them again in backward: $3\Psi$, the price of never holding the full model.
#
# Tensor parallelism moves *activations*: per block, two all-reduces of $B \cdot T \cdot d$ values in
# forward and two in backward. Pipeline parallelism moves one activation tensor per micro-batch per
# stage boundary, point to point. The simulator counts them all; first ZeRO, one step measured as the
# difference between a 2-step and a 1-step run (the final gather of the full parameters is common to both):

# %%
rng = np.random.default_rng(SEED)
params0 = nn.mlp_init(SIZES, seed=SEED)
data = [(rng.standard_normal((B, SIZES[0])), rng.standard_normal((B, SIZES[-1]))) for _ in range(3)]
psi = sum(v.size for v in params0.values())


def zero_bytes(stage, K, steps, mixed=True):
    res = cluster.run(zero.train_zero, K, args=(data, params0, steps, LR, stage), kwargs=dict(mixed=mixed), timeout=60)
    return np.array([s.bytes_sent for s in res.stats])


Kz, s16 = MEM_K, 2  # fp16 gradients and parameters travel: 2 bytes per element
per_step = {stage: zero_bytes(stage, Kz, 2) - zero_bytes(stage, Kz, 1) for stage in range(4)}
units = {0: 2, 1: 3, 2: 2, 3: 2}  # multiples of (K-1) Psi s summed over all ranks
for stage, b in per_step.items():
    assert b.sum() == units[stage] * (Kz - 1) * psi * s16, (stage, b.sum())
    print(f"stage {stage}: bytes sent per rank per step {[int(v) for v in b]} = {units[stage]} x (K-1)/K x Psi x 2 B "
          f"(Psi = {psi}, K = {Kz})")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# Three functions carry the chapter. In `zero.zero_step` read how the stage picks the collective: stages
# 0 and 1 all-reduce the whole gradient and slice out the rank's block `lo:hi`, stages 2 and 3
# reduce-scatter so that only the block ever exists; Adam then updates that block alone, and stages 1
# and 2 all-gather the new parameters while stage 3 keeps only its shard (and gathers the full vector
# at the top of the next step). `tensor.megatron_mlp_forward` is the whole Megatron trick in three
# lines: a column-parallel layer, GELU on the rank's columns, a row-parallel layer whose partial
# products meet in the one all-reduce. `pipeline.one_f_one_b_schedule` is the 1F1B order for stage $s$:
# $p - s - 1$ warm-up forwards, then one forward and one backward in turn, then the remaining backwards.

# %%
from scaleoutai.notebooks import show

show(zero.zero_step, tensor.megatron_mlp_forward, pipeline.one_f_one_b_schedule)

# %% [markdown]
# ### ZeRO stages 1-3 equal Adam
#
# `zero.train_zero(comm, data, params0, steps, lr, stage, mixed=False)` runs sharded Adam. In float64
# (`mixed=False`) every stage must reproduce single-device Adam (`ddp.reference_train(..., optimizer="adam")`)
# for every world size; tolerance relative and absolute $10^{-9}$ after `STEPS` steps.

# %%
ref, ref_losses = ddp.reference_train(data, params0, STEPS, LR, optimizer="adam")
n_checked = 0
for stage in range(4):
    for K in KS:
        res = cluster.run(zero.train_zero, K, args=(data, params0, STEPS, LR, stage), timeout=120)
        for v in res.values:
            for k in ref:
                np.testing.assert_allclose(v["params"][k], ref[k], rtol=1e-9, atol=1e-9, err_msg=f"{stage} {K} {k}")
        np.testing.assert_allclose(np.sum([v["losses"] for v in res.values], axis=0), ref_losses, rtol=1e-9)
        n_checked += 1
print(f"{n_checked} runs (stages 0-3 x K in {KS}): ZeRO Adam == single-device Adam after {STEPS} steps "
      f"(float64, rtol = atol = 1e-9)")

# %% [markdown]
# ### Memory per rank: the model against what each rank holds
#
# With `mixed=True` the state is exactly the mixed-precision recipe: fp16 parameters and gradients,
# fp32 master, m and v. `held_bytes` sums the arrays a rank's state keeps between steps;
# `memory_model(psi, K, stage, rank=r)` predicts them from the formula, using rank r's exact block
# size. They must be equal, byte for byte. The mixed runs also still train the same model: every stage
# ends within fp16 rounding of the float64 Adam trajectory.

# %%
held, model_bytes = {}, {}
mixed_params = {}
for stage in range(4):
    res = cluster.run(zero.train_zero, MEM_K, args=(data, params0, STEPS, LR, stage), kwargs=dict(mixed=True))
    assert all(v["psi"] == psi for v in res.values)
    held[stage] = [v["held"] for v in res.values]
    model_bytes[stage] = [zero.memory_model(psi, MEM_K, stage, rank=r) for r in range(MEM_K)]
    for h, mm in zip(held[stage], model_bytes[stage]):
        assert all(h[key] == mm[key] for key in ("params", "grads", "optimizer", "total")), (stage, h, mm)
    mixed_params[stage] = res.values[0]["params"]
for stage in range(1, 4):  # sharding changes nothing about the arithmetic
    for k in ref:
        np.testing.assert_array_equal(mixed_params[stage][k], mixed_params[0][k])
gap = max(float(np.abs(mixed_params[0][k] - ref[k]).max()) for k in ref)
assert gap < 5e-2
print(f"Psi = {psi}, K = {MEM_K}, mixed precision: bytes held by rank 0")
print(f"{'stage':>5} {'params':>7} {'grads':>6} {'optim':>6} {'total':>6} {'model total':>11} {'vs stage 0':>10}")
for stage in range(4):
    h = held[stage][0]
    print(f"{stage:>5} {h['params']:>7} {h['grads']:>6} {h['optimizer']:>6} {h['total']:>6} "
          f"{model_bytes[stage][0]['total']:>11.0f} {h['total'] / held[0][0]['total']:>10.2f}")
print(f"held_bytes == memory_model(rank=r) for every rank and stage; stages 1-3 bit-identical to stage 0; "
      f"mixed vs float64 Adam: max |diff| {gap:.1e}")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
bottom = np.zeros(4)
for part, color in (("params", "tab:blue"), ("grads", "tab:orange"), ("optimizer", "tab:green")):
    vals = np.array([held[s][0][part] for s in range(4)])
    ax.bar(range(4), vals, bottom=bottom, color=color, label=f"{part} (held)")
    bottom += vals
ax.plot(range(4), [model_bytes[s][0]["total"] for s in range(4)], "k_", markersize=40, mew=2,
        label="memory_model total")
ax.set_xticks(range(4), [f"stage {s}" for s in range(4)])
ax.set(ylabel="bytes on rank 0", title=f"ZeRO memory per rank, Psi = {psi}, K = {MEM_K}, mixed-precision Adam")
ax.legend(loc="upper right", fontsize="small")

# %% [markdown]
# ### Tensor parallelism equals the dense layer
#
# First the two linear layouts on their own, then the Megatron MLP and attention split by heads, and
# finally whole training runs of a pre-LN transformer block (`tensor.train_tp`) against the dense block
# trained on one device (`ddp.reference_train` with `tensor.block_mse`). World sizes include $K = 3$ (which
# divides neither the heads nor the hidden width evenly) and $K = 8 >$ `N_HEADS` (some ranks own no head).
# Tolerance $10^{-9}$ in float64.

# %%
bp = nn.block_init(D_MODEL, N_HEADS, D_FF, seed=1)
xb = rng.standard_normal((3, SEQ, D_MODEL))
yb = rng.standard_normal((3, SEQ, D_MODEL))


def linear_layouts(comm, W, b, x, dy):
    lo, hi = collectives.block_range(W.shape[1], comm.size, comm.rank)
    y_col = tensor.column_parallel_forward(W[:, lo:hi], b[lo:hi], x)
    dx_col, dW_col, _ = tensor.column_parallel_backward(comm, W[:, lo:hi], x, dy[..., lo:hi])
    r0, r1 = collectives.block_range(W.shape[0], comm.size, comm.rank)
    y_row = tensor.row_parallel_forward(comm, W[r0:r1], b, x[..., r0:r1])
    dx_row, dW_row, _ = tensor.row_parallel_backward(W[r0:r1], x[..., r0:r1], dy)
    return y_col, dx_col, dW_col, y_row, dx_row, dW_row


W, bias = bp["W1"][:, :D_MODEL], bp["b1"][:D_MODEL]  # a square layer
dy = rng.standard_normal((3, SEQ, D_MODEL))
y_ref = xb @ W + bias
dx_ref, dW_ref, _ = nn.linear_backward(W, xb, dy)
for K in TP_KS:
    vals = cluster.run(linear_layouts, K, args=(W, bias, xb, dy)).values
    np.testing.assert_allclose(np.concatenate([v[0] for v in vals], axis=-1), y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([v[2] for v in vals], axis=1), dW_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([v[5] for v in vals], axis=0), dW_ref, rtol=1e-12, atol=1e-12)
    for v in vals:
        np.testing.assert_allclose(v[1], dx_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v[3], y_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([v[4] for v in vals], axis=-1), dx_ref, rtol=1e-12, atol=1e-12)
print(f"column- and row-parallel linear: outputs, input and weight gradients == dense for K in {TP_KS}")

block_data = [(xb, yb)]
ref_b, ref_b_losses = ddp.reference_train(block_data, bp, STEPS, 1e-2,
                                     loss_grad=lambda p, x, y: tensor.block_mse(p, x, y, N_HEADS))
tp_msgs = {}
for K in TP_KS:
    for naive in (False, True):
        res = cluster.run(tensor.train_tp, K, args=(block_data, bp, STEPS, 1e-2, N_HEADS), kwargs=dict(naive=naive),
                          network=cluster.Network(1e-5, 1e-9), timeout=120)
        for p, losses in res.values:
            for k in ref_b:
                np.testing.assert_allclose(p[k], ref_b[k], rtol=1e-9, atol=1e-9, err_msg=f"K={K} {k}")
            np.testing.assert_allclose(losses, ref_b_losses, rtol=1e-9)
        tp_msgs[K, naive] = (res.stats[0].messages_sent, res.stats[0].bytes_sent, res.sim_time)
print(f"tensor-parallel block (Megatron MLP + attention by heads) trained {STEPS} steps == dense block "
      f"for K in {TP_KS} (rtol = atol = 1e-9), Megatron and naive weight-gathering variants")

# %% [markdown]
# **Communication counts.** Per training step the Megatron block makes four all-reduces of activations
# (two in forward, two in backward), each a ring of $2(K-1)$ messages. The naive variant keeps the same
# shards but all-gathers all the block's weights before every forward: 7 sharded tensors, $K-1$ messages
# each. Which moves fewer bytes depends on whether activations ($B T d$) or weights ($4d^2 + 2 d\, d_{ff}$)
# are larger: tensor parallelism pays off for the large matrices and modest per-device batches of big models.
# Messages exclude the final gather of the parameters, counted once per run (`7 (K-1)`).

# %%
act = xb.size * 8
wts = sum(bp[k].nbytes for k in tensor.COL + tensor.ROW)
print(f"activations B*T*d = {act} B per all-reduce; sharded weights {wts} B in all")
print(f"{'K':>3} {'Megatron msgs/step':>18} {'bytes/step':>10} {'naive msgs/step':>15} {'bytes/step':>10}")
for K in TP_KS:
    final = 7 * (K - 1)
    mm, mb, _ = tp_msgs[K, False]
    nm, nb, _ = tp_msgs[K, True]
    assert (mm - final) == STEPS * 4 * 2 * (K - 1)
    assert (nm - final) == STEPS * 7 * (K - 1)
    print(f"{K:>3} {(mm - final) // STEPS:>18} {mb / STEPS:>10.0f} {(nm - final) // STEPS:>15} {nb / STEPS:>10.0f}")

# %% [markdown]
# ### Pipeline parallelism: GPipe, 1F1B and the bubble
#
# `pipeline.pipeline_step(params, x, t, p, m, schedule)` runs one forward and backward of the MLP on
# `p` stage ranks with `m` micro-batches over real `send`/`recv`, charging each stage
# `t_fwd = 1` and `t_bwd = 2` simulated seconds per micro-batch (links are free, so the timeline
# shows the schedule alone). Its gradients must equal the single-device `mlp_backward`, and its measured
# bubble, $1 - \text{busy} / (p \cdot \text{makespan})$, must equal $(p-1)/(m+p-1)$.

# %%
pp = nn.mlp_init(PIPE_SIZES, seed=2)
xp = rng.standard_normal((max(MS) * 2, PIPE_SIZES[0]))
tp_ = rng.standard_normal((max(MS) * 2, PIPE_SIZES[-1]))
out, cache = nn.mlp_forward(pp, xp)
loss_ref, dy_ref = nn.mse_loss(out, tp_)
_, g_ref = nn.mlp_backward(pp, cache, dy_ref)
bubbles, peaks, shown = {}, {}, {}
for schedule in ("gpipe", "1f1b"):
    for m in MS:
        r = pipeline.pipeline_step(pp, xp, tp_, P_STAGES, m, schedule)
        for k in g_ref:
            np.testing.assert_allclose(r.grads[k], g_ref[k], rtol=1e-10, atol=1e-12)
        assert np.isclose(r.loss, loss_ref, rtol=1e-12)
        assert np.isclose(r.bubble, pipeline.bubble_fraction(P_STAGES, m), rtol=1e-9, atol=1e-12)
        assert np.isclose(r.makespan, (m + P_STAGES - 1) * 3.0)
        bubbles[schedule, m], peaks[schedule, m] = r.bubble, r.peak_stash
        if m == min(8, max(MS)):
            shown[schedule] = r
print(f"GPipe and 1F1B, p = {P_STAGES}, m in {MS}: gradients == single device, "
      f"measured bubble == (p-1)/(m+p-1), makespan == (m+p-1)(t_f+t_b)")
for m in MS:
    print(f"m = {m:>2}: bubble {bubbles['gpipe', m]:.3f}; peak stashed micro-batches per stage "
          f"GPipe {peaks['gpipe', m]}, 1F1B {peaks['1f1b', m]}")
    assert peaks["gpipe", m] == [m] * P_STAGES
    assert peaks["1f1b", m] == [min(m, P_STAGES - s) for s in range(P_STAGES)]

# %%
fig, axes = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
for ax, schedule in zip(axes, ("gpipe", "1f1b")):
    pipeline.plot_schedule(shown[schedule], ax=ax)
fig.tight_layout()

fig, ax = plt.subplots(figsize=(7, 4))
m_fine = np.arange(1, max(MS) + 1)
ax.plot(m_fine, [pipeline.bubble_fraction(P_STAGES, m) for m in m_fine], "-", color="gray", label="(p-1)/(m+p-1)")
for schedule, marker in (("gpipe", "o"), ("1f1b", "x")):
    ax.plot(MS, [bubbles[schedule, m] for m in MS], marker, ms=9, ls="", label=f"{schedule} (measured)")
ax.set(xscale="log", xlabel="micro-batches m", ylabel="bubble fraction", title=f"pipeline bubble, p = {P_STAGES}")
ax.legend()

# %% [markdown]
# Both schedules have the same bubble; 1F1B's gain is memory: stage $s$ never stashes more than
# $p - s$ micro-batches of activations, where GPipe stashes all $m$. That is what lets 1F1B use the
# large $m$ that shrinks the bubble.
#
# ### Interleaved 1F1B: $v$ model chunks per stage
#
# The bubble is the time it takes to fill and drain the pipeline, $p - 1$ stage-times. Megatron-LM's
# interleaved schedule makes each stage-time shorter instead of adding micro-batches: the layers are cut
# into $p v$ chunks and stage $s$ holds the $v$ non-consecutive chunks $s, s + p, \dots, s + (v-1)p$, each
# costing $1/v$ of a stage. A micro-batch goes around the ring of stages $v$ times, fill and drain take
# $(p-1)/v$ stage-times, and
#
# $$\text{bubble} = \frac{(p-1)/v}{m + (p-1)/v}.$$
#
# The price is communication: a micro-batch crosses $p v - 1$ chunk boundaries in each direction instead
# of $p - 1$, so $v$ times the point-to-point messages. In `pipeline.interleaved_schedule` read how an
# op index $k$ maps to a micro-batch and a local chunk (forwards go in groups of $p$ micro-batches, chunk
# by chunk; backwards visit the chunks in reverse) and how long the warm-up is:
# $2(p - s - 1) + (v - 1)p$ forwards. Megatron-LM's order needs $m$ to be a multiple of $p$, and the
# library also asks for $p \ge 3$.

# %%
show(pipeline.interleaved_schedule)

# %% [markdown]
# A deeper MLP of $2p$ layers gives $v = 2$ one layer per chunk. For every $m$ in `MS` that is a multiple
# of $p$, the interleaved step with $v = 1$ and $v = 2$ must give the gradients of GPipe, of 1F1B and of
# the single device; its measured bubble must equal `bubble_fraction(p, m, v)`, its makespan
# $(m + (p-1)/v)(t_f + t_b)$, and its message count $2m(pv - 1)$.

# %%
rng_i = np.random.default_rng(SEED + 5)
pi = nn.mlp_init([PIPE_SIZES[0]] * (2 * P_STAGES + 1), seed=5)
xi = rng_i.standard_normal((max(MS) * 2, PIPE_SIZES[0]))
ti = rng_i.standard_normal((max(MS) * 2, PIPE_SIZES[0]))
out_i, cache_i = nn.mlp_forward(pi, xi)
loss_i, dy_i = nn.mse_loss(out_i, ti)
_, gi_ref = nn.mlp_backward(pi, cache_i, dy_i)
M_INTER = [m for m in MS if m % P_STAGES == 0]
assert M_INTER, f"MS must contain a multiple of P_STAGES = {P_STAGES}"
inter = {}
for m in M_INTER:
    plain = {name: pipeline.pipeline_step(pi, xi, ti, P_STAGES, m, name) for name in ("gpipe", "1f1b")}
    for v in (1, 2):
        r = pipeline.pipeline_step(pi, xi, ti, P_STAGES, m, "interleaved", v=v)
        for k in gi_ref:
            np.testing.assert_allclose(r.grads[k], gi_ref[k], rtol=1e-10, atol=1e-12)
            for other in plain.values():
                np.testing.assert_allclose(r.grads[k], other.grads[k], rtol=1e-10, atol=1e-12)
        assert np.isclose(r.loss, loss_i, rtol=1e-12)
        assert np.isclose(r.bubble, pipeline.bubble_fraction(P_STAGES, m, v), rtol=1e-9, atol=1e-12)
        assert np.isclose(r.makespan, (m + (P_STAGES - 1) / v) * 3.0)
        assert r.messages == 2 * m * (P_STAGES * v - 1)
        inter[m, v] = r
    assert plain["1f1b"].messages == 2 * m * (P_STAGES - 1) == inter[m, 1].messages
print(f"interleaved 1F1B, p = {P_STAGES}, {2 * P_STAGES} layers, m in {M_INTER}: gradients == GPipe == 1F1B "
      f"== single device (rtol 1e-10) for v = 1 and 2")
print(f"{'m':>3} {'bubble v=1':>10} {'formula':>8} {'bubble v=2':>10} {'formula':>8} {'msgs v=1':>8} {'msgs v=2':>8}")
for m in M_INTER:
    print(f"{m:>3} {inter[m, 1].bubble:>10.3f} {pipeline.bubble_fraction(P_STAGES, m, 1):>8.3f} "
          f"{inter[m, 2].bubble:>10.3f} {pipeline.bubble_fraction(P_STAGES, m, 2):>8.3f} "
          f"{inter[m, 1].messages:>8} {inter[m, 2].messages:>8}")

# %%
m_show = M_INTER[min(1, len(M_INTER) - 1)]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1.6, 1]})
pipeline.plot_schedule(inter[m_show, 2], ax=ax1)
m_fine = np.arange(P_STAGES, max(M_INTER) + 1)
for v, marker in ((1, "o"), (2, "s")):
    ax2.plot(m_fine, [pipeline.bubble_fraction(P_STAGES, m, v) for m in m_fine], "-",
             label=f"bubble_fraction(p, m, v={v})")
    ax2.plot(M_INTER, [inter[m, v].bubble for m in M_INTER], marker, ms=9, ls="", color="black",
             mfc="none", label=f"measured, v = {v}")
ax2.set(xlabel="micro-batches m", ylabel="bubble fraction", title=f"interleaved 1F1B, p = {P_STAGES}")
ax2.legend(fontsize="small")
fig.tight_layout()

# %% [markdown]
# With $v = 2$ the bubble is that of a pipeline with twice the micro-batches; $v = 1$ has 1F1B's bubble,
# gradients and messages, though Megatron's warm-up rule $2(p-s-1)$ stashes more micro-batches than 1F1B's.
# The message count doubles, which is free here (the simulator's links cost nothing) but not on a real
# network: each message pays $\alpha$, so interleaving suits stages joined by fast links and large
# enough micro-batches for $\beta$ to dominate.
#
# ### Activation checkpointing: memory for recompute
#
# Backpropagation keeps every layer's input and pre-activation. `checkpointed_mlp_forward(params, x, k)`
# keeps only the input of every $k$-th layer; the backward pass recomputes each segment's forward
# before differentiating it. Gradients must be identical to plain backprop; memory drops to about
# $(L/k + k)$ layer activations (smallest near $k = \sqrt{L}$) for one extra forward pass at most.

# %%
cp = nn.mlp_init([32] * (CKPT_LAYERS + 1), seed=3)
xc = rng.standard_normal((64, 32))
yc = rng.standard_normal((64, 32))
out_plain, cache_plain = nn.mlp_forward(cp, xc)
_, dyc = nn.mse_loss(out_plain, yc)
dx_plain, g_plain = nn.mlp_backward(cp, cache_plain, dyc)
rows = []
for k in range(1, CKPT_LAYERS + 1):
    yk, ck = pipeline.checkpointed_mlp_forward(cp, xc, k)
    np.testing.assert_array_equal(yk, out_plain)
    dxk, gk, st = pipeline.checkpointed_mlp_backward(cp, ck, dyc)
    np.testing.assert_allclose(dxk, dx_plain, rtol=1e-12, atol=1e-12)
    for key in g_plain:
        np.testing.assert_allclose(gk[key], g_plain[key], rtol=1e-12, atol=1e-12)
    rows.append((k, st["peak_activation_elements"] / st["plain_activation_elements"],
                 st["recompute_flops"] / st["forward_flops"]))
best = min(rows, key=lambda r: r[1])
print(f"L = {CKPT_LAYERS}: gradients identical for every interval k; least memory at k = {best[0]} "
      f"({best[1]:.0%} of plain backprop, recompute {best[2]:.0%} of a forward), sqrt(L) = {np.sqrt(CKPT_LAYERS):.1f}")
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot([r[0] for r in rows], [r[1] for r in rows], "o-", label="peak activations / plain backprop")
ax.plot([r[0] for r in rows], [r[2] for r in rows], "s-", label="recomputed FLOPs / forward FLOPs")
ax.axvline(np.sqrt(CKPT_LAYERS), color="gray", ls=":", label=r"$k=\sqrt{L}$")
ax.set(xlabel="checkpoint every k layers", ylabel="fraction", title=f"activation checkpointing, L = {CKPT_LAYERS}")
ax.legend()

# %% [markdown]
# ## 5. The same task with production libraries
#
# One run on 2 real processes (gloo, CPU) exercises three PyTorch APIs, each against single-device torch
# and against our NumPy results, in float64:
#
# * **FSDP2**, `torch.distributed.fsdp.fully_shard(module, mesh=...)` on each `Linear` and on the root,
#   over a 1-D `DeviceMesh` from `init_device_mesh("cpu", (2,))`. Parameters become `DTensor`s sharded
#   along dimension 0 (`Shard(0)`): each rank stores half of every weight (this is ZeRO-3). Trained with
#   `torch.optim.Adam` on the rank's half of the batch for `STEPS` steps; `full_tensor()` gathers the
#   result, which must equal single-device torch Adam *and* our `train_zero(stage=3)`.
# * **DTensor tensor parallelism**, `parallelize_module(mlp, mesh, {"0": ColwiseParallel(),
#   "2": RowwiseParallel()})` on the MLP `Linear(d, d_ff) -> GELU -> Linear(d_ff, d)` of our transformer
#   block: exactly the Megatron MLP. Output and gradients must equal the dense module.
# * **`torch.distributed.pipelining`**: the pipeline MLP cut into 2 `PipelineStage`s (one per rank) and run
#   with `ScheduleGPipe` and `Schedule1F1B`, 4 micro-batches. Each stage's gradients must equal that
#   stage's slice of the single-device gradients (and our `pipeline_step` gradients). Its `scale_grads`
#   divides the sum of micro-batch mean losses by $m$, which is the full-batch mean since the
#   micro-batches are equal.

# %%
def production_worker(comm, params0, data, steps, lr, block, xb, pipe, xp, tp_, m):
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh

    def linear(W, b):
        lin = nn.Linear(*W.shape).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W.T.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        return lin

    def torch_mlp(p):
        n = sum(k.startswith("W") for k in p)
        mods = []
        for i in range(n):
            mods += [linear(p[f"W{i}"], p[f"b{i}"])] + ([nn.ReLU()] if i < n - 1 else [])
        return nn.Sequential(*mods)

    def as_numpy(t):
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        return t.detach().numpy().copy()

    def adam(model, shard):
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for s in range(steps):
            X, Y = data[s % len(data)]
            if shard:
                X, Y = np.array_split(X, comm.size)[comm.rank], np.array_split(Y, comm.size)[comm.rank]
            opt.zero_grad()
            nn.functional.mse_loss(model(torch.from_numpy(X)), torch.from_numpy(Y)).backward()
            opt.step()
        lins = [mod for mod in model if isinstance(mod, nn.Linear)]
        return {**{f"W{i}": as_numpy(lin.weight).T for i, lin in enumerate(lins)},
                **{f"b{i}": as_numpy(lin.bias) for i, lin in enumerate(lins)}}

    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    out = {}
    mesh = init_device_mesh("cpu", (comm.size,))
    out["single_adam"] = adam(torch_mlp(params0), shard=False)
    # FSDP2: every Linear and the root become fully sharded units
    model = torch_mlp(params0)
    for mod in model:
        if isinstance(mod, nn.Linear):
            fully_shard(mod, mesh=mesh)
    fully_shard(model, mesh=mesh)
    w = model[0].weight
    out["fsdp_local_shape"] = tuple(w.to_local().shape)
    out["fsdp_placement"] = str(w.placements)
    out["fsdp"] = adam(model, shard=True)

    # DTensor tensor parallel: the Megatron MLP
    def megatron_mlp():
        return nn.Sequential(linear(block["W1"], block["b1"]), nn.GELU(approximate="tanh"),
                             linear(block["W2"], block["b2"]))
    dense, tpm = megatron_mlp(), megatron_mlp()
    parallelize_module(tpm, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.from_numpy(xb)
    y_tp, y_dense = tpm(x), dense(x)
    y_tp.square().mean().backward()
    y_dense.square().mean().backward()
    out["tp"] = {"y": as_numpy(y_tp), "y_dense": as_numpy(y_dense),
                 "grads": [(as_numpy(a.grad), as_numpy(b.grad))
                           for a, b in zip(tpm.parameters(), dense.parameters())],
                 "local_W1": tuple(tpm[0].weight.to_local().shape)}

    # pipelining: one stage per rank, GPipe and 1F1B
    ref = torch_mlp(pipe)
    nn.functional.mse_loss(ref(torch.from_numpy(xp)), torch.from_numpy(tp_)).backward()
    cut = 2 * (len(pipe) // 4)  # Linear, ReLU pairs: the first half of the linear layers on stage 0
    for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        model = torch_mlp(pipe)
        sub = model[:cut] if comm.rank == 0 else model[cut:]
        stage = PipelineStage(sub, comm.rank, comm.size, torch.device("cpu"))
        sched = cls(stage, n_microbatches=m, loss_fn=nn.functional.mse_loss)
        if comm.rank == 0:
            sched.step(torch.from_numpy(xp))
        else:
            sched.step(target=torch.from_numpy(tp_))
        ref_sub = ref[:cut] if comm.rank == 0 else ref[cut:]
        out[f"pp_{name}"] = [(as_numpy(a.grad), as_numpy(b.grad)) for a, b in
                             zip(sub.parameters(), ref_sub.parameters())]
    out["pp_cut"] = cut
    return out


pp2 = nn.mlp_init(PIPE_SIZES[:5], seed=4)  # 4 linear layers: 2 per stage
xp2, tp2 = rng.standard_normal((16, PIPE_SIZES[0])), rng.standard_normal((16, PIPE_SIZES[0]))
t0 = time.perf_counter()
prod = cluster.run(production_worker, 2, backend="process",
                   args=(params0, data, STEPS, LR, bp, xb, pp2, xp2, tp2, 4), timeout=300, quiet=True)
print(f"process run (2 ranks: FSDP2, DTensor TP, pipelining): {time.perf_counter() - t0:.1f} s wall")
zero3 = cluster.run(zero.train_zero, 2, args=(data, params0, STEPS, LR, 3)).values[0]["params"]
assert len(prod.values) == 2
for r, v in enumerate(prod.values):
    for k in ref:
        np.testing.assert_allclose(v["single_adam"][k], ref[k], rtol=1e-9, atol=1e-9)  # torch Adam == ours
    # FSDP2 really sharded: each rank stores half of every weight, as a DTensor with Shard(0)
    rows_w0 = len(np.array_split(np.arange(params0["W0"].shape[1]), [-(-params0["W0"].shape[1] // 2)])[r])
    assert v["fsdp_local_shape"] == (rows_w0, params0["W0"].shape[0]), v["fsdp_local_shape"]  # torch.chunk
    assert "Shard(dim=0)" in v["fsdp_placement"], v["fsdp_placement"]
    for k in ref:
        np.testing.assert_allclose(v["fsdp"][k], v["single_adam"][k], rtol=1e-10, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(v["fsdp"][k], zero3[k], rtol=1e-9, atol=1e-9, err_msg=k)
    t = v["tp"]
    rows_w1 = len(np.array_split(np.arange(D_FF), [-(-D_FF // 2)])[r])
    assert t["local_W1"] == (rows_w1, D_MODEL), t["local_W1"]  # ColwiseParallel: half of W1's columns
    dense_np = nn.gelu(xb @ bp["W1"] + bp["b1"]) @ bp["W2"] + bp["b2"]
    np.testing.assert_allclose(t["y"], t["y_dense"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t["y"], dense_np, rtol=1e-12, atol=1e-12)
    assert len(t["grads"]) == 4
    for a, b in t["grads"]:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    for name in ("gpipe", "1f1b"):
        assert len(v[f"pp_{name}"]) == 4  # 2 Linear layers (weight, bias) on each stage
        for a, b in v[f"pp_{name}"]:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
r_np = pipeline.pipeline_step(pp2, xp2, tp2, 2, 4, "gpipe")  # and our pipeline gives the same gradients
for r, v in enumerate(prod.values):  # rank r holds layers 2r, 2r + 1; torch stores W transposed
    for name in ("gpipe", "1f1b"):
        for i, (g_torch, _) in enumerate(v[f"pp_{name}"]):
            layer = 2 * r + i // 2
            ours = r_np.grads[f"W{layer}"].T if i % 2 == 0 else r_np.grads[f"b{layer}"]
            np.testing.assert_allclose(g_torch, ours, rtol=1e-10, atol=1e-12)
v = prod.values[0]
print(f"RAN  FSDP2 fully_shard: local shard of W0^T {v['fsdp_local_shape']} of {params0['W0'].T.shape}, "
      f"placements {v['fsdp_placement']}; params after {STEPS} Adam steps == single-device torch Adam "
      f"== train_zero(stage=3) (rtol 1e-10 / 1e-9)")
print(f"RAN  DTensor ColwiseParallel/RowwiseParallel: local W1 shard {v['tp']['local_W1']}; output and all "
      f"gradients == dense torch == our NumPy block MLP (rtol = atol = 1e-12)")
print("RAN  pipelining ScheduleGPipe and Schedule1F1B: each stage's gradients == single-device torch "
      "== our pipeline_step (rtol 1e-10)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# Sharding removes redundancy, and redundancy was what made data parallelism easy to recover: under
# DDP any surviving replica holds the whole model, under ZeRO-3 a crashed worker takes $1/K$ of the
# parameters and optimizer state with it. The only recovery is a checkpoint (Chapter 18), written as
# shards by every worker. Below, rank 2 of a ZeRO-3 run dies; its peers block on the collective.

# %%
for stage in (0, 3):
    try:
        cluster.run(zero.train_zero, 4, args=(data, params0, STEPS, LR, stage), faults=cluster.Faults(crash={2: 7}))
        raise AssertionError("should have failed")
    except cluster.RankError as exc:
        print(f"stage {stage}: {str(exc).splitlines()[0]}")
print(f"after the crash, stage 0 survivors each hold all {psi} parameters; "
      f"stage 3 survivors hold {[collectives.block_range(psi, 4, r)[1] - collectives.block_range(psi, 4, r)[0] for r in (0, 1, 3)]}: "
      f"block 2 is gone")

# %% [markdown]
# **Pipelines amplify stragglers.** Every micro-batch passes through every stage, so one slow stage slows
# the whole pipeline; rebalance layers so that stage times are equal. Below stage 1 is twice as slow:

# %%
def slow_stage_makespan(slow):
    cluster_faults = cluster.Faults(slow=slow)
    res = cluster.run(pipeline._stage_worker, P_STAGES, args=(pp, xp, tp_, 8, "1f1b", 1.0, 2.0),
                      network=cluster.Network(0.0, 0.0), faults=cluster_faults)
    ev = [e for v in res.values for e in v["events"]]
    return max(e.end for e in ev)


base, slowed = slow_stage_makespan({}), slow_stage_makespan({1: 2.0})
print(f"1F1B, p = {P_STAGES}, m = 8: makespan {base:.0f} s; with stage 1 twice as slow {slowed:.0f} s "
      f"({slowed / base:.2f}x for one slow stage out of {P_STAGES})")
assert slowed > 1.5 * base

# %% [markdown]
# **Bad configurations fail loudly.** A tensor-parallel split needs the head count to divide the model
# width; a pipeline cannot have more stages than layers. The library refuses these up front:

# %%
for bad in (lambda: nn.block_init(30, 4, 64), lambda: pipeline.pipeline_step(pp, xp, tp_, len(PIPE_SIZES), 4)):
    try:
        bad()
        raise AssertionError("should have failed")
    except ValueError as exc:
        print("ValueError:", exc)

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# These schemes buy *memory*, and pay in communication or idle time; the evaluation is what fraction of
# the ideal each keeps.
#
# * **ZeRO**: stage 2 costs the same bytes as DDP and stage 3 about 1.5x (with FSDP's regathering), for
#   a $K$-fold smaller state. The model size that fits grows linearly in $K$ (plot below, 80 GiB devices,
#   training state only).
# * **Pipeline**: efficiency is at most $1 - \text{bubble} = \frac{m}{m+p-1}$, or
#   $\frac{m}{m + (p-1)/v}$ with $v$ interleaved chunks per stage (for $v$ times the messages).
# * **Tensor parallel**: its all-reduces sit on the critical path of every layer, so it is confined to
#   the fast links inside one server (NVLink); across servers one uses data or pipeline parallelism.

# %%
ks = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
for stage in range(4):
    per_param = np.array([zero.memory_model(1, int(k), stage)["total"] for k in ks])
    ax1.loglog(ks, 80 * 2**30 / per_param / 1e9, "o-", base=2, label=f"stage {stage}")
ax1.set(xlabel="workers K", ylabel="largest model (B params)", title="model size that fits in 80 GiB per worker")
ax1.legend()
ms_fine = np.arange(1, 65)
for p in (2, 4, 8, 16):
    ax2.plot(ms_fine, [1 - pipeline.bubble_fraction(p, m) for m in ms_fine], label=f"p = {p}")
ax2.set(xlabel="micro-batches m", ylabel="pipeline efficiency bound m/(m+p-1)", title="pipeline efficiency")
ax2.legend()
fig.tight_layout()
for p in (4, 8):
    m_needed = int(np.ceil(9 * (p - 1)))  # bubble <= 10%  <=>  m >= 9 (p - 1)
    assert pipeline.bubble_fraction(p, m_needed) <= 0.1 + 1e-12
    print(f"p = {p}: m >= {m_needed} micro-batches keep the bubble <= 10% (E >= 0.9)")
_, _, t_mega = tp_msgs[max(TP_KS), False]
_, _, t_naive = tp_msgs[max(TP_KS), True]
print(f"simulated communication of {STEPS} tensor-parallel steps at K = {max(TP_KS)}: "
      f"Megatron {t_mega * 1e3:.2f} ms, naive weight gathering {t_naive * 1e3:.2f} ms")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Lab 16** (`labs/lab16-zero-and-tensor-parallel`). Take ZeRO one step further, to ZeRO++'s quantized
#    weight all-gather: each rank keeps an exact master shard and Adam's moments, and gathers int8 codes with
#    one scale per block instead of full-precision weights. Show the master still equals Adam for
#    $K \in \{1, 2, 3, 5, 8\}$ (empty shards included) and bound what the int8 weights cost in error and save in bytes.
# 2. Make stage 3 gather parameters layer by layer in forward and again in backward (FSDP's schedule).
#    Count the bytes: do you get $3\Psi$? What is the peak parameter memory now?
# 3. **Interleaving on a real network.** Run `pipeline_step(..., schedule="interleaved", v=v)` with
#    `network=cluster.Network(alpha, beta)` for $v \in \{1, 2, 4\}$ and a 16-layer MLP. For which
#    $\alpha$ does $v = 2$ stop paying off? Also compare each stage's `peak_stash` (counted in chunks of
#    $1/v$ of a stage's activations) with plain 1F1B.
# 4. Combine checkpointing with the pipeline: which interval $k$ minimises peak memory on stage 0 of a
#    1F1B pipeline with $m = 8$?
# 5. Sequence parallelism: the layer norms and dropout of a tensor-parallel block are replicated. Split
#    them along the sequence and replace each all-reduce with a reduce-scatter plus an all-gather.
#    Show the output is unchanged and the bytes are the same.
# 6. Use the memory model to choose $(K_\text{data}, K_\text{tensor}, K_\text{pipe})$ for a 70 B model on
#    512 GPUs of 80 GiB (Chapter 19 does it properly).
#
# ## 9. Research directions
#
# - **Removing the pipeline bubble.** Synchronous schedules idle for $(p-1)/(m+p-1)$ of the step, and
#   shrinking it with more micro-batches or more interleaved chunks costs activation memory or messages.
#   Schedules that split the backward pass and fill the bubble with weight-gradient work, and how to pick
#   one for uneven stages and real links, are an active area, because at thousands of devices every
#   percent of bubble is hundreds of idle accelerators.
#   - Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline Parallelism",
#     NeurIPS, 2019. Micro-batched synchronous pipelining with re-materialization; the schedule and the
#     $(p-1)/(m+p-1)$ bubble of Section 4.
#   - Qi, Wan, Huang and Lin, "Zero Bubble Pipeline Parallelism", ICLR, 2024. Splits the backward pass
#     into input-gradient and weight-gradient parts and schedules the latter into the bubble, reaching
#     nearly zero idle time under synchronous semantics.
# - **Sharding without the communication tax.** ZeRO-3 and FSDP trade memory for gathering the
#   parameters in every forward and backward pass, $3\Psi$ per step instead of $2\Psi$. How to overlap
#   those gathers with compute, size the sharded units, and keep the gains on slow links between nodes
#   is still worked out system by system.
#   - Rajbhandari, Rasley, Ruwase and He, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
#     Models", SC, 2020. Introduces the three stages of partitioning optimizer state, gradients and
#     parameters and the memory model of Section 2.
#   - Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel", VLDB, 2023.
#     Describes the production design of the FSDP used in Section 5: flat parameter units, prefetching,
#     and the rate limiting that keeps gathers from exhausting memory.
# - **Choosing the combination automatically.** Data, tensor and pipeline parallelism (and ZeRO) can
#   be combined in many ways, and the best mix depends on the model, the batch and the network. Searching
#   that space with a cost model instead of by hand is possible for fixed graphs but not yet reliable
#   for every architecture and cluster.
#   - Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
#     Megatron-LM", SC, 2021. Composes tensor, pipeline and data parallelism, introduces the interleaved
#     1F1B schedule of Section 4, and gives rules of thumb for picking the degrees.
#   - Zheng et al., "Alpa: Automating Inter- and Intra-Operator Parallelism for Distributed Deep
#     Learning", OSDI, 2022. Solves for the intra-operator (tensor) and inter-operator (pipeline) plan
#     with integer and dynamic programming over a compiler's graph.
# - **Activation memory.** With parameters sharded, activations become the largest item, and
#   recomputing them costs up to a third of the step. Deciding what to keep, what to recompute and what
#   to shard across the tensor-parallel group, per layer and per micro-batch, is open.
#   - Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language Models Using Model
#     Parallelism", arXiv, 2019. The column- and row-parallel transformer layers of Section 4, with one
#     all-reduce per MLP and per attention block in each direction.
#   - Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys, 2023.
#     Sequence parallelism for the layers tensor parallelism leaves replicated, plus selective
#     recomputation of only the cheap-to-redo, memory-heavy attention parts.
#
# ## What's next
#
# Chapter 17 (Expert parallelism) cuts the model a fourth way: a mixture-of-experts layer holds many
# feed-forward networks, spreads them over the ranks, and sends each token to its experts with an
# All-to-All, so parameters grow without growing the work per token. Chapter 18 (Elastic and
# fault-tolerant training) answers the problem Section 6 raised, that a sharded model cannot survive a
# lost rank without checkpoints, and Chapter 19 (Foundation-model training) composes FSDP, tensor and
# pipeline parallelism on one device mesh and uses this chapter's memory model to size a real run.
