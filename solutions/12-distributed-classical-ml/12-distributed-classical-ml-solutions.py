# %% [markdown]
# # Chapter 12 solutions: Distributed classical ML
#
# Worked solutions to the exercises of `chapters/12-distributed-classical-ml` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only contend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scaleoutai import cluster, collectives, datasets  # noqa: E402
from scaleoutai.collectives import block_range, ring_allreduce  # noqa: E402
from scaleoutai.ml import classical as cl  # noqa: E402
from scaleoutai.ml import trees as tr  # noqa: E402

SEED, N, ALPHA, BETA = 0, 4_000, 1e-5, 1e-9
net = cluster.Network(beta=BETA, alpha=ALPHA)


def on_shard(comm, fn, X, *args, **kw):
    """Call fn(comm, X_shard, *args) with this rank's block of rows of X (and of every array in args
    that has as many rows as X)."""
    first, last = block_range(len(X), comm.size, comm.rank)
    lo, hi = first, last
    cut = [a[lo:hi] if isinstance(a, np.ndarray) and len(a) == len(X) else a for a in args]
    return fn(comm, X[lo:hi], *cut, **kw)


# %% [markdown]
# ## Exercise 1 (analysis): all-reducing only the upper triangle of $X^\top X$
#
# **Bytes.** The statistics are $d^2 + 2d + 2$ numbers; with only the upper triangle of the symmetric
# $X^\top X$ they are $d(d+1)/2 + 2d + 2$. The ring sends $2\frac{K-1}{K}m$ numbers per rank for a
# payload of $m$, so the saving is $2\frac{K-1}{K}\cdot\frac{d(d-1)}{2}\cdot 8$ bytes per rank: almost
# half for large $d$ (for $d = 8$: 28 of 82 numbers, a third).
#
# **When latency dominates anyway.** The ring takes $2(K-1)$ rounds of
# $\alpha + \frac{m}{K} 8\beta$. The latency part wins while $\alpha > \frac{m}{K} 8 \beta$, i.e.
# $m < K\alpha / (8\beta)$ = 5 000 numbers at $K = 4$ with the chapter's $\alpha = 10^{-5}$,
# $\beta = 10^{-9}$: $d \lesssim 70$ for the full matrix and $d \lesssim 97$ for the triangle. Below that,
# halving the bytes barely changes the time (the $2(K-1)\alpha$ floor stays); above it, the time
# approaches half. The simulator's clock confirms it below: at $d = 8$ the triangle saves about 1 % of
# the time, at $d = 256$ about 45 %.

# %%
def fit_linear_half(comm, X, y, ridge=0.0):
    """fit_linear, but all-reducing the upper triangle of X^T X only (plus X^T y, sums and n)."""
    d = X.shape[1]
    full = cl.linear_statistics(X, y, True)
    iu = np.triu_indices(d)
    packed = np.concatenate([full[:d * d].reshape(d, d)[iu], full[d * d:]])
    total = ring_allreduce(comm, packed)
    A = np.zeros((d, d))
    A[iu] = total[:len(iu[0])]
    A = A + np.triu(A, 1).T
    return cl.solve_statistics(np.concatenate([A.ravel(), total[len(iu[0]):]]), d, ridge, True)


K = 4
rows = {}
for d in (8, 64, 256):
    Xd, yd, _ = datasets.linear_regression(max(N, 2 * d), d, noise=0.5, seed=SEED)
    full = cluster.run(on_shard, K, args=(cl.fit_linear, Xd, yd), network=net, timeout=120)
    half = cluster.run(on_shard, K, args=(fit_linear_half, Xd, yd), network=net, timeout=120)
    np.testing.assert_allclose(half.values[0][0], full.values[0][0], rtol=1e-9, atol=1e-12)
    m_full, m_half = d * d + 2 * d + 2, d * (d + 1) // 2 + 2 * d + 2
    b_full, b_half = full.stats[0].bytes_sent, half.stats[0].bytes_sent
    # exact ring bytes of rank 0 (blocks of an uneven split differ by one number)
    assert b_full == 8 * (2 * m_full - np.diff(collectives.block_bounds(m_full, K))[[0, 1]].sum())
    assert b_half == 8 * (2 * m_half - np.diff(collectives.block_bounds(m_half, K))[[0, 1]].sum())
    rows[d] = (b_full, b_half, full.sim_time, half.sim_time)
    print(f"d={d:>3}: bytes per rank {b_full} -> {b_half} ({1 - b_half / b_full:.0%} saved); simulated "
          f"all-reduce {full.sim_time * 1e6:.0f} -> {half.sim_time * 1e6:.0f} us ({1 - half.sim_time / full.sim_time:.0%})")
    for m, t in ((m_full, full.sim_time), (m_half, half.sim_time)):
        model = 2 * (K - 1) * (ALPHA + np.ceil(m / K) * 8 * BETA)
        assert abs(t - model) <= 2 * (K - 1) * 8 * BETA + 1e-12  # the ring's alpha-beta time
threshold = K * ALPHA / (8 * BETA)
assert 69 ** 2 + 2 * 69 + 2 < threshold < 71 ** 2 + 2 * 71 + 2  # full matrix: d about 70
assert 1 - rows[8][3] / rows[8][2] < 0.05 and 1 - rows[256][3] / rows[256][2] > 0.4

# %% [markdown]
# ## Exercise 2 (analysis): centring first, in float32
#
# **Two passes.** Pass 1 all-reduces the column sums, $\sum y$ and $n$ ($d + 2$ numbers) so every rank
# knows $\bar x, \bar y$; pass 2 all-reduces $X_c^\top X_c$ and $X_c^\top y_c$ of the centred shard.
# One extra all-reduce of $d+2$ numbers: cheap.
#
# **The two failure modes.** (i) *Cancellation.* One pass forms $X^\top X$ and subtracts
# $n\bar x\bar x^\top$: with column means of 1000 and unit spread, the entries are about $10^6 n$ and
# the difference about $n$, so float32's 7 digits lose about 6 of them; the coefficients come out with
# errors of order one. Centring first computes the small numbers directly: the second pass **fixes this
# one**. (ii) *Ill-conditioning.* Two nearly collinear columns (Section 6) give $X_c^\top X_c$ a
# condition number of $10^{6}$ or more whether or not the data is centred; squaring the conditioning by
# forming normal equations is the cause, and only float64, a ridge penalty or a QR-type solver help.
# The second pass does **not** fix it. Both are measured below on $K = 4$ ranks.

# %%
def fit_two_pass(comm, X, y, ridge=0.0):
    """Centre with all-reduced means, then all-reduce the centred statistics (in X's dtype)."""
    first = ring_allreduce(comm, np.concatenate([X.sum(axis=0), [y.sum(), len(y)]]).astype(X.dtype))
    n = first[-1]
    xbar, ybar = first[:-2] / n, first[-2] / n
    Xc, yc = X - xbar, y - ybar
    second = ring_allreduce(comm, np.concatenate([(Xc.T @ Xc).ravel(), Xc.T @ yc]))
    d = X.shape[1]
    A = second[:d * d].reshape(d, d) + ridge * np.eye(d, dtype=X.dtype)
    w = np.linalg.solve(A.astype(np.float64), second[d * d:].astype(np.float64))
    return w, float(ybar - xbar.astype(np.float64) @ w)


rng = np.random.default_rng(SEED)
w_star = np.array([1.0, -2.0, 0.5])
X_off = rng.standard_normal((N, 3)) + 1000.0  # well conditioned, large means
y_off = X_off @ w_star + 0.01 * rng.standard_normal(N)
a = rng.standard_normal(N)
X_col = np.c_[a, a + 3e-3 * rng.standard_normal(N), rng.standard_normal(N)]  # collinear, mean 0
y_col = X_col @ w_star + 0.01 * rng.standard_normal(N)
err = {}
for name, (Xe, ye) in (("mean 1000", (X_off, y_off)), ("collinear", (X_col, y_col))):
    want = cl.reference_linear(Xe, ye)[0]  # QR in float64
    for label, fn in (("one pass", cl.fit_linear), ("two passes", fit_two_pass)):
        try:
            got = cluster.run(on_shard, 4, args=(fn, Xe.astype(np.float32), ye.astype(np.float32)), timeout=60)
            err[(name, label)] = float(np.abs(got.values[0][0] - want).max())
        except cluster.RankError:  # the one-pass solver may declare the float32 system singular
            err[(name, label)] = np.inf
        print(f"{name:>9}, {label:>10}, float32: max coefficient error {err[(name, label)]:.2e}")
assert err[("mean 1000", "one pass")] > 100 * err[("mean 1000", "two passes")]  # cancellation: fixed
assert err[("mean 1000", "two passes")] < 1e-2
assert err[("collinear", "two passes")] > 1e-2  # ill-conditioning: not fixed by centring

# %% [markdown]
# ## Exercise 3 (coding): the histogram subtraction trick
#
# **Rule.** The rows of a node are split between its two children, so for every (feature, bin) the
# children's sums add up to the parent's: $\text{hist}(R) = \text{hist}(P) - \text{hist}(L)$. Every rank
# already holds the parent's *reduced* histogram from the previous level, and from it the children's
# total hessians ($H_L$ and $H_R$ at the chosen cut): so every rank knows, without a message, which child
# is smaller. It builds and all-reduces only the smaller child's histogram and subtracts it from the
# parent's to get the larger one (LightGBM does this; building the small child also halves the work).
#
# **Bytes per level** (full trees of depth 3): level 0 sends 1 node's histogram either way; level 1
# sends 1 instead of 2; level 2 sends 2 instead of 4. Per tree $1 + 1 + 2 = 4$ node-histograms instead of
# $1 + 2 + 4 = 7$, a saving of $3/7$; in general $1 + (2^{\text{depth}-1} - 1)$ against
# $2^{\text{depth}} - 1$, approaching half. Each node-histogram costs
# `histogram_bytes(1, d, bins, K)` $= 2\frac{K-1}{K} d \cdot \text{bins} \cdot 2 \cdot 8$ bytes per rank.
# The subtraction is exact up to rounding, so the trees have the same splits (checked).

# %%
KW = dict(rounds=4, depth=3, bins=32, lr=0.3, lam=1.0)
Xr, _, _ = datasets.linear_regression(N, 8, noise=0.5, seed=SEED)
Xt = Xr + np.arange(8)
yt = np.sin(Xt[:, 0]) * 2 + Xt[:, 1] * Xt[:, 2] + 0.3 * (Xt[:, 3] > 3)
edges = tr.quantile_edges(Xt, KW["bins"])


def booster_with_subtraction(comm, X, y, use_trick):
    """train_booster's loop with a reduce that all-reduces only the smaller child of each split."""
    memo = {"parent": None, "levels": []}

    def reduce(hist):
        if hist.ndim == 1:  # the label sum and count at the start
            return ring_allreduce(comm, hist)
        if not use_trick or hist.shape[0] == 1:  # a root: nothing to subtract from
            out = ring_allreduce(comm, hist)
            memo["levels"].append(hist.shape[0])
        else:
            parent = memo["parent"]
            splits = [(j, f, b) for j, (gn, f, b) in enumerate(tr.best_split(parent, KW["lam"])) if gn > 0]
            assert hist.shape[0] == 2 * len(splits)  # the children come in (left, right) pairs
            small = []
            for i, (j, f, b) in enumerate(splits):
                c = parent[j, f, :, 1].cumsum()
                small.append(2 * i if c[b] <= c[-1] - c[b] else 2 * i + 1)
            large = [s ^ 1 for s in small]  # the sibling of each
            out = np.empty_like(hist)
            out[small] = ring_allreduce(comm, np.ascontiguousarray(hist[small]))
            out[large] = parent[[j for j, _, _ in splits]] - out[small]
            memo["levels"].append(len(small))
        memo["parent"] = out
        return out

    first, last = block_range(len(X), comm.size, comm.rank)
    model = tr._boost(X[first:last], y[first:last], edges, reduce, KW["rounds"], KW["depth"], KW["lam"], KW["lr"],
                      "squared", 1e-3)
    return model, memo["levels"]


K = 4
plain = cluster.run(booster_with_subtraction, K, args=(Xt, yt, False), timeout=120)
trick = cluster.run(booster_with_subtraction, K, args=(Xt, yt, True), timeout=120)
ref = tr.reference_booster(Xt, yt, edges=edges, **KW)
for model in (plain.values[0][0], trick.values[0][0]):
    for t, rt in zip(model["trees"], ref["trees"]):
        assert np.array_equal(t["feature"], rt["feature"]) and np.array_equal(t["bin"], rt["bin"])
    np.testing.assert_allclose(tr.predict(model, Xt), tr.predict(ref, Xt), rtol=1e-9, atol=1e-9)
levels_plain, levels_trick = plain.values[0][1], trick.values[0][1]
assert levels_plain == [1, 2, 4] * KW["rounds"] and levels_trick == [1, 1, 2] * KW["rounds"]
per_node = tr.histogram_bytes(1, 8, KW["bins"], K)
b_plain, b_trick = plain.stats[0].bytes_sent, trick.stats[0].bytes_sent
print(f"node-histograms all-reduced per tree: {levels_plain[:3]} -> {levels_trick[:3]}; bytes of rank 0 "
      f"{b_plain} -> {b_trick} ({1 - b_trick / b_plain:.1%} saved, 3/7 = {3 / 7:.1%})")
assert abs(b_plain - 7 * KW["rounds"] * per_node) < 0.01 * b_plain
assert abs(b_trick - 4 * KW["rounds"] * per_node) < 0.01 * b_trick

# %% [markdown]
# ## Exercise 4 (analysis): mini-batch k-means, inertia against bytes
#
# **Algorithm** (Sculley 2010, distributed). Each iteration every rank samples $b$ of its points
# (seeded by rank and iteration), assigns them to the nearest centre, and all-reduces per cluster the
# sum of its sampled points and their count, the same $kd + k$ numbers as full k-means. Every rank
# then moves centre $c$ to the weighted mean of its old position (weight: all points it has absorbed
# so far, $v_c$) and the new points: $c \leftarrow (v_c c + S_c)/(v_c + m_c)$, $v_c \mathrel{+}= m_c$.
# Every rank holds the same centres because it sees the same sums.
#
# **Bytes.** The message does not depend on $b$: every iteration of every variant sends
# $2\frac{K-1}{K}(kd+k)$ numbers per rank. Mini-batching saves **compute** (assigning $b$ points, not
# $N/K$), never bytes; for a given inertia a mini-batch needs more iterations, hence *more* bytes, than
# the full batch. On inertia against compute the order reverses at the start. That is the answer to
# give: mini-batch k-means is a compute saving for
# huge $N$, and in a distributed setting its per-iteration communication is unchanged.
#
# Measured (15 iterations, $K = 4$, $N = 4000$ points in 6 blobs): every variant sends 208 bytes per
# iteration; at every byte count the full batch has the lowest inertia. Between the mini-batch sizes the
# order is noisy at this scale (the per-centre rates $1/v_c$ freeze centres early, and which points were
# sampled matters), so do not expect students' curves to be ordered by $b$; the robust statements are
# the flat bytes per iteration and the full batch's lead per byte.

# %%
def minibatch_kmeans(comm, X, init, b, iters, seed=0):
    """Distributed mini-batch k-means with per-centre learning rates; the centres after each iteration."""
    k, d = init.shape
    centres, absorbed, history = init.astype(np.float64).copy(), np.zeros(k), []
    for t in range(iters):
        rng = np.random.default_rng([seed, comm.rank, t])
        pick = X if b is None else X[rng.choice(len(X), size=min(b, len(X)), replace=False)]
        labels, _ = cl.assign(pick, centres)
        sums = np.zeros((k, d))
        np.add.at(sums, labels, pick)
        counts = np.bincount(labels, minlength=k).astype(np.float64)
        total = ring_allreduce(comm, np.concatenate([sums.ravel(), counts]))
        S, m = total[:k * d].reshape(k, d), total[k * d:]
        live = m > 0
        if b is None:  # full batch: Lloyd's step
            centres[live] = S[live] / m[live, None]
        else:
            centres[live] = (absorbed[live, None] * centres[live] + S[live]) / (absorbed[live] + m[live])[:, None]
            absorbed += m
        history.append(centres.copy())
    return history


Xb, _, _ = datasets.blobs(N, 6, d=2, spread=2.0, seed=SEED)
init = cl.init_centres(Xb, 6, seed=SEED)
inertia = lambda C: float(cl.assign(Xb, C)[1].sum())  # noqa: E731  (sum of squared distances)
ITERS, curves = 15, {}
for b in (8, 32, 128, None):
    res = cluster.run(on_shard, K, args=(minibatch_kmeans, Xb, init, b, ITERS), timeout=120)
    per_iter = res.stats[0].bytes_sent / ITERS
    curves[b] = (np.arange(1, ITERS + 1) * per_iter, [inertia(C) for C in res.values[0]])
    print(f"b={str(b):>4}: {per_iter:.0f} B per iteration; inertia after 1, 5, 15 iterations: "
          f"{curves[b][1][0]:.0f}, {curves[b][1][4]:.0f}, {curves[b][1][-1]:.0f}")
assert len({round(c[0][0]) for c in curves.values()}) == 1  # bytes per iteration do not depend on b
m = 6 * 2 + 6
assert abs(curves[None][0][0] - 2 * (K - 1) / K * m * 8) <= 2 * 8  # the ring formula for k d + k numbers
# full batch equals Lloyd's algorithm (chapter's reference) step for step
lloyd = cl.reference_kmeans(Xb, init, iters=ITERS)
assert abs(curves[None][1][-1] - lloyd["inertia"]) < 1e-6 * lloyd["inertia"]
# at equal bytes (the same number of iterations) the full batch is best: every point moves its centre
assert all(curves[None][1][-1] < curves[b][1][-1] for b in (8, 32, 128))
fig, ax = plt.subplots(figsize=(5, 3.5))
for b, (x, v) in curves.items():
    ax.plot(x, v, "o-", ms=3, label=f"b = {b if b else 'all'}")
ax.set(xlabel="bytes sent by rank 0", ylabel="inertia", yscale="log")
ax.legend()
plt.close(fig)

# %% [markdown]
# ## Exercise 5 (analysis): k-means++ when each rank holds a shard
#
# **Sequential rule.** Centre 1 is a uniformly random point; centre $j+1$ is point $x$ with probability
# $D(x)^2 / \sum_z D(z)^2$, $D$ the distance to the nearest centre chosen so far.
#
# **What must be communicated per centre.** Every rank keeps $D(x)^2$ for its own points (updated
# locally with the newest centre: no message). To draw the next centre the ranks need (1) the *total*
# $\sum_z D(z)^2$ and, to locate the draw, each rank's **local sum** $S_r$: one all-gather of $K$
# numbers (an all-reduce would give the total but not the prefix sums that say which rank owns the
# draw). With a shared seed every rank draws the same $u \sim U(0, \sum_r S_r)$; the rank whose prefix
# interval contains $u$ finds the point by its local inverse CDF and (2) **broadcasts** it, $d$
# numbers. So each centre costs one all-gather of $K$ scalars and one broadcast of $d$ numbers; the
# first centre needs only the counts (an all-gather of $K$ row counts, once) and a broadcast.
#
# **Rounds.** $k$ sequential rounds (one per centre), each with two dependent collectives: $2k$
# collective latencies, $\approx 2k\lceil\log_2 K\rceil\alpha$ with tree collectives, and $k$ full
# passes over the local data. That sequential dependence is why k-means$\|$ (Bahmani et al.) oversamples
# $\approx \ell$ centres per round in $O(\log N)$ rounds and reclusters them on one machine. With the
# same random draws the distributed result is **identical** to single-machine k-means++ on the
# rank-ordered data (checked below), and the per-centre traffic is measured against
# $K$ floats + $d$ floats.

# %%
def kmeanspp_distributed(comm, X, k, seed=0):
    """k-means++ on sharded X: per centre, an all-gather of the ranks' D^2 sums and one broadcast."""
    rng = np.random.default_rng(seed)  # the same stream on every rank
    d = X.shape[1]
    counts = collectives.all_gather(comm, np.array([float(len(X))]))
    u = rng.random() * counts.sum()
    owner = int(np.searchsorted(np.cumsum(counts), u, side="right"))
    first = X[int(u - np.concatenate([[0], np.cumsum(counts)])[owner])] if comm.rank == owner else np.zeros(d)
    centres = [collectives.broadcast(comm, first, root=owner)]
    d2 = ((X - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        sums = collectives.all_gather(comm, np.array([d2.sum()]))
        u = rng.random() * sums.sum()
        edges = np.concatenate([[0.0], np.cumsum(sums)])
        owner = min(int(np.searchsorted(edges, u, side="right")) - 1, comm.size - 1)
        pick = np.zeros(d)
        if comm.rank == owner:
            i = min(int(np.searchsorted(np.cumsum(d2), u - edges[owner], side="right")), len(X) - 1)
            pick = X[i]
        centres.append(collectives.broadcast(comm, pick, root=owner))
        d2 = np.minimum(d2, ((X - centres[-1]) ** 2).sum(axis=1))
    return np.array(centres)


def kmeanspp_one_machine(X, k, seed=0):
    """The same draws on the whole data (rank order = row order)."""
    rng = np.random.default_rng(seed)
    u = rng.random() * len(X)
    centres = [X[int(u)]]
    d2 = ((X - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        u = rng.random() * d2.sum()
        i = min(int(np.searchsorted(np.cumsum(d2), u, side="right")), len(X) - 1)
        centres.append(X[i])
        d2 = np.minimum(d2, ((X - X[i]) ** 2).sum(axis=1))
    return np.array(centres)


k = 6
one = kmeanspp_one_machine(Xb, k)
for K in (1, 2, 4, 7):
    res = cluster.run(on_shard, K, args=(kmeanspp_distributed, Xb, k), timeout=120)
    # identical up to the float order of the prefix sums (a draw on a boundary could differ; none here)
    assert all(np.array_equal(c, one) for c in res.values), K
    msgs = res.stats[0].messages_sent
    print(f"K={K}: same {k} centres as one machine; rank 0 sent {msgs} messages, {res.stats[0].bytes_sent} bytes")
# the traffic per centre does not depend on how many rows the ranks hold
small = cluster.run(on_shard, 4, args=(kmeanspp_distributed, Xb[: N // 2], k), timeout=120)
big = cluster.run(on_shard, 4, args=(kmeanspp_distributed, Xb, k), timeout=120)
assert small.stats[0].bytes_sent == big.stats[0].bytes_sent
kpp_inertia = inertia(one)
forgy = inertia(init)
print(f"inertia of the k-means++ start {kpp_inertia:.0f} against a random start {forgy:.0f}")
assert kpp_inertia < forgy

# %% [markdown]
# ## Exercise 6 (coding): loss-only line-search trials
#
# **Count.** Let an iteration take $T$ trials. `train_lbfgs` all-reduces $d + 1$ numbers per trial:
# $T$ rounds, $T(d + 1)$ numbers. The variant sends one number per trial and then the gradient:
# $T + 1$ rounds, $T + d$ numbers. The difference in numbers is $T(d+1) - (T + d) = d(T - 1)$, in rounds
# one. With the ring's $2(K-1)(\alpha + \frac{m}{K} 8\beta)$ per all-reduce, the variant wins only when
# $d(T - 1)\frac{8\beta}{K} > \alpha$, i.e. $d > K\alpha / (8\beta (T - 1))$. When the unit step is accepted
# ($T = 1$, almost every L-BFGS iteration near the optimum) the variant **never** wins: it pays one more
# latency for nothing. It helps only for large $d$ *and* frequent backtracking (early iterations, badly
# scaled problems). The run below confirms it: the same weights, more rounds for the variant.

# %%
from scaleoutai.ml import glm  # noqa: E402

GLM_N, D, GLM_LAM = 2_000, 8, 1e-3
rng = np.random.default_rng(SEED)
Xg = 0.2 + rng.standard_normal((GLM_N, D))
coin, w_gen = rng.random(GLM_N), rng.standard_normal(D)  # labels drawn from a logistic model
yg = np.where(coin < 1 / (1 + np.exp(-(Xg @ w_gen))), 1.0, -1.0)
w_ref = glm.reference_glm(Xg, yg, GLM_LAM)
f_star = glm.objective(Xg, yg, w_ref, GLM_LAM)


def lbfgs_loss_only(comm, X, y, lam, m=10, iters=100, tol=1e-10):
    """train_lbfgs whose line-search trials all-reduce the loss only; the gradient follows acceptance."""
    n = float(ring_allreduce(comm, np.array([len(y)], dtype=float))[0])
    rounds = [1]

    def loss(w):
        rounds[0] += 1
        return ring_allreduce(comm, glm.logistic_sums(X, y, w)[:1])[0] / n + lam / 2 * w @ w

    def grad(w):
        rounds[0] += 1
        return ring_allreduce(comm, glm.logistic_sums(X, y, w)[1:]) / n + lam * w

    w = np.zeros(X.shape[1])
    f, g = loss(w), grad(w)
    S, Y, trials = [], [], []
    for _ in range(iters):
        if np.abs(g).max() <= tol:
            break
        p, t, slack = glm.two_loop(g, S, Y), 1.0, 8 * np.finfo(float).eps * abs(f)
        for k in range(1, 41):
            f_new = loss(w + t * p)
            if f_new <= f + 1e-4 * t * (g @ p) + slack:
                break
            t /= 2
        trials.append(k)
        w_new = w + t * p
        g_new = grad(w_new)
        S, Y = (S + [w_new - w])[-m:], (Y + [g_new - g])[-m:]
        w, f, g = w_new, f_new, g_new
    return w, rounds[0] - 1, trials  # rounds after the row count


K = 8
base = cluster.run(on_shard, K, args=(glm.train_lbfgs, Xg, yg, GLM_LAM), timeout=120)
var = cluster.run(on_shard, K, args=(lbfgs_loss_only, Xg, yg, GLM_LAM), timeout=120)
w_var, rounds_var, trials = var.values[0]
np.testing.assert_allclose(w_var, base.values[0]["w"], rtol=1e-6, atol=1e-9)
rounds_base = int(base.values[0]["rounds"][-1])
print(f"trials per iteration {trials}; rounds: gradient with every trial {rounds_base}, loss-only trials "
      f"{rounds_var}; bytes of rank 0: {base.stats[0].bytes_sent} vs {var.stats[0].bytes_sent} (with T = 1 both "
      f"send d + 1 numbers per iteration)")
assert rounds_var > rounds_base  # unit steps accepted: the extra gradient round is pure latency
T = max(trials)
print(f"break-even d for T = {T} trials at K = {K}: d > K alpha / (8 beta (T - 1)) = "
      f"{K * ALPHA / (8 * BETA * (T - 1)) if T > 1 else float('inf'):.0f}")

# %% [markdown]
# ## Exercise 7 (analysis): choosing ADMM's $\rho$, with IID and label-sorted shards
#
# **What to expect.** The x-update pulls each $x_k$ towards $z - u_k$ with weight $\rho$: a small $\rho$
# lets the local models drift to their own shard's optimum (many rounds to agree), a large $\rho$
# makes every step tiny (many rounds to move). With label-sorted shards the local optima are far apart
# (a shard of negatives alone wants $w \to$ "always negative"), so the drift costs more: the small values
# of $\rho$ need clearly more rounds than on IID shards, while around the best $\rho$ the two layouts
# are close (measured below). **Residual balancing** (Boyd et al., Section 3.4.1) multiplies $\rho$ by $\tau = 2$
# when $r > \mu s$ and divides it when $s > \mu r$ ($\mu = 10$), rescaling the scaled dual $u$ by
# $\rho_{\text{old}}/\rho_{\text{new}}$ so the unscaled dual $\rho u$ is unchanged. It needs no extra
# message: $r$ already rides in the all-reduce (one iteration late) and $s$ is local. The table below
# measures rounds to $10^{-10} f^\star$ for a sweep of fixed $\rho$ and for balancing started from the
# worst fixed value.

# %%
def admm_balanced(comm, X, y, lam, rho=1.0, iters=150, mu=10.0, tau=2.0):
    """Consensus ADMM of glm.train_admm with residual balancing of rho; returns the z of every iteration."""
    Kc, d = comm.size, X.shape[1]
    n = float(ring_allreduce(comm, np.array([len(y)], dtype=float))[0])
    x, u, z, prev_r2, zs, r = np.zeros(d), np.zeros(d), np.zeros(d), 0.0, [], np.inf
    for t in range(iters):
        x, _ = glm._local_x(X, y, n, z - u, rho, x)
        tot = ring_allreduce(comm, np.append(x + u, prev_r2))  # sum of x_k + u_k, and last iteration's r^2
        r = np.sqrt(tot[d]) if t > 0 else np.inf
        z_old, z = z, rho * tot[:d] / (lam + Kc * rho)
        u = u + x - z
        prev_r2 = float((x - z) @ (x - z))
        dual = rho * np.sqrt(Kc) * np.linalg.norm(z - z_old)
        new = rho * tau if r > mu * dual else rho / tau if dual > mu * r else rho
        u, rho = u * rho / new, new
        zs.append(z)
    return np.array(zs)


def rounds_to_target(zs):
    """All-reduce rounds until f(z) - f* <= 1e-10 f* (the row order does not change f); None: not reached."""
    hit = np.flatnonzero(np.array([glm.objective(Xg, yg, z, GLM_LAM) for z in zs]) - f_star <= 1e-10 * f_star)
    return int(hit[0]) + 1 if len(hit) else None


order = np.argsort(yg, kind="stable")
layouts = {"IID shards": (Xg, yg), "sorted by label": (Xg[order], yg[order])}
rhos = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3]
table = {}
for name, (Xl, yl) in layouts.items():
    row = []
    for rho in rhos:
        zs = cluster.run(on_shard, 4, args=(glm.train_admm, Xl, yl, GLM_LAM), kwargs=dict(rho=rho, iters=150),
                         timeout=120).values[0]["z_history"]
        row.append(rounds_to_target(zs))
    worst = rhos[int(np.argmax([r if r is not None else 10**6 for r in row]))]
    bal = cluster.run(on_shard, 4, args=(admm_balanced, Xl, yl, GLM_LAM), kwargs=dict(rho=worst, iters=150),
                      timeout=120).values[0]
    table[name] = (row, worst, rounds_to_target(bal))
print(f"{'':>16}" + "".join(f"{'rho=' + format(r, 'g'):>11}" for r in rhos) + f"{'balanced':>22}")
for name, (row, worst, bal) in table.items():
    print(f"{name:>16}" + "".join(f"{str(r):>11}" for r in row) + f"{str(bal) + ' (from ' + format(worst, 'g') + ')':>22}")
for name, (row, worst, bal) in table.items():
    at_worst = row[rhos.index(worst)]
    assert bal is not None and (at_worst is None or bal < at_worst), name  # balancing rescues the worst start
iid, srt = table["IID shards"][0], table["sorted by label"][0]
assert all(s_ > i_ for s_, i_ in zip(srt[1:3], iid[1:3]))  # rho = 0.003, 0.01: sorted shards need more rounds
