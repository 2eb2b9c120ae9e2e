"""Chapter 12: histogram split finding for gradient-boosted trees on K ranks equals the single-machine
histogram booster, the exact split search, and LightGBM's data-parallel learner on 2 processes."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.collectives import block_bounds
from scaleoutai.ml import trees as tr

KS = [1, 2, 3, 5, 8]


def integer_data(n=800, d=4, seed=0, logistic=False):
    """Features with 16 distinct values: every bin is exact, so histogram = exact split search."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 16, size=(n, d)).astype(np.float64)
    score = 0.5 * X[:, 1] - 3.0 * (X[:, 2] > 7) + 0.5 * rng.standard_normal(n)
    y = (score > np.median(score)).astype(np.float64) if logistic else score
    return X, y


def continuous_data(n=1000, d=5, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n)


def shards(n, K, uneven):
    if not uneven or K == 1:
        return block_bounds(n, K)
    sizes = [n // 2] + [hi - lo for lo, hi in block_bounds(n - n // 2, K - 1)]
    if K >= 3:
        sizes[2], sizes[1] = sizes[2] + sizes[1], 0
    e = np.cumsum([0] + sizes)
    return list(zip(e[:-1], e[1:]))


def boost_on(X, y, K, uneven=False, backend="sim", **kw):
    bounds = shards(len(X), K, uneven)

    def worker(comm):
        lo, hi = bounds[comm.rank]
        return tr.train_booster(comm, X[lo:hi], y[lo:hi], **kw)
    return cluster.run(worker, K, backend=backend, timeout=120)


def exact_best_split(X, g, h, lam):
    """Brute force over every threshold between distinct values: the definition of the best split."""
    best = (-np.inf, None, None)
    G, H = g.sum(), h.sum()
    for f in range(X.shape[1]):
        v = np.unique(X[:, f])
        for t in (v[:-1] + v[1:]) / 2:
            L = X[:, f] <= t
            gain = 0.5 * (g[L].sum() ** 2 / (h[L].sum() + lam) + g[~L].sum() ** 2 / (h[~L].sum() + lam) - G ** 2 / (H + lam))
            if gain > best[0]:
                best = (gain, f, t)
    return best


def test_edges_are_midpoints_for_few_values_and_quantiles_otherwise():
    X = np.c_[np.repeat([0.0, 1.0, 3.0], 10), np.linspace(0, 1, 30)]
    e = tr.quantile_edges(X, bins=8)
    np.testing.assert_array_equal(e[0, :2], [0.5, 2.0])
    assert np.isinf(e[0, 2:]).all()
    assert np.isfinite(e[1]).all() and np.all(np.diff(e[1]) > 0)
    np.testing.assert_allclose(e[1], np.quantile(X[:, 1], np.arange(1, 8) / 8))


@pytest.mark.parametrize("K", KS)
def test_bin_edges_are_identical_on_every_rank_and_equal_the_whole_data_when_sampled_fully(K):
    X, _ = continuous_data(n=300)

    def worker(comm, sample):
        lo, hi = block_bounds(len(X), comm.size)[comm.rank]
        return tr.bin_edges(comm, X[lo:hi], bins=16, sample=sample)
    full = cluster.run(worker, K, args=(10_000,), timeout=60).values
    assert all(np.array_equal(e, tr.quantile_edges(X, 16)) for e in full)
    part = cluster.run(worker, K, args=(20,), timeout=60).values
    assert all(np.array_equal(e, part[0]) for e in part)  # a sample: different edges, the same on every rank


def test_histogram_split_equals_the_exact_split_when_bins_are_exact():
    X, y = integer_data()
    g, h = y.mean() - y, np.ones(len(y))
    hist = tr.histograms(tr.bin_data(X, tr.quantile_edges(X, 32)), g, h, np.zeros(len(y), dtype=np.int64), 1, 32)
    gain, f, b = tr.best_split(hist, lam=1.0)[0]
    want_gain, want_f, want_t = exact_best_split(X, g, h, 1.0)
    assert (f, tr.quantile_edges(X, 32)[f, b]) == (want_f, want_t)
    assert gain == pytest.approx(want_gain, rel=1e-12)


@pytest.mark.parametrize("K, n", [(K, 500) for K in KS] + [(32, 20)])
def test_allreduced_histograms_equal_the_single_machine_histogram_exactly_for_integer_gradients(K, n):
    X, _ = integer_data(n=n)
    rng = np.random.default_rng(2)
    g, h = rng.integers(-50, 50, len(X)).astype(float), rng.integers(1, 4, len(X)).astype(float)
    binned = tr.bin_data(X, tr.quantile_edges(X, 32))
    node = np.zeros(len(X), dtype=np.int64)
    want = tr.histograms(binned, g, h, node, 1, 32)

    def worker(comm):
        lo, hi = block_bounds(len(X), comm.size)[comm.rank]
        from scaleoutai.collectives import ring_allreduce
        return ring_allreduce(comm, tr.histograms(binned[lo:hi], g[lo:hi], h[lo:hi], node[lo:hi], 1, 32))
    for got in cluster.run(worker, K, timeout=120).values:
        assert np.array_equal(got, want)  # integer-valued sums are exact in float64, in any order
        assert tr.best_split(got) == tr.best_split(want)  # same feature, same bin, same gain, bit for bit


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
@pytest.mark.parametrize("K", KS)
def test_distributed_booster_equals_the_single_machine_booster(K, uneven, loss):
    X, y = continuous_data() if loss == "squared" else integer_data(logistic=True)
    kw = dict(rounds=4, depth=3, bins=16, lam=1.0, lr=0.3, loss=loss)
    ref = tr.reference_booster(X, y, **kw)
    res = boost_on(X, y, K, uneven, sample=10_000, **kw)  # the sample is the whole data: the same edges
    want = tr.predict(ref, X)
    for model in res.values:
        assert np.array_equal(model["edges"], ref["edges"])
        for t, rt in zip(model["trees"], ref["trees"]):
            assert np.array_equal(t["feature"], rt["feature"]) and np.array_equal(t["bin"], rt["bin"])
            np.testing.assert_allclose(t["gain"], rt["gain"], rtol=1e-10)
        np.testing.assert_allclose(tr.predict(model, X), want, rtol=1e-12, atol=1e-12)


def test_more_ranks_than_rows_still_boosts_the_same_model():
    X, y = continuous_data(n=6)
    kw = dict(rounds=2, depth=2, bins=8)
    ref = tr.reference_booster(X, y, **kw)
    for model in boost_on(X, y, 8, sample=100, **kw).values:
        np.testing.assert_allclose(tr.predict(model, X), tr.predict(ref, X), rtol=1e-12)


def level_sizes(tree):
    """Nodes per level whose histogram was all-reduced (levels above the maximum depth)."""
    sizes, level = [], [0]
    while level:
        sizes.append(len(level))
        level = [c for i in level if tree["feature"][i] >= 0 for c in (tree["left"][i], tree["right"][i])]
    return sizes


@pytest.mark.parametrize("K", [2, 3, 5])
def test_bytes_are_one_histogram_allreduce_per_level_independent_of_n(K):
    d, bins, depth = 5, 16, 3
    totals = []
    for n in (400, 4000):
        X, y = continuous_data(n=n, d=d)
        edges = tr.quantile_edges(X, bins)
        res = boost_on(X, y, K, rounds=2, depth=depth, bins=bins, edges=edges)
        sent = sum(s.bytes_sent for s in res.stats)
        numbers = 2  # the base score: sum of y and n
        for tree in res.values[0]["trees"]:
            numbers += sum(m * d * bins * 2 for m in level_sizes(tree)[:depth])
        assert sent == 8 * 2 * (K - 1) * numbers  # a ring all-reduce moves 2 (K-1) m numbers in all
        assert tr.histogram_bytes(4, d, bins, K) * K == 8 * 2 * (K - 1) * 4 * d * bins * 2
        totals.append(sent)
    assert totals[0] == totals[1]  # full trees at both sizes: the same bytes for 10x the rows


def test_a_rank_holding_one_class_only_changes_nothing():
    X, y = integer_data(logistic=True)
    order = np.argsort(y, kind="stable")  # rank 0 gets only zeros, the last rank only ones
    X, y = X[order], y[order]
    kw = dict(rounds=3, depth=2, bins=16, loss="logistic")
    ref = tr.reference_booster(X, y, **kw)
    res = boost_on(X, y, 4, sample=10_000, **kw)
    np.testing.assert_allclose(tr.predict(res.values[0], X), tr.predict(ref, X), rtol=1e-12)


def test_accuracy_is_comparable_to_scikit_learn_hist_gradient_boosting():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = continuous_data(n=3000)
    Xt, yt = continuous_data(n=1000, seed=9)
    ours = tr.predict(boost_on(X, y, 3, rounds=40, depth=3, bins=64, lr=0.3, sample=10_000).values[0], Xt)
    sk = HistGradientBoostingRegressor(max_iter=40, max_depth=3, learning_rate=0.3, max_bins=64,
                                       early_stopping=False).fit(X, y).predict(Xt)
    r2 = lambda p: 1 - np.mean((yt - p) ** 2) / np.var(yt)  # noqa: E731
    assert r2(ours) > 0.8 and abs(r2(ours) - r2(sk)) < 0.05


def test_bad_inputs_name_the_problem():
    X, y = integer_data(n=20)
    with pytest.raises(ValueError, match="loss"):
        tr.reference_booster(X, y, loss="hinge")
    with pytest.raises(ValueError, match="labels 0 or 1"):
        tr.reference_booster(X, y, loss="logistic")
    with pytest.raises(ValueError, match="NaN"):
        tr.quantile_edges(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="bins"):
        tr.quantile_edges(X, bins=1)
    with pytest.raises(ValueError, match="features"):
        tr.bin_data(X[:, :2], tr.quantile_edges(X))


@pytest.mark.slow
def test_booster_on_two_processes_equals_the_reference():
    X, y = continuous_data(n=500)
    kw = dict(rounds=3, depth=3, bins=16)
    ref = tr.reference_booster(X, y, **kw)
    for model in boost_on(X, y, 2, backend="process", sample=10_000, **kw).values:
        np.testing.assert_allclose(tr.predict(model, X), tr.predict(ref, X), rtol=1e-12)


LGB = dict(objective="regression", num_leaves=4, max_depth=2, learning_rate=0.5, min_data_in_leaf=1,
           min_sum_hessian_in_leaf=0.0, lambda_l2=1.0, max_bin=63, verbose=-1, num_threads=1, seed=0)


@pytest.mark.slow
def test_lightgbm_data_parallel_on_two_processes_agrees_with_our_histogram_split():
    import lightgbm as lgb

    X, y = integer_data(n=2000)
    models = tr.run_lightgbm_data_parallel([(X[:1000], y[:1000]), (X[1000:], y[1000:])], LGB, rounds=3, timeout=120)
    dumped = [lgb.Booster(model_str=m).dump_model() for m in models]
    assert len(dumped) == 2 and dumped[0]["tree_info"] == dumped[1]["tree_info"]  # both machines, one model
    single = lgb.train(LGB, lgb.Dataset(X, y), num_boost_round=3)
    ours = tr.reference_booster(X, y, rounds=3, depth=2, bins=63, lam=1.0, lr=0.5)
    root = dumped[0]["tree_info"][0]["tree_structure"]
    root1 = single.dump_model()["tree_info"][0]["tree_structure"]
    assert root["split_feature"] == root1["split_feature"] == ours["trees"][0]["feature"][0]
    assert root["threshold"] == pytest.approx(ours["trees"][0]["threshold"][0], abs=1e-9)
    assert root1["threshold"] == pytest.approx(ours["trees"][0]["threshold"][0], abs=1e-9)
    # LightGBM reports the bracket of eq. 7 without its 1/2 (and stores float32)
    assert root["split_gain"] == pytest.approx(2 * ours["trees"][0]["gain"][0], rel=1e-5)
    parallel = lgb.Booster(model_str=models[0]).predict(X)
    np.testing.assert_allclose(parallel, single.predict(X), atol=1e-9)
    np.testing.assert_allclose(tr.predict(ours, X), parallel, atol=1e-5)  # the whole booster, not only the root


@pytest.mark.slow
def test_lightgbm_data_parallel_starts_from_the_unweighted_mean_of_the_machines_means():
    import lightgbm as lgb

    X, y = integer_data(n=2000)
    models = tr.run_lightgbm_data_parallel([(X[:500], y[:500]), (X[500:], y[500:])], LGB, rounds=3, timeout=120)
    single = lgb.train(LGB, lgb.Dataset(X, y), num_boost_round=3).predict(X)
    gap = lgb.Booster(model_str=models[0]).predict(X) - single
    shift = (y[:500].mean() + y[500:].mean()) / 2 - y.mean()  # boost_from_average syncs per-machine means
    assert abs(shift) > 1e-2
    # each round shrinks a constant offset by about (1 - learning rate): what is left after 3 rounds
    assert gap.mean() == pytest.approx(shift * (1 - LGB["learning_rate"]) ** 3, rel=0.1)


@pytest.mark.slow
def test_lightgbm_runner_reports_a_failing_rank():
    with pytest.raises(RuntimeError, match="LightGBM rank"):
        tr.run_lightgbm_data_parallel([(np.zeros((4, 2)), np.zeros(4)), (np.zeros((4, 3)), np.zeros(4))],
                                      dict(LGB, objective="no-such-objective"), rounds=1, timeout=60)
