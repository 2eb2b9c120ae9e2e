"""Chapter 4 collectives against single-machine NumPy references, on the simulator and real processes."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai import collectives
from scaleoutai.perf import collective_time

WORLD_SIZES = [1, 2, 3, 5, 8, 13]  # 13 > the shortest lengths below: some ranks get empty blocks
LENGTHS = [0, 1, 7, 10, 33]
DTYPES = [np.float32, np.float64, np.int64]
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def make_input(rank: int, n: int, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed * 1000 + rank)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, size=n).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


def reference(K: int, n: int, dtype, op: str = "sum") -> np.ndarray:
    stacked = np.stack([make_input(r, n, dtype) for r in range(K)])
    return REDUCE[op](stacked, axis=0).astype(dtype) if n else np.zeros(0, dtype)


def assert_close(got: np.ndarray, want: np.ndarray, K: int) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want)
    else:  # summation order differs from np.sum: allow K roundings of the magnitude
        eps = np.finfo(want.dtype).eps
        np.testing.assert_allclose(got, want, rtol=4 * K * eps, atol=8 * K * eps)


def _every_collective(comm, n: int, dtype_name: str, op: str) -> dict:
    dtype = np.dtype(dtype_name)
    x = make_input(comm.rank, n, dtype)
    root = comm.size - 1
    out = {name: f(comm, x, op=op) for name, f in collectives.ALLREDUCES.items()}
    out["reduce"] = collectives.reduce(comm, x, root=root, op=op)
    out["reduce_scatter"] = collectives.reduce_scatter(comm, x, op=op)
    out["broadcast"] = collectives.broadcast(comm, x if comm.rank == root else None, root=root)
    out["scatter"] = collectives.scatter(comm, x if comm.rank == root else None, root=root)
    out["gather"] = collectives.gather(comm, x, root=root)
    out["all_gather"] = collectives.all_gather(comm, np.array_split(x, comm.size)[comm.rank])
    out["all_to_all"] = collectives.all_to_all(comm, np.array_split(x, comm.size))
    return out


def check_every_collective(values: list, K: int, n: int, dtype, op: str) -> None:
    dtype = np.dtype(dtype)
    root = K - 1
    want = reference(K, n, dtype, op)
    x_root = make_input(root, n, dtype)
    for r, got in enumerate(values):
        for name in collectives.ALLREDUCES:
            assert_close(got[name], want, K)
        assert_close(got["reduce_scatter"], np.array_split(want, K)[r], K)
        if r == root:
            assert_close(got["reduce"], want, K)
            np.testing.assert_array_equal(got["gather"], np.concatenate([make_input(q, n, dtype) for q in range(K)]))
        else:
            assert got["reduce"] is None and got["gather"] is None
        np.testing.assert_array_equal(got["broadcast"], x_root)
        np.testing.assert_array_equal(got["scatter"], np.array_split(x_root, K)[r])
        np.testing.assert_array_equal(got["all_gather"], make_input(r, n, dtype) if K == 1 else
                                      np.concatenate([np.array_split(make_input(q, n, dtype), K)[q] for q in range(K)]))
        for q, block in enumerate(got["all_to_all"]):
            np.testing.assert_array_equal(block, np.array_split(make_input(q, n, dtype), K)[r])


@pytest.mark.parametrize("K", WORLD_SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_collective_matches_numpy_reference_on_sim_for_uneven_lengths(K, dtype):
    for n in LENGTHS:
        res = cluster.run(_every_collective, K, args=(n, np.dtype(dtype).name, "sum"), timeout=60)
        check_every_collective(res.values, K, n, dtype, "sum")


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("K", [2, 3, 8])
def test_reductions_support_max_and_min(K, op):
    for dtype in DTYPES:
        res = cluster.run(_every_collective, K, args=(10, np.dtype(dtype).name, op), timeout=60)
        check_every_collective(res.values, K, 10, dtype, op)


@pytest.mark.slow
@pytest.mark.parametrize("K", [2, 3])
def test_every_collective_matches_reference_on_real_processes(K):
    def worker(comm):
        return [_every_collective(comm, n, np.dtype(d).name, "sum") for n in (7, 1) for d in DTYPES]

    res = cluster.run(worker, K, backend="process", timeout=120, quiet=True)
    i = 0
    for n in (7, 1):
        for d in DTYPES:
            check_every_collective([v[i] for v in res.values], K, n, d, "sum")
            i += 1


def test_allreduces_give_bitwise_identical_results_on_every_rank():
    def worker(comm):
        x = make_input(comm.rank, 101, np.float32)
        return [f(comm, x) for f in collectives.ALLREDUCES.values()]

    for K in (3, 5, 6, 8):
        res = cluster.run(worker, K)
        for i in range(len(collectives.ALLREDUCES)):
            for v in res.values[1:]:
                np.testing.assert_array_equal(v[i], res.values[0][i])


@pytest.mark.parametrize("K", [1, 2, 3, 5, 13])
def test_reduce_scatter_and_all_gather_fill_one_out_buffer_like_the_reference(K):
    n = 10  # 13 > n: some blocks are empty

    def worker(comm):
        out = np.full(n, -1.0)
        mine = collectives.reduce_scatter(comm, make_input(comm.rank, n, np.float64), out=out)
        gathered = collectives.all_gather(comm, mine, out=out)
        return np.shares_memory(mine, out) or mine.size == 0, gathered is out, out

    want = reference(K, n, np.float64)
    for in_out, same, out in cluster.run(worker, K).values:
        assert in_out and same
        assert_close(out, want, K)


def test_ring_allreduce_preserves_multidimensional_shape():
    def worker(comm):
        return collectives.ring_allreduce(comm, np.full((3, 4, 5), comm.rank, dtype=np.float64))

    res = cluster.run(worker, 4)
    assert res.values[0].shape == (3, 4, 5)
    assert np.all(res.values[2] == 6.0)


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_ring_allreduce_sends_exactly_2k_minus_1_messages_and_2k_minus_1_over_k_of_the_data(K):
    n = 8 * 7 * 5 * 3  # divisible by every K here
    res = cluster.run(lambda comm: collectives.ring_allreduce(comm, np.ones(n, np.float32)), K)
    for s in res.stats:
        assert s.messages_sent == s.messages_received == 2 * (K - 1)
        assert s.bytes_sent == s.bytes_received == 2 * (K - 1) * (n // K) * 4


def test_ring_allreduce_bytes_stay_within_one_element_per_message_of_the_bound_for_uneven_lengths():
    K, n = 5, 23
    res = cluster.run(lambda comm: collectives.ring_allreduce(comm, np.ones(n, np.float64)), K)
    for s in res.stats:
        assert s.messages_sent == 2 * (K - 1)
        assert s.bytes_sent <= 2 * (K - 1) * -(-n // K) * 8


@pytest.mark.parametrize("K", [2, 4, 8])
def test_ring_allreduce_simulated_time_equals_alpha_beta_formula(K):
    alpha, beta, n = 5e-6, 2e-9, 4096
    net = cluster.Network(alpha=alpha, beta=beta)
    res = cluster.run(lambda comm: collectives.ring_allreduce(comm, np.ones(n, np.float32)), K, network=net)
    assert res.sim_time == pytest.approx(collective_time("ring_allreduce", 4 * n, K, alpha, beta), rel=1e-9)


@pytest.mark.parametrize("name", ["tree_allreduce", "recursive_doubling_allreduce", "broadcast"])
def test_tree_algorithms_take_log2_k_rounds_at_powers_of_two(name):
    alpha, beta, n, K = 1e-5, 1e-9, 1000, 8
    fn = getattr(collectives, name)
    res = cluster.run(lambda comm: fn(comm, np.ones(n, np.float64)), K, network=cluster.Network(alpha, beta))
    assert res.sim_time == pytest.approx(collective_time(name, 8 * n, K, alpha, beta), rel=1e-9)


def test_naive_allreduce_root_moves_k_minus_1_full_copies_each_way():
    K, n = 6, 100
    res = cluster.run(lambda comm: collectives.naive_allreduce(comm, np.ones(n, np.float64)), K)
    assert res.stats[0].bytes_received == res.stats[0].bytes_sent == (K - 1) * n * 8
    assert all(s.bytes_sent == n * 8 for s in res.stats[1:])


def test_ring_beats_naive_in_simulated_time_for_large_messages():
    net = cluster.Network(alpha=1e-6, beta=1e-9)
    x = np.ones(1 << 16, np.float32)
    t = {name: cluster.run(lambda comm, f=f: f(comm, x), 8, network=net).sim_time for name, f in collectives.ALLREDUCES.items()}
    assert t["ring"] < t["tree"] < t["naive"]


def test_broadcast_ignores_x_on_non_roots():
    res = cluster.run(lambda comm: collectives.broadcast(comm, "ignored" if comm.rank else np.arange(3), root=0), 4)
    assert all(np.array_equal(v, np.arange(3)) for v in res.values)


def test_result_does_not_alias_the_input():
    def worker(comm):
        x = np.ones(4)
        outs = [f(comm, x) for f in collectives.ALLREDUCES.values()] + [collectives.reduce_scatter(comm, x)]
        for o in outs:
            o += 100
        return x

    for K in (1, 3):
        assert all(np.all(v == 1) for v in cluster.run(worker, K).values)


@pytest.mark.parametrize("call, message", [
    (lambda comm: collectives.ring_allreduce(comm, [1, 2, 3]), "NumPy array, got list"),
    (lambda comm: collectives.tree_allreduce(comm, np.ones(2), op="mean"), "op='mean' is not supported"),
    (lambda comm: collectives.broadcast(comm, np.ones(2), root=9), "root=9 is not a rank"),
    (lambda comm: collectives.all_to_all(comm, [np.ones(1)]), "all_to_all needs a list of 2 blocks"),
])
def test_bad_input_raises_one_clear_error(call, message):
    with pytest.raises(cluster.RankError, match=message):
        cluster.run(call, 2)


@pytest.mark.parametrize("n, K", [(0, 1), (7, 1), (7, 2), (7, 3), (10, 4), (3, 9)])
def test_worker_range_puts_everything_on_rank_0_alone_else_splits_over_ranks_1_to_k_minus_1(n, K):
    from scaleoutai.collectives import block_bounds, worker_range

    held = [list(worker_range(n, K, r)) for r in range(K)]
    assert sorted(i for h in held for i in h) == list(range(n))  # every item once
    if K == 1:
        assert held == [list(range(n))]
    else:
        assert held[0] == [] and [len(h) for h in held[1:]] == [b - a for a, b in block_bounds(n, K - 1)]
