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
# # Chapter 34. Edge and fog computing
#
# The machines of the earlier parts sat in one data centre, joined by links of microseconds and tens of
# gigabytes per second. An edge device (a camera, a phone, a sensor on a machine tool) sees the data
# first, computes a hundred to a thousand times slower than a server, and reaches that server over a
# radio link whose latency is tens of milliseconds and whose bandwidth changes from one second to the
# next. Whether to run a model on the device, on the server, or partly on each is then a scheduling
# decision with a closed-form cost, and the right answer moves with the link. This chapter cuts a
# trained network between an edge device and a server (and a fog node between them), picks the cut from
# the alpha-beta model of Chapter 3, runs the split for real over the communicator, decides per task
# whether to offload over a link that fades, compresses the edge half to int8, and exports that half to
# ONNX to run it with onnxruntime, float and int8.
#
# **Prerequisites:** Chapter 22 (Per-node inference efficiency: symmetric int8 quantization per channel
# and its error bound) and Chapter 3 (Performance models: the alpha-beta cost of a message), with
# Chapter 4 for the communicator.

# %% tags=["parameters"]
N_SAMPLES = 4000  # smoke: 1600
EPOCHS = 4  # smoke: 2
SIZES = [128, 32, 512, 16, 256, 10]
BATCH = 64
EDGE_FLOPS = 1e8
FOG_FLOPS = 5e9
SERVER_FLOPS = 1e11
ALPHA = 1e-2
BW_POINTS = 41  # smoke: 21
LINK_STATES = [2e4, 2e5, 2e6]
TASKS = 2000  # smoke: 400
DEADLINE = 0.15
KS = [1, 2, 3, 5, 8]  # smoke: [1, 2, 3, 8]
REPEATS = 20  # smoke: 5
SEED = 0

# %% [markdown]
# `N_SAMPLES` generated examples (128 features, 10 classes) train an MLP of widths `SIZES` for
# `EPOCHS` epochs; a task is a batch of `BATCH` rows (a burst of frames). The edge device computes
# `EDGE_FLOPS` FLOP/s, a fog node `FOG_FLOPS` and the server `SERVER_FLOPS`; every link has latency
# $\alpha$ = `ALPHA` seconds, and the bandwidth $1/\beta$ is swept over `BW_POINTS` values. The fading
# link moves between the bandwidths `LINK_STATES` (bytes per second) over `TASKS` tasks, each with a
# deadline of `DEADLINE` seconds. `KS` are the chain lengths of the checks, `REPEATS` the timing repeats.
#
# ## 1. Motivation: which ceiling binds
#
# On the device the binding ceiling is compute (and the battery that pays for it); between device and
# server it is the link. A burst of 64 frames of 128 float32 features is 33 KB; the whole network costs
# about 4.5 MFLOP for it. The cell prints what each extreme costs at a good and a poor link.

# %%
import logging
import os
import tempfile
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, datasets, nn, perf
from scaleoutai.infra import edge
from scaleoutai.infra import offload as off

L = len(SIZES) - 1
flops_total = edge.layer_flops(SIZES, BATCH).sum()
print(f"one task: {flops_total / 1e6:.1f} MFLOP, input {edge.cut_bytes(SIZES, 0, BATCH) / 1e3:.0f} KB")
print(f"all on the edge:   {flops_total / EDGE_FLOPS * 1e3:7.1f} ms")
for bw in (1e7, 1e5):
    t = edge.split_time(SIZES, 0, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, 1 / bw)
    print(f"all on the server: {t * 1e3:7.1f} ms over a {bw / 1e6:g} MB/s link")

# %% [markdown]
# At 10 MB/s the server wins by more than a factor of three; at 100 KB/s sending the input is seven
# times slower than the device itself. Between the two, cutting the network inside can beat both.
#
# ## 2. Core concepts
#
# **The cut.** An MLP of $L$ layers cut at $c$ runs layers $[0, c)$ on the edge and $[c, L)$ on the
# server; what crosses is the activation at the cut, $n d_c$ numbers for a batch of $n$ rows and layer
# width $d_c$. With $F_e$ and $F_s$ the FLOP/s of the two sides and 2 FLOPs per weight and row, the
# latency is (Neurosurgeon, Kang et al. 2017)
#
# $$T(c) = \frac{\sum_{i<c} 2 n d_i d_{i+1}}{F_e} + \alpha + \text{bytes}(c)\,\beta + \frac{\sum_{i\ge c} 2 n d_i d_{i+1}}{F_s},$$
#
# and $T(L)$ is the edge time alone: nothing crosses. **int8 at the cut** sends $n d_c$ codes and one
# float32 scale, $n d_c + 4$ bytes instead of $4 n d_c$. **A fog tier** is a third machine between the
# two: the same formula summed over the tiers and the hops. Neither the FLOPs nor the bytes are
# monotone in $c$: this network narrows to 32 and 16 after layers 1 and 3, and widens in between.

# %%
X_all, y_all = datasets.classification(N_SAMPLES, SIZES[0], classes=SIZES[-1], separation=4.0, seed=SEED)
n_train = 3 * N_SAMPLES // 4
X, y, X_test, y_test = X_all[:n_train], y_all[:n_train], X_all[n_train:], y_all[n_train:]
t0 = time.perf_counter()
params = edge.fit_mlp(X, y, SIZES, epochs=EPOCHS, lr=1e-3, seed=SEED)
base_acc = edge.accuracy(edge.reference_split_inference(params, X_test), y_test)
print(f"trained in {time.perf_counter() - t0:.1f} s; float32 test accuracy {base_acc:.3f}")
per_layer = edge.layer_flops(SIZES, BATCH)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].bar(range(L), per_layer / 1e6)
axes[0].set(xlabel="layer i", ylabel="MFLOP per task", title="compute per layer")
cuts_axis = np.arange(L + 1)
axes[1].bar(cuts_axis - 0.2, [edge.cut_bytes(SIZES, c, BATCH) / 1e3 for c in cuts_axis], 0.4, label="float32")
axes[1].bar(cuts_axis + 0.2, [edge.cut_bytes(SIZES, c, BATCH, "int8") / 1e3 for c in cuts_axis], 0.4, label="int8")
axes[1].set(xlabel="cut c", ylabel="KB crossing", title="activation at the cut (c = L: nothing)")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# The split is a pipeline of tiers: rank 0 (the edge) holds the input, rank $K-1$ is the farthest
# server, and the cuts give each tier a contiguous block of layers. A tier with no layers is skipped,
# so the chain's hops are between consecutive *used* tiers, and every rank works out from the cuts
# whom it waits for. One task moves one message per hop; the timeline shows a device, a fog node and
# a server with cuts after layers 1 and 3.

# %%
net = cluster.Network(alpha=ALPHA, beta=1 / 2e5)
traced = cluster.run(edge.split_inference, 3, args=(params, X_test[:BATCH], [1, 3], [EDGE_FLOPS, FOG_FLOPS, SERVER_FLOPS]),
                     network=net, trace=True, timeout=60)
cluster.plot_timeline(traced, title="edge (layer 0) -> fog (layers 1-2) -> server (layers 3-4), 200 KB/s links")
plt.show()
print(f"bytes per hop: {[s.bytes_sent for s in traced.stats]}; task latency {traced.sim_time * 1e3:.1f} ms")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `split_inference` is the per-rank protocol; `chain_time` is the model it must obey;
# `int8_forward_layers` is the edge's int8 arithmetic (weights per output channel, activations per
# tensor, exact integer sums rescaled by $s_x s_j$).

# %%
from scaleoutai.notebooks import show

show(edge.split_inference, edge.chain_time, edge.int8_forward_layers)

# %% [markdown]
# The checks, for every chain length in `KS` (8 tiers is more than the 6 places to cut, so some tiers
# get nothing) and random cuts: with float32 activations the output equals the unsplit network bit for
# bit; with int8 at the hops and an int8 edge it equals the one-machine reference of the same arithmetic;
# and the simulated latency equals `chain_time`. The simulator books a transfer as start plus duration,
# which may round differently in the last bit, so the check allows $10^{-12}$ relative (the tests use
# power-of-two costs, where it is exact).

# %%
x_task = X_test[:BATCH]
whole = edge.reference_split_inference(params, x_task)
assert np.allclose(whole, nn.mlp_forward(params, x_task)[0], rtol=0, atol=1e-3)  # float32 vs the float64 net
rng = np.random.default_rng(SEED)
for K in KS:
    tiers = [EDGE_FLOPS * 50.0 ** r for r in range(K)]
    for trial in range(3):
        cuts = sorted(rng.integers(0, L + 1, K - 1).tolist())
        for act in edge.ACTS:
            out, res = edge.run_split_inference(params, x_task, cuts, tiers, ALPHA, 1 / 2e5, act, int8_edge=act == "int8")
            want = whole if act == "float32" else edge.reference_split_inference(params, x_task, cuts, act, True)
            assert np.array_equal(out, want), (K, cuts, act)
            model = edge.chain_time(SIZES, cuts, BATCH, tiers, ALPHA, 1 / 2e5, act)
            assert abs(res.sim_time - model) <= 1e-12 * model, (K, cuts, res.sim_time, model)
print(f"split == unsplit and simulated time == model for K in {KS}, both activation formats")

# %% [markdown]
# **The latency curve and the best cut.** $T(c)$ for four bandwidths, then the best cut as the
# bandwidth sweeps five decades. Fast links send the input ($c = 0$); slow ones keep everything
# ($c = L$); in between the narrow layer 1 is the place to cut. int8 divides the bytes by four, so
# every switch happens at a four times lower bandwidth.

# %%
bws = np.geomspace(1e3, 1e8, BW_POINTS)
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for bw in (3e4, 3e5, 3e6, 3e7):
    _, times = edge.best_cut(SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, 1 / bw)
    axes[0].semilogy(cuts_axis, times * 1e3, "o-", label=f"{bw / 1e6:g} MB/s")
axes[0].set(xlabel="cut c (0: all on the server, L: all on the edge)", ylabel="T(c) (ms)", title="latency per cut")
axes[0].legend()
best = {act: [edge.best_cut(SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, 1 / bw, act)[0] for bw in bws]
        for act in edge.ACTS}
for act, marker in zip(edge.ACTS, ("o-", "s--")):
    axes[1].semilogx(bws, best[act], marker, ms=3, label=f"{act} at the cut")
axes[1].set(xlabel="bandwidth 1/beta (B/s)", ylabel="best cut", title="where to cut as the link changes")
axes[1].legend()
plt.tight_layout()
plt.show()
assert best["float32"][0] == L and best["float32"][-1] == 0
assert all(a <= b for a, b in zip(best["int8"], best["float32"]))
switch = {act: [float(bws[i]) for i in range(1, len(bws)) if best[act][i] != best[act][i - 1]] for act in edge.ACTS}
print("bandwidths (B/s) where the best cut changes:", {a: [f"{b:.3g}" for b in s] for a, s in switch.items()})

# %% [markdown]
# **int8 on the edge, accuracy and latency per cut.** The edge's layers run in int8 (per-channel weights,
# per-tensor activations) and the activation crosses in int8; the server's layers stay float. The
# table gives the test accuracy at each cut and the simulated latency at 200 KB/s, float32 and int8.

# %%
print(f"{'cut':>3} {'acc f32':>8} {'acc int8':>8} {'drop':>6} {'T f32 (ms)':>10} {'T int8 (ms)':>11}")
drops = []
for c in cuts_axis:
    acc8 = edge.accuracy(edge.reference_split_inference(params, X_test, [c], "int8", int8_edge=True), y_test)
    t32 = edge.run_split_inference(params, x_task, [c], [EDGE_FLOPS, SERVER_FLOPS], ALPHA, 1 / 2e5)[1].sim_time
    t8 = edge.run_split_inference(params, x_task, [c], [EDGE_FLOPS, SERVER_FLOPS], ALPHA, 1 / 2e5, "int8", True)[1].sim_time
    drops.append(base_acc - acc8)
    print(f"{c:>3} {base_acc:>8.3f} {acc8:>8.3f} {base_acc - acc8:>+6.3f} {t32 * 1e3:>10.1f} {t8 * 1e3:>11.1f}")
assert max(drops) <= 0.01  # int8 on the edge costs at most one point of accuracy at any cut

# %% [markdown]
# The drop is a fraction of a point at every cut, far below the spread between cuts in latency. The
# simulated latency counts only FLOPs, not the int8 arithmetic's own speed; Section 5 measures that.
#
# **A fog tier.** With a fog node between device and server, the best pair of cuts by exhaustive search,
# at three bandwidths, every hop with the same $\alpha$ and $\beta$:

# %%
for bw in (3e4, 3e5, 3e6):
    two = edge.best_cut(SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, 1 / bw)
    three, t3 = edge.best_cuts(SIZES, BATCH, [EDGE_FLOPS, FOG_FLOPS, SERVER_FLOPS], ALPHA, 1 / bw)
    print(f"{bw / 1e3:>6g} KB/s: edge+server cut {two[0]} ({two[1].min() * 1e3:.1f} ms); "
          f"edge+fog+server cuts {three} ({t3 * 1e3:.1f} ms)")
    assert t3 <= two[1].min() + 1e-15
    assert three[0] == three[1]  # equal links: the fog node gets no layers

# %% [markdown]
# The search leaves the fog node empty: on equal links every extra hop costs another $\alpha$, and the
# server computes faster than the fog. A fog tier pays when its link is the fast one (a local network to
# the fog, a slow wide-area link beyond it): Exercise 6 gives each hop its own $\alpha$ and $\beta$.

# %% [markdown]
# **Offloading over a fading link.** A Markov chain moves the link between `LINK_STATES`; each task
# is run at the cut a policy chooses. `choose_cut` is the policies; `task_cost` the latency and the
# device's energy (2 W computing, 1 W transmitting, 0.1 W waiting).

# %%
show(off.choose_cut, off.task_cost)

# %%
states, trace = datasets.markov_link(LINK_STATES, TASKS, stay=0.9, seed=SEED)
threshold = float(np.sqrt(LINK_STATES[1] * LINK_STATES[2]))
runs = {pol: off.simulate_offloading(pol, trace, SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, threshold=threshold)
        for pol in off.POLICIES}
print(f"{'policy':>10} {'mean (ms)':>9} {'p95 (ms)':>8} {'energy (mJ)':>11} {'deadline misses':>15}")
summary = {}
for pol, r in runs.items():
    s = summary[pol] = off.summarize(r, DEADLINE)
    print(f"{pol:>10} {s['mean_latency'] * 1e3:>9.1f} {s['p95_latency'] * 1e3:>8.1f} {s['energy'] * 1e3:>11.1f} "
          f"{s['miss_rate']:>15.1%}")
    assert np.all(runs["oracle"]["latency"] <= r["latency"] + 1e-15)
fig, ax = plt.subplots(figsize=(11, 3.2))
window = slice(0, min(300, TASKS))
ax.semilogy(trace[window], "k-", lw=0.8, label="bandwidth (B/s)")
ax2 = ax.twinx()
ax2.plot(runs["adaptive"]["cut"][window], "C1.", ms=3, label="adaptive cut")
ax.set(xlabel="task", ylabel="bandwidth (B/s)", title="the link and the adaptive policy's cut")
ax2.set_ylabel("cut")
plt.show()
assert summary["adaptive"]["mean_latency"] < min(summary["local"]["mean_latency"], summary["offload"]["mean_latency"])

# %% [markdown]
# Adaptive cutting follows the link one task late and so pays only where the link changes (10% of
# tasks here); the oracle is the bound no policy can beat. Offloading everything saves the battery on
# good links but misses deadlines whenever the link drops; local computing never misses a bandwidth
# but pays the full compute energy every time.
#
# ## 5. The same task with a production library: ONNX export and onnxruntime
#
# The edge half (layers 0-2, up to the narrow cut 3) becomes a torch model with our weights and is
# exported with `torch.onnx.export`, which in torch 2.13 uses the dynamo exporter (`torch.export` and
# onnxscript) by default; that path works here, with a dynamic batch axis and the weights inside the
# file. onnxruntime runs it on `CPUExecutionProvider`; its output must equal torch's and ours to
# float32 rounding ($10^{-5}$ of the output's scale).

# %%
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

CUT = 3
workdir = tempfile.mkdtemp(prefix="ch34-")
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # torch.export's pytree deprecation notice
    f32_path = edge.export_onnx(params, CUT, os.path.join(workdir, "edge.onnx"))
export_s = time.perf_counter() - t0
opts = ort.SessionOptions()
# onnxruntime's worker threads spin after each run by default; on 2 cores that starves NumPy's BLAS threads
# and would make our timings below meaningless
opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
sess = {"float32": ort.InferenceSession(f32_path, opts, providers=["CPUExecutionProvider"])}
xe = X_test.astype(np.float32)
p32 = {k: v.astype(np.float32) for k, v in params.items()}
ours_half = edge.forward_layers(p32, xe, 0, CUT)
with torch.no_grad():
    torch_half = edge.torch_layers(params, 0, CUT)(torch.from_numpy(xe)).numpy()
ort_half = sess["float32"].run(None, {"x": xe})[0]
scale = float(np.abs(ours_half).max())
gap_ort, gap_torch = np.abs(ort_half - ours_half).max(), np.abs(torch_half - ours_half).max()
assert gap_ort <= 1e-5 * scale and gap_torch <= 1e-5 * scale
print(f"exported in {export_s:.1f} s; onnxruntime vs ours {gap_ort:.1e}, torch vs ours {gap_torch:.1e} "
      f"(output scale {scale:.1f})")

# %% [markdown]
# **Dynamic quantization.** `quantize_dynamic` stores each weight as int8 per output channel and
# quantizes each layer's input at run time (uint8, asymmetric, per tensor), then multiplies with
# `MatMulInteger`. Its weight codes and scales must be ours: full range $[-127, 127]$ by default and
# $[-64, 64]$ with `reduce_range=True`, which leaves headroom in the integer kernels.

# %%
logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic suggests a pre-processing pass; not needed here
paths = {"float32": f32_path}
for name, rr in (("int8", False), ("int8 reduce_range", True)):
    paths[name] = os.path.join(workdir, name.replace(" ", "_") + ".onnx")
    quantize_dynamic(f32_path, paths[name], weight_type=QuantType.QInt8, per_channel=True, reduce_range=rr)
    sess[name] = ort.InferenceSession(paths[name], opts, providers=["CPUExecutionProvider"])
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(paths[name]).graph.initializer}
    ours_q = edge.quantize_mlp(p32, 64 if rr else 127)
    for i, k in enumerate(sorted(k for k in inits if k.endswith("weight_Transposed_quantized"))):
        assert np.array_equal(inits[k], ours_q[f"q{i}"]), (name, i)
        assert np.allclose(inits[k.replace("_quantized", "_scale")], ours_q[f"s{i}"], rtol=1e-6, atol=0)
ours_int8 = edge.int8_forward_layers(edge.quantize_mlp(p32), xe, 0, CUT, L)
errs = {"ours W8A8": np.abs(ours_int8 - ours_half).max()}
errs.update({name: np.abs(sess[name].run(None, {"x": xe})[0] - ours_half).max() for name in ("int8", "int8 reduce_range")})
sizes_kb = {name: os.path.getsize(p) / 1e3 for name, p in paths.items()}
print("weight codes and scales: onnxruntime == ours, both ranges")
print("file sizes (KB):", {k: round(v, 1) for k, v in sizes_kb.items()})
print("max |int8 - float| of the edge half:", {k: f"{v:.3f}" for k, v in errs.items()}, f"(scale {scale:.1f})")
assert errs["ours W8A8"] <= 0.05 * scale and errs["int8 reduce_range"] <= 0.05 * scale
flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else "(no /proc/cpuinfo)"
print("VNNI (int8 dot products) listed in /proc/cpuinfo:", "vnni" in flags)

# %% [markdown]
# On an x86 CPU without VNNI, onnxruntime's uint8 x int8 kernel adds pairs of products in 16-bit
# registers, and with full-range weight codes a pair can exceed 32767 and saturate: the default model's
# error is then several times ours, though its weights are identical. `reduce_range=True` halves the
# codes and removes the overflow at the price of one bit of weight precision (onnxruntime's documentation
# recommends it for such CPUs). On a CPU with VNNI the default is fine. Latency of the edge half, ours
# (NumPy) and onnxruntime's, for one row and for a full batch:

# %%
lat = {}
for rows in (1, BATCH):
    xb = xe[:rows]
    lat[rows] = {
        "ours float32": perf.measure(edge.forward_layers, p32, xb, 0, CUT, repeats=REPEATS).median,
        "ours int8": perf.measure(edge.int8_forward_layers, edge.quantize_mlp(p32), xb, 0, CUT, L, repeats=REPEATS).median,
        "ort float32": perf.measure(sess["float32"].run, None, {"x": xb}, repeats=REPEATS).median,
        "ort int8": perf.measure(sess["int8 reduce_range"].run, None, {"x": xb}, repeats=REPEATS).median,
    }
    print(f"{rows:>3} rows: " + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in lat[rows].items()))

# %% [markdown]
# onnxruntime's fused kernels are faster than our NumPy at both sizes; our int8 path is slower than our float one because NumPy has no int8 matrix product (we emulate it exactly
# in float64). The bytes are what int8 changes on the wire; its speed on the device needs kernels like
# onnxruntime's or an accelerator's.
#
# ## 6. Failure modes and fault tolerance
#
# **A lost activation.** The radio drops the edge's message. The server's receive times out when the
# message was due (`MessageLostError`) and answers NACK; the edge finishes the network itself. `offload_with_fallback`
# returns the logits to the edge either way, and its time obeys `fallback_time`.

# %%
show(off.offload_with_fallback)

# %%
fl2 = [EDGE_FLOPS, SERVER_FLOPS]
want = edge.reference_split_inference(params, x_task, [1])
for faults, lost in ((None, False), (cluster.Faults(drop={0: {0}}), True)):
    res = cluster.run(off.offload_with_fallback, 2, args=(params, x_task, 1, fl2), faults=faults,
                      network=cluster.Network(alpha=ALPHA, beta=1 / 2e5), timeout=60)
    model = off.fallback_time(SIZES, 1, BATCH, fl2, ALPHA, 1 / 2e5, lost)
    assert np.allclose(res.values[0], want, rtol=0, atol=1e-4) and abs(res.sim_time - model) <= 1e-12 * model
    print(f"activation {'lost' if lost else 'delivered'}: answer correct, {res.sim_time * 1e3:.1f} ms (model {model * 1e3:.1f} ms)")
res = cluster.run(off.offload_with_fallback, 2, args=(params, x_task, 1, fl2), faults=cluster.Faults(crash={1: 0}),
                  network=cluster.Network(alpha=ALPHA, beta=1 / 2e5), timeout=60)
assert isinstance(res.values[1], cluster.RankCrashed) and np.array_equal(res.values[0], want)
print("server crashed before answering: the edge finished the network itself, answer correct")

# %% [markdown]
# A loss costs the timeout plus the whole rest of the network at the edge's speed: it is worse than
# having computed locally from the start. With loss probability $q$ per message, offloading pays off
# only while $(1-q)\,T(c) + q\,T_{\text{lost}}(c) < T(L)$.
#
# **A slow server.** An overloaded server (`Faults(slow={1: f})`) computes $f$ times slower; the
# simulated latency equals the model with $F_s / f$. At 2 MB/s the best cut stays at 1 until the server
# is slower than the edge device itself, then everything stays local.

# %%
bw = 2e6
for factor in (1, 200, 2000):
    fast = edge.best_cut(SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS / factor, ALPHA, 1 / bw)
    _, res = edge.run_split_inference(params, x_task, [int(fast[0])], fl2, ALPHA, 1 / bw,
                                      faults=cluster.Faults(slow={1: factor}) if factor > 1 else None)
    assert abs(res.sim_time - fast[1][fast[0]]) <= 1e-12 * res.sim_time
    print(f"server slowed {factor:>4}x: best cut {fast[0]}, {res.sim_time * 1e3:.1f} ms")
    assert fast[0] == (L if SERVER_FLOPS / factor < EDGE_FLOPS else 1)

# %% [markdown]
# ## 7. Evaluation: modelled against measured, latency against energy
#
# **Modelled and measured per cut.** The FLOP model treats every FLOP alike. Here the compute of each
# side is measured instead: each half runs in NumPy on this machine, and its time is scaled by the
# ratio of this CPU's FLOP rate on the whole network to the device's (`EDGE_FLOPS`, `SERVER_FLOPS`); the
# link comes from the model. Where a layer runs faster or slower than the network's average rate (BLAS
# is efficient on some shapes and not others, and a small layer pays per-call overhead), the measured
# curve leaves the model's, and where two cuts are close the best one can change.
# The two rows printed under the plot compare each layer's share of the FLOPs with its share of the
# measured time; they differ by up to a factor of two here, and the small layers usually cost more
# than their FLOPs say. A
# deployment should therefore profile each layer on the real device (Neurosurgeon fits one latency model
# per layer type) rather than trust FLOP counts.

# %%
measured_rate = flops_total / perf.measure(edge.forward_layers, p32, xe[:BATCH], 0, L, repeats=REPEATS).median
slow_down = measured_rate / EDGE_FLOPS  # this CPU runs as fast as `slow_down` edge devices
fig, ax = plt.subplots(figsize=(8, 4))
for bw_i, bw in enumerate((3e4, 3e5, 3e6)):
    modelled = edge.best_cut(SIZES, BATCH, EDGE_FLOPS, SERVER_FLOPS, ALPHA, 1 / bw)[1]
    meas = []
    for c in cuts_axis:
        t_edge = perf.measure(edge.forward_layers, p32, xe[:BATCH], 0, c, repeats=REPEATS).median * slow_down if c else 0.0
        h_c = edge.forward_layers(p32, xe[:BATCH], 0, c)  # the server starts from the activation at the cut
        t_server = perf.measure(edge.forward_layers, p32, h_c, c, L, repeats=REPEATS).median * (
            measured_rate / SERVER_FLOPS) if c < L else 0.0
        link = ALPHA + edge.cut_bytes(SIZES, c, BATCH) / bw if c < L else 0.0
        meas.append(t_edge + link + t_server)
    ax.semilogy(cuts_axis, modelled * 1e3, f"C{bw_i}--", label=f"model, {bw / 1e3:g} KB/s")
    ax.semilogy(cuts_axis, np.array(meas) * 1e3, f"C{bw_i}o-", label=f"measured compute, {bw / 1e3:g} KB/s")
    print(f"{bw / 1e3:>5g} KB/s: best cut model {int(np.argmin(modelled))}, measured {int(np.argmin(meas))}")
h_i, layer_s = xe[:BATCH], []
for i in range(L):
    layer_s.append(perf.measure(edge.forward_layers, p32, h_i, i, i + 1, repeats=REPEATS).median)
    h_i = edge.forward_layers(p32, h_i, i, i + 1)
print("share of the FLOPs per layer:   ", np.round(per_layer / per_layer.sum(), 2))
print("share of the measured time:     ", np.round(np.array(layer_s) / sum(layer_s), 2))
ax.set(xlabel="cut c", ylabel="latency (ms)", title=f"this CPU: {measured_rate / 1e9:.1f} GFLOP/s on the whole network")
ax.legend(fontsize=7)
plt.show()

# %% [markdown]
# **Latency against energy, and the deadline.** Each policy of Section 4 as one point, and the miss
# rate as the deadline moves.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for pol, s in summary.items():
    axes[0].plot(s["mean_latency"] * 1e3, s["energy"] * 1e3, "o", ms=8, label=pol)
axes[0].set(xlabel="mean latency (ms)", ylabel="energy per task (mJ)", title="policies on the fading link")
axes[0].legend()
deadlines = np.linspace(0.02, 0.4, 40)
for pol, r in runs.items():
    axes[1].plot(deadlines * 1e3, [np.mean(r["latency"] > d) for d in deadlines], label=pol)
axes[1].set(xlabel="deadline (ms)", ylabel="miss rate", title="deadline misses")
axes[1].legend()
plt.tight_layout()
plt.show()
assert summary["oracle"]["miss_rate"] <= min(s["miss_rate"] for s in summary.values())

# %% [markdown]
# No single fixed choice is best: always-local is flat and slow, always-offload fast on good links and
# hopeless on bad ones. Adaptive cutting buys most of the oracle's gain with a one-task-old measurement;
# what it loses is exactly the tasks where the link changed.
#
# ## 8. Exercises
#
# 1. **The answer's way back.** Add the logits' return trip ($\alpha + 4 n d_L \beta$) to `chain_time`
#    and to `split_inference`. Which cuts become worse, and at which bandwidths does the best cut move?
# 2. **Energy-optimal cuts.** Write a policy that minimises energy subject to the deadline (the
#    cheapest cut whose latency meets it). Plot energy and misses against the oracle for latency.
# 3. **Loss-aware offloading.** With a loss probability per link state, use Section 6's expected time
#    in `choose_cut`. At what loss rate does offloading stop paying at 2 MB/s?
# 4. **Batching at the server.** Many devices share one server. Model the server as a queue (Chapter 24)
#    and let its compute time grow with the load; where does the best cut go when 50 devices offload?
# 5. **Per-channel activations.** Quantize the activation at the cut per row instead of per tensor.
#    Measure the bytes, the accuracy and the error of the edge half against float.
# 6. **A fog node on a fast link.** Give each hop its own $\alpha_h$ and $\beta_h$ in `chain_time` (the
#    simulator has one network, so check the model with a hand computation). With 1 ms and 10 MB/s to
#    the fog and 50 ms and 200 KB/s beyond it, where do the two cuts go?
#
# ## 9. Research directions
#
# - **Joint partitioning and compression.** Choosing the cut, the bit width at the cut and a learned
#   bottleneck together (an autoencoder at the cut) shrinks the bytes far below int8, at a cost in
#   accuracy that must be trained for.
#   - Kang, Hauswald, Gao, Rovinski, Mudge, Mars and Tang, "Neurosurgeon: Collaborative Intelligence
#     Between the Cloud and Mobile Edge", ASPLOS, 2017. Layer-wise latency and energy models and the
#     per-query choice of the cut.
#   - Matsubara, Levorato and Restuccia, "Split Computing and Early Exiting for Deep Learning
#     Applications: Survey and Research Challenges", ACM Computing Surveys, 2022. Bottlenecks, training
#     for the cut and the open problems of split computing.
#   - Matsubara, Yang, Levorato and Mandt, "SC2 Benchmark: Supervised Compression for Split Computing",
#     TMLR, 2023. Scores split-computing methods jointly on device compute, bytes sent and accuracy, and
#     finds many lose to simply compressing the input and offloading everything.
# - **Early exits and cascades.** A small classifier after the edge's layers answers the easy inputs
#   locally and offloads only the hard ones; choosing exits and thresholds under a deadline is open.
#   - Teerapittayanon, McDanel and Kung, "Distributed Deep Neural Networks over the Cloud, the Edge and
#     End Devices", ICDCS, 2017. Exits on device, edge and cloud tiers of one network.
#   - Chen, Pan, Li, Ding and Zhou, "EE-LLM: Large-Scale Training and Inference of Early-Exit Large
#     Language Models with 3D Parallelism", ICML, 2024. Early exits for language models, trained with
#     pipeline parallelism and made compatible with the KV cache at inference.
# - **Offloading under uncertainty.** Links, server load and device battery all change; offloading as an
#   online decision (bandits, Lyapunov optimisation, reinforcement learning) with guarantees on
#   deadlines is an active area.
#   - Mao, You, Zhang, Huang and Letaief, "A Survey on Mobile Edge Computing: The Communication
#     Perspective", IEEE Communications Surveys and Tutorials, 2017. Models of computation offloading,
#     energy and radio resources.
#   - Alizadeh et al., "LLM in a flash: Efficient Large Language Model Inference with Limited Memory",
#     ACL, 2024. Keeps weights in flash and loads on demand only the parameters predicted to be needed,
#     running models up to twice the size of the device's DRAM.
# - **Integer-only inference on tiny devices.** Microcontrollers have kilobytes of memory and no float
#   unit; quantization that keeps every operation in integers, and models designed for it, decide what
#   can run at the edge at all.
#   - Jacob, Kligys, Chen, Zhu, Tang, Howard, Adam and Kalenichenko, "Quantization and Training of Neural
#     Networks for Efficient Integer-Arithmetic-Only Inference", CVPR, 2018. The affine int8 scheme most
#     edge runtimes use.
#   - Lin et al., "AWQ: Activation-aware Weight Quantization for On-Device LLM Compression and
#     Acceleration", MLSys, 2024. Scales the weight channels that see large activations before 4-bit
#     weight-only quantization, and runs a 70B-parameter language model on mobile GPUs.
#
# ## What's next
#
# Chapter 35 (Reliable and secure distributed AI) turns from slow and lossy links to dishonest and
# damaged participants: Byzantine-robust aggregation, checkpoint integrity and a privacy budget.
