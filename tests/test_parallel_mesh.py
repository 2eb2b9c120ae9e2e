"""Chapter 19: device mesh and sub-group communicators, DP x TP x PP training equals one device, memory,
traffic and scaling-law arithmetic."""
import math

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai import collectives as C
from scaleoutai.parallel import mesh as MS
from scaleoutai.parallel import zero

pytestmark = pytest.mark.timeout(60)

L, D, A, FF = 4, 8, 2, 16  # 4 blocks; per block 4 D^2 + 2 D FF + FF + 5 D = 568 parameters
PSI = L * 568


def _data(B=6, T=3, n=2, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, T, D)).astype(dtype), rng.standard_normal((B, T, D)).astype(dtype))
            for _ in range(n)]


# --- mesh coordinates and groups -----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 1), (3, 2, 2), (2, 2, 2), (1, 4, 3)])
def test_mesh_coords_roundtrip_and_axis_groups_partition_the_ranks(shape):
    m = MS.DeviceMesh(*shape)
    assert m.size == math.prod(shape)
    assert [m.rank(*m.coords(r)) for r in range(m.size)] == list(range(m.size))
    for i, axis in enumerate(MS.AXES):
        groups = m.groups(axis)
        assert len(groups) == m.size // shape[i] and all(len(g) == shape[i] for g in groups)
        assert sorted(r for g in groups for r in g) == list(range(m.size))
        for g in groups:
            cs = [m.coords(r) for r in g]
            assert [c[i] for c in cs] == list(range(shape[i]))  # ordered by the axis coordinate
            assert all(c[:i] + c[i + 1:] == cs[0][:i] + cs[0][i + 1:] for c in cs)  # only that axis varies
    assert m.groups("tp")[0] == list(range(shape[1]))  # tp fastest: one node's consecutive ranks


def test_mesh_rejects_bad_degrees_ranks_and_axes():
    for bad in [(0, 1, 1), (1, -2, 1), (1, 1, 1.5)]:
        with pytest.raises(ValueError, match="degrees >= 1"):
            MS.DeviceMesh(*bad)
    m = MS.DeviceMesh(2, 2, 1)
    with pytest.raises(ValueError, match="not in the mesh"):
        m.coords(4)
    with pytest.raises(ValueError, match="axis"):
        m.group(0, "ep")


# --- SubComm -------------------------------------------------------------------------------------

def _collectives_on_groups(comm, mesh, n):
    out = {}
    for axis in MS.AXES:
        sub = MS.SubComm(comm, mesh.group(comm.rank, axis))
        x = np.arange(n, dtype=np.int64) * (comm.rank + 1) + comm.rank  # every rank can rebuild any rank's x
        blocks = [np.full(sub.rank + j + 1, 10 * comm.rank + j, np.float32) for j in range(sub.size)]
        out[axis] = {"ring": C.ring_allreduce(sub, x), "rd": C.recursive_doubling_allreduce(sub, x),
                     "rs": C.reduce_scatter(sub, x), "ag": C.all_gather(sub, x[: comm.rank % 3]),
                     "bc": C.broadcast(sub, x, root=sub.size - 1), "a2a": C.all_to_all(sub, blocks)}
        sub.barrier()
    return out


@pytest.mark.parametrize("shape, n", [((2, 3, 1), 7), ((3, 2, 2), 5), ((1, 5, 1), 2)])
def test_subcomm_collectives_equal_full_group_results_on_every_subgroup(shape, n):
    mesh = MS.DeviceMesh(*shape)
    res = cluster.run(_collectives_on_groups, mesh.size, args=(mesh, n), timeout=60)
    xs = [np.arange(n, dtype=np.int64) * (r + 1) + r for r in range(mesh.size)]
    for r, out in enumerate(res.values):
        for axis in MS.AXES:
            g = mesh.group(r, axis)
            me = g.index(r)
            total = sum(xs[q] for q in g)
            np.testing.assert_array_equal(out[axis]["ring"], total)
            np.testing.assert_array_equal(out[axis]["rd"], total)
            np.testing.assert_array_equal(out[axis]["rs"], np.array_split(total, len(g))[me])
            np.testing.assert_array_equal(out[axis]["ag"], np.concatenate([xs[q][: q % 3] for q in g]))
            np.testing.assert_array_equal(out[axis]["bc"], xs[g[-1]])
            for j, q in enumerate(g):  # block me of group member j
                np.testing.assert_array_equal(out[axis]["a2a"][j], np.full(j + me + 1, 10 * q + me, np.float32))


def _barrier_worker(comm, mesh):
    sub = MS.SubComm(comm, mesh.group(comm.rank, "tp"))
    comm.compute(float(comm.rank))
    sub.barrier()
    return comm.clock, sub.stats.messages_sent


def test_subcomm_barrier_synchronises_only_its_group():
    mesh = MS.DeviceMesh(2, 3, 1)  # tp groups {0, 1, 2} and {3, 4, 5}
    res = cluster.run(_barrier_worker, 6, args=(mesh,), network=cluster.Network(0.0, 0.0), timeout=30)
    clocks = [v[0] for v in res.values]
    assert clocks == [2.0, 2.0, 2.0, 5.0, 5.0, 5.0]
    assert [v[1] for v in res.values] == [2, 1, 1, 2, 1, 1]


def _bad_subcomm(comm, ranks, peer):
    sub = MS.SubComm(comm, ranks)
    sub.send(np.zeros(1), peer)


@pytest.mark.parametrize("ranks, peer, match", [([1], 0, "not in the group"), ([0, 0], 0, "distinct"),
                                                ([0, 5], 0, "distinct"), ([0, 1], 2, "not a group rank")])
def test_subcomm_rejects_non_members_duplicates_and_bad_peers(ranks, peer, match):
    with pytest.raises(cluster.RankError, match=match):
        cluster.run(_bad_subcomm, 2, args=(ranks, peer), timeout=10)


# --- composed training equals one device ---------------------------------------------------------

@pytest.mark.parametrize("shape, m, schedule", [
    ((1, 1, 1), 1, "1f1b"), ((2, 1, 1), 1, "1f1b"), ((1, 2, 1), 1, "1f1b"), ((2, 2, 1), 2, "1f1b"),
    ((3, 2, 1), 1, "1f1b"), ((1, 1, 2), 3, "1f1b"), ((2, 1, 2), 2, "gpipe"), ((2, 2, 2), 2, "1f1b"),
    ((1, 3, 3), 2, "gpipe")])
def test_mesh_training_equals_single_device_after_several_steps(shape, m, schedule):
    p0, data = MS.stack_init(L, D, A, FF, seed=1), _data(B=7)  # B = 7: uneven dp shards and micro-batches
    ref, ref_losses = MS.train_reference(data, p0, 3, 0.05, A)
    r = MS.run_mesh(MS.DeviceMesh(*shape), data, p0, 3, 0.05, A, micro_batches=m, schedule=schedule,
                    bucket_bytes=4096)
    assert sorted(r.params) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(r.params[k], ref[k], rtol=1e-10, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(r.losses, ref_losses, rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 2, 1), (1, 2, 2)])
def test_mesh_training_with_adam_and_float32_equals_single_device(shape):
    p64 = MS.stack_init(L, D, A, FF, seed=2)
    ref, _ = MS.train_reference(_data(), p64, 3, 0.01, A, optimizer="adam")
    r = MS.run_mesh(MS.DeviceMesh(*shape), _data(), p64, 3, 0.01, A, micro_batches=2, optimizer="adam")
    for k in ref:
        np.testing.assert_allclose(r.params[k], ref[k], rtol=1e-9, atol=1e-11, err_msg=k)
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    ref32, _ = MS.train_reference(_data(dtype=np.float32), p32, 3, 0.05, A)
    r32 = MS.run_mesh(MS.DeviceMesh(*shape), _data(dtype=np.float32), p32, 3, 0.05, A)
    for k in ref32:
        assert r32.params[k].dtype == np.float32
        np.testing.assert_allclose(r32.params[k], ref32[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_train_mesh_rejects_wrong_world_size_and_too_few_samples():
    p0, data = MS.stack_init(2, D, A, FF), _data(B=2)
    with pytest.raises(cluster.RankError, match="needs 4 ranks"):
        cluster.run(MS.train_mesh, 2, args=(MS.DeviceMesh(2, 2, 1), data, p0, 1, 0.1, A), timeout=10)
    with pytest.raises(cluster.RankError, match="micro-batches"):
        MS.run_mesh(MS.DeviceMesh(2, 1, 1), data, p0, 1, 0.1, A, micro_batches=2, timeout=10)


# --- memory and traffic models against what the run holds and sends ------------------------------

@pytest.mark.parametrize("shape, m", [((2, 1, 1), 1), ((4, 1, 1), 2), ((1, 2, 1), 3), ((1, 3, 1), 1),
                                      ((1, 1, 2), 3), ((2, 2, 2), 2), ((2, 1, 4), 2)])
def test_comm_model_matches_bytes_measured_on_the_simulator(shape, m):
    dp, tp, pp = shape
    b, T, steps = 2, 3, 2  # micro-batch rows: b * T * D = 48 activations, divisible by tp
    p0, data = MS.stack_init(L, D, A, FF), _data(B=dp * m * b, T=T)
    r = MS.run_mesh(MS.DeviceMesh(*shape), data, p0, steps, 0.05, A, micro_batches=m, bucket_bytes=1 << 30)
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
    r = MS.run_mesh(MS.DeviceMesh(*shape), _data(), MS.stack_init(L, D, A, FF), 1, 0.01, A, optimizer="adam")
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
