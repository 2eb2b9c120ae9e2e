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
# # Chapter 3. Performance models
#
# Before you distribute anything, you should be able to say on the back of an envelope how fast it
# *could* go and what will stop it. This chapter builds the small set of models that answer that
# question: speedup $S_p$ and efficiency $E_p$, Amdahl's and Gustafson's laws, the Karp-Flatt
# metric that reads a serial fraction out of measurements, the straggler model of a synchronous
# step, the roofline of a single node, and the $\alpha$-$\beta$ model of a message. Every model is
# checked against a run on the simulated cluster or against a closed form.
#
# **Prerequisites:** Chapter 1 (Why scale out: the ring all-reduce of a gradient) and Chapter 2
# (Distributed-systems concepts: the simulated cluster, stragglers and failures). Background: the mean,
# variance and maximum of random variables, logarithms, and least-squares line fitting.

# %% tags=["parameters"]
K_MAX = 64  # smoke: 16
TRIALS = 20  # smoke: 6
MU = 0.100  # mean compute time of one step on one worker (simulated seconds)
SIGMA = 0.010  # its standard deviation across workers
SLOW_FACTOR = 2.0  # one straggler that computes this many times slower
GRAD_FLOATS = 4096  # gradient length all-reduced each step (divisible by every K in the sweep)
ALPHA = 20e-6  # simulated network latency per message (s)
BETA = 1 / 1.25e9  # simulated seconds per byte (10 Gbit/s)
MATMUL_N = 512  # smoke: 256
VECTOR_N = 8_000_000  # smoke: 4_000_000
REPEATS = 7  # smoke: 3
CORE_GHZ = 3.0  # nominal clock of this CPU, for a rough peak
FLOP_PER_CYCLE = 32  # float64 FLOP per cycle per core: two 8-wide FMA units (AVX-512); 16 with AVX2
PEAK_BANDWIDTH = 20e9  # nominal DRAM bandwidth of one socket (bytes/s)
SEED = 0

# %% [markdown]
# ## 1. Motivation: which ceiling binds?
#
# A job runs out of one of three things first: arithmetic (FLOP/s of the cores), memory bandwidth
# (bytes/s between DRAM and the cores), or the network (latency $\alpha$ and per-byte time $\beta$
# between machines). Adding workers raises the first two ceilings linearly and *lowers* the third,
# because every worker added is one more party to every synchronization. Performance models tell
# you which ceiling binds *before* you rent the cluster, and measurements tell you whether the
# model was right. The models in this chapter are deliberately simple: each has one or two
# parameters you can measure, and each fails in a recognisable way.

# %%
import os
import platform

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, collectives, perf

rng = np.random.default_rng(SEED)
print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores visible")

# %% [markdown]
# ## 2. Core concepts: speedup, efficiency and the two laws
#
# With $T_1$ the time on one worker and $T_p$ the time on $p$ workers,
#
# $$S_p = \frac{T_1}{T_p}, \qquad E_p = \frac{S_p}{p}.$$
#
# **Amdahl** (fixed problem): if a fraction $s$ of the one-worker time cannot be parallelised,
# $T_p = T_1\,(s + (1-s)/p)$ and $S_p = 1/(s + (1-s)/p) \to 1/s$. Five per cent of serial work caps
# the speedup at 20, however many machines you buy.
#
# **Gustafson** (scaled problem): if the parallel part grows with $p$ while the serial part stays
# fixed, measured as fractions of the *parallel* run, $S_p = p - s\,(p-1)$: linear in $p$. Both
# laws are right; they answer different questions (finish the same job sooner, or a bigger job in
# the same time). Data-parallel training with a fixed per-worker batch $b$ and a global batch
# $B = K b$ is a Gustafson workload; shrinking $b$ to keep $B$ fixed is an Amdahl one.

# %%
p = 2.0 ** np.arange(0, 11)  # 1 .. 1024 workers
fractions = [0.0, 0.01, 0.05, 0.1, 0.25]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for s in fractions:
    axes[0].loglog(p, perf.amdahl_speedup(s, p), "o-", ms=3, label=f"s = {s}")
    axes[1].loglog(p, perf.gustafson_speedup(s, p), "o-", ms=3, label=f"s = {s}")
for ax, title in zip(axes, ["Amdahl: fixed problem size", "Gustafson: problem grows with p"]):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("workers p")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
axes[0].set_ylabel("speedup $S_p$")
axes[0].legend()
plt.tight_layout()

# The laws' limits, checked against their closed forms.
np.testing.assert_allclose(perf.amdahl_speedup(0.0, p), p)  # no serial part: ideal
np.testing.assert_allclose(perf.gustafson_speedup(0.0, p), p)
for s in fractions[1:]:
    assert perf.amdahl_speedup(s, 1) == 1.0 and perf.gustafson_speedup(s, 1) == 1.0
    assert np.all(np.diff(perf.amdahl_speedup(s, p)) > 0) and np.all(perf.amdahl_speedup(s, p) < 1 / s)
    np.testing.assert_allclose(perf.amdahl_speedup(s, 1e12), 1 / s, rtol=1e-9)  # the ceiling 1/s
    np.testing.assert_allclose(np.diff(perf.gustafson_speedup(s, p)) / np.diff(p), 1 - s)  # slope 1 - s
    np.testing.assert_allclose(perf.efficiency(1.0, 1.0 / perf.amdahl_speedup(s, p), p),
                               perf.amdahl_speedup(s, p) / p)
print("Amdahl caps at 1/s, Gustafson grows with slope 1 - s; E_p = S_p / p")

# %% [markdown]
# ### Karp-Flatt: reading the serial fraction off a measurement
#
# Inverting Amdahl's law for $s$ gives the **experimentally determined serial fraction**
#
# $$e = \frac{1/S_p - 1/p}{1 - 1/p}.$$
#
# If a program really is "serial part plus perfectly parallel part", $e$ is the same at every $p$.
# If $e$ *grows* with $p$, the loss is not a fixed serial part but an overhead that grows with the
# number of workers (communication, imbalance, stragglers): a different disease with a different
# cure. Below, one synthetic program obeys Amdahl exactly; the other adds a
# $c \log_2 p$ synchronization cost.

# %%
T1, s_true, c = 10.0, 0.04, 0.05
t_amdahl = T1 * (s_true + (1 - s_true) / p)
t_overhead = t_amdahl + c * np.log2(p)
e_amdahl = perf.karp_flatt(perf.speedup(T1, t_amdahl[1:]), p[1:])
e_overhead = perf.karp_flatt(perf.speedup(T1, t_overhead[1:]), p[1:])
np.testing.assert_allclose(e_amdahl, s_true, rtol=1e-12)  # recovered exactly at every p
assert np.all(np.diff(e_overhead) > 0)  # overhead shows up as a growing e
for pp, ea, eo in zip(p[1:][::3], e_amdahl[::3], e_overhead[::3]):
    print(f"p = {int(pp):5d}   e (Amdahl program) = {ea:.4f}   e (with log p overhead) = {eo:.4f}")

# %% [markdown]
# ## 3. The distribution and communication pattern: a synchronous step
#
# The workhorse pattern of distributed training is the **bulk-synchronous step**: each of $K$
# workers computes on its shard (time $t_k$), then all of them meet in an all-reduce of the
# gradient. Nobody can leave the all-reduce before the slowest worker has arrived, so
#
# $$T_\text{step} = \max_k t_k + T_\text{allreduce}(n, K), \qquad
#   T_\text{ring}(n, K) = 2(K-1)\left(\alpha + \frac{n}{K}\beta\right)$$
#
# for a ring all-reduce of $n$ bytes (Chapter 4). Even when no worker is *broken*, the $t_k$ vary
# (caches, garbage collection, noisy neighbours, data-dependent work), and the expected maximum of
# $K$ draws grows with $K$: for normal noise roughly as $\mu + \sigma\sqrt{2 \ln K}$. This is the
# **straggler model**: the synchronous step pays for the tail of the distribution, not its mean.

# %% [markdown]
# ## 4. From scratch: the straggler model on the simulated cluster
#
# Each rank draws its compute time from $N(\mu, \sigma^2)$, spends it with `comm.compute(t)` (which
# advances its simulated clock), and joins a ring all-reduce of a gradient built from
# `comm.send`/`comm.recv`. The simulator's makespan `res.sim_time` must equal the max of the draws
# plus the all-reduce's $\alpha$-$\beta$ time, *exactly*: the ring's dependency chain visits every
# rank, so every rank leaves the all-reduce $T_\text{ring}$ after the latest arrival.
#
# The simulator charges every message to a single-port, full-duplex link: a rank sends one message and
# receives one at a time, and each occupies both ends for $\alpha + n\beta$. In the ring each rank has
# one message in and one out per step, so no link is ever asked for two at once. Read the three pieces
# this section puts together: the ring itself, the closed form it must equal, and the expected maximum
# of $K$ normal draws.

# %%
from scaleoutai.notebooks import show

show(collectives.ring_allreduce, perf.collective_time, perf.expected_max_normal)

# %% tags=["slide"]
net = cluster.Network(alpha=ALPHA, beta=BETA)
Ks = [int(k) for k in 2 ** np.arange(0, int(np.log2(K_MAX)) + 1)]
assert all(GRAD_FLOATS % k == 0 for k in Ks), "GRAD_FLOATS must split evenly for the closed form"
nbytes = GRAD_FLOATS * 8


def sync_step(comm, times, n):
    """One synchronous data-parallel step: local compute, then a ring all-reduce of the gradient."""
    comm.compute(float(times[comm.rank]))
    grad = np.full(n, float(comm.rank))
    total = collectives.ring_allreduce(comm, grad)
    return total[0]


step_times = {}
for K in Ks:
    ring = perf.collective_time("ring_allreduce", nbytes, K, ALPHA, BETA)
    observed = []
    for _ in range(TRIALS):
        draws = rng.normal(MU, SIGMA, size=K)
        assert draws.min() > 0
        res = cluster.run(sync_step, K, args=(draws, GRAD_FLOATS), network=net, timeout=60)
        assert all(v == K * (K - 1) / 2 for v in res.values)  # the all-reduce really summed
        np.testing.assert_allclose(res.sim_time, draws.max() + ring, rtol=1e-12)
        observed.append(res.sim_time)
    step_times[K] = np.array(observed)
print(f"sim_time == max(t_k) + 2(K-1)(alpha + n/K beta) for all {len(Ks) * TRIALS} runs, K = {Ks}")

# %% [markdown]
# Now the model: `perf.expected_max_normal(mu, sigma, K)` computes $E[\max_k t_k]$ by Monte Carlo.
# For $K = 2$ there is a closed form, $\mu + \sigma/\sqrt{\pi}$, which pins the function down; for
# larger $K$ we compare the simulated mean step time with the model plus the all-reduce, within
# the sampling error of `TRIALS` trials.

# %%
np.testing.assert_allclose(perf.expected_max_normal(MU, SIGMA, 2), MU + SIGMA / np.sqrt(np.pi), atol=SIGMA * 5e-3)
model = np.array([perf.expected_max_normal(MU, SIGMA, K) + perf.collective_time("ring_allreduce", nbytes, K, ALPHA, BETA)
                  for K in Ks])
mean_obs = np.array([step_times[K].mean() for K in Ks])
sem = np.array([step_times[K].std(ddof=1) / np.sqrt(TRIALS) for K in Ks])
assert np.all(np.abs(mean_obs - model) <= 5 * sem + 1e-12), (mean_obs, model, sem)

fig, ax = plt.subplots(figsize=(6.5, 4))
ax.errorbar(Ks, mean_obs * 1e3, yerr=2 * sem * 1e3, fmt="o", label=f"simulator, mean of {TRIALS} steps (±2 SE)")
ax.plot(Ks, model * 1e3, "-", label="E[max] + ring all-reduce (model)")
ax.plot(Ks, (MU + SIGMA * np.sqrt(2 * np.log(np.array(Ks)))) * 1e3, ":", label=r"$\mu + \sigma\sqrt{2\ln K}$")
ax.axhline(MU * 1e3, color="gray", ls="--", lw=1, label=r"mean compute $\mu$")
ax.set_xscale("log", base=2)
ax.set_xlabel("workers K")
ax.set_ylabel("synchronous step time (ms)")
ax.set_title("the step waits for the slowest worker")
ax.legend(fontsize="small")
plt.tight_layout()

# %% [markdown]
# A *broken* straggler is the extreme case: one machine with a thermally throttled CPU or a
# failing disk. `Faults(slow={r: f})` makes rank $r$'s compute take $f$ times longer; with no
# other noise the step time becomes $f\mu + T_\text{ring}$, whatever $K$ is. The whole group now
# runs at the speed of its worst member.

# %%
for K in Ks:
    res = cluster.run(sync_step, K, args=(np.full(K, MU), GRAD_FLOATS), network=net,
                      faults=cluster.Faults(slow={K - 1: SLOW_FACTOR}), timeout=60, trace=(K == min(8, Ks[-1])))
    ring = perf.collective_time("ring_allreduce", nbytes, K, ALPHA, BETA)
    np.testing.assert_allclose(res.sim_time, SLOW_FACTOR * MU + ring, rtol=1e-12)
    print(f"K = {K:3d}, rank {K - 1} slowed x{SLOW_FACTOR}: step = {res.sim_time * 1e3:.2f} ms "
          f"(= {SLOW_FACTOR} x {MU * 1e3:.0f} ms + ring {ring * 1e3:.2f} ms)")
    if res.trace is not None:
        shown = res
cluster.plot_timeline(shown, title=f"K = {len(shown.values)}: every rank waits for the straggler "
                                   f"(rank {len(shown.values) - 1})")

# %% [markdown]
# ### The roofline of one node
#
# The per-node ceiling comes first: if one worker cannot use its own machine, distribution only
# multiplies the waste. The **roofline** says a kernel with arithmetic intensity $I$ (FLOP per
# byte moved to and from memory) can reach at most $\min(P_\text{peak}, I \cdot B_\text{mem})$.
# Below the ridge point $P_\text{peak}/B_\text{mem}$ a kernel is memory-bound; above it,
# compute-bound. The peak here is nominal (clock x FLOP per cycle of one core), a rough figure as
# the parameters say, not a measurement. We measure on one core with one BLAS thread: on a busy
# machine, BLAS threads that fight other processes for the cores can make a matrix product tens
# of times slower (exercise 4), and the roofline would then measure the scheduler.
#
# Two kernels with very different intensities, counted by hand for float64 (8 bytes) and the
# minimum traffic (each operand read once, the result written once):
#
# * matrix product $C = AB$ of $n \times n$ matrices: $2n^3$ FLOP over $3 \cdot 8 n^2$ bytes,
#   $I = n/12$;
# * vector add $z = x + y$: $n$ FLOP over $3 \cdot 8 n$ bytes, $I = 1/24$.
#
# The vectors are chosen larger than the last-level cache (tens of MiB on a server CPU), so they
# stream from DRAM: a vector add that fits in cache would run above the DRAM roof.

# %%
from threadpoolctl import threadpool_limits

peak_flops = 1 * CORE_GHZ * 1e9 * FLOP_PER_CYCLE  # one core: we measure with one BLAS thread
A = rng.standard_normal((MATMUL_N, MATMUL_N))
Bm = rng.standard_normal((MATMUL_N, MATMUL_N))
x, y = rng.standard_normal(VECTOR_N), rng.standard_normal(VECTOR_N)
z = np.empty_like(x)

kernels = {
    "matmul": dict(fn=lambda: A @ Bm, flops=2 * MATMUL_N ** 3, bytes=3 * 8 * MATMUL_N ** 2),
    "vector add": dict(fn=lambda: np.add(x, y, out=z), flops=VECTOR_N, bytes=3 * 8 * VECTOR_N),
}
np.testing.assert_allclose(kernels["matmul"]["fn"]()[:3, :3], np.einsum("ik,kj->ij", A[:3], Bm[:, :3]), rtol=1e-10)
np.testing.assert_array_equal(kernels["vector add"]["fn"](), x + y)
for name, k in kernels.items():
    with threadpool_limits(limits=1):  # one core, one thread: no oversubscription on a shared machine
        k["timing"] = perf.measure(k["fn"], warmup=1, repeats=REPEATS)
    k["intensity"] = k["flops"] / k["bytes"]
    k["achieved"] = k["flops"] / k["timing"].median
    print(f"{name:10s} I = {k['intensity']:8.4f} FLOP/B  {k['timing']}  achieved {k['achieved'] / 1e9:7.2f} GFLOP/s  "
          f"({k['achieved'] / perf.roofline(k['intensity'], peak_flops, PEAK_BANDWIDTH):.0%} of its roof)")
assert kernels["matmul"]["intensity"] == MATMUL_N / 12 and kernels["vector add"]["intensity"] == 1 / 24
ridge = perf.ridge_point(peak_flops, PEAK_BANDWIDTH)
print(f"nominal peak {peak_flops / 1e9:.0f} GFLOP/s, bandwidth {PEAK_BANDWIDTH / 1e9:.0f} GB/s, ridge I = {ridge:.2f}")
assert kernels["vector add"]["intensity"] < ridge < kernels["matmul"]["intensity"]

ax = perf.plot_roofline(peak_flops, PEAK_BANDWIDTH, {n: k["intensity"] for n, k in kernels.items()})
for i, (name, k) in enumerate(kernels.items()):
    ax.plot([k["intensity"]], [k["achieved"]], "x", ms=10, mew=2, color=f"C{i}", label=f"{name}: measured")
ax.legend(loc="lower right", fontsize="small")

# %% [markdown]
# The vector add sits far left of the ridge: no amount of extra cores will speed it up on this
# node, only more memory bandwidth (or more nodes, each with its own memory). The matrix product
# sits right of the ridge and is limited by arithmetic. The circles are the roofline's promise, the
# crosses what this machine delivered while shared with other work.
#
# ### Fitting $\alpha$ and $\beta$ from message times
#
# The third ceiling is the network. In the $\alpha$-$\beta$ model a message of $m$ bytes takes
# $\alpha + \beta m$; fitting a line to measured (size, time) pairs gives both constants, and
# $m^* = \alpha/\beta$ is the size below which latency dominates. On the simulator the send times
# in the trace follow the model exactly, so the fit must recover the network's constants to
# rounding error. Real networks add noise; we add 5% log-normal jitter to see how well a fit copes.

# %%
sizes = [int(s) for s in 2 ** np.arange(0, 21, 2)]  # 1 B .. 1 MiB


def ping(comm, sizes):
    for m in sizes:
        if comm.rank == 0:
            comm.send(np.zeros(m, dtype=np.uint8), 1)
        else:
            comm.recv(0)


res = cluster.run(ping, 2, args=(sizes,), network=net, trace=True, timeout=60)
sends = [e for e in res.trace if e.kind == "send"]
m = np.array([e.nbytes for e in sends], dtype=float)
t = np.array([e.end - e.start for e in sends])
exact = perf.fit_alpha_beta(m, t)
np.testing.assert_allclose([exact.alpha, exact.beta], [ALPHA, BETA], rtol=1e-9)
noisy_t = t * rng.lognormal(0.0, 0.05, size=t.size)
noisy = perf.fit_alpha_beta(m, noisy_t)
print("simulated:", exact)
print("noisy:    ", noisy)
print(f"crossover m* = alpha / beta = {perf.crossover_bytes(ALPHA, BETA) / 1e3:.1f} kB")

fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(m, noisy_t * 1e6, "o", label="measured (noisy)")
ax.loglog(m, exact.predict(m) * 1e6, "-", label=f"fit: {exact}")
ax.axvline(perf.crossover_bytes(ALPHA, BETA), color="gray", ls=":", label=r"$m^* = \alpha/\beta$")
ax.set_xlabel("message size m (bytes)")
ax.set_ylabel("time (µs)")
ax.set_title(r"$\alpha$-$\beta$ model: latency-bound left, bandwidth-bound right")
ax.legend(fontsize="x-small")

# %% [markdown]
# ## 5. The same task with a production library: `torch.utils.benchmark` and `torch.profiler`
#
# PyTorch ships a careful timer (`torch.utils.benchmark.Timer`: it warms up, chooses the number of
# inner loops, controls threads and reports the median) and a profiler that attributes time to
# individual operators. We time the *same* NumPy matrix product with both harnesses; medians
# from two honest harnesses should agree within a loose factor on a shared machine. Then the
# profiler shows where the time of a small op list goes (CPU only here).

# %%
import torch
import torch.utils.benchmark as benchmark
from torch.profiler import ProfilerActivity, profile

timer = benchmark.Timer(stmt="A @ B", globals={"A": A, "B": Bm}, num_threads=1,
                        label="numpy matmul", sub_label=f"n = {MATMUL_N}")
with threadpool_limits(limits=1):  # same conditions as the roofline: one core, one BLAS thread
    ours = perf.measure(lambda: A @ Bm, warmup=1, repeats=REPEATS)
    theirs = timer.blocked_autorange(min_run_time=0.2)
print(theirs)
ratio = theirs.median / ours.median
print(f"perf.measure median {ours.median * 1e3:.2f} ms, torch Timer median {theirs.median * 1e3:.2f} ms, ratio {ratio:.2f}")
assert 0.2 < ratio < 5, "the two harnesses should agree within a factor of 5"

At, Bt = torch.from_numpy(A), torch.from_numpy(Bm)
# the profiler's native library logs "profiler_start/stop" to descriptor 2: kept out of the output
with perf.native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        h = torch.relu(At @ Bt + 1.0)
        loss = h.sum()
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=8))
names = {e.key for e in prof.key_averages()}
assert {"aten::matmul", "aten::relu", "aten::sum"} <= names, names

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# * **Stragglers** are the failure mode this chapter measures: nothing crashes, everything is
#   correct, and the job is slow. The step time is governed by $\max_k t_k$, so a single slow
#   machine or a heavy noise tail costs the whole group. Remedies: balance the shards, run backup
#   workers and drop the slowest (below), or relax synchronisation (asynchronous and local SGD,
#   Chapter 10).
# * **A crashed worker** is worse: in a synchronous step it stalls everybody. The simulator acts as
#   a perfect failure detector, so the peers of a crashed rank get `PeerCrashedError` instead of
#   hanging; a real system needs time-outs and checkpoints (Chapter 18).
# * **Models that lie**: a Karp-Flatt $e$ that grows with $p$, a kernel far below its roof, or an
#   $\alpha$-$\beta$ fit with a low $R^2$ each say that the model's assumption is wrong, not that the
#   hardware is.

# %% tags=["slide-code"]
try:
    cluster.run(sync_step, 4, args=(np.full(4, MU), GRAD_FLOATS), network=net,
                faults=cluster.Faults(crash={2: 1}), timeout=60)
    raise AssertionError("the step should not complete without rank 2")
except cluster.RankError as err:
    assert isinstance(err.__cause__, cluster.PeerCrashedError) or "crashed" in str(err)
    print("synchronous step with a crashed rank:", str(err).splitlines()[0])

# %% [markdown]
# ## 7. Evaluation: what a straggler costs in efficiency
#
# Take the weak-scaling view of the synchronous step: each worker does $\mu$ of work per step, so
# $K$ workers do $K\mu$ in one step of length $T_\text{step}$ where one worker alone would need
# $K\mu$ (and no all-reduce). The efficiency is
#
# $$E_K = \frac{K\mu}{K\,T_\text{step}} = \frac{\mu}{T_\text{step}}.$$
#
# We compare three fleets: identical workers ($\sigma = 0$), normal noise, and one worker slowed
# by `SLOW_FACTOR`; and one remedy, **backup workers**: launch $K$ but wait only for the fastest
# $K-1$, which replaces the maximum by the second largest draw (Chen et al., 2016).

# %%
Ks_arr = np.array(Ks, dtype=float)
ring_t = perf.collective_time("ring_allreduce", nbytes, Ks_arr, ALPHA, BETA)
draws = np.random.default_rng(SEED + 1).normal(MU, SIGMA, size=(20_000, Ks[-1]))
second = np.array([np.sort(draws[:, :K], axis=1)[:, -2].mean() if K > 1 else MU for K in Ks])
fleets = {
    "identical workers": MU + ring_t,
    f"noise sigma = {SIGMA / MU:.0%} of mu": model,
    f"one worker x{SLOW_FACTOR}": SLOW_FACTOR * MU + ring_t,
    "noise + 1 backup worker": second + ring_t,
}
fig, ax = plt.subplots(figsize=(6.5, 4))
for label, t_step in fleets.items():
    ax.plot(Ks, MU / t_step, "o-", ms=4, label=label)
ax.set_xscale("log", base=2)
ax.set_ylim(0, 1.05)
ax.set_xlabel("workers K")
ax.set_ylabel(r"efficiency $E_K = \mu / T_{step}$")
ax.set_title("the cost of waiting for the slowest")
ax.legend(fontsize="small")
print(f"{'K':>4} " + " ".join(f"{label[:26]:>27}" for label in fleets))
for i, K in enumerate(Ks):
    print(f"{K:4d} " + " ".join(f"{MU / t_step[i]:27.3f}" for t_step in fleets.values()))
assert np.all(MU / fleets[f"one worker x{SLOW_FACTOR}"] <= 1 / SLOW_FACTOR)
assert np.all(second <= np.array([perf.expected_max_normal(MU, SIGMA, K) for K in Ks]) + 1e-12)

# %% [markdown]
# One slow machine halves the efficiency of the whole fleet no matter how large it is; normal
# noise erodes it slowly, like $\sigma\sqrt{2\ln K}/\mu$; a single backup worker buys back a good
# part of the noise at the price of one extra machine ($E$ counted over $K$, cost over $K+1$).
#
# ## 8. Exercises
#
# 1. **Amdahl meets Karp-Flatt.** A job takes 100 s on one worker and 14 s on 16. What serial
#    fraction does Karp-Flatt give? If it stays constant, what is the best speedup you can ever get?
# 2. **Heavy tails.** Replace the normal draws in the straggler experiment with a log-normal or a
#    Pareto distribution of the same mean. How does $E[\max]$ grow with $K$ now? Which remedy works
#    better, more backup workers or a time-out that drops late gradients?
# 3. **Which all-reduce?** Using `perf.collective_time`, find for `ALPHA` and `BETA` the gradient size
#    below which `recursive_doubling_allreduce` beats `ring_allreduce` at $K = 64$. Check your answer on
#    the simulator with `collectives.recursive_doubling_allreduce`.
# 4. **Measure your own roofline.** Estimate this machine's memory bandwidth with a large `np.copyto`
#    (2 x 8 bytes per element) and its peak with the largest matmul you can time. Redraw the
#    roofline with measured roofs; where do a matrix-vector product and a 2-D convolution land?
#    Then drop `threadpool_limits` and time the matmul with every BLAS thread while another job
#    runs: what happens, and why?
# 5. **A real $\alpha$-$\beta$ fit.** Repeat the ping experiment with `backend="process"`, timing
#    ping-pongs with `time.perf_counter` inside the workers. How large is the loopback $\alpha$? How
#    good is the $R^2$, and what does the residual plot say about the model?
#
# ## 9. Research directions
#
# - **Cost models for hierarchical, contended networks.** The $\alpha$-$\beta$ model charges every link the
#   same and lets messages on different links proceed independently. Real clusters have NVLink inside a
#   node, slower links between nodes, oversubscribed switches and other jobs on the same fabric, and a
#   model simple enough to reason with but faithful enough to choose an algorithm is still missing.
#   - Hockney, "The Communication Challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing,
#     1994. The latency-plus-bandwidth message model this chapter uses, fitted to real machines.
#   - Culler, Karp, Patterson, Sahay, Schauser, Santos, Subramonian and von Eicken, "LogP: Towards a
#     Realistic Model of Parallel Computation", PPoPP, 1993. Adds per-message processor overhead and a
#     gap between messages, two costs the $\alpha$-$\beta$ model folds together.
#   - Won, Heo, Rashidi, Sridharan, Srinivasan and Krishna, "ASTRA-sim2.0: Modeling Hierarchical Networks
#     and Disaggregated Systems for Large-model Training at Scale", arXiv preprint, 2023. A simulator that
#     composes one analytical network model per level of the hierarchy, so a collective can be timed on a
#     multi-level topology without a packet-level simulation.
# - **Taming the tail.** Section 4 showed that a synchronous step pays for the slowest of $K$ workers.
#   Backup workers, bounded staleness and dropping late gradients trade statistical efficiency for time,
#   and how to choose among them for a given noise distribution and model has no general answer.
#   - Dean and Barroso, "The Tail at Scale", Communications of the ACM, 2013. Why rare slow responses
#     dominate at scale, and the hedging and backup-request techniques that hide them.
#   - Chen, Pan, Monga, Bengio and Jozefowicz, "Revisiting Distributed Synchronous SGD", ICLR Workshop
#     Track, 2016. Synchronous SGD with backup workers: drop the slowest few gradients each step.
#   - Lin et al., "Understanding Stragglers in Large Model Training Using What-if Analysis", OSDI, 2025.
#     Replays five months of production LLM-training traces with the stragglers removed, to measure what
#     slow workers cost and to trace their causes, which are often not faulty hardware.
# - **Laws for whole systems, not single kernels.** Amdahl's and Gustafson's laws each describe one
#   fixed split between serial and parallel work. In training, the "serial" part (communication,
#   input pipeline, optimizer step) itself grows with $K$ and with the model, and predicting end-to-end
#   time across compute, memory and network at once, well enough to plan a cluster purchase, remains open.
#   - Amdahl, "Validity of the Single Processor Approach to Achieving Large Scale Computing
#     Capabilities", AFIPS Spring Joint Computer Conference, 1967. The fixed-size speedup bound.
#   - Gustafson, "Reevaluating Amdahl's Law", Communications of the ACM, 1988. Scaled speedup: grow the
#     problem with the machine and the serial fraction shrinks.
#   - Isaev, McDonald, Dennison and Vuduc, "Calculon: a Methodology and Tool for High-Level Codesign of
#     Systems and Large Language Models", SC, 2023. An analytical model of transformer training time over
#     compute, memory, network and the choice of parallel strategy, used to search system designs before
#     building them.
# - **Rooflines for distributed and memory-hierarchical kernels.** The roofline bounds one kernel by peak
#   compute and one memory bandwidth. Extending it to several memory levels, to the network as one more
#   "roof", and to operators whose arithmetic intensity changes with how they are sharded is active work,
#   and it is what decides whether a sharding plan is compute- or communication-bound.
#   - Williams, Waterman and Patterson, "Roofline: An Insightful Visual Performance Model for Multicore
#     Architectures", Communications of the ACM, 2009. Bounds a kernel by peak compute and by memory
#     bandwidth times arithmetic intensity.
#
# ## What's next
#
# Chapter 4 (Communication primitives) builds the collectives whose cost this chapter modelled:
# broadcast, reduce, gather, the ring and tree all-reduces and all-to-all, each checked against these
# closed forms, including what happens when many messages converge on one rank. Chapter 5 (Evaluation
# discipline) then turns the measurements of Section 5 into a method: warm-up, repeats, confidence
# intervals and honest baselines.
