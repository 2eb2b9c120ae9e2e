"""Chapter 1: K shards' weighted gradients sum to the single-machine gradient (sim and real processes)."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.collectives import block_bounds
from scaleoutai.foundations.sharding import (linear_mse_gradient, local_weighted_gradient, naive_sharded_gradient,
                                            shard, sharded_gradient)

WORLD_SIZES = [1, 2, 3, 5, 8]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def problem(N: int, d: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, d)).astype(dtype)
    y = rng.standard_normal(N).astype(dtype)
    w = rng.standard_normal(d).astype(dtype)
    return X, y, w


def reference_gradient(X, y, w):
    """Independent float64 reference: the mean of per-example gradients 2 (x_i . w - y_i) x_i."""
    X, y, w = (a.astype(np.float64) for a in (X, y, w))
    return np.mean([2.0 * (x @ w - t) * x for x, t in zip(X, y)], axis=0)


@pytest.mark.parametrize("n", [0, 1, 7, 10, 33])
@pytest.mark.parametrize("K", WORLD_SIZES + [40])
def test_block_bounds_match_numpy_array_split_including_empty_shards(n, K):
    x = np.arange(n)
    parts = np.array_split(x, K)
    assert [b - a for a, b in block_bounds(n, K)] == [len(p) for p in parts]
    for r in range(K):
        np.testing.assert_array_equal(shard(x, K, r), parts[r])


@pytest.mark.parametrize("bad", [(-1, 2), (3, 0), (3, 1.5), (True, 2)])
def test_block_bounds_rejects_bad_counts_with_a_readable_message(bad):
    with pytest.raises(ValueError, match="block_bounds needs"):
        block_bounds(*bad)


def test_shard_rejects_a_rank_outside_the_group():
    with pytest.raises(ValueError, match=r"rank=3 is not one of the K=3 ranks"):
        shard(np.arange(5), 3, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_mse_gradient_matches_per_example_mean_and_keeps_dtype(dtype):
    X, y, w = problem(23, 4, dtype)
    g = linear_mse_gradient(X, y, w)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, reference_gradient(X, y, w), **TOL[dtype])


def test_gradient_of_an_empty_shard_is_zero():
    X, y, w = problem(0, 3, np.float64)
    np.testing.assert_array_equal(linear_mse_gradient(X, y, w), np.zeros(3))


def test_mismatched_shapes_name_the_shapes():
    X, y, w = problem(5, 3, np.float64)
    with pytest.raises(ValueError, match=r"shapes do not line up"):
        linear_mse_gradient(X, y[:4], w)


@pytest.mark.parametrize("N", [1, 7, 40])
@pytest.mark.parametrize("K", WORLD_SIZES + [50])
def test_weighted_shard_gradients_sum_to_single_machine_gradient(K, N):
    X, y, w = problem(N, 3, np.float64, seed=K)
    total = sum(local_weighted_gradient(X, y, w, K, r) for r in range(K))
    np.testing.assert_allclose(total, reference_gradient(X, y, w), **TOL[np.float64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K", WORLD_SIZES + [12])  # 12 > N = 10: two ranks hold empty shards
@pytest.mark.parametrize("fn", [sharded_gradient, naive_sharded_gradient], ids=["ring", "naive"])
def test_sharded_gradient_equals_reference_on_every_rank(fn, K, dtype):
    X, y, w = problem(10, 5, dtype, seed=3)  # N = 10 is uneven for K = 3, 8
    res = cluster.run(fn, K, args=(X, y, w), timeout=30)
    want = reference_gradient(X, y, w)
    for g in res.values:
        assert g.dtype == dtype and g.shape == (5,)
        np.testing.assert_allclose(g, want, **TOL[dtype])


def test_ring_moves_fewer_bytes_through_rank_zero_than_the_naive_gather():
    X, y, w = problem(64, 1024, np.float64)
    K = 8
    ring = cluster.run(sharded_gradient, K, args=(X, y, w), timeout=30)
    naive = cluster.run(naive_sharded_gradient, K, args=(X, y, w), timeout=30)
    d_bytes = 1024 * 8
    assert naive.stats[0].bytes_sent == (K - 1) * d_bytes == naive.stats[0].bytes_received
    assert ring.stats[0].bytes_sent == 2 * (K - 1) * d_bytes // K
    np.testing.assert_allclose(ring.values[0], naive.values[0], rtol=1e-12, atol=1e-12)


def _gradient_and_torch(comm, X, y, w):
    """Inside a real process: the from-scratch ring, and torch.distributed.all_reduce of the same terms."""
    import torch
    import torch.distributed as dist

    ours = sharded_gradient(comm, X, y, w)
    t = torch.from_numpy(local_weighted_gradient(X, y, w, comm.size, comm.rank))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return ours, t.numpy()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sharded_gradient_on_real_processes_matches_reference_and_torch_all_reduce():
    X, y, w = problem(11, 4, np.float64, seed=5)
    want = reference_gradient(X, y, w)
    for K in (2, 3):
        res = cluster.run(_gradient_and_torch, K, backend="process", args=(X, y, w), timeout=90, quiet=True)
        for ours, theirs in res.values:
            np.testing.assert_allclose(ours, want, **TOL[np.float64])
            np.testing.assert_allclose(theirs, want, **TOL[np.float64])
