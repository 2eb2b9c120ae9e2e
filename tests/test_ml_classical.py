"""Chapter 12: linear/ridge regression from sufficient statistics and distributed k-means equal their
single-machine references (and scikit-learn) for every K, uneven shards and K larger than the data."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_bounds
from scaleoutai.ml import classical as cl

KS = [1, 2, 3, 5, 8]
TOL = {np.float64: 1e-9, np.float32: 2e-3}  # relative to the largest coefficient


def cuts(n, K, uneven):
    """Shard bounds: np.array_split's blocks, or ragged ones (rank 0 holds half, rank 1 none when K >= 3)."""
    if not uneven or K == 1:
        return block_bounds(n, K)
    sizes = [n // 2] + [hi - lo for lo, hi in block_bounds(n - n // 2, K - 1)]
    if K >= 3:
        sizes[2], sizes[1] = sizes[2] + sizes[1], 0
    edges = np.cumsum([0] + sizes)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def fit_on(X, y, K, uneven=False, ridge=0.0, intercept=True, fn=cl.fit_linear, backend="sim"):
    bounds = cuts(len(X), K, uneven)

    def worker(comm):
        lo, hi = bounds[comm.rank]
        return fn(comm, X[lo:hi], y[lo:hi], ridge, intercept)
    return cluster.run(worker, K, backend=backend, timeout=120)


def data(n=300, d=4, dtype=np.float64, seed=0):
    X, y, _ = datasets.linear_regression(n, d, noise=0.5, seed=seed)
    X = X + np.arange(d)  # non-zero means: the intercept matters
    y = y + 3.0
    return X.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("ridge", [0.0, 2.5])
def test_sufficient_statistics_fit_equals_the_closed_form(K, uneven, dtype, ridge):
    X, y = data(dtype=dtype)
    w_ref, b_ref = cl.reference_linear(X.astype(np.float64), y.astype(np.float64), ridge)
    res = fit_on(X, y, K, uneven, ridge)
    scale = np.abs(w_ref).max()
    for w, b in res.values:
        assert w.dtype == dtype
        assert np.abs(w - w_ref).max() <= TOL[dtype] * scale
        assert abs(b - b_ref) <= TOL[dtype] * max(1.0, abs(b_ref))
    assert all(np.array_equal(v[0], res.values[0][0]) for v in res.values)  # every rank solves the same system


@pytest.mark.parametrize("ridge", [0.0, 0.7, 40.0])
@pytest.mark.parametrize("intercept", [True, False])
def test_matches_scikit_learn_linear_regression_and_ridge(ridge, intercept):
    from sklearn.linear_model import LinearRegression, Ridge

    X, y = data(n=500, d=6, seed=3)
    sk = (Ridge(alpha=ridge, fit_intercept=intercept) if ridge else LinearRegression(fit_intercept=intercept)).fit(X, y)
    w, b = fit_on(X, y, 3, ridge=ridge, intercept=intercept).values[1]
    np.testing.assert_allclose(w, sk.coef_, rtol=1e-9, atol=1e-10)
    assert abs(b - sk.intercept_) < 1e-9  # sklearn's Ridge does not penalise the intercept, nor do we
    if ridge:
        w_pen, _ = cl.reference_linear(np.c_[X, np.ones(len(X))], y, ridge, intercept=False)
        assert not np.allclose(w_pen[:-1], sk.coef_, atol=1e-6)  # penalising the intercept would differ


def test_more_ranks_than_rows_leaves_ranks_empty_and_still_fits():
    X, y = data(n=6, d=2)
    res = fit_on(X, y, 8, ridge=0.1)
    w_ref, b_ref = cl.reference_linear(X, y, 0.1)
    for w, b in res.values:
        np.testing.assert_allclose(w, w_ref, rtol=1e-10)
        assert abs(b - b_ref) < 1e-10


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_bytes_per_rank_are_the_ring_allreduce_of_the_statistics_independent_of_n(K):
    d = 5
    m = cl.linear_statistics_size(d)
    assert m == d * d + 2 * d + 2
    blocks = [hi - lo for lo, hi in block_bounds(m, K)]
    want = [8 * (2 * m - blocks[r] - blocks[(r + 1) % K]) for r in range(K)]  # all blocks but two, once each
    for n in (50, 5000):
        X, y = data(n=n, d=d)
        sent = [s.bytes_sent for s in fit_on(X, y, K).stats]
        assert sent == want
        assert sum(sent) == 8 * 2 * (K - 1) * m


def test_gathering_rows_costs_bytes_proportional_to_n_and_gives_the_same_model():
    d, K = 4, 4
    sent = {}
    for n in (100, 1000):
        X, y = data(n=n, d=d)
        res = fit_on(X, y, K, fn=cl.naive_linear)
        w_ref, b_ref = cl.reference_linear(X, y)
        for w, b in res.values:
            np.testing.assert_allclose(w, w_ref, rtol=1e-12)
            assert abs(b - b_ref) < 1e-12
        sent[n] = sum(s.bytes_sent for s in res.stats)
        rows_moved = n - (block_bounds(n, K)[0][1])
        assert sent[n] >= 8 * rows_moved * (d + 1)  # every row off rank 0 travels once
    assert sent[1000] > 9 * sent[100] * 0.9


def test_singular_system_is_a_readable_error_and_ridge_fixes_it():
    X, y = data(n=3, d=5)  # fewer rows than features
    with pytest.raises(cluster.RankError, match="singular.*ridge > 0"):
        fit_on(X, y, 2)
    w, _ = fit_on(X, y, 2, ridge=1.0).values[0]
    np.testing.assert_allclose(w, cl.reference_linear(X, y, 1.0)[0], rtol=1e-9)


def test_float32_normal_equations_lose_accuracy_on_ill_conditioned_data_and_ridge_helps():
    rng = np.random.default_rng(0)
    n = 2000
    a = rng.standard_normal(n)
    X = np.c_[a, a + 3e-3 * rng.standard_normal(n), rng.standard_normal(n)]
    y = X @ np.array([1.0, -1.0, 2.0]) + 0.01 * rng.standard_normal(n)
    w64 = cl.reference_linear(X, y)[0]
    err32 = np.abs(fit_on(X.astype(np.float32), y.astype(np.float32), 3).values[0][0] - w64).max()
    err64 = np.abs(fit_on(X, y, 3).values[0][0] - w64).max()
    assert err32 > 1e3 * err64 and err32 > 1e-3
    lam = 1.0
    ridge64 = cl.reference_linear(X, y, lam)[0]
    err32_ridge = np.abs(fit_on(X.astype(np.float32), y.astype(np.float32), 3, ridge=lam).values[0][0] - ridge64).max()
    assert err32_ridge < err32 / 10


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="shape"):
        cl.reference_linear(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(TypeError, match="floating"):
        cl.reference_linear(np.zeros((3, 2), dtype=int), np.zeros(3))
    with pytest.raises(ValueError, match="ridge"):
        cl.reference_linear(np.zeros((3, 2)), np.zeros(3), ridge=-1)
    with pytest.raises(ValueError, match="centres of shape"):
        cl.reference_kmeans(np.zeros((5, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="k <= n"):
        cl.init_centres(np.zeros((3, 2)), 4)


@pytest.mark.slow
def test_fit_linear_on_two_processes_equals_the_simulator():
    X, y = data(n=400, d=5)
    sim = fit_on(X, y, 2, ridge=0.3).values
    proc = fit_on(X, y, 2, ridge=0.3, backend="process")
    assert all(np.array_equal(p[0], s[0]) for p, s in zip(proc.values, sim))  # same sums in the same order
    assert proc.stats[0].bytes_sent == 8 * cl.linear_statistics_size(5)


# --- k-means ---------------------------------------------------------------------------------------

def kmeans_on(X, init, K, uneven=False, iters=100, backend="sim"):
    bounds = cuts(len(X), K, uneven)

    def worker(comm):
        lo, hi = bounds[comm.rank]
        return cl.kmeans(comm, X[lo:hi], init, iters)
    return cluster.run(worker, K, backend=backend, timeout=120).values


BLOBS = datasets.blobs(600, 5, d=3, spread=2.5, seed=4)[0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
@pytest.mark.parametrize("K", KS)
def test_kmeans_equals_lloyd_on_one_machine_at_every_iteration(K, uneven, dtype):
    X = BLOBS.astype(dtype)
    init = cl.init_centres(X, 5, seed=1)
    ref = cl.reference_kmeans(X, init)
    assert ref["iterations"] > 3  # enough iterations for the per-iteration check to mean something
    for v in kmeans_on(X, init, K, uneven):
        assert v["iterations"] == ref["iterations"]
        for counts, labels in zip(v["counts"], ref["labels_per_iteration"]):
            assert np.array_equal(counts, np.bincount(labels, minlength=5))  # same assignments every iteration
        np.testing.assert_allclose(v["history"], ref["history"], rtol=1e-12)
        np.testing.assert_allclose(v["centres"], ref["centres"], rtol=1e-12, atol=1e-12)
        assert abs(v["inertia"] - ref["inertia"]) <= 1e-12 * ref["inertia"]
    got = np.concatenate([v["labels"] for v in kmeans_on(X, init, K, uneven)])
    assert np.array_equal(got, ref["labels"])


def test_kmeans_with_more_ranks_than_points():
    X = BLOBS[:5]
    init = X[:2].astype(np.float64)
    ref = cl.reference_kmeans(X, init)
    vals = kmeans_on(X, init, 8)
    assert np.array_equal(np.concatenate([v["labels"] for v in vals]), ref["labels"])
    np.testing.assert_allclose(vals[7]["centres"], ref["centres"], rtol=1e-12)


def test_an_empty_cluster_keeps_its_centre_on_every_rank_as_in_the_reference():
    init = np.r_[cl.init_centres(BLOBS, 4, seed=2), [[1e3, 1e3, 1e3]]]  # nothing is near the last centre
    ref = cl.reference_kmeans(BLOBS, init)
    for v in kmeans_on(BLOBS, init, 3):
        assert all(c[4] == 0 for c in v["counts"])
        assert np.array_equal(v["centres"][4], init[4])
        np.testing.assert_allclose(v["centres"], ref["centres"], rtol=1e-12)


def test_kmeans_matches_scikit_learn_lloyd_from_the_same_init():
    from sklearn.cluster import KMeans

    init = cl.init_centres(BLOBS, 5, seed=1)
    sk = KMeans(5, init=init, n_init=1, algorithm="lloyd", tol=0.0, max_iter=300).fit(BLOBS)
    vals = kmeans_on(BLOBS, init, 4)
    assert np.array_equal(np.concatenate([v["labels"] for v in vals]), sk.labels_)
    np.testing.assert_allclose(vals[0]["centres"], sk.cluster_centers_, rtol=1e-10, atol=1e-10)
    assert abs(vals[0]["inertia"] - sk.inertia_) <= 1e-9 * sk.inertia_
    assert vals[0]["iterations"] == sk.n_iter_


def test_kmeans_bytes_per_iteration_do_not_depend_on_n():
    init = cl.init_centres(BLOBS, 5, seed=1)
    per_iter = []
    for n in (150, 600):
        def worker(comm, X=BLOBS[:n]):
            lo, hi = block_bounds(len(X), comm.size)[comm.rank]
            out = cl.kmeans(comm, X[lo:hi], init, iters=3)
            return out["iterations"]
        res = cluster.run(worker, 4, timeout=60)
        iters = res.values[0]
        m = 5 * 3 + 5 + 2
        assert sum(s.bytes_sent for s in res.stats) == 8 * 2 * 3 * (iters * m + 1)  # + the final inertia
        per_iter.append(sum(s.bytes_sent for s in res.stats) / iters)
    assert per_iter[0] == per_iter[1]


@pytest.mark.slow
def test_kmeans_on_three_processes_equals_the_reference():
    init = cl.init_centres(BLOBS, 5, seed=1)
    ref = cl.reference_kmeans(BLOBS, init)
    vals = kmeans_on(BLOBS, init, 3, uneven=True, backend="process")
    assert np.array_equal(np.concatenate([v["labels"] for v in vals]), ref["labels"])
    np.testing.assert_allclose(vals[0]["centres"], ref["centres"], rtol=1e-12)
