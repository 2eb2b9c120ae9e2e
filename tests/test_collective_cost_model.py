"""The simulator's single-port link and the closed forms of perf.alphabeta agree (Chapters 3-4)."""
import numpy as np
import pytest

from scaleoutai import cluster, collectives
from scaleoutai.perf import COLLECTIVES, collective_time
from scaleoutai.perf.alphabeta import _terms

ALPHA, BETA = 1e-5, 1e-9
W = 8  # float64 items


def _mine(n: int, K: int, r: int) -> np.ndarray:
    lo, hi = collectives.block_range(n, K, r)
    return np.full(hi - lo, r + 1.0)


def _worker(name: str, n: int):
    """A per-rank function running collective ``name`` on n items (nbytes as the closed form means it)."""
    def fn(comm):
        K, r = comm.size, comm.rank
        if name == "gather":
            return collectives.gather(comm, _mine(n, K, r))
        if name == "all_gather":
            return collectives.all_gather(comm, _mine(n, K, r))
        if name == "scatter":
            return collectives.scatter(comm, np.arange(n, dtype=np.float64) if r == 0 else None)
        if name == "all_to_all":
            return collectives.all_to_all(comm, [_mine(n, K, j) for j in range(K)])
        return getattr(collectives, name)(comm, np.full(n, r + 1.0))
    return fn


def _sim_time(name: str, n: int, K: int, ingress: str = "serial") -> float:
    net = cluster.Network(ALPHA, BETA, ingress=ingress)
    return cluster.run(_worker(name, n), K, network=net).sim_time


@pytest.mark.parametrize("name", COLLECTIVES)
def test_closed_form_equals_simulated_time_for_every_k_up_to_17(name):
    for K in range(1, 18):
        for n in (16 * K, 16 * K + 5, 3):  # divisible, uneven blocks, fewer items than ranks
            got, want = _sim_time(name, n, K), collective_time(name, W * n, K, ALPHA, BETA)
            if n % K == 0:
                assert got == pytest.approx(want, rel=1e-9, abs=1e-15), (name, K, n)
            else:  # blocks differ by one item: at most one item per round on the critical path
                bound = float(_terms(name, K)[0]) * W * BETA
                assert abs(got - want) <= bound * (1 + 1e-9) + 1e-15, (name, K, n, got, want, bound)


@pytest.mark.parametrize("K", [2, 3, 5, 8, 13])
def test_gather_to_one_root_pays_incast_on_a_serial_link(K):
    m = 1000  # items per rank
    serial, free = _sim_time("gather", m * K, K), _sim_time("gather", m * K, K, ingress="free")
    assert serial == pytest.approx((K - 1) * (ALPHA + m * W * BETA), rel=1e-12)
    assert free == pytest.approx(ALPHA + m * W * BETA, rel=1e-12)  # the old model: all arrive at once


@pytest.mark.parametrize("K", [3, 5, 6, 7, 11])
def test_binomial_reduce_takes_ceil_log2_k_rounds_when_k_is_not_a_power_of_two(K):
    n = 500
    rounds = int(np.ceil(np.log2(K)))
    assert _sim_time("reduce", n, K) == pytest.approx(rounds * (ALPHA + n * W * BETA), rel=1e-12)
    assert _sim_time("reduce", n, K, ingress="free") < _sim_time("reduce", n, K)  # free ingress cheats


def test_ring_allreduce_is_the_same_under_both_link_models():
    for K in (2, 3, 7):
        assert _sim_time("ring_allreduce", 64 * K, K) == _sim_time("ring_allreduce", 64 * K, K, "free")


def test_a_late_receive_fills_the_gap_its_message_arrived_in():
    # Rank 0 receives rank 2's message first (sent at t=1.0), then rank 1's (sent at t=0): the earlier
    # message lands in the idle ingress before the later one, not after it.
    def fn(comm):
        if comm.rank == 0:
            comm.recv(2)
            t2 = comm.clock
            comm.recv(1)
            return t2, comm.clock
        if comm.rank == 2:
            comm.compute(1.0)
        comm.send(np.zeros(1000), 0)

    net = cluster.Network(alpha=0.1, beta=0.0)
    t2, t_end = cluster.run(fn, 3, network=net).values[0]
    assert t2 == pytest.approx(1.1) and t_end == pytest.approx(1.1)

    def crowded(comm):  # both sent at 0: the second in recv order waits for the first
        if comm.rank == 0:
            comm.recv(2)
            comm.recv(1)
            return comm.clock
        comm.send(np.zeros(1000), 0)

    assert cluster.run(crowded, 3, network=net).values[0] == pytest.approx(0.2)


def test_incast_timing_is_deterministic_across_runs():
    def fn(comm):
        rng = np.random.default_rng(comm.rank)
        for _ in range(20):
            if comm.rank == 0:
                for src in rng.permutation(np.arange(1, comm.size)):
                    comm.recv(int(src))
            else:
                comm.compute(float(rng.uniform(0, 1e-4)))
                comm.send(np.zeros(int(rng.integers(1, 2000))), 0)
        return comm.clock

    runs = [cluster.run(fn, 9, network=cluster.Network(1e-6, 1e-9)).values for _ in range(5)]
    assert all(r == runs[0] for r in runs)


def test_an_unknown_link_model_is_a_clear_error():
    with pytest.raises(ValueError, match="ingress='shared'.*serial"):
        cluster.Network(ingress="shared")
