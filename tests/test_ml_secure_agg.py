"""Chapter 14: secure aggregation by pairwise masking: exact sums in Z_{2^32}, masked vectors, dropout recovery."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.ml import secure_agg as sa


def _inputs(n_clients, d=257, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(d) * 10).astype(dtype) for _ in range(n_clients)]


def test_encoding_round_trips_and_sums_exactly_with_wraparound():
    x = np.array([-3.25, 0.0, 1.5, -0.0000152587890625, 32767.0])
    np.testing.assert_array_equal(sa.decode(sa.encode(x)), x)  # all representable at 16 fractional bits
    a, b = np.array([30000.0, -30000.0]), np.array([2000.0, -2000.0])
    total = sa.encode(a) + sa.encode(b)  # 32000 * 2^16 overflows int32 words: the sum still decodes
    np.testing.assert_array_equal(sa.decode(total), [32000.0, -32000.0])
    with pytest.raises(ValueError, match="fractional bits"):
        sa.encode(np.array([40000.0]))
    with pytest.raises(ValueError, match="finite"):
        sa.encode(np.array([np.nan]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("clients", [1, 2, 3, 5, 8])
def test_masks_cancel_and_the_sum_is_exact_in_the_encoding(clients, dtype):
    xs = _inputs(clients, dtype=dtype)
    out, res = sa.run_secure_aggregation(xs)
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, range(clients)))
    np.testing.assert_allclose(out["value"], np.sum(np.stack(xs).astype(np.float64), axis=0),
                               atol=clients * 2.0 ** -17)  # rounding of each input to 2^-16
    assert out["dropped"] == [] and out["survivors"] == list(range(1, clients + 1))
    if clients >= 2:  # with a peer to pair with, nothing the server saw is an input
        for r, y in out["seen"].items():
            assert np.mean(y == sa.encode(xs[r - 1])) < 0.01


def test_a_single_masked_vector_is_uncorrelated_with_its_input():
    d = 20_000
    x = np.linspace(-100, 100, d)  # a strongly structured input
    xs = [x, -x, np.zeros(d)]
    out, _ = sa.run_secure_aggregation(xs)
    y = out["seen"][1].astype(np.float64)
    assert abs(np.corrcoef(y, sa.encode(x).view(np.int32).astype(np.float64))[0, 1]) < 0.03
    assert abs(np.corrcoef(y, x)[0, 1]) < 0.03
    counts = np.histogram(y, bins=16, range=(0, 2 ** 32))[0]  # uniform words: chi-square with 15 dof
    chi2 = np.sum((counts - d / 16) ** 2 / (d / 16))
    assert chi2 < 37.7  # the 99.9th percentile of chi-square(15)
    assert np.abs(sa.decode(out["seen"][1]) - x).max() > 1e3  # decoding one masked vector reveals nothing


@pytest.mark.parametrize("clients,drop", [(3, (0,)), (5, (1, 3)), (5, (4,)), (8, (0, 2, 5, 7)), (4, (0, 1, 2))])
def test_dropped_clients_masks_are_removed_and_the_survivors_sum_is_exact(clients, drop):
    xs = _inputs(clients, seed=clients)
    out, res = sa.run_secure_aggregation(xs, drop=drop)
    survivors = [c for c in range(clients) if c not in drop]
    assert out["dropped"] == [c + 1 for c in drop]
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, survivors))
    # without the recovery step the dangling masks leave garbage
    naive = np.zeros(len(xs[0]), np.uint32)
    for r in out["seen"]:
        naive = naive + out["seen"][r]
    assert not np.array_equal(naive, out["sum"])


def test_a_client_that_crashes_after_sending_its_seeds_is_recovered():
    xs = _inputs(5)
    rank = 2  # client 1: it sends seeds to ranks 3, 4, 5, then crashes as it sends its masked vector
    out, res = sa.run_secure_aggregation(xs, faults=cluster.Faults(crash={rank: 5 - rank}))
    assert out["dropped"] == [rank]
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, [0, 2, 3, 4]))
    assert isinstance(res.values[rank], cluster.RankCrashed)


def test_a_survivor_that_drops_during_recovery_is_reported_not_summed_wrong():
    xs = _inputs(4)
    # client 0 (rank 1) drops; rank 3 sends seeds to rank 4 (1 message), its vector (2), then crashes
    with pytest.raises(cluster.RankError, match="dropped during recovery"):
        sa.run_secure_aggregation(xs, drop=(0,), faults=cluster.Faults(crash={3: 2}))


def test_the_server_never_receives_a_pair_seed_unless_a_client_dropped():
    xs = _inputs(4, d=50)
    _, res = sa.run_secure_aggregation(xs)
    # each client sends the server its vector (200 B) and an empty seed reveal; nothing else reaches rank 0
    assert res.stats[0].bytes_received == 4 * 50 * 4
    _, res = sa.run_secure_aggregation(xs, drop=(2,))
    assert res.stats[0].bytes_received == 3 * 50 * 4 + 3 * 32  # plus one 32-byte seed per survivor


@pytest.mark.slow
def test_secure_aggregation_on_real_processes_is_exact():
    xs = _inputs(2, d=64)
    out, res = sa.run_secure_aggregation(xs, drop=(1,), backend="process", timeout=120)
    assert res.backend == "process"
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, [0]))
