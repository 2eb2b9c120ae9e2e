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
# # Chapter 12. Distributed classical ML
#
# Chapters 10 and 11 distributed training by exchanging gradients every step. Many classical models
# need much less: the whole training set enters the fit only through a few sums. Least squares needs
# $X^\top X$ and $X^\top y$; Lloyd's k-means needs each cluster's coordinate sum and size; a
# gradient-boosted tree needs, for every feature and every bin, the sum of the gradients and hessians
# of the rows that fall in it. Each of those sums is additive over rows, so $K$ workers compute them on
# their own shard and one all-reduce (Chapter 4) gives every worker the totals. The bytes on the wire
# depend on the size of the model, never on the number of rows $N$. This chapter builds the three on
# the communicator, checks each against its single-machine reference and scikit-learn, and runs
# LightGBM's data-parallel tree learner on two local processes beside our histogram split. A fourth
# model, logistic regression, has no such fixed sums: it is fitted by iterating, one all-reduce per
# step, and the chapter compares three ways (Newton, L-BFGS, ADMM) to spend those rounds.
#
# **Prerequisites:** Chapter 4 (Communication primitives: ring all-reduce and its $\alpha$-$\beta$
# cost) and Chapter 10 (Distributed optimization: data-parallel training, one all-reduce per step);
# Chapter 5 for $S_p$, $E_p$ and cost. Background: least squares and its normal equations, k-means,
# decision trees and gradient boosting at the level of an introductory ML course.

# %% tags=["parameters"]
N = 40_000  # smoke: 4_000
D = 8
CLUSTERS = 6
KS = [1, 2, 4, 8, 16]  # smoke: [1, 2, 4, 8]
ROUNDS = 8  # smoke: 4
DEPTH = 3
BINS = 32
GLM_N = 20_000  # smoke: 2_000
GLM_LAM = 1e-3
GLM_RHO = 0.01
ROW_SECONDS = 2e-8  # simulated compute per row and feature of one pass
ALPHA = 1e-5
BETA = 1e-9
SEED = 0

# %% [markdown]
# `N` rows with `D` features are the training set of every model; `CLUSTERS` is the k of k-means;
# `KS` are the world sizes; `ROUNDS`, `DEPTH` and `BINS` size the boosted trees; `GLM_N` rows train the
# logistic regression of Section 4, with penalty `GLM_LAM` and ADMM penalty `GLM_RHO`; `ROW_SECONDS` is the
# simulated cost of touching one value of one row in one pass over the data (Section 7); `ALPHA` and
# `BETA` describe the simulated network.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling is memory and the time to read the rows, not the model. A click log or a sensor archive
# with a billion rows and a hundred features is 800 GB of float64: no single machine holds it, and one
# disk needs many minutes just to read it. The linear model fitted on it has a hundred coefficients,
# and the statistics that determine them are a 100 x 100 matrix and a vector: 80 KB.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.collectives import block_range
from scaleoutai.ml import classical as cl
from scaleoutai.ml import compression
from scaleoutai.ml import glm
from scaleoutai.ml import trees as tr

rows, feats = 1e9, 100
print(f"data: {rows * feats * 8 / 1e9:.0f} GB; sufficient statistics of least squares: "
      f"{cl.linear_statistics_size(feats) * 8 / 1e3:.0f} KB "
      f"({rows * feats / cl.linear_statistics_size(feats):.0e} times smaller)")

# %% [markdown]
# ## 2. Core concepts
#
# **Sufficient statistics.** Least squares with an intercept and a ridge penalty $\lambda$ (a symbol
# local to this chapter) minimises $\lVert y - Xw - w_0\rVert^2 + \lambda \lVert w\rVert^2$. Centre the
# columns and the solution is $w = (X_c^\top X_c + \lambda I)^{-1} X_c^\top y_c$ and
# $w_0 = \bar y - \bar x^\top w$, and every piece comes from $X^\top X$, $X^\top y$, the column sums,
# the sum of $y$ and the row count: $d^2 + 2d + 2$ numbers, whatever $N$ is. The intercept is not
# penalised, as in scikit-learn's `Ridge`. Sums over two halves of the data add up to the sums over
# the whole:

# %%
X, y, w_true = datasets.linear_regression(N, D, noise=0.5, seed=SEED)
X = X + np.arange(D)  # columns with non-zero means, so the intercept matters
y = y + 3.0
half = N // 2
stats = [cl.linear_statistics(X[:half], y[:half], True), cl.linear_statistics(X[half:], y[half:], True)]
whole = cl.linear_statistics(X, y, True)
print(f"{len(whole)} numbers; max |sum of halves - whole| = {np.abs(stats[0] + stats[1] - whole).max():.2e}")
w_ref, w0_ref = cl.reference_linear(X, y)
print("coefficients from the summed statistics:", np.round(cl.solve_statistics(stats[0] + stats[1], D)[0][:4], 4),
      "... reference:", np.round(w_ref[:4], 4))

# %% [markdown]
# **Lloyd's k-means** alternates two steps: assign every point to its nearest centre, and move every
# centre to the mean of its points. The second step needs, per cluster, the sum of its points and their
# count: $k d + k$ numbers. **Histogram trees.** A gradient-boosted tree is grown from the gradient $g_i$
# and hessian $h_i$ of the loss at every row. Cutting each feature into at most `BINS` bins turns the
# search for the best split into sums per (feature, bin); the split of a node maximises Chen and
# Guestrin's gain (XGBoost, eq. 7)
#
# $$\text{gain} = \frac{1}{2}\left[\frac{G_L^2}{H_L + \lambda} + \frac{G_R^2}{H_R + \lambda} - \frac{(G_L + G_R)^2}{H_L + H_R + \lambda}\right] - \gamma,$$
#
# where $G_L, H_L$ sum the rows of bins up to the cut and $G_R, H_R$ the rest, and $\gamma$ (local to
# this chapter) is the price of one more leaf: a node splits only when its gain is positive. The
# $\frac12$ is a positive factor, so with $\gamma = 0$ it changes the gain's value but neither the split
# chosen nor which nodes split; $\gamma > 0$ turns every node whose bracket is below $2\gamma$ into a
# leaf (the chapter uses $\gamma = 0$; `tests/test_claims_ch12.py` checks both). The leaf value is
# $-\eta\, G / (H + \lambda)$, their optimal weight (eq. 5) shrunk by the learning rate $\eta$.
#
# ## 3. The distribution and communication pattern
#
# Rows are sharded, $N/K$ per worker, and never move. Linear regression: one all-reduce of the
# statistics, then every rank solves the same small system. k-means: one all-reduce per iteration.
# Boosting: one all-reduce per tree level of a (nodes, features, bins, 2) histogram. Logistic
# regression: one all-reduce of $d + 1$ numbers (loss and gradient) per evaluation. With the ring
# all-reduce each rank sends $2\frac{K-1}{K}m$ numbers for a payload of $m$. The contrast is the naive
# fit that gathers every row to rank 0: its bytes grow with $N$. Both are measured below.

# %%
def fit_shard(comm, X, y, fn, ridge=0.0):
    lo, hi = block_range(len(X), comm.size, comm.rank)
    return fn(comm, X[lo:hi], y[lo:hi], ridge)


K_BYTES = 4
sizes = np.unique(np.geomspace(100, N, 6).astype(int))
sent = {"sufficient statistics": [], "gather rows to rank 0": []}
for n in sizes:
    for name, fn in (("sufficient statistics", cl.fit_linear), ("gather rows to rank 0", cl.naive_linear)):
        res = cluster.run(fit_shard, K_BYTES, args=(X[:n], y[:n], fn), timeout=120)
        sent[name].append(max(s.bytes_sent for s in res.stats))
m = cl.linear_statistics_size(D)
assert len(set(sent["sufficient statistics"])) == 1  # the same bytes for every N
assert sent["sufficient statistics"][0] <= 8 * (2 * (K_BYTES - 1) / K_BYTES * m + 2)  # ring formula, within a block
fig, ax = plt.subplots(figsize=(6, 4))
for name, b in sent.items():
    ax.loglog(sizes, b, "o-", label=name)
ax.axhline(8 * 2 * (K_BYTES - 1) / K_BYTES * m, color="gray", ls=":", label="model 2(K-1)/K (d^2+2d+2) x 8 B")
ax.set(xlabel="rows N", ylabel="bytes sent by the busiest rank", title=f"linear regression on K = {K_BYTES}")
ax.legend()
plt.show()
print(f"K = {K_BYTES}, d = {D}: statistics {sent['sufficient statistics'][0]} B per rank at every N; "
      f"gathering {sent['gather rows to rank 0'][-1] / 1e6:.2f} MB at N = {sizes[-1]}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `fit_linear` computes the statistics of its shard, all-reduces them once and solves; `solve_statistics`
# centres through the sums ($X_c^\top X_c = X^\top X - N\bar x\bar x^\top$) and refuses a system that is
# singular to working precision with a message that names the fix.

# %%
from scaleoutai.notebooks import show

show(cl.fit_linear, cl.solve_statistics)

# %% [markdown]
# The check, for every $K$ in `KS`, with and without ridge, and for more ranks than rows (ranks with no
# rows contribute zeros):

# %%
for K in KS:
    for ridge in (0.0, 3.0):
        want = cl.reference_linear(X, y, ridge)
        for w, w0 in cluster.run(fit_shard, K, args=(X, y, cl.fit_linear, ridge), timeout=120).values:
            assert np.allclose(w, want[0], rtol=1e-9, atol=1e-12) and abs(w0 - want[1]) < 1e-9, (K, ridge)
few = cluster.run(fit_shard, 16, args=(X[:10], y[:10], cl.fit_linear, 0.5), timeout=60).values
assert np.allclose(few[0][0], cl.reference_linear(X[:10], y[:10], 0.5)[0], rtol=1e-9)
print(f"fit_linear equals the QR least-squares reference for K in {KS} (ridge 0 and 3) and for K = 16 > 10 rows")

# %% [markdown]
# `kmeans` packs the cluster sums, the counts, the inertia and the number of labels that changed into
# one vector and all-reduces it: every rank then updates the same centres and stops at the same
# iteration. Ties go to the lowest centre index and **an empty cluster keeps its previous centre**, the
# rule the reference follows too (scikit-learn moves an empty cluster to a far point instead).

# %%
show(cl.kmeans)

# %%
Xb, _, _ = datasets.blobs(N, CLUSTERS, d=2, spread=2.0, seed=SEED)
init = cl.init_centres(Xb, CLUSTERS, seed=SEED)
ref_km = cl.reference_kmeans(Xb, init)


def kmeans_shard(comm, X, init, row_seconds=0.0):
    lo, hi = block_range(len(X), comm.size, comm.rank)
    return cl.kmeans(comm, X[lo:hi], init, row_seconds=row_seconds)


fig, ax = plt.subplots(figsize=(6, 4))
for i, K in enumerate(KS):
    vals = cluster.run(kmeans_shard, K, args=(Xb, init), timeout=120).values
    assert np.array_equal(np.concatenate([v["labels"] for v in vals]), ref_km["labels"])
    for counts, labels in zip(vals[0]["counts"], ref_km["labels_per_iteration"]):
        assert np.array_equal(counts, np.bincount(labels, minlength=CLUSTERS))  # same assignments every iteration
    assert np.allclose(vals[0]["centres"], ref_km["centres"], rtol=1e-12)
    ax.plot(np.arange(1, len(vals[0]["history"]) + 1), vals[0]["history"], marker="o", ms=9 - 1.5 * i,
            ls="-" if i == 0 else "none", label=f"K = {K}")
ax.set(xlabel="iteration", ylabel="inertia (sum of squared distances)", yscale="log",
       title="k-means: the same curve for every K")
ax.legend()
plt.show()
print(f"{ref_km['iterations']} iterations to convergence, identical assignments for K in {KS}")

# %% [markdown]
# The booster. Bin edges come from an **all-gathered sample**: each rank contributes up to `sample`
# rows and every rank computes the same quantiles from the same gathered rows (a feature with at most
# `BINS` distinct values gets the midpoints between them, so its bins are exact). Then each level of
# each tree is one `histograms` per rank, one all-reduce, and `best_split` on the totals.

# %%
show(tr.histograms, tr.split_gains, tr.best_split, tr.train_booster)

# %%
Xt, yt = X[:, :D], np.sin(X[:, 0]) * 2 + X[:, 1] * X[:, 2] + 0.3 * (X[:, 3] > 3)
KW = dict(rounds=ROUNDS, depth=DEPTH, bins=BINS, lr=0.3, lam=1.0)
ref_boost = tr.reference_booster(Xt, yt, **KW)


def boost_shard(comm, X, y, sample=10**9, row_seconds=0.0, **kw):
    lo, hi = block_range(len(X), comm.size, comm.rank)
    return tr.train_booster(comm, X[lo:hi], y[lo:hi], sample=sample, row_seconds=row_seconds, **kw)


for K in KS:
    for model in cluster.run(boost_shard, K, args=(Xt, yt), kwargs=KW, timeout=300).values:
        for t, rt in zip(model["trees"], ref_boost["trees"]):
            assert np.array_equal(t["feature"], rt["feature"]) and np.array_equal(t["bin"], rt["bin"])  # same splits
        assert np.allclose(tr.predict(model, Xt), tr.predict(ref_boost, Xt), rtol=1e-12, atol=1e-12)
r2 = 1 - np.mean((yt - tr.predict(ref_boost, Xt)) ** 2) / np.var(yt)
print(f"the booster equals the single-machine booster for K in {KS}: same feature and bin at every node; "
      f"training R^2 = {r2:.3f}")

# %% [markdown]
# The root histogram of the first tree: the gradients summed per bin of the chosen feature (all ranks
# together), and the gain of cutting after each bin. The best cut is where the left and right sums pull
# hardest in opposite directions.

# %%
edges = ref_boost["edges"]
binned = tr.bin_data(Xt, edges)
g0 = ref_boost["base"] - yt  # the gradient of the squared loss at the first round
hist = tr.histograms(binned, g0, np.ones(len(yt)), np.zeros(len(yt), dtype=np.int64), 1, BINS)
gain, f, b = tr.best_split(hist)[0]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].bar(np.arange(BINS), hist[0, f, :, 0], color=["C0" if j <= b else "C1" for j in range(BINS)])
axes[0].set(xlabel=f"bin of feature {f}", ylabel="sum of gradients G", title="root histogram (left | right)")
axes[1].plot(np.arange(BINS - 1), tr.split_gains(hist)[0, f], "o-")
axes[1].axvline(b, color="k", ls="--", lw=1)
axes[1].set(xlabel="cut after bin", ylabel="gain", title=f"best: feature {f}, x <= {edges[f, b]:.3f}")
plt.tight_layout()
plt.show()
assert (f, b) == (ref_boost["trees"][0]["feature"][0], ref_boost["trees"][0]["bin"][0])

# %% [markdown]
# **A model without sufficient statistics: logistic regression.** L2-regularised logistic regression, the
# generalised linear model (GLM) of classification, minimises
#
# $$f(w) = \frac{1}{N}\sum_{i=1}^{N} \log\left(1 + e^{-y_i x_i^\top w}\right) + \frac{\lambda}{2}\lVert w\rVert^2, \qquad y_i \in \{-1, +1\}.$$
#
# Its minimiser is not a function of a fixed set of sums, so one all-reduce no longer fits the model. But
# the loss and its gradient at a given $w$ *are* sums over rows: every evaluation of $f$ costs one
# all-reduce of $d + 1$ numbers, whatever $N$ is, and the question becomes how few evaluations a solver
# needs. `train_lbfgs` runs L-BFGS: it keeps the last $m$ steps $s = w' - w$ and gradient changes
# $y = \nabla f(w') - \nabla f(w)$, and the **two-loop recursion** turns them into a quasi-Newton
# direction with $O(md)$ work. Every rank holds the same history, because every $s$ and $y$ is made
# of all-reduced values, so every rank computes the same direction bit for bit and no broadcast is
# needed. A backtracking (Armijo) line search tries the unit step first; each trial is one all-reduce
# of the loss *and* the gradient, so an accepted unit step costs exactly one round per iteration and a
# rejected one costs one more.

# %%
show(glm.logistic_sums, glm._evaluator, glm._armijo, glm.two_loop, glm.train_lbfgs)

# %%
rng = np.random.default_rng(SEED)
Xg = rng.standard_normal((GLM_N, D)) + 0.2
yg = np.where(rng.random(GLM_N) < 1 / (1 + np.exp(-Xg @ rng.standard_normal(D))), 1.0, -1.0)
w_glm = glm.reference_glm(Xg, yg, GLM_LAM)  # scikit-learn on the whole data (Section 5)
f_star = glm.objective(Xg, yg, w_glm, GLM_LAM)


def glm_shard(comm, X, y, fn, **kw):
    lo, hi = block_range(len(X), comm.size, comm.rank)
    return fn(comm, X[lo:hi], y[lo:hi], GLM_LAM, **kw)


lbfgs_w = {}
for K in KS:
    vals = cluster.run(glm_shard, K, args=(Xg, yg, glm.train_lbfgs), timeout=120).values
    assert all(np.array_equal(v["w"], vals[0]["w"]) for v in vals)  # every rank: the same weights, bit for bit
    assert vals[0]["converged"] and np.linalg.norm(vals[0]["w"] - w_glm) <= 1e-5 * np.linalg.norm(w_glm), K
    lbfgs_w[K] = vals[0]["w"]
few = np.r_[np.flatnonzero(yg > 0)[:3], np.flatnonzero(yg < 0)[:3]]  # 6 rows, both classes, on 8 ranks
w_few = cluster.run(glm_shard, 8, args=(Xg[few], yg[few], glm.train_lbfgs), timeout=60).values[0]["w"]
assert np.linalg.norm(w_few - glm.reference_glm(Xg[few], yg[few], GLM_LAM)) <= 1e-5 * np.linalg.norm(w_few)
K = KS[-1]
res = cluster.run(glm_shard, K, args=(Xg, yg, glm.train_lbfgs), timeout=120)
rounds, lbfgs_iters = int(res.values[0]["rounds"][-1]), res.values[0]["iterations"]
per_round = [compression.ring_allreduce_bytes(D + 1, K, r, 8) for r in range(K)]
assert [s.bytes_sent for s in res.stats] == [compression.ring_allreduce_bytes(1, K, r, 8) + rounds * per_round[r]
                                              for r in range(K)]  # the row count once, then d + 1 per round
assert max(np.abs(w - lbfgs_w[1]).max() for w in lbfgs_w.values()) < 1e-9
print(f"L-BFGS equals scikit-learn (relative error <= 1e-5) for K in {KS} and for 8 ranks holding 6 rows; "
      f"the weights differ across K by {max(np.abs(w - lbfgs_w[1]).max() for w in lbfgs_w.values()):.1e}. "
      f"K = {K}: {lbfgs_iters} iterations, {rounds} all-reduces of {D + 1} numbers, "
      f"{max(per_round)} B per round per rank")

# %% [markdown]
# **Consensus ADMM** (Boyd et al., 2011) splits the problem instead: rank $k$ keeps its own $x_k$, and the
# constraint $x_k = z$ is enforced by a scaled dual variable $u_k$. Each iteration solves a local problem
# with no messages (a few Newton steps on its own rows), then one all-reduce of $\sum_k (x_k + u_k)$ gives
# the new consensus $z$, and each rank updates its dual:
#
# $$x_k \leftarrow \arg\min_x f_k(x) + \tfrac{\rho}{2}\lVert x - z + u_k\rVert^2,\quad
#   z \leftarrow \frac{K\rho\,(\bar x + \bar u)}{\lambda + K\rho},\quad u_k \leftarrow u_k + x_k - z.$$
#
# The primal residual $r = (\sum_k \lVert x_k - z\rVert^2)^{1/2}$ rides in the next iteration's
# all-reduce ($d + 1$ numbers in all); the dual residual $s = \rho\sqrt{K}\lVert z - z_{\text{prev}}\rVert$
# needs no message. Because $f$ is $\lambda$-strongly convex, the residuals bound the distance to the
# optimum: $\lVert z - w^\star\rVert \le (L r + \sqrt{K} s)/\lambda$ with $L$ from the shards' Lipschitz
# constants (the docstring derives it), and the notebook checks the bound.

# %%
show(glm._local_x, glm.train_admm)

# %%
res = cluster.run(glm_shard, 4, args=(Xg, yg, glm.train_admm), kwargs=dict(rho=GLM_RHO, iters=60), timeout=120)
admm = res.values[0]
err = np.linalg.norm(admm["w"] - w_glm)
assert err <= admm["error_bound"] + 1e-8 and admm["error_bound"] < 1e-3 * np.linalg.norm(w_glm)
print(f"ADMM on K = 4 after {admm['iterations']} iterations: primal residual {admm['primal_residual'][-1]:.1e}, "
      f"dual {admm['dual_residual'][-1]:.1e}; |z - w*| = {err:.1e} <= bound {admm['error_bound']:.1e}")

# %% [markdown]
# ## 5. The same task with production libraries: scikit-learn and LightGBM
#
# scikit-learn is the single-machine reference: `LinearRegression` and `Ridge` must give our
# coefficients, `KMeans` started from our centres with Lloyd's algorithm must give our labels, and
# `HistGradientBoostingRegressor` with the same depth, rounds and bins should reach a similar accuracy
# (its tree growth and binning differ, so only the accuracy is compared). `LogisticRegression` with
# $C = 1/(N\lambda)$ and no intercept minimises $C N f(w)$, the same minimiser as Section 4's $f$: its
# `newton-cholesky` solver is our reference, and its `lbfgs` solver (SciPy's L-BFGS-B) must land on the
# same weights.

# %%
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.ensemble import HistGradientBoostingRegressor  # noqa: E402
from sklearn.linear_model import LinearRegression, Ridge  # noqa: E402

ours = cluster.run(fit_shard, 4, args=(X, y, cl.fit_linear), timeout=120).values[0]
sk = LinearRegression().fit(X, y)
assert np.allclose(ours[0], sk.coef_, rtol=1e-9) and abs(ours[1] - sk.intercept_) < 1e-9
ours_r = cluster.run(fit_shard, 4, args=(X, y, cl.fit_linear, 5.0), timeout=120).values[0]
sk_r = Ridge(alpha=5.0).fit(X, y)
assert np.allclose(ours_r[0], sk_r.coef_, rtol=1e-9) and abs(ours_r[1] - sk_r.intercept_) < 1e-9
km = KMeans(CLUSTERS, init=init, n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(Xb)
assert np.array_equal(km.labels_, ref_km["labels"]) and abs(km.inertia_ - ref_km["inertia"]) < 1e-9 * km.inertia_
hgb = HistGradientBoostingRegressor(max_iter=ROUNDS, max_depth=DEPTH, learning_rate=0.3, max_bins=BINS,
                                    early_stopping=False).fit(Xt, yt)
r2_hgb = hgb.score(Xt, yt)
assert abs(r2 - r2_hgb) < 0.1
print(f"LinearRegression, Ridge: coefficients equal ours; KMeans: same labels, inertia {km.inertia_:.1f} vs "
      f"{ref_km['inertia']:.1f}; HistGradientBoosting R^2 {r2_hgb:.3f} vs ours {r2:.3f}")

# %%
from sklearn.linear_model import LogisticRegression  # noqa: E402

C = 1 / (GLM_N * GLM_LAM)
sk_lbfgs = LogisticRegression(C=C, fit_intercept=False, solver="lbfgs", tol=1e-10, max_iter=1000).fit(Xg, yg)
gap_sk = np.linalg.norm(sk_lbfgs.coef_.ravel() - lbfgs_w[KS[-1]]) / np.linalg.norm(w_glm)
assert sk_lbfgs.n_iter_[0] < 1000 and gap_sk < 1e-5
print(f"LogisticRegression(C = 1/(N lambda) = {C:g}, no intercept, solver='lbfgs'): {sk_lbfgs.n_iter_[0]} iterations "
      f"on one machine; our L-BFGS: {lbfgs_iters} iterations on K = {KS[-1]}; relative gap {gap_sk:.1e}")

# %% [markdown]
# **LightGBM's data-parallel learner.** With `tree_learner="data"` every LightGBM process keeps its
# own rows (`pre_partition=True`), builds local histograms and merges them with a reduce-scatter over
# its own socket network, the pattern of Section 3 (it reduces only the features each machine is
# responsible for, then shares the best splits). `tr.run_lightgbm_data_parallel` starts one process
# per shard on free local ports, with a timeout, and kills them all if one fails.
#
# What we compare. Features with 16 distinct values make every binning exact: LightGBM's bin
# boundaries and ours are the midpoints between neighbouring values, so the first split (feature and
# threshold) must agree with ours and with single-process LightGBM. The gains differ by the factor of
# eq. 7: LightGBM's `split_gain` is the bracket without the $\frac12$ (and it does not subtract
# `min_gain_to_split`, which plays the role of $2\gamma$: `tests/test_claims_ch12.py` measures both), so
# its gain must be exactly twice ours. With
# `num_leaves = 4` and `max_depth = 2` LightGBM's leaf-wise growth builds the same full depth-2 trees
# as our level-wise growth, so whole predictions can be compared too.

# %%
import lightgbm as lgb  # noqa: E402

rng = np.random.default_rng(SEED)
Xi = rng.integers(0, 16, size=(N, 4)).astype(float)
yi = 0.5 * Xi[:, 1] - 3.0 * (Xi[:, 2] > 7) + 0.5 * rng.standard_normal(N)
LGB = dict(objective="regression", num_leaves=4, max_depth=2, learning_rate=0.5, min_data_in_leaf=1,
           min_sum_hessian_in_leaf=0.0, lambda_l2=1.0, max_bin=63, verbose=-1, num_threads=1, seed=SEED)
t0 = time.perf_counter()
models = tr.run_lightgbm_data_parallel([(Xi[: N // 2], yi[: N // 2]), (Xi[N // 2:], yi[N // 2:])], LGB, rounds=3,
                                       timeout=180)
lgb_seconds = time.perf_counter() - t0
trees_per_machine = [lgb.Booster(model_str=text).dump_model()["tree_info"] for text in models]
assert len(trees_per_machine) == 2 and trees_per_machine[0] == trees_per_machine[1]  # 2 machines, one model
single = lgb.train(LGB, lgb.Dataset(Xi, yi), num_boost_round=3)
mine = tr.reference_booster(Xi, yi, rounds=3, depth=2, bins=63, lam=1.0, lr=0.5)
root, root1 = trees_per_machine[0][0]["tree_structure"], single.dump_model()["tree_info"][0]["tree_structure"]
print(f"{'':>26} {'feature':>8} {'threshold':>10} {'gain':>12}  (LightGBM: no 1/2)")
for name, feat, thr, gn in (("LightGBM, 2 machines", root["split_feature"], root["threshold"], root["split_gain"]),
                            ("LightGBM, 1 process", root1["split_feature"], root1["threshold"], root1["split_gain"]),
                            ("ours (histogram split)", mine["trees"][0]["feature"][0], mine["trees"][0]["threshold"][0],
                             mine["trees"][0]["gain"][0]), ("2 x ours", mine["trees"][0]["feature"][0],
                             mine["trees"][0]["threshold"][0], 2 * mine["trees"][0]["gain"][0])):
    print(f"{name:>26} {feat:>8} {thr:>10.4f} {gn:>12.2f}")
assert root["split_feature"] == root1["split_feature"] == mine["trees"][0]["feature"][0]
assert abs(root["threshold"] - mine["trees"][0]["threshold"][0]) < 1e-9
assert abs(root["split_gain"] - 2 * mine["trees"][0]["gain"][0]) < 1e-5 * root["split_gain"]  # float32 in the dump
lgb_parallel = lgb.Booster(model_str=models[0]).predict(Xi)
gap = np.abs(tr.predict(mine, Xi) - lgb_parallel).max()
assert np.allclose(lgb_parallel, single.predict(Xi), atol=1e-9) and gap < 1e-5
print(f"2 LightGBM processes trained one model in {lgb_seconds:.1f} s (process start-up included); "
      f"its predictions equal single-process LightGBM and ours to {gap:.1e}")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Ill-conditioned statistics.** Forming $X^\top X$ squares the condition number of $X$. Two nearly
# collinear columns make it large, and float32 (about 7 significant digits) then loses several digits of
# the coefficients, while float64 keeps them (the reference solves by QR and never forms $X^\top X$). A ridge penalty adds $\lambda$ to every eigenvalue and restores
# accuracy, at the price of a (small, here) bias.

# %%
rng = np.random.default_rng(SEED)
a = rng.standard_normal(N)
Xc = np.c_[a, a + 3e-3 * rng.standard_normal(N), rng.standard_normal(N)]
yc = Xc @ np.array([1.0, -1.0, 2.0]) + 0.01 * rng.standard_normal(N)
print(f"condition number of X^T X: {np.linalg.cond(Xc.T @ Xc):.1e}")
errors = {}
for lam in (0.0, 1.0):
    want = cl.reference_linear(Xc, yc, lam)[0]
    for dtype in (np.float64, np.float32):
        got = cluster.run(fit_shard, 4, args=(Xc.astype(dtype), yc.astype(dtype), cl.fit_linear, lam), timeout=60)
        errors[(lam, dtype.__name__)] = np.abs(got.values[0][0] - want).max()
        print(f"ridge {lam:>3}: {dtype.__name__:>7} normal equations, max coefficient error {errors[(lam, dtype.__name__)]:.1e}")
assert errors[(0.0, "float32")] > 1e3 * errors[(0.0, "float64")]
assert errors[(1.0, "float32")] < errors[(0.0, "float32")] / 10

# %% [markdown]
# With fewer rows than features the system is singular and `fit_linear` says so, on the rank that
# noticed, instead of returning noise:

# %%
try:
    cluster.run(fit_shard, 2, args=(X[:4], y[:4], cl.fit_linear), timeout=60)
    raise AssertionError("a singular system was solved")
except cluster.RankError as err:
    assert "pass ridge > 0" in str(err)
    print("fewer rows than features:", [line for line in str(err).splitlines() if "ValueError" in line][-1])

# %% [markdown]
# **An empty cluster.** A centre placed far from every point receives no points; it keeps its centre
# (our rule) on every rank, because every rank sees the same all-reduced count of zero.

# %%
far = np.r_[init[:-1], [[1e4, 1e4]]]
vals = cluster.run(kmeans_shard, 4, args=(Xb, far), timeout=120).values
ref_far = cl.reference_kmeans(Xb, far)
assert all(c[-1] == 0 for c in vals[0]["counts"]) and np.array_equal(vals[0]["centres"][-1], far[-1])
assert np.array_equal(np.concatenate([v["labels"] for v in vals]), ref_far["labels"])
print(f"cluster {CLUSTERS - 1} stayed empty for all {vals[0]['iterations']} iterations; inertia "
      f"{vals[0]['inertia']:.0f} vs {ref_km['inertia']:.0f} from the good start")

# %% [markdown]
# **A rank whose shard holds one class only.** Data sorted by label before sharding is common (files
# written per day, per region, per outcome). Summed histograms do not care: the distributed booster
# still equals the single-machine one. A shortcut that trains one booster per rank and averages them
# does care: the rank that saw only negatives predicts negative everywhere.

# %%
yl = (yt > np.median(yt)).astype(float)
order = np.argsort(yl, kind="stable")
Xs, ys = Xt[order], yl[order]
KWL = dict(KW, loss="logistic")
ref_log = tr.reference_booster(Xs, ys, **KWL)
dist = cluster.run(boost_shard, 4, args=(Xs, ys), kwargs=KWL, timeout=300).values[0]
assert np.allclose(tr.predict(dist, Xs), tr.predict(ref_log, Xs), rtol=1e-12)
local = [tr.reference_booster(Xs[lo:hi], ys[lo:hi], edges=ref_log["edges"], **KWL)
         for lo, hi in (block_range(N, 4, r) for r in range(4))]
averaged = np.mean([tr.predict(m, Xs) for m in local], axis=0)
acc = {name: np.mean((p > 0.5) == ys) for name, p in (("distributed histograms", tr.predict(dist, Xs)),
                                                      ("average of local boosters", averaged))}
print("shard label means:", [float(ys[lo:hi].mean()) for lo, hi in (block_range(N, 4, r) for r in range(4))])
print({k: round(float(v), 3) for k, v in acc.items()})
assert acc["distributed histograms"] > acc["average of local boosters"] + 0.05

# %% [markdown]
# **Uneven shards in LightGBM.** LightGBM's data-parallel learner starts boosting from the mean label
# synchronised as the *unweighted* mean of the machines' means, so with shards of different sizes its
# first score is off and the first rounds spend themselves correcting it (each round removes about a
# fraction $\eta$ of a constant offset). Our booster all-reduces the sum of $y$ and the count instead.

# %%
q = N // 4
uneven = tr.run_lightgbm_data_parallel([(Xi[:q], yi[:q]), (Xi[q:], yi[q:])], LGB, rounds=3, timeout=180)
offset = (yi[:q].mean() + yi[q:].mean()) / 2 - yi.mean()
left = float(np.mean(lgb.Booster(model_str=uneven[0]).predict(Xi) - single.predict(Xi)))
print(f"mean of machine means - global mean = {offset:+.4f}; after 3 rounds the predictions still differ by "
      f"{left:+.4f} (offset x (1 - 0.5)^3 = {offset * 0.125:+.4f})")
assert abs(left - offset * 0.125) < 0.2 * abs(offset * 0.125) + 1e-4

# %% [markdown]
# **A crashed rank** ends the all-reduce, and with it the fit, on every rank (Chapter 2). Nothing is
# lost but time: the statistics are recomputed from the shards, which live in storage (Chapter 8).
#
# ## 7. Evaluation: speedup, efficiency, cost
#
# On the simulator, each rank pays `ROW_SECONDS` per value of its rows per pass (assignment in
# k-means, histogram building per tree level in boosting) and the network pays $\alpha$ and $\beta$.
# Compute falls as $1/K$; the all-reduce of a fixed payload grows with the $2(K-1)$ latency terms of
# the ring, so the speedup flattens when the per-level histograms cost as much to reduce as to build.

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)
times = {"k-means": {}, "boosting": {}}
hist_bytes = {}
for K in KS:
    res = cluster.run(kmeans_shard, K, args=(Xb, init, ROW_SECONDS), network=net, timeout=300)
    times["k-means"][K] = res.sim_time
    res = cluster.run(boost_shard, K, args=(Xt, yt), kwargs=dict(KW, row_seconds=ROW_SECONDS, sample=2048),
                      network=net, timeout=300)
    times["boosting"][K] = res.sim_time
    hist_bytes[K] = max(s.bytes_sent for s in res.stats)
price = capstone.lookup("aws-c7i.xlarge")
for job, tk in times.items():
    print(f"{job}:")
    print(f"{'K':>4} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'USD per 1000 fits':>18}")
    for row in perf.scaling_table(tk):
        cost = perf.run_cost(price.price_per_hour, row["p"], 1000 * row["time"])
        print(f"{row['p']:>4} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {cost:>18.5f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
perf.plot_scaling(times["k-means"], ax=axes[0], title="k-means on the simulator")
perf.plot_scaling(times["boosting"], ax=axes[1], title="histogram boosting on the simulator")
plt.show()
assert perf.scaling_table(times["boosting"])[-1]["speedup"] > 1.0

# %% [markdown]
# The bytes of boosting depend on the trees, not on the rows: the same booster on a tenth of the rows,
# with the same bin edges, sends the same bytes whenever the trees have the same shape.

# %%
K = 4
by_n = {}
for n in (N // 10, N):
    res = cluster.run(boost_shard, K, args=(Xt[:n], yt[:n]), kwargs=dict(KW, edges=edges), timeout=300)
    full = all((t["feature"][:7] >= 0).all() for t in res.values[0]["trees"]) if DEPTH == 3 else False
    by_n[n] = (max(s.bytes_sent for s in res.stats), full)
    print(f"N = {n:>6}: busiest rank sent {by_n[n][0] / 1e3:.1f} KB for {ROUNDS} trees of depth {DEPTH} "
          f"(all nodes split: {full})")
per_level = tr.histogram_bytes(1, D, BINS, K)
print(f"model: one node's histogram costs 2(K-1)/K x {D} features x {BINS} bins x 2 x 8 B = {per_level:.0f} B per rank")
if all(full for _, full in by_n.values()):
    assert by_n[N // 10][0] == by_n[N][0]

# %% [markdown]
# **Logistic regression: rounds, bytes and time to the same loss.** The three solvers of Section 4 on
# $K = 8$ ranks, each run until $f(w) - f^\star \le 10^{-10} f^\star$ (for ADMM, $f$ at each consensus
# $z$, computed here on one machine). Newton is the chapter's sufficient-statistics approach applied at
# every iterate: it all-reduces the Hessian $X^\top D X$ too, $d^2 + d + 1$ numbers per round. L-BFGS
# and ADMM send $d + 1$. The time per round is the ring's $2(K-1)(\alpha + \frac{m}{K}8\beta)$ from
# Chapter 4. ADMM's count depends on $\rho$ (Exercise 7 sweeps it).

# %%
K = 8
solvers = {"Newton (Hessian all-reduced)": (glm.train_newton, {}, D * D + D + 1),
           "L-BFGS": (glm.train_lbfgs, {}, D + 1),
           f"ADMM, rho = {GLM_RHO:g}": (glm.train_admm, dict(rho=GLM_RHO, iters=40), D + 1)}
target = 1e-10 * f_star
curves, reach = {}, {}
for name, (fn, kw, m) in solvers.items():
    res = cluster.run(glm_shard, K, args=(Xg, yg, fn), kwargs=kw, timeout=120)
    v = res.values[0]
    path = v["history"] if "history" in v else np.array([glm.objective(Xg, yg, z, GLM_LAM) for z in v["z_history"]])
    curves[name] = (v["rounds"], np.maximum(path - f_star, 1e-17))
    hit = np.flatnonzero(path - f_star <= target)
    assert len(hit), f"{name} did not reach f* + target"
    r_hit = int(v["rounds"][hit[0]])
    per = compression.ring_allreduce_bytes(m, K, 0, 8)
    reach[name] = (r_hit, m, r_hit * per, r_hit * perf.collective_time("ring_allreduce", 8 * m, K, ALPHA, BETA))
print(f"{'solver':>30} {'rounds':>7} {'numbers/round':>14} {'bytes (rank 0)':>15} {'time (ms)':>10}")
for name, (r_hit, m, b, t) in reach.items():
    print(f"{name:>30} {r_hit:>7} {m:>14} {b:>15} {t * 1e3:>10.3f}")
fig, ax = plt.subplots(figsize=(6.5, 4))
for name, (x, sub) in curves.items():
    ax.semilogy(x, sub, "o-" if "ADMM" not in name else "-", ms=4, label=name)
ax.axhline(target, color="gray", ls=":", label="target 1e-10 f*")
ax.set(xlabel="all-reduce rounds", ylabel="f(w) - f*", title=f"logistic regression on K = {K}")
ax.legend(fontsize=8)
plt.show()
newton, lbfgs, admm_reach = reach["Newton (Hessian all-reduced)"], reach["L-BFGS"], reach[f"ADMM, rho = {GLM_RHO:g}"]
assert newton[0] < lbfgs[0] < admm_reach[0] and lbfgs[2] < newton[2]
# the d at which L-BFGS's extra rounds cost less than Newton's d^2 numbers, if the round counts held
d_cross = next(d for d in range(1, 10_000) if lbfgs[0] * perf.collective_time("ring_allreduce", 8 * (d + 1), K, ALPHA, BETA)
               < newton[0] * perf.collective_time("ring_allreduce", 8 * (d * d + d + 1), K, ALPHA, BETA))
print(f"Newton needs the fewest rounds ({newton[0]}) but {newton[1]} numbers each; L-BFGS {lbfgs[0]} rounds of "
      f"{lbfgs[1]}; ADMM {admm_reach[0]}. With alpha = {ALPHA:g} s latency dominates at d = {D}; the model puts "
      f"the d where L-BFGS becomes faster than Newton at about {d_cross} (and Newton also pays O(N d^2) "
      f"flops per round and a d^3 solve)")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Half the matrix.** $X^\top X$ is symmetric. Send only its upper triangle and measure the bytes
#    saved. For which $d$ does the all-reduce's latency, not its bandwidth, dominate anyway?
# 2. **Two passes for accuracy.** Centre the data with an all-reduce of the means first, then all-reduce
#    the centred statistics. Repeat the float32 experiment of Section 6 with columns whose mean is 1000.
#    Which of the two failure modes does the second pass fix?
# 3. **The subtraction trick.** A node's two children's histograms sum to the parent's. All-reduce only
#    the smaller child's histogram and subtract. Count the bytes per level before and after.
# 4. **Mini-batch k-means.** Replace the full assignment by a sample of $b$ points per rank per
#    iteration. Plot inertia against bytes sent for several $b$.
# 5. **k-means++ on K ranks.** Initialise with k-means++ where each rank holds its shard: which
#    quantities must be all-reduced per chosen centre, and how many rounds does it take?
# 6. **Loss-only line-search trials.** `train_lbfgs` all-reduces the gradient with every trial. Write a
#    variant whose trials all-reduce the loss only (one number) and that fetches the gradient once a
#    trial is accepted. On the Section 7 problem, count rounds and bytes of both; under the
#    $\alpha$-$\beta$ model, for which $d$ does each variant win?
# 7. **Choosing $\rho$.** Sort the logistic-regression rows by label before sharding (as in Section 6)
#    and sweep ADMM's $\rho$ over two decades. How do the rounds to $10^{-10} f^\star$ change against the
#    IID shards? Implement the residual-balancing rule of Boyd et al. (Section 3.4.1: multiply $\rho$ by
#    2 when $r > 10 s$, divide when $s > 10 r$, and rescale $u$) and compare.
#
# ## 9. Research directions
#
# - **Communication-efficient boosting.** Histograms grow with features x bins x nodes, which dominates
#   for wide data. Sending only the features likely to win, voting on them first, or quantising
#   gradients to a few bits cuts the bytes; how far this can go without changing the trees is open.
#   - Chen and Guestrin, "XGBoost: A Scalable Tree Boosting System", KDD, 2016. The regularised gain,
#     weighted quantile sketches for bin edges, and the distributed histogram aggregation.
#   - Ke et al., "LightGBM: A Highly Efficient Gradient Boosting Decision Tree", NeurIPS, 2017.
#     Gradient-based sampling and exclusive feature bundling, with the data-parallel learner of Section 5.
#   - Meng et al., "A Communication-Efficient Parallel Algorithm for Decision Tree", NeurIPS, 2016.
#     Parallel voting: each machine proposes its top features and only those histograms are merged.
# - **Scalable initialisation of clustering.** k-means++ is inherently sequential (k passes over the
#   data); oversampling in few rounds keeps its guarantee with far fewer passes, but the best trade-off
#   between rounds, bytes and quality on skewed data is not settled.
#   - Bahmani, Moseley, Vattani, Kumar and Vassilvitskii, "Scalable K-Means++", VLDB, 2012. k-means||:
#     O(log N) rounds of oversampling, then a weighted recluster on one machine.
# - **Beyond one all-reduce: solvers for huge d.** When $d^2$ numbers no longer fit, the statistics
#   approach breaks and iterative or sketched solvers take over; their communication-accuracy
#   trade-offs are an active topic.
#   - Meng et al., "MLlib: Machine Learning in Apache Spark", JMLR, 2016. The library that runs these
#     models on Spark (Chapter 7), normal equations for small d and L-BFGS for large d.
#   - Pilanci and Wainwright, "Iterative Hessian Sketch: Fast and Accurate Solution Approximation for
#     Constrained Least-Squares", JMLR, 2016. Random projections of X that shrink what must be sent.
#   - Murray et al., "Randomized Numerical Linear Algebra: A Perspective on the Field With an Eye to
#     Software", arXiv preprint, 2023. A monograph on sketching for least squares and low-rank
#     approximation that proposes RandBLAS and RandLAPACK as standard libraries.
# - **Distributed GLMs: fewer rounds or fewer bytes.** Section 7 measured the trade: Newton needs few
#   rounds of $d^2$ numbers, L-BFGS more rounds of $d + 1$, ADMM trades local work for rounds and hinges
#   on $\rho$. Compressing or sketching curvature so that a Newton-like rate costs $O(d)$ bytes per round,
#   and tuning ADMM without hand-picked penalties on non-IID shards (Chapter 14), are active topics.
#   - Liu and Nocedal, "On the limited memory BFGS method for large scale optimization", Mathematical
#     Programming, 1989. L-BFGS and the scaled initial matrix $(s^\top y / y^\top y) I$ that `two_loop` uses.
#   - Boyd, Parikh, Chu, Peleato and Eckstein, "Distributed Optimization and Statistical Learning via the
#     Alternating Direction Method of Multipliers", Foundations and Trends in Machine Learning, 2011.
#     Consensus ADMM, its residuals and stopping rules, and the splitting across examples of Section 4.
#   - Islamov, Qian, Hanzely, Safaryan and Richtárik, "Distributed Newton-Type Methods with Communication
#     Compression and Bernoulli Aggregation", arXiv:2206.03588, 2022. Compressed and lazily aggregated
#     Hessians that keep local superlinear rates.
#   - Song, Wang and Zuazua, "FedADMM-InSa: An Inexact and Self-Adaptive ADMM for Federated Learning",
#     arXiv:2402.13989, 2024. A criterion for how exactly each client solves its local problem, and a
#     per-client penalty $\rho$ adapted during training.
#   - Gupta, Jindal, Kashyap, Jeevan and Sethi, "FLeNS: Federated Learning with Enhanced Nesterov-Newton
#     Sketch", arXiv:2409.15216, 2024. Sketched Hessians with Nesterov acceleration instead of $d \times d$
#     matrices on the wire.
#   - Sen, Nair and Mohan, "Accelerated Training of Federated Learning via Second-Order Methods",
#     arXiv:2505.23588, 2025. A survey that compares second-order federated methods by rounds, local
#     computation, memory and bytes transmitted.
# - **Kernel machines at scale.** A kernel model over $N$ examples needs an $N \times N$ matrix that no
#   single machine holds; Nyström sketches, preconditioned iterative solvers and models whose number of
#   centres is decoupled from $N$ make it tractable, but distributing them with little communication is
#   still being worked out.
#   - Frangella, Tropp and Udell, "Randomized Nyström Preconditioning", SIAM Journal on Matrix Analysis and
#     Applications, 2023. A low-rank Nyström approximation used as a preconditioner for conjugate
#     gradients, with a condition number that stays bounded once the rank exceeds the effective dimension.
#   - Abedsoltan, Belkin and Pandit, "Toward Large Kernel Models", ICML, 2023. EigenPro 3.0: projected,
#     preconditioned SGD for kernel models whose number of centres is chosen independently of $N$, trained
#     on several GPUs.
#
# ## What's next
#
# Chapter 13 (Distributed graph ML) keeps the all-reduce and the shards but loses their independence:
# a graph's edges cross shards, so partitioning the vertices decides how many messages every superstep of
# PageRank and every GNN layer must send.
