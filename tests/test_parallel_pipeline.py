"""Chapter 16 pipeline parallelism and activation checkpointing against the single-device MLP."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import pipeline as pp
from scaleoutai.nn import mlp_backward, mlp_forward, mlp_init, mse_loss

SIZES = [5, 8, 7, 6, 9, 4, 3]  # 6 layers: p = 4 gives stages of 2, 2, 1, 1 layers
TOL = {np.float64: 1e-12, np.float32: 1e-5}


def _data(B=11, dtype=np.float64, seed=0):
    params = mlp_init(SIZES, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((B, SIZES[0])).astype(dtype)
    t = rng.standard_normal((B, SIZES[-1])).astype(dtype)
    y, cache = mlp_forward(params, x)
    loss, dy = mse_loss(y, t)
    _, grads = mlp_backward(params, cache, dy)
    return params, x, t, loss, grads


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("m", [1, 2, 5, 8])  # B = 11: micro-batches of unequal size
def test_pipeline_gradients_equal_single_device_full_batch(p, m, schedule, dtype):
    params, x, t, loss, grads = _data(dtype=dtype)
    res = pp.pipeline_step(params, x, t, p, m, schedule)
    assert sorted(res.grads) == sorted(grads)
    for k in grads:
        assert res.grads[k].dtype == dtype
        np.testing.assert_allclose(res.grads[k], grads[k], rtol=TOL[dtype], atol=TOL[dtype])
    assert res.loss == pytest.approx(loss, rel=TOL[dtype])


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(4, 1), (4, 4), (4, 8), (4, 16), (2, 5), (3, 8)])
def test_measured_bubble_equals_formula(p, m, schedule):
    params, x, t, _, _ = _data(B=16)
    res = pp.pipeline_step(params, x, t, p, m, schedule, t_fwd=1.0, t_bwd=2.0)
    assert res.bubble == pytest.approx(pp.bubble_fraction(p, m), abs=1e-12)
    assert res.makespan == pytest.approx((m + p - 1) * 3.0)


def test_bubble_formula_values():
    assert pp.bubble_fraction(1, 7) == 0
    assert pp.bubble_fraction(4, 1) == 0.75
    assert pp.bubble_fraction(4, 8) == pytest.approx(3 / 11)


def test_link_latency_adds_to_the_makespan():
    params, x, t, _, _ = _data(B=16)
    free = pp.pipeline_step(params, x, t, 4, 8, "1f1b")
    slow = pp.pipeline_step(params, x, t, 4, 8, "1f1b", network=cluster.Network(alpha=0.1, beta=0.0))
    assert slow.makespan > free.makespan and slow.bubble > free.bubble


@pytest.mark.parametrize("p, m", [(4, 8), (3, 2), (4, 16), (2, 1)])
def test_gpipe_stashes_m_micro_batches_and_1f1b_at_most_p_minus_stage(p, m):
    params, x, t, _, _ = _data(B=16)
    assert pp.pipeline_step(params, x, t, p, m, "gpipe").peak_stash == [m] * p
    assert pp.pipeline_step(params, x, t, p, m, "1f1b").peak_stash == [min(p - s, m) for s in range(p)]


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_schedules_run_every_forward_before_its_backward_once(name):
    for p in (1, 2, 4, 7):
        for m in (1, 3, 9):
            for s in range(p):
                ops = pp.SCHEDULES[name](p, m, s)
                assert sorted(ops) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
                assert all(ops.index(("F", i)) < ops.index(("B", i)) for i in range(m))


def test_plot_schedule_draws_one_box_per_operation():
    import matplotlib

    matplotlib.use("Agg")
    params, x, t, _, _ = _data(B=16)
    res = pp.pipeline_step(params, x, t, 3, 4, "1f1b")
    ax = pp.plot_schedule(res)
    assert len(ax.patches) == 2 * 3 * 4 == len(res.events)
    assert "bubble" in ax.get_title()


def test_bad_pipeline_arguments_are_refused_with_a_clear_message():
    params, x, t, _, _ = _data()
    with pytest.raises(ValueError, match="p=7 stages"):
        pp.pipeline_step(params, x, t, 7, 2)
    with pytest.raises(ValueError, match="m=12 micro-batches"):
        pp.pipeline_step(params, x, t, 2, 12)
    with pytest.raises(ValueError, match="schedule"):
        pp.pipeline_step(params, x, t, 2, 2, "zigzag")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 16, 20])
def test_checkpointed_backward_equals_plain_backward(k, dtype):
    L = 16
    params = mlp_init([6] * (L + 1), seed=2, dtype=dtype)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)).astype(dtype)
    y, cache = mlp_forward(params, x)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx, grads = mlp_backward(params, cache, dy)
    y2, ck = pp.checkpointed_mlp_forward(params, x, k)
    dx2, grads2, stats = pp.checkpointed_mlp_backward(params, ck, dy)
    np.testing.assert_array_equal(y2, y)  # same operations in the same order: bitwise equal
    np.testing.assert_array_equal(dx2, dx)
    for key in grads:
        np.testing.assert_array_equal(grads2[key], grads[key])
    plain = sum(h.size + z.size for h, z in cache)
    assert stats["plain_activation_elements"] == plain
    n_seg = math.ceil(L / k)
    last = L - (n_seg - 1) * k  # layers in the last segment, whose cache the forward keeps
    assert stats["recompute_flops"] == stats["forward_flops"] * (L - last) // L
    if k < L:
        assert stats["peak_activation_elements"] < plain
    else:
        assert stats["peak_activation_elements"] == plain and stats["recompute_flops"] == 0


def test_checkpoint_interval_near_sqrt_L_minimises_memory():
    L = 16
    params = mlp_init([6] * (L + 1), seed=2)
    x = np.ones((4, 6))
    peaks = {}
    for k in range(1, L + 1):
        y, ck = pp.checkpointed_mlp_forward(params, x, k)
        peaks[k] = pp.checkpointed_mlp_backward(params, ck, np.ones_like(y))[2]["peak_activation_elements"]
    best = min(peaks, key=peaks.get)
    assert abs(best - math.sqrt(L)) <= 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_pipeline_on_real_processes_equals_single_device():
    params, x, t, loss, grads = _data()
    res = pp.pipeline_step(params, x, t, 2, 4, "1f1b", t_fwd=0.001, t_bwd=0.002, backend="process",
                           timeout=100)
    for k in grads:
        np.testing.assert_allclose(res.grads[k], grads[k], rtol=1e-12, atol=1e-12)
    assert res.loss == pytest.approx(loss, rel=1e-12) and res.peak_stash == [2, 1]


def _deep(B=12, layers=12, dtype=np.float64, seed=0):
    sizes = [5] + [6, 7] * (layers // 2 - 1) + [6, 3]
    params = mlp_init(sizes, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    x, t = rng.standard_normal((B, sizes[0])).astype(dtype), rng.standard_normal((B, sizes[-1])).astype(dtype)
    y, cache = mlp_forward(params, x)
    loss, dy = mse_loss(y, t)
    return params, x, t, loss, mlp_backward(params, cache, dy)[1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p, m, v", [(3, 3, 2), (3, 6, 2), (4, 4, 2), (4, 8, 3), (3, 9, 4), (5, 5, 2), (3, 3, 1)])
def test_interleaved_1f1b_gradients_equal_single_device(p, m, v, dtype):
    params, x, t, loss, grads = _deep(B=18 if m == 9 else 16, layers=12, dtype=dtype)
    res = pp.pipeline_step(params, x, t, p, m, "interleaved", v=v)
    assert sorted(res.grads) == sorted(grads)
    for k in grads:
        np.testing.assert_allclose(res.grads[k], grads[k], rtol=TOL[dtype], atol=TOL[dtype])
    assert res.loss == pytest.approx(loss, rel=TOL[dtype])


@pytest.mark.parametrize("p, m, v", [(3, 3, 2), (3, 6, 2), (4, 8, 2), (4, 8, 3), (3, 12, 4), (4, 4, 1)])
def test_interleaved_bubble_shrinks_by_v_and_messages_grow_by_v(p, m, v):
    params, x, t, _, _ = _deep(B=24, layers=12)
    res = pp.pipeline_step(params, x, t, p, m, "interleaved", v=v, t_fwd=1.0, t_bwd=2.0)
    assert res.bubble == pytest.approx(pp.bubble_fraction(p, m, v), abs=1e-12)
    assert res.makespan == pytest.approx((m + (p - 1) / v) * 3.0)
    # every micro-batch crosses p v - 1 chunk boundaries forward and again backward
    assert res.messages == 2 * m * (p * v - 1)
    plain = pp.pipeline_step(params, x, t, p, m, "1f1b")
    assert res.bubble <= plain.bubble + 1e-12 and plain.messages == 2 * m * (p - 1)


def test_interleaved_schedule_runs_every_chunk_forward_before_its_backward_once():
    for p, m, v in [(3, 3, 2), (4, 8, 3), (5, 10, 2)]:
        for s in range(p):
            ops = pp.interleaved_schedule(p, m, s, v)
            want = [(k, i, j) for k in "FB" for i in range(m) for j in range(v)]
            assert sorted(ops) == sorted(want)
            assert all(ops.index(("F", i, j)) < ops.index(("B", i, j)) for i in range(m) for j in range(v))


@pytest.mark.parametrize("kwargs, match", [
    (dict(p=2, m=4, v=2), "p >= 3"), (dict(p=3, m=4, v=2), "multiple of p"),
    (dict(p=4, m=4, v=4), "stages need"), (dict(p=3, m=3, v=0), "whole number"),
])
def test_interleaved_refuses_what_it_cannot_schedule(kwargs, match):
    params, x, t, _, _ = _deep(B=16, layers=12)
    with pytest.raises(ValueError, match=match):
        pp.pipeline_step(params, x, t, kwargs["p"], kwargs["m"], "interleaved", v=kwargs["v"])
    with pytest.raises(ValueError, match="needs schedule='interleaved'"):
        pp.pipeline_step(params, x, t, 3, 3, "1f1b", v=2)
