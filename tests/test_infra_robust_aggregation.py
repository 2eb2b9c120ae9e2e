"""Chapter 35: robust aggregation against one-machine references and its promised bounds, and training
under attack (split from the reliability tests; checkpoints and the DP ledger have their own files)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scaleoutai import cluster, datasets, nn
from scaleoutai.collectives import block_bounds
from scaleoutai.infra import reliability as rl

ATTACK_NAMES = ("sign_flip", "gaussian", "alie", "ipm")


# --- brute-force references, written with loops and no shared code --------------------------------------

def brute_median(V):
    out = []
    for col in V.astype(np.float64).T:
        s = sorted(col)
        k = len(s)
        out.append(s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2)
    return np.array(out)


def brute_trimmed(V, f):
    return np.array([sum(sorted(col)[f:len(col) - f]) / (len(col) - 2 * f) for col in V.astype(np.float64).T])


def brute_scores(V, f):
    V = V.astype(np.float64)
    K = len(V)
    return [sum(sorted(float(np.sum((V[i] - V[j]) ** 2)) for j in range(K) if j != i)[:K - f - 2]) for i in range(K)]


def brute_multi_krum(V, f, m):
    s = brute_scores(V, f)
    chosen = sorted(sorted(range(len(V)), key=lambda i: (s[i], i))[:m])
    return V.astype(np.float64)[chosen].mean(axis=0)


def defined_fs(rule, K):
    limit = {"mean": K - 1, "median": (K - 1) // 2, "trimmed_mean": (K - 1) // 2,
             "krum": (K - 3) // 2, "multi_krum": (K - 3) // 2}[rule]
    return list(range(0, limit + 1))


# --- rules ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K", range(1, 10))
def test_every_rule_over_the_communicator_equals_the_one_machine_rule_for_K_1_to_9(K):
    rng = np.random.default_rng(K)
    for dtype, root in ((np.float64, 0), (np.float32, K - 1), (np.float64, None)):
        V = rng.standard_normal((K, 7)).astype(dtype)
        for rule in rl.RULES:
            for f in defined_fs(rule, K):
                want = rl.aggregate(V, rule, f)
                res = cluster.run(lambda c: rl.robust_aggregate(c, V[c.rank], rule, f, root=root), K, timeout=10)
                for got in res.values:
                    assert got.dtype == dtype
                    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("K,d", [(1, 3), (2, 4), (3, 1), (5, 6), (6, 5), (8, 3), (9, 7)])
def test_rules_equal_brute_force_loops_including_ties(K, d):
    rng = np.random.default_rng(100 + K)
    for V in (rng.standard_normal((K, d)), rng.integers(-2, 3, size=(K, d)).astype(np.float64)):  # ints: ties
        np.testing.assert_allclose(rl.coordinate_median(V), brute_median(V), rtol=0, atol=1e-12)
        np.testing.assert_allclose(rl.mean(V), V.mean(axis=0), rtol=0, atol=1e-12)
        for f in defined_fs("trimmed_mean", K):
            np.testing.assert_allclose(rl.trimmed_mean(V, f), brute_trimmed(V, f), rtol=0, atol=1e-12)
        for f in defined_fs("krum", K):
            np.testing.assert_allclose(rl.krum_scores(V, f), brute_scores(V, f), rtol=1e-12, atol=1e-12)
            for m in range(1, K + 1):
                np.testing.assert_allclose(rl.multi_krum(V, f, m), brute_multi_krum(V, f, m), rtol=0, atol=1e-12)
            np.testing.assert_array_equal(rl.krum(V, f), brute_multi_krum(V, f, 1))


def test_krum_ties_go_to_the_lower_index_and_multi_krum_spans_krum_to_mean():
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [9.0, 9.0]])
    assert np.array_equal(rl.krum(V, 1), V[0])  # rows 0 and 2 tie; rows 1 and 3 tie too
    np.testing.assert_array_equal(rl.multi_krum(V, 1, len(V)), V.mean(axis=0))
    np.testing.assert_array_equal(rl.multi_krum(V, 1), V[:4].mean(axis=0))  # m = K - f leaves the outlier out


def _attacked(rng, K, n_byz, attack, d=6):
    honest = rng.standard_normal((K - n_byz, d)) + 0.5
    byz = rl.attack_vectors(attack, honest, n_byz, rng) if n_byz else np.zeros((0, d))
    V = np.concatenate([honest, byz])
    order = rng.permutation(K)  # attackers at any position
    return V[order], honest


@pytest.mark.parametrize("attack", ATTACK_NAMES)
def test_median_and_trimmed_mean_stay_in_the_honest_range_for_every_f_below_K_over_2(attack):
    rng = np.random.default_rng(7)
    for K in range(1, 10):
        for f in defined_fs("median", K):
            for n_byz in range(0, f + 1):
                if n_byz == K:
                    continue
                V, honest = _attacked(rng, K, n_byz, attack)
                lo, hi = honest.min(axis=0) - 1e-12, honest.max(axis=0) + 1e-12
                for got in (rl.coordinate_median(V), rl.trimmed_mean(V, f)):
                    assert np.all((lo <= got) & (got <= hi)), (K, f, n_byz)


@pytest.mark.parametrize("attack", ATTACK_NAMES)
def test_krum_and_multi_krum_choose_within_sqrt_K_f_2_honest_diameters_of_an_honest_vector(attack):
    rng = np.random.default_rng(8)
    for K in range(3, 10):
        for f in defined_fs("krum", K):
            V, honest = _attacked(rng, K, f, attack)
            diam = max(np.linalg.norm(a - b) for a, b in itertools.combinations(honest, 2)) if len(honest) > 1 else 0
            bound = math.sqrt(K - f - 2) * diam + 1e-9
            chosen = np.argsort(rl.krum_scores(V, f), kind="stable")[:K - f]
            for i in chosen:  # every vector multi-Krum averages (Krum's is the first)
                assert np.linalg.norm(honest - V[i], axis=1).min() <= bound, (K, f, attack)
            centre = honest.mean(axis=0)
            reach = bound + np.linalg.norm(honest - centre, axis=1).max()
            assert np.linalg.norm(rl.multi_krum(V, f) - centre) <= reach


def test_krum_picks_an_honest_vector_when_the_attackers_are_far_away():
    rng = np.random.default_rng(9)
    for K, f in ((5, 1), (7, 2), (9, 3)):
        honest = rng.standard_normal((K - f, 4))
        V = np.concatenate([honest, 1e3 * rng.standard_normal((f, 4))])
        assert any(np.array_equal(rl.krum(V, f), h) for h in honest)


def test_one_attacker_moves_the_mean_without_bound_but_not_the_robust_rules():
    rng = np.random.default_rng(10)
    honest = rng.standard_normal((6, 5))
    for scale in (1e2, 1e6):
        V = np.concatenate([honest, scale * np.ones((1, 5))])
        assert np.linalg.norm(rl.mean(V) - honest.mean(axis=0)) > scale / 10
        for rule in ("median", "trimmed_mean", "krum", "multi_krum"):
            assert np.linalg.norm(rl.aggregate(V, rule, 1) - honest.mean(axis=0)) < 5


def test_non_finite_entries_are_trimmed_like_outliers():
    rng = np.random.default_rng(11)
    honest = rng.standard_normal((5, 3))
    V = np.concatenate([honest, [[np.nan, np.inf, -np.inf]]])
    for rule in ("median", "trimmed_mean", "krum", "multi_krum"):
        got = rl.aggregate(V, rule, 1)
        assert np.all(np.isfinite(got)) and np.all(got <= honest.max(axis=0) + 1e-12), rule
    assert not np.all(np.isfinite(rl.mean(V)))


@pytest.mark.parametrize("rule,K,f,match", [
    ("median", 4, 2, "f < K/2"), ("trimmed_mean", 5, 3, "f < K/2"), ("krum", 6, 2, r"K > 2f \+ 2"),
    ("multi_krum", 2, 0, r"K > 2f \+ 2"), ("median", 3, -1, "integer >= 0"), ("majority", 3, 0, "unknown rule")])
def test_f_too_large_or_bad_input_is_a_clear_value_error(rule, K, f, match):
    V = np.zeros((K, 3))
    with pytest.raises(ValueError, match=match):
        rl.aggregate(V, rule, f)
    with pytest.raises(cluster.RankError, match=match):  # on every rank, before a message leaves
        cluster.run(lambda c: rl.robust_aggregate(c, V[c.rank], rule, f), K, timeout=10)
    with pytest.raises(ValueError, match="1 <= m <= K"):
        rl.multi_krum(np.zeros((5, 2)), 1, 6)
    with pytest.raises(ValueError, match=r"\(K, d\)"):
        rl.coordinate_median(np.zeros(4))


def test_median_and_trimmed_mean_agree_with_torch_and_scipy():
    import torch
    from scipy.stats import trim_mean

    rng = np.random.default_rng(12)
    for K in (1, 3, 5, 7, 9):  # odd K: torch.median's lower middle is the median
        V = rng.standard_normal((K, 11))
        np.testing.assert_allclose(rl.coordinate_median(V), torch.median(torch.tensor(V), dim=0).values.numpy(),
                                   rtol=0, atol=0)
    for K in range(1, 10):
        V = rng.standard_normal((K, 11))
        for f in defined_fs("trimmed_mean", K):  # scipy cuts int(p K) from each end: p = (f + 0.5)/K cuts f
            np.testing.assert_allclose(rl.trimmed_mean(V, f), trim_mean(V, (f + 0.5) / K, axis=0), rtol=0, atol=1e-12)


def test_message_pattern_server_and_allgather():
    K, d = 6, 9
    V = np.random.default_rng(13).standard_normal((K, d))
    res = cluster.run(lambda c: rl.robust_aggregate(c, V[c.rank], "median", 2, root=2), K, timeout=10)
    assert [s.messages_sent for s in res.stats] == [1, 1, K - 1, 1, 1, 1]
    assert all(s.bytes_sent == d * 8 * (K - 1 if r == 2 else 1) for r, s in enumerate(res.stats))
    res = cluster.run(lambda c: rl.robust_aggregate(c, V[c.rank], "krum", 1, root=None), K, timeout=10)
    assert all(s.messages_sent == K - 1 and s.bytes_sent == (K - 1) * d * 8 for s in res.stats)


def test_an_equivocating_attacker_splits_the_serverless_ranks_but_each_stays_in_the_honest_range():
    K, d, byz = 5, 4, 4
    honest = np.random.default_rng(14).standard_normal((K, d))

    def worker(comm):
        r = comm.rank
        got = [None] * K
        got[r] = honest[r]
        for s in range(1, K):
            dst, src = (r + s) % K, (r - s) % K
            mine = np.full(d, 50.0 if dst % 2 else -50.0) if r == byz else honest[r]  # a different lie per peer
            got[src] = comm.sendrecv(mine, dst, src)
        return rl.coordinate_median(np.stack(got))

    res = cluster.run(worker, K, timeout=10)
    outs = res.values[:byz]
    assert not all(np.array_equal(outs[0], o) for o in outs[1:])  # the honest ranks disagree
    lo, hi = honest[:byz].min(axis=0), honest[:byz].max(axis=0)
    assert all(np.all((lo <= o) & (o <= hi)) for o in outs)


# --- training under attack --------------------------------------------------------------------------------

def _problem(K, n=600, dtype=np.float64):
    X, y = datasets.classification(n + 600, 8, classes=4, separation=3.0, seed=0, dtype=dtype)
    shards = [(X[lo:hi], y[lo:hi]) for lo, hi in block_bounds(n, K)]
    like = nn.mlp_init([8, 16, 4], seed=0, dtype=dtype)
    return shards, like, nn.flatten(like), X[n:], y[n:]


@pytest.mark.parametrize("K,rule,f,attack,root", [
    (1, "median", 0, "none", 0), (2, "trimmed_mean", 0, "none", 0), (3, "median", 1, "sign_flip", 0),
    (5, "krum", 1, "alie", 0), (7, "multi_krum", 2, "gaussian", 3), (6, "trimmed_mean", 2, "ipm", None),
    (9, "mean", 3, "sign_flip", 0)])
def test_training_over_the_communicator_equals_the_reference_bit_for_bit(K, rule, f, attack, root):
    shards, like, w0, _, _ = _problem(K, n=301)  # uneven shards
    attackers = tuple(range(K - f, K)) if root != K - 1 else tuple(range(1, f + 1))
    opts = dict(steps=4, lr=0.1, rule=rule, f=f, attack=attack, attackers=attackers, batch_size=16, seed=5, root=root)
    want = rl.reference_byzantine_training(w0, like, shards, **opts)
    got, res = rl.run_byzantine(w0, like, shards, **opts)
    np.testing.assert_array_equal(got, want)
    assert all(np.array_equal(v, want) for v in res.values)
    assert not np.array_equal(want[-1], w0)


def test_more_ranks_than_examples_leaves_empty_shards_with_zero_gradients():
    shards, like, w0, _, _ = _problem(5, n=3)
    assert sum(len(s[0]) == 0 for s in shards) == 2
    opts = dict(steps=2, lr=0.1, rule="median", f=1, attack="sign_flip", attackers=(4,), batch_size=4, seed=1)
    np.testing.assert_array_equal(rl.run_byzantine(w0, like, shards, **opts)[0],
                                  rl.reference_byzantine_training(w0, like, shards, **opts))


@pytest.mark.parametrize("seed", [0, 1])
def test_sign_flip_attackers_break_the_mean_and_krum_survives(seed):
    K, f = 10, 3
    shards, like, w0, Xt, yt = _problem(K, n=1000)
    acc = {}
    for rule in ("mean", "krum", "median"):
        h = rl.reference_byzantine_training(w0, like, shards, 60, 0.2, rule, f, "sign_flip",
                                            tuple(range(K - f, K)), 32, seed)
        acc[rule] = rl.accuracy(h[-1], like, Xt, yt)
    clean = rl.reference_byzantine_training(w0, like, shards, 60, 0.2, "mean", f, "none", (), 32, seed)
    assert acc["mean"] < 0.4 < 0.7 < acc["krum"], acc
    assert rl.accuracy(clean[-1], like, Xt, yt) > 0.7


def test_training_refuses_an_attacker_on_the_server_and_wrong_shard_counts():
    shards, like, w0, _, _ = _problem(4)
    with pytest.raises(ValueError, match="trusted"):
        rl.reference_byzantine_training(w0, like, shards, 1, 0.1, "median", 1, "sign_flip", (0,))
    with pytest.raises(cluster.RankError, match="one \\(X, y\\) shard per rank"):
        cluster.run(rl.train_byzantine, 3, args=(w0, like, shards, 1, 0.1, "median", 1), timeout=10)
    with pytest.raises(ValueError, match="unknown attack"):
        rl.reference_byzantine_training(w0, like, shards, 1, 0.1, "median", 1, "loud", (3,))
