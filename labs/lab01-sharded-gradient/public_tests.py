"""Public tests for lab 1: run them from the notebook's last cell. The grader runs more, hidden ones."""
import math

import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _one_machine(X, y, w):
    """Loss and gradient with Python's exact-ish arithmetic, row by row (slow, small data only)."""
    loss, grad = 0.0, np.zeros(len(w))
    for x_i, y_i in zip(X.astype(np.float64), y.astype(np.float64)):
        z = float(x_i @ w.astype(np.float64))
        m = z if y_i == 1 else -z
        loss += max(-m, 0.0) + math.log1p(math.exp(-abs(m)))
        p_wrong = math.exp(-m) / (1 + math.exp(-m)) if m >= 0 else 1 / (1 + math.exp(m))
        grad += (-p_wrong if y_i == 1 else p_wrong) * x_i
    n = max(len(y), 1)
    return loss / n, grad / n


def _check(loss, grad, ref, what, dtype, rtol):
    assert isinstance(grad, np.ndarray) and grad.shape == ref[1].shape, \
        f"{what}: the gradient must be an array of shape (d,)"
    assert grad.dtype == dtype, f"{what}: the gradient has dtype {grad.dtype}, expected {dtype} (keep X's dtype)"
    assert np.isfinite(loss), f"{what}: the loss is {loss}"
    np.testing.assert_allclose(float(loss), ref[0], rtol=rtol, err_msg=f"{what}: loss")
    np.testing.assert_allclose(grad, ref[1], rtol=rtol, atol=rtol * np.abs(ref[1]).max(), err_msg=f"{what}: gradient")


NOTE = ("public tests passed; the grader also tries K > N (empty shards), K up to 8, very uneven splits, "
        "confidently classified data, float32 scores past overflow and 2 real processes")


@check
def local_gradient_exact_and_stable(local_gradient):
    """local_gradient, an empty shard, and scores past exp's overflow"""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((12, 3))
    y = (rng.random(12) < 0.5).astype(np.float64)
    w = rng.standard_normal(3)
    ref = _one_machine(X, y, w)
    _check(*local_gradient(X, y, w), ref, "local_gradient", np.float64, 1e-10)
    loss, grad = local_gradient(X[:0], y[:0], w)
    assert loss == 0 and np.array_equal(grad, np.zeros(3)), "local_gradient of an empty shard: (0.0, zeros)"
    big = 800 * w  # scores far past exp's overflow in float64
    _check(*local_gradient(X, y, big), _one_machine(X, y, big), "local_gradient with |z| in the thousands",
           np.float64, 1e-10)


@check
def sharded_gradient_K_1_2_3(sharded_gradient):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((12, 3))
    y = (rng.random(12) < 0.5).astype(np.float64)
    w = rng.standard_normal(3)
    ref = _one_machine(X, y, w)
    for K in (1, 2, 3):
        rows = np.array_split(np.arange(12), K)
        res = cluster.run(lambda comm: sharded_gradient(comm, X[rows[comm.rank]], y[rows[comm.rank]], w), K,
                          backend="sim", timeout=30)
        for r in range(K):
            _check(*res.values[r], ref, f"sharded_gradient, K={K}, rank {r}", np.float64, 1e-10)


@check
def sharded_gradient_float32_uneven(sharded_gradient):
    """sharded_gradient in float32 with uneven shards"""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((12, 3))
    y = (rng.random(12) < 0.5).astype(np.float64)
    w = rng.standard_normal(3)
    ref = _one_machine(X, y, w)
    X32, y32, w32 = X.astype(np.float32), y.astype(np.float32), w.astype(np.float32)
    rows = [np.arange(0, 9), np.arange(9, 12)]  # uneven shards
    res = cluster.run(lambda comm: sharded_gradient(comm, X32[rows[comm.rank]], y32[rows[comm.rank]], w32), 2,
                      backend="sim", timeout=30)
    for r in range(2):
        _check(*res.values[r], _one_machine(X32, y32, w32), f"sharded_gradient, float32, shards of 9 and 3, rank {r}",
               np.float32, 1e-4)
