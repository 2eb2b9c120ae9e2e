# %% [markdown]
# # Appendix A solutions: Mathematical background
#
# Worked solutions to the exercises of `chapters/appendix-a-mathematical-background` (the instructor's
# manual, never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import math
import time

import numpy as np
from scipy.optimize import linprog
from threadpoolctl import threadpool_limits

from scaleoutai import cluster, collectives, datasets, perf
from scaleoutai.perf import numerics

threadpool_limits(limits=1)  # small matrices: one BLAS thread is faster, and the machine is shared
SEED = 0
gen = np.random.default_rng(SEED)


def graph_laplacian(nbrs):
    """Degree matrix minus adjacency, from neighbour lists (a dense n x n array)."""
    size = len(nbrs)
    out = np.zeros((size, size))
    for i, row in enumerate(nbrs):
        out[i, row] = -1.0
        out[i, i] = len(row)
    return out


# %% [markdown]
# ## Exercise 1 (coding): spectral gaps of the ring, the torus and the complete graph
#
# **Answer** for $n = 64$ nodes, gossip $x \leftarrow (I - \gamma L_G)x$ with the usual safe step
# $\gamma = 1/(d_{\max} + 1)$ ($1/3$ on the ring, as in the appendix; $1/5$ on the torus; $1/64$ on the
# complete graph):
#
# | graph | $\lambda_2$ | $\lambda_n$ | $\rho$ | steps to $10^{-6}$ | messages per step |
# |---|---|---|---|---|---|
# | ring, 64 | $2-2\cos(2\pi/64) \approx 0.00963$ | 4 | 0.99679 | 3939 (bound 4297) | $2n = 128$ |
# | torus $8\times8$ | $2-2\cos(2\pi/8) \approx 0.586$ | 8 | 0.883 | 104 (bound 111) | $4n = 256$ |
# | complete | 64 | 64 | 0 | 1 | $n(n-1) = 4032$ |
#
# **Derivation (torus).** Number the node in row $a$, column $c$ of an $r \times c$ torus as $a\,c_{\rm cols} + c$.
# Its edges are the horizontal ring inside each row plus the vertical ring inside each column, so
# $L_{\rm torus} = L_{\rm ring}(r) \otimes I_{c} + I_{r} \otimes L_{\rm ring}(c)$, a Kronecker sum. If
# $L_r u = \lambda u$ and $L_c v = \mu v$ then $(L_r \otimes I + I \otimes L_c)(u \otimes v) = (\lambda +
# \mu)(u \otimes v)$, and the $rc$ products $u \otimes v$ form a basis: the torus spectrum is every sum
# $\lambda_i(r) + \lambda_j(c)$. The smallest nonzero sum puts 0 in one factor and the ring gap in the
# other, so $\lambda_2 = 2 - 2\cos(2\pi/\max(r, c))$; the largest is $\lambda_n = 4 + 4 = 8$ for even sides.
# For the complete graph $L = nI - \mathbf{1}\mathbf{1}^\top$: every vector orthogonal to $\mathbf 1$ has
# eigenvalue $n$, so $\lambda_2 = \lambda_n = n$.
#
# **Steps.** The disagreement shrinks by $\rho = \max(|1 - \gamma\lambda_2|, |1 - \gamma\lambda_n|)$ per step,
# so $t \le \lceil \ln 10^{-6} / \ln \rho \rceil$. With $\gamma = 1/(d+1)$ the ring's and torus's $\rho$ is
# set by $\lambda_2$ ($1 - \gamma\lambda_n = -1/3$ and $-3/5$ are smaller in size), and on the complete graph
# $\gamma n = 1$ makes $I - \gamma L = \mathbf 1\mathbf 1^\top/n$, the exact average in one step. Going from
# the ring's $\lambda_2 \approx (2\pi/n)^2$ to the torus's $(2\pi/\sqrt n)^2$ is the $n$-fold gain of a
# two-dimensional layout: about 40 times fewer steps for only twice the messages per step, and
# about 20 times fewer messages in total than the ring ($3939 \cdot 128 \approx 5.0\cdot10^5$ against $104 \cdot 256
# \approx 2.7 \cdot 10^4$). The complete graph needs the fewest messages of all (4032), but every node then
# talks to all 63 others in one round, which is an all-reduce done the expensive way: per-node traffic, not
# the step count, is the cost that rules it out at scale.
#
# **Check.** The code builds the three Laplacians with the library's generators, compares the torus
# spectrum with the sorted Kronecker sums and with `np.kron`, then runs gossip from a random start and
# counts the steps; the count must lie between the upper bound above and a lower bound from the start's
# component on the slowest eigenspace, $\|x_t - \bar x\| \ge \rho_2^t \|\Pi_2 x_0\|$.

# %%
N_NODES, SIDE, TOL = 64, 8, 1e-6
ring_l = graph_laplacian(datasets.ring_graph(N_NODES))
torus_l = graph_laplacian(datasets.grid_graph(SIDE, SIDE))
full_l = graph_laplacian(datasets.complete_graph(N_NODES))

ring8 = graph_laplacian(datasets.ring_graph(SIDE))
np.testing.assert_allclose(torus_l, np.kron(ring8, np.eye(SIDE)) + np.kron(np.eye(SIDE), ring8))
ring8_eig = 2 - 2 * np.cos(2 * np.pi * np.arange(SIDE) / SIDE)
kron_sums = np.sort(np.add.outer(ring8_eig, ring8_eig).ravel())
np.testing.assert_allclose(np.linalg.eigvalsh(torus_l), kron_sums, atol=1e-10)
assert np.isclose(kron_sums[1], 2 - 2 * np.cos(2 * np.pi / SIDE)) and np.isclose(kron_sums[-1], 8)
np.testing.assert_allclose(np.linalg.eigvalsh(full_l)[1:], N_NODES, rtol=1e-12)

x_start = gen.standard_normal(N_NODES)
gossip_rows = []
for name, lap in (("ring", ring_l), ("torus 8x8", torus_l), ("complete", full_l)):
    eigval, eigvec = np.linalg.eigh(lap)
    gamma = 1.0 / (np.max(np.diag(lap)) + 1)
    rho = max(abs(1 - gamma * eigval[1]), abs(1 - gamma * eigval[-1]))
    upper = 1 if rho < 1e-12 else math.ceil(math.log(TOL) / math.log(rho))
    slow = np.isclose(eigval, eigval[1])  # the lambda_2 eigenspace (double on ring and torus)
    dev0 = x_start - x_start.mean()
    slow_part = np.linalg.norm(eigvec[:, slow].T @ x_start)
    mixer, xt, steps = np.eye(N_NODES) - gamma * lap, x_start.copy(), 0
    while np.linalg.norm(xt - xt.mean()) > TOL * np.linalg.norm(dev0):
        xt, steps = mixer @ xt, steps + 1
    assert np.isclose(xt.mean(), x_start.mean())  # gossip keeps the average
    assert steps <= upper
    if rho > 1e-12:
        rho2 = abs(1 - gamma * eigval[1])
        lower = math.log(TOL * np.linalg.norm(dev0) / slow_part) / math.log(rho2)
        assert steps >= math.floor(lower)
    edges_per_step = int(np.trace(lap))  # sum of degrees = messages per gossip round
    gossip_rows.append((name, eigval[1], rho, steps, edges_per_step))
    print(f"{name:>10}: lambda_2 = {eigval[1]:.5f}, rho = {rho:.5f}, steps {steps:5d} (bound {upper}), "
          f"{edges_per_step} messages per step, {steps * edges_per_step:,} in all")
assert gossip_rows[0][3] > 30 * gossip_rows[1][3] > 30 * gossip_rows[2][3]

# %% [markdown]
# ## Exercise 2 (analysis): PowerSGD with a fresh random $Q$ every step
#
# **Answer.** Without the warm start every step is one power iteration from scratch: $P$ spans the range
# of $MQ$ for a fresh Gaussian $Q$, and the transmitted matrix is $PP^\top M$, a randomized range finder
# with no oversampling. The error never goes below the SVD tail $\|M - M_r\|_F$ (Eckart-Young), it does
# not improve over time (the steps are independent and identically distributed), and on the appendix's
# $1/i$ spectrum it stays near **1.5 times the tail** on average (between about 1.2 and 2.1 over 200 draws).
# Warm-started, the same iteration reaches the tail to 1 % within 30 steps, which is why PowerSGD reuses $Q$.
#
# **Why it stays above.** Halko, Martinsson and Tropp bound the randomized range finder: with $r + p$
# Gaussian columns, $\mathbb{E}\|M - PP^\top M\|_F \le (1 + r/(p-1))^{1/2}\,(\sum_{i>r}\sigma_i^2)^{1/2}$ for
# $p \ge 2$. With $p = 0$ no such bound exists (a random $r$-column $Q$ can be nearly orthogonal to the top
# singular vectors), and the error keeps a factor above one; with two or four extra columns the mean error
# is below $\sqrt 5 \approx 2.24$ and $\sqrt{7/3} \approx 1.53$ times the tail. The warm start is $r$ more steps
# of subspace iteration every step: $Q$ converges to the top right singular vectors at the rate
# $(\sigma_{r+1}/\sigma_r)^t$, so the error converges to the tail.
#
# **Error feedback.** Chapter 10's error feedback keeps what compression dropped, $e_t = x_t - C(x_t)$ with
# $x_t = M + e_{t-1}$, and adds it to the next step. Summing, $\sum_{t=1}^T C(x_t) = T M - e_T$ exactly
# (a telescoping sum), so the average of what was sent differs from the true gradient by $e_T / T$. If the
# compressor keeps a fraction of the energy, $\|x - C(x)\| \le q\|x\|$ with $q < 1$, then $\|e_t\| \le q(\|M\|
# + \|e_{t-1}\|)$ and the memory stays bounded by $q\|M\|/(1-q)$: the bias of the fresh-$Q$ compressor
# is repaid over steps instead of accumulating. Without feedback the average of the sends stays biased toward
# the top-$r$ subspace (about 40 % relative error here); with it the error of the average falls like $1/T$.

# %%
ROWS, COLS, RANK = 200, 100, 4
left_basis = np.linalg.qr(gen.standard_normal((ROWS, COLS)))[0]
right_basis = np.linalg.qr(gen.standard_normal((COLS, COLS)))[0]
grad_m = left_basis @ np.diag(1.0 / np.arange(1, COLS + 1)) @ right_basis.T
sing = np.linalg.svd(grad_m, compute_uv=False)
svd_tail = math.sqrt(np.sum(sing[RANK:] ** 2))


def power_compress(mat, q_cols):
    """One PowerSGD round: P = orth(M Q), Q' = M^T P; the receiver rebuilds P Q'^T."""
    p_mat = np.linalg.qr(mat @ q_cols)[0]
    q_new = mat.T @ p_mat
    return p_mat @ q_new.T, q_new


DRAWS_FRESH = 200
fresh = np.array([np.linalg.norm(grad_m - power_compress(grad_m, gen.standard_normal((COLS, RANK)))[0])
                  for _ in range(DRAWS_FRESH)])
assert fresh.min() >= svd_tail * (1 - 1e-12)  # Eckart-Young: nothing of rank r beats the tail
half = DRAWS_FRESH // 2
se = fresh.std() * math.sqrt(2 / half)
assert abs(fresh[:half].mean() - fresh[half:].mean()) < 4 * se  # independent steps: no improvement over time
for extra in (2, 4):  # Halko-Martinsson-Tropp with p = extra oversampling columns
    over = [np.linalg.norm(grad_m - power_compress(grad_m, gen.standard_normal((COLS, RANK + extra)))[0])
            for _ in range(100)]
    assert np.mean(over) <= math.sqrt(1 + RANK / (extra - 1)) * svd_tail

q_warm = gen.standard_normal((COLS, RANK))
for _ in range(30):
    approx, q_warm = power_compress(grad_m, q_warm)
warm_err = np.linalg.norm(grad_m - approx)
assert warm_err <= 1.01 * svd_tail < fresh.min()

T_EF = 200
memory, sent_ef, sent_plain, ratios = np.zeros_like(grad_m), np.zeros_like(grad_m), np.zeros_like(grad_m), []
for _ in range(T_EF):
    boosted = grad_m + memory
    out = power_compress(boosted, gen.standard_normal((COLS, RANK)))[0]
    ratios.append(np.linalg.norm(boosted - out) / np.linalg.norm(boosted))
    memory = boosted - out
    sent_ef += out
    sent_plain += power_compress(grad_m, gen.standard_normal((COLS, RANK)))[0]
np.testing.assert_allclose(sent_ef, T_EF * grad_m - memory, atol=1e-9)  # the telescoping identity
q_max = max(ratios)
assert q_max < 1 and np.linalg.norm(memory) <= q_max * np.linalg.norm(grad_m) / (1 - q_max)
bias_ef = np.linalg.norm(sent_ef / T_EF - grad_m) / np.linalg.norm(grad_m)
bias_plain = np.linalg.norm(sent_plain / T_EF - grad_m) / np.linalg.norm(grad_m)
assert np.isclose(bias_ef, np.linalg.norm(memory) / T_EF / np.linalg.norm(grad_m)) and bias_ef < bias_plain / 5
print(f"fresh Q: error / tail mean {fresh.mean() / svd_tail:.3f} (min {fresh.min() / svd_tail:.3f}, max "
      f"{fresh.max() / svd_tail:.3f}); warm start after 30 steps {warm_err / svd_tail:.4f}")
print(f"average of {T_EF} sends vs the gradient: without feedback {bias_plain:.1%}, with error feedback {bias_ef:.1%}")

# %% [markdown]
# ## Exercise 3 (analysis): the critical batch size of the Section 3 regression
#
# **Answer.** On `datasets.linear_regression(2000, 5, noise=0.5, seed=0)`, starting at $w = 0$ and asking
# for an expected loss gap $\mathbb{E}F(w_t) - F^* \le 0.02$, with $\eta_B = \min(B\eta_1, \eta_{\max})$, the
# steps are 113, 28, 7 and 3 for $B = 1, 4, 16, 64$: $B \cdot t$ = 113, 112, 112, **192**. The steps fall like
# $1/B$ up to $B = 16$, and the rule breaks between 16 and 64. The break sits at the gradient noise scale
#
# $$B_{\rm noise} = \frac{\sigma^2}{\|g\|^2} \approx \frac{\sigma_*^2}{2\varepsilon} \approx 32,$$
#
# with $\sigma^2$ the per-example gradient variance of the appendix (near $w^*$ it is $\sigma_*^2 \approx
# 1.27$, the label noise $0.25$ times $d = 5$) and $\|g\|^2 \approx 2\varepsilon$ the squared full gradient at
# the target (the Hessian $X^\top X/N$ has eigenvalues 0.91 to 1.09, so $\|g\|^2 = (w-w^*)^\top H^2 (w - w^*)
# \approx 2(F - F^*)$). Tighter targets raise $B_{\rm noise}$ and the critical batch with it: the table in
# the output shows the largest batch that still scales ($B t \le 1.25\,t_1$) at 8, 16 and 64 for targets
# 0.05, 0.02 and 0.01, where $B_{\rm noise}$ is 13, 32 and 63.
#
# **Derivation.** (i) *Why $1/B$ at small $B$.* SGD with step $\eta$ and batch $B$ has drift $-\eta\nabla F$
# and noise covariance $\eta^2\Sigma/B$ per step. With $\eta = B\eta_1$ both depend on $B$ only through
# $\eta$: per unit of "time" $\tau = t\eta$ the drift is the same and the noise is $\eta_1 \Sigma$ per unit
# time, for every $B$. So the trajectory in $\tau$ is the same, and the steps to reach a given loss are
# $\tau/\eta \propto 1/B$, as long as one step is small against the curvature ($\eta\Lambda \ll 1$).
# (ii) *Where it stops.* McCandlish et al. show that the best step for batch $B$ is $\eta_{\rm opt}(B) =
# \eta_{\max}/(1 + B_{\rm noise}/B)$ with $\eta_{\max} = 1/\Lambda$ on a quadratic: it grows linearly while
# $B \ll B_{\rm noise}$ (noise limits the step) and saturates at $\eta_{\max}$ beyond (curvature limits it).
# Starting from $\eta_1 = \eta_{\rm opt}(1)$ and scaling linearly reaches $\eta_{\max}$ exactly at $B = 1 +
# B_{\rm noise}$; past it the step cannot grow (uncapped, $\eta > 2/\Lambda$ diverges) and more examples per
# step buy almost nothing. (iii) *A floor that proves it.* For least squares, the mean iterate follows full-batch
# gradient descent exactly ($\mathbb{E}\,w_{t+1} = \mathbb{E}\,w_t - \eta H(\mathbb{E}\,w_t - w^*)$, since the
# mini-batch gradient is linear in $w$ and unbiased), and by Jensen $\mathbb{E}F(w_t) - F^* \ge
# F(\mathbb{E}w_t) - F^*$. So no batch size can beat the steps of gradient descent at the same $\eta$: at
# $\eta_{\max}$ that floor is 2 steps, and $t_1/64 \approx 1.8$ is below it.
#
# **How the code gets exact steps.** Monte Carlo step counts are noisy, so the code propagates the exact
# first and second moments of the error $e = w - w^*$ under sampling with replacement: with $A_i = x_i
# x_i^\top$, $b_i = x_i \rho_i$ ($\rho_i$ the residual at $w^*$, so $\sum_i b_i = 0$),
#
# $$m' = (I - \eta H)m, \quad S' = (I-\eta H)S(I-\eta H) + \frac{\eta^2}{B}\Big(\overline{A S A} - \overline{A m b^\top}
# - \overline{b m^\top A} + \overline{b b^\top} - HSH\Big),$$
#
# and $\mathbb{E}F - F^* = \tfrac12\operatorname{tr}(HS)$. A 400-run Monte Carlo of real SGD checks the recursion.

# %%
Xr, yr, _ = datasets.linear_regression(2000, 5, noise=0.5, seed=SEED)
n_ex, dim = Xr.shape
hess = Xr.T @ Xr / n_ex
w_opt = np.linalg.lstsq(Xr, yr, rcond=None)[0]
resid = yr - Xr @ w_opt
b_rows = Xr * resid[:, None]
bb_mean = b_rows.T @ b_rows / n_ex
lam_max = np.linalg.eigvalsh(hess)[-1]
sigma2_star = float(np.mean(np.sum(b_rows ** 2, axis=1)))  # per-example gradient variance at w*
assert np.allclose(b_rows.sum(axis=0), 0, atol=1e-9)  # normal equations: the mean gradient at w* is 0


def expected_gap(batch, eta, eps, max_steps=2000, trace=False):
    """Exact E[F(w_t)] - F* of SGD (batch `batch`, with replacement) from w = 0; steps to reach eps."""
    mean_e = -w_opt.copy()
    second = np.outer(mean_e, mean_e)
    shrink = np.eye(dim) - eta * hess
    gaps = []
    for step in range(1, max_steps + 1):
        quad = np.einsum("id,de,ie->i", Xr, second, Xr)
        asa = (Xr * quad[:, None]).T @ Xr / n_ex
        amb = (Xr * ((Xr @ mean_e) * resid)[:, None]).T @ Xr / n_ex
        noise = asa - amb - amb.T + bb_mean - hess @ second @ hess
        second = shrink @ second @ shrink + eta ** 2 / batch * noise
        mean_e = shrink @ mean_e
        gaps.append(0.5 * np.trace(hess @ second))
        if not trace and gaps[-1] <= eps:
            return step
    return np.array(gaps) if trace else None


def eta_for(batch, eps):
    """Linear scaling from eta_opt(1) = eta_max / (1 + B_noise), capped at eta_max = 1 / Lambda."""
    b_noise = sigma2_star / (2 * eps)
    return min(batch * (1 / lam_max) / (1 + b_noise), 1 / lam_max)


EPS3 = 0.02
steps3 = {b: expected_gap(b, eta_for(b, EPS3), EPS3) for b in (1, 4, 16, 64)}
b_noise3 = sigma2_star / (2 * EPS3)
print(f"target {EPS3}: B_noise = sigma^2 / ||g||^2 = {b_noise3:.1f}; steps {steps3}; "
      f"B * steps {[b * t for b, t in steps3.items()]}")
for b in (4, 16):  # B below B_noise: linear scaling holds (within the integer rounding of the steps)
    assert b < b_noise3 and b * steps3[b] <= 1.1 * steps3[1]
gd_floor = expected_gap(10 ** 15, 1 / lam_max, EPS3)  # B -> infinity: full-batch GD at eta_max
assert steps3[64] >= gd_floor and 64 > b_noise3 and 64 * steps3[64] > 1.5 * steps3[1]
assert steps3[1] / 64 < gd_floor  # the floor is why 1/B must stop
print(f"full-batch GD at eta_max needs {gd_floor} steps: no batch size can do better; t_1 / 64 = {steps3[1] / 64:.2f}")

# Monte Carlo of real SGD against the exact recursion (B = 4, 400 runs)
RUNS, B_MC = 400, 4
eta_mc = eta_for(B_MC, EPS3)
exact_curve = expected_gap(B_MC, eta_mc, EPS3, max_steps=30, trace=True)
w_runs = np.zeros((RUNS, dim))
mc_gaps = []
for _ in range(30):
    idx = gen.integers(0, n_ex, size=(RUNS, B_MC))
    xb = Xr[idx]
    w_runs -= eta_mc * np.einsum("rbd,rb->rd", xb, np.einsum("rbd,rd->rb", xb, w_runs) - yr[idx]) / B_MC
    gap_runs = 0.5 * np.einsum("rd,de,re->r", w_runs - w_opt, hess, w_runs - w_opt)
    mc_gaps.append((gap_runs.mean(), gap_runs.std() / math.sqrt(RUNS)))
for t in (0, 9, 29):
    assert abs(mc_gaps[t][0] - exact_curve[t]) <= 4 * mc_gaps[t][1] + 1e-12

for eps in (0.05, 0.02, 0.01):
    b_noise = sigma2_star / (2 * eps)
    table = {2 ** k: expected_gap(2 ** k, eta_for(2 ** k, eps), eps) for k in range(8)}
    critical = max(b for b, t in table.items() if t is not None and b * t <= 1.25 * table[1])
    assert b_noise / 4 <= critical <= 2 * b_noise
    print(f"target {eps}: B_noise {b_noise:5.1f}, largest B with B*t <= 1.25 t_1: {critical:3d}; steps {table}")

# %% [markdown]
# ## Exercise 4 (coding): a float32 sum with the same bits for every $K$ and every order
#
# **Answer.** Two ways, both checked below over $K \in \{1, 2, 3, 5, 8, 16, 32\}$, ring and tree orders and
# every starting shard.
#
# *Pre-rounding (float32 accumulators).* All workers first agree on $M = \max_i |x_i|$ (one max
# all-reduce, a single $\alpha$-sized message) and on $n$, and pick $E = \lceil \log_2(nM) \rceil + 1$ and the
# quantum $q = 2^{E - 24}$. Every value is rounded to a multiple of $q$ before any addition. Each partial sum
# is then an integer multiple of $q$ of size at most $n(M + q/2) \le 2^E = 2^{24} q$, i.e. an integer of at
# most 24 bits times a power of two: exactly representable in float32. Every addition is exact, addition of
# exact values is associative, and every order returns the same bits: the exact sum of the rounded values.
# *Accuracy cost:* each value moves by at most $q/2$, so the error is at most $nq/2 \le 2n^2 M u$ ($u =
# 2^{-24}$), and typically $q\sqrt{n/12}$ (independent roundings). For $10^5$ values in $[0, 1)$, $q = 2^{-6}$:
# a typical relative error of about $3\cdot10^{-5}$, hundreds of times the pairwise sum's. Demmel and
# Nguyen recover the accuracy with two or three such bins at different $E$.
#
# *Integer accumulation (int64).* Convert $x_i \mapsto \mathrm{round}(x_i/q)$ with $q = 2^{E - 62}$, add in
# int64 (exact, associative, any order), convert back once. The error is $nq/2$ plus the final float32
# rounding, i.e. essentially the correctly rounded sum; it costs one extra pass and 8-byte values on the wire.
#
# *Overflow.* The float32 scheme stays exact only while $n \max|x| \le 2^E$: a worker that picks $E$ from its
# own shard's maximum, or data that grows after $E$ is fixed, breaks exactness silently (the bits again depend
# on the order). The int64 scheme overflows when $\sum|x_i|/q \ge 2^{63}$, i.e. when $q$ is fixed in advance
# (a fixed-point format) and the data are larger than planned; NumPy's int64 sum then wraps around without a
# warning. Both therefore need the global range first (the extra collective), and a check $n\max|x| < 2^{63}q$.

# %%
N4 = 100_000
vals4 = gen.uniform(0, 1, N4).astype(np.float32)
KS4 = [1, 2, 3, 5, 8, 16, 32]
u32 = 2.0 ** -24


def pre_rounded(values):
    """Round every value to a multiple of q = 2^(E-24), E = ceil(log2(n max|x|)) + 1; returns (rounded, q)."""
    top = float(np.max(np.abs(values)))  # on a cluster: a max all-reduce before the sum
    expo = math.ceil(math.log2(values.size * top)) + 1
    quantum = 2.0 ** (expo - 24)
    return (np.round(values.astype(np.float64) / quantum) * quantum).astype(np.float32), quantum


def int64_sum(values, K, perm_seed):
    """Fixed-point sum: every shard adds round(x / q) in int64; shard totals added in a random order."""
    top = float(np.max(np.abs(values)))
    quantum = 2.0 ** (math.ceil(math.log2(values.size * top)) + 1 - 62)
    ints = np.round(values.astype(np.float64) / quantum).astype(np.int64)
    assert values.size * (top / quantum + 1) < 2.0 ** 63  # the overflow check
    parts = [ints[lo:hi].sum() for lo, hi in collectives.block_bounds(values.size, K)]
    order = np.random.default_rng(perm_seed).permutation(K)
    total = np.int64(0)
    for k in order:
        total += parts[k]
    return np.float32(float(total) * quantum), quantum


rounded, q4 = pre_rounded(vals4)
plain_bits, pre_bits, int_bits = set(), set(), set()
for K in KS4:
    for order in ("ring", "tree"):
        for first in range(K):
            plain_bits.add(float(numerics.tree_sum(vals4, K, order=order, first=first)))
            pre_bits.add(float(numerics.tree_sum(rounded, K, order=order, first=first)))
    int_bits.update(float(int64_sum(vals4, K, SEED + j)[0]) for j in range(4))
exact4 = numerics.exact_sum(vals4)
exact_rounded = numerics.exact_sum(rounded)
assert len(plain_bits) > 1  # the ordinary float32 sum depends on K and order
assert pre_bits == {exact_rounded}  # one answer: every partial sum was exact
assert len(int_bits) == 1
err_pre = abs(exact_rounded - exact4)
assert err_pre <= N4 * q4 / 2 and err_pre <= 2 * N4 ** 2 * u32  # the derived bound
assert err_pre <= 6 * q4 * math.sqrt(N4 / 12)  # random-walk size, six standard deviations

int_value, q_int = int64_sum(vals4, 5, SEED)
nearest = np.float32(exact4)  # exact4 is float64; the correctly rounded float32 sum
gap_up = float(np.nextafter(nearest, np.float32(np.inf))) - float(nearest)
midpoint_distance = gap_up / 2 - abs(exact4 - float(nearest))
assert N4 * q_int / 2 < midpoint_distance  # int64 error cannot cross a rounding midpoint here
assert int_value == nearest  # so it returns the correctly rounded sum

big = np.full(16, 1e6)  # a fixed-point format chosen in advance, q = 2^-40: the int64 sum wraps
ints_big = np.round(big / 2.0 ** -40).astype(np.int64)
with np.errstate(over="ignore"):
    wrapped = int(ints_big.sum())
assert wrapped != sum(int(v) for v in ints_big) and sum(int(v) for v in ints_big) >= 2 ** 63
print(f"plain float32: {len(plain_bits)} distinct results over K and orders; pre-rounded (q = 2^{math.log2(q4):.0f}): "
      f"{len(pre_bits)}, error {err_pre:.3f} = {err_pre / exact4:.1e} relative; int64: {len(int_bits)}, "
      f"== correctly rounded sum")

# %% [markdown]
# ## Exercise 5 (analysis): ordinary, relative and robust $\alpha$-$\beta$ fits
#
# **Setup.** As in Section 3: $\alpha = 5\,\mu$s, $\beta = 1$ ns/B, three one-way times at each of 15 sizes
# from 1 B to 10 MB, measured on the simulator; then a multiplicative 20 % jitter (log-normal, $s = 0.2$) and one
# time multiplied by 10. Three fits: ordinary least squares (`perf.fit_alpha_beta`), relative least squares
# (each equation divided by its $t_i$), and a robust relative fit, least absolute relative deviation
# $\min \sum_i |t_i - \alpha - \beta m_i| / t_i$ (the conditional median in relative terms; a linear
# program).
#
# **Answer.** With jitter alone and with the slow outlier (on the smallest or on the largest message), the
# relative and the robust fit both recover $\alpha$ (median error 5 to 7 % over 50 jitter draws); the
# ordinary fit never does, even without the outlier. Its $\alpha$ is the intercept of a line whose largest
# points carry absolute errors of $0.2 \times 10$ ms, and its standard error, from the sandwich formula
# $\mathrm{se} = [(A^\top A)^{-1} A^\top \Sigma A (A^\top A)^{-1}]^{1/2}_{11}$ with $\Sigma = \mathrm{diag}(0.2\,t_i)^2$,
# is about 7 times $\alpha$ (45 points cannot average millisecond errors down to microseconds); with the
# outlier on the 10 MB message its $\alpha$ is off by a factor of about 140. The relative fit's standard
# error, $0.2\,[(A_w^\top A_w)^{-1}]_{11}^{1/2}$ with every row divided by $t_i$, is about 4 % of $\alpha$.
#
# Why the relative fit shrugs off a *slow* outlier: it weights each equation by the *measured* $1/t_i$, so a
# time 10 times too large weights itself down tenfold, and its relative residual $|t_i - \hat t_i|/t_i$ is
# below 1 however large $t_i$ gets. The mirror case shows the weakness: a time 10 times too *small* on a
# small message gets ten times the weight and a relative residual of 9, and the relative fit's $\alpha$
# moves by about 80 %. The robust fit (absolute instead of squared relative residuals) caps each point's
# pull and loses only about 18 % there. So: use relative weights for timings (the noise is multiplicative),
# and an absolute-value or median loss when a few measurements may be wrong in either direction; $\beta$ is
# easy for all three (the large messages fix it).
#
# **On real processes.** The last cell ping-pongs between two `cluster.run(..., backend="process")` ranks
# (gloo over loopback) and fits the three. On an idle laptop the student typically sees $\alpha$ of tens to
# hundreds of microseconds (Python, pickling and gloo, not the wire) and a loopback bandwidth of a few GB/s;
# on a loaded machine the small-message times scatter by factors of ten, so the ordinary fit can even
# return a negative $\alpha$ or $\beta$, which is the exercise's point. The one thing we can assert about noisy real
# timings is a property of the estimators: the robust fit minimises the mean absolute relative residual, so
# its mean is never above that of the other two fits.

# %%
A_TRUE, B_TRUE, JITTER = 5e-6, 1e-9, 0.2
sizes5 = np.repeat(np.geomspace(1, 1e7, 15).astype(int), 3)


def timed_sends(comm, sizes):
    """Rank 0 sends each size in turn; rank 1 returns the simulated one-way time of each."""
    times = []
    for nb in sizes:
        if comm.rank == 0:
            comm.send(np.zeros(int(nb), dtype=np.uint8), 1)
            comm.recv(1)  # a tiny ack keeps the messages one at a time
        else:
            start = comm.clock
            comm.recv(0)
            times.append(comm.clock - start)
            comm.send(np.zeros(0, dtype=np.uint8), 0)
    return times


sim5 = cluster.run(timed_sends, 2, args=(sizes5,), network=cluster.Network(alpha=A_TRUE, beta=B_TRUE), timeout=60)
clean5 = np.array(sim5.values[1])
np.testing.assert_allclose(clean5, A_TRUE + B_TRUE * sizes5, rtol=1e-9)


def fit_ordinary(m, t):
    res = perf.fit_alpha_beta(m, t)
    return res.alpha, res.beta


def fit_relative(m, t):
    design = np.column_stack([np.ones(m.size), m]) / t[:, None]
    return tuple(np.linalg.lstsq(design, np.ones(m.size), rcond=None)[0])


def fit_robust(m, t):
    """min sum |t - a - b m| / t as a linear program in (a, b, slack); a and b free.

    Solved in units where the median time and the largest size are 1 (the loss is scale-free), so that
    the solver's absolute tolerances do not swallow a beta of 1e-9 s/B."""
    t_unit, m_unit = float(np.median(t)), float(np.max(m))
    ts, ms = t / t_unit, m / m_unit
    k = m.size
    cost = np.concatenate([[0.0, 0.0], 1.0 / ts])
    rows = np.zeros((2 * k, 2 + k))
    rows[:k, 0], rows[:k, 1], rows[:k, 2:] = -1.0, -ms, -np.eye(k)  # t - a - b m <= s
    rows[k:, 0], rows[k:, 1], rows[k:, 2:] = 1.0, ms, -np.eye(k)  # a + b m - t <= s
    rhs = np.concatenate([-ts, ts])
    sol = linprog(cost, A_ub=rows, b_ub=rhs, bounds=[(None, None)] * 2 + [(0, None)] * k, method="highs")
    assert sol.status == 0
    return sol.x[0] * t_unit, sol.x[1] * t_unit / m_unit


FITS = {"ordinary": fit_ordinary, "relative": fit_relative, "robust": fit_robust}
design_abs = np.column_stack([np.ones(sizes5.size), sizes5.astype(float)])
bread = np.linalg.inv(design_abs.T @ design_abs)
meat = design_abs.T @ np.diag((JITTER * clean5) ** 2) @ design_abs
se_alpha_ols = math.sqrt((bread @ meat @ bread)[0, 0])
design_rel = design_abs / clean5[:, None]
se_alpha_rel = math.sqrt(JITTER ** 2 * np.linalg.inv(design_rel.T @ design_rel)[0, 0])
assert se_alpha_ols > 5 * A_TRUE and se_alpha_rel < 0.1 * A_TRUE

small_i, large_i = 0, sizes5.size - 1
CASES = {"jitter": (None, 1.0), "slow, small msg": (small_i, 10.0), "slow, large msg": (large_i, 10.0),
         "fast, small msg": (small_i, 0.1)}  # the last one is the contrast: 10 times too small
alpha_err = {(case, name): [] for case in CASES for name in FITS}
for draw in range(50):
    noisy = clean5 * np.random.default_rng(SEED + 100 + draw).lognormal(0, JITTER, clean5.size)
    for case, (where, factor) in CASES.items():
        t_case = noisy.copy()
        if where is not None:
            t_case[where] *= factor
        for name, fit in FITS.items():
            alpha_err[case, name].append(abs(fit(sizes5.astype(float), t_case)[0] / A_TRUE - 1))
med = {key: float(np.median(v)) for key, v in alpha_err.items()}
for case in CASES:
    print(f"{case:>16}: median |alpha_hat / alpha - 1|: " + ", ".join(f"{n} {med[case, n]:.2f}" for n in FITS))
    assert med[case, "ordinary"] > 1  # the intercept drowns in the large messages' absolute errors
for case in ("jitter", "slow, small msg", "slow, large msg"):
    assert med[case, "relative"] < 0.1 and med[case, "robust"] < 0.1  # a slow outlier weights itself down
assert med["fast, small msg", "relative"] > 0.2 and med["fast, small msg", "relative"] > 2 * med["fast, small msg", "robust"]


def ping_pong(comm, sizes, reps):
    """Half the round-trip time of each size, measured on rank 0 with the wall clock."""
    out = []
    for nb in sizes:
        payload = np.zeros(int(nb), dtype=np.uint8)
        for _ in range(reps):
            if comm.rank == 0:
                t0 = time.perf_counter()
                comm.send(payload, 1)
                comm.recv(1)
                out.append((nb, (time.perf_counter() - t0) / 2))
            else:
                comm.recv(0)
                comm.send(payload, 0)
    return out


real = np.array(cluster.run(ping_pong, 2, backend="process", args=(np.geomspace(1, 1e6, 7).astype(int), 3),
                            timeout=120, quiet=True).values[0])
m_real, t_real = real[:, 0], real[:, 1]
mean_rel = {}
for name, fit in FITS.items():
    a_hat, b_hat = fit(m_real, t_real)
    mean_rel[name] = float(np.mean(np.abs(t_real - a_hat - b_hat * m_real) / t_real))
    print(f"process backend, {name:>8} fit: alpha {a_hat * 1e6:9.1f} us, beta {b_hat * 1e9:7.3f} ns/B, "
          f"mean |relative residual| {mean_rel[name]:.2f}")
assert all(mean_rel["robust"] <= v * (1 + 1e-6) for v in mean_rel.values())  # LAD is optimal for that loss


# %% [markdown]
# ## Exercise 6 (coding): sizing a pool of replicas with Erlang C
#
# **Answer.** With $\mu = 1$ the offered load is $a = \lambda/\mu = 10$ replicas' worth of work. Erlang C
# falls as $c$ grows, so the smallest $c$ with $C(c, a) \le 0.1$ is found by counting up from
# $\lfloor a \rfloor + 1$: it is $c = 16$ ($C = 0.057$, against $0.102$ at $c = 15$), a utilisation of
# $\rho = 10/16 = 0.63$. The central-queue simulation of Chapter 23 agrees with both values within four
# batch-means standard errors.
#
# **Four times the load.** At $\lambda = 40$ the smallest pool is $c = 50$ ($C = 0.087$; $0.117$ at 49):
# the spare capacity grows from 6 to 10 replicas, a factor of 1.7, close to $\sqrt 4 = 2$ and far from 4,
# and the utilisation rises to 0.8. The reason is the square-root staffing rule: for large $a$, $C(c, a)$
# depends on $c$ and $a$ almost only through $\beta_s = (c - a)/\sqrt{a}$ (the Halfin-Whitt regime), so a
# fixed promise needs spare capacity proportional to $\sqrt{a}$. Here $\beta_s$ is 1.90 and then 1.58;
# rounding $c$ up to an integer over-provisions the small pool more. Bigger pools run hotter for the same
# waiting promise: the economy of scale of one shared queue that Chapter 23's central queue and the fleet
# sizing of Chapter 26 rely on.

# %%
from scaleoutai.serving import replicas


def smallest_pool(a, promise):
    """The smallest c with Erlang C(c, a) <= promise (mu = 1, so lam = a)."""
    c = math.floor(a) + 1
    while replicas.erlang_c(c, a, 1.0) > promise:
        c += 1
    return c


def simulated_wait_fraction(c, lam, jobs, seed):
    """Fraction of requests that wait in an M/M/c central queue, and its batch-means standard error."""
    rng6 = np.random.default_rng(seed)
    arrivals = np.cumsum(rng6.exponential(1 / lam, jobs))
    services = rng6.exponential(1.0, jobs)
    waited = replicas.simulate(arrivals, services, c, policy="central_queue").latency - services > 1e-8
    waited = waited[jobs // 10:].astype(float)
    means = np.array([chunk.mean() for chunk in np.array_split(waited, 20)])
    return waited.mean(), means.std(ddof=1) / math.sqrt(20)


c10, c40 = smallest_pool(10.0, 0.1), smallest_pool(40.0, 0.1)
assert c10 == 16 and replicas.erlang_c(15, 10.0, 1.0) > 0.1 >= replicas.erlang_c(16, 10.0, 1.0)
for c in (c10 - 1, c10):
    frac, se = simulated_wait_fraction(c, 10.0, 60_000, SEED + c)
    assert abs(frac - replicas.erlang_c(c, 10.0, 1.0)) <= 4 * se, (c, frac, se)
    print(f"lambda = 10, c = {c}: Erlang C {replicas.erlang_c(c, 10.0, 1.0):.3f}, simulated {frac:.3f} +- {se:.3f}")
assert c40 == 50 and 1.5 < (c40 - 40) / (c10 - 10) < 2.5  # spare capacity grows like sqrt(a), not like a
print(f"a = 10: c = {c10}, spare {c10 - 10}, beta_s = {(c10 - 10) / math.sqrt(10):.2f}; "
      f"a = 40: c = {c40}, spare {c40 - 40}, beta_s = {(c40 - 40) / math.sqrt(40):.2f}")
