# %% [markdown]
# # Chapter 1 solutions: Why scale out
#
# Worked solutions to the exercises of `chapters/01-why-scale-out` (the instructor's manual, never in
# the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import numpy as np
from scipy.special import expit

from scaleoutai import cluster, collectives
from scaleoutai.foundations.sharding import (linear_mse_gradient, local_weighted_gradient, shard,
                                             sharded_gradient)

SEED = 0
gen = np.random.default_rng(SEED)

# %% [markdown]
# ## Exercise 1 (coding): what goes wrong with the weights 1/K
#
# **Answer.** With $N = 10$, $K = 3$ the shards hold $4, 3, 3$ rows and the plain average of the shard
# gradients is off by an error of the same order as the gradient itself (a relative error of a few per
# cent on random data, far above rounding). The plain average is exact for every data set exactly when
# all shards have the same size, that is when $K$ divides $N$ (which forces $K \le N$ for $N \ge 1$).
#
# **Derivation.** The true gradient is $\nabla L = \sum_k \frac{N_k}{N}\nabla L_k$. Replacing the
# weights by $1/K$ changes it by
#
# $$\Delta = \sum_{k=1}^K \Big(\tfrac1K - \tfrac{N_k}{N}\Big)\nabla L_k(w).$$
#
# If every $N_k = N/K$ each coefficient is zero and $\Delta = 0$ whatever the data. If the sizes differ,
# some coefficient is non-zero, and since the shard gradients $\nabla L_k$ are data dependent, $\Delta \neq 0$
# for generic data. The two special sub-cases: when $K > N$ the empty shards contribute $\nabla L_k = 0$ but
# still take a $1/K$ share of the average, so the result is scaled down by $N/K$ (with `array_split`, $N < K$
# means sizes $1$ and $0$, never all equal); when $N_k$ differ by one (the `array_split` rule) the short
# shards are over-weighted by $\frac1K - \frac{\lfloor N/K\rfloor}{N}$.
#
# The code writes the wrong variant as a student would, measures the error at $N = 10$, $K = 3$, checks
# that the error equals $\Delta$ computed from the formula above, and scans a grid of $(N, K)$ to check
# "exact $\iff K \mid N$".

# %%
def plain_average_gradient(X, y, w, K):
    """The wrong data-parallel gradient: the unweighted mean of the K shard gradients."""
    parts = [linear_mse_gradient(shard(X, K, r), shard(y, K, r), w) for r in range(K)]
    return sum(parts) / K


X10 = gen.standard_normal((10, 4))
y10 = X10 @ gen.standard_normal(4) + 0.1 * gen.standard_normal(10)
w10 = gen.standard_normal(4)
true10 = linear_mse_gradient(X10, y10, w10)
wrong10 = plain_average_gradient(X10, y10, w10, 3)
err10 = np.abs(wrong10 - true10).max()
sizes10 = [hi - lo for lo, hi in collectives.block_bounds(10, 3)]
delta10 = sum((1 / 3 - n_k / 10) * linear_mse_gradient(shard(X10, 3, r), shard(y10, 3, r), w10)
              for r, n_k in enumerate(sizes10))
print(f"N=10, K=3: shard sizes {sizes10}, max |plain - true| = {err10:.3e} "
      f"(relative {err10 / np.abs(true10).max():.2%})")
assert sizes10 == [4, 3, 3]
np.testing.assert_allclose(wrong10 - true10, delta10, rtol=1e-10, atol=1e-13)  # the Delta formula
assert err10 > 1e-6 * np.abs(true10).max()  # far above float64 rounding

exact_cases = []
for n_ in range(1, 13):
    Xn = gen.standard_normal((n_, 3))
    yn = gen.standard_normal(n_)
    wn = gen.standard_normal(3)
    ref_n = linear_mse_gradient(Xn, yn, wn)
    for k_ in range(1, 7):
        gap = np.abs(plain_average_gradient(Xn, yn, wn, k_) - ref_n).max()
        is_exact = gap <= 1e-12 * (1 + np.abs(ref_n).max())
        assert is_exact == (n_ % k_ == 0), (n_, k_, gap)
        if is_exact:
            exact_cases.append((n_, k_))
print(f"plain average exact on {len(exact_cases)} of 72 (N, K) pairs, exactly those with K | N")

# %% [markdown]
# ## Exercise 2 (coding): the decomposition for logistic regression, and a loss that breaks it
#
# **Answer.** For labels $y_i \in \{0, 1\}$ and $\sigma(z) = 1/(1+e^{-z})$ the mean log-loss
# $L(w) = \frac1N\sum_i \big[\log(1 + e^{x_i^\top w}) - y_i x_i^\top w\big]$ has gradient
# $\nabla L(w) = \frac1N X^\top(\sigma(Xw) - y)$, and the weighted shard sum reproduces it to rounding,
# exactly as for least squares. The proof never used the form of $\ell$: it used only that
# (a) the loss is an **average of per-example terms**, each depending on one example and on $w$, so it
# splits into the shard averages with weights $N_k/N$, and (b) differentiation is linear. Non-linearity in
# $w$ is irrelevant.
#
# **What breaks it.** Any loss in which one example's term depends on other examples of the batch:
# batch normalisation (the batch mean and variance), contrastive losses with in-batch negatives, a
# ranking loss over pairs, a loss on a batch statistic (an AUC, a variance). Each worker then uses its
# own shard's statistic. The code shows the simplest case, a "centred" loss
# $L_c(w) = \frac1N\sum_i (x_i^\top w - m(w))^2$ with the batch mean $m(w) = \frac1N\sum_j x_j^\top w$, the
# variance of the predictions (the statistic batch norm computes). By the law of total variance,
#
# $$L_c = \sum_k \frac{N_k}{N}L_{c,k} + \sum_k \frac{N_k}{N}\big((\bar x_k - \bar x)^\top w\big)^2,$$
#
# so the weighted shard sum misses the gradient of the **between-shard** term,
# $2\sum_k \frac{N_k}{N}\,\big((\bar x_k - \bar x)^\top w\big)(\bar x_k - \bar x)$. The code checks that the
# gap is exactly that vector, and that it is not small.

# %%
def logistic_gradient(X, y, w):
    """Gradient of the mean log-loss of logistic regression: (1/N) X^T (sigmoid(X w) - y); 0 if N = 0."""
    if len(y) == 0:
        return np.zeros_like(w)
    return X.T @ (expit(X @ w) - y) / len(y)


def logistic_loss(X, y, w):
    z = X @ w
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def sharded_logistic(comm, X, y, w):
    """Data-parallel logistic gradient: weight the shard gradient by N_k/N and ring all-reduce it."""
    Xk, yk = shard(X, comm.size, comm.rank), shard(y, comm.size, comm.rank)
    return collectives.ring_allreduce(comm, logistic_gradient(Xk, yk, w) * (len(yk) / len(y)))


Xl = gen.standard_normal((1001, 6))
yl = (gen.random(1001) < expit(Xl @ gen.standard_normal(6))).astype(float)
wl = 0.3 * gen.standard_normal(6)
gl = logistic_gradient(Xl, yl, wl)
# independent reference 1: central finite differences of the loss
h = 1e-6
fd = np.array([(logistic_loss(Xl, yl, wl + h * e) - logistic_loss(Xl, yl, wl - h * e)) / (2 * h) for e in np.eye(6)])
np.testing.assert_allclose(gl, fd, rtol=1e-6, atol=1e-8)
for k_ in (1, 2, 3, 7, 16):
    for g in cluster.run(sharded_logistic, k_, args=(Xl, yl, wl)).values:
        np.testing.assert_allclose(g, gl, rtol=1e-12, atol=1e-14)
print("logistic: finite differences == formula == sharded weighted sum for K = 1, 2, 3, 7, 16")


def centred_loss(X, w):
    p = X @ w
    return float(np.mean((p - p.mean()) ** 2))


def centred_gradient(X, w):
    """Gradient of the variance of the predictions: (2/N) (X - xbar)^T (X w - mean(X w))."""
    if len(X) == 0:
        return np.zeros_like(w)
    Xc = X - X.mean(axis=0)
    return 2.0 / len(X) * Xc.T @ (Xc @ w)


K2 = 4
g_full = centred_gradient(Xl, wl)
fd_c = np.array([(centred_loss(Xl, wl + h * e) - centred_loss(Xl, wl - h * e)) / (2 * h) for e in np.eye(6)])
np.testing.assert_allclose(g_full, fd_c, rtol=1e-6, atol=1e-8)
bounds = collectives.block_bounds(len(Xl), K2)
g_shards = sum((hi - lo) / len(Xl) * centred_gradient(Xl[lo:hi], wl) for lo, hi in bounds)
xbar = Xl.mean(axis=0)
between = sum((hi - lo) / len(Xl) * 2 * ((Xl[lo:hi].mean(axis=0) - xbar) @ wl) * (Xl[lo:hi].mean(axis=0) - xbar)
              for lo, hi in bounds)
np.testing.assert_allclose(g_full - g_shards, between, rtol=1e-9, atol=1e-13)
assert np.abs(g_full - g_shards).max() > 1e-6  # a real error, not rounding
print(f"centred loss: weighted shard sum misses {np.abs(g_full - g_shards).max():.2e}, "
      "exactly the between-shard term")

# %% [markdown]
# ## Exercise 3 (coding): float32, and why the ring changes the last bits
#
# **Answer.** In float32 the sharded gradient still agrees with the float64 reference to about
# $10^{-7}$-$10^{-6}$ relative, for every $K$. The maximum error barely depends on $K$: it is dominated by
# the float32 dot products inside each shard gradient (sums of $N_k$ products), and the all-reduce adds
# only a sum of $K$ terms, whose worst-case error grows like $(K-1)u$ with $u = 2^{-24} \approx 6\cdot 10^{-8}$
# the unit round-off. Splitting the data even shortens each shard's dot products, so more workers do
# not make things worse. What $K$ does change is **which bits** come out: float addition is not
# associative, $(a+b)+c \ne a+(b+c)$ in general, and the ring adds in an order fixed by its schedule.
#
# **Derivation of the order.** In the reduce-scatter of `collectives.reduce_scatter`, block $r$ starts at
# rank $r+1$ (which sends its own raw block at step 0), each following rank adds its term to the partial
# sum it receives, and rank $r$ adds last. So element $j$ in block $r$ is
# $(\dots((g_{r+1} + g_{r+2}) + g_{r+3}) + \dots) + g_r$ (indices mod $K$): a **different rotation of the
# rank order for every block**. The all-gather then copies the finished blocks, so all ranks hold the same
# bits, but they differ from the left-to-right sum $((g_0 + g_1) + g_2) + \dots$ that one machine would do.
# The code rebuilds the rotated sum by hand and asserts it equals the ring's output bit for bit, and
# bounds every error by the standard first-order bound for a float32 evaluation of
# $\frac2N X^\top(Xw - y)$ followed by a $K$-term sum:
# $|\hat g - g| \le (d + N + K)\,u\,\frac{2}{N}\,|X|^\top(|X||w| + |y|)$, elementwise.

# %%
N3, D3 = 2_000, 32
X3 = gen.standard_normal((N3, D3))
y3 = X3 @ gen.standard_normal(D3) + 0.1 * gen.standard_normal(N3)
w3 = gen.standard_normal(D3)
X3f, y3f, w3f = X3.astype(np.float32), y3.astype(np.float32), w3.astype(np.float32)
ref3 = linear_mse_gradient(X3f.astype(np.float64), y3f.astype(np.float64), w3f.astype(np.float64))
u32 = np.finfo(np.float32).eps / 2
scale3 = 2.0 / N3 * np.abs(X3f.astype(np.float64)).T @ (np.abs(X3f) @ np.abs(w3f) + np.abs(y3f)).astype(np.float64)


def rotated_ring_sum(terms):
    """The sum the ring reduce-scatter computes: block r accumulates ranks r+1, r+2, ..., r (mod K)."""
    K_ = len(terms)
    out = np.empty_like(terms[0])
    for r, (lo, hi) in enumerate(collectives.block_bounds(len(out), K_)):
        acc = terms[(r + 1) % K_][lo:hi].copy()
        for s in range(2, K_ + 1):
            acc = acc + terms[(r + s) % K_][lo:hi]
        out[lo:hi] = acc
    return out


errors32, order_differs = {}, {}
for k_ in (1, 2, 3, 5, 8, 16):
    res = cluster.run(sharded_gradient, k_, args=(X3f, y3f, w3f))
    got = res.values[0]
    assert got.dtype == np.float32
    assert all(np.array_equal(v, got) for v in res.values)  # every rank holds identical bits
    terms = [local_weighted_gradient(X3f, y3f, w3f, k_, r) for r in range(k_)]
    assert np.array_equal(got, rotated_ring_sum(terms))  # the ring's order, reproduced bit for bit
    left_to_right = terms[0].copy()
    for t_ in terms[1:]:
        left_to_right = left_to_right + t_
    order_differs[k_] = int((got != left_to_right).sum())
    err = np.abs(got.astype(np.float64) - ref3)
    assert np.all(err <= (D3 + N3 + k_) * u32 * scale3)  # the first-order rounding bound
    errors32[k_] = float(err.max() / np.abs(ref3).max())
print("K -> max relative error in float32:", {k: f"{e:.1e}" for k, e in errors32.items()})
print("K -> elements whose bits differ from a left-to-right sum:", order_differs)
assert order_differs[1] == order_differs[2] == 0  # one or two terms: addition is commutative
assert any(v > 0 for v in order_differs.values())  # some rotation changes the last bits
assert max(errors32.values()) < 10 * min(errors32.values())  # no growth with K worth the name
a, b = np.float32(1.0), np.float32(2.0 ** -24)  # b is half an ulp of 1
assert (a + b) + b == a != a + (b + b)  # non-associativity: each half-ulp rounds away, their sum does not

# %% [markdown]
# ## Exercise 4 (analysis): the bytes rank 0 moves, naive against ring
#
# **Answer.** With $d$ float64 parameters ($8d$ bytes), rank 0 in the naive pattern receives $K-1$
# gradients and sends $K-1$ back: $T_\text{naive}(K,d) = 2(K-1)\cdot 8d$ bytes. In the ring it sends
# $2(K-1)$ blocks and receives $2(K-1)$ blocks; when $K$ divides $d$ each block is $8d/K$ bytes, so
# $T_\text{ring}(K,d) = 4\frac{K-1}{K}\cdot 8d$. The ratio is
#
# $$\frac{T_\text{naive}}{T_\text{ring}} = \frac{2(K-1)\,8d}{4\frac{K-1}{K}\,8d} = \frac K2,$$
#
# so rank 0's link carries 10x the ring's traffic at $K = 20$ (for $d$ divisible by $K$). With uneven blocks
# the exact ring count follows the schedule: rank 0 sends every block except block 0 in the reduce-scatter
# and every block except block 1 in the all-gather, and receives every block except block $K-1$, then every
# block except block 0. With $b_j$ the block sizes of `array_split(d, K)`,
# $T_\text{ring} = 8\,[(d - b_0) + (d - b_1) + (d - b_{K-1}) + (d - b_0)]$. For the chapter's $d = 32$ this
# still gives $K = 20$ as the first $K$ with a ratio of at least 10.
#
# > Note for the instructor: the ratio is $K/2$, counted per direction or in total (the ring moves
# > $2(K-1)/K$ of a gradient each way, not $1/K$ of it), as the docstring of `naive_sharded_gradient`
# > states; $K-1$ would hold only against a ring that moved one block per rank.

# %%
def rank0_bytes_formula(K_, d_):
    """(naive, ring) bytes sent + received by rank 0 for one all-reduce of d float64 values."""
    b = [hi - lo for lo, hi in collectives.block_bounds(d_, K_)]
    naive_b = 2 * (K_ - 1) * 8 * d_
    ring_b = 8 * ((d_ - b[0]) + (d_ - b[1 % K_]) + (d_ - b[K_ - 1]) + (d_ - b[0])) if K_ > 1 else 0
    return naive_b, ring_b


def allreduce_only(comm, vec, which):
    return collectives.ALLREDUCES[which](comm, vec)


D4 = 32
for k_ in (2, 3, 5, 8, 16, 19, 20, 21):
    vec = np.ones(D4)
    measured = []
    for which in ("naive", "ring"):
        st = cluster.run(allreduce_only, k_, args=(vec, which)).stats[0]
        measured.append(st.bytes_sent + st.bytes_received)
    assert tuple(measured) == rank0_bytes_formula(k_, D4), (k_, measured)
for k_ in (4, 8, 16, 32):  # K divides d: the ratio is exactly K/2
    nb_, rb_ = rank0_bytes_formula(k_, 64)
    assert nb_ * 2 == rb_ * k_
first_ten = next(k_ for k_ in range(2, 200) if rank0_bytes_formula(k_, D4)[0] >= 10 * rank0_bytes_formula(k_, D4)[1])
print(f"d={D4}: naive/ring bytes at rank 0 reach 10x first at K={first_ten}")
assert first_ten == 20 and rank0_bytes_formula(20, 40)[0] == 10 * rank0_bytes_formula(20, 40)[1]

# %% [markdown]
# ## Exercise 5 (conceptual): which ceilings bind for a 2 TB embedding table at 50,000 requests/s
#
# **Two ceilings bind, and a third binds during training.**
#
# * **Model memory.** 2 TB of embeddings does not fit on one accelerator (80 GB: at least 25 of them just
#   to hold the table, before activations) nor in one large server's 512 GB of RAM (at least 4). So the
#   table must be **sharded**: distribute the model, by rows of the table (each shard owns a range or a
#   hash bucket of item/user ids), which turns every lookup into a sparse all-to-all or a request to the
#   owning parameter server (Chapters 11 and 38). Training with Adam would triple or quadruple the state
#   (two moments per parameter), moving the requirement to 6-8 TB.
# * **Throughput.** 50,000 requests/s at, say, 10 ms of work each needs at least $Rt = 500$ busy
#   serving cores; no single machine does that, so **distribute the inference**: many stateless replicas of
#   the dense part (the ranking network) behind a load balancer, all reading the sharded table. Tail
#   latency then matters (Chapter 3): every request fans out to several table shards and waits for the slowest.
# * **Data** (training): click logs of a service this size are terabytes per day, so training also
#   **distributes the data** (data parallelism for the dense layers) while the table stays model-parallel:
#   the hybrid layout of DLRM-style recommenders.
#
# The other axes are secondary here: coordination (which replica owns which shard, who reloads it after a
# crash) is needed but is not the bottleneck, and there is no multi-agent "intelligence" to distribute.
# The small computation below just reproduces the counting.

# %%
table_bytes, gpu_mem, node_ram = 2e12, 80e9, 512e9
req_rate, sec_per_req = 50_000, 0.010
gpus_needed = int(np.ceil(table_bytes / gpu_mem))
nodes_needed = int(np.ceil(table_bytes / node_ram))
cores_needed = int(np.ceil(req_rate * sec_per_req))
assert (gpus_needed, nodes_needed, cores_needed) == (25, 4, 500)
print(f"table: >= {gpus_needed} GPUs or >= {nodes_needed} servers just to hold it; "
      f"serving: >= {cores_needed} busy cores at 10 ms per request")

# %% [markdown]
# ## Exercise 6 (lab): Lab 1, the sharded loss and gradient of logistic regression
#
# The lab is `labs/lab01-sharded-gradient`. Its reference solution is the solution blocks
# (`### BEGIN SOLUTION` ... `### END SOLUTION`) of `labs/lab01-sharded-gradient/lab01-sharded-gradient.py`;
# the hidden tests, rubric and mutants are in `grading/lab01-sharded-gradient/` (`tests.py`, `rubric.yaml`,
# `mutants/`). The lab takes Exercise 2 one step further than the chapter: binary logistic regression,
# the loss as well as the gradient, shard-only ranks, and numbers that stay right for every score.
#
# **Key ideas of the answer.** `local_gradient` returns the shard's mean loss and gradient, $(0, 0)$ for an
# empty shard. Both are computed from the margin $m_i = (2y_i - 1)\,x_i^\top w$ and the tail $e^{-|m_i|} \in
# (0, 1]$: the loss term is $\log(1 + e^{-m}) = \max(-m, 0) + \operatorname{log1p}(e^{-|m|})$ and
# $\sigma(z) - y = -(2y - 1)\,\sigma(-m)$ with $\sigma(-m) = e^{-m}/(1 + e^{-m})$ for $m \ge 0$ and
# $1/(1 + e^{m})$ otherwise. Nothing exponentiates a positive number (no overflow past $|z| \approx 709$ in
# float64, 88 in float32), and on confidently right examples the tiny loss and residual come from the tail
# directly instead of from $\log(1 + e^z) - z$ or $1 - \sigma(z)$, which cancel to 0. In `sharded_gradient`
# each rank knows only its rows, so it sends $n_r g_r$, $n_r L_r$ and $n_r$ ($d + 2$ numbers), the ranks sum
# them (the reference uses a binomial tree up to rank 0 and back down; a gather and broadcast or any
# all-reduce is fine), and every rank divides by $N = \sum_r n_r$. Sum in float64 and cast the gradient back
# to the input dtype. Traffic is $O(Kd)$ bytes; the data never moves.
#
# **Mistakes the rubric catches** (each is a mutant in `grading/lab01-sharded-gradient/mutants/`):
#
# 1. *The chapter's least-squares code pasted* (`pasted_course.py`): the feedback names the logistic loss
#    the lab asks for; it keeps 5 points (the empty shards).
# 2. *Unstable formulas* (`naive_exp.py`, `log_of_sigmoid.py`, `logaddexp_cancels.py`): $\log(1 + e^z)$ is
#    inf past the overflow, $\log \sigma(z)$ is $\log 0$, and even the finite `np.logaddexp(0, z) - y z` with
#    `expit(z) - y` loses every digit on confident predictions; each loses only the stability test.
# 3. *Weights* (`plain_mean.py`, `divide_by_k.py`, `loss_unweighted.py`, `loss_not_reduced.py`): the plain
#    mean of shard means, dividing by $K$, a loss averaged without weights or never reduced.
# 4. *Empty shards* (`empty_shard_nan.py`, `empty_shard_skips.py`): dividing by $n = 0$, or an empty rank
#    that skips the exchange and deadlocks the rest.
# 5. *Shipping data instead of sums* (`send_the_data.py`): right numbers, but the communication test reads
#    the grader's byte counts and recorded payloads.
#
# Other mutants: a float64 gradient for float32 inputs (`float64_result.py`), the residual with the wrong
# sign (`gradient_sign.py`), never communicating (`no_communication.py`) and recursive doubling that is
# right only for powers of two (`pow2_tree.py`). The course's sharding, collectives, `scaleoutai.parallel`
# and `scaleoutai.ml` are unimportable in the grader.
