# %% [markdown]
# # Chapter 3 solutions: Performance models
#
# Worked solutions to the exercises of `chapters/03-performance-models` (the instructor's manual, never
# in the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import time

import numpy as np
from scipy.special import gammaln
from threadpoolctl import threadpool_limits

from scaleoutai import cluster, collectives, perf

SEED = 0
gen = np.random.default_rng(SEED)
ALPHA, BETA = 20e-6, 1 / 1.25e9  # the chapter's simulated network

# %% [markdown]
# ## Exercise 1 (analysis): Karp-Flatt from two timings
#
# **Answer.** $S_{16} = 100/14 \approx 7.14$, and the experimentally determined serial fraction is
#
# $$e = \frac{1/S_p - 1/p}{1 - 1/p} = \frac{0.14 - 0.0625}{0.9375} = \frac{0.0775}{0.9375} \approx 0.0827.$$
#
# If $e$ stays constant, the program behaves like Amdahl's law with $s = e$, so the speedup can never
# exceed $1/e \approx 12.1$, however many workers are added (at $p = 1024$ it is already about 11.97).
# In practice $e$ should be measured at a second $p$ before trusting that ceiling: if it grows with $p$ the
# loss is an overhead, and the real ceiling is lower (the speedup may even turn down).
#
# **Check.** Plugging $s = e$ back into Amdahl's law must reproduce the measured $T_{16} = 14$ s exactly,
# since Karp-Flatt is Amdahl's law solved for $s$.

# %%
T1_ex1, T16_ex1, p_ex1 = 100.0, 14.0, 16
S16 = perf.speedup(T1_ex1, T16_ex1)
e_kf = perf.karp_flatt(S16, p_ex1)
e_hand = (T16_ex1 / T1_ex1 - 1 / p_ex1) / (1 - 1 / p_ex1)
assert np.isclose(e_kf, e_hand, rtol=1e-12) and np.isclose(e_hand, 0.0775 / 0.9375, rtol=1e-12)
assert np.isclose(T1_ex1 / perf.amdahl_speedup(e_kf, p_ex1), T16_ex1, rtol=1e-12)  # Amdahl reproduces T_16
ceiling = 1 / e_kf
assert np.isclose(perf.amdahl_speedup(e_kf, 1e15), ceiling, rtol=1e-9)
assert perf.amdahl_speedup(e_kf, 1024) < ceiling
print(f"S_16 = {S16:.3f}, e = {e_kf:.4f}, best possible speedup 1/e = {ceiling:.2f}")

# %% [markdown]
# ## Exercise 2 (analysis): heavy-tailed compute times, backups against time-outs
#
# **Setup.** Three distributions with the same mean $\mu = 100$ ms: the chapter's normal ($\sigma = 10$ ms), a
# log-normal with shape $s = 1$ (scaled so that $e^{m + s^2/2} = \mu$), and a Pareto with tail index $a = 2.5$
# and scale $x_m = \mu(a-1)/a$ (so its mean $x_m a/(a-1)$ is $\mu$).
#
# **How $E[\max]$ grows.** For the normal, $\mu + \sigma\sqrt{2\ln K}$: barely moves. For the log-normal,
# $\max \approx e^{m + s\sqrt{2\ln K}}$: faster than any power of $\log K$. For the Pareto the maximum of $K$
# draws has the closed form
#
# $$E[X_{(K)}] = x_m\,\frac{\Gamma(K+1)\,\Gamma(1 - 1/a)}{\Gamma(K + 1 - 1/a)} \sim x_m\,\Gamma(1-\tfrac1a)\,K^{1/a},$$
#
# (integrate $1 - (1 - (x_m/x)^a)^K$ and use the Beta function): the step time grows **polynomially**, like
# $K^{0.4}$ here. The code checks the Pareto closed form against Monte Carlo, and the ordering of the growth.
#
# **Which remedy.** With $b$ backup workers the step waits for the $(K-b)$-th order statistic. For the
# Pareto, $E[X_{(K-b)}] = x_m\,\frac{\Gamma(K+1)\Gamma(b+1-1/a)}{\Gamma(b+1)\Gamma(K+1-1/a)}$, which still grows like
# $K^{1/a}$, only divided by about $b^{1/a}$: a **fixed number of backups** loses to a heavy tail as $K$ grows (one
# backup at $K = 64$ still leaves the step near $2.8\mu$). A **time-out** $\tau$ that drops late gradients caps the
# step at $\tau$ whatever $K$ and the distribution (plus the all-reduce), at the price of losing on average a fixed
# fraction $P(X > \tau)$ of the gradients; with $\tau$ at the 95th percentile that is 5%. At equal fractions dropped
# the two are the same idea: $X_{(K-b)}$ concentrates near the quantile $F^{-1}(1 - b/K)$, so backups in proportion
# to $K$ ($b = 0.05K$) behave like the time-out (the table shows 4 backups, 6% dropped, close to the time-out).
# So: under heavy tails use a time-out, or backups that grow with $K$; under the normal's light tail the maximum
# grows only like $\sqrt{2\ln K}$ and one or two backups already bring the step within a few per cent of
# the time-out, without dropping gradients at random. A caveat for the instructor: a time-out biases the gradient
# if slowness correlates with the data a worker
# holds (long sequences, big images).

# %%
MU, SIGMA, A_PAR = 0.100, 0.010, 2.5
S_LN = 1.0
xm = MU * (A_PAR - 1) / A_PAR
samplers = {
    "normal": lambda n, k: gen.normal(MU, SIGMA, size=(n, k)),
    "log-normal": lambda n, k: gen.lognormal(np.log(MU) - S_LN ** 2 / 2, S_LN, size=(n, k)),
    "pareto": lambda n, k: xm * (1 + gen.pareto(A_PAR, size=(n, k))),  # numpy's pareto is the Lomax shift
}
quantile95 = {"normal": MU + 1.6448536269514722 * SIGMA,
              "log-normal": np.exp(np.log(MU) - S_LN ** 2 / 2 + S_LN * 1.6448536269514722),
              "pareto": xm * 0.05 ** (-1 / A_PAR)}


def pareto_order_stat(k, j, a=A_PAR, scale=xm):
    """E of the j-th smallest of k Pareto(scale, a) draws (j = k: the maximum)."""
    b = k - j  # how many are larger
    return scale * np.exp(gammaln(k + 1) + gammaln(b + 1 - 1 / a) - gammaln(b + 1) - gammaln(k + 1 - 1 / a))


Ks2 = [1, 4, 16, 64]
n_draw = 20_000
stats2 = {}
for name, draw in samplers.items():
    for k_ in Ks2:
        d = np.sort(draw(n_draw, k_), axis=1)
        assert abs(d.mean() - MU) < 0.05 * MU  # the same mean for the three laws
        stats2[name, k_] = dict(max=d[:, -1].mean(), sem=d[:, -1].std() / np.sqrt(n_draw),
                                backup1=d[:, -2].mean() if k_ > 1 else MU,
                                backup4=d[:, -5].mean() if k_ > 4 else np.nan,
                                timeout=np.minimum(d[:, -1], quantile95[name]).mean(),
                                dropped=(d > quantile95[name]).mean())
for k_ in Ks2:  # closed form against Monte Carlo (the Pareto's maximum has a heavy tail: 6 SE allowed)
    assert abs(stats2["pareto", k_]["max"] - pareto_order_stat(k_, k_)) < 6 * stats2["pareto", k_]["sem"]
    if k_ > 1:
        assert abs(stats2["pareto", k_]["backup1"] - pareto_order_stat(k_, k_ - 1)) < 0.02 * MU
growth = {name: stats2[name, 64]["max"] / MU for name in samplers}
assert growth["normal"] < growth["log-normal"] and growth["normal"] < growth["pareto"]
assert abs(stats2["normal", 64]["max"] - perf.expected_max_normal(MU, SIGMA, 64)) < 6 * stats2["normal", 64]["sem"]
# slope of log E[max] against log K between 16 and 64 tends to 1/a for the Pareto
slope = np.log(pareto_order_stat(64, 64) / pareto_order_stat(16, 16)) / np.log(4)
assert abs(slope - 1 / A_PAR) < 0.05
for name in samplers:
    s = stats2[name, 64]
    assert s["timeout"] <= quantile95[name] + 1e-12 and abs(s["dropped"] - 0.05) < 0.01
    print(f"{name:>10}: E[max]/mu at K=64 {s['max'] / MU:5.2f}; 1 backup {s['backup1'] / MU:5.2f}; "
          f"4 backups {s['backup4'] / MU:5.2f}; time-out at p95 {s['timeout'] / MU:5.2f} (drops 5%)")
assert stats2["pareto", 64]["timeout"] < stats2["pareto", 64]["backup1"]  # the cap beats a fixed backup
assert pareto_order_stat(64, 63) / pareto_order_stat(16, 15) > 1.5  # one backup falls behind as K grows
assert all(stats2["pareto", k]["timeout"] <= quantile95["pareto"] for k in Ks2)  # the cap holds at every K
assert abs(stats2["pareto", 64]["backup4"] / stats2["pareto", 64]["timeout"] - 1) < 0.2  # b ~ 0.05 K ~ time-out
assert stats2["normal", 64]["backup1"] < stats2["normal", 64]["timeout"] * 1.05  # light tail: backups suffice


# the chapter's simulator confirms that the step is max(t_k) + ring for these draws too
def sync_step(comm, times, n):
    comm.compute(float(times[comm.rank]))
    return collectives.ring_allreduce(comm, np.full(n, 1.0))[0]


net = cluster.Network(ALPHA, BETA)  # the chapter's links
draws = samplers["pareto"](1, 8)[0]
res = cluster.run(sync_step, 8, args=(draws, 4096), network=net)
assert np.isclose(res.sim_time, draws.max() + perf.collective_time("ring_allreduce", 4096 * 8, 8, ALPHA, BETA),
                  rtol=1e-12)

# %% [markdown]
# ## Exercise 3 (analysis): when recursive doubling beats the ring at K = 64
#
# **Derivation.** For $K = 64$ (a power of two) recursive doubling costs $\log_2 K\,(\alpha + n\beta) = 6\alpha + 6n\beta$
# and the ring $2(K-1)(\alpha + \frac nK\beta) = 126\alpha + \frac{126}{64}n\beta$. Recursive doubling is faster when
#
# $$6\alpha + 6n\beta < 126\alpha + 1.96875\,n\beta \iff n < \frac{120}{4.03125}\cdot\frac{\alpha}{\beta} \approx 29.77\,\frac\alpha\beta.$$
#
# With $\alpha = 20\,\mu$s and $\beta = 1/(1.25\cdot 10^9)$ s/B, $\alpha/\beta = 25{,}000$ B, so the crossover is
# $n^\times \approx 744{,}186$ bytes (about 727 KiB, some 93,000 float64 values). Below it the ring's 126
# latencies dominate; above it recursive doubling's 6 full-vector transfers do. The code finds the root of the
# difference with `perf.collective_time`, and runs both algorithms on 64 simulated ranks at 0.8 and 1.25 times the
# crossover: the simulated times equal the closed forms and the winner flips.

# %%
K3 = 64
n_cross = 120 / (6 - 2 * (K3 - 1) / K3) * ALPHA / BETA
diff = lambda n: (perf.collective_time("recursive_doubling_allreduce", n, K3, ALPHA, BETA)
                  - perf.collective_time("ring_allreduce", n, K3, ALPHA, BETA))
lo, hi = 1.0, 1e9
for _ in range(200):  # bisection on the library's cost model, independent of the algebra above
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if diff(mid) < 0 else (lo, mid)
assert np.isclose(lo, n_cross, rtol=1e-9) and np.isclose(n_cross, 744186.046511628, rtol=1e-9)


def one_allreduce(comm, n_floats, which):
    return collectives.ALLREDUCES[which](comm, np.ones(n_floats))[0]


winner = {}
for factor in (0.8, 1.25):
    n_floats = int(round(factor * n_cross / 8 / K3)) * K3  # float64 values, divisible by K
    t = {}
    for which in ("recursive_doubling", "ring"):
        r3 = cluster.run(one_allreduce, K3, args=(n_floats, which), network=net, timeout=120)
        assert all(v == K3 for v in r3.values)
        t[which] = r3.sim_time
        assert np.isclose(t[which], perf.collective_time(f"{which}_allreduce", 8 * n_floats, K3, ALPHA, BETA),
                          rtol=1e-9)
    winner[factor] = min(t, key=t.get)
    print(f"n = {8 * n_floats:,} B ({factor} x crossover): ring {t['ring'] * 1e3:.3f} ms, "
          f"recursive doubling {t['recursive_doubling'] * 1e3:.3f} ms")
assert winner == {0.8: "recursive_doubling", 1.25: "ring"}
print(f"crossover at K=64: {n_cross:,.0f} bytes")

# %% [markdown]
# ## Exercise 4 (analysis): a measured roofline, and what oversubscription does
#
# **Method.** Bandwidth: `np.copyto(dst, src)` moves $2 \cdot 8$ bytes per float64 element (one read, one
# write; write-allocate traffic can add a third stream, so this is a slight underestimate). Peak: the
# median FLOP/s of a one-thread matrix product, $2n^3$ FLOP. Both run with one BLAS thread. Here the sizes
# are small (16 MB vectors, $n = 384$) so that the file runs in seconds on a shared laptop; on a quiet server
# the student should use vectors of a few hundred MB and the largest matmul that fits in a second or two.
#
# **Where the two kernels land.** A matrix-vector product $y = Ax$ with $A \in \mathbb{R}^{n\times n}$ does $2n^2$
# FLOP and must read $8n^2$ bytes of $A$ (plus $16n$ for the vectors): $I = \frac{2n^2}{8n^2 + 16n} \to 1/4$
# FLOP/B, far left of any CPU's ridge (typically 2 to 10 FLOP/B for one core): **memory-bound**. A 2-D
# convolution with a $k\times k$ kernel on an $n \times n$ image does $2k^2 n^2$ FLOP over about $2\cdot 8n^2$
# bytes (read the image once, write the output once, if the stencil's rows stay in cache): $I = k^2/8$. A 3x3
# stencil ($I \approx 1.1$) is still memory-bound on most CPUs; a 7x7 ($I \approx 6$) sits near the ridge, and
# the large-channel convolutions of CNNs, which are matrix products in disguise, are compute-bound.
#
# **Dropping `threadpool_limits` while another job runs.** BLAS starts one thread per core. When another
# process already uses some cores, the BLAS threads are time-sliced with it; a blocked matmul synchronises its
# threads at every panel, so each synchronisation waits for the thread that was descheduled (the straggler of
# Section 3, inside one process). The result is often *slower* than one thread, sometimes by a factor of ten or
# more, and very noisy. The code shows the single-thread measurements and asserts only what is robust on
# any machine: the intensities from the operation and byte counts, finite positive roofs, and the matmul
# outrunning the vector add (whose roof is 24x lower at best). The placement of the matrix-vector product is
# *printed*, not asserted: on the heavily shared 2-core machine where this manual was checked (load average
# above 10), the one-thread matmul reached only about 5 GFLOP/s and the 16 MB vectors partly sat in a large
# last-level cache, so the measured ridge came out near 0.2 FLOP/B and the matrix-vector product even seemed
# to beat the matmul. That is the oversubscription lesson in miniature: other jobs, not the hardware, set
# the numbers. It does not run the multi-threaded case for the same reason.

# %%
n_vec = 2_000_000
src, dst = gen.standard_normal(n_vec), np.empty(n_vec)
xa, ya, za = gen.standard_normal(n_vec), gen.standard_normal(n_vec), np.empty(n_vec)
n_mm = 384
Am, Bm = gen.standard_normal((n_mm, n_mm)), gen.standard_normal((n_mm, n_mm))
n_mv = 1500
Av, xv = gen.standard_normal((n_mv, n_mv)), gen.standard_normal(n_mv)


def stencil3(image, kernel):
    """3x3 'valid' correlation written with nine shifted slices (2 * 9 FLOP per output)."""
    h, w = image.shape
    out = np.zeros((h - 2, w - 2))
    for i in range(3):
        for j in range(3):
            out += kernel[i, j] * image[i:i + h - 2, j:j + w - 2]
    return out


# correctness of the kernels against brute-force references
img, ker = gen.standard_normal((7, 9)), gen.standard_normal((3, 3))
brute = np.array([[np.sum(img[a:a + 3, b:b + 3] * ker) for b in range(7)] for a in range(5)])
np.testing.assert_allclose(stencil3(img, ker), brute, rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(Av @ xv, np.einsum("ij,j->i", Av, xv), rtol=1e-10, atol=1e-10 * np.sqrt(n_mv))

# intensities from the operation and traffic counts of each kernel (float64: 8 bytes)
flops = {"matvec": 2 * n_mv * n_mv, "conv3": 2 * 9 * 598 * 598, "vector add": n_vec}
traffic = {"matvec": 8 * (n_mv * n_mv + 2 * n_mv), "conv3": 8 * (600 * 600 + 598 * 598), "vector add": 3 * 8 * n_vec}
intensity = {k: flops[k] / traffic[k] for k in flops}
assert abs(intensity["matvec"] - 0.25) < 1e-3 and abs(intensity["conv3"] - 9 / 8) < 0.01
assert intensity["vector add"] == 1 / 24

with threadpool_limits(limits=1):
    t_copy = perf.measure(lambda: np.copyto(dst, src), warmup=1, repeats=5).median
    t_add = perf.measure(lambda: np.add(xa, ya, out=za), warmup=1, repeats=5).median
    t_mm = perf.measure(lambda: Am @ Bm, warmup=1, repeats=5).median
    t_mv = perf.measure(lambda: Av @ xv, warmup=1, repeats=5).median
bw = 2 * 8 * n_vec / t_copy
peak = 2 * n_mm ** 3 / t_mm
ridge = perf.ridge_point(peak, bw)
print(f"measured: bandwidth {bw / 1e9:.1f} GB/s, one-core matmul {peak / 1e9:.1f} GFLOP/s, ridge {ridge:.2f} FLOP/B")
for k, t_k in (("matvec", t_mv), ("vector add", t_add)):
    print(f"  {k:>10}: I = {intensity[k]:.3f} FLOP/B, achieved {flops[k] / t_k / 1e9:.2f} GFLOP/s, "
          f"roof {perf.roofline(intensity[k], peak, bw) / 1e9:.2f}")
print(f"  conv 3x3: I = {intensity['conv3']:.3f}; conv 7x7: I = {49 / 8:.2f} FLOP/B")
assert np.isfinite([bw, peak]).all() and bw > 0 and peak > 0
assert np.isclose(perf.roofline(intensity["matvec"], peak, bw), min(peak, intensity["matvec"] * bw))
assert peak > flops["vector add"] / t_add  # a 24x lower roof: the add cannot catch the matmul

# %% [markdown]
# ## Exercise 5 (analysis): fitting alpha and beta, and reading the residuals
#
# **What the student sees on real processes.** With `backend="process"` (two gloo processes over loopback,
# ping-pongs timed with `time.perf_counter` inside the workers, half the median round trip per size), the
# intercept is the **loopback latency of one gloo message through Python**: tens of microseconds on an idle
# machine, a few hundred on a busy one (on the two busy cores where this manual was written, 250 to 350 µs for
# messages up to 256 B). The slope gives an effective 0.3 to a few GB/s, far below memory bandwidth, because
# every message is copied several times. $R^2$ is often only 0.7 to 0.95: a single straight line does not
# describe the data, and the residuals are not random but **structured**, negative for mid sizes and positive at
# the ends, or with a step at a size threshold. A step means the protocol changes with the size (eager below a
# threshold, a rendezvous handshake above it; the header carrying small payloads inline), so the model is
# piecewise linear, not wrong everywhere.
#
# That real run takes 10 to 20 s to start two processes on a shared laptop, too slow for this manual. The code
# below reproduces the *analysis* on the simulator, where the truth is known: a ping-pong whose messages above
# 64 KiB use a rendezvous (an 8-byte request-to-send and an 8-byte clear-to-send before the payload). One way
# then costs $\alpha + m\beta$ below the threshold and $3\alpha + 16\beta + m\beta$ above it. A single $\alpha$-$\beta$
# line still gets a high $R^2$ (the bandwidth term dominates the large sizes), yet its residuals have a clear
# pattern around the threshold, and fitting the two regimes separately recovers the truth exactly.

# %%
THRESH = 65536


def pingpong_rendezvous(comm, sizes):
    """Rank 0 times one-way messages (half a round trip); sizes above THRESH use a rendezvous handshake."""
    other = 1 - comm.rank
    times = []
    for m in sizes:
        payload = np.zeros(m, dtype=np.uint8)
        t0 = comm.clock
        for leg in (0, 1):
            if comm.rank == leg:  # this rank sends on this leg
                if m > THRESH:
                    comm.send(np.zeros(1, np.int64), other)  # request to send
                    comm.recv(other)  # clear to send
                comm.send(payload, other)
            else:
                if m > THRESH:
                    comm.recv(other)
                    comm.send(np.zeros(1, np.int64), other)
                comm.recv(other)
        times.append((comm.clock - t0) / 2)
    return times


sizes5 = [int(s) for s in 2 ** np.arange(0, 23)]
t5 = np.array(cluster.run(pingpong_rendezvous, 2, args=(sizes5,), network=net).values[0])
m5 = np.array(sizes5, dtype=float)
truth = np.where(m5 > THRESH, 3 * ALPHA + 16 * BETA, ALPHA) + m5 * BETA
np.testing.assert_allclose(t5, truth, rtol=1e-9)  # the simulator follows the derived costs
one_line = perf.fit_alpha_beta(m5, t5)
resid = t5 - one_line.predict(m5)
small, large = m5 <= THRESH, m5 > THRESH
fit_small, fit_large = perf.fit_alpha_beta(m5[small], t5[small]), perf.fit_alpha_beta(m5[large], t5[large])
print("one line:   ", one_line)
print("eager part: ", fit_small)
print("rendezvous: ", fit_large)
assert one_line.r2 > 0.99  # R^2 alone would call this a good model ...
assert np.all(resid[small] < 0) and resid[large][0] > 0  # ... the residuals show the step at the threshold
assert np.isclose(fit_small.alpha, ALPHA, rtol=1e-6) and np.isclose(fit_small.beta, BETA, rtol=1e-6)
assert np.isclose(fit_large.alpha, 3 * ALPHA + 16 * BETA, rtol=1e-6) and np.isclose(fit_large.beta, BETA, rtol=1e-6)
