"""Chapter 19: DP x TP x PP training on the device mesh equals one device; memory, traffic and
scaling-law arithmetic (the mesh itself: test_cluster_groups)."""
import math

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cluster.groups import DeviceMesh
from scaleoutai.parallel import mesh as MS
from scaleoutai.parallel import zero

pytestmark = pytest.mark.timeout(60)

L, D, A, FF = 4, 8, 2, 16  # 4 blocks; per block 4 D^2 + 2 D FF + FF + 5 D = 568 parameters
PSI = L * 568


def _data(B=6, T=3, n=2, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, T, D)).astype(dtype), rng.standard_normal((B, T, D)).astype(dtype))
            for _ in range(n)]


# --- composed training equals one device ---------------------------------------------------------

@pytest.mark.parametrize("shape, m, schedule", [
    ((1, 1, 1), 1, "1f1b"), ((2, 1, 1), 1, "1f1b"), ((1, 2, 1), 1, "1f1b"), ((2, 2, 1), 2, "1f1b"),
    ((3, 2, 1), 1, "1f1b"), ((1, 1, 2), 3, "1f1b"), ((2, 1, 2), 2, "gpipe"), ((2, 2, 2), 2, "1f1b"),
    ((1, 3, 3), 2, "gpipe")])
def test_mesh_training_equals_single_device_after_several_steps(shape, m, schedule):
    p0, data = MS.stack_init(L, D, A, FF, seed=1), _data(B=7)  # B = 7: uneven dp shards and micro-batches
    ref, ref_losses = MS.reference_train(data, p0, 3, 0.05, A)
    r = MS.run_mesh(DeviceMesh(*shape), data, p0, 3, 0.05, A, micro_batches=m, schedule=schedule,
                    bucket_bytes=4096)
    assert sorted(r.params) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(r.params[k], ref[k], rtol=1e-10, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(r.losses, ref_losses, rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 2, 1), (1, 2, 2)])
def test_mesh_training_with_adam_and_float32_equals_single_device(shape):
    p64 = MS.stack_init(L, D, A, FF, seed=2)
    ref, _ = MS.reference_train(_data(), p64, 3, 0.01, A, optimizer="adam")
    r = MS.run_mesh(DeviceMesh(*shape), _data(), p64, 3, 0.01, A, micro_batches=2, optimizer="adam")
    for k in ref:
        np.testing.assert_allclose(r.params[k], ref[k], rtol=1e-9, atol=1e-11, err_msg=k)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    ref32, _ = MS.reference_train(_data(dtype=np.float32), p32, 3, 0.05, A)
    r32 = MS.run_mesh(DeviceMesh(*shape), _data(dtype=np.float32), p32, 3, 0.05, A)
    for k in ref32:
        assert r32.params[k].dtype == np.float32
        np.testing.assert_allclose(r32.params[k], ref32[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_train_mesh_rejects_wrong_world_size_and_too_few_samples():
    p0, data = MS.stack_init(2, D, A, FF), _data(B=2)
    with pytest.raises(cluster.RankError, match="needs 4 ranks"):
        cluster.run(MS.train_mesh, 2, args=(DeviceMesh(2, 2, 1), data, p0, 1, 0.1, A), timeout=10)
    with pytest.raises(cluster.RankError, match="micro-batches"):
        MS.run_mesh(DeviceMesh(2, 1, 1), data, p0, 1, 0.1, A, micro_batches=2, timeout=10)


# --- memory and traffic models against what the run holds and sends ------------------------------

@pytest.mark.parametrize("shape, m", [((2, 1, 1), 1), ((4, 1, 1), 2), ((1, 2, 1), 3), ((1, 3, 1), 1),
                                      ((1, 1, 2), 3), ((2, 2, 2), 2), ((2, 1, 4), 2)])
def test_comm_model_matches_bytes_measured_on_the_simulator(shape, m):
    dp, tp, pp = shape
    b, T, steps = 2, 3, 2  # micro-batch rows: b * T * D = 48 activations, divisible by tp
    p0, data = MS.stack_init(L, D, A, FF), _data(B=dp * m * b, T=T)
    r = MS.run_mesh(DeviceMesh(*shape), data, p0, steps, 0.05, A, micro_batches=m, bucket_bytes=1 << 30)
    model = MS.comm_per_step(PSI, L, D, T, b, m, dp, tp, pp, grad_bytes=8, act_bytes=8)
    sharded = (4 * D * D + 2 * D * FF + FF) / tp + 5 * D  # LayerNorms and b2 stay replicated under TP
    for rank, v in enumerate(r.values):
        d, t, p = v["coords"]
        sent = v["bytes"]
        assert sent["dp"] == pytest.approx(2 * (dp - 1) / dp * 8 * sharded * L / pp * steps, rel=1e-12)
        # the model counts Psi / tp, ignoring the replicated 5 D of each block's 568 parameters
        assert sent["dp"] == pytest.approx(model["dp"] * steps, rel=(tp - 1) * 5 * D / 568 * 1.01 + 1e-12)
        assert sent["tp"] == pytest.approx(model["tp"] * steps, rel=1e-12)
        ends = (p == 0) + (p == pp - 1) if pp > 1 else 0  # the first and last stages send one way only
        assert sent["pp"] == pytest.approx(model["pp"] * steps * (1 - ends / 2), rel=1e-12)
        # the three axes account for every byte the rank sent while training ...
        assert sent["dp"] + sent["tp"] + sent["pp"] == sent["total"] <= r.run.stats[rank].bytes_sent
        if tp == 1:  # ... and, with no final tp all-gather of the weights, for everything res.stats saw
            assert sent["total"] == r.run.stats[rank].bytes_sent


@pytest.mark.parametrize("shape", [(2, 1, 1), (1, 1, 2), (1, 2, 2)])
def test_memory_model_matches_held_state_bytes(shape):
    dp, tp, pp = shape
    r = MS.run_mesh(DeviceMesh(*shape), _data(), MS.stack_init(L, D, A, FF), 1, 0.01, A, optimizer="adam")
    mem = MS.memory_per_device(PSI, L, D, 3, 6, A, dp, tp, pp, bytes_per=(8, 8, 16))
    for v in r.values:
        tol = 0 if tp == 1 else (tp - 1) * 5 * D / 568 * 1.01
        for k in ("params", "grads", "optimizer"):
            assert v["held"][k] == pytest.approx(mem[k], rel=tol, abs=0), k


def test_memory_model_zero_stages_agree_with_chapter16_and_activation_hand_values():
    for stage in range(4):
        mine = MS.memory_per_device(7e9, 32, 4096, 2048, 1, 32, dp=8, zero_stage=stage)
        ref = zero.memory_model(int(7e9), 8, stage)
        for k in ("params", "grads", "optimizer"):
            assert mine[k] == pytest.approx(ref[k], rel=1e-12)
    # GPT-3 175B layer, s=2048, b=1, h=12288, a=96: s b h (34 + 5 a s / h) = 2048 * 12288 * 114 bytes
    one = MS.memory_per_device(1, 1, 12288, 2048, 1, 96, in_flight=1)["activations"]
    assert one == 2048 * 12288 * 114
    tp8 = MS.memory_per_device(1, 1, 12288, 2048, 1, 96, tp=8, in_flight=1, sequence_parallel=False)
    assert tp8["activations"] == pytest.approx(2048 * 12288 * (10 + 3 + 10), rel=1e-12)
    rc = MS.memory_per_device(1, 96, 12288, 2048, 1, 96, tp=8, pp=8, recompute="full")  # 1F1B: 8 in flight
    assert rc["activations"] == pytest.approx(2 * 2048 * 12288 / 8 * 96, rel=1e-12)
    sel = MS.memory_per_device(1, 96, 12288, 2048, 1, 96, tp=8, pp=8, recompute="selective")
    assert sel["activations"] == pytest.approx(34 * 2048 * 12288 / 8 * 96, rel=1e-12)
    # 7B, mixed-precision Adam, no sharding: 16 bytes/parameter = 112 GB before activations
    assert MS.memory_per_device(7e9, 32, 4096, 2048, 1, 32)["params"] + \
        MS.memory_per_device(7e9, 32, 4096, 2048, 1, 32)["optimizer"] == pytest.approx(14 * 7e9)
    with pytest.raises(ValueError, match="zero_stage"):
        MS.memory_per_device(1, 1, 1, 1, 1, 1, zero_stage=4)
    with pytest.raises(ValueError, match="recompute"):
        MS.memory_per_device(1, 1, 1, 1, 1, 1, recompute=True)
