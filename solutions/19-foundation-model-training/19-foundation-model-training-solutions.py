# %% [markdown]
# # Chapter 19 solutions: Foundation-model training
#
# Worked solutions to the exercises of `chapters/19-foundation-model-training` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import math

import numpy as np

from scaleoutai import cluster, collectives, nn
from scaleoutai.cluster import groups
from scaleoutai.parallel import mesh, pipeline, tensor
from scaleoutai.perf import scaling

SEED = 0
GB = 1e9
N_LAYERS, WIDTH, N_HEADS, FF, SEQ_T, BATCH_T, MICRO_T = 4, 16, 4, 32, 8, 12, 2
gen = np.random.default_rng(SEED)
stack0 = mesh.stack_init(N_LAYERS, WIDTH, N_HEADS, FF, seed=SEED)
batches = [(gen.standard_normal((BATCH_T, SEQ_T, WIDTH)), 0.5 * gen.standard_normal((BATCH_T, SEQ_T, WIDTH)))
           for _ in range(3)]

# %% [markdown]
# ## Exercise 1 (coding): ZeRO on the data-parallel axis of the mesh
#
# **Answer.** Each rank of a DP group holds the same TP/PP shard of the model, so the DP group can
# shard that shard's optimizer state: flatten the rank's gradient (its TP/PP shard, keys in a fixed
# order), **reduce-scatter** it over the DP group so DP rank $d$ receives block $d$ of the sum, run Adam on
# that block only (its moments are $1/\mathrm{DP}$ of what `train_mesh` keeps), and **all-gather** the
# updated blocks into the full shard. Adam is elementwise, so the result equals `mesh.reference_train`
# with Adam to rounding, for every mesh.
#
# **DP bytes: unchanged.** A ring all-reduce *is* a reduce-scatter followed by an all-gather of the same
# vector, so the DP traffic per rank stays $2\frac{\mathrm{DP}-1}{\mathrm{DP}}$ times the bytes of the
# rank's TP/PP shard, measured equal to `train_mesh`'s to the byte below; what changes is memory: the
# Adam state per rank falls by a factor $\mathrm{DP}$. (Chapter 16 would call this pattern stage 2 as far as the wire goes: its stage 1
# all-reduces and then all-gathers, 1.5 times the traffic. Production "ZeRO-1" optimizers, e.g.
# Megatron's distributed optimizer, use the reduce-scatter form because it costs nothing extra.)

# %%
def train_mesh_zero(comm, dmesh, data, params0, steps, lr, n_heads, micro_batches):
    """train_mesh with the DP all-reduce replaced by reduce-scatter, Adam on one block, all-gather."""
    sub = {a: groups.SubComm(comm, dmesh.group(comm.rank, a)) for a in groups.AXES}
    d, t, p = dmesh.coords(comm.rank)
    mine = pipeline.split_layers(N_LAYERS, dmesh.pp)[p]
    shards = {l: tensor.shard_block(mesh.layer_params(params0, l), n_heads, dmesh.tp, t) for l in mine}
    flat = {f"{l}.{k}": v for l in mine for k, v in shards[l].items()}  # views: written back in place
    keys = sorted(flat)
    n_total = sum(flat[k].size for k in keys)
    lo, hi = collectives.block_range(n_total, dmesh.dp, d)
    m_blk, v_blk = np.zeros(hi - lo), np.zeros(hi - lo)
    for s in range(steps):
        X, Y = data[s % len(data)]
        x, y = np.array_split(X, dmesh.dp)[d], np.array_split(Y, dmesh.dp)[d]
        mbs = list(zip(np.array_split(x, micro_batches), np.array_split(y, micro_batches)))
        _, g = mesh._stage(sub, shards, mbs, len(X), n_heads, "1f1b", (0.0, 0.0))
        g_mine = collectives.reduce_scatter(sub["dp"], np.concatenate([g[k].ravel() for k in keys]))
        block = np.concatenate([flat[k].ravel() for k in keys])[lo:hi].copy()
        nn.adam_update(block, g_mine, m_blk, v_blk, s + 1, lr)
        full = collectives.all_gather(sub["dp"], block)
        off = 0
        for k in keys:
            flat[k][...] = full[off:off + flat[k].size].reshape(flat[k].shape)
            off += flat[k].size
    layers = {l: tensor.gather_block(sub["tp"], shards[l]) for l in mine}
    return {"layers": layers, "coords": (d, t, p), "dp_bytes": sub["dp"].stats.bytes_sent,
            "adam_values": m_blk.size + v_blk.size}


STEPS1, LR1 = 6, 1e-2
want1, _ = mesh.reference_train(batches, stack0, STEPS1, LR1, N_HEADS, optimizer="adam")
for shape in [(2, 1, 1), (3, 1, 1), (2, 2, 1), (2, 2, 2)]:
    dm = groups.DeviceMesh(*shape)
    res = cluster.run(train_mesh_zero, dm.size, args=(dm, batches, stack0, STEPS1, LR1, N_HEADS, MICRO_T))
    got = {}
    for v in res.values:
        if v["coords"][:2] == (0, 0):
            got.update({f"{l}.{k}": a for l, blk in v["layers"].items() for k, a in blk.items()})
    err = max(float(np.abs(got[k] - want1[k]).max()) for k in want1)
    assert err < 1e-10, (shape, err)
    plain = mesh.run_mesh(dm, batches, stack0, STEPS1, LR1, N_HEADS, micro_batches=MICRO_T, optimizer="adam")
    for v_z, v_p in zip(res.values, plain.values):
        assert v_z["dp_bytes"] == v_p["bytes"]["dp"]  # reduce-scatter + all-gather == the ring all-reduce
        held_plain = v_p["held"]["optimizer"] // 8
        assert v_z["adam_values"] * dm.dp in range(held_plain, held_plain + 2 * dm.dp)  # 1/DP of the moments
    print(f"mesh {shape}: ZeRO Adam == reference Adam (max err {err:.1e}); DP bytes per rank equal to "
          f"train_mesh's ({res.values[0]['dp_bytes']} B); Adam state per rank divided by {dm.dp}")

# %% [markdown]
# ## Exercise 2 (analysis): TP inside a node or across nodes
#
# **Answer.** Put TP inside the node. With nodes of 2 consecutive ranks, the default order (TP fastest)
# makes each TP pair a node, so the 4 activation all-reduces per layer per micro-batch ride the fast
# link and only the one gradient all-reduce per step crosses nodes; with DP fastest, the DP pairs are the
# nodes and every TP all-reduce crosses the slow link. The simulated step is clearly longer with TP across
# nodes (printed below). TP's traffic is larger *and* sits on the critical path of every layer in
# forward and backward, while DP's is once per step (and overlappable in a real DDP).
#
# **How.** `DpFirstMesh` numbers ranks $r = (p\,\mathrm{TP} + t)\,\mathrm{DP} + d$ (DP fastest) and is
# otherwise a `DeviceMesh`, so `train_mesh` runs on it unchanged; the parameters still equal the
# single-device reference (asserted). `TwoSpeedComm` wraps the simulator's communicator: the network
# has the in-node $\beta$, and a message between ranks of different nodes first charges the sender
# `compute(n (beta_inter - beta_intra))`, so it arrives after $\alpha + n\beta_\text{inter}$ (checked
# on a single message).

# %%
ALPHA2, BETA_IN, BETA_OUT = 5e-6, 1e-11, 1e-9  # NVLink-like inside a node, 1 GB/s between nodes


class DpFirstMesh(groups.DeviceMesh):
    """A DeviceMesh whose DP coordinate varies fastest: rank = (p tp + t) dp + d."""

    def coords(self, rank):
        d, rest = rank % self.dp, rank // self.dp
        return d, rest % self.tp, rest // self.tp

    def rank(self, d, t, p):
        return (p * self.tp + t) * self.dp + d


class TwoSpeedComm:
    """Wraps a simulator rank: messages between nodes of ``node`` consecutive ranks pay the slower beta."""

    def __init__(self, comm, node=2):
        self._c, self._node = comm, node
        self.rank, self.size, self.stats = comm.rank, comm.size, comm.stats

    def _extra(self, arr, dst):
        if dst // self._node != self.rank // self._node:
            self._c.compute(np.asarray(arr).nbytes * (BETA_OUT - BETA_IN))

    def send(self, arr, dst):
        self._extra(arr, dst)
        self._c.send(arr, dst)

    def sendrecv(self, arr, dst, src, out=None):
        self._extra(arr, dst)
        return self._c.sendrecv(arr, dst, src, out=out)

    def __getattr__(self, name):  # recv, barrier, compute, clock: the wrapped rank's
        return getattr(self._c, name)


def ping(comm):
    wrapped = TwoSpeedComm(comm)
    if comm.rank == 0:
        wrapped.send(np.zeros(1000), 2)  # node 0 -> node 1
    elif comm.rank == 2:
        wrapped.recv(0)
    return comm.clock


net2 = cluster.Network(ALPHA2, BETA_IN)
assert math.isclose(cluster.run(ping, 4, network=net2).values[2], ALPHA2 + 8000 * BETA_OUT, rel_tol=1e-12)
for a, b in [(groups.DeviceMesh(2, 2, 1), DpFirstMesh(2, 2, 1))]:
    assert [a.group(0, "tp"), b.group(0, "tp")] == [[0, 1], [0, 2]]  # TP pair inside node 0, or across


def wrapped_train(comm, dmesh, *args, **kwargs):
    return mesh.train_mesh(TwoSpeedComm(comm), dmesh, *args, **kwargs)


want2, _ = mesh.reference_train(batches, stack0, 2, 0.05, N_HEADS)
step_time = {}
for name, dm in (("TP inside nodes", groups.DeviceMesh(2, 2, 1)), ("TP across nodes", DpFirstMesh(2, 2, 1))):
    res = cluster.run(wrapped_train, dm.size, args=(dm, batches, stack0, 2, 0.05, N_HEADS),
                      kwargs=dict(micro_batches=MICRO_T), network=net2)
    got = {}
    for v in res.values:
        if v["coords"][:2] == (0, 0):
            got.update({f"{l}.{k}": a for l, blk in v["layers"].items() for k, a in blk.items()})
    assert max(float(np.abs(got[k] - want2[k]).max()) for k in want2) < 1e-10
    step_time[name] = res.sim_time / 2
    tp_b, dp_b = res.values[0]["bytes"]["tp"], res.values[0]["bytes"]["dp"]
    print(f"{name}: {step_time[name] * 1e3:.3f} ms per step (rank 0 sends {tp_b / 2:.0f} B/step on TP, "
          f"{dp_b / 2:.0f} B/step on DP)")
assert step_time["TP inside nodes"] < step_time["TP across nodes"]

# %% [markdown]
# ## Exercise 3 (analysis): micro-batches for the 70B model at (8, 8, 4)
#
# **Answer.** Per step the DP all-reduce moves a fixed $2\frac{\mathrm{DP}-1}{\mathrm{DP}}\cdot
# \frac{2\Psi}{\mathrm{TP}\cdot\mathrm{PP}}$ bytes (7.7 GB at (8, 8, 4)), independent of $m$, while a step
# processes $\mathrm{DP}\cdot m\cdot b\cdot s$ tokens. So the DP bytes per token fall as $1/m$, and so
# does the bubble $(\mathrm{PP}-1)/(m+\mathrm{PP}-1)$; the TP and PP bytes per token do not depend on $m$,
# and neither does stage 0's activation memory under 1F1B (it stashes $\mathrm{PP}$ micro-batches for
# any $m \ge \mathrm{PP}$). What grows with $m$ is the **global batch**: $B = \mathrm{DP}\cdot m\cdot b$
# sequences. A bubble of at most 10% needs $m \ge 9(\mathrm{PP}-1) = 27$; I would pick $m = 32$
# (bubble 8.6%, DP traffic 7.3 kB per token), a global batch of 256 sequences = 1.05 M tokens, in line
# with the 1-4 M-token batches of 70B-class runs. Going to $m = 128$ halves the bubble again but makes
# $B$ = 4.2 M tokens, past the critical batch size early in training, where more tokens per step no
# longer buy proportionally fewer steps (so the saved bubble is paid back in extra tokens); batch-size
# warm-up starts small and grows $m$ as training proceeds.

# %%
P70 = dict(psi=70e9, layers=80, hidden=8192, seq=4096, batch=1)
DP3, TP3, PP3 = 8, 8, 4
rows3 = []
for m in (4, 8, 16, 27, 32, 64, 128):
    c = mesh.comm_per_step(P70["psi"], P70["layers"], P70["hidden"], P70["seq"], 1, m, DP3, TP3, PP3)
    tokens = DP3 * m * P70["seq"]
    rows3.append((m, pipeline.bubble_fraction(PP3, m), c["dp"] / tokens, c["tp"] / tokens, tokens))
    assert math.isclose(c["dp"], 2 * (DP3 - 1) / DP3 * 2 * P70["psi"] / (TP3 * PP3))  # fixed per step
    assert math.isclose(pipeline.bubble_fraction(PP3, m), (PP3 - 1) / (m + PP3 - 1))
    mem = mesh.memory_per_device(P70["psi"], 80, 8192, 4096, 1, 64, DP3, TP3, PP3, 1, recompute="selective")
    assert math.isclose(mem["activations"], 34 * 4096 * 8192 / TP3 * (80 / PP3) * PP3)  # no m in it
for m, bub, dp_tok, tp_tok, tokens in rows3:
    print(f"m = {m:>3}: bubble {bub:6.1%}, DP {dp_tok / 1e3:7.1f} kB/token, TP {tp_tok / 1e3:6.1f} kB/token, "
          f"global batch {tokens / 1e6:5.2f} M tokens")
pick = min(m for m, bub, *_ in rows3 if bub <= 0.10)
assert pick == 27 and pipeline.bubble_fraction(PP3, 32) < 0.1
assert all(math.isclose(r[3], rows3[0][3]) for r in rows3)  # TP bytes per token do not depend on m

# %% [markdown]
# ## Exercise 4 (analysis): the smallest GPU count for 405B
#
# **Answer.** Searching all meshes with TP $\in \{1, 2, 4, 8\}$, PP a divisor of $L = 126$, any DP, ZeRO
# stage 0-3 and the three recomputation policies, `memory_per_device` (micro-batch 1, $s = 8192$,
# sequence parallelism, 1F1B) says the fewest 80 GB GPUs that fit are **88**, as $(\mathrm{DP},
# \mathrm{TP}, \mathrm{PP}) = (11, 8, 1)$ with ZeRO-3 and full recomputation: the $16\Psi = 6.48$ TB of
# training state spread over 88 GPUs is 73.6 GB each, plus $2sbh\,L/\mathrm{TP} = 4.2$ GB of layer inputs.
# Nothing smaller fits, because $16\Psi/K \le 80$ GB already needs $K \ge 81$, and the activations
# (at least 4.2 GB on TP = 8) push it to 86; with TP = 8 the next multiple is 88.
#
# Its traffic per step (`comm_per_step`, bf16, $m = 1$ micro-batch): DP about 184 GB, TP about 237 GB,
# PP none. The model counts the DP all-reduce as $2\frac{\mathrm{DP}-1}{\mathrm{DP}}\cdot 2\Psi/(\mathrm{TP\,PP})$;
# ZeRO-3 really moves 1.5 times that (parameters all-gathered in forward and again in backward, gradients
# reduce-scattered), and full recomputation adds a third forward's worth of compute. This is the
# memory floor, not a sensible plan: with one micro-batch of 8192 tokens per replica, a step carries
# 90 k tokens for about 420 GB of traffic per GPU. Real 405B runs (Llama 3: 16 k GPUs, TP 8, PP 16)
# buy throughput with far more GPUs.

# %%
P405 = dict(psi=405e9, layers=126, hidden=16384, seq=8192, heads=128)
pp_options = [q for q in range(1, 127) if 126 % q == 0]
best4 = None
for K in range(1, 200):
    for tp in (1, 2, 4, 8):
        for pp in pp_options:
            if K % (tp * pp):
                continue
            dp = K // (tp * pp)
            for z in range(4):
                for rc in ("none", "selective", "full"):
                    mem = mesh.memory_per_device(P405["psi"], 126, 16384, 8192, 1, 128, dp, tp, pp, z, recompute=rc)
                    if mem["total"] <= 80 * GB and best4 is None:
                        best4 = (K, dp, tp, pp, z, rc, mem["total"])
    if best4:
        break
K4, dp4, tp4, pp4, z4, rc4, total4 = best4
print(f"smallest: {K4} GPUs as (dp, tp, pp) = {(dp4, tp4, pp4)}, ZeRO-{z4}, recompute {rc4}: {total4 / GB:.1f} GB")
# the same number from the closed form: 16 Psi / K + 2 s h L / tp
by_hand = 16 * P405["psi"] / K4 + 2 * 8192 * 16384 * 126 / tp4
assert math.isclose(total4, by_hand, rel_tol=1e-12) and by_hand <= 80 * GB
assert (K4, dp4, tp4, pp4, z4, rc4) == (88, 11, 8, 1, 3, "full")
assert 16 * P405["psi"] / 85 + 2 * 8192 * 16384 * 126 / 8 > 80 * GB  # fewer would not fit at any TP <= 8
traffic4 = mesh.comm_per_step(P405["psi"], 126, 16384, 8192, 1, 1, dp4, tp4, pp4)
print("traffic per device per step (GB):", {k: round(v / GB, 1) for k, v in traffic4.items()})

# %% [markdown]
# ## Exercise 5 (analysis): 1,000 H100s for 30 days at 40% MFU
#
# **Answer.** The budget is $C = 1000 \cdot 30 \cdot 86400\,\text{s} \cdot 989\,\text{TFLOP/s} \cdot 0.4
# \approx 1.03 \times 10^{24}$ FLOPs.
#
# * The parametric fit (approach 3, $L = E + A/N^{\alpha} + B/D^{\beta}$) gives
#   $N^\* = G\,(C/6)^{\beta/(\alpha+\beta)} \approx 42$ B parameters on $D^\* \approx 4.1$ T tokens
#   (about 98 tokens per parameter).
# * The $D = 20N$ rule solves $C = 6N \cdot 20N$: $N = \sqrt{C/120} \approx 92$ B on 1.85 T tokens.
# * Both predict almost the same loss (the surface is flat near the optimum; the fit's point is lower
#   by about 0.007 nats).
#
# **With $10^{13}$ inference tokens** each served token costs $2N$ FLOPs: $1.85 \times 10^{24}$ for the
# 92 B model, more than its training, against $0.84 \times 10^{24}$ for the 42 B one. I would train the
# smaller model, and if anything smaller still: for the loss the $20N$ model reaches, the code finds the
# $N$ that minimises training plus inference FLOPs at that same loss (more tokens, fewer parameters; the
# argument of "Beyond Chinchilla-optimal", Sardana et al. 2024): about 22 B parameters on 7.2 T tokens,
# $1.39 \times 10^{24}$ FLOPs in all against $2.87 \times 10^{24}$, about half. Its training alone
# ($0.95 \times 10^{24}$) even fits the budget. So: train a model of roughly 20-40 B parameters on more
# tokens than either rule says, not the 92 B model of the $20N$ rule.

# %%
C5 = 1000 * 30 * 86400 * scaling.H100_BF16_PEAK * 0.4
N_fit, D_fit = scaling.compute_optimal(C5)
N_cf, D_cf = scaling.compute_optimal_closed_form(C5)
assert math.isclose(N_fit, N_cf, rel_tol=1e-5)
grid = np.exp(np.linspace(np.log(1e9), np.log(1e12), 20001))  # brute force over N at fixed C
N_grid = grid[np.argmin(scaling.chinchilla_loss(grid, C5 / (6 * grid)))]
assert abs(math.log(N_grid / N_fit)) < 1e-3
N20 = math.sqrt(C5 / 120)
L_fit, L20 = scaling.chinchilla_loss(N_fit, D_fit), scaling.chinchilla_loss(N20, 20 * N20)
assert L_fit <= L20 and L20 - L_fit < 0.02
SERVE = 1e13
total = {"fit": C5 + 2 * N_fit * SERVE, "20N": C5 + 2 * N20 * SERVE}


def tokens_for_loss(N, target):
    """D with L(N, D) = target (bisection in log D); inf when N alone cannot reach it."""
    if scaling.chinchilla_loss(N, 1e30) >= target:
        return math.inf
    lo, hi = 1.0, 1e30
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if scaling.chinchilla_loss(N, mid) > target else (lo, mid)
    return hi


cands = np.exp(np.linspace(np.log(3e9), np.log(N20), 400))
costs = [6 * n * tokens_for_loss(n, L20) + 2 * n * SERVE for n in cands]
N_serve = cands[int(np.argmin(costs))]
print(f"C = {C5:.3g} FLOPs; fit: N* = {N_fit / 1e9:.1f}B, D* = {D_fit / 1e12:.2f}T, loss {L_fit:.4f}; "
      f"20N: N = {N20 / 1e9:.1f}B, D = {20 * N20 / 1e12:.2f}T, loss {L20:.4f}")
print(f"train + serve 1e13 tokens: fit {total['fit']:.3g}, 20N {total['20N']:.3g} FLOPs; at the 20N loss the "
      f"cheapest total is N = {N_serve / 1e9:.1f}B on {tokens_for_loss(N_serve, L20) / 1e12:.1f}T tokens, "
      f"{min(costs):.3g} FLOPs")
assert total["fit"] < total["20N"]
assert N_serve < N20 and min(costs) < 0.7 * total["20N"]
assert 6 * N_serve * tokens_for_loss(N_serve, L20) <= C5  # its training fits the budget
assert 30e9 < N_fit < 45e9 and 85e9 < N20 < 100e9
