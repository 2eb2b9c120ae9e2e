"""Chapter 15 DDP: bucketed and naive data parallelism equal single-device training, also for uneven shards."""
import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import ddp
from scaleoutai import nn

TOL = {np.float64: 1e-10, np.float32: 2e-5}


def _data(B, n_batches=3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, 4)).astype(dtype), rng.standard_normal((B, 2)).astype(dtype))
            for _ in range(n_batches)]


def _run(K, data, p0, steps, **kw):
    res = cluster.run(ddp.train_ddp, K, args=(data, p0, steps), kwargs=kw, timeout=60)
    return res


def _assert_params(ps, ref, dtype):
    for k in ref:
        np.testing.assert_allclose(ps[k], ref[k], rtol=TOL[dtype], atol=TOL[dtype], err_msg=k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_bucketed_ddp_with_accumulation_equals_single_device_sgd(K, dtype):
    data, p0 = _data(13, dtype=dtype), nn.mlp_init([4, 6, 5, 2], seed=1, dtype=dtype)
    ref, ref_losses = ddp.reference_train(data, p0, 4, lr=0.05)
    res = _run(K, data, p0, 4, lr=0.05, bucket_bytes=100, accum=2)
    for r in range(K):
        _assert_params(res.values[r][0], ref, dtype)
        assert res.values[r][0]["W0"].dtype == dtype
    np.testing.assert_allclose(np.sum([v[1] for v in res.values], axis=0), ref_losses, rtol=TOL[dtype])


@pytest.mark.parametrize("K", [2, 5, 8])
def test_naive_ddp_adam_equals_single_device_adam_with_frozen_and_tied_weights(K):
    p0 = nn.mlp_init([4, 4, 4, 2], seed=2)
    p0["W1"] = p0["W0"]  # tied: one array under two names
    data = _data(7)
    ref, _ = ddp.reference_train(data, p0, 5, lr=0.01, optimizer="adam", frozen=["b1"])
    assert ref["W0"] is ref["W1"] and np.array_equal(ref["b1"], p0["b1"])
    res = _run(K, data, p0, 5, lr=0.01, optimizer="adam", frozen=["b1"])
    for r in range(K):
        ps = res.values[r][0]
        assert ps["W0"] is ps["W1"] and np.array_equal(ps["b1"], p0["b1"])
        _assert_params(ps, ref, np.float64)


def test_more_ranks_than_samples_gives_the_full_batch_gradient():
    data, p0 = _data(3), nn.mlp_init([4, 5, 2], seed=3)
    ref, _ = ddp.reference_train(data, p0, 3, lr=0.1)
    res = _run(8, data, p0, 3, lr=0.1, bucket_bytes=64, accum=3)  # ranks 3..7 have empty shards
    for r in range(8):
        _assert_params(res.values[r][0], ref, np.float64)


def test_gradient_accumulation_equals_large_batch_on_one_rank():
    data, p0 = _data(10), nn.mlp_init([4, 3, 2], seed=4)
    ref, _ = ddp.reference_train(data, p0, 3, lr=0.1)
    res = _run(1, data, p0, 3, lr=0.1, accum=4)  # micro-batches 3,3,2,2 of B = 10
    _assert_params(res.values[0][0], ref, np.float64)


@pytest.mark.parametrize("K", [2, 3])
def test_naive_sends_one_allreduce_per_tensor_and_bucketed_one_per_bucket(K):
    data, p0 = _data(6, n_batches=1), nn.mlp_init([4, 8, 8, 2], seed=5)
    steps, n_tensors = 2, len(p0)
    buckets = ddp.make_buckets(p0, 300)
    assert 1 < len(buckets) < n_tensors and buckets[0][0] == "b2"  # reverse order: last layer first
    naive = _run(K, data, p0, steps, lr=0.1)
    bucketed = _run(K, data, p0, steps, lr=0.1, bucket_bytes=300)
    per_allreduce = 2 * (K - 1)  # ring: K-1 reduce-scatter + K-1 all-gather sends per rank
    for r in range(K):
        assert naive.stats[r].messages_sent == steps * n_tensors * per_allreduce
        assert bucketed.stats[r].messages_sent == steps * len(buckets) * per_allreduce


def test_frozen_parameters_are_not_communicated():
    data, p0 = _data(6, n_batches=1), nn.mlp_init([4, 8, 2], seed=6)
    full = _run(2, data, p0, 1, lr=0.1)
    part = _run(2, data, p0, 1, lr=0.1, frozen=["W0", "b0"])
    assert full.stats[0].messages_sent == 4 * 2 and part.stats[0].messages_sent == 2 * 2
    assert full.stats[0].bytes_sent - part.stats[0].bytes_sent == (4 * 8 + 8) * 8  # W0 and b0, fp64


def test_make_buckets_rejects_nonpositive_size_and_tied_partial_freeze():
    p = nn.mlp_init([2, 2, 2])
    with pytest.raises(ValueError, match="bucket_bytes"):
        ddp.make_buckets(p, 0)
    p["W1"] = p["W0"]
    with pytest.raises(ValueError, match="frozen together"):
        ddp.param_groups(p, ["W1"])
    with pytest.raises(ValueError, match="not parameters"):
        ddp.param_groups(p, ["nope"])


@pytest.mark.timeout(120)
def test_bucketed_ddp_on_real_processes_equals_single_device():
    data, p0 = _data(9), nn.mlp_init([4, 6, 2], seed=7)
    ref, _ = ddp.reference_train(data, p0, 3, lr=0.05, optimizer="adam")
    res = cluster.run(ddp.train_ddp, 2, backend="process", args=(data, p0, 3),
                      kwargs=dict(lr=0.05, bucket_bytes=128, accum=2, optimizer="adam"), timeout=100, quiet=True)
    for r in range(2):
        _assert_params(res.values[r][0], ref, np.float64)
