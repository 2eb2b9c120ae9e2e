"""The shared sub-communicators and device mesh (cluster.groups): coordinates, axis groups, every
collective on every sub-group equal to the full-group answer, barriers and peer checks."""
import math

import numpy as np
import pytest

from scaleoutai import cluster, collectives
from scaleoutai.cluster import groups

pytestmark = pytest.mark.timeout(60)


# --- mesh coordinates and groups -----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 1), (3, 2, 2), (2, 2, 2), (1, 4, 3)])
def test_mesh_coords_roundtrip_and_axis_groups_partition_the_ranks(shape):
    m = groups.DeviceMesh(*shape)
    assert m.size == math.prod(shape)
    assert [m.rank(*m.coords(r)) for r in range(m.size)] == list(range(m.size))
    for i, axis in enumerate(groups.AXES):
        axis_groups = m.groups(axis)
        assert len(axis_groups) == m.size // shape[i] and all(len(g) == shape[i] for g in axis_groups)
        assert sorted(r for g in axis_groups for r in g) == list(range(m.size))
        for g in axis_groups:
            cs = [m.coords(r) for r in g]
            assert [c[i] for c in cs] == list(range(shape[i]))  # ordered by the axis coordinate
            assert all(c[:i] + c[i + 1:] == cs[0][:i] + cs[0][i + 1:] for c in cs)  # only that axis varies
    assert m.groups("tp")[0] == list(range(shape[1]))  # tp fastest: one node's consecutive ranks


def test_mesh_rejects_bad_degrees_ranks_and_axes():
    for bad in [(0, 1, 1), (1, -2, 1), (1, 1, 1.5)]:
        with pytest.raises(ValueError, match="degrees >= 1"):
            groups.DeviceMesh(*bad)
    m = groups.DeviceMesh(2, 2, 1)
    with pytest.raises(ValueError, match="not in the mesh"):
        m.coords(4)
    with pytest.raises(ValueError, match="axis"):
        m.group(0, "ep")


# --- SubComm -------------------------------------------------------------------------------------

def _collectives_on_groups(comm, mesh, n):
    out = {}
    for axis in groups.AXES:
        sub = groups.SubComm(comm, mesh.group(comm.rank, axis))
        x = np.arange(n, dtype=np.int64) * (comm.rank + 1) + comm.rank  # every rank can rebuild any rank's x
        blocks = [np.full(sub.rank + j + 1, 10 * comm.rank + j, np.float32) for j in range(sub.size)]
        out[axis] = {"ring": collectives.ring_allreduce(sub, x), "rd": collectives.recursive_doubling_allreduce(sub, x),
                     "rs": collectives.reduce_scatter(sub, x), "ag": collectives.all_gather(sub, x[: comm.rank % 3]),
                     "bc": collectives.broadcast(sub, x, root=sub.size - 1), "a2a": collectives.all_to_all(sub, blocks)}
        sub.barrier()
    return out


@pytest.mark.parametrize("shape, n", [((2, 3, 1), 7), ((3, 2, 2), 5), ((1, 5, 1), 2)])
def test_subcomm_collectives_equal_full_group_results_on_every_subgroup(shape, n):
    mesh = groups.DeviceMesh(*shape)
    res = cluster.run(_collectives_on_groups, mesh.size, args=(mesh, n), timeout=60)
    xs = [np.arange(n, dtype=np.int64) * (r + 1) + r for r in range(mesh.size)]
    for r, out in enumerate(res.values):
        for axis in groups.AXES:
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
    sub = groups.SubComm(comm, mesh.group(comm.rank, "tp"))
    comm.compute(float(comm.rank))
    sub.barrier()
    return comm.clock, sub.stats.messages_sent


def test_subcomm_barrier_synchronises_only_its_group():
    mesh = groups.DeviceMesh(2, 3, 1)  # tp groups {0, 1, 2} and {3, 4, 5}
    res = cluster.run(_barrier_worker, 6, args=(mesh,), network=cluster.Network(0.0, 0.0), timeout=30)
    clocks = [v[0] for v in res.values]
    assert clocks == [2.0, 2.0, 2.0, 5.0, 5.0, 5.0]
    assert [v[1] for v in res.values] == [2, 1, 1, 2, 1, 1]


def _bad_subcomm(comm, ranks, peer):
    sub = groups.SubComm(comm, ranks)
    sub.send(np.zeros(1), peer)


@pytest.mark.parametrize("ranks, peer, match", [([1], 0, "not in the group"), ([0, 0], 0, "distinct"),
                                                ([0, 5], 0, "distinct"), ([0, 1], 2, "out of range")])
def test_subcomm_rejects_non_members_duplicates_and_bad_peers(ranks, peer, match):
    with pytest.raises(cluster.RankError, match=match):
        cluster.run(_bad_subcomm, 2, args=(ranks, peer), timeout=10)


def _subcomm_counts(comm, n, dtype):
    sub = groups.SubComm(comm, list(range(comm.size))[::-1])  # reversed: group rank != global rank
    x = np.arange(n, dtype=dtype) + comm.rank
    out = np.empty(n, dtype)
    got = sub.sendrecv(x, (sub.rank + 1) % sub.size, (sub.rank - 1) % sub.size, out=out) if sub.size > 1 else x
    return sub.rank, isinstance(sub, cluster.Communicator), got, sub.stats.bytes_sent, comm.stats.bytes_sent


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_subcomm_is_a_communicator_that_counts_its_own_traffic(K, dtype):
    res = cluster.run(_subcomm_counts, K, args=(4, dtype), timeout=30)
    for r, (sub_rank, is_comm, got, sub_bytes, all_bytes) in enumerate(res.values):
        assert is_comm and sub_rank == K - 1 - r
        src = (r + 1) % K  # group rank - 1 is the next global rank in the reversed group
        np.testing.assert_array_equal(got, np.arange(4, dtype=dtype) + src)
        assert sub_bytes == all_bytes == 4 * np.dtype(dtype).itemsize


def _singleton(comm):
    sub = groups.SubComm(comm, [comm.rank])
    sub.barrier()
    return collectives.ring_allreduce(sub, np.arange(3.0) + comm.rank)


def test_a_group_of_one_returns_its_own_data():
    res = cluster.run(_singleton, 3, timeout=30)
    for r, v in enumerate(res.values):
        np.testing.assert_array_equal(v, np.arange(3.0) + r)
