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
# # Appendix A. Mathematical background
#
# The chapters use a small stock of mathematics over and over: the eigenvalues of a graph decide how
# fast gossip forgets (Chapters 14 and 31), a truncated SVD is what PowerSGD sends (Chapter 10), the
# variance of a mini-batch gradient is why a larger global batch $B = K b$ allows a larger step
# (Chapter 15), a Gaussian's width is a privacy guarantee (Chapters 14 and 35), a least-squares fit
# turns ping-pong timings into $\alpha$ and $\beta$ (Chapter 3), and floating-point rounding makes the
# same all-reduce give different bits on 4 and on 5 workers (Chapters 4, 15 and 18). This appendix
# states each fact once, and then checks it: every claim below is a cell that computes both sides and
# asserts that they agree, so a refresher you doubt is one you can rerun with other numbers.
#
# **Prerequisites:** first courses in linear algebra, probability and calculus, and NumPy. Nothing from
# the book itself; each refresher names the chapters that lean on it, and it is best read beside them.

# %% tags=["parameters"]
SEED = 0
RING_SIZES = [4, 5, 16, 64]  # smoke: [4, 5, 16]
KAPPAS = [2, 10, 100, 1000]  # smoke: [2, 10, 100]
BATCHES = [1, 4, 16, 64, 256]  # smoke: [1, 4, 16, 64]
DRAWS = 4000  # smoke: 1000
TRIALS = 40_000  # smoke: 5_000
SGD_STEPS = 20_000  # smoke: 4_000
N_SUM = 100_000  # smoke: 20_000
LENGTHS = [100, 1_000, 10_000, 100_000]  # smoke: [100, 1_000, 10_000]
KS = [1, 2, 3, 5, 8, 16, 32]  # smoke: [1, 2, 3, 5, 8]
ORDERS = 8  # smoke: 4
QUEUE_JOBS = 100_000  # smoke: 10_000

# %% [markdown]
# `RING_SIZES` are the ring graphs whose spectra we check, `KAPPAS` the condition numbers for gradient
# descent, `BATCHES` the mini-batch sizes and `DRAWS` the batches drawn per size, `TRIALS` the repeated
# experiments behind each tail probability, `SGD_STEPS` the steps of stochastic gradient descent,
# `N_SUM` and `LENGTHS` the lengths of the floating-point sums, `KS` the worker counts that split them,
# `ORDERS` the random shard orders tried per worker count, and `QUEUE_JOBS` the requests of each
# queue simulation. Everything random is a function of `SEED`.
#
# ## 1. Motivation: where the mathematics enters
#
# A distributed algorithm is usually a single-machine algorithm plus a claim that splitting it changes
# nothing that matters. The claim is always a piece of mathematics: averaging $K$ shard gradients gives
# the full gradient (linearity), gossip converges (a spectral gap), compression loses little (a
# low-rank tail), a bigger batch is as good as more steps (a variance), noise protects privacy (a
# Gaussian tail). The one claim that is false as stated is the first: in floating point, the sum of $K$
# shard sums is not the sum. Here is a gradient of 4096 float32 values summed by 4 workers and by 5.

# %%
import math
import time
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
import scipy.special
import scipy.stats
from scipy.optimize import brentq

from scaleoutai import cluster, collectives, datasets, perf
from scaleoutai.perf import numerics

rng = np.random.default_rng(SEED)
per_example = rng.standard_normal((600, 4096)).astype(np.float32)  # 600 examples' gradients


def sharded_sum(G, K):
    """Each of K workers sums its block of examples (in G's dtype); the K partial sums are then added in order."""
    partials = [np.sum(G[lo:hi], axis=0) for lo, hi in collectives.block_bounds(len(G), K)]
    total = partials[0].copy()
    for p in partials[1:]:
        total += p
    return total


on4, on5 = sharded_sum(per_example, 4), sharded_sum(per_example, 5)
differ = np.mean(on4 != on5)
print(f"float32 gradient summed on 4 and on 5 workers: {differ:.0%} of the 4096 entries differ in their bits; "
      f"largest gap {np.max(np.abs(on4 - on5)):.2e} on values of size {np.mean(np.abs(on4)):.1f}")
assert differ > 0.1  # not a rare event: most entries change
in64 = [sharded_sum(per_example.astype(np.float64), K) for K in (4, 5)]
assert np.allclose(in64[0], in64[1], rtol=0, atol=1e-10)  # float64 differs too, 10^9 times less

# %% [markdown]
# Section 2 is linear algebra, Section 3 probability and convex optimisation (with the linear
# programs, Markov chains, queues and Rényi divergences of Parts VI and VII), Sections 4 to 7 the
# numerics of summing in floating point (the from-scratch sums, the production libraries, the failure
# modes, and the measured errors against their bounds). Symbols follow Appendix C: $K$ workers, $B = K b$
# examples per step, $\eta$ the step size, $\alpha$ and $\beta$ the message cost, $\varepsilon$ and
# $\delta$ the privacy budget. Two symbols are local to this appendix: the smoothness constant is
# $\Lambda$ (most texts write $L$, which this book keeps for the loss) and the unit roundoff of a
# floating-point format is $u$ (half its machine epsilon; $\varepsilon$ is privacy here).
#
# ## 2. Core concepts I: linear algebra
#
# ### Norms
# For $x \in \mathbb{R}^d$: $\|x\|_1 = \sum |x_i|$, $\|x\|_2 = (\sum x_i^2)^{1/2}$, $\|x\|_\infty =
# \max |x_i|$, with $\|x\|_\infty \le \|x\|_2 \le \|x\|_1 \le \sqrt{d}\,\|x\|_2$. For a matrix, the
# spectral norm $\|A\|_2 = \sigma_{\max}(A)$ (the largest stretch of a unit vector) and the Frobenius
# norm $\|A\|_F = (\sum A_{ij}^2)^{1/2} = (\sum \sigma_i^2)^{1/2}$ satisfy $\|A\|_2 \le \|A\|_F \le
# \sqrt{\mathrm{rank}\,A}\,\|A\|_2$. The $\ell_2$ norm is the one gradient clipping bounds (DP-SGD,
# Chapter 14; robust aggregation, Chapter 35); $\ell_\infty$ and $\ell_1$ appear in top-$k$ and
# quantised compression (Chapter 10).

# %%
d = 1000
x = rng.standard_normal(d)
n1, n2, ninf = np.linalg.norm(x, 1), np.linalg.norm(x), np.linalg.norm(x, np.inf)
assert ninf <= n2 <= n1 <= math.sqrt(d) * n2
A = rng.standard_normal((60, 40)) @ rng.standard_normal((40, 50))  # rank 40
sigma = np.linalg.svd(A, compute_uv=False)
assert np.isclose(np.linalg.norm(A, 2), sigma[0]) and np.isclose(np.linalg.norm(A, "fro"), np.sqrt(np.sum(sigma ** 2)))
assert np.linalg.matrix_rank(A) == 40 and np.linalg.norm(A, 2) <= np.linalg.norm(A, "fro") <= math.sqrt(40) * np.linalg.norm(A, 2)
C = 1.0  # DP-SGD's clipping: g * min(1, C / ||g||_2) has norm at most C and keeps its direction
clipped = x * min(1.0, C / n2)
assert np.linalg.norm(clipped) <= C * (1 + 1e-12) and np.isclose(clipped @ x, np.linalg.norm(clipped) * n2)
print(f"||x||_inf = {ninf:.2f} <= ||x||_2 = {n2:.2f} <= ||x||_1 = {n1:.1f} <= sqrt(d) ||x||_2 = {math.sqrt(d) * n2:.1f}")

# %% [markdown]
# ### Symmetric matrices and the graph Laplacian
# A real symmetric matrix has real eigenvalues and an orthonormal basis of eigenvectors, $A = Q \Lambda_A
# Q^\top$ (`np.linalg.eigh`). For an undirected graph on $n$ nodes the Laplacian $L_G = D - A_G$ (degrees
# on the diagonal, $-1$ per edge) is symmetric and positive semidefinite; $L_G \mathbf{1} = 0$, so
# $\lambda_1 = 0$, and the second-smallest eigenvalue $\lambda_2$ (the algebraic connectivity) is
# positive exactly when the graph is connected. Averaging with neighbours, $x \leftarrow (I - \gamma
# L_G) x$, keeps the mean and shrinks the disagreement by $\rho = \max(|1 - \gamma\lambda_2|, |1 -
# \gamma\lambda_n|)$ per step: this is gossip averaging (Chapter 14) and consensus on graphs
# (Chapter 31). For a ring the eigenvalues have a closed form, $\lambda_k = 2 - 2\cos(2\pi k / n)$,
# $k = 0, \dots, n-1$, so $\lambda_2 = 2 - 2\cos(2\pi/n) \approx (2\pi/n)^2$: a ring of $n$ nodes needs
# about $n^2$ steps to agree, which is why gossip prefers better-connected graphs.

# %%
def laplacian(nb):
    """L = D - A of an undirected graph given as neighbour lists."""
    L = np.zeros((len(nb), len(nb)))
    for i, row in enumerate(nb):
        L[i, row] = -1.0
        L[i, i] = len(row)
    return L


from scaleoutai.agents import swarm_consensus  # noqa: E402  (Chapter 31's own code, to compare with)

GAMMA, STEPS = 1 / 3, 20
for n in RING_SIZES:
    lam = np.linalg.eigvalsh(laplacian(datasets.ring_graph(n)))
    closed = np.sort(2 - 2 * np.cos(2 * np.pi * np.arange(n) / n))
    np.testing.assert_allclose(lam, closed, atol=1e-12)  # the whole spectrum, not only lambda_2
    assert np.isclose(swarm_consensus.algebraic_connectivity(datasets.ring_graph(n)), closed[1], atol=1e-12)
    x0 = rng.standard_normal(n)
    xt, W = x0.copy(), np.eye(n) - GAMMA * laplacian(datasets.ring_graph(n))
    for _ in range(STEPS):
        xt = W @ xt
    rho = max(abs(1 - GAMMA * closed[1]), abs(1 - GAMMA * closed[-1]))
    shrink = np.linalg.norm(xt - xt.mean()) / np.linalg.norm(x0 - x0.mean())
    assert np.isclose(xt.mean(), x0.mean()) and shrink <= rho ** STEPS * (1 + 1e-6)  # equality when x0 has no slower component
    print(f"ring n={n:3d}: lambda_2 = {lam[1]:.5f} = 2 - 2cos(2pi/n) = {closed[1]:.5f} ~ (2pi/n)^2 = "
          f"{(2 * np.pi / n) ** 2:.5f}; gossip shrank disagreement by {shrink:.2e} <= rho^{STEPS} = {rho ** STEPS:.2e}")

# %% [markdown]
# ### The SVD and low rank: what PowerSGD keeps
# Every matrix $M \in \mathbb{R}^{m \times n}$ factors as $M = U \Sigma V^\top$ with orthonormal $U$, $V$
# and $\sigma_1 \ge \sigma_2 \ge \dots \ge 0$. Keeping the first $r$ terms gives the best rank-$r$
# approximation in both norms (Eckart-Young): $\|M - M_r\|_F = (\sum_{i>r} \sigma_i^2)^{1/2}$ and
# $\|M - M_r\|_2 = \sigma_{r+1}$. No rank-$r$ scheme can beat that tail, which is why a gradient
# matrix whose spectrum decays fast compresses well. PowerSGD (Chapter 10) does not compute an SVD: it
# runs one step of subspace iteration per training step, $P = M Q$, orthonormalise $P$, $Q = M^\top P$,
# sends $P$ and $Q$ ($(m + n) r$ numbers instead of $mn$), and reuses $Q$ at the next step (a warm
# start). Its error is never below the tail and approaches it as the iteration converges.

# %%
m, n, r = 200, 100, 4
U0, _ = np.linalg.qr(rng.standard_normal((m, n)))
V0, _ = np.linalg.qr(rng.standard_normal((n, n)))
spectrum = 1.0 / np.arange(1, n + 1)  # a gradient-like decaying spectrum
M = U0 @ np.diag(spectrum) @ V0.T
U, s, Vt = np.linalg.svd(M, full_matrices=False)
Mr = U[:, :r] * s[:r] @ Vt[:r]
tail = math.sqrt(np.sum(s[r:] ** 2))
assert np.isclose(np.linalg.norm(M - Mr, "fro"), tail, rtol=1e-10)
assert np.isclose(np.linalg.norm(M - Mr, 2), s[r], rtol=1e-10)

Q = rng.standard_normal((n, r))
power_errors = []
for step in range(30):  # 30 training steps of PowerSGD on the same matrix, Q warm-started
    P, _ = np.linalg.qr(M @ Q)
    Q = M.T @ P
    power_errors.append(np.linalg.norm(M - P @ Q.T, "fro"))
assert min(power_errors) >= tail * (1 - 1e-12)  # no rank-r approximation beats the SVD tail
assert power_errors[-1] <= 1.01 * tail and power_errors[0] > power_errors[-1]
print(f"rank {r}: SVD tail {tail:.4f}; PowerSGD error after 1, 5, 30 steps: "
      f"{power_errors[0]:.4f}, {power_errors[4]:.4f}, {power_errors[-1]:.4f}; "
      f"sends {(m + n) * r} numbers instead of {m * n} ({m * n / ((m + n) * r):.0f}x fewer)")

# %% [markdown]
# ### Condition number and the rate of gradient descent
# On the quadratic $F(w) = \frac12 (w - w^*)^\top A (w - w^*)$ with eigenvalues of $A$ in $[\mu,
# \Lambda]$, gradient descent $w \leftarrow w - \eta A (w - w^*)$ multiplies the error's component along
# eigenvector $i$ by $1 - \eta\lambda_i$. The best constant step $\eta = 2/(\mu + \Lambda)$ gives
# $\|w_t - w^*\| \le \left(\frac{\kappa - 1}{\kappa + 1}\right)^t \|w_0 - w^*\|$ with the condition
# number $\kappa = \Lambda / \mu$; the safe step $\eta = 1/\Lambda$ gives $(1 - 1/\kappa)^t$. Either
# way the steps to a fixed accuracy grow like $\kappa$: ill-conditioning, not the dataset's size, is
# what makes optimisation slow, and what preconditioners and adaptive methods (Chapter 10) fight. We
# start from an error with components along both extreme eigenvectors, where the bound is attained.

# %%
TOL, DIM = 1e-6, 50


def gd_iterations(kappa, eta_rule):
    """Steps of gradient descent until ||w - w*|| <= TOL ||w0 - w*|| on a rotated quadratic."""
    eig = np.geomspace(1.0, kappa, DIM)
    Qr, _ = np.linalg.qr(np.random.default_rng(SEED + int(kappa)).standard_normal((DIM, DIM)))
    A = Qr @ np.diag(eig) @ Qr.T
    eta = 2 / (1 + kappa) if eta_rule == "best" else 1 / kappa
    e = Qr[:, 0] + Qr[:, -1]  # the error w - w*, on the two extreme eigenvectors
    e0, t = np.linalg.norm(e), 0
    while np.linalg.norm(e) > TOL * e0:
        e = e - eta * (A @ e)
        t += 1
    return t


gd_rows = []
for kappa in KAPPAS:
    best, safe = gd_iterations(kappa, "best"), gd_iterations(kappa, "safe")
    bound_best = math.ceil(math.log(TOL) / math.log((kappa - 1) / (kappa + 1)))
    bound_safe = math.ceil(math.log(TOL) / math.log(1 - 1 / kappa))
    assert bound_best - 1 <= best <= bound_best  # attained: both extreme components shrink at exactly that rate
    assert 0.95 * bound_safe - 1 <= safe <= bound_safe  # with 1/Lambda the top component vanishes in one step
    gd_rows.append((kappa, best, bound_best, safe, bound_safe))
    print(f"kappa={kappa:5d}: eta=2/(mu+Lambda) took {best:6d} steps (bound {bound_best:6d}); "
          f"eta=1/Lambda took {safe:6d} (bound {bound_safe:6d})")

# %% [markdown]
# ## 3. Core concepts II: probability and convex optimisation
#
# ### The mini-batch gradient: unbiased, with variance $\sigma^2 / B$
# With per-example gradients $g_i(w)$ and the full gradient $g = \frac1N \sum_i g_i$, a mini-batch of
# $B$ examples drawn uniformly with replacement gives $\hat g = \frac1B \sum_{j=1}^{B} g_{i_j}$ with
# $\mathbb{E}[\hat g] = g$ and $\mathbb{E}\|\hat g - g\|^2 = \sigma^2 / B$, where $\sigma^2 = \frac1N
# \sum_i \|g_i - g\|^2$. (Without replacement, multiply by the finite-population factor $(N-B)/(N-1)$.)
# Whether $B$ examples come from one worker or from $K$ workers with $b = B/K$ each, the average is the
# same estimator with the same variance: this is what lets data parallelism (Chapter 15) trade steps
# for workers, and why a larger $B$ supports a larger $\eta$ up to a critical batch size.

# %%
X, y, w_true = datasets.linear_regression(2000, 5, noise=0.5, seed=SEED)
w = np.zeros(5)
G = X * (X @ w - y)[:, None]  # per-example gradients of (x.w - y)^2 / 2
g_full = G.mean(axis=0)
sigma2 = np.mean(np.sum((G - g_full) ** 2, axis=1))
var_rows = []
for B in BATCHES:
    idx = rng.integers(0, len(G), size=(DRAWS, B))
    est = G[idx].mean(axis=1)
    bias = np.linalg.norm(est.mean(axis=0) - g_full)
    var = np.mean(np.sum((est - g_full) ** 2, axis=1))
    assert bias <= 5 * math.sqrt(sigma2 / (B * DRAWS))  # unbiased, up to the error of averaging DRAWS batches
    assert abs(var * B / sigma2 - 1) <= 0.2
    var_rows.append((B, var))
    print(f"B={B:4d}: E||g_hat - g||^2 = {var:9.4f}, sigma^2/B = {sigma2 / B:9.4f} (ratio {var * B / sigma2:.3f})")

# %% [markdown]
# ### Concentration: Hoeffding's inequality
# For independent $X_1, \dots, X_n \in [0, 1]$ with mean $\mu$, the sample mean satisfies
# $P(|\bar X - \mu| \ge t) \le 2 e^{-2 n t^2}$, whatever their distribution. It is what turns a finite
# sample into a guarantee: how many evaluations decide which of two configurations is better
# (Chapter 5, and successive halving in Chapter 21), how many sampled items a sketch or a sampled
# aggregate needs. The bound is loose for any one distribution (below: fair coins, where the exact
# binomial tail is known) but it never fails. Repeating the experiment `TRIALS` times measures the tail.

# %%
n_coins = 100
means = rng.binomial(n_coins, 0.5, size=TRIALS) / n_coins
for t in (0.05, 0.1, 0.15, 0.2):
    measured = np.mean(np.abs(means - 0.5) >= t - 1e-12)
    bound = 2 * math.exp(-2 * n_coins * t * t)
    k = math.ceil(n_coins * (0.5 + t) - 1e-9)
    exact = 2 * scipy.stats.binom.sf(k - 1, n_coins, 0.5)  # P(S >= k) on both sides
    se = math.sqrt(exact * (1 - exact) / TRIALS)
    assert abs(measured - exact) <= 5 * se + 1e-12 and exact <= bound
    print(f"t={t:.2f}: measured tail {measured:.5f}, exact {exact:.5f}, Hoeffding bound {min(bound, 1):.5f}")

# %% [markdown]
# ### The Gaussian mechanism
# A query $f$ whose value moves by at most $\Delta$ in $\ell_2$ when one person's data changes (its
# sensitivity: after clipping each example's gradient to norm $C$, a sum of gradients has $\Delta =
# C$) is made $(\varepsilon, \delta)$-differentially private by adding $\mathcal{N}(0, s^2 I)$ noise.
# The classical calibration (Dwork and Roth, for $\varepsilon < 1$) is $s = \Delta\sqrt{2\ln(1.25/\delta)}
# / \varepsilon$. The exact condition (Balle and Wang's analytic Gaussian mechanism) is
# $\Phi\!\left(\frac{\Delta}{2s} - \frac{\varepsilon s}{\Delta}\right) - e^{\varepsilon}
# \Phi\!\left(-\frac{\Delta}{2s} - \frac{\varepsilon s}{\Delta}\right) \le \delta$; the classical $s$
# satisfies it with room to spare, and solving it gives a smaller $s$, less noise for the same promise.
# DP-SGD (Chapter 14) writes $s = z C$ with the noise multiplier $z$, and an accountant (Chapters 14
# and 35) adds up the privacy spent over many noisy steps.

# %%
def gaussian_delta(s, eps, sens=1.0):
    """The exact delta of the Gaussian mechanism with noise s at epsilon (Balle and Wang, 2018)."""
    a, b = sens / (2 * s), eps * s / sens
    return scipy.stats.norm.cdf(a - b) - math.exp(eps) * scipy.stats.norm.cdf(-a - b)


EPS, DELTA, CLIP = 0.5, 1e-5, 1.0
s_classic = CLIP * math.sqrt(2 * math.log(1.25 / DELTA)) / EPS
s_exact = brentq(lambda s: gaussian_delta(s, EPS, CLIP) - DELTA, 0.1, s_classic)
assert gaussian_delta(s_classic, EPS, CLIP) <= DELTA and s_exact < s_classic
grads = rng.standard_normal((256, 10))
grads *= np.minimum(1.0, CLIP / np.linalg.norm(grads, axis=1, keepdims=True))  # clip each example to norm C
noisy = grads.sum(axis=0) + rng.normal(0, s_classic, size=(DRAWS, 10))  # DRAWS private releases of the sum
assert abs(np.std(noisy - grads.sum(axis=0)) / s_classic - 1) < 0.05
print(f"epsilon={EPS}, delta={DELTA}, Delta=C={CLIP}: classical s = {s_classic:.3f} (exact delta "
      f"{gaussian_delta(s_classic, EPS):.1e}), analytic s = {s_exact:.3f}, {1 - s_exact / s_classic:.0%} less noise")

# %% [markdown]
# ### Convexity, smoothness and the $1/\Lambda$ step
# $F$ is convex when it lies above its tangents, $F(v) \ge F(w) + \nabla F(w)^\top (v - w)$, and
# $\Lambda$-smooth when its gradient is $\Lambda$-Lipschitz, which gives the quadratic upper bound $F(v)
# \le F(w) + \nabla F(w)^\top (v - w) + \frac{\Lambda}{2}\|v - w\|^2$. Minimising that upper bound over
# $v$ is exactly the step $\eta = 1/\Lambda$, and it guarantees $F(w_t) - F^* \le \Lambda \|w_0 -
# w^*\|^2 / (2t)$. Steps beyond $2/\Lambda$ can diverge. For least squares $\Lambda = \lambda_{\max}
# (X^\top X / N)$; for logistic regression $\Lambda = \lambda_{\max}(X^\top X) / (4N)$. Chapter 10's
# step-size rules and Chapter 15's learning-rate scaling with $B$ start from these two inequalities.

# %%
Xc, yc = datasets.classification(1000, 8, seed=SEED)
sgn = 2.0 * yc - 1  # labels in {-1, +1}


def logistic(w):
    z = sgn * (Xc @ w)
    return np.mean(np.logaddexp(0, -z)), -(Xc.T @ (sgn * scipy.special.expit(-z))) / len(Xc)


Lam_log = np.linalg.eigvalsh(Xc.T @ Xc)[-1] / (4 * len(Xc))
for _ in range(200):
    w1, w2 = rng.standard_normal(8) * 3, rng.standard_normal(8) * 3
    (f1, g1), (f2, _) = logistic(w1), logistic(w2)
    lin = f1 + g1 @ (w2 - w1)
    assert lin - 1e-12 <= f2 <= lin + Lam_log / 2 * np.sum((w2 - w1) ** 2) + 1e-12

Lam = np.linalg.eigvalsh(X.T @ X / len(X))[-1]
w_star = np.linalg.lstsq(X, y, rcond=None)[0]
loss = lambda w: 0.5 * np.mean((X @ w - y) ** 2)  # noqa: E731
grad = lambda w: X.T @ (X @ w - y) / len(X)  # noqa: E731
for eta, name in ((1 / Lam, "1/Lambda"), (2.1 / Lam, "2.1/Lambda")):
    w, gaps = np.zeros(5), []
    for t in range(1, 101):
        w = w - eta * grad(w)
        gaps.append(loss(w) - loss(w_star))
    if name == "1/Lambda":
        assert all(gap <= Lam * np.sum(w_star ** 2) / (2 * t) + 1e-12 for t, gap in enumerate(gaps, 1))
    else:
        assert gaps[-1] > loss(np.zeros(5))  # past 2/Lambda the iterates blow up
    print(f"eta = {name:10s}: F(w_t) - F* = {gaps[0]:.3e} at t=1, {gaps[4]:.3e} at t=5, {gaps[-1]:.3e} at t=100")

# %% [markdown]
# ### Stochastic gradients need decreasing steps
# With a noisy gradient a constant step does not converge: the iterate settles into a ball whose size is
# proportional to $\eta \sigma^2$. On a $\mu$-strongly convex problem, steps $\eta_t = \eta_0/(1 +
# t/t_0)$ with $\eta_0 t_0 \gtrsim 1/\mu$ shrink the ball and give $\mathbb{E}\|w_t - w^*\|^2 =
# O(1/t)$. (Chapter 10's synchronous and local SGD and Chapter 15's warm-up and decay schedules are
# variations of this.) One example per step, the same examples in the same order for both schedules,
# and the squared error averaged over 16 independent runs, since a single run is noisy:

# %%
def sgd(schedule, steps, seed, runs=16):
    """Mean ||w_t - w*||^2 over `runs` independent SGD runs, one example per step."""
    idx = np.random.default_rng(seed).integers(0, len(X), size=(steps, runs))
    W, errors = np.zeros((runs, 5)), np.empty(steps)
    for t in range(steps):
        eta = 0.05 if schedule == "constant" else 0.2 / (1 + t / 100)
        xi = X[idx[t]]
        W -= eta * xi * (np.einsum("rd,rd->r", xi, W) - y[idx[t]])[:, None]
        errors[t] = np.mean(np.sum((W - w_star) ** 2, axis=1))
    return errors


const, decay = sgd("constant", SGD_STEPS, SEED), sgd("decreasing", SGD_STEPS, SEED)
tail_of = lambda e, a, b: e[int(a * len(e)):int(b * len(e))].mean()  # noqa: E731
assert tail_of(decay, 0.9, 1.0) < 0.2 * tail_of(const, 0.9, 1.0)  # the decreasing steps go much further
assert tail_of(decay, 0.9, 1.0) < 0.7 * tail_of(decay, 0.4, 0.5)  # and are still improving
assert tail_of(const, 0.9, 1.0) > 0.3 * tail_of(const, 0.4, 0.5)  # the constant step has stalled
print(f"||w - w*||^2 over the last tenth of {SGD_STEPS} steps: constant eta {tail_of(const, 0.9, 1):.2e}, "
      f"decreasing eta {tail_of(decay, 0.9, 1):.2e}")

# %% [markdown]
# ### The $\alpha$-$\beta$ model is a linear model
# Chapter 3 models a message of $m$ bytes as taking $t(m) = \alpha + \beta m$. Measured times for many
# sizes give an overdetermined linear system $t \approx [\mathbf{1}, m]\,(\alpha, \beta)^\top$, solved
# by least squares: the normal equations give $\beta = \mathrm{cov}(m, t) / \mathrm{var}(m)$ and
# $\alpha = \bar t - \beta \bar m$. Real timings have relative noise (a few per cent of each time), so
# the large messages' absolute errors swamp $\alpha$; weighting each equation by $1/t$ (minimising the
# relative error) recovers both. Here the "measurements" are one-way times on the simulated cluster
# with a seeded 5 % jitter.

# %%
ALPHA, BETA = 5e-6, 1e-9


def one_way(comm, nbytes):
    if comm.rank == 0:
        comm.send(np.zeros(nbytes, dtype=np.uint8), 1)
        return None
    start = comm.clock
    comm.recv(0)
    return comm.clock - start


sizes = np.repeat(np.geomspace(1, 1e7, 15).astype(int), 3)
clean = np.array([cluster.run(one_way, 2, args=(int(nb),), network=cluster.Network(alpha=ALPHA, beta=BETA),
                              timeout=30).values[1] for nb in sizes])
assert np.allclose(clean, ALPHA + BETA * sizes)  # the simulator is the model
times = clean * rng.lognormal(0, 0.05, size=clean.size)
beta_ne = np.cov(sizes, times, bias=True)[0, 1] / np.var(sizes)
alpha_ne = times.mean() - beta_ne * sizes.mean()
fit = perf.fit_alpha_beta(sizes, times)  # the library's fit (Chapter 3): ordinary least squares
assert np.isclose(fit.alpha, alpha_ne, rtol=1e-6, atol=1e-12) and np.isclose(fit.beta, beta_ne, rtol=1e-6)
design = np.column_stack([np.ones(sizes.size), sizes]) / times[:, None]
alpha_w, beta_w = np.linalg.lstsq(design, np.ones(sizes.size), rcond=None)[0]
assert abs(beta_ne / BETA - 1) < 0.05 and abs(alpha_w / ALPHA - 1) < 0.1 and abs(beta_w / BETA - 1) < 0.05
print(f"true alpha={ALPHA:.1e} s, beta={BETA:.1e} s/B; ordinary LSQ alpha={alpha_ne:.2e}, beta={beta_ne:.3e} "
      f"(r^2={fit.r2:.4f}); relative LSQ alpha={alpha_w:.2e}, beta={beta_w:.3e}")

# %% [markdown]
# ### The mathematics of Parts VI and VII
# The later parts lean on four more tools, each checked below against a second computation: linear
# programming duality (game values, scheduling), Markov chains and the Bellman equations (gossip,
# reinforcement learning), queueing formulas (serving and scheduling), and the Rényi divergence (privacy
# accounting). Each is a few lines of NumPy or SciPy at a size that runs in well under a second.
#
# ### Linear programming and duality
# A linear program minimises $c^\top u$ over $u \ge 0$ with $A u \ge h$ (we write $u$ and $h$ because
# $x$, $y$ and $b$ are taken by Appendix C). Its **dual** maximises $h^\top z$ over $z \ge 0$ with
# $A^\top z \le c$: each dual variable prices one constraint. **Weak duality** is one line,
# $h^\top z \le (A u)^\top z = u^\top A^\top z \le c^\top u$, so any feasible pair brackets the optimum;
# **strong duality** says the two optima are equal whenever either is finite, and **complementary
# slackness** says how: at the optimum a constraint with slack has price 0 ($z_i (A u - h)_i = 0$) and a
# variable that is used has a tight dual constraint ($u_j (c - A^\top z)_j = 0$). Part VI leans on this
# twice: the value of a two-player zero-sum game is a linear program whose dual is the other player's
# (Chapter 28's minimax, and the "duality gap" that NashConv measures), and the cluster schedulers of
# Chapter 33 solve fractional allocations whose dual prices are the per-resource costs. Below, a small
# random LP and its dual are solved separately with SciPy's HiGHS; the two optima agree, both slackness
# products vanish, and HiGHS's own constraint marginals are the dual solution.

# %%
from scipy.optimize import linprog

lp_rng = np.random.default_rng(SEED + 1)
A_lp = lp_rng.uniform(0.0, 1.0, size=(4, 3)).round(2) + 0.1
h_lp, c_lp = lp_rng.uniform(1.0, 2.0, size=4).round(2), lp_rng.uniform(1.0, 3.0, size=3).round(2)
primal = linprog(c_lp, A_ub=-A_lp, b_ub=-h_lp, bounds=(0, None), method="highs")  # A u >= h as -A u <= -h
dual = linprog(-h_lp, A_ub=A_lp.T, b_ub=c_lp, bounds=(0, None), method="highs")  # max h.z as min -h.z
u_opt, z_opt = primal.x, dual.x
assert primal.status == dual.status == 0
assert abs(primal.fun - (-dual.fun)) <= 1e-9 * max(1.0, abs(primal.fun))  # strong duality
assert np.all(np.abs(z_opt * (A_lp @ u_opt - h_lp)) <= 1e-9)  # a priced constraint is tight
assert np.all(np.abs(u_opt * (c_lp - A_lp.T @ z_opt)) <= 1e-9)  # a used variable's dual constraint is tight
assert np.allclose(-primal.ineqlin.marginals, z_opt, atol=1e-9)  # HiGHS's duals are the dual LP's solution
print(f"primal min c.u = {primal.fun:.6f} at u = {u_opt.round(4)}; dual max h.z = {-dual.fun:.6f} at "
      f"z = {z_opt.round(4)}; tight constraints {np.flatnonzero(np.isclose(A_lp @ u_opt, h_lp)).tolist()}")

# %% [markdown]
# The zero-sum game of Chapter 28 is the same object. For a payoff matrix $U$ (row player's gain), the row
# player maximises $v$ subject to $U^\top s \ge v \mathbf{1}$ over mixed strategies $s$; the column
# player's program is its dual, and both optima are the game's value. Rock-paper-scissors with a doubled
# win for rock is solved below both ways; Chapter 28's support enumeration gives the same strategies.

# %%
from scaleoutai.agents import equilibria  # noqa: E402  (Chapter 28's solver, to compare with)


def zero_sum_value(U):
    """(value, row strategy) of the zero-sum game U by the row player's LP: max v, U^T s >= v, sum s = 1."""
    m, n = U.shape
    res = linprog(np.r_[np.zeros(m), -1.0], A_ub=np.c_[-U.T, np.ones(n)], b_ub=np.zeros(n),
                  A_eq=np.r_[np.ones(m), 0.0][None], b_eq=[1.0], bounds=[(0, None)] * m + [(None, None)],
                  method="highs")
    return -res.fun, res.x[:m]


U_rps = np.array([[0.0, -1.0, 2.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
v_row, s_row = zero_sum_value(U_rps)
v_col, s_col = zero_sum_value(-U_rps.T)  # the column player's game: its dual
(x_eq, y_eq), = equilibria.support_enumeration(U_rps, -U_rps)
assert abs(v_row + v_col) <= 1e-9  # one value, seen from both sides
assert np.allclose(s_row, x_eq, atol=1e-9) and np.allclose(s_col, y_eq, atol=1e-9)
print(f"value {v_row:.4f}; row player {s_row.round(4)}, column player {s_col.round(4)} (= support enumeration)")

# %% [markdown]
# ### Markov chains: the stationary distribution
# A Markov chain on $n$ states moves by a row-stochastic matrix $M$ ($M_{ij}$ is the probability of
# going from $i$ to $j$; we avoid $P$, the parameter count). A distribution $\pi$ over states evolves as
# $\pi \leftarrow \pi M$, and a **stationary** distribution satisfies $\pi = \pi M$: it is a left
# eigenvector of $M$ for eigenvalue 1. If the chain is irreducible and aperiodic it is unique, and
# **power iteration** (apply $M$ repeatedly to any start) converges to it at the rate of the second
# largest eigenvalue modulus $|\lambda_2|$: the same spectral gap that times gossip (Chapters 14 and
# 31), PageRank and the mixing of an MCMC sampler. Below, a random 6-state chain: power iteration against
# the eigenvector from `scipy.linalg.eig`, and the error shrinking by $|\lambda_2|$ per step.

# %%
mc_rng = np.random.default_rng(SEED + 2)
M_chain = mc_rng.uniform(0.0, 1.0, size=(6, 6))
M_chain /= M_chain.sum(axis=1, keepdims=True)
vals, left = scipy.linalg.eig(M_chain.T)
top = int(np.argmin(np.abs(vals - 1.0)))
pi_eig = np.real(left[:, top]) / np.real(left[:, top]).sum()
lam2 = sorted(np.abs(vals))[-2]
pi_t, errors = np.full(6, 1 / 6), []
for _ in range(60):
    pi_t = pi_t @ M_chain
    errors.append(np.abs(pi_t - pi_eig).sum())
assert np.allclose(pi_eig @ M_chain, pi_eig, atol=1e-12) and np.all(pi_eig > 0)
assert np.allclose(pi_t, pi_eig, atol=1e-12)  # power iteration reaches the eigenvector
rate = (errors[20] / errors[10]) ** (1 / 10)
assert abs(rate - lam2) <= 0.05 * lam2 + 1e-3, (rate, lam2)  # the error falls by |lambda_2| per step
print(f"stationary pi = {pi_eig.round(4)}; |lambda_2| = {lam2:.4f}, measured contraction per step {rate:.4f}")

# %% [markdown]
# ### Bellman equations: value iteration and the linear system
# A Markov decision process adds actions and rewards: in state $s$ action $a$ pays $r(s, a)$ and moves by
# $M_a(s, \cdot)$; future rewards are discounted by $\gamma < 1$. For a fixed policy $\mu$ (a state to
# action map) the values satisfy the **Bellman equation** $V^\mu = r_\mu + \gamma M_\mu V^\mu$, a linear
# system solved as $V^\mu = (I - \gamma M_\mu)^{-1} r_\mu$. The optimal values satisfy the nonlinear
# **Bellman optimality equation** $V^\star(s) = \max_a [r(s,a) + \gamma \sum_{s'} M_a(s, s') V^\star(s')]$,
# whose right-hand side is a $\gamma$-contraction in the max norm, so **value iteration** (apply it
# repeatedly) converges geometrically from any start. The check: the policy that is greedy for the value
# iteration's result, evaluated by the linear solve, has the same values. Q-learning (Chapters 20 and
# 30) is value iteration with sampled transitions; independent learners break the stationarity that the
# contraction needs, which is Chapter 30's problem.

# %%
n_s, n_a, gamma = 8, 3, 0.9
M_mdp = mc_rng.uniform(0.0, 1.0, size=(n_a, n_s, n_s)) ** 4  # a few likely successors per state
M_mdp /= M_mdp.sum(axis=2, keepdims=True)
r_mdp = mc_rng.uniform(-1.0, 1.0, size=(n_s, n_a))


def bellman(V):
    """The optimality operator: (T V)(s) = max_a r(s, a) + gamma sum_s' M_a(s, s') V(s')."""
    return (r_mdp + gamma * np.einsum("ast,t->sa", M_mdp, V)).max(axis=1)


V, gaps = np.zeros(n_s), []
for _ in range(300):
    V_next = bellman(V)
    gaps.append(np.max(np.abs(V_next - V)))
    V = V_next
greedy = (r_mdp + gamma * np.einsum("ast,t->sa", M_mdp, V)).argmax(axis=1)
M_mu, r_mu = M_mdp[greedy, np.arange(n_s)], r_mdp[np.arange(n_s), greedy]
V_mu = np.linalg.solve(np.eye(n_s) - gamma * M_mu, r_mu)
assert np.allclose(V_mu, V, atol=1e-9)  # the greedy policy's exact values are the fixed point
assert all(g2 <= gamma * g1 + 1e-12 for g1, g2 in zip(gaps, gaps[1:]))  # a gamma-contraction, step by step
print(f"value iteration: {len(gaps)} sweeps, last change {gaps[-1]:.1e}; greedy policy {greedy.tolist()}, "
      f"max |V_mu - V| = {np.max(np.abs(V_mu - V)):.1e}")

# %% [markdown]
# ### Queues: M/M/1 and M/M/c (Erlang C)
# Requests arrive as a Poisson process of rate $\lambda$ and each needs an exponential service time of
# rate $\mu$ on one of $c$ identical servers fed by one FIFO queue (M/M/$c$); the load per server is
# $\rho = \lambda / (c\mu) < 1$ and the offered load is $a = \lambda/\mu$ (here $\lambda$ is the arrival
# rate, as in every queueing text). For one server the time in the system is exponential with rate
# $\mu - \lambda$, so its mean is $1/(\mu - \lambda)$ and it explodes as $\rho \to 1$. For $c$ servers
# the probability that an arrival must wait is **Erlang C**,
# $$C(c, a) = \frac{\frac{a^c}{c!}\frac{c}{c-a}}{\sum_{k<c} \frac{a^k}{k!} + \frac{a^c}{c!}\frac{c}{c-a}},$$
# and the mean time in the system is $C(c, a)/(c\mu - \lambda) + 1/\mu$. These formulas size the serving
# fleets of Part V and the scheduler queues of Chapter 33. They are checked here against the
# discrete-event simulator of Chapter 23 (`replicas.simulate` with one central queue) at
# `QUEUE_JOBS` requests; the tolerance is four standard errors from 20 batch means, since consecutive
# sojourn times are correlated.

# %%
from scaleoutai.serving import replicas  # noqa: E402


def batch_mean_se(values, batches=20):
    """Standard error of the mean of a correlated series by the method of batch means."""
    means = np.array([chunk.mean() for chunk in np.array_split(values, batches)])
    return means.std(ddof=1) / math.sqrt(batches)


q_rng = np.random.default_rng(SEED + 3)
queue_rows = []
for c_srv, lam, mu in ((1, 0.7, 1.0), (4, 3.0, 1.0)):
    arrivals = np.cumsum(q_rng.exponential(1 / lam, QUEUE_JOBS))
    services = q_rng.exponential(1 / mu, QUEUE_JOBS)
    out = replicas.simulate(arrivals, services, c_srv, policy="central_queue")
    keep = slice(QUEUE_JOBS // 10, None)  # drop the warm-up from an empty system
    soj, waited = out.latency[keep], (out.latency - services)[keep] > 1e-8  # rounding of times ~1e4 is ~1e-12
    want_soj, want_wait = replicas.mmc_mean_sojourn(c_srv, lam, mu), replicas.erlang_c(c_srv, lam, mu)
    se_soj, se_wait = batch_mean_se(soj), batch_mean_se(waited.astype(float))
    assert abs(soj.mean() - want_soj) <= 4 * se_soj, (c_srv, soj.mean(), want_soj, se_soj)
    assert abs(waited.mean() - want_wait) <= 4 * se_wait, (c_srv, waited.mean(), want_wait, se_wait)
    if c_srv == 1:
        assert math.isclose(want_soj, 1 / (mu - lam)) and math.isclose(want_wait, lam / mu)  # M/M/1: C = rho
    queue_rows.append((c_srv, lam / (c_srv * mu), soj.mean(), want_soj, waited.mean(), want_wait))
    print(f"M/M/{c_srv} at rho={lam / (c_srv * mu):.2f}: mean sojourn {soj.mean():.3f} (formula {want_soj:.3f}, "
          f"se {se_soj:.3f}); P(wait) {waited.mean():.3f} (Erlang C {want_wait:.3f})")
rhos = np.linspace(0.05, 0.95, 60)
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for (c_srv, rho_sim, soj_sim, _, _, _), color in zip(queue_rows, ("tab:blue", "tab:orange")):
    ax.plot(rhos, [replicas.mmc_mean_sojourn(c_srv, r * c_srv, 1.0) for r in rhos], color=color,
            label=f"M/M/{c_srv} formula")
    ax.plot([rho_sim], [soj_sim], "o", color=color, label=f"M/M/{c_srv} simulated ({QUEUE_JOBS} requests)")
ax.set(xlabel="load per server rho", ylabel="mean time in system (units of 1/mu)", yscale="log",
       title="waiting explodes as rho -> 1; pooling servers delays it")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Rényi divergence, and why privacy accountants use it
# For densities $p$ and $q$ the **Rényi divergence** of order $\lambda > 1$ is
# $D_\lambda(p \,\|\, q) = \frac{1}{\lambda - 1} \ln \int p(x)^\lambda q(x)^{1-\lambda}\, dx$ (we write
# $\lambda$ for the order, as Chapters 14 and 35 do, because $\alpha$ is the message latency; in this
# subsection it is not an arrival rate). It tends to the KL divergence as $\lambda \to 1$. For two
# Gaussians it has a closed form; with equal variance,
# $D_\lambda(\mathcal{N}(\mu_0, s^2) \,\|\, \mathcal{N}(\mu_1, s^2)) = \lambda (\mu_0 - \mu_1)^2 / (2 s^2)$,
# and with unequal variances, writing $s_\lambda^2 = \lambda s_1^2 + (1 - \lambda) s_0^2 > 0$,
# $D_\lambda = \ln\frac{s_1}{s_0} + \frac{1}{2(\lambda - 1)} \ln\frac{s_1^2}{s_\lambda^2} +
# \frac{\lambda (\mu_0 - \mu_1)^2}{2 s_\lambda^2}$.
# A mechanism is $(\lambda, \varepsilon_\lambda)$-Rényi DP when this divergence between its outputs on
# any two neighbouring data sets is at most $\varepsilon_\lambda$. The Gaussian mechanism with sensitivity
# 1 and noise $s$ therefore has $\varepsilon_\lambda = \lambda / (2 s^2)$, RDP **adds up** over steps,
# and one conversion at the end gives $(\varepsilon, \delta)$: that is the accountant of Chapter 14's
# DP-SGD and Chapter 35's privacy ledger. With Poisson subsampling at rate $q$ the neighbouring outputs
# are the mixture $(1 - q)\mathcal{N}(0, s^2) + q\mathcal{N}(1, s^2)$ against $\mathcal{N}(0, s^2)$; at
# integer orders the ledger's `rdp_subsampled_gaussian` is exactly that divergence. The cell checks each
# closed form against numerical integration (`scipy.integrate.quad`).

# %%
from scipy.integrate import quad  # noqa: E402

from scaleoutai.infra import dp_budget  # noqa: E402  (Chapter 35's ledger)


def renyi_numeric(logp, logq, order, lo=-40.0, hi=40.0):
    """D_order(p || q) by quadrature of exp(order log p + (1 - order) log q)."""
    val, _ = quad(lambda t: math.exp(order * logp(t) + (1 - order) * logq(t)), lo, hi, limit=200, points=[0.0, 1.0])
    return math.log(val) / (order - 1)


def renyi_gauss(m0, s0, m1, s1, order):
    """Closed form of D_order(N(m0, s0^2) || N(m1, s1^2)); needs order s1^2 + (1 - order) s0^2 > 0."""
    s_lam2 = order * s1 ** 2 + (1 - order) * s0 ** 2
    return (math.log(s1 / s0) + math.log(s1 ** 2 / s_lam2) / (2 * (order - 1))
            + order * (m0 - m1) ** 2 / (2 * s_lam2))


def log_normal(m, s):
    return lambda t: -0.5 * ((t - m) / s) ** 2 - math.log(s * math.sqrt(2 * math.pi))


renyi_rows = []
for (m0, s0, m1, s1) in ((1.0, 1.0, 0.0, 1.0), (0.5, 1.0, 0.0, 1.5), (0.0, 0.8, 1.0, 1.0)):  # s_lambda^2 > 0
    for order in (1.5, 2, 4, 8):
        closed, numeric = renyi_gauss(m0, s0, m1, s1, order), renyi_numeric(log_normal(m0, s0), log_normal(m1, s1), order)
        assert abs(closed - numeric) <= 1e-7 * max(1.0, closed), (m0, s0, m1, s1, order, closed, numeric)
        renyi_rows.append(((m0, s0, m1, s1), order, closed))
s_noise, q_rate = 1.2, 0.05
for order in (2, 4, 8):
    full = dp_budget.rdp_subsampled_gaussian(1.0, s_noise, order)
    assert math.isclose(full, renyi_gauss(1.0, s_noise, 0.0, s_noise, order), rel_tol=1e-12)  # lambda / (2 s^2)
    mixture = lambda t: np.logaddexp(math.log1p(-q_rate) + log_normal(0.0, s_noise)(t),  # noqa: E731
                                     math.log(q_rate) + log_normal(1.0, s_noise)(t))
    sub = renyi_numeric(mixture, log_normal(0.0, s_noise), order)
    assert math.isclose(dp_budget.rdp_subsampled_gaussian(q_rate, s_noise, order), sub, rel_tol=1e-7)
steps_dp = 1000
orders_dp = list(range(2, 65))
eps_dp, best_order = dp_budget.epsilon_from_rdp(dp_budget.rdp_curve(q_rate, s_noise, steps_dp, orders_dp),
                                                orders_dp, 1e-5)
print(f"{len(renyi_rows)} Gaussian pairs x orders: closed form = quadrature to 1e-7; subsampled Gaussian "
      f"(q={q_rate}, s={s_noise}) matches the ledger's formula; {steps_dp} steps compose to "
      f"epsilon = {eps_dp:.2f} at delta = 1e-5 (best order {best_order})")

# %% [markdown]
# ## 4. From scratch: floating-point sums, where the pattern changes the answer
#
# ### Rounding, and the order of a reduction
#
# An IEEE float stores a sign, an exponent and a $p$-bit significand. Rounding a real number to the
# nearest float makes a relative error of at most $u = 2^{-p}$: $2^{-11}$ for float16, $2^{-8}$ for
# bfloat16, $2^{-24}$ for float32, $2^{-53}$ for float64. Each addition rounds, so $(a + b) + c$ and
# $a + (b + c)$ can differ, and a sum's error depends on its order. The pattern of a reduction is an
# order: a ring all-reduce (Chapter 4) adds the $K$ partial sums one after another around the ring,
# a tree adds them in pairs, and each worker first adds its own shard of $n/K$ values. With $S =
# \sum |x_i|$, the classical bounds are:
#
# | summation | error bound | grows with $n$ like |
# |---|---|---|
# | left to right (naive) | $(n-1)\,u\,S$ | $n$ |
# | pairwise (a balanced tree) | $\lceil\log_2 n\rceil\,u\,S$ | $\log n$ |
# | $K$ shards, then ring / tree | $(\lceil n/K\rceil - 1 + \text{depth})\,u\,S$, depth $K-1$ or $\lceil\log_2 K\rceil$ | $n/K + K$ or $n/K + \log K$ |
# | Kahan (compensated) | $(2u + O(n u^2))\,S$ | constant, while $n u \ll 1$ |
#
# The bounds are worst cases; with random signs the errors add like a random walk and the typical error
# is about the square root of the bound's factor. Two consequences for distributed training: splitting
# a sum over more workers does not make it less accurate (often more), but it makes it *different*, so
# a run is bit-for-bit reproducible only at a fixed $K$, fixed order and fixed reduction algorithm
# (Chapter 18's elastic restarts change $K$; Chapter 5's reproducibility checklist asks you to record it).

# %%
u32 = numerics.unit_roundoff(np.float32)
assert u32 == 2.0 ** -24 and np.float32(1) + np.float32(u32) == 1 and np.float32(1) + np.float32(2 * u32) > 1
a, b, c = np.float32(1e8), np.float32(-1e8), np.float32(1.0)
assert (a + b) + c == 1.0 and a + (b + c) == 0.0  # the same three numbers, two orders, two answers
print(f"u(float32) = 2^-24 = {u32:.3e}; (1e8 - 1e8) + 1 = {(a + b) + c}, 1e8 + (-1e8 + 1) = {a + (b + c)}")

# %% [markdown]
# ### Four ways to add $n$ numbers
# `scaleoutai.perf.numerics` holds the sums of the table, each computing in the dtype it is given (every
# partial result rounded there), and `exact_sum`, the reference: `math.fsum` keeps the exact running
# sum in several non-overlapping floats and rounds once at the end. `tree_sum` is the sum as $K$ workers
# compute it, with the course's one split rule (`collectives.block_bounds`) and the partial sums
# combined around a ring or up a binomial tree from any root. Kahan's trick is the variable `c`: after
# `t = s + y`, the expression `(t - s) - y` is exactly what the rounding dropped (for $|s| \ge |y|$),
# and it is subtracted from the next term.

# %%
from scaleoutai.notebooks import show  # noqa: E402

show(numerics.naive_sum, numerics.pairwise_sum, numerics.kahan_sum, numerics.tree_sum)

# %% [markdown]
# Each sum of `N_SUM` float32 values is checked against `math.fsum` and its bound; then the classic bad
# case, one large value followed by many values each below half a unit in its last place.

# %%
values = rng.uniform(0, 1, N_SUM).astype(np.float32)
exact = numerics.exact_sum(values)
errors = {}
for method in ("naive", "pairwise", "kahan"):
    got = getattr(numerics, f"{method}_sum")(values)
    errors[method] = abs(float(got) - exact)
    assert errors[method] <= numerics.sum_error_bound(values, method)
for K in KS:
    for order in ("ring", "tree"):
        got = numerics.tree_sum(values, K, order=order)
        assert abs(float(got) - exact) <= numerics.sum_error_bound(values, "tree", K=K, order=order)
assert errors["kahan"] <= errors["pairwise"] < errors["naive"]
print(f"n={N_SUM} float32 values in [0, 1): |error| in units of u S: "
      + ", ".join(f"{k} {v / (u32 * exact):.2f}" for k, v in errors.items()))

tiny = np.array([1.0] + [1e-8] * 10_000, dtype=np.float32)
assert numerics.naive_sum(tiny) == 1.0  # every 1e-8 is rounded away
assert abs(float(numerics.kahan_sum(tiny)) - numerics.exact_sum(tiny)) <= 2 * u32 * numerics.exact_sum(tiny)
print(f"1 + 10^4 x 1e-8: exact {numerics.exact_sum(tiny):.7f}, naive {numerics.naive_sum(tiny):.7f}, "
      f"pairwise {numerics.pairwise_sum(tiny):.7f}, Kahan {numerics.kahan_sum(tiny):.7f}")

# %% [markdown]
# ## 5. The production libraries: NumPy, Python, PyTorch, SciPy, and the all-reduce
#
# The same facts, checked on the tools the chapters use. `np.sum` is pairwise (in blocks of 128 with
# eight running sums, so its bound is about $(128 + \log_2 n)\,u\,S$), `np.cumsum` is strictly left to
# right, and `math.fsum` is exact up to its one final rounding, which we confirm against rational
# arithmetic (`fractions.Fraction`). PyTorch's CPU `sum` also uses a cascade. SciPy's sparse
# eigensolver finds a large ring's $\lambda_2$ without a dense matrix, and its SVD agrees with NumPy's.

# %%
import torch  # noqa: E402

S = exact  # all values are positive: S = sum |x_i| = the sum
blocked = (128 + math.ceil(math.log2(N_SUM))) * u32 * S
np_err = abs(float(np.sum(values)) - exact)
torch_err = abs(float(torch.from_numpy(values).sum()) - exact)
assert np_err <= blocked and torch_err <= blocked
assert np.cumsum(values, dtype=np.float32)[-1] == numerics.naive_sum(values)
assert errors["naive"] > max(np_err, torch_err)  # both libraries beat left-to-right summation
few = values[:2000]
assert math.fsum(few.tolist()) == float(sum(Fraction(float(v)) for v in few))  # fsum = exact, rounded once
print(f"|error| / (u S): np.sum {np_err / (u32 * S):.2f}, torch.sum {torch_err / (u32 * S):.2f}, "
      f"naive {errors['naive'] / (u32 * S):.2f}")

n_big = 2000
Lsp = scipy.sparse.csr_matrix(laplacian(datasets.ring_graph(n_big)))
low = np.sort(scipy.sparse.linalg.eigsh(Lsp, k=3, sigma=-1e-3, which="LM", return_eigenvectors=False))
assert np.isclose(low[0], 0, atol=1e-9) and np.allclose(low[1:], 2 - 2 * np.cos(2 * np.pi / n_big), rtol=1e-6)
assert np.allclose(scipy.linalg.svd(M, compute_uv=False), s, rtol=1e-10)
u_r, s_r, vt_r = scipy.sparse.linalg.svds(M, k=r, random_state=SEED)
assert np.isclose(np.linalg.norm(M - (u_r * s_r) @ vt_r, "fro"), tail, rtol=1e-8)
print(f"SciPy eigsh on a ring of {n_big}: lambda_2 = {low[1]:.3e} (closed form {2 - 2 * np.cos(2 * np.pi / n_big):.3e},"
      f" a double eigenvalue); svds rank-{r} error = the SVD tail")

# %% [markdown]
# Now the distributed sum itself: Chapter 4's ring all-reduce (`collectives.ring_allreduce`) on the
# simulated cluster, each rank holding the float32 sum of its shard of `per_example` gradients. All
# ranks must finish with the same bits (every block is reduced once, by one rank, and then copied), the
# result must be within the bound of the exact sum, and changing $K$ changes the bits.

# %%
def reduce_gradients(comm, G):
    lo, hi = collectives.block_range(len(G), comm.size, comm.rank)
    return collectives.ring_allreduce(comm, np.sum(G[lo:hi], axis=0, dtype=np.float32))


exact_vec = np.array([math.fsum(col) for col in per_example.astype(np.float64).T.tolist()])
abs_vec = np.abs(per_example.astype(np.float64)).sum(axis=0)
by_K = {}
for K in KS:
    res = cluster.run(reduce_gradients, K, args=(per_example,), timeout=120)
    assert all(np.array_equal(v, res.values[0]) for v in res.values)  # identical bits on every rank
    assert np.all(np.abs(res.values[0] - exact_vec) <= (len(per_example) + K) * u32 * abs_vec)
    by_K[K] = res.values[0]
changed = {K: np.mean(by_K[K] != by_K[1]) for K in KS}
assert all(changed[K] > 0.05 for K in KS if K > 1)
print("entries that differ from the K=1 result: " + ", ".join(f"K={K}: {v:.0%}" for K, v in changed.items()))

# %% [markdown]
# ## 6. Failure modes: cancellation, range, and underflowing gradients
#
# ### Catastrophic cancellation in a variance
# $\mathrm{Var}(x) = \mathbb{E}[x^2] - \mathbb{E}[x]^2$ subtracts two large, nearly equal numbers; each
# carries a rounding error of about $u\,\mathbb{E}[x^2]$, so the relative error of the difference is
# about $u\,(1 + \bar x^2/\mathrm{Var})$. It is tempting in a distributed setting because each worker
# then only sends $(n_k, \sum x, \sum x^2)$, sufficient statistics that add up (Chapter 12). The cure
# is to send $(n_k, \bar x_k, M_{2,k})$ with $M_2 = \sum (x - \bar x)^2$ and merge pairs with Chan,
# Golub and LeVeque's rule $M_2 = M_{2,a} + M_{2,b} + \delta^2 n_a n_b / (n_a + n_b)$, $\delta = \bar x_b -
# \bar x_a$: as associative as the naive sums, and stable.

# %%
data = (1e4 + rng.standard_normal(50_000)).astype(np.float32)  # mean 10^4, standard deviation 1
true_var = float(np.var(data.astype(np.float64)))
naive_var, two_pass = float(numerics.naive_variance(data)), float(numerics.two_pass_variance(data))


def merge(a, b):
    """Chan-Golub-LeVeque: combine (n, mean, M2) of two disjoint shards."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n, delta = na + nb, mb - ma
    return n, ma + delta * np.float32(nb / n), m2a + m2b + delta * delta * np.float32(na * nb / n)


for K in KS:
    stats = []
    for lo, hi in collectives.block_bounds(len(data), K):
        shard = data[lo:hi]
        mean = numerics.pairwise_sum(shard) / np.float32(len(shard))
        stats.append((len(shard), mean, numerics.pairwise_sum((shard - mean) ** 2)))
    total = stats[0]
    for st in stats[1:]:
        total = merge(total, st)
    assert abs(float(total[2]) / total[0] / true_var - 1) < 1e-4, K
assert abs(naive_var / true_var - 1) > 0.1 and abs(two_pass / true_var - 1) < 1e-4
print(f"variance, float32, mean 1e4: true {true_var:.5f}, E[x^2]-E[x]^2 {naive_var:.5f}, two-pass {two_pass:.5f}, "
      f"merged over K={KS[-1]} shards {float(total[2]) / total[0]:.5f}")

# %% [markdown]
# ### Ranges of the 16-bit formats, and why loss scaling exists
# float16 has 5 exponent bits: nothing above 65504, normal numbers down to $6.1\times10^{-5}$ and
# subnormals down to $6\times10^{-8}$. bfloat16 keeps float32's 8 exponent bits (the same range) and
# only 8 significand bits, so it rarely overflows but rounds coarsely: counting by ones stops at 256,
# where float16 stops at 2048. Gradients are often tiny, so in float16 many would flush to zero. Mixed
# precision (Chapter 15, and Chapter 19 at scale) keeps float32 master weights, multiplies the loss by
# a scale $2^k$ so that the float16 gradients land in range, divides by $2^k$ in float32, and adjusts
# $k$: halve on an overflow (skip that step), double after a run of good steps.

# %%
f16, f32 = np.finfo(np.float16), np.finfo(np.float32)
bf16, t16 = torch.finfo(torch.bfloat16), torch.finfo(torch.float16)
for name, fi in (("float16", f16), ("bfloat16", bf16), ("float32", f32)):
    print(f"{name:>9}: max {float(fi.max):.3e}, smallest normal {float(fi.tiny):.3e}, eps {float(fi.eps):.3e}")
assert float(f16.max) == 65504 == t16.max and float(f16.eps) == 2 ** -10 and bf16.eps == 2 ** -7
assert bf16.max / float(f32.max) > 0.99  # bfloat16 has float32's range
assert numerics.naive_sum(np.ones(3000, np.float16)) == 2048 and numerics.kahan_sum(np.ones(3000, np.float16)) == 3000
count = torch.zeros((), dtype=torch.bfloat16)
for _ in range(300):
    count += 1
assert count.item() == 256  # 256 + 1 rounds back to 256 in bfloat16
g_small = np.float32(1e-8)
assert np.float16(g_small) == 0 and np.float16(g_small * 2 ** 14) > 0  # lost without a scale, kept with one

# %% [markdown]
# PyTorch's `GradScaler` runs the dynamic rule. The parameters are float32 master weights, the forward
# pass computes in float16, and the gradients of the two entries are $10^{-8}$ (underflows in float16)
# and $2$ (overflows once multiplied by $2^{15}$). The first step overflows and is skipped, the scale
# halves, and the second step's unscaled float32 gradients are the true ones to float16 precision.

# %%
param = torch.nn.Parameter(torch.zeros(2))
opt = torch.optim.SGD([param], lr=1.0)
weights = torch.tensor([1e-8, 2.0])


def loss_fn():
    return ((param + 1).half().float() * weights).sum()  # the activation passes through float16


loss_fn().backward()
assert param.grad[0] == 0  # unscaled: the 1e-8 gradient flushed to zero on its way through float16
opt.zero_grad()
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 15)
history = []
for step in range(2):
    opt.zero_grad()
    scaler.scale(loss_fn()).backward()
    scaler.unscale_(opt)
    history.append((scaler.get_scale(), param.grad.clone()))
    scaler.step(opt)
    scaler.update()
assert not torch.isfinite(history[0][1]).all() and history[1][0] == 2.0 ** 14  # overflow, skip, halve
assert torch.allclose(history[1][1], weights, rtol=2 ** -10, atol=0)  # both gradients survive, unscaled
print(f"scale {history[0][0]:.0f}: gradient {history[0][1].tolist()} (step skipped); scale {history[1][0]:.0f}: "
      f"gradient {history[1][1].tolist()}")

# %% [markdown]
# ## 7. Measurements: the bounds against what happens
#
# Four measurements, each against its formula: the error of each summation as $n$ grows (naive grows,
# pairwise barely, Kahan not at all), the spread of one float32 sum over every shard order tried as
# $K$ grows, the steps of gradient descent against the condition number (Section 2), and the variance
# of the mini-batch gradient against $B$ (Section 3).

# %%
length_rows = []
for n_len in LENGTHS:
    rows = []
    for rep in range(5):  # five data sets per length: one draw is noisy
        v = np.random.default_rng(SEED + 10 * n_len + rep).uniform(0, 1, n_len).astype(np.float32)
        ex = numerics.exact_sum(v)
        row = {m: abs(float(getattr(numerics, f"{m}_sum")(v)) - ex) / (u32 * ex) for m in ("naive", "pairwise", "kahan")}
        row["np.sum"] = abs(float(np.sum(v)) - ex) / (u32 * ex)
        assert row["naive"] <= n_len - 1 and row["pairwise"] <= math.ceil(math.log2(n_len))
        assert row["kahan"] <= 2 + 2 * n_len * u32
        rows.append(row)
    length_rows.append((n_len, {m: float(np.mean([rw[m] for rw in rows])) for m in rows[0]}))
assert length_rows[-1][1]["naive"] > length_rows[-1][1]["pairwise"]

spread_rows = []
for K in KS:
    results = {float(numerics.tree_sum(values, K, order=o, first=f)) for o in ("ring", "tree")
               for f in range(K)}
    for j in range(ORDERS):  # shards added in a random order: the order a dynamic reduction might pick
        perm = np.random.default_rng(SEED + 1000 * K + j).permutation(K)
        parts = [numerics.naive_sum(values[lo:hi]) for lo, hi in collectives.block_bounds(N_SUM, K)]
        results.add(float(numerics.naive_sum(np.array([parts[p] for p in perm], dtype=np.float32))))
    ulp = float(np.spacing(np.float32(exact)))
    spread_rows.append((K, (max(results) - min(results)) / ulp, len(results)))
    assert (max(results) - min(results)) <= 2 * numerics.sum_error_bound(values, "tree", K=K, order="ring")
assert spread_rows[0][1] == 0 and max(sp for _, sp, _ in spread_rows) > 0  # one worker: one order, one answer
for K, sp, distinct in spread_rows:
    print(f"K={K:3d}: {distinct:2d} distinct float32 results, spread {sp:5.0f} ulp")

fig, ax = plt.subplots(2, 2, figsize=(11, 8))
ns = [nl for nl, _ in length_rows]
for method, mark in (("naive", "o-"), ("pairwise", "s-"), ("kahan", "^-"), ("np.sum", "x-")):
    ax[0, 0].loglog(ns, [max(rw[method], 1e-2) for _, rw in length_rows], mark, label=method)
ax[0, 0].loglog(ns, [nl - 1 for nl in ns], "k:", label="bound n-1")
ax[0, 0].loglog(ns, [math.log2(nl) for nl in ns], "k--", label="bound log2 n")
ax[0, 0].set(xlabel="n values (float32)", ylabel="mean |error| / (u S)", title="summation error (0 drawn at 0.01)")
ax[0, 0].legend(fontsize=8)
ax[0, 1].plot([k for k, _, _ in spread_rows], [sp for _, sp, _ in spread_rows], "o-")
ax[0, 1].set(xscale="log", xlabel="workers K", ylabel="max - min over orders (ulp)",
             title=f"one sum of {N_SUM} float32 values, many orders")
kap = [row[0] for row in gd_rows]
ax[1, 0].loglog(kap, [row[1] for row in gd_rows], "o", label="eta = 2/(mu+Lambda), measured")
ax[1, 0].loglog(kap, [row[2] for row in gd_rows], "k--", label="bound from (kappa-1)/(kappa+1)")
ax[1, 0].loglog(kap, [row[3] for row in gd_rows], "s", label="eta = 1/Lambda, measured")
ax[1, 0].loglog(kap, [row[4] for row in gd_rows], "k:", label="bound from 1 - 1/kappa")
ax[1, 0].set(xlabel="condition number kappa", ylabel=f"steps to {TOL:g} relative error", title="gradient descent")
ax[1, 0].legend(fontsize=8)
ax[1, 1].loglog([b for b, _ in var_rows], [v for _, v in var_rows], "o", label="measured")
ax[1, 1].loglog([b for b, _ in var_rows], [sigma2 / b for b, _ in var_rows], "k--", label="sigma^2 / B")
ax[1, 1].set(xlabel="batch size B", ylabel="E ||g_hat - g||^2", title="mini-batch gradient variance")
ax[1, 1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the plots as the table of Section 4 predicted: on positive values the naive sum's error grows
# roughly like $\sqrt n$ (a random walk under its linear bound), while pairwise, `np.sum` and Kahan sit
# at the floor of about one $u S$: the answer must itself be a float32, so rounding the exact sum once
# is the best any method can do. One worker gives one answer, and so do two (one addition
# of two partial sums, and addition is commutative); from three workers on the orders give different
# answers, a few units in the last place apart and well within the bound. The gradient-descent steps sit on their bounds because we
# started where the bounds are attained, and the variance follows $\sigma^2/B$ over the whole range.
#
# ## 8. Exercises
#
# 1. **Spectral gaps.** Replace the ring by a 2-D torus (`datasets.grid_graph`) and a complete graph.
#    Derive $\lambda_2$ for the torus from the ring's (the torus Laplacian is a Kronecker sum), check it
#    numerically, and compare the gossip steps to $10^{-6}$ disagreement for $n = 64$ nodes on all three.
# 2. **PowerSGD without a warm start.** Draw a fresh random $Q$ at every step instead of reusing it.
#    How far above the SVD tail does the error stay? What does error feedback (Chapter 10) do about it?
# 3. **Critical batch size.** With the regression of Section 3, run SGD with $B \in \{1, 4, 16, 64\}$
#    and $\eta$ scaled linearly with $B$. Up to which $B$ do the steps to a fixed accuracy fall like
#    $1/B$? Relate the answer to $\sigma^2$ and $\|g\|^2$.
# 4. **Reproducible sums.** Make a float32 sum give the same bits for every $K$ and order: for example,
#    round every value to a multiple of a common power of two before adding (so that every partial sum
#    is exact), or accumulate in an integer. What is the accuracy cost, and when does it overflow?
# 5. **A weighted $\alpha$-$\beta$ fit.** Repeat the fit of Section 3 with 20 % jitter and with one
#    outlier time 10 times too large. Which of the ordinary, the relative, and a robust (median-based)
#    fit recovers $\alpha$? Then fit $\alpha$ and $\beta$ from `cluster.run(..., backend="process")`.
# 6. **Sizing a pool with Erlang C.** Requests arrive at $\lambda = 10$ per second and a replica serves
#    $\mu = 1$ per second. Find the smallest number of replicas $c$ for which at most 10 % of requests
#    wait, and check it (and that $c - 1$ fails) with the simulator of Section 3. How does the spare
#    capacity $c - a$ needed for the same promise grow when the load is multiplied by 4 ($\lambda = 40$)?
#    Compare with the square-root staffing rule $c \approx a + \beta_s \sqrt{a}$.
#
# ## 9. Research directions
#
# - **Reproducible reductions at scale.** Bitwise-identical results across worker counts and reduction
#   orders would make debugging and auditing large runs far easier, but the known methods (pre-rounding
#   to a common exponent, long accumulators) cost extra passes or bandwidth, and GPU collectives pick
#   their algorithms at run time. A reproducible all-reduce as fast as the fastest one does not exist.
#   - Demmel and Nguyen, "Fast Reproducible Floating-Point Summation", IEEE Symposium on Computer
#     Arithmetic (ARITH), 2013. Summation whose result does not depend on the order, in one pass.
#   - Higham, "The Accuracy of Floating Point Summation", SIAM Journal on Scientific Computing, 1993. The
#     error analysis of recursive, pairwise and compensated summation used in this appendix.
#   - Yuan et al., "Understanding and Mitigating Numerical Sources of Nondeterminism in LLM Inference",
#     NeurIPS, 2025. Measures how the reduction order, set by batch size and GPU count, changes the greedy
#     outputs of a model in bfloat16, and how far fp32 arithmetic restores repeatability.
# - **How few bits can training use?** bfloat16 and float16 with loss scaling are routine, and 8-bit
#   floating-point formats are being adopted, but which operations need which precision, and how to scale
#   each tensor without overflow, is settled by experiment rather than theory.
#   - Micikevicius et al., "Mixed Precision Training", ICLR, 2018. Float32 master weights, float16
#     arithmetic and loss scaling: the recipe of Section 6.
#   - Micikevicius et al., "FP8 Formats for Deep Learning", arXiv preprint, 2022. Two 8-bit formats and
#     per-tensor scaling for training and inference.
#   - Rouhani et al., "Microscaling Data Formats for Deep Learning", arXiv preprint, 2023. One shared scale
#     per small block of values lets the elements use 8, 6 or 4 bits, enough to train language models with
#     sub-8-bit weights, activations and gradients.
# - **Batch size and gradient noise.** The variance $\sigma^2/B$ explains why larger batches allow larger
#   steps, but not exactly where the benefit stops; predicting the critical batch size of a model before
#   training it would size clusters (Chapters 15 and 19).
#   - McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch Training", arXiv preprint,
#     2018. The gradient noise scale as a predictor of the largest useful batch.
#   - Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour", arXiv preprint, 2017.
#     Linear learning-rate scaling with warm-up, and where it breaks.
#   - Zhang et al., "How Does Critical Batch Size Scale in Pre-training?", ICLR, 2025. Measures the
#     critical batch size of language models from 85 million to 1.2 billion parameters and finds that it
#     grows with the amount of training data rather than with model size.
# - **Tight privacy accounting.** The classical Gaussian calibration overstates the noise needed, and
#   composing many noisy steps loses more; exact accounting for subsampled, adaptively composed
#   mechanisms in federated settings remains an active topic (Chapters 14 and 35).
#   - Balle and Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical Calibration
#     and Optimal Denoising", ICML, 2018. The exact condition solved in Section 3.
#   - Abadi et al., "Deep Learning with Differential Privacy", ACM CCS, 2016. DP-SGD and the moments
#     accountant.
#   - Ponomareva et al., "How to DP-fy ML: A Practical Guide to Machine Learning with Differential
#     Privacy", arXiv preprint, 2023. A practical guide to DP training: choosing the unit of privacy,
#     accounting for sampling, tuning, and reporting the guarantee so that results can be compared.
#
# ## What's next
#
# Appendix B (Companion cluster lab) runs one ring all-reduce at every scale, from the simulator to
# Slurm and Ray; its reproducibility checklist is where the floating-point lessons of Sections 4 to 7
# become rules. The chapters that lean hardest on this appendix are Chapter 3 (Performance models) for
# the $\alpha$-$\beta$ fit, Chapter 10 (Distributed optimization) for conditioning, SGD and PowerSGD,
# Chapter 14 (Federated and decentralized learning) for spectral gaps and the Gaussian mechanism, and
# Chapter 15 (Data parallelism) for $B = K b$ and mixed precision. Parts VI and VII use the later subsections
# of Section 3: Chapter 28 (Game theory) solves zero-sum games as the linear programs shown there,
# Chapters 20 and 30 build on the Bellman equations, Chapters 23 and 33 size servers and queues with the
# M/M/$c$ formulas, and Chapters 14 and 35 account privacy in Rényi divergence.
