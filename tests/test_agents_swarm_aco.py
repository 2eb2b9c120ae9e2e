"""Chapter 31: ant colony optimisation (MAX-MIN Ant System) on one machine and as colonies on ranks.

The exact reference is Held-Karp, itself checked against enumerating every tour; the distributed colonies
equal their one-machine lock-step reference bit for bit and reach the Held-Karp optimum (the same cycle, the
same bits), the trails stay inside [tau_min, tau_max], and the messages and bytes of an exchange are the
chapter's formulas.
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.agents import swarm_aco as sa, tsp

NO_LS = sa.ACOParams(local_search=False)


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
def test_held_karp_finds_the_same_tour_as_enumerating_every_tour(n):
    for seed in range(3):
        _, D = tsp.euclidean_instance(n, seed=100 * n + seed)
        hk, brute = tsp.held_karp(D), tsp.brute_force_tsp(D)
        assert np.array_equal(hk[1], brute[1]) and hk[0] == brute[0]
        assert sorted(hk[1]) == list(range(n))


def test_held_karp_beats_or_ties_every_random_tour_and_two_opt_never_lengthens_a_tour():
    _, D = tsp.euclidean_instance(11, seed=5)
    best, _ = tsp.reference_tsp(D)
    rng = np.random.default_rng(0)
    for _ in range(200):
        t = rng.permutation(11)
        improved = tsp.two_opt(t, D)
        assert sorted(improved) == list(range(11))
        assert best <= tsp.tour_length(improved, D) + 1e-12 <= tsp.tour_length(t, D) + 2e-12


@pytest.mark.parametrize("n", [5, 8, 12])
def test_tour_construction_always_yields_a_permutation(n):
    _, D = tsp.euclidean_instance(n, seed=n)
    rng = np.random.RandomState(n)
    for tau in (np.ones((n, n)), np.exp(rng.normal(0, 30, (n, n)))):  # flat trails, and wildly uneven ones
        tours = sa.construct_tours(tau, D, 50, sa.ACOParams(mu=1.0, nu=2.0), rng)
        assert tours.shape == (50, n)
        assert np.array_equal(np.sort(tours, axis=1), np.tile(np.arange(n), (50, 1)))


@pytest.mark.parametrize("params", [NO_LS, sa.ACOParams(), sa.ACOParams(xi=0.5, p_best=0.5, local_search=False)],
                         ids=["mmas", "mmas+2opt", "fast-evaporation"])
def test_pheromone_stays_within_tau_min_and_tau_max_at_every_iteration(params):
    _, D = tsp.euclidean_instance(10, seed=2)
    b = sa.aco(D, 6, 60, params, seed=3)["bounds"]
    assert b.shape == (60, 4)
    assert np.all(b[:, 0] <= b[:, 2]) and np.all(b[:, 3] <= b[:, 1])  # tau_min <= min tau, max tau <= tau_max
    assert np.all(b[:, 0] < b[:, 1]) and np.all(np.diff(b[:, 1]) >= 0)  # tau_max = 1/(xi ell_bs) only grows


@pytest.mark.parametrize("n, seed", [(6, 0), (7, 1), (8, 2), (9, 3), (10, 4), (11, 5)])
def test_distributed_aco_with_two_opt_finds_the_held_karp_optimum(n, seed):
    _, D = tsp.euclidean_instance(n, seed=seed)
    best, tour = tsp.reference_tsp(D)
    for K, topology in ((3, "ring"), (4, "all")):
        got, _ = sa.run_aco(D, 12, 40, K, exchange_every=5, topology=topology, seed=seed)
        assert np.array_equal(got["tour"], tour) and got["length"] == best  # found, not close


@pytest.mark.parametrize("n, seed", [(8, 0), (11, 1)])
def test_max_min_ant_system_without_local_search_finds_the_optimum(n, seed):
    _, D = tsp.euclidean_instance(n, seed=seed)
    best, tour = tsp.reference_tsp(D)
    got = sa.aco(D, 10, 300, NO_LS, seed=seed)
    assert np.array_equal(got["tour"], tour) and got["length"] == best
    assert np.all(np.diff(got["history"]) <= 0) and got["history"][-1] == best


def test_one_colony_on_one_rank_is_the_single_machine_aco_exactly():
    _, D = tsp.euclidean_instance(9, seed=7)
    for params in (NO_LS, sa.ACOParams()):
        want = sa.aco(D, 7, 25, params, seed=11)
        got, res = sa.run_aco(D, 7, 25, 1, exchange_every=3, params=params, seed=11)
        assert np.array_equal(got["tour"], want["tour"]) and got["length"] == want["length"]
        assert np.array_equal(got["history"], want["history"])
        assert np.array_equal(res.values[0]["bounds"], want["bounds"]) and res.stats[0].messages_sent == 0


@pytest.mark.parametrize("K", [1, 2, 3, 5, 9])  # 9 colonies for 7 ants: two colonies have none and only relay
@pytest.mark.parametrize("topology", ["ring", "all"])
def test_colonies_on_ranks_equal_the_lock_step_reference_and_count_the_stated_bytes(K, topology):
    n, iters, every = 10, 24, 4
    _, D = tsp.euclidean_instance(n, seed=K)
    want = sa.reference_aco_colonies(D, 7, iters, K, every, topology, NO_LS, seed=K)
    got, res = sa.run_aco(D, 7, iters, K, every, topology, NO_LS, seed=K)
    assert np.array_equal(got["tour"], want["tour"]) and got["length"] == want["length"]
    assert np.array_equal(got["history"], want["history"]) and got["colony"] == want["colony"]
    exchanges = iters // every
    assert sum(s.messages_sent for s in res.stats) == exchanges * sa.exchange_messages(K, topology)
    assert sum(s.bytes_sent for s in res.stats) == exchanges * sa.exchange_bytes(n, K, topology)
    if topology == "ring" and K > 1:  # n int64 + a length: 8 (n + 1) bytes per message
        assert all(s.bytes_sent == exchanges * 8 * (n + 1) for s in res.stats)
    assert [v["ants"] for v in res.values] == [len(b) for b in np.array_split(np.arange(7), K)]


def test_the_result_is_a_function_of_the_seed_and_two_sim_runs_are_identical():
    _, D = tsp.euclidean_instance(10, seed=9)
    a, ra = sa.run_aco(D, 8, 30, 3, 5, "all", NO_LS, seed=4, backend="sim")
    b, rb = sa.run_aco(D, 8, 30, 3, 5, "all", NO_LS, seed=4, backend="sim")
    _, rc = sa.run_aco(D, 8, 30, 3, 5, "all", NO_LS, seed=5, backend="sim")
    assert np.array_equal(a["history"], b["history"]) and np.array_equal(a["tour"], b["tour"])
    assert all(np.array_equal(x["bounds"], y["bounds"]) for x, y in zip(ra.values, rb.values))
    assert [s.bytes_sent for s in ra.stats] == [s.bytes_sent for s in rb.stats]
    assert any(not np.array_equal(x["bounds"], y["bounds"]) for x, y in zip(ra.values, rc.values))  # another seed


def test_ant_system_every_ant_deposits_and_reaches_the_optimum_on_a_small_instance():
    _, D = tsp.euclidean_instance(8, seed=0)
    best, tour = tsp.reference_tsp(D)
    got = sa.naive_aco(D, 8, 100, NO_LS, seed=0)
    assert np.array_equal(got["tour"], tour) and got["length"] == best


def test_bad_inputs_are_readable_errors():
    _, D = tsp.euclidean_instance(6, seed=0)
    with pytest.raises(ValueError, match="symmetric"):
        sa.aco(D + np.triu(np.ones((6, 6)), 1), 4, 3)
    with pytest.raises(ValueError, match="n >= 4"):
        sa.aco(D[:3, :3], 4, 3)
    with pytest.raises(ValueError, match="topology"):
        sa.run_aco(D, 4, 3, 2, topology="star")
    with pytest.raises(ValueError, match="n <= 9"):
        tsp.brute_force_tsp(tsp.euclidean_instance(10)[1])
