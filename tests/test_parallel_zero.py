"""Chapter 16 ZeRO: sharded Adam (stages 1-3) equals single-device Adam; memory per rank matches the model."""
import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.parallel import ddp, zero
from scaleoutai import nn

TOL = {np.float64: 1e-10, np.float32: 1e-4}
STEPS, LR = 4, 0.01


def _data(B, seed=0, dtype=np.float64, n=3):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, 4)).astype(dtype), rng.standard_normal((B, 3)).astype(dtype))
            for _ in range(n)]


def _run(K, data, p0, stage, **kw):
    return cluster.run(zero.train_zero, K, args=(data, p0, STEPS, LR, stage), kwargs=kw, timeout=60).values


def _assert_params(ps, ref, tol):
    for k in ref:
        np.testing.assert_allclose(ps[k], ref[k], rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_sharded_adam_equals_single_device_adam(stage, K, dtype):
    data, p0 = _data(11, dtype=dtype), nn.mlp_init([4, 5, 3], seed=1, dtype=dtype)  # Psi = 43: uneven blocks
    ref, ref_losses = ddp.reference_train(data, p0, STEPS, LR, optimizer="adam")
    vals = _run(K, data, p0, stage)
    for r in range(K):
        assert vals[r]["params"]["W0"].dtype == dtype
        _assert_params(vals[r]["params"], ref, TOL[dtype])
    np.testing.assert_allclose(np.sum([v["losses"] for v in vals], axis=0), ref_losses, rtol=TOL[dtype])


@pytest.mark.parametrize("K", [3, 8])
def test_zero_with_frozen_tied_weights_and_accumulation_equals_reference(K):
    p0 = nn.mlp_init([4, 4, 4, 3], seed=2)
    p0["W1"] = p0["W0"]
    data = _data(6, seed=3)  # K = 8 > B: two ranks hold no samples
    ref, _ = ddp.reference_train(data, p0, STEPS, LR, optimizer="adam", frozen=["b0"])
    for stage in (1, 3):
        vals = _run(K, data, p0, stage, frozen=["b0"], accum=2)
        for v in vals:
            ps = v["params"]
            assert ps["W0"] is ps["W1"] and np.array_equal(ps["b0"], p0["b0"])
            assert v["psi"] == 16 + 4 + 12 + 3  # W0 (= W1) once, b1, W2, b2; b0 frozen
            _assert_params(ps, ref, 1e-10)


def test_all_stages_give_bitwise_identical_parameters_at_the_same_world_size():
    data, p0 = _data(9, seed=4), nn.mlp_init([4, 6, 3], seed=5)
    outs = [_run(3, data, p0, s)[1]["params"] for s in (0, 1, 2, 3)]
    for o in outs[1:]:
        assert all(np.array_equal(o[k], outs[0][k]) for k in p0)


@pytest.mark.parametrize("K", [1, 4])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_mixed_precision_memory_per_rank_matches_2_2_12_model(stage, K):
    p0 = nn.mlp_init([8, 16, 16, 4], seed=6)  # Psi = 484 = 4 * 121
    rng = np.random.default_rng(0)
    vals = _run(K, [(rng.standard_normal((8, 8)), rng.standard_normal((8, 4)))], p0, stage, mixed=True)
    psi = vals[0]["psi"]
    assert psi == 484
    for v in vals:
        assert v["held"] == zero.memory_model(psi, K, stage)
    assert zero.memory_model(psi, 4, 0)["total"] == 16 * psi and zero.memory_model(psi, 4, 3)["total"] == 4 * psi


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_uneven_shards_hold_exactly_their_block_and_full_precision_bytes(stage):
    data, p0 = _data(7, n=1), nn.mlp_init([4, 5, 3], seed=7)  # Psi = 43 over K = 5: blocks 9,9,9,8,8
    vals = _run(5, data, p0, stage)
    for r, v in enumerate(vals):
        assert v["held"] == zero.memory_model(43, 5, stage, bytes_per=(8, 8, 16), rank=r)


def test_mixed_precision_zero_tracks_fp64_adam_and_all_stages_agree():
    data, p0 = _data(16, seed=8), nn.mlp_init([4, 8, 3], seed=9)
    ref, _ = ddp.reference_train(data, p0, STEPS, LR, optimizer="adam")
    outs = [_run(4, data, p0, s, mixed=True)[0]["params"] for s in (0, 1, 2, 3)]
    for o in outs:
        assert o["W0"].dtype == np.float32  # the fp32 master copy
        _assert_params(o, ref, 5e-3)  # fp16 forward/backward; steps are lr = 1e-2 each
        assert all(np.array_equal(o[k], outs[0][k]) for k in p0)


def test_memory_model_rejects_bad_stage_and_zero_init_too():
    with pytest.raises(ValueError, match="stage"):
        zero.memory_model(10, 2, 4)
    with pytest.raises(cluster.RankError, match="stage must be"):
        cluster.run(zero.train_zero, 1, args=(_data(2), nn.mlp_init([4, 3]), 1, LR, 5), timeout=30)


@pytest.mark.timeout(120)
def test_zero3_on_real_processes_equals_single_device_adam():
    data, p0 = _data(9, seed=10), nn.mlp_init([4, 6, 3], seed=11)
    ref, _ = ddp.reference_train(data, p0, STEPS, LR, optimizer="adam")
    res = cluster.run(zero.train_zero, 2, backend="process", args=(data, p0, STEPS, LR, 3), timeout=100,
                      quiet=True)
    for v in res.values:
        _assert_params(v["params"], ref, 1e-10)
