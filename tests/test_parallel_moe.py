"""Chapter 17 MoE: dense layer against finite differences, expert-parallel layer against the dense one."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import moe
from scaleoutai.nn import numerical_gradient

TOL = {np.float64: 1e-12, np.float32: 2e-5}  # EP sums the same terms, only per-rank matmul blocking differs


def _setup(T=37, d=6, hidden=8, E=6, dtype=np.float64, seed=0):
    params = moe.moe_init(d, hidden, E, seed=seed, dtype=dtype)
    rng = np.random.default_rng(seed + 100)
    x = rng.standard_normal((T, d)).astype(dtype)
    dy = rng.standard_normal((T, d)).astype(dtype)
    return params, x, dy


def test_capacity_is_ceil_of_cf_k_tokens_over_experts():
    assert moe.capacity(37, 6, 1, 1.0) == math.ceil(37 / 6)
    assert moe.capacity(37, 6, 2, 1.25) == math.ceil(1.25 * 2 * 37 / 6)
    assert moe.capacity(8, 4, 1, 0.5) == 1
    with pytest.raises(ValueError, match="capacity_factor"):
        moe.capacity(8, 4, 1, 0.0)


def test_top_k_out_of_range_is_refused():
    params, x, _ = _setup(E=3)
    with pytest.raises(ValueError, match="k must be in 1..E=3"):
        moe.moe_forward_dense(params, x, k=4)


@pytest.mark.parametrize("k, cf", [(1, 0.5), (1, 2.0), (2, 0.75), (2, 1.25)])
def test_dense_moe_gradients_match_finite_differences_including_drops(k, cf):
    params, x, dy = _setup(T=14, d=4, hidden=5, E=4)
    aux = 0.3

    def objective(x_, p_):
        y, cache = moe.moe_forward_dense(p_, x_, k, cf)
        return float(np.sum(dy * y) + aux * cache["stats"]["aux_loss"])

    y, cache = moe.moe_forward_dense(params, x, k, cf)
    dx, grads = moe.moe_backward_dense(params, cache, dy, aux_coef=aux)
    if cf < 1:
        assert cache["stats"]["dropped"] > 0
    num_x = numerical_gradient(lambda q: objective(q["x"], params), {"x": x.copy()})["x"]
    np.testing.assert_allclose(dx, num_x, atol=1e-6)
    num_wg = numerical_gradient(lambda q: objective(x, {**params, "Wg": q["Wg"]}), {"Wg": params["Wg"].copy()})
    np.testing.assert_allclose(grads["Wg"], num_wg["Wg"], atol=1e-6)
    e = 1
    num_e = numerical_gradient(
        lambda q: objective(x, {**params, "experts": [q if i == e else p for i, p in enumerate(params["experts"])]}),
        {kk: v.copy() for kk, v in params["experts"][e].items()})
    for kk in num_e:
        np.testing.assert_allclose(grads["experts"][e][kk], num_e[kk], atol=1e-6)


def test_dropped_assignments_are_the_latest_in_token_order_per_expert():
    params, x, _ = _setup(T=40, E=4)
    _, cache = moe.moe_forward_dense(params, x, k=1, capacity_factor=0.5)
    C = cache["stats"]["capacity"]
    top, keep = cache["top"][:, 0], cache["keep"][:, 0]
    dropped = 0
    for e in range(4):
        mine = np.flatnonzero(top == e)
        np.testing.assert_array_equal(keep[mine], np.arange(len(mine)) < C)  # first C tokens win
        dropped += max(0, len(mine) - C)
    assert cache["stats"]["dropped"] == dropped > 0
    np.testing.assert_array_equal(cache["stats"]["load"], np.minimum(np.bincount(top, minlength=4), C))


def test_second_choices_queue_behind_all_first_choices():
    params, x, _ = _setup(T=30, E=3)
    _, cache = moe.moe_forward_dense(params, x, k=2, capacity_factor=10.0)
    top, pos = cache["top"], cache["pos"]
    for e in range(3):
        assert pos[:, 1][top[:, 1] == e].min(initial=10**9) >= np.sum(top[:, 0] == e)


def test_load_balancing_loss_is_E_sum_f_times_mean_probability():
    params, x, _ = _setup(T=50, E=5)
    for k in (1, 2):
        _, cache = moe.moe_forward_dense(params, x, k, 1.0)
        P = moe.softmax(x @ params["Wg"] + params["bg"])
        top = np.argsort(-P, axis=1, kind="stable")[:, :k]
        f = np.bincount(top.ravel(), minlength=5) / (50 * k)
        assert cache["stats"]["aux_loss"] == pytest.approx(5 * np.sum(f * P.mean(axis=0)), rel=1e-12)
    uniform = {**params, "Wg": np.zeros_like(params["Wg"])}  # P = 1/E everywhere: loss exactly 1
    assert moe.moe_forward_dense(uniform, x, 1, 1.0)[1]["stats"]["aux_loss"] == pytest.approx(1.0)


def test_tokens_dropped_shrink_as_capacity_factor_grows():
    params, x, _ = _setup(T=256, d=8, E=8, seed=3)
    drops = moe.tokens_dropped(params, x, 1, [0.5, 1.0, 1.25, 2.0, 8.0])
    values = list(drops.values())
    assert values == sorted(values, reverse=True)
    assert drops[0.5] >= 256 - 8 * moe.capacity(256, 8, 1, 0.5) and drops[8.0] == 0


def _ep_worker(comm, params, x, dy, E, k, cf, aux):
    shard = moe.shard_experts(params, comm.size, comm.rank)
    xs, dys = np.array_split(x, comm.size)[comm.rank], np.array_split(dy, comm.size)[comm.rank]
    y, cache = moe.moe_forward_ep(comm, shard, xs, E, k, cf)
    dx, grads = moe.moe_backward_ep(comm, shard, cache, dys, aux_coef=aux)
    return y, dx, grads, cache["stats"]


def _check_ep(values, params, x, dy, k, cf, aux, tol):
    y, cache = moe.moe_forward_dense(params, x, k, cf)
    dx, grads = moe.moe_backward_dense(params, cache, dy, aux_coef=aux)
    np.testing.assert_allclose(np.concatenate([v[0] for v in values]), y, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.concatenate([v[1] for v in values]), dx, rtol=tol, atol=tol)
    owned = {}
    for v in values:
        np.testing.assert_allclose(v[2]["Wg"], grads["Wg"], rtol=tol, atol=tol)
        np.testing.assert_allclose(v[2]["bg"], grads["bg"], rtol=tol, atol=tol)
        assert v[3]["dropped"] == cache["stats"]["dropped"]
        assert v[3]["aux_loss"] == pytest.approx(cache["stats"]["aux_loss"], rel=tol)
        owned.update(v[2]["experts"])
    assert sorted(owned) == list(range(len(params["experts"])))  # every expert on exactly one rank
    for e, g in owned.items():
        for kk in g:
            np.testing.assert_allclose(g[kk], grads["experts"][e][kk], rtol=tol, atol=tol)
    assert y.dtype == x.dtype and dx.dtype == x.dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])  # E=6: uneven expert blocks at 5, idle ranks at 8
@pytest.mark.parametrize("k, cf", [(1, 0.5), (1, 1.25), (2, 1.0)])
def test_expert_parallel_moe_equals_dense_moe_including_drops(K, k, cf, dtype):
    params, x, dy = _setup(T=37, E=6, dtype=dtype, seed=K)
    res = cluster.run(_ep_worker, K, args=(params, x, dy, 6, k, cf, 0.1), timeout=60)
    _check_ep(res.values, params, x, dy, k, cf, 0.1, TOL[dtype])


def test_expert_parallel_with_more_ranks_than_tokens():
    params, x, dy = _setup(T=5, E=3)
    res = cluster.run(_ep_worker, 8, args=(params, x, dy, 3, 2, 1.0, 0.05), timeout=60)
    _check_ep(res.values, params, x, dy, 2, 1.0, 0.05, 1e-12)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_expert_parallel_moe_equals_dense_on_real_processes():
    params, x, dy = _setup(T=21, E=5)
    res = cluster.run(_ep_worker, 2, backend="process", args=(params, x, dy, 5, 2, 0.75, 0.1),
                      timeout=100, quiet=True)
    _check_ep(res.values, params, x, dy, 2, 0.75, 0.1, 1e-12)
