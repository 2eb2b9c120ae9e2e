"""Chapter 2: fault-tolerance arithmetic, bully election and the majority-replicated log under crashes."""
from __future__ import annotations

import itertools

import pytest

from scaleoutai import cluster
from scaleoutai.foundations.consensus import bully_election, majority, max_faults, min_nodes, replicate_log

COMMANDS = [11, 22, 33, 44]


def live_values(res):
    return {r: v for r, v in enumerate(res.values) if not isinstance(v, cluster.RankCrashed)}


# ------------------------------------------------------------------ arithmetic

@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 7, 8, 10])
def test_majorities_always_overlap_and_crash_tolerance_is_the_largest_f_with_2f_plus_1_le_K(K):
    assert 2 * majority(K) > K and 2 * (majority(K) - 1) <= K
    f = max_faults(K, "crash")
    assert min_nodes(f, "crash") <= K < min_nodes(f + 1, "crash")
    b = max_faults(K, "byzantine")
    assert min_nodes(b, "byzantine") <= K < min_nodes(b + 1, "byzantine")


def test_fault_arithmetic_known_values_and_bad_model():
    assert [min_nodes(f) for f in range(4)] == [1, 3, 5, 7]
    assert [min_nodes(f, "byzantine") for f in range(4)] == [1, 4, 7, 10]
    with pytest.raises(ValueError, match="choose 'crash' or 'byzantine'"):
        min_nodes(1, "omission")


# ------------------------------------------------------------------ election

@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_without_faults_every_rank_elects_the_highest_rank(K):
    res = cluster.run(bully_election, K, timeout=30)
    assert res.values == [K - 1] * K


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_crashed_top_ranks_are_passed_over(K):
    crashed = {K - 1: 0} if K < 5 else {K - 1: 0, K - 2: 0}
    res = cluster.run(bully_election, K, faults=cluster.Faults(crash=crashed), timeout=30)
    want = K - 1 - len(crashed)
    assert set(live_values(res).values()) == {want} and len(live_values(res)) == K - len(crashed)


@pytest.mark.parametrize("K", [3, 4, 5])
def test_survivors_agree_whenever_ranks_crash_at_any_point_of_the_election(K):
    # every crash position (message count) for every set of up to two crashing ranks
    for m in (1, 2):
        for ranks in itertools.combinations(range(K), m):
            for counts in itertools.product(range(2 * K), repeat=m):
                faults = cluster.Faults(crash=dict(zip(ranks, counts)))
                live = live_values(cluster.run(bully_election, K, faults=faults, timeout=30))
                if not live:
                    continue
                leaders = set(live.values())
                assert len(leaders) == 1, (faults, live)
                assert leaders.pop() >= max(live), (faults, live)  # never a survivor below the top one


# ------------------------------------------------------------------ replicated log

@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
def test_without_crashes_every_entry_commits_on_every_rank(K):
    res = cluster.run(replicate_log, K, args=(COMMANDS,), timeout=30)
    for v in res.values:
        assert v["log"] == COMMANDS and v["commit_index"] == len(COMMANDS) - 1
    assert res.values[0]["acks"] == [K] * len(COMMANDS)


@pytest.mark.parametrize("K", [3, 5, 8])
def test_f_below_half_crashed_followers_still_commit_every_entry(K):
    f = max_faults(K)  # 1, 2, 3: the most a majority protocol survives
    for crashes in ({K - 1: 0}, {r: 0 for r in range(K - f, K)}):
        res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash=crashes), timeout=30)
        live = live_values(res)
        assert len(live) == K - len(crashes)
        for v in live.values():
            assert v["log"] == COMMANDS and v["commit_index"] == len(COMMANDS) - 1


@pytest.mark.parametrize("K", [2, 4, 5, 8])
def test_half_or_more_crashed_followers_commit_nothing(K):
    f = K - majority(K) + 1  # the smallest f with f >= K/2: one more than a majority protocol survives
    crashes = {r: 0 for r in range(K - f, K)}
    res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash=crashes), timeout=30)
    for v in live_values(res).values():
        assert v["commit_index"] == -1
    assert res.values[0]["acks"] == [K - f] * len(COMMANDS)


def test_entries_acked_before_too_many_crashes_stay_committed_and_later_ones_do_not():
    K = 3
    res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash={1: 2, 2: 2}), timeout=30)
    leader = res.values[0]
    assert leader["acks"] == [3, 3, 1, 1] and leader["commit_index"] == 1
    assert leader["log"] == COMMANDS  # stored on the leader, but never safe: no majority holds 2 or 3


def test_followers_stop_cleanly_when_the_leader_crashes():
    K = 5
    res = cluster.run(replicate_log, K, args=(COMMANDS,), faults=cluster.Faults(crash={0: 2 * (K - 1)}),
                      timeout=30)
    assert isinstance(res.values[0], cluster.RankCrashed)
    for v in res.values[1:]:
        assert v["log"] == COMMANDS[:2] and v["commit_index"] == 0  # entry 1 committed but never announced


def test_messages_per_entry_are_two_per_follower():
    for K in (3, 5):
        res = cluster.run(replicate_log, K, args=(COMMANDS,), timeout=30)
        assert res.stats[0].messages_sent == (K - 1) * (len(COMMANDS) + 1)
        assert res.stats[0].messages_received == (K - 1) * len(COMMANDS)
