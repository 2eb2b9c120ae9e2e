"""Chapter 16 tensor parallelism: Megatron and naive TP equal the dense block, layer by layer and in training."""
import functools

import numpy as np
import pytest

from scaleoutai import cluster, collectives, nn
from scaleoutai.parallel import ddp, tensor

D, A, FF = 12, 6, 10  # d_model, heads, d_ff: K = 8 leaves ranks with no heads and 1-column MLP shards
TOL = {np.float64: 1e-10, np.float32: 1e-4}


def _data(dtype=np.float64, n=2, shape=(3, 5)):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(shape + (D,)).astype(dtype), rng.standard_normal(shape + (D,)).astype(dtype))
            for _ in range(n)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_megatron_tp_block_training_equals_single_device(K, dtype):
    p0, data = nn.block_init(D, A, FF, seed=1, dtype=dtype), _data(dtype)
    ref, ref_losses = ddp.reference_train(data, p0, 3, 0.05, loss_grad=functools.partial(tensor.block_mse, n_heads=A))
    res = cluster.run(tensor.train_tp, K, args=(data, p0, 3, 0.05, A), timeout=60)
    for ps, losses in res.values:
        assert ps["Wq"].dtype == dtype
        for k in ref:
            np.testing.assert_allclose(ps[k], ref[k], rtol=TOL[dtype], atol=TOL[dtype], err_msg=k)
        np.testing.assert_allclose(losses, ref_losses, rtol=TOL[dtype])


@pytest.mark.parametrize("K", [2, 5])
def test_naive_tp_with_adam_equals_megatron_and_dense(K):
    p0, data = nn.block_init(D, A, FF, seed=2), _data(shape=(2, 4))
    ref, _ = ddp.reference_train(data, p0, 3, 0.01, optimizer="adam",
                              loss_grad=functools.partial(tensor.block_mse, n_heads=A))
    for naive in (True, False):
        res = cluster.run(tensor.train_tp, K, args=(data, p0, 3, 0.01, A), timeout=60,
                          kwargs=dict(optimizer="adam", naive=naive))
        for ps, _ in res.values:
            for k in ref:
                np.testing.assert_allclose(ps[k], ref[k], rtol=1e-9, atol=1e-10, err_msg=k)


@pytest.mark.parametrize("K", [2, 3, 8])
def test_column_then_row_parallel_linears_equal_dense_and_use_one_allreduce_each_way(K):
    rng = np.random.default_rng(3)
    x, W1, b1, W2, b2 = (rng.standard_normal(s) for s in [(4, 6), (6, 9), (9,), (9, 5), (5,)])
    dy = rng.standard_normal((4, 5))
    z = x @ W1 + b1
    y_ref = nn.gelu(z) @ W2 + b2
    df = dy @ W2.T
    dz = nn.gelu_backward(z, df)
    dx_ref = dz @ W1.T

    def worker(comm):
        cols = slice(*collectives.block_range(9, comm.size, comm.rank))
        p = {"W1": W1[:, cols], "b1": b1[cols], "W2": W2[cols], "b2": b2}
        y, cache = tensor.megatron_mlp_forward(comm, p, x)
        sent_fwd = comm.stats.messages_sent
        dx, g = tensor.megatron_mlp_backward(comm, p, cache, dy)
        return y, dx, g, sent_fwd, comm.stats.messages_sent - sent_fwd

    res = cluster.run(worker, K, timeout=30)
    for r, (y, dx, g, fwd_msgs, bwd_msgs) in enumerate(res.values):
        cols = slice(*collectives.block_range(9, K, r))
        np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g["W1"], x.T @ dz[:, cols], rtol=1e-12)
        np.testing.assert_allclose(g["W2"], nn.gelu(z[:, cols]).T @ dy, rtol=1e-12)
        np.testing.assert_allclose(g["b2"], dy.sum(0), rtol=1e-12)
        assert fwd_msgs == bwd_msgs == 2 * (K - 1)  # one ring all-reduce forward, one backward


def test_naive_tp_moves_weights_and_megatron_moves_activations():
    p0 = nn.block_init(D, A, FF, seed=4)
    data = _data(n=1, shape=(1, 2))  # few tokens: activations are smaller than weights
    bytes_ = {}
    for naive in (True, False):
        res = cluster.run(tensor.train_tp, 2, args=(data, p0, 1, 0.1, A), kwargs=dict(naive=naive), timeout=30)
        bytes_[naive] = res.stats[0].bytes_sent
    assert bytes_[True] > bytes_[False]


def test_shard_then_gather_block_round_trips_for_uneven_heads():
    p = nn.block_init(D, A, FF, seed=5)
    shards = [tensor.shard_block(p, A, 5, r) for r in range(5)]
    assert [s["Wq"].shape[1] for s in shards] == [4, 2, 2, 2, 2]  # 6 heads of 2 dims over 5 ranks
    res = cluster.run(lambda comm: tensor.gather_block(comm, shards[comm.rank]), 5, timeout=30)
    for g in res.values:
        assert all(np.array_equal(g[k], p[k]) for k in p)


def test_train_tp_rejects_unknown_optimizer():
    with pytest.raises(cluster.RankError, match="optimizer"):
        cluster.run(tensor.train_tp, 1, args=(_data(), nn.block_init(D, A, FF), 1, 0.1, A),
                    kwargs=dict(optimizer="lion"), timeout=30)


@pytest.mark.timeout(120)
def test_megatron_tp_on_real_processes_equals_single_device():
    p0, data = nn.block_init(D, A, FF, seed=6), _data()
    ref, _ = ddp.reference_train(data, p0, 2, 0.05, loss_grad=functools.partial(tensor.block_mse, n_heads=A))
    res = cluster.run(tensor.train_tp, 2, backend="process", args=(data, p0, 2, 0.05, A), timeout=100,
                      quiet=True)
    for ps, _ in res.values:
        for k in ref:
            np.testing.assert_allclose(ps[k], ref[k], rtol=1e-10, atol=1e-10, err_msg=k)
