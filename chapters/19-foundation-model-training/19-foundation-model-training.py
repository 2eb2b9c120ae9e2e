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
# # Chapter 19. Foundation-model training
#
# Chapters 15 to 18 each split one thing: the batch (data parallelism), the optimizer state and
# weights (ZeRO), one layer's matrices (tensor parallelism), the stack of layers (pipeline
# parallelism), the experts. A foundation model needs several of them at once. This chapter puts
# $K$ devices on a **mesh** of shape $(\mathrm{DP}, \mathrm{TP}, \mathrm{PP})$, runs the three kinds
# of parallelism on its three axes at the same time, and checks that the composition still computes
# exactly what one device would. Then it answers the planning questions that come before any run:
# how much memory each device needs, how many bytes cross each axis per step, how large a model a
# compute budget $C$ should buy (scaling laws), and what fraction of the hardware's peak a run
# actually uses (MFU).
#
# **Prerequisites:** Chapter 15 (Data parallelism: bucketed all-reduce, $B = K b$), Chapter 16 (Model and
# sharded parallelism: ZeRO, Megatron tensor parallelism, GPipe and 1F1B pipelines) and Chapter 17
# (Expert parallelism); Chapter 3 for $S_p$ and $E_p$. Background: the transformer block (attention and
# MLP), mixed precision, and what a FLOP count of a matrix product is.

# %% tags=["parameters"]
STEPS = 20  # smoke: 3
LAYERS = 4  # smoke: 4
D_MODEL = 16  # smoke: 8
HEADS = 4  # smoke: 2
D_FF = 32  # smoke: 16
BATCH = 12  # smoke: 6
SEQ = 8  # smoke: 4
MICRO = 2  # smoke: 2
LR = 0.05
PROC_STEPS = 3  # smoke: 1
GPU_STEPS = 20  # smoke: 5
SEED = 0

# %% [markdown]
# `LAYERS` pre-LN transformer blocks of width `D_MODEL` with `HEADS` heads and an MLP of width `D_FF`
# form the from-scratch model; `BATCH` sequences of `SEQ` tokens make a global batch, cut into
# `MICRO` micro-batches per data-parallel replica; `STEPS` optimizer steps of SGD with rate `LR`.
# `PROC_STEPS` is the length of the torch run on real processes, `GPU_STEPS` that of the GPU cell.
#
# ## 1. Motivation: which ceiling binds
#
# Two ceilings bind at once. **Memory**: mixed-precision Adam keeps $2\Psi$ bytes of bf16 weights,
# $2\Psi$ of bf16 gradients and $12\Psi$ of fp32 master weights and moments, 16 bytes per parameter
# before a single activation is stored. **Compute**: training costs $C \approx 6\Psi D$ FLOPs for $D$
# tokens (2 per parameter per token forward, 4 backward). Here is the arithmetic for a 7B model and
# for Chinchilla itself (70B parameters, 1.4T tokens), with the H100's dense bf16 peak of 989 TFLOP/s.

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, collectives
from scaleoutai.cluster import groups
from scaleoutai.parallel import mesh
from scaleoutai.perf import scaling

GB = 1e9
for name, psi in (("7B", 7e9), ("70B", 70e9)):
    print(f"{name}: weights+grads+Adam = 16 Psi = {16 * psi / GB:,.0f} GB  -> at least "
          f"{math.ceil(16 * psi / (80 * GB))} x 80 GB GPUs before activations")
flops = scaling.training_flops(70e9, 1.4e12)
gpu_years = flops / (scaling.H100_BF16_PEAK * 0.4) / (365 * 24 * 3600)
print(f"Chinchilla: C = 6 N D = {flops:.3g} FLOPs = {gpu_years:,.0f} H100-years at 40% MFU")
assert flops == 6 * 70e9 * 1.4e12 and 16 * 7e9 > 80 * GB

# %% [markdown]
# A 7B model does not fit on one 80 GB GPU even without activations, and Chinchilla would take one
# GPU about 47 years. Both numbers say the same thing: the model and its step must be split over
# hundreds of devices, and splitting along one axis is not enough. Pure data parallelism leaves the
# 112 GB on every device; ZeRO-3 fixes memory but all-gathers every weight every step; tensor
# parallelism is fast inside one NVLink node but its per-layer all-reduces would crawl across nodes;
# pipeline parallelism is cheap on the network but idles in its bubble. Foundation-model training
# uses all of them, each on the links that suit it.
#
# ## 2. Core concepts
#
# **The device mesh.** $K = \mathrm{DP} \cdot \mathrm{TP} \cdot \mathrm{PP}$ devices get coordinates
# $(d, t, p)$. `groups.DeviceMesh` numbers them $r = (p \cdot \mathrm{DP} + d)\,\mathrm{TP} + t$: the
# TP coordinate varies fastest, so a TP group is a run of consecutive ranks, i.e. one node with
# fast NVLink; DP comes next and PP is outermost (the order Megatron-LM uses). A **group along an
# axis** is the set of ranks that agree on the other two coordinates: the TP group of rank $r$
# all-reduces activations, its DP group all-reduces gradients, its PP group passes activations along.
#
# **The memory model** (bytes on one device, $\Psi$ parameters, $L$ layers, hidden size $h$, $a$
# heads, sequence length $s$, micro-batch $b$):
#
# $$M = \frac{2\Psi}{\mathrm{TP}\cdot\mathrm{PP}\,[\cdot\mathrm{DP}]_{Z3}}
#  + \frac{2\Psi}{\mathrm{TP}\cdot\mathrm{PP}\,[\cdot\mathrm{DP}]_{Z\ge2}}
#  + \frac{12\Psi}{\mathrm{TP}\cdot\mathrm{PP}\,[\cdot\mathrm{DP}]_{Z\ge1}}
#  + \underbrace{s b h \Big(34 + \frac{5 a s}{h}\Big)\frac{1}{\mathrm{TP}}}_{\text{per layer}}
#    \cdot \frac{L}{\mathrm{PP}} \cdot m_{\text{in flight}}$$
#
# where the bracketed factor applies from the ZeRO stage named. The activation term is Korthikanti
# et al. (2022) for 16-bit activations with dropout masks and sequence parallelism (without it, the
# LayerNorm and dropout share, $10\,sbh$, is not divided by TP). The $5as/h$ term is the attention
# scores and their softmax; selective recomputation (or FlashAttention) never stores it, and full
# recomputation keeps only the $2sbh$ input of each layer. Under 1F1B the first pipeline stage holds $\mathrm{PP}$ micro-batches in
# flight, so pipelining does **not** shrink that stage's activation memory: $L/\mathrm{PP}$ layers
# times $\mathrm{PP}$ micro-batches is $L$ layers' worth.
#
# **Scaling laws.** Hoffmann et al. (2022) fit the final loss of a model with $N$ parameters trained
# on $D$ tokens as $L(N, D) = E + A/N^{\alpha} + B/D^{\beta}$ with $E = 1.69$, $A = 406.4$,
# $B = 410.7$, $\alpha = 0.34$, $\beta = 0.28$ (here $\alpha, \beta$ are exponents, not the network's).
# For a budget $C = 6ND$ the compute-optimal $N$ minimises $L(N, C/6N)$.
#
# **MFU and HFU.** Model FLOP utilisation = (model FLOPs per token) $\cdot$ tokens/s $/ F$, with $F$ the
# peak: the share of the peak spent on the model's own arithmetic. A token costs $6N$ FLOPs in the
# matrix products (2 forward, 4 backward per parameter) plus $12\,l\,h\,s$ in attention's score and
# value products ($l$ layers, hidden size $h$, sequence length $s$; the PaLM paper's count). Hardware FLOP
# utilisation also counts what activation recomputation redoes: a whole extra forward ($2N + 4lhs$)
# with full recomputation, as in Megatron-LM's Eq. 3, so HFU $\ge$ MFU for the same run.

# %%
dmesh = groups.DeviceMesh(2, 2, 2)
print(f"{dmesh}: {dmesh.size} ranks")
print(" rank  (d, t, p)   tp group   dp group   pp group")
for r in range(dmesh.size):
    print(f"{r:>5}  {str(dmesh.coords(r)):<10} {str(dmesh.group(r, 'tp')):<10} {str(dmesh.group(r, 'dp')):<10} "
          f"{dmesh.group(r, 'pp')}")
for axis in groups.AXES:
    axis_groups = dmesh.groups(axis)
    assert sorted(r for g in axis_groups for r in g) == list(range(dmesh.size))  # each axis partitions the ranks
    print(f"{axis} groups: {axis_groups}")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# | axis | what is split | what moves | when | bytes per device per step |
# |---|---|---|---|---|
# | TP | each layer's matrices (Megatron: $W_1$, $W_q, W_k, W_v$ by columns; $W_2$, $W_o$ by rows) | all-reduce of activations | 2 per layer forward, 2 backward, on the critical path | $4 \frac{L}{\mathrm{PP}} m \cdot 2\frac{\mathrm{TP}-1}{\mathrm{TP}} \cdot 2sbh$ |
# | PP | the stack of layers | activations forward, their gradients backward | once per micro-batch per stage boundary | $2m \cdot 2sbh$ (interior stage) |
# | DP | the batch | all-reduce (or reduce-scatter + all-gather under ZeRO) of the gradients | once per step, overlappable with backward | $2\frac{\mathrm{DP}-1}{\mathrm{DP}} \cdot \frac{2\Psi}{\mathrm{TP}\cdot\mathrm{PP}}$ |
#
# The TP traffic scales with activations and is paid inside every layer, so TP stays inside a node.
# PP traffic is small (one activation per micro-batch per boundary), so PP is what crosses the
# slowest links. DP traffic is large but happens once per step and overlaps with backward, and it
# shrinks as TP and PP split the model. `mesh.comm_per_step` evaluates the table; here it is for a
# 70B model ($L = 80$, $h = 8192$, $s = 4096$, micro-batch 1, 16 micro-batches) on 512 GPUs.

# %%
P70 = dict(psi=70e9, layers=80, hidden=8192, seq=4096, batch=1, heads=64)
comm_rows = []
for dp, tp, pp in [(512, 1, 1), (64, 8, 1), (16, 8, 4), (8, 8, 8)]:
    v = mesh.comm_per_step(P70["psi"], P70["layers"], P70["hidden"], P70["seq"], 1, 16, dp, tp, pp)
    comm_rows.append(((dp, tp, pp), v))
    print(f"(dp, tp, pp) = {(dp, tp, pp)!s:<13} DP {v['dp'] / GB:7.1f} GB  TP {v['tp'] / GB:7.1f} GB  "
          f"PP {v['pp'] / GB:5.2f} GB per device per step")
fig, ax = plt.subplots(figsize=(7, 3))
labels = [str(c) for c, _ in comm_rows]
bottom = np.zeros(len(comm_rows))
for axis in groups.AXES:
    vals = np.array([v[axis] / GB for _, v in comm_rows])
    ax.bar(labels, vals, bottom=bottom, label=axis.upper())
    bottom += vals
ax.set_ylabel("GB sent per device per step")
ax.set_xlabel("(dp, tp, pp)")
ax.set_title("70B, 16 micro-batches of 1 x 4096 tokens: traffic by axis")
ax.legend()
plt.show()

# %% [markdown]
# Pure DP sends about twice the bf16 gradient (280 GB) per device per step; TP=8 cuts that by 8 but
# adds hundreds of GB of activation all-reduces, which is why those must ride NVLink (~900 GB/s)
# rather than the inter-node network (~50 GB/s per GPU). PP's share is tiny.
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# **Sub-group communicators.** Every collective of Chapter 4 and every parallel function of
# Chapters 15 and 16 takes a communicator with `rank`, `size`, `send`, `recv`. `groups.SubComm(comm,
# ranks)` presents one group of a mesh as such a communicator: its `rank` is the index in the group
# and `send`/`recv` translate to global ranks (read `_send` and `_recv` below: one line each). So `ring_allreduce(SubComm(comm, tp_group), x)` is an
# all-reduce over the TP group only, with no new collective code. Two distinct ranks of a mesh
# share at most one axis group, so the messages of different groups never mix on a link. First,
# every collective on every sub-group of a $(2, 3, 2)$ mesh against NumPy. The code of the sub-group and
# of the mesh's numbering, and then of the composed training step described next:

# %%
from scaleoutai.notebooks import show

show(groups.SubComm, groups.DeviceMesh.coords, mesh.train_mesh)

# %% [markdown]
# The check:

# %%
def subgroup_collectives(comm, dmesh):
    out = {}
    for axis in groups.AXES:
        sub = groups.SubComm(comm, dmesh.group(comm.rank, axis))
        x = np.arange(5.0) + 10 * comm.rank
        out[axis] = (collectives.ring_allreduce(sub, x), collectives.reduce_scatter(sub, x), collectives.all_gather(sub, x[:1]))
        sub.barrier()
    return out


m12 = groups.DeviceMesh(2, 3, 2)
res = cluster.run(subgroup_collectives, m12.size, args=(m12,), timeout=60)
for r, out in enumerate(res.values):
    for axis in groups.AXES:
        g = m12.group(r, axis)
        total = sum(np.arange(5.0) + 10 * q for q in g)
        np.testing.assert_array_equal(out[axis][0], total)
        np.testing.assert_array_equal(out[axis][1], np.array_split(total, len(g))[g.index(r)])
        np.testing.assert_array_equal(out[axis][2], [10.0 * q for q in g])
print(f"ring all-reduce, reduce-scatter, all-gather on all {sum(len(m12.groups(a)) for a in groups.AXES)} "
      f"sub-groups of {m12} equal NumPy")

# %% [markdown]
# **The composed step.** `mesh.train_mesh` runs on every rank of the mesh. Rank $(d, t, p)$:
#
# 1. keeps the layers of stage $p$ (`pipeline.split_layers`), each cut Megatron-style for TP rank
#    $t$ (`tensor.shard_block`);
# 2. takes its data-parallel shard `np.array_split(X, DP)[d]` and cuts it into $m$ micro-batches;
# 3. runs the 1F1B (or GPipe) schedule of Chapter 16 over its PP group: receive the activation from
#    stage $p-1$, run its blocks with `tensor.tp_block_forward` over its TP group, send to $p+1$; the
#    last stage computes the loss of each micro-batch weighted by its share of the global batch;
#    backward runs the same way in reverse with `tensor.tp_block_backward`;
# 4. sums its gradient shards over its DP group with the bucketed ring all-reduce of Chapter 15
#    (`ddp.bucketed_ddp_step`) and takes an SGD (or Adam) step on its shards.
#
# LayerNorm parameters and the MLP's output bias are replicated across the TP group, and their
# gradients come out identical on every TP rank (they are computed from all-reduced activations), so
# only the DP all-reduce touches them. The reference is the same stack trained on one device,
# `mesh.reference_train`. Every mesh, including one with all three axes, must agree with it to
# rounding error after `STEPS` steps.

# %%
rng = np.random.default_rng(SEED)
params0 = mesh.stack_init(LAYERS, D_MODEL, HEADS, D_FF, seed=SEED)
data = [(rng.standard_normal((BATCH, SEQ, D_MODEL)), 0.5 * rng.standard_normal((BATCH, SEQ, D_MODEL)))
        for _ in range(3)]
psi = sum(v.size for v in params0.values())
t0 = time.perf_counter()
ref, ref_losses = mesh.reference_train(data, params0, STEPS, LR, HEADS)
print(f"model: {LAYERS} blocks, Psi = {psi:,} parameters; single device loss {ref_losses[0]:.4f} -> "
      f"{ref_losses[-1]:.4f} in {time.perf_counter() - t0:.2f} s")

MESHES = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1), (3, 2, 1), (1, 1, 2), (2, 2, 2)]
runs = {}
for shape in MESHES:
    t0 = time.perf_counter()
    r = mesh.run_mesh(groups.DeviceMesh(*shape), data, params0, STEPS, LR, HEADS, micro_batches=MICRO)
    err = max(float(np.max(np.abs(r.params[k] - ref[k]))) for k in ref)
    assert err < 1e-10, (shape, err)
    np.testing.assert_allclose(r.losses, ref_losses, rtol=1e-10)
    runs[shape] = r
    print(f"mesh (dp, tp, pp) = {shape}: {r.mesh.size} ranks, max |param - reference| = {err:.1e}, "
          f"{time.perf_counter() - t0:.2f} s wall")

# %% [markdown]
# Every mesh lands on the single-device parameters to about $10^{-16}$: composition changes where
# the arithmetic happens and in which order sums are taken, nothing else.
#
# **Traffic, measured.** `SubComm` counts what each group sends, so the run reports bytes per axis;
# the model of Section 3 must predict them (float64 here, so 8 bytes per value; the global batch
# divides evenly in this check). The DP term assumes all $\Psi$ parameters are split by TP, but
# LayerNorms and one bias stay replicated, $5h$ of each block's parameters: the model is off by
# that fraction, and exact when TP = 1.

# %%
b_micro = BATCH // (2 * MICRO)
r = mesh.run_mesh(groups.DeviceMesh(2, 2, 2), [(X[: 2 * MICRO * b_micro], Y[: 2 * MICRO * b_micro]) for X, Y in data],
                params0, STEPS, LR, HEADS, micro_batches=MICRO, bucket_bytes=1 << 30)
model = mesh.comm_per_step(psi, LAYERS, D_MODEL, SEQ, b_micro, MICRO, 2, 2, 2, grad_bytes=8, act_bytes=8)
replicated = LAYERS * 5 * D_MODEL
print("rank (d,t,p)   measured dp / tp / pp bytes per step      model dp / tp / pp")
for rank, v in enumerate(r.values):
    got = {a: v["bytes"][a] / STEPS for a in groups.AXES}
    print(f"{rank:>4} {str(v['coords']):<9} {got['dp']:>10,.0f} {got['tp']:>10,.0f} {got['pp']:>8,.0f}   "
          f"{model['dp']:>10,.0f} {model['tp']:>10,.0f} {model['pp']:>8,.0f}")
    assert got["tp"] == model["tp"]
    assert got["pp"] == model["pp"] / 2  # a 2-stage pipeline has no interior stage: each sends one way
    # ring factor 2(dp-1)/dp = 1; each stage holds replicated/pp unsplit values the model counts as split by tp
    assert np.isclose(got["dp"], model["dp"] + 8 * (replicated / 2) * (1 - 1 / 2), rtol=1e-12)
    assert sum(got.values()) * STEPS == v["bytes"]["total"] <= r.run.stats[rank].bytes_sent

# %% [markdown]
# ## 5. The same task with a production library
#
# PyTorch expresses the same composition with `torch.distributed.device_mesh.init_device_mesh`, which
# builds the process groups of every axis from one shape, and DTensor-based APIs that take a mesh
# dimension: `parallelize_module(model, mesh["tp"], {...: ColwiseParallel(), ...: RowwiseParallel()})`
# for Megatron tensor parallelism and `fully_shard(model, mesh=mesh["dp"])` (FSDP2, i.e. ZeRO-3) on
# the data-parallel dimension. Below, 2 real processes (gloo on CPU) build a $(1, 2)$ mesh (pure TP)
# and a $(2, 1)$ mesh (pure FSDP) in the same run, parallelize a 2-layer MLP, take `PROC_STEPS` SGD
# steps and gather the full weights with `DTensor.full_tensor()`. The reference is one-device torch
# and our NumPy MLP trained by `ddp.reference_train`, in float64, tolerance $10^{-12}$. (A $(2, 2)$ mesh
# needs 4 processes; on a 2-core machine that is too slow for this notebook, but the code is the same.)

# %%
from scaleoutai.parallel import ddp
from scaleoutai import nn

D_IN, D_HID = 8, 16
mlp0 = nn.mlp_init([D_IN, D_HID, D_IN], seed=SEED)
mlp_data = [(rng.standard_normal((8, D_IN)), rng.standard_normal((8, D_IN)))]


def torch_mesh_mlp(comm, mlp0, mlp_data, steps, lr):
    """On each of 2 processes: FSDP + TP on a 2-D DeviceMesh, two mesh shapes; full weights back."""
    import torch
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    out = {}
    for dp, tp in ((1, 2), (2, 1)):
        dmesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
        net = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_IN)).double()
        with torch.no_grad():
            for i, lin in ((0, net[0]), (1, net[2])):
                lin.weight.copy_(torch.from_numpy(mlp0[f"W{i}"].T))
                lin.bias.copy_(torch.from_numpy(mlp0[f"b{i}"]))
        parallelize_module(net, dmesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        fully_shard(net, mesh=dmesh["dp"])
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        d = dmesh.get_coordinate()[0]
        for s in range(steps):
            X, Y = mlp_data[s % len(mlp_data)]
            x, y = (torch.from_numpy(np.array_split(a, dp)[d]) for a in (X, Y))
            loss = ((net(x) - y) ** 2).mean()  # equal dp shards: FSDP's gradient average = full-batch mean
            opt.zero_grad()
            loss.backward()
            opt.step()
        kinds = {type(p).__name__ for p in net.parameters()}
        out[(dp, tp)] = ({n: p.full_tensor().detach().numpy().copy() for n, p in net.named_parameters()}, kinds)
    return out


def torch_single(mlp0, mlp_data, steps, lr):
    import torch
    import torch.nn as nn

    net = nn.Sequential(nn.Linear(D_IN, D_HID), nn.ReLU(), nn.Linear(D_HID, D_IN)).double()
    with torch.no_grad():
        for i, lin in ((0, net[0]), (1, net[2])):
            lin.weight.copy_(torch.from_numpy(mlp0[f"W{i}"].T))
            lin.bias.copy_(torch.from_numpy(mlp0[f"b{i}"]))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    for s in range(steps):
        X, Y = mlp_data[s % len(mlp_data)]
        loss = ((net(torch.from_numpy(X)) - torch.from_numpy(Y)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {n: p.detach().numpy().copy() for n, p in net.named_parameters()}


single = torch_single(mlp0, mlp_data, PROC_STEPS, LR)
np_ref, _ = ddp.reference_train(mlp_data, mlp0, PROC_STEPS, LR)
names = {"0.weight": ("W0", True), "0.bias": ("b0", False), "2.weight": ("W1", True), "2.bias": ("b1", False)}
for n, (k, transpose) in names.items():
    np.testing.assert_allclose(single[n], np_ref[k].T if transpose else np_ref[k], rtol=1e-12, atol=1e-12)
t0 = time.perf_counter()
prod = cluster.run(torch_mesh_mlp, 2, backend="process", args=(mlp0, mlp_data, PROC_STEPS, LR),
                   timeout=180, quiet=True)
assert len(prod.values) == 2 and all(len(out) == 2 for out in prod.values)  # both ranks ran both mesh shapes
for rank, out in enumerate(prod.values):
    for shape, (weights, kinds) in out.items():
        for n in names:
            np.testing.assert_allclose(weights[n], single[n], rtol=1e-12, atol=1e-12)
        print(f"rank {rank}, mesh (dp, tp) = {shape}: parameters are {kinds}; "
              f"after {PROC_STEPS} step(s) equal to one-device torch and NumPy within 1e-12")
print(f"2 processes, 2 mesh shapes: {time.perf_counter() - t0:.1f} s wall")

# %% [markdown]
# On GPUs the same code takes `init_device_mesh("cuda", (dp, tp))` and NCCL; a real 3-D run adds
# `torch.distributed.pipelining` on a third mesh dimension, and TorchTitan packages all of it
# (plus context parallelism and float8) behind a config file.
#
# ## 6. Failure modes and fault tolerance
#
# **Group mismatch.** A mesh only works if every member of a group calls the same collectives in
# the same order. If one rank of a TP group reduces over its DP group instead, both groups wait for
# messages that never come; the simulator detects the cycle and names the waiting ranks (on real
# hardware this is a hang until the NCCL watchdog times out, by default after 10 minutes).

# %%
def mismatched(comm, dmesh):
    axis = "dp" if comm.rank == 1 else "tp"  # rank 1 takes the wrong group
    return collectives.ring_allreduce(groups.SubComm(comm, dmesh.group(comm.rank, axis)), np.ones(4))


try:
    cluster.run(mismatched, 4, args=(groups.DeviceMesh(2, 2, 1),), timeout=30)
    raise AssertionError("a mismatched collective must not complete")
except cluster.DeadlockError as exc:
    print("detected:", str(exc)[:200])

# %% [markdown]
# **One crashed device stops the step everywhere.** The step is synchronous across all three axes,
# so a fail-stop crash of one rank blocks its TP group at the next all-reduce, that group's PP
# neighbours at the next activation and, through the DP all-reduce, every replica: the blast radius
# is the whole mesh. With 16,384 GPUs and a per-GPU failure every few years, a job sees a failure every
# few hours (Llama 3 reported 419 interruptions in 54 days). The remedy is Chapter 18: frequent
# atomic checkpoints (sharded: each rank writes its own shards) and a restart, possibly on a
# re-shaped mesh.

# %%
try:
    cluster.run(mesh.train_mesh, 4, args=(groups.DeviceMesh(2, 2, 1), data, params0, 2, LR, HEADS),
                faults=cluster.Faults(crash={3: 5}), timeout=30)
    raise AssertionError("a crashed rank must stop the step")
except cluster.RankError as exc:
    print(f"rank {exc.rank} failed: {exc.summary[:120]}")

# %% [markdown]
# **Out of memory** is the failure most runs meet first, and the memory model of the next section
# is how to avoid it: choose (DP, TP, PP, ZeRO stage, recomputation) so that the busiest device fits
# with headroom for fragmentation and communication buffers. **Numerical divergence** (loss spikes
# in bf16) is the other classic; the fp32 master weights in the $12\Psi$ term exist to prevent it.
#
# ## 7. Evaluation: speedup, efficiency, cost
#
# **What fits on an 80 GB GPU.** The memory model for a 7B model ($L = 32$, $h = 4096$, $a = 32$)
# and a 70B model ($L = 80$, $h = 8192$, $a = 64$) at $s = 4096$, micro-batch 1, under several
# meshes and ZeRO stages, with sequence parallelism and 1F1B, storing everything (`none`), everything but
# the attention scores (`selective`) or only each layer's input (`full` recomputation).

# %%
P7 = dict(psi=7e9, layers=32, hidden=4096, seq=4096, batch=1, heads=32)
CONFIGS = [("7B", P7, (1, 1, 1, 0), "none"), ("7B", P7, (8, 1, 1, 3), "none"), ("7B", P7, (8, 1, 1, 3), "selective"),
           ("7B", P7, (8, 1, 1, 1), "selective"), ("7B", P7, (1, 8, 1, 0), "none"),
           ("70B", P70, (64, 1, 1, 3), "selective"), ("70B", P70, (64, 1, 1, 3), "full"),
           ("70B", P70, (8, 8, 1, 0), "selective"), ("70B", P70, (8, 8, 1, 1), "none"),
           ("70B", P70, (8, 8, 1, 1), "selective"), ("70B", P70, (4, 8, 4, 1), "selective"),
           ("70B", P70, (8, 4, 4, 1), "full")]
mems = {}
print(f"{'model':>5} {'(dp,tp,pp,zero)':>16} {'recompute':>9} {'params':>7} {'grads':>7} {'optim':>7} "
      f"{'activ':>7} {'total GB':>9}  fits 80 GB?")
for name, cfg, (dp, tp, pp, z), rc in CONFIGS:
    mem = mesh.memory_per_device(cfg["psi"], cfg["layers"], cfg["hidden"], cfg["seq"], cfg["batch"], cfg["heads"],
                               dp, tp, pp, z, recompute=rc)
    mems[(name, (dp, tp, pp, z), rc)] = mem
    print(f"{name:>5} {str((dp, tp, pp, z)):>16} {rc:>9} " +
          " ".join(f"{mem[k] / GB:7.1f}" for k in ("params", "grads", "optimizer", "activations")) +
          f" {mem['total'] / GB:9.1f}  {'yes' if mem['total'] <= 80 * GB else 'NO'}")
fits = {k: m["total"] <= 80 * GB for k, m in mems.items()}
assert not fits[("7B", (1, 1, 1, 0), "none")] and not fits[("7B", (8, 1, 1, 3), "none")]
assert fits[("7B", (8, 1, 1, 3), "selective")] and fits[("70B", (8, 8, 1, 1), "selective")]
assert not fits[("70B", (8, 8, 1, 1), "none")] and not fits[("70B", (8, 8, 1, 0), "selective")]
rows = [(f"{n} {c} {rc}", m) for (n, c, rc), m in mems.items()]

fig, ax = plt.subplots(figsize=(9, 4))
left = np.zeros(len(rows))
for k in ("params", "grads", "optimizer", "activations"):
    vals = np.array([m[k] / GB for _, m in rows])
    ax.barh([lab for lab, _ in rows], vals, left=left, label=k)
    left += vals
ax.axvline(80, color="k", ls="--", lw=1)
ax.text(81, 0, "80 GB", va="center")
ax.set_xscale("symlog", linthresh=10)
ax.set_xlabel("GB per device (symlog)")
ax.invert_yaxis()
ax.legend(loc="lower right")
ax.set_title("Memory per device: model (dp, tp, pp, ZeRO stage) recomputation")
plt.show()

# %% [markdown]
# At $s = 4096$ the activations, not the weights, decide. Even ZeRO-3 over 8 GPUs leaves a 7B model
# at 118 GB because each layer stores $5as/h = 160$ bytes per token-channel of attention scores,
# five times the other 34. Dropping that term (selective recomputation of the attention core,
# or FlashAttention, which never materialises the scores) brings it to 32 GB; pure TP = 8 fits too,
# because with sequence parallelism it divides activations as well as weights. For 70B, ZeRO-3 over
# 64 GPUs fits only with full recomputation (about a third more compute), and TP = 8 needs ZeRO-1
# on top (the 12 bytes per parameter of Adam state) plus selective recomputation. Adding PP = 4
# divides the weights further but, under 1F1B, not stage 0's activations.
#
# **Speedup and efficiency on the simulator.** The from-scratch runs can be timed in simulated
# seconds: each block costs `t_row` seconds per sequence forward (twice that backward), divided by
# TP, and the network is $\alpha = 5\,\mu s$, $\beta = 1/(10\text{ GB/s})$. On $K$ devices
# $S_K = T_1/T_K$ and $E_K = S_K/K$.

# %%
t_row, net = 2e-4, cluster.Network(alpha=5e-6, beta=1e-10)
sim = {}
for shape in MESHES:
    dp, tp, pp = shape
    rows_per_micro = BATCH / (dp * MICRO)
    t_f = t_row * rows_per_micro / tp
    r = mesh.run_mesh(groups.DeviceMesh(*shape), data, params0, 2, LR, HEADS, micro_batches=MICRO,
                    network=net, compute=(t_f, 2 * t_f))
    sim[shape] = r.run.sim_time / 2
T1 = sim[(1, 1, 1)]
print(f"{'(dp,tp,pp)':>10} {'K':>3} {'step (sim ms)':>14} {'S_K':>6} {'E_K':>6}")
for shape, t in sim.items():
    n_dev = math.prod(shape)
    print(f"{str(shape):>10} {n_dev:>3} {t * 1e3:>14.3f} {T1 / t:>6.2f} {T1 / t / n_dev:>6.2f}")
    assert t <= T1 * 1.0001 or n_dev == 1
e_pp = T1 / sim[(1, 1, 2)] / 2
assert abs(e_pp - MICRO / (MICRO + 1)) < 0.02, e_pp  # 1 - bubble (PP-1)/(m+PP-1) with PP = 2

# %% [markdown]
# DP scales best (its one all-reduce is amortised over the whole step); TP pays for its four
# all-reduces per layer; PP with only `MICRO` micro-batches per replica pays the bubble
# $(\mathrm{PP}-1)/(m + \mathrm{PP}-1)$ of Chapter 16.
#
# **The compute-optimal frontier.** For budgets from $10^{18}$ to $10^{26}$ FLOPs, the $N$ that
# minimises the Chinchilla loss at fixed $C = 6ND$, found numerically (`scaling.compute_optimal`, a
# golden-section search on $\log N$) and checked against the closed form
# $N^* = G\,(C/6)^{\beta/(\alpha+\beta)}$, $G = (\alpha A / \beta B)^{1/(\alpha+\beta)}$, compared with the
# rule of thumb $D = 20N$ (from the paper's other two estimation approaches).

# %%
budgets = np.logspace(18, 26, 17)
opt = np.array([scaling.compute_optimal(c) for c in budgets])
closed = np.array([scaling.compute_optimal_closed_form(c) for c in budgets])
np.testing.assert_allclose(opt, closed, rtol=1e-5)
N20 = np.sqrt(budgets / 120)  # C = 6 N (20 N)
loss_opt = scaling.chinchilla_loss(opt[:, 0], opt[:, 1])
loss_20 = scaling.chinchilla_loss(N20, 20 * N20)
assert np.all(loss_opt <= loss_20 + 1e-12)
fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
a1.loglog(budgets, opt[:, 0], label="N* (parametric fit)")
a1.loglog(budgets, N20, "--", label="N with D = 20 N")
a1.loglog(budgets, opt[:, 1], label="D* tokens")
a1.set_xlabel("compute C (FLOPs)")
a1.set_ylabel("parameters / tokens")
a1.legend()
a1.set_title("compute-optimal allocation")
a2.semilogx(budgets, loss_opt, label="L(N*, D*)")
a2.semilogx(budgets, loss_20, "--", label="L with D = 20 N")
a2.axhline(1.69, color="gray", lw=0.8, ls=":", label="E = 1.69")
a2.set_xlabel("compute C (FLOPs)")
a2.set_ylabel("predicted loss (nats/token)")
a2.legend()
a2.set_title("the frontier")
plt.show()
N_c, D_c = scaling.compute_optimal(5.88e23)
print(f"at Chinchilla's budget 5.88e23: N* = {N_c / 1e9:.1f}B, D* = {D_c / 1e12:.2f}T "
      f"({D_c / N_c:.0f} tokens/parameter), loss {scaling.chinchilla_loss(N_c, D_c):.4f}; "
      f"70B on 1.4T: {scaling.chinchilla_loss(70e9, 1.4e12):.4f}")

# %% [markdown]
# With the published fit (approach 3), the optimum wants far more than 20 tokens per parameter
# (about 90 at Chinchilla's budget, growing with $C$), while approaches 1 and 2 of the same paper, and the
# model they trained, give about 20. The loss surface is flat near the optimum: both allocations
# predict losses within about 0.01 nats. (A later replication, Besiroglu et al. 2024, refits these
# constants and lands closer to 20.) In practice models are trained well past either point because
# inference cost grows with $N$, not $D$.
#
# **MFU, HFU and cost.** For a run that processes `tokens_per_s` tokens per second per GPU, the cell
# below reports MFU without and with the attention term, and HFU with selective and with full
# recomputation, for two model shapes at sequence length 4096. Full recomputation adds one forward,
# $2N + 4lhs$, to the $6N + 12lhs$ of the model, so HFU is exactly $4/3$ of MFU; the cell also checks
# that Megatron-LM's Eq. 3 is this same full-recomputation count. Papers differ in which count they
# report, so compare a figure only with one computed the same way. Llama 3 405B reported 38-43% bf16
# MFU on H100s; at 40% the cost of Chinchilla's budget follows, at the H100 list price of
# `capstone/prices.yaml`.

# %%
SEQ_LONG = 4096  # a planning shape, not the from-scratch SEQ
for N, layers, hidden, tps in ((7e9, 32, 4096, 9500), (70e9, 80, 8192, 950)):
    u6 = scaling.mfu(tps, N)
    u = scaling.mfu(tps, N, layers=layers, hidden=hidden, seq=SEQ_LONG)
    h = scaling.hfu(tps, N, layers=layers, hidden=hidden, seq=SEQ_LONG, recompute="full")
    h_sel = scaling.hfu(tps, N, layers=layers, hidden=hidden, seq=SEQ_LONG, recompute="selective")
    print(f"N = {N / 1e9:.0f}B (l={layers}, h={hidden}, s={SEQ_LONG}) at {tps:,} tokens/s per H100: "
          f"MFU 6N only {u6:.1%}, with attention {u:.1%}; HFU selective {h_sel:.1%}, full {h:.1%}")
    assert u6 < u < h_sel < h
    assert scaling.hfu(tps, N, layers=layers, hidden=hidden, seq=SEQ_LONG, recompute="none") == u
    # full recomputation redoes one forward: HFU / MFU = (8N + 16lhs) / (6N + 12lhs) = 4/3 exactly
    assert abs(h / u - 4 / 3) < 1e-12
assert abs(scaling.mfu(950, 70e9) - 6 * 70e9 * 950 / 989e12) < 1e-15
# Megatron-LM's Eq. 3 per token (vocabulary left out) is the full-recomputation count for N = 12 l h^2
l_, h_ = 80, 8192
eq3 = scaling.megatron_flops_per_iteration(1, SEQ_LONG, l_, h_, 0) / SEQ_LONG
assert np.isclose(eq3, scaling.hardware_flops_per_token(12 * l_ * h_**2, l_, h_, SEQ_LONG, "full"), rtol=1e-12)

from scaleoutai import capstone

p5 = capstone.lookup("aws-p5.48xlarge")
gpu_price = p5.price_per_hour / p5.gpus  # one H100's share of the 8-GPU instance
gpu_hours = scaling.training_flops(70e9, 1.4e12) / (0.4 * scaling.H100_BF16_PEAK) / 3600
print(f"Chinchilla (5.88e23 FLOPs) at 40% MFU: {gpu_hours:,.0f} H100-hours = "
      f"{gpu_hours / 2048 / 24:.1f} days on 2,048 GPUs; at {gpu_price:.2f} USD per GPU-hour "
      f"({p5.instance_type} / {p5.gpus}, list price of {p5.date}): {gpu_hours * gpu_price / 1e6:.1f} M USD")

# %% [markdown]
# **On a GPU.** If this machine has CUDA, the next cell trains one bf16 transformer block
# (`torch.nn.TransformerEncoderLayer`, $h = 2048$, 16 heads, $s = 2048$) for `GPU_STEPS` steps with
# AdamW and reports tokens/s and MFU against the peak of the detected GPU (989 TFLOP/s dense bf16
# for an H100 SXM; a table of other peaks is in the cell), with the attention term ($l = 1$) and without
# it. Nothing is recomputed here, so HFU equals the MFU with attention.

# %%
import torch

PEAKS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12, "L4": 121e12}
if torch.cuda.is_available():
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAKS.items() if k in gpu), scaling.H100_BF16_PEAK)
    h, heads, s, b = 2048, 16, 2048, 8
    block = torch.nn.TransformerEncoderLayer(h, heads, 4 * h, dropout=0.0, batch_first=True, norm_first=True,
                                             device=dev, dtype=torch.bfloat16)
    n_params = sum(p.numel() for p in block.parameters())
    opt_gpu = torch.optim.AdamW(block.parameters(), lr=1e-4)
    x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16)

    def gpu_step():
        opt_gpu.zero_grad(set_to_none=True)
        block(x).float().pow(2).mean().backward()
        opt_gpu.step()

    for _ in range(3):
        gpu_step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(GPU_STEPS):
        gpu_step()
    torch.cuda.synchronize()
    tok_s = GPU_STEPS * b * s / (time.perf_counter() - t0)
    u6, u = scaling.mfu(tok_s, n_params, peak), scaling.mfu(tok_s, n_params, peak, layers=1, hidden=h, seq=s)
    assert 0 < u6 < u < 1, (u6, u)
    print(f"{gpu}: block of {n_params / 1e6:.1f}M parameters, {tok_s:,.0f} tokens/s; MFU against "
          f"{peak / 1e12:.0f} TFLOP/s: {u6:.1%} with 6N only, {u:.1%} with attention (= HFU: no recomputation)")
else:
    print("No CUDA device: skipping the GPU cell. With a GPU it trains one bf16 transformer block "
          "(h=2048, 16 heads, s=2048, batch 8) with AdamW and reports tokens/s and "
          "MFU = 6 N tokens/s / peak (989 TFLOP/s for an H100).")

# %% [markdown]
# ## 8. Exercises
#
# 1. **ZeRO on the DP axis.** Replace the DP all-reduce in `train_mesh` by the sharded-gradient
#    pattern of Chapter 16's stage 2 (reduce-scatter the gradient shards over the DP group, Adam on one
#    block, all-gather) and check it still equals `mesh.reference_train` with Adam. How do the measured
#    DP bytes change?
# 2. **Mesh order.** Write a `DeviceMesh` variant with DP fastest. On the simulator, give links
#    inside a "node" of 2 consecutive ranks a lower $\beta$ (hint: wrap the communicator and call
#    `compute` for the extra time) and compare step times of TP-inside-node and TP-across-nodes.
# 3. **Bubble vs memory.** For the 70B model at (8, 8, 4), sweep the number of micro-batches $m$ and
#    plot the bubble $(\mathrm{PP}-1)/(m+\mathrm{PP}-1)$ against the DP traffic per token. What $m$
#    would you pick, and what does it do to the global batch?
# 4. **A 405B plan.** Using `memory_per_device` and `comm_per_step`, find the smallest number of
#    80 GB GPUs that fits a 405B model ($L = 126$, $h = 16384$, $a = 128$, $s = 8192$) with TP $\le 8$,
#    and report its traffic per axis.
# 5. **Scaling-law budget.** You have 1,000 H100s for 30 days at 40% MFU. What compute-optimal
#    $(N, D)$ does the parametric fit give, what does the $D = 20N$ rule give, and which would you
#    train if the model will serve $10^{13}$ tokens of inference?
#
# ## 9. Research directions
#
# - **Choosing the parallel layout automatically.** The mesh shape, the order of its axes, the number of
#   micro-batches and where to recompute are still chosen by hand or by search over a small space. A
#   planner that finds the fastest layout for a given model and cluster from cost models alone, and
#   stays right as the cluster changes, is an open problem.
#   - Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
#     Megatron-LM", SC, 2021. The PTD-P composition of this chapter, its Eq. 3 FLOP count, and rules of
#     thumb for ordering the axes.
#   - Zheng et al., "Alpa: Automating Inter- and Intra-Operator Parallelism for Distributed Deep
#     Learning", OSDI, 2022. Searches pipeline stages and per-operator sharding with a cost model and
#     integer programming.
# - **Scaling laws for decisions beyond model size.** Compute-optimal allocations were fitted for one
#   architecture, one data mixture and training cost only. How the laws change with data repetition,
#   inference cost, mixture-of-experts and long context, and how reliable an extrapolation over orders of
#   magnitude is, are active questions.
#   - Hoffmann et al., "Training Compute-Optimal Large Language Models", NeurIPS, 2022. The Chinchilla
#     fits used in Section 7.
#   - Muennighoff et al., "Scaling Data-Constrained Language Models", NeurIPS, 2023. How returns fall
#     when tokens must be repeated for several epochs.
# - **Utilisation against memory and failures.** MFU in the published tables rarely passes 50%: the
#   bubble, tensor-parallel communication, recomputation and restarts after failures all cost. Closing
#   that gap without running out of memory is where much systems work goes.
#   - Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys, 2023.
#     Sequence parallelism and selective recomputation, the "selective" option of `hardware_flops_per_token`.
#   - Chowdhery et al., "PaLM: Scaling Language Modeling with Pathways", Journal of Machine Learning
#     Research, 2023. Defines MFU with the attention term and reports 46.2% for the 540B model.
#
# ## What's next
#
# Chapter 20 (Distributed reinforcement learning) leaves the synchronous step behind: actors generate the
# data while a learner trains on it, and the policy lag becomes the thing to correct. Chapter 21
# (Distributed hyperparameter optimization) then asks how to spend a cluster on many training runs at
# once, and Chapter 41 (Capstone) is where you report $S_p$, $E_p$ and cost for a design of your own.
