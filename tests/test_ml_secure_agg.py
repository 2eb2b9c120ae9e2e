"""Chapter 14: secure aggregation (Bonawitz et al.): exact sums in Z_{2^32}, double masks, Shamir-shared recovery."""
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


def _setup_sends(rank, clients):
    """Messages a client sends before its masked vector: pair seeds to higher ranks, one share to each peer."""
    return (clients - rank) + (clients - 1)


@pytest.mark.parametrize("clients,drop,t", [(3, (0,), 2), (5, (1, 3), 3), (5, (4,), None), (8, (0, 2, 5, 7), 4),
                                            (4, (0, 1, 2), 1), (6, (), 6)])
def test_dropped_clients_masks_are_removed_and_the_survivors_sum_is_exact(clients, drop, t):
    xs = _inputs(clients, seed=clients)
    out, res = sa.run_secure_aggregation(xs, drop=drop, threshold=t)
    survivors = [c for c in range(clients) if c not in drop]
    assert out["dropped"] == [c + 1 for c in drop]
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, survivors))
    # without the unmasking round the self-masks and the dangling pair masks leave garbage
    naive = np.zeros(len(xs[0]), np.uint32)
    for r in out["seen"]:
        naive = naive + out["seen"][r]
    assert np.mean(naive == out["sum"]) < 0.01


def test_a_client_that_crashes_after_the_shares_is_recovered():
    xs = _inputs(5)
    rank = 2  # client 1: seeds to ranks 3, 4, 5 and a share to each of 4 peers, then it crashes on its vector
    out, res = sa.run_secure_aggregation(xs, faults=cluster.Faults(crash={rank: _setup_sends(rank, 5)}))
    assert out["dropped"] == [rank]
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, [0, 2, 3, 4]))
    assert isinstance(res.values[rank], cluster.RankCrashed)


@pytest.mark.parametrize("clients,t,crash_during_unmasking", [(4, 2, (3,)), (6, 3, (2, 5)), (7, 4, (3,)),
                                                              (5, 2, (2, 3))])
def test_survivors_that_drop_during_unmasking_do_not_stop_recovery_while_t_answer(clients, t, crash_during_unmasking):
    xs = _inputs(clients, seed=clients + 1)
    # client 0 (rank 1) drops before its vector; each listed rank sends its vector, then crashes on its answer
    crash = {r: _setup_sends(r, clients) + 1 for r in crash_during_unmasking}
    out, res = sa.run_secure_aggregation(xs, drop=(0,), threshold=t, faults=cluster.Faults(crash=crash))
    survivors = list(range(2, clients + 1))
    assert out["survivors"] == survivors and out["dropped"] == [1]
    assert out["responders"] == [r for r in survivors if r not in crash]
    # the crashed survivors' inputs count: their vectors arrived and their self-masks are rebuilt from shares
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, [r - 1 for r in survivors]))


def test_fewer_than_t_answers_in_the_unmasking_round_is_a_clear_error():
    xs = _inputs(5)
    # t = 3; client 0 drops, so 4 survivors; ranks 3 and 4 crash on their answers: 2 < t remain
    crash = {r: _setup_sends(r, 5) + 1 for r in (3, 4)}
    with pytest.raises(cluster.RankError, match=r"only 2 of the 4 survivors answered .* t = 3 shares"):
        sa.run_secure_aggregation(xs, drop=(0,), threshold=3, faults=cluster.Faults(crash=crash))
    with pytest.raises(cluster.RankError, match=r"only 2 of 5 clients sent a masked vector.* t = 3"):
        sa.run_secure_aggregation(xs, drop=(0, 1, 2), threshold=3)
    with pytest.raises(cluster.RankError, match="threshold t must be in 1..5"):
        sa.run_secure_aggregation(xs, threshold=6)


@pytest.mark.parametrize("clients,drop,t", [(4, (), 2), (5, (1,), 3), (6, (0, 4), 2), (7, (2, 3, 6), 4)])
def test_the_server_never_holds_t_shares_of_both_secrets_of_one_client(clients, drop, t):
    xs = _inputs(clients, d=50)
    out, res = sa.run_secure_aggregation(xs, drop=drop, threshold=t)
    for j, (self_shares, pair_shares) in out["shares"].items():
        assert not (self_shares >= t and pair_shares >= t), j
        assert (self_shares >= t) == (j in out["survivors"]) and (pair_shares >= t) == (j in out["dropped"])
    assert set(out["self_seeds"]) == set(out["survivors"]) and set(out["pair_seeds"]) == set(out["dropped"])
    # what reached rank 0, byte for byte: each survivor's vector (4 B a word) and its answer of 8-byte shares,
    # 8 per survivor's self seed and 8 per pair seed of every dropped client; nothing else
    n_s, n_d = clients - len(drop), len(drop)
    answer = (n_s * 8 + n_d * (clients - 1) * 8) * 8
    assert res.stats[0].bytes_received == n_s * (50 * 4 + answer)
    assert res.stats[0].messages_received == clients + n_s


@pytest.mark.parametrize("clients,late", [(4, 1), (6, 3)])
def test_a_late_vector_of_a_client_declared_dropped_cannot_be_unmasked(clients, late):
    d = 20_000
    xs = _inputs(clients, d=d, seed=3)
    xs[late] = np.linspace(-100, 100, d)  # a strongly structured input
    out, _ = sa.run_secure_aggregation(xs, drop=(late,))
    r = late + 1
    # the vector the client would have sent had it not been late (its seeds are the protocol's own)
    seeds = {j: sa.pair_seed(0, min(r, j), max(r, j)) for j in range(1, clients + 1) if j != r}
    y = sa.mask(sa.encode(xs[late]), r, seeds, sa.self_seed(0, r))
    # the server rebuilt the late client's pair seeds (to clean the survivors' sum), never its self seed
    assert r not in out["self_seeds"] and r in out["pair_seeds"]
    for j, s in out["pair_seeds"][r].items():
        np.testing.assert_array_equal(s, seeds[j])
    best = y.copy()
    for j, s in out["pair_seeds"][r].items():  # the most the server can do: remove every pair mask of r
        m = sa.prg(s, d)
        best = best - m if j > r else best + m
    left = best - sa.encode(xs[late])  # what still hides the input: PRG(b_r)
    np.testing.assert_array_equal(left, sa.prg(sa.self_seed(0, r), d))
    assert abs(np.corrcoef(sa.decode(best), xs[late])[0, 1]) < 0.03
    counts = np.histogram(best.astype(np.float64), bins=16, range=(0, 2 ** 32))[0]
    assert np.sum((counts - d / 16) ** 2 / (d / 16)) < 37.7  # uniform words: 99.9th percentile of chi-square(15)


@pytest.mark.slow
def test_secure_aggregation_on_real_processes_is_exact():
    xs = _inputs(3, d=64)
    out, res = sa.run_secure_aggregation(xs, drop=(1,), backend="process", timeout=120)
    assert res.backend == "process"
    np.testing.assert_array_equal(out["sum"], sa.reference_secure_sum(xs, [0, 2]))
