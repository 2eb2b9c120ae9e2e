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
# # Chapter 10. Distributed optimization
#
# Part III distributes training. Its first question is the optimizer's: when $K$ workers each compute
# gradients on their own data, how do those gradients become one model? Three answers span the design
# space. **Synchronous SGD** averages every step and is exactly one machine with a $K$ times larger batch.
# **Asynchronous SGD** lets each worker push whenever it is done, so nobody waits for a straggler, at the
# price of gradients computed on stale weights. **Local SGD** lets workers take several steps alone and
# then average models, trading fidelity for fewer messages. Orthogonal to all three, **gradient
# compression** (top-k, quantization, low rank) shrinks each message, and **error feedback** keeps what
# compression dropped for the next step. This chapter builds each one on the communicator, checks it
# against a single-machine reference, and runs PyTorch's PowerSGD communication hook beside ours.
#
# **Prerequisites:** Chapter 3 (Performance models: $S_p$, $E_p$, stragglers), Chapter 4 (Communication
# primitives: ring all-reduce and all-gather and their $\alpha$-$\beta$ cost) and Chapter 5 (Evaluation
# discipline). Background: gradient descent on a least-squares problem and a small neural network.

# %% tags=["parameters"]
N = 2_000  # smoke: 400
D = 20  # smoke: 10
KS = [1, 2, 4, 8]  # smoke: [1, 2, 3, 5, 8]
STEPS = 200  # smoke: 60
LR = 0.05
TAUS = [0, 2, 8, 16]  # smoke: [0, 2, 8]
HS = [1, 2, 4, 8]  # smoke: [1, 2, 4]
WORKERS = 6  # smoke: 4
UPDATES = 300  # smoke: 80
SECONDS_PER_ROW = 2e-6  # simulated compute per example and gradient
ALPHA = 1e-4
BETA = 1e-8
TRIALS = 2000  # smoke: 400
LB_N = 2048
LB_EPOCHS = 4
SEED = 0

# %% [markdown]
# `N` examples with `D` features are the data; `KS` are the world sizes; `STEPS` optimizer steps at
# learning rate `LR` ($\eta$); `TAUS` are the staleness values tried and `HS` the local-step counts;
# `WORKERS` ranks (one parameter holder, the rest workers) run `UPDATES` asynchronous updates;
# `SECONDS_PER_ROW` is the simulated cost of one example's gradient; `ALPHA` and `BETA` describe the
# simulated network (here a slow one, 100 MB/s, so that communication is visible). `TRIALS` random
# seeds estimate QSGD's mean and variance; the large-batch demo trains on `LB_N` examples for `LB_EPOCHS`
# epochs (a few seconds at both sizes).
#
# ## 1. Motivation: which ceiling binds
#
# Data-parallel training sends one gradient, $P$ numbers, per worker per step. On a fast machine the
# backward pass of a large model takes a fraction of a second, and an all-reduce of $P$ values over
# commodity Ethernet can take longer than that. The ceiling is the network: the step time stops falling
# with $K$ once communication dominates, and a single slow worker holds every step back.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.collectives import block_range
from scaleoutai.ml import compression as cp
from scaleoutai.ml import optimization as opt

for params, gbit in ((25e6, 10), (350e6, 10), (350e6, 100), (7e9, 100)):
    seconds = 2 * params * 4 * 8 / (gbit * 1e9)  # ring all-reduce moves about 2P values per worker
    print(f"P = {params:9.3g} fp32 over {gbit:>3} Gb/s: {seconds * 1e3:9.1f} ms of all-reduce per step")

# %% [markdown]
# ## 2. Core concepts
#
# We minimise the mean loss $L(w) = \frac{1}{N} \sum_i \ell_i(w)$ with SGD, $w_{t+1} = w_t - \eta g_t$.
#
# - **Synchronous SGD.** Rank $r$ computes the sum of its examples' gradients $G_r$ on its block of the
#   global batch of $B = K b$ examples; an all-reduce adds the $G_r$ and every rank divides by $B$.
#   Dividing the *sum* by the global batch (not averaging the ranks' means) makes uneven blocks exact.
# - **Asynchronous SGD with staleness.** A parameter holder applies each gradient as it arrives. A
#   gradient read at version $v$ and applied as update $u$ has staleness $\tau = u - v$: the update is
#   $w_{u+1} = w_u - \eta\, g(w_{u - \tau})$. With equal workers $\tau = K - 2$ after warm-up (one holder and
#   $K - 1$ workers); stragglers give a distribution of $\tau$.
# - **Local SGD.** Each rank steps $H$ times on its own data, then the ranks average their models
#   (weighted by their share of the batch). $H = 1$ is synchronous SGD; larger $H$ sends $H$ times fewer
#   bytes.
# - **Compression with error feedback.** A compressor $C$ sends less than the gradient: top-k keeps the
#   k largest entries by magnitude; QSGD rounds each entry at random to one of $s$ levels of the norm,
#   unbiased; PowerSGD sends a rank-r factorisation. With error feedback a rank compresses
#   $p = g + e$ and keeps $e \leftarrow p - C(p)$, so what was dropped is delayed, not lost.
# - **Large batches.** More workers at a fixed per-worker batch $b$ means a larger global batch
#   $B = K b$ and $K$ times fewer steps per epoch. The **linear scaling rule** multiplies the step size by
#   $K$ to keep the progress per epoch; **warm-up** ramps it up over the first steps, when the loss is
#   steep; **LARS** and **LAMB** give each layer its own step, proportional to the size of its weights.

# %%
v = np.array([0.3, -2.0, 0.1, 1.5, -0.2, 0.05])
idx, vals = cp.topk_compress(v, 2)
print("top-2 indices", idx.tolist(), "values", vals.tolist())
norm, levels = cp.qsgd_quantize(v, 4, np.random.default_rng(SEED))
print("QSGD(s=4) levels", levels.tolist(), "-> Q(v) =", np.round(cp.qsgd_dequantize(norm, levels, 4), 3).tolist())

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Synchronous and local SGD use one ring all-reduce of the gradient (or model): about
# $2\frac{K-1}{K} P$ values sent per rank. Sparse and quantized vectors cannot be added inside a ring
# without expanding them, so top-k and QSGD **all-gather** every rank's message and each rank decodes the
# $K$ messages: $(K-1)\,k\,(4 + \text{itemsize})$ bytes for top-k, $(K-1)(\text{itemsize} + P)$ for QSGD
# with one byte per level. PowerSGD stays an all-reduce, of the two factors. The asynchronous holder is
# a star: every gradient travels to rank 0 and the weights travel back. The table gives the exact bytes
# rank 0 sends per step for the MLP of this chapter, from the formulas the tests check against the
# communicator's counts.

# %%
X, y = datasets.classification(N, D, classes=4, separation=2.5, seed=SEED)
mlp = opt.mlp_model([D, 32, 4])
w0 = mlp.init(seed=SEED)
P = len(w0)
shapes = tuple(mlp.shapes())
compressors = {"dense": cp.Dense(), f"top-k (k = {P // 100})": cp.TopK(P // 100),
               "QSGD (s = 4)": cp.QSGD(4), "PowerSGD (r = 2)": cp.PowerSGD(2, shapes)}
print(f"MLP with P = {P} parameters, float64")
print(f"{'compressor':>20}" + "".join(f"{'K = ' + str(K):>10}" for K in (2, 4, 8, 64)))
for name, comp in compressors.items():
    print(f"{name:>20}" + "".join(f"{cp.step_bytes(comp, P, K, 0, 8):>10}" for K in (2, 4, 8, 64)))
topk = compressors[f"top-k (k = {P // 100})"]
cross = next(K for K in range(2, 100_000) if cp.step_bytes(topk, P, K, 0, 8) > cp.step_bytes(cp.Dense(), P, K, 0, 8))
assert cross > 64 and abs(cross - 4 * P / (3 * (P // 100))) < 2  # the formula's crossover
print(f"top-k (k = {P // 100}) first sends more than the dense all-reduce at K = {cross} "
      f"(4P/(3k) = {4 * P / (3 * (P // 100)):.1f})")

# %% [markdown]
# Top-k's all-gather grows linearly with $K$ while the ring's bytes level off near $2P$ values: at
# $k = P/100$ top-k sends a tenth of the dense bytes at $K = 2$ and still about half at $K = 64$. It
# overtakes the dense all-reduce only when $(K-1)\,k\,(4 + 8) > 2\frac{K-1}{K} P \cdot 8$, that is at
# $K > \frac{4P}{3k} \approx 133$, beyond the table's columns; the cell finds the exact $K$ from the byte
# counts. (QSGD's all-gather of one byte per level overtakes the ring of 8-byte values already from $K = 16$.)
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# `train_sync_sgd` is the synchronous loop: the rows of this rank's block of the global batch, the sum
# of their gradients and the loss packed in one vector, one `ring_allreduce`, the step.

# %%
from scaleoutai.notebooks import show

show(opt.train_sync_sgd)

# %% [markdown]
# The check: for every $K$ in `KS` and for $K$ larger than the batch (ranks with an empty block
# all-reduce zeros; 5 steps are enough to show it), on the MLP with a global batch of 64, the weights
# equal one machine's.

# %%
ref_w, ref_loss = opt.reference_sgd(X, y, mlp, w0, STEPS, LR, batch=64, seed=SEED)
short_w, _ = opt.reference_sgd(X, y, mlp, w0, 5, LR, batch=64, seed=SEED)
for K in KS + [70]:
    steps, want = (STEPS, ref_w) if K <= 64 else (5, short_w)
    res = cluster.run(opt.train_sync_sgd, K, args=(X, y, mlp, w0, steps, LR, 64, SEED), timeout=120)
    worst = max(float(np.abs(w - want).max()) for w, _ in res.values)
    assert worst < 1e-10, (K, worst)
print(f"sync SGD equals one machine with B = 64 for K in {KS + [70]}; loss {ref_loss[0]:.3f} -> {ref_loss[-1]:.3f}")

# %% [markdown]
# `train_local_sgd` takes $H$ local steps between averages; with $H = 1$ it must be synchronous SGD.

# %%
show(opt.train_local_sgd)

# %%
full_loss = {}
for H in HS:
    res = cluster.run(opt.train_local_sgd, 4, args=(X, y, mlp, w0, STEPS, LR, H, 64, SEED), timeout=120)
    if H == 1:
        assert np.abs(res.values[0][0] - ref_w).max() < 1e-10  # H = 1 is sync SGD
    rounds = res.values[0][1]
    full_loss[H] = ([min((i + 1) * H, STEPS) for i in range(len(rounds))], [mlp.loss(w, X, y) for w in rounds],
                    res.stats[0].bytes_sent / STEPS)
fig, ax = plt.subplots(figsize=(6, 4))
for H, (steps_at, losses, per_step) in full_loss.items():
    ax.plot(steps_at, losses, label=f"H = {H} ({per_step:.0f} B/step)")
ax.set(xlabel="step", ylabel="training loss L", yscale="log", title="local SGD on K = 4: loss vs step")
ax.legend()
plt.show()
assert full_loss[HS[-1]][2] < full_loss[1][2] / (HS[-1] - 0.5)  # bytes per step fall by H

# %% [markdown]
# The asynchronous holder cannot ask "whichever gradient is first" (a receive names its sender), so
# workers stamp each gradient with the time it is ready, their read time plus their own compute (which
# a straggler factor stretches), and the holder applies pending gradients in stamp order.

# %%
show(opt.train_async_sgd)

# %% [markdown]
# On least squares, the simulated asynchronous run with `WORKERS` equal workers is fixed-delay SGD with
# $\tau$ = `WORKERS` - 2, bit for bit; with a straggler (rank 1 four times slower) the run equals the
# single-machine replay of the delays it recorded, and the staleness spreads out.

# %%
Xl, yl, _ = datasets.linear_regression(N, D, noise=0.5, seed=SEED)
lin = opt.linear_model(D)
wl0 = lin.init()
out = cluster.run(opt.train_async_sgd, WORKERS, args=(Xl, yl, lin, wl0, UPDATES, LR, True)).values[0]
fixed, fixed_ws = opt.reference_delayed_sgd(Xl, yl, lin, wl0, LR, WORKERS - 2, steps=UPDATES)
assert np.array_equal(out["w"], fixed)
res = cluster.run(opt.train_async_sgd, WORKERS, args=(Xl, yl, lin, wl0, UPDATES, LR, False, SECONDS_PER_ROW),
                  faults=cluster.Faults(slow={1: 4.0}))
slow_run = res.values[0]
rows = [np.arange(*block_range(N, WORKERS - 1, int(i) - 1)) for i in slow_run["schedule"][:, 0]]
replay, slow_ws = opt.reference_delayed_sgd(Xl, yl, lin, wl0, LR, slow_run["staleness"], rows=rows)
assert np.array_equal(slow_run["w"], replay)
hist = opt.staleness_histogram(slow_run["staleness"])
from_slow = slow_run["staleness"][slow_run["schedule"][:, 0] == 1]
print(f"equal workers: tau = {WORKERS - 2} after warm-up, equal to fixed-delay SGD; with a straggler: "
      f"mean tau {slow_run['staleness'].mean():.2f}, the straggler's {from_slow.mean():.1f}, "
      f"{len(from_slow)} of {UPDATES} updates from it")
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].bar(np.arange(len(hist)), hist)
axes[0].set(xlabel="staleness tau (updates between read and write)", ylabel="updates",
            title=f"{WORKERS - 1} workers, rank 1 four times slower")
for tau in TAUS:
    _, ws = opt.reference_delayed_sgd(Xl, yl, lin, wl0, LR, tau, steps=UPDATES)
    axes[1].plot([lin.loss(w, Xl, yl) for w in ws], label=f"fixed delay tau = {tau}")
axes[1].plot([lin.loss(w, Xl, yl) for w in slow_ws], "k--", label="simulated async run (straggler)")
axes[1].set(xlabel="update", ylabel="training loss L", yscale="log", title=f"convergence vs tau (lr {LR})")
axes[1].legend()
plt.show()

# %% [markdown]
# Compression goes through one function, `compressed_allreduce`: error feedback first, then the
# compressor's collective, then the residual.

# %%
show(cp.compressed_allreduce)

# %% [markdown]
# The known result, on a problem built for it: 4 shards whose least-squares problems disagree (each
# has its own $w^\star$), full-batch steps. Plain top-k keeps, on every rank, the coordinates where that
# rank's gradient is large; at the joint optimum those gradients cancel only in the sum, so the
# averaged top-k update stalls at a worse loss. With error feedback the dropped mass comes back and the
# run reaches the dense loss. The plot puts loss against the bytes rank 0 sent.

# %%
Xh, yh = opt.heterogeneous_regression(4, 50, 50, seed=10 + SEED)
lh = opt.linear_model(50)
wh0 = lh.init()
runs = {"dense": cp.Dense(), "top-k (k = 5)": cp.TopK(5), "top-k + EF": cp.TopK(5, True),
        "QSGD (s = 2)": cp.QSGD(2), "QSGD (s = 16) + EF": cp.QSGD(16, True),
        "PowerSGD (r = 1)": cp.PowerSGD(1, ((5, 10),)), "PowerSGD (r = 1) + EF": cp.PowerSGD(1, ((5, 10),), True)}
curves, curves_final_w = {}, {}
for name, comp in runs.items():
    res = cluster.run(cp.train_compressed_sgd, 4, args=(Xh, yh, lh, wh0, 300, 0.02, comp), timeout=120)
    per_step = cp.step_bytes(comp, 50, 4, 0, 8)
    assert res.stats[0].bytes_sent == 300 * per_step  # the communicator's count is the formula's
    curves[name] = (np.arange(301) * per_step, [lh.loss(w, Xh, yh) for w in res.values[0][1]])
    curves_final_w[name] = res.values[0][0]
final = {name: c[1][-1] for name, c in curves.items()}
assert final["top-k + EF"] < 1.05 * final["dense"] and final["top-k (k = 5)"] > 1.2 * final["dense"]
fig, ax = plt.subplots(figsize=(7, 4.5))
for name, (b, losses) in curves.items():
    ax.plot(np.maximum(b, 1), losses, "--" if "EF" not in name and name != "dense" else "-", label=name)
ax.set(xlabel="bytes sent by rank 0 (log)", ylabel="training loss L", xscale="log", yscale="log",
       title="loss vs bytes on 4 disagreeing shards")
ax.legend(fontsize=8)
plt.show()
for name, loss in final.items():
    print(f"{name:>22}: final loss {loss:8.3f} = {loss / final['dense']:5.2f} x dense, {cp.step_bytes(runs[name], 50, 4, 0, 8):4d} B/step")

# %% [markdown]
# ### Convergence: four results, stated and measured
#
# The runs above show *that* the methods converge or stall; the literature says *why*, with bounds. Each
# result below is stated in this chapter's symbols and then measured on the least-squares problems
# already built: `Xl, yl` (identical shards) and `Xh, yh` (4 shards that disagree).
#
# **(a) QSGD is unbiased, with bounded variance** (Alistarh et al. 2017, Lemma 3.1). For $v \in
# \mathbb{R}^d$ and $s$ levels,
#
# $$\mathbb{E}[Q_s(v)] = v, \qquad \mathbb{E}\,\|Q_s(v) - v\|^2 \le \min\!\left(\frac{d}{s^2},
# \frac{\sqrt{d}}{s}\right) \|v\|^2 .$$
#
# Entry $i$ is rounded between two levels $\|v\|/s$ apart, up with probability $p_i$, the fractional part
# of $s|v_i|/\|v\|$; so the variance is exactly $(\|v\|/s)^2 \sum_i p_i(1-p_i)$ (`qsgd_variance`). Bounding
# $p_i(1-p_i) \le 1/4$ gives $d/(4s^2)$, inside the $d/s^2$ branch; bounding it by $p_i \le s|v_i|/\|v\|$
# and using $\|v\|_1 \le \sqrt{d}\|v\|$ gives the $\sqrt{d}/s$ one. We draw $Q_s(g)$ for the full gradient $g$ of
# `Xl, yl` at $w_0$ with `TRIALS` seeds. The mean must be within 5 standard errors of $g$ (the tolerance
# of a Monte-Carlo mean), the sample variance within 20% of the exact one, and both under the bound.

# %%
show(cp.qsgd_variance)
g_full = lin.loss_grad(wl0, Xl, yl)[1] / len(yl)
print(f"d = {D}, ||g||^2 = {g_full @ g_full:.3f}; Monte-Carlo over {TRIALS} seeds")
print(f"{'s':>3} {'bias / ||g||':>13} {'tolerance':>10} {'E||Q-g||^2 / ||g||^2':>21} {'exact':>7} {'bound':>7}")
for s in (1, 2, 4, 16):
    mean, mse = cp.qsgd_moments(g_full, s, TRIALS, seed=SEED)
    exact, bound = cp.qsgd_variance(g_full, s), cp.qsgd_variance_bound(D, s) * (g_full @ g_full)
    tol = 5 * np.sqrt(exact / TRIALS)
    assert np.linalg.norm(mean - g_full) <= tol and abs(mse - exact) <= 0.2 * exact and exact <= bound
    norm2 = g_full @ g_full
    print(f"{s:>3} {np.linalg.norm(mean - g_full) / np.sqrt(norm2):>13.4f} {tol / np.sqrt(norm2):>10.4f} "
          f"{mse / norm2:>21.4f} {exact / norm2:>7.4f} {bound / norm2:>7.4f}")

# %% [markdown]
# The bound is a worst case: on this gradient the variance is several times below it. It is nearly
# reached when all $|v_i|$ are equal and $s = 1$, where the variance is $(\sqrt{d} - 1)\|v\|^2$ (the tests
# check that case). It is what QSGD's convergence theorem pays: the bound on the stochastic gradient's
# second moment grows by the factor $1 + \min(d/s^2, \sqrt{d}/s)$.
#
# **(b) Error feedback keeps a bounded residual** (Karimireddy et al. 2019). A compressor is a
# **$\delta$-contraction** if $\|C(x) - x\|^2 \le (1-\delta)\|x\|^2$ for every $x$; top-k is one with
# $\delta = k/d$, because the $d-k$ smallest entries hold at most a $(d-k)/d$ share of $\|x\|^2$. With
# error feedback the residual then stays bounded by a multiple of the largest gradient so far (their
# Lemma 3, here with the step size outside the compressor):
#
# $$\|e_t\|^2 \le \frac{4(1-\delta)}{\delta^2} \max_{t' \le t} \|g_{t'}\|^2 ,$$
#
# and the compressor enters EF-SGD's rate only through a term that decays faster than SGD's leading
# term, so EF-SGD converges to the same loss as uncompressed SGD. Plain top-k has no such guarantee, and
# Section 4's plot showed it stalling. `reference_ef_trace` replays that run (top-k, $k = 5$ of $d = 50$,
# so $\delta = 0.1$) on one machine and records each rank's residual and gradient norms.

# %%
delta = cp.topk_contraction(50, 5)
trace = cp.reference_ef_trace(Xh, yh, lh, wh0, 300, 0.02, cp.TopK(5, True), 4)
np.testing.assert_allclose(trace["ws"][-1], curves_final_w["top-k + EF"], rtol=0, atol=1e-12)  # = the cluster run
ratio = trace["residual_norms"] ** 2 / (cp.ef_residual_bound(delta, 1.0)
                                        * np.maximum.accumulate(trace["grad_norms"], axis=0) ** 2)
assert ratio.max() <= 1
print(f"delta = k/d = {delta}; bound factor 4(1 - delta)/delta^2 = {cp.ef_residual_bound(delta, 1.0):.0f}; "
      f"largest ||e_t||^2 / bound over 300 steps and 4 ranks: {ratio.max():.3f}")
print(f"final loss: dense {final['dense']:.3f}, top-k + EF {final['top-k + EF']:.3f}, "
      f"top-k alone {final['top-k (k = 5)']:.3f} (stalled {final['top-k (k = 5)'] / final['dense']:.2f} x dense)")

# %% [markdown]
# The residual never comes near the bound (a worst case over all gradient sequences), and it does not
# grow with $t$: what was dropped is paid back within a few steps.
#
# **(c) Local SGD pays for $H$ in a drift term.** For identical data, Stich (2019, Theorem 2.2) bounds
# local SGD on a $\mu$-strongly convex loss with stochastic gradients of second moment at most $G^2$ and
# condition number $\kappa$ by
#
# $$\mathbb{E}\,L(\hat w_T) - L^\star = O\!\left(\frac{G^2}{\mu K T} + \frac{\kappa H^2 G^2}{\mu T^2}\right)$$
#
# (plus a faster-decaying term in the initial error): the first term is synchronous SGD's, the second
# is the price of $H$, the $K$ models drifting apart between averages. It decays like $1/T^2$, so $H$
# can grow like $\sqrt{T/K}$ at no cost in rate. On a least-squares loss with identical shards the drift
# cancels exactly in the average (the local steps are linear), so we measure on the disagreeing shards
# `Xh, yh`, where it cannot cancel: with exact local gradients and a fixed step, local SGD settles at a
# point whose excess loss grows with $H$ (for shards whose gradients at the optimum spread by $\zeta^2$,
# of order $\eta^2 H^2 \zeta^2$; Khaled, Mishchenko and Richtarik 2020). The measured log-log slope of
# excess loss against $H$ is about 2, the $H^2$ of the drift term. `reference_local_sgd` is the
# single-machine twin of `train_local_sgd` (the tests check they agree for several $K$ and $H$).

# %%
w_star = np.linalg.lstsq(Xh, yh, rcond=None)[0]
excess = {}
for H in HS + [2 * HS[-1], 4 * HS[-1]]:
    w_H, _ = opt.reference_local_sgd(Xh, yh, lh, wh0, 300, 0.02, H, 4)
    excess[H] = lh.loss(w_H, Xh, yh) - lh.loss(w_star, Xh, yh)
Hs = sorted(excess)
slope = np.polyfit(np.log(Hs[1:]), np.log([excess[H] for H in Hs[1:]]), 1)[0]
assert all(excess[a] < excess[b] for a, b in zip(Hs, Hs[1:])) and 1.5 < slope < 2.8
print("excess loss L(w_T) - L* after 300 steps, K = 4:", {H: f"{e:.2e}" for H, e in excess.items()},
      f"; log-log slope over H >= 2: {slope:.2f}")

# %% [markdown]
# **(d) Asynchronous SGD: the step size must shrink like $1/\tau$.** On the quadratic loss of `Xl, yl`,
# with Hessian $A = \frac{2}{N} X^\top X$ (`least_squares_hessian`), fixed-delay gradient descent
# $w_{t+1} = w_t - \eta A (w_{t-\tau} - w^\star)$ splits along the eigenvectors of $A$: the error along
# eigenvalue $\lambda$ obeys $e_{t+1} = e_t - \eta\lambda\, e_{t-\tau}$. Its characteristic polynomial
# $z^{\tau+1} - z^\tau + \eta\lambda$ has all roots inside the unit circle exactly when
# $0 < \eta\lambda < 2\sin\frac{\pi}{2(2\tau+1)}$, a classical result on delay difference equations that the
# tests confirm root by root. The top eigenvalue binds, so
#
# $$\eta < \eta^\star(\tau) = \frac{2}{\lambda_{\max}} \sin\frac{\pi}{2(2\tau + 1)} \approx
# \frac{\pi}{(2\tau + 1)\,\lambda_{\max}} ,$$
#
# $2/\lambda_{\max}$ at $\tau = 0$ and shrinking like $1/\tau$. Analyses of stochastic asynchronous SGD on
# smooth losses classically ask for a step of the same order, inversely proportional to the largest
# delay; recent work (Section 9) relaxes the largest delay to an average or a quantile. The runs: every
# $\tau$ in `TAUS`, step sizes from $0.5$ to $1.5$ times $\eta^\star(\tau)$.

# %%
lam_max = float(np.linalg.eigvalsh(opt.least_squares_hessian(Xl))[-1])
wl_star = np.linalg.lstsq(Xl, yl, rcond=None)[0]
factors = [0.5, 0.8, 0.95, 1.05, 1.2, 1.5]
fig, ax = plt.subplots(figsize=(6, 4))
for tau in TAUS:
    eta_star = opt.delayed_gd_threshold(lam_max, tau)
    dist = []
    for f in factors:
        w_end, _ = opt.reference_delayed_sgd(Xl, yl, lin, wl0, f * eta_star, tau, steps=400)
        dist.append(float(np.linalg.norm(w_end - wl_star) / np.linalg.norm(wl_star)))
    assert max(dist[:2]) < 0.01 and min(dist[4:]) > 1, (tau, dist)  # converges below, diverges above
    ax.plot(factors, dist, "o-", label=f"tau = {tau}: eta* = {eta_star:.3f}")
    print(f"tau = {tau:>2}: eta*(tau) = {eta_star:.4f}, {eta_star * lam_max * (2 * tau + 1) / np.pi:.3f} x the "
          f"approximation pi / ((2 tau + 1) lam_max); |w_T - w*| / |w*| at 0.8 and 1.2 x eta*: "
          f"{dist[1]:.1e}, {dist[4]:.1e}")
ax.axvline(1.0, color="k", ls=":")
ax.set(xlabel="step size / eta*(tau)", ylabel="||w_T - w*|| / ||w*|| (log)", yscale="log",
       title=f"fixed-delay GD, lam_max = {lam_max:.2f}, 400 updates")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Well below the threshold every run reaches $w^\star$; well above it every run moves away from it, by a
# factor that grows with the number of updates. Close to $\eta^\star$ on either side the error changes
# slowly (the top root is near the unit circle), so a finite run cannot tell the two apart there.
# Section 6's step of 0.3 is above $\eta^\star(\tau)$ for the larger delays, which is why it diverges
# there.
#
# ### Large batches: linear scaling, warm-up, LARS and LAMB
#
# Synchronous SGD on $K$ workers is one machine with batch $B = K b$, so adding workers at a fixed
# per-worker batch means fewer, larger steps per epoch. Goyal et al. (2017) keep the progress per epoch
# with the **linear scaling rule** $\eta_B = \eta_b \cdot B/b$ (K small steps of size $\eta_b$ are
# roughly one step of $K\eta_b$ while the gradient changes little) and a **gradual warm-up**, which ramps
# the step from small to $\eta_B$ over the first epochs, where the gradient does change fast. **LARS**
# (You, Gitman and Ginsburg 2017) gives layer $l$ its own step, a trust ratio
# $c\,\|w_l\| / (\|g_l\| + \omega\|w_l\|)$ times the global one ($c$ the trust coefficient, $\omega$ the
# weight decay), so no layer moves by more than a fraction of its own size. **LAMB** (You et al. 2020)
# applies the same layer-wise ratio $\|w_l\| / \|u_l\|$ to Adam's update $u_l$.

# %%
from scaleoutai.ml import large_batch as lb

show(lb.lars_step)
show(lb.lamb_step)

# %% [markdown]
# A hand check of one step on one layer, $w = (3, 4)$ and $g = (0.6, 0.8)$: LARS with $c = 0.001$ has
# trust ratio $0.001 \cdot 5/1$, so it moves $w$ by $0.005\,g$; LAMB's first Adam direction is
# $g/|g| = (1, 1)$, of norm $\sqrt 2$, so it moves $w$ by $\eta \cdot 5/\sqrt{2}$ in each coordinate. (The
# tests also compare several steps with a torch implementation of each.)

# %%
w_hand, g_hand = np.array([3.0, 4.0]), np.array([0.6, 0.8])
assert np.allclose(lb.lars_step(w_hand, g_hand, [(2,)], {}, lr=1.0, trust=0.001, momentum=0.0), [2.997, 3.996])
assert np.allclose(lb.lamb_step(w_hand, g_hand, [(2,)], {}, lr=0.01, eps=0.0), w_hand - 0.05 / np.sqrt(2))
print("LARS and LAMB match the hand-derived step")

# %% [markdown]
# The experiment: the MLP of Section 3 on `LB_N` examples, trained for `LB_EPOCHS` epochs at $b = 8$ with
# $\eta_b = 0.05$, and at $B = 64 b = 512$ with (i) plain SGD at the linearly scaled $\eta_B = 3.2$,
# (ii) the same with a one-epoch linear warm-up from $\eta_b$ to $\eta_B$, (iii) LAMB at $\eta = 0.05$
# with a one-epoch warm-up from 0.
# `train_large_batch` uses the batches that synchronous SGD on $K$ ranks would use, so each curve is
# also what $K = 64$ workers would compute. Loss is plotted against epochs (examples seen / $N$).

# %%
Xb, yb = datasets.classification(LB_N, 10, classes=4, separation=2.5, seed=SEED)
mlp_b = opt.mlp_model([10, 32, 4])
wb0 = mlp_b.init(seed=SEED)
b_small, K_big, lr_small = 8, 64, 0.05
B_big, per_epoch = K_big * b_small, LB_N // (K_big * b_small)
lb_runs = {f"b = {b_small}, eta = {lr_small}": lb.train_large_batch(
    Xb, yb, mlp_b, wb0, LB_EPOCHS * LB_N // b_small, b_small, "sgd", lr_small, every=LB_N // b_small // 4)[1]}
eta_big = lb.linear_scaled_lr(lr_small, b_small, B_big)
for name, method, lr, warm in ((f"B = {B_big}: SGD, eta = {eta_big:.1f}", "sgd", eta_big, 0),
                               (f"B = {B_big}: SGD + warm-up", "sgd", eta_big, per_epoch),
                               (f"B = {B_big}: LAMB + warm-up", "lamb", 0.05, per_epoch)):
    lb_runs[name] = lb.train_large_batch(Xb, yb, mlp_b, wb0, LB_EPOCHS * per_epoch, B_big, method, lr, warm,
                                         start_lr=lr_small if method == "sgd" else 0.0)[1]
fig, ax = plt.subplots(figsize=(6.5, 4))
for name, losses in lb_runs.items():
    ax.plot(np.linspace(0, LB_EPOCHS, len(losses)), losses, "k-" if name.startswith("b =") else "o-", label=name)
ax.set(xlabel="epoch", ylabel="training loss L (log)", yscale="log", title=f"K = {K_big}: batch {b_small} vs {B_big}")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
small_final = lb_runs[f"b = {b_small}, eta = {lr_small}"][-1]
for name, losses in lb_runs.items():
    print(f"{name:>30}: loss after {LB_EPOCHS} epochs {losses[-1]:.3f} = {losses[-1] / small_final:.2f} x small batch")
assert lb_runs[f"B = {B_big}: SGD + warm-up"][-1] < 1.1 * small_final
assert lb_runs[f"B = {B_big}: LAMB + warm-up"][-1] < 1.1 * small_final
assert lb_runs[f"B = {B_big}: SGD, eta = {eta_big:.1f}"][-1] > 1.3 * small_final

# %% [markdown]
# With 64 times fewer steps, linear scaling alone lags: its first step at $\eta = 3.2$ overshoots while
# the loss is steep (the loss jumps about fourfold), and it does not catch up within the budget. Warm-up
# removes exactly that start, and after it the large-batch curve joins the small-batch one, as Goyal et
# al. found for ResNet-50 up to $B = 8192$. LAMB gets there with the small-batch step size itself,
# because its trust ratio sets each layer's step from that layer's weights. Warm-up does not rescue
# every linearly scaled step: at $\eta_b = 0.1$ the small batch still trains but $\eta_B = 6.4$ diverges
# even after warm-up, while LAMB, whose step does not grow with $B$, keeps the curve (Exercise 6). Where
# the linear rule stops is the *critical batch size* of Section 9.

# %% [markdown]
# ## 5. The same task with a production library: PyTorch DDP with the PowerSGD hook
#
# `torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook` replaces DDP's all-reduce of each gradient
# bucket with PowerSGD: 1-D tensors are all-reduced dense, each matrix $M$ (a weight's gradient, out x in)
# is compressed with rank r, with optional error feedback and warm start. We run it on 2 real processes
# with a linear layer in float64 and put our `compressed_allreduce` beside it on the same processes.
#
# Our result depends on the random first Q, so we read how torch draws it: `torch.manual_seed` of
# `RandomState(random_seed).randint(10**9)`, then `torch.randn` of Q's shape. We draw the same Q and hand
# it to ours; with warm start both reuse the previous Q afterwards, so **the compressed gradients
# themselves** can be compared, step by step, not only a loss curve. Two details must match torch:
# `start_powerSGD_iter=2` (torch runs 2 plain all-reduces first, so we use `Dense` for those steps) and
# `min_compression_rate=1`, which leaves the bias dense (torch would otherwise compress it as a 4 x 1
# matrix and draw a Q for it first).

# %%
def ddp_powersgd(comm, X, Y, W0, b0, r, steps, lr):
    import numpy as np
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    from torch.nn.parallel import DistributedDataParallel as DDP

    from scaleoutai.ml import compression as cp

    def linear():
        lin = torch.nn.Linear(W0.shape[1], W0.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W0))
            lin.bias.copy_(torch.from_numpy(b0))
        return lin

    x, yt = (torch.from_numpy(np.array_split(a, comm.size)[comm.rank]) for a in (X, Y))
    ddp, twin = DDP(linear()), linear()
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=r, start_powerSGD_iter=2,
                             min_compression_rate=1, use_error_feedback=True, warm_start=True, random_seed=0)
    ddp.register_comm_hook(state, ps.powerSGD_hook)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(np.random.RandomState(0).randint(1_000_000_000))
        q0 = torch.randn(1, W0.shape[1], r, dtype=torch.float64)[0].numpy()
    ours, our_state = cp.PowerSGD(r, (W0.shape, b0.shape), error_feedback=True), {"q": [q0]}
    gaps, dense_gaps, ours_t, torch_t = [], [], [], []
    for step in range(steps):
        t0 = time.perf_counter()
        ddp.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), yt).backward()
        torch_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        twin.zero_grad()
        torch.nn.functional.mse_loss(twin(x), yt).backward()
        local = np.concatenate([twin.weight.grad.numpy().ravel(), twin.bias.grad.numpy()])
        mine = cp.compressed_allreduce(comm, local, cp.Dense() if step < 2 else ours, our_state)
        ours_t.append(time.perf_counter() - t0)
        dense = cp.compressed_allreduce(comm, local, cp.Dense(), {})
        theirs = np.concatenate([ddp.module.weight.grad.numpy().ravel(), ddp.module.bias.grad.numpy()])
        gaps.append(float(np.abs(mine - theirs).max()))
        dense_gaps.append(float(np.abs(theirs - dense).max()))
        with torch.no_grad():
            ddp.module.weight -= lr * ddp.module.weight.grad
            ddp.module.bias -= lr * ddp.module.bias.grad
            twin.weight -= lr * torch.from_numpy(mine[:W0.size].reshape(W0.shape))
            twin.bias -= lr * torch.from_numpy(mine[W0.size:])
    return {"gaps": gaps, "dense_gaps": dense_gaps, "iter": state.iter, "ours_s": float(np.median(ours_t[2:])),
            "torch_s": float(np.median(torch_t[2:]))}


rng = np.random.default_rng(SEED)
Xt, Wt0 = rng.standard_normal((64, 32)), 0.1 * rng.standard_normal((16, 32))
Yt = Xt @ rng.standard_normal((32, 16)) + 0.1 * rng.standard_normal((64, 16))
res = cluster.run(ddp_powersgd, 2, backend="process", args=(Xt, Yt, Wt0, np.zeros(16), 2, 12, 0.05), timeout=240)
for got in res.values:
    assert got["iter"] == 12  # torch's hook ran on every step
    assert max(got["dense_gaps"][2:]) > 1e-3  # and compressed from step 2 on: not the dense gradient
    assert max(got["gaps"]) < 1e-10, got["gaps"]  # ours gives the same compressed gradient
print(f"DDP + powerSGD_hook (r = 2, EF, warm start) on 2 processes: torch state.iter = {res.values[0]['iter']}; "
      f"largest difference from ours over 12 steps {max(res.values[0]['gaps']):.1e}; "
      f"compressed vs dense gradient differ by up to {max(res.values[0]['dense_gaps']):.2f}")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Stale gradients diverge.** Fixed-delay SGD with a step size that is safe for $\tau = 0$ diverges as
# $\tau$ grows: the update corrects an error the weights no longer have, overshoots, and the overshoot
# feeds back $\tau$ steps later. The safe step size shrinks roughly like $1/\tau$: the step 0.3 below
# is under $\eta^\star(0)$ and over $\eta^\star(8)$ of Section 4 (d).

# %%
big = 0.3
assert opt.delayed_gd_threshold(lam_max, 8) < big < opt.delayed_gd_threshold(lam_max, 0)  # Section 4 (d)
fig, ax = plt.subplots(figsize=(6, 4))
finals = {}
for tau in [0, 2, 8]:
    _, ws = opt.reference_delayed_sgd(Xl, yl, lin, wl0, big, tau, steps=60)
    curve = [lin.loss(w, Xl, yl) for w in ws]
    finals[tau] = curve[-1]
    ax.plot(curve, label=f"tau = {tau}")
ax.set(xlabel="update", ylabel="training loss L", yscale="log", title=f"step size {big}: staleness makes it diverge")
ax.legend()
plt.show()
assert finals[0] < lin.loss(wl0, Xl, yl) < finals[8]
print({tau: f"{v:.3g}" for tau, v in finals.items()})

# %% [markdown]
# **Top-k without error feedback stalls** (Section 4's plot): its final loss is above the dense one by the
# factor printed there, and more steps do not close the gap, while error feedback reaches the dense loss.
# **Error feedback needs a contraction**: with QSGD at $s = 2$ levels on 50 coordinates the quantization
# error can exceed the vector itself, and the fed-back residual grows without bound.

# %%
res = cluster.run(cp.train_compressed_sgd, 4, args=(Xh, yh, lh, wh0, 100, 0.02, cp.QSGD(2, True)))
blown = lh.loss(res.values[0][0], Xh, yh)
assert not blown < 100 * lh.loss(wh0, Xh, yh)
print(f"QSGD (s = 2) with error feedback after 100 steps: loss {blown:.3g} (it started at {lh.loss(wh0, Xh, yh):.3g})")

# %% [markdown]
# **A straggler slows synchronous SGD; asynchronous SGD keeps going.** On the simulator rank 1 is made 4
# times slower. Every synchronous step waits for it, so the step time grows by almost the factor. The
# asynchronous holder keeps applying the fast workers' gradients: its update rate drops only by the
# straggler's share.

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)
rate = {}
for label, slow in (("no straggler", {}), ("rank 1 4x slower", {1: 4.0})):
    sync = cluster.run(opt.train_sync_sgd, WORKERS - 1, args=(Xl, yl, lin, wl0, 20, LR, None, 0, SECONDS_PER_ROW),
                       network=net, faults=cluster.Faults(slow={r - 1: f for r, f in slow.items()} if slow else {}))
    asy = cluster.run(opt.train_async_sgd, WORKERS, args=(Xl, yl, lin, wl0, 100, LR, False, SECONDS_PER_ROW,
                                                          net.message_time(8 * D)),  # stamps pay each message
                      network=net, faults=cluster.Faults(slow=slow)).values[0]
    # sync: one step = every worker's block of all N rows; async: one update = one worker's block
    rate[label] = (20 / sync.sim_time, 100 / asy["times"][-1] / (WORKERS - 1))
    print(f"{label:>18}: sync {rate[label][0]:8.1f} full-batch steps/s, async {rate[label][1]:8.1f} "
          f"full-batch equivalents/s")
assert rate["rank 1 4x slower"][0] < 0.5 * rate["no straggler"][0]
assert rate["rank 1 4x slower"][1] > 0.6 * rate["no straggler"][1]

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# Time to run `STEPS` full-batch steps of the MLP on the simulated network, for synchronous SGD and for
# local SGD with $H = 4$, each rank charged `SECONDS_PER_ROW` per example. $S_K = T_1 / T_K$ and
# $E_K = S_K / K$ use the $K = 1$ run of the same algorithm; the cost prices $K$ instances of the
# capstone's CPU machine for 1000 such runs.

# %%
price = capstone.lookup("aws-c7i.xlarge")
times = {"sync": {}, "local H=4": {}}
for K in KS:
    res = cluster.run(opt.train_sync_sgd, K, args=(X, y, mlp, w0, STEPS, LR, None, SEED, SECONDS_PER_ROW),
                      network=net, timeout=120)
    times["sync"][K] = res.sim_time
    res = cluster.run(opt.train_local_sgd, K, args=(X, y, mlp, w0, STEPS, LR, 4, None, SEED, SECONDS_PER_ROW),
                      network=net, timeout=120)
    times["local H=4"][K] = res.sim_time
print(f"{'algorithm':>10} {'K':>3} {'T_K (s)':>8} {'S_K':>6} {'E_K':>5} {'USD per 1000 runs':>18}")
for name, t in times.items():
    for row in perf.scaling_table(t):
        cost = perf.run_cost(price.price_per_hour, row["p"], 1000 * row["time"])
        print(f"{name:>10} {row['p']:>3} {row['time']:>8.3f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {cost:>18.4f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, ax = plt.subplots(figsize=(6, 4))
for name, t in times.items():
    ax.plot(list(t), [t[1] / t[K] for K in t], "o-", label=name)
ax.plot(KS, KS, "k:", label="ideal")
ax.set(xlabel="workers K", ylabel="speedup S_K", title="sync vs local SGD on the simulated network")
ax.legend()
plt.show()
assert times["local H=4"][KS[-1]] < times["sync"][KS[-1]]

# %% [markdown]
# Local SGD's speedup stays closer to $K$ because it pays the all-reduce once every 4 steps; the price is
# the loss gap of Section 4, which must be paid back in extra steps. Which one wins on time *to a target
# loss* depends on that gap, the exercise below.
#
# ## 8. Exercises
#
# 1. **Time to a target loss.** For $H \in \{1, 2, 4, 8\}$, find the number of steps local SGD needs to
#    reach the loss sync SGD reaches after `STEPS` steps, and turn it into simulated time. Which $H$ wins
#    at $\beta = 10^{-8}$, and which at $\beta = 10^{-10}$?
# 2. **The staleness-aware step size.** Divide the learning rate of each asynchronous update by
#    $1 + \tau$ (Zhang et al. 2016). Does the straggler run of Section 4 converge faster? Does the
#    $\tau = 8$ run of Section 6 still diverge?
# 3. **Random-k vs top-k.** Add a compressor that keeps k random coordinates (the same on every rank, so
#    they can be all-reduced densely) scaled by $n/k$. Compare bytes and loss with top-k, with and without
#    error feedback.
# 4. **PowerSGD rank.** Sweep r from 1 to full rank on the MLP of Section 3 and plot final loss against
#    bytes. Where does PowerSGD stop saving bytes relative to the dense all-reduce?
# 5. **Lab 10.** One bit per coordinate: the scaled sign compressor with error feedback (EF-SignSGD),
#    bit-packed on the wire, and why feedback rescues it: `labs/lab10-error-feedback-compression`.
# 6. **Where linear scaling breaks.** In the large-batch experiment of Section 4, raise $\eta_b$ from
#    0.05 to 0.1 with $\eta_B = 64\,\eta_b$ and the same warm-up. Which runs still keep the small-batch
#    loss? Estimate the top Hessian eigenvalue $\lambda_{\max}$ of the training loss at $w_0$ and at the
#    end of warm-up (power iteration on Hessian-vector products, each a difference of two gradients)
#    and compare $\eta_B$ with $2/\lambda_{\max}$, the limit of Section 4 (d) at $\tau = 0$. Why does the
#    quadratic rule not predict which run diverges?
#
# ## 9. Research directions
#
# - **How much asynchrony can a method absorb?** Lock-free and delayed updates converge under bounded
#   staleness, with step sizes that shrink with the delay; how to adapt to the delays a real cluster
#   actually shows, rather than the worst case, is open.
#   - Recht, Re, Wright and Niu, "Hogwild!: A Lock-Free Approach to Parallelizing Stochastic Gradient
#     Descent", NeurIPS, 2011. Asynchronous updates without locks on sparse problems.
#   - Lian, Zhang, Zhang and Liu, "Asynchronous Decentralized Parallel Stochastic Gradient Descent",
#     ICML, 2018 (and Lian et al., "Can Decentralized Algorithms Outperform Centralized Algorithms?",
#     NeurIPS, 2017). Asynchrony without a parameter holder.
#   - Koloskova, Stich and Jaggi, "Sharper Convergence Guarantees for Asynchronous SGD for Distributed and
#     Federated Learning", NeurIPS, 2022. Asynchronous SGD over workers whose speeds vary over time, with
#     guarantees that no longer hinge on the largest delay, the straggler of Section 4's run.
#   - Attia, Gaash and Koren, "Faster Stochastic Optimization with Arbitrary Delays via Asynchronous
#     Mini-Batching", arXiv preprint 2408.07503, 2024. Guarantees in terms of a quantile of the delays
#     instead of their maximum or mean, by batching and filtering stale gradients: the step-size
#     threshold of Section 4 (d) need not be set for the worst straggler.
# - **Local steps and heterogeneous data.** Local SGD provably saves communication on identical data;
#   when workers' data differ the local models drift apart, and the best $H$ and its correction terms
#   are still studied (Chapter 14 meets the same problem as federated learning).
#   - Stich, "Local SGD Converges Fast and Communicates Little", ICLR, 2019. The rate of local SGD and
#     the number of rounds it saves.
#   - Lin, Stich, Patel and Jaggi, "Don't Use Large Mini-Batches, Use Local SGD", ICLR, 2020. Post-local
#     SGD and generalisation.
#   - Gu, Lyu, Arora, Zhang and Huang, "A Quadratic Synchronization Rule for Distributed Deep Learning",
#     ICLR, 2024. Grows the number of local steps $H$ as the learning rate decays, in proportion to
#     $1/\eta^2$, which both cuts communication and improves test accuracy.
#   - Khaled, Mishchenko and Richtarik, "Tighter Theory for Local SGD on Identical and Heterogeneous
#     Data", AISTATS, 2020. Separates the two data regimes; the heterogeneous drift term is the one
#     Section 4 (c) measures.
#   - Wang, Wang, Chen and Ji, "A New Theoretical Perspective on Data Heterogeneity in Federated
#     Optimization", ICML, 2024. Replaces the smoothness constant in the drift term by a much smaller
#     heterogeneity-driven one, explaining why many local steps often help in practice despite the bound.
#   - Sadchikov, Chezhegov, Beznosikov and Gasnikov, "Local SGD for Near-Quadratic Problems: Improving
#     Convergence under Unconstrained Noise Conditions", Russian Mathematical Surveys, 2024. On quadratics
#     with identical data the number of local steps does not matter (as Section 4 (c) observes); this work
#     extends that to losses that are nearly quadratic.
# - **Which compressor, with which feedback?** Error feedback fixes biased compressors such as top-k and
#   sign; its interaction with momentum, Adam and all-reduce-compatible (linear) compressors, and the
#   bytes it really saves end to end on fast networks, remain active questions.
#   - Karimireddy, Rebjock, Stich and Jaggi, "Error Feedback Fixes SignSGD and other Gradient
#     Compression Schemes", ICML, 2019. Why plain biased compression fails and EF repairs it.
#   - Alistarh, Grubic, Li, Tomioka and Vojnovic, "QSGD: Communication-Efficient SGD via Gradient
#     Quantization and Encoding", NeurIPS, 2017. Unbiased stochastic quantization with variance bounds.
#   - Vogels, Karimireddy and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
#     Optimization", NeurIPS, 2019. A linear compressor that stays an all-reduce; the algorithm of the
#     torch hook in Section 5.
#   - Richtarik, Gasanov and Burlachenko, "Error Feedback Reloaded: From Quadratic to Arithmetic Mean of
#     Smoothness Constants", ICLR, 2024. A sharper analysis of EF21, the modern form of error feedback,
#     whose rate improves most when workers' losses differ, as the shards of Section 4 do.
# - **Low-communication training of large models.** Adam-based pre-training resists both tools above: its
#   non-linear update slows convergence when gradients are compressed to a few bits or when workers take
#   many local steps. Methods that synchronise once per hundreds of steps, or in a few bits, across poorly
#   connected clusters, and still match synchronous training at scale, are an active topic.
#   - Douillard et al., "DiLoCo: Distributed Low-Communication Training of Language Models", arXiv
#     preprint, 2023. Runs AdamW locally for hundreds of steps on each worker and applies the averaged
#     parameter change with an outer Nesterov step, matching synchronous training of language models while
#     communicating about 500 times less.
#   - Lu, Li, Zhang, De Sa and He, "Maximizing Communication Efficiency for Large-scale Training via 0/1
#     Adam", ICLR, 2023. Freezes Adam's variance and linearises its step so that 1-bit compression and
#     skipped rounds can be combined in Adam-based pre-training.
# - **How large can the batch grow?** Linear scaling with warm-up and layer-wise trust ratios keep the
#   small-batch curve up to a *critical batch size*, beyond which more workers buy fewer and fewer steps.
#   Predicting that size for a given model and data budget, and schedules that grow the batch as
#   training proceeds, are open.
#   - Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", arXiv preprint
#     1706.02677, 2017. The linear scaling rule and gradual warm-up of Section 4.
#   - You, Gitman and Ginsburg, "Large Batch Training of Convolutional Networks", arXiv preprint
#     1708.03888, 2017. LARS, the layer-wise trust ratio.
#   - You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", ICLR, 2020.
#     LAMB, the trust ratio on Adam's update, with convergence guarantees for both LARS and LAMB.
#   - Zhang, Morwani, Vyas, Wu, Zou, Ghai, Foster and Kakade, "How Does Critical Batch Size Scale in
#     Pre-training?", ICLR, 2025. In language-model pre-training the critical batch size grows mainly
#     with the amount of data, not the model size: the limit that Exercise 6 meets at small scale.
#
# ## What's next
#
# Chapter 11 (Parameter servers) turns the asynchronous holder of this chapter into a sharded key-value
# store: many servers each own a slice of the weights, workers push and pull only the rows they touch,
# and bounded staleness becomes a rule the servers enforce rather than an accident of worker speeds.
