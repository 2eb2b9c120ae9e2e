"""Chapter 12, Section 4: distributed L2-regularised logistic regression (scaleoutai.ml.glm).

Every solver is checked against scikit-learn's LogisticRegression (C = 1 / (n lambda), no intercept) on the
whole data, for several K (including K > n and a rank with no rows), uneven shards, float32 and float64
data; the bytes each rank sends are checked against the ring all-reduce's exact count.
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.collectives import block_bounds
from scaleoutai.ml import glm
from scaleoutai.ml.compression import ring_allreduce_bytes

LAM = 1e-2


def make_data(n: int, d: int = 6, seed: int = 0, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 0.3
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ rng.standard_normal(d))), 1.0, -1.0)
    return X.astype(dtype), y.astype(dtype)


def on_cuts(comm, fn, X, y, cuts, *args, **kw):
    """fn on rows cuts[r]:cuts[r + 1] of rank r (cuts=None: the course's block split)."""
    bounds = block_bounds(len(X), comm.size) if cuts is None else list(zip(cuts[:-1], cuts[1:]))
    lo, hi = bounds[comm.rank]
    return fn(comm, X[lo:hi], y[lo:hi], *args, **kw)


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def data():
    out = {}
    for dtype in (np.float64, np.float32):
        X, y = make_data(600, dtype=dtype)
        out[dtype] = (X, y, glm.reference_glm(X, y, LAM))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lbfgs_equals_sklearn_for_K_1_2_3_5_and_does_not_depend_on_K(data, dtype):
    X, y, ref = data[dtype]
    ws = []
    for K in (1, 2, 3, 5):
        out = cluster.run(on_cuts, K, args=(glm.train_lbfgs, X, y, None, LAM), kwargs=dict(tol=1e-10)).values
        assert all(np.array_equal(o["w"], out[0]["w"]) for o in out)  # every rank: the same bits
        assert out[0]["converged"] and rel(out[0]["w"], ref) < 1e-5, K
        ws.append(out[0]["w"])
    for w in ws[1:]:
        np.testing.assert_allclose(w, ws[0], rtol=1e-8, atol=1e-10)  # only float reassociation differs


def test_lbfgs_and_newton_with_more_ranks_than_rows_and_uneven_shards():
    X, y = make_data(7, d=3, seed=1)
    ref = glm.reference_glm(X, y, LAM)
    for fn in (glm.train_lbfgs, glm.train_newton):
        assert rel(cluster.run(on_cuts, 11, args=(fn, X, y, None, LAM)).values[3]["w"], ref) < 1e-5
    X, y = make_data(500, seed=2)
    ref = glm.reference_glm(X, y, LAM)
    cuts = [0, 1, 1, 320, 500]  # a rank with one row, a rank with none, two unequal big shards
    for fn in (glm.train_lbfgs, glm.train_newton):
        assert rel(cluster.run(on_cuts, 4, args=(fn, X, y, cuts, LAM)).values[2]["w"], ref) < 1e-5, fn.__name__


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_admm_is_within_the_bound_its_residuals_give(data, dtype):
    X, y, ref = data[dtype]
    for K, cuts in ((1, None), (3, None), (4, [0, 0, 50, 260, 600]), (9, None)):
        res = cluster.run(on_cuts, K, args=(glm.train_admm, X, y, cuts, LAM), kwargs=dict(rho=0.01, iters=120)).values[0]
        # ||z - w*|| <= error_bound (strong convexity, Section 7); the reference itself is good to ~1e-9
        assert np.linalg.norm(res["w"] - ref) <= res["error_bound"] + 1e-8, K
        assert res["error_bound"] < 1e-4 * np.linalg.norm(ref), K  # and the run did converge
        assert res["primal_residual"][-1] < 1e-5 and len(res["dual_residual"]) == 120


def test_admm_with_too_few_iterations_has_a_bound_that_says_so(data):
    X, y, ref = data[np.float64]
    res = cluster.run(on_cuts, 4, args=(glm.train_admm, X, y, None, LAM), kwargs=dict(rho=1.0, iters=3)).values[0]
    err = np.linalg.norm(res["w"] - ref)
    assert err > 1e-3 and err <= res["error_bound"]


def test_bytes_per_iteration_are_one_allreduce_of_d_plus_1_numbers_per_trial(data):
    X, y, _ = data[np.float64]
    d, K = X.shape[1], 4
    run = cluster.run(on_cuts, K, args=(glm.train_lbfgs, X, y, None, LAM))
    rounds = int(run.values[0]["rounds"][-1])
    assert rounds >= run.values[0]["iterations"] + 1  # at least one evaluation per iteration, plus w = 0
    for r, st in enumerate(run.stats):
        assert st.bytes_sent == ring_allreduce_bytes(1, K, r, 8) + rounds * ring_allreduce_bytes(d + 1, K, r, 8)
    run = cluster.run(on_cuts, K, args=(glm.train_newton, X, y, None, LAM))
    rounds = int(run.values[0]["rounds"][-1])
    for r, st in enumerate(run.stats):
        assert st.bytes_sent == ring_allreduce_bytes(1, K, r, 8) + rounds * ring_allreduce_bytes(d * d + d + 1, K, r, 8)
    run = cluster.run(on_cuts, K, args=(glm.train_admm, X, y, None, LAM), kwargs=dict(iters=7))
    for r, st in enumerate(run.stats):
        assert st.bytes_sent == 2 * ring_allreduce_bytes(2, K, r, 8) + 7 * ring_allreduce_bytes(d + 1, K, r, 8)


def test_objective_matches_a_direct_formula_and_bad_inputs_are_refused():
    X, y = make_data(50, d=3)
    w = np.array([0.3, -1.0, 2.0])
    want = np.mean(np.log1p(np.exp(-y * (X @ w)))) + LAM / 2 * w @ w
    assert glm.objective(X, y, w, LAM) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="2 \\* y - 1"):
        glm.objective(X, (y > 0).astype(float), w, LAM)
    with pytest.raises(ValueError, match="lam must be > 0"):
        glm.reference_glm(X, y, 0.0)
    with pytest.raises(cluster.RankError, match="no rows on any rank"):
        cluster.run(lambda comm: glm.train_lbfgs(comm, np.zeros((0, 3)), np.zeros(0), LAM), 2)
