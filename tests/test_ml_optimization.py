"""Chapter 10: synchronous, asynchronous and local SGD against their single-machine references."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_range
from scaleoutai.ml import optimization as opt
from scaleoutai.ml.compression import ring_allreduce_bytes

TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _linear(n=23, d=4, dtype=np.float64):
    X, y, _ = datasets.linear_regression(n, d, seed=3, dtype=dtype)
    return X, y, opt.linear_model(d)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 30])
def test_sync_sgd_equals_reference_with_global_batch(K, dtype):
    X, y, model = _linear(dtype=dtype)
    w0 = model.init(dtype=dtype)
    ref, ref_loss = opt.reference_sgd(X, y, model, w0, 12, 0.05, batch=13, seed=4)
    res = cluster.run(opt.train_sync_sgd, K, args=(X, y, model, w0, 12, 0.05, 13, 4), timeout=60)
    scale = 1 + np.abs(ref).max()
    for w, losses in res.values:
        assert w.dtype == dtype
        np.testing.assert_allclose(w, ref, rtol=TOL[dtype], atol=TOL[dtype] * scale)
        np.testing.assert_allclose(losses, ref_loss, rtol=10 * TOL[dtype])
    assert ref_loss[-1] < 0.5 * ref_loss[0]  # it trained


@pytest.mark.parametrize("K", [2, 3, 7])
def test_sync_sgd_on_mlp_equals_reference_with_uneven_shards(K):
    X, y = datasets.classification(41, 5, classes=3, seed=2)
    model = opt.mlp_model([5, 7, 3])
    w0 = model.init(seed=1)
    ref, ref_loss = opt.reference_sgd(X, y, model, w0, 8, 0.2)
    res = cluster.run(opt.train_sync_sgd, K, args=(X, y, model, w0, 8, 0.2), timeout=60)
    for w, _ in res.values:
        np.testing.assert_allclose(w, ref, rtol=1e-12, atol=1e-12)
    assert ref_loss[-1] < ref_loss[0]


def test_sync_sgd_weights_uneven_shards_by_size_not_plain_mean():
    """A plain mean of shard means would differ from the full batch when shards are uneven."""
    X, y, model = _linear(n=7)
    w0 = model.init()
    ref, _ = opt.reference_sgd(X, y, model, w0, 1, 0.1)
    plain = w0 - 0.1 * np.mean([model.loss_grad(w0, X[lo:hi], y[lo:hi])[1] / (hi - lo)
                                for lo, hi in (block_range(7, 3, r) for r in range(3))], axis=0)
    res = cluster.run(opt.train_sync_sgd, 3, args=(X, y, model, w0, 1, 0.1))
    np.testing.assert_allclose(res.values[0][0], ref, rtol=1e-13)
    assert np.abs(plain - ref).max() > 1e-6


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 30])
def test_local_sgd_with_H_1_is_sync_sgd(K):
    X, y, model = _linear()
    w0 = model.init()
    ref, _ = opt.reference_sgd(X, y, model, w0, 10, 0.05, batch=17, seed=1)
    res = cluster.run(opt.train_local_sgd, K, args=(X, y, model, w0, 10, 0.05, 1, 17, 1))
    for w, rounds in res.values:
        np.testing.assert_allclose(w, ref, rtol=1e-12, atol=1e-12)
        assert len(rounds) == 10


@pytest.mark.parametrize("H", [2, 5])
def test_local_sgd_bytes_per_step_fall_by_H_and_it_still_converges(H):
    X, y, model = _linear(n=40)
    w0 = model.init()
    steps, K = 20, 4
    sync = cluster.run(opt.train_sync_sgd, K, args=(X, y, model, w0, steps, 0.05))
    local = cluster.run(opt.train_local_sgd, K, args=(X, y, model, w0, steps, 0.05, H))
    P, f64 = len(w0), 8
    # sync all-reduces [gradient, loss] every step; local SGD all-reduces w every H steps
    assert [s.bytes_sent for s in sync.stats] == [steps * ring_allreduce_bytes(P + 1, K, r, f64) for r in range(K)]
    assert [s.bytes_sent for s in local.stats] == [steps // H * ring_allreduce_bytes(P, K, r, f64) for r in range(K)]
    w_local = local.values[0][0]
    assert model.loss(w_local, X, y) < 0.2 * model.loss(w0, X, y)
    assert not np.allclose(w_local, sync.values[0][0])  # H > 1 is a different algorithm


def test_local_sgd_rejects_bad_H():
    X, y, model = _linear()
    with pytest.raises(cluster.RankError, match="H"):
        cluster.run(opt.train_local_sgd, 2, args=(X, y, model, model.init(), 3, 0.1, 0))


def _replay(X, y, model, w0, lr, out, K, replicated):
    rows = None if replicated else [np.arange(*block_range(len(y), K - 1, int(i) - 1)) for i in out["schedule"][:, 0]]
    return opt.reference_delayed_sgd(X, y, model, w0, lr, out["staleness"], rows=rows)[0]


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_async_sgd_with_equal_workers_is_fixed_delay_sgd_with_tau_K_minus_2(K):
    X, y, model = _linear()
    w0 = model.init()
    out = cluster.run(opt.train_async_sgd, K, args=(X, y, model, w0, 25, 0.03, True)).values[0]
    ref, _ = opt.reference_delayed_sgd(X, y, model, w0, 0.03, K - 2, steps=25)
    np.testing.assert_array_equal(out["w"], ref)
    assert out["staleness"][K:].tolist() == [K - 2] * (25 - K)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K,slow", [(3, {1: 3.0}), (5, {2: 4.0, 4: 1.5}), (9, {})])
def test_async_sgd_with_stragglers_replays_exactly(K, slow, dtype):
    X, y, model = _linear(n=30, dtype=dtype)
    w0 = model.init(dtype=dtype)
    res = cluster.run(opt.train_async_sgd, K, args=(X, y, model, w0, 40, 0.03, False),
                      faults=cluster.Faults(slow=slow))
    out = res.values[0]
    np.testing.assert_array_equal(out["w"], _replay(X, y, model, w0, 0.03, out, K, False))
    pushed = [v["pushed"] for v in res.values[1:]]
    assert sum(pushed) == 40 + (K - 2)  # every update, plus the gradients in flight at the stop
    for r, f in slow.items():  # a straggler pushes fewer gradients and they are staler
        assert pushed[r - 1] < max(pushed)
        mine = out["staleness"][out["schedule"][:, 0] == r]
        others = out["staleness"][~np.isin(out["schedule"][:, 0], list(slow)) & (np.arange(40) >= K)]
        assert mine.mean() > others.mean()
    hist = opt.staleness_histogram(out["staleness"])
    assert hist.sum() == 40


def test_async_sgd_diverges_at_large_staleness_and_lr_where_sync_converges():
    X, y, model = _linear(n=40)
    w0 = model.init()
    lr = 0.35
    _, ws0 = opt.reference_delayed_sgd(X, y, model, w0, lr, 0, steps=60)
    _, ws8 = opt.reference_delayed_sgd(X, y, model, w0, lr, 8, steps=60)
    assert model.loss(ws0[-1], X, y) < model.loss(w0, X, y)
    assert model.loss(ws8[-1], X, y) > 100 * model.loss(w0, X, y)


@pytest.mark.slow
def test_sync_and_async_sgd_on_real_processes():
    X, y, model = _linear()
    w0 = model.init()
    ref, _ = opt.reference_sgd(X, y, model, w0, 6, 0.05)
    res = cluster.run(opt.train_sync_sgd, 2, backend="process", args=(X, y, model, w0, 6, 0.05), timeout=120)
    for w, _ in res.values:
        np.testing.assert_allclose(w, ref, rtol=1e-12, atol=1e-12)
    res = cluster.run(opt.train_async_sgd, 3, backend="process", args=(X, y, model, w0, 12, 0.03, False),
                      timeout=120)
    out = res.values[0]
    np.testing.assert_array_equal(out["w"], _replay(X, y, model, w0, 0.03, out, 3, False))


def test_bad_input_gets_a_readable_error():
    X, y, model = _linear()
    with pytest.raises(ValueError, match="rows"):
        opt.reference_sgd(X, y[:-1], model, model.init(), 1, 0.1)
    with pytest.raises(cluster.RankError, match="world_size >= 2"):
        cluster.run(opt.train_async_sgd, 1, args=(X, y, model, model.init(), 3, 0.1))
    with pytest.raises(ValueError, match="negative"):
        opt.reference_delayed_sgd(X, y, model, model.init(), 0.1, [0, -1])
