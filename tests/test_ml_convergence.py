"""Chapter 10: the convergence results the chapter states, evaluated. QSGD's unbiasedness and variance
bound (Alistarh et al. 2017), top-k as a k/d contraction and the bounded error-feedback residual
(Karimireddy et al. 2019), local SGD's reference and its error growing with H (Stich 2019), and the
step-size threshold of fixed-delay gradient descent from the Hessian's top eigenvalue."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.ml import compression as cp
from scaleoutai.ml import optimization as opt


@pytest.mark.parametrize("d", [1, 10, 100])
@pytest.mark.parametrize("s", [1, 4, 16])
def test_qsgd_is_unbiased_and_its_variance_is_exact_and_within_the_bound(d, s):
    rng = np.random.default_rng(d * 100 + s)
    for v in (rng.standard_normal(d), np.eye(d)[0] * 3.0, np.ones(d)):
        exact = cp.qsgd_variance(v, s)
        assert exact <= cp.qsgd_variance_bound(d, s) * (v @ v) * (1 + 1e-12)
        trials = 1500
        mean, mse = cp.qsgd_moments(v, s, trials, seed=d + s)
        # Monte-Carlo tolerance: 5 standard errors of the mean, per coordinate summed (||.||)
        assert np.linalg.norm(mean - v) <= 5 * np.sqrt(exact / trials) + 1e-12
        assert abs(mse - exact) <= 0.15 * exact + 1e-12


def test_qsgd_variance_bound_is_the_papers_min():
    assert cp.qsgd_variance_bound(100, 1) == pytest.approx(10.0)  # sqrt(d)/s < d/s^2
    assert cp.qsgd_variance_bound(100, 20) == pytest.approx(0.25)  # d/s^2 < sqrt(d)/s = 0.5
    # the worst case of the sqrt(d)/s branch is attained in the limit: all |v_i| equal, s = 1
    d = 64
    assert cp.qsgd_variance(np.ones(d), 1) == pytest.approx((np.sqrt(d) - 1) * d, rel=1e-12)


@pytest.mark.parametrize("d,k", [(10, 1), (50, 5), (50, 49), (7, 7)])
def test_topk_is_a_k_over_d_contraction(d, k):
    delta = cp.topk_contraction(d, k)
    rng = np.random.default_rng(d + k)
    for x in [rng.standard_normal(d) for _ in range(50)] + [np.ones(d)]:
        err = x - cp.topk_decompress(*cp.topk_compress(x, k), d)
        assert err @ err <= (1 - delta) * (x @ x) + 1e-12
    x = np.ones(d)  # equal entries: the bound is tight
    err = x - cp.topk_decompress(*cp.topk_compress(x, k), d)
    assert err @ err == pytest.approx((1 - delta) * d)


def test_error_feedback_residual_stays_bounded_and_reaches_the_dense_loss():
    Xh, yh = opt.heterogeneous_regression(4, 50, 50, seed=10)
    lh = opt.linear_model(50)
    w0 = lh.init()
    delta = cp.topk_contraction(50, 5)
    traces = {name: cp.reference_ef_trace(Xh, yh, lh, w0, 300, 0.02, c, 4)
              for name, c in (("ef", cp.TopK(5, True)), ("plain", cp.TopK(5)), ("dense", cp.Dense()))}
    ef = traces["ef"]
    for r in range(4):  # ||e_t||^2 <= 4 (1 - delta) / delta^2 max_{s <= t} ||g_s||^2, every step, every rank
        running = np.maximum.accumulate(ef["grad_norms"][:, r])
        assert np.all(ef["residual_norms"][:, r] ** 2 <= cp.ef_residual_bound(delta, 1.0) * running ** 2)
    assert ef["residual_norms"].max() > 0
    loss = {k: lh.loss(t["ws"][-1], Xh, yh) for k, t in traces.items()}
    assert loss["ef"] < 1.01 * loss["dense"] and loss["plain"] > 1.2 * loss["dense"]
    # the trace is the ordinary reference: same iterates as reference_compressed_sgd
    ref, _ = cp.reference_compressed_sgd(Xh, yh, lh, w0, 300, 0.02, cp.TopK(5, True), 4)
    np.testing.assert_array_equal(ef["ws"][-1], ref)


@pytest.mark.parametrize("K,H,batch", [(1, 3, None), (3, 1, 32), (3, 4, 32), (4, 5, None), (5, 2, 3)])
def test_reference_local_sgd_equals_train_local_sgd(K, H, batch):
    X, y = datasets.classification(60, 4, classes=3, seed=2)
    mlp = opt.mlp_model([4, 6, 3])
    w0 = mlp.init(seed=2)
    res = cluster.run(opt.train_local_sgd, K, args=(X, y, mlp, w0, 11, 0.1, H, batch, 5))
    w, rounds = opt.reference_local_sgd(X, y, mlp, w0, 11, 0.1, H, K, batch, 5)
    assert len(rounds) == len(res.values[0][1]) == -(-11 // H)
    for got, _ in res.values:
        np.testing.assert_allclose(got, w, rtol=0, atol=1e-12)


def test_local_sgd_error_on_disagreeing_shards_grows_with_H():
    Xh, yh = opt.heterogeneous_regression(4, 50, 50, seed=10)
    lh = opt.linear_model(50)
    wstar = np.linalg.lstsq(Xh, yh, rcond=None)[0]
    excess = [lh.loss(opt.reference_local_sgd(Xh, yh, lh, lh.init(), 400, 0.02, H, 4)[0], Xh, yh)
              - lh.loss(wstar, Xh, yh) for H in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(excess, excess[1:])), excess
    assert excess[-1] > 100 * excess[0]


def test_least_squares_hessian_is_the_gradients_derivative():
    X, y, _ = datasets.linear_regression(80, 6, seed=4)
    lin = opt.linear_model(6)
    A = opt.least_squares_hessian(X)
    w, e = np.random.default_rng(0).standard_normal((2, 6))
    grad = lambda v: lin.loss_grad(v, X, y)[1] / len(y)  # noqa: E731
    np.testing.assert_allclose(grad(w + e) - grad(w), A @ e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tau", [0, 1, 2, 3, 5, 8, 16])
def test_delay_threshold_is_where_a_characteristic_root_leaves_the_unit_circle(tau):
    lam = 2.5
    a_star = opt.delayed_gd_threshold(lam, tau) * lam

    def radius(a):  # roots of z^(tau+1) - z^tau + a
        return max(abs(np.roots([1.0, -1.0] + [0.0] * (tau - 1) + [a]))) if tau else abs(1 - a)

    assert radius(0.999 * a_star) < 1 < radius(1.001 * a_star)
    assert a_star == pytest.approx(2.0) if tau == 0 else a_star < np.pi / (2 * tau + 1) + 1e-12


def test_delayed_sgd_converges_below_the_threshold_and_diverges_above():
    X, y, _ = datasets.linear_regression(300, 8, noise=0.5, seed=0)
    lin = opt.linear_model(8)
    w0 = lin.init()
    lam = np.linalg.eigvalsh(opt.least_squares_hessian(X))[-1]
    wstar = np.linalg.lstsq(X, y, rcond=None)[0]
    for tau in (0, 2, 8):
        lr = opt.delayed_gd_threshold(lam, tau)
        below = opt.reference_delayed_sgd(X, y, lin, w0, 0.8 * lr, tau, steps=300)[0]
        above = opt.reference_delayed_sgd(X, y, lin, w0, 1.2 * lr, tau, steps=300)[0]
        assert np.linalg.norm(below - wstar) < 1e-3 * np.linalg.norm(wstar)
        assert lin.loss(above, X, y) > 10 * lin.loss(w0, X, y)
