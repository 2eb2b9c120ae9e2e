"""Chapter 31: boids split by space, particle swarms as islands on ranks, Laplacian consensus on graphs.

Every protocol on the communicator equals its one-machine reference bit for bit for several world sizes
(uneven shards, more ranks than boids or particles); measured consensus rates match 1 - gamma l_2; pyswarms
runs for real and its GlobalBestPSO is retraced bit for bit by our reference.
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import swarm as sw
from scaleoutai.agents import swarm_consensus as sc
from scaleoutai.agents import swarm_pso as ps

KS = [1, 2, 3, 5, 8]


# ----------------------------------------------------------------------------------------------------- boids
BOIDS = sw.BoidsParams(box=10.0, radius=1.2)


@pytest.mark.parametrize("K", KS)
def test_boids_split_into_strips_equals_the_single_machine_flock_bit_for_bit(K):
    X, V = sw.random_flock(70, BOIDS, seed=K)
    want = sw.reference_boids(X, V, 40, BOIDS)
    got, res = sw.run_boids(X, V, 40, K, BOIDS)
    assert np.array_equal(got["X"], want["X"]) and np.array_equal(got["V"], want["V"])
    assert np.array_equal(got["owner"], sw.strip_of(want["X"][:, 0], K, BOIDS.box))  # every boid in its strip
    assert [s.messages_sent for s in res.stats] == [0 if K == 1 else 4 * 40] * K  # 2 halo + 2 migration swaps


def test_boids_with_more_strips_than_boids_still_equal_the_reference():
    X, V = sw.random_flock(5, BOIDS, seed=3)
    got, _ = sw.run_boids(X, V, 30, 8, BOIDS)
    want = sw.reference_boids(X, V, 30, BOIDS)
    assert np.array_equal(got["X"], want["X"]) and np.array_equal(got["V"], want["V"])


def test_a_flock_aligns_from_random_headings_and_speeds_stay_within_the_limits():
    p = sw.BoidsParams(box=8.0, radius=1.5)
    X, V = sw.random_flock(80, p, seed=0)
    out = sw.reference_boids(X, V, 300, p)
    assert out["polarisation"][0] < 0.3 and out["polarisation"][-1] > 0.9
    speed = np.linalg.norm(out["V"], axis=1)
    assert np.all(speed >= p.v_min - 1e-12) and np.all(speed <= p.v_max + 1e-12)
    assert np.all((out["X"] >= 0) & (out["X"] < p.box))


def test_strips_narrower_than_the_neighbour_radius_are_refused():
    X, V = sw.random_flock(10, BOIDS)
    with pytest.raises(cluster.RankError, match="strips of width"):
        sw.run_boids(X, V, 2, 9, BOIDS)
    with pytest.raises(ValueError, match="r_sep <= radius"):
        sw.reference_boids(X, V, 1, sw.BoidsParams(radius=0.1, r_sep=0.3))


# ----------------------------------------------------------------------------------------------------- PSO
@pytest.mark.parametrize("name", sorted(ps.FUNCTIONS))
def test_one_island_on_one_rank_equals_the_reference_swarm_bit_for_bit(name):
    f, b = ps.FUNCTIONS[name], ps.BOUNDS[name]
    want = ps.reference_pso(f, 17, 4, b, 40, seed=2)
    got, res = ps.run_pso(f, 17, 4, b, 40, 1, seed=2)
    assert got["cost"] == want["cost"] and np.array_equal(got["position"], want["position"])
    assert np.array_equal(got["history"], want["history"]) and res.stats[0].messages_sent == 0


@pytest.mark.parametrize("topology", ["ring", "all"])
@pytest.mark.parametrize("K", [2, 3, 5, 30])
def test_islands_on_ranks_equal_the_island_model_reference_bit_for_bit_and_count_their_messages(K, topology):
    f = ps.rastrigin
    want = ps.reference_pso_islands(f, 23, 5, 5.12, 45, K, every=7, topology=topology, seed=4)
    got, res = ps.run_pso(f, 23, 5, 5.12, 45, K, every=7, topology=topology, seed=4)  # 23 particles: uneven
    assert got["cost"] == want["cost"] and got["island"] == want["island"]
    assert np.array_equal(got["position"], want["position"]) and np.array_equal(got["history"], want["history"])
    assert sum(s.messages_sent for s in res.stats) == ps.migration_messages(K, 45, 7, topology)
    assert sum(s.bytes_sent for s in res.stats) == ps.migration_messages(K, 45, 7, topology) * 6 * 8


def test_migration_spreads_the_best_so_islands_beat_isolated_sub_swarms():
    f, runs = ps.rastrigin, range(6)
    mixed = [ps.reference_pso_islands(f, 40, 6, 5.12, 150, 4, every=5, seed=s)["cost"] for s in runs]
    alone = [ps.reference_pso_islands(f, 40, 6, 5.12, 150, 4, every=10 ** 6, seed=s)["cost"] for s in runs]
    assert np.median(mixed) < np.median(alone)


@pytest.mark.parametrize("name", sorted(ps.FUNCTIONS))
@pytest.mark.parametrize("vmax", [None, 1.0])
def test_our_reference_retraces_pyswarms_global_best_pso_bit_for_bit(name, vmax):
    from pyswarms.single import GlobalBestPSO

    f, b, d, n = ps.FUNCTIONS[name], ps.BOUNDS[name], 5, 20
    params = ps.PSOParams(vmax=vmax)
    np.random.seed(11)
    opt = GlobalBestPSO(n, d, params.options(), bounds=(-b * np.ones(d), b * np.ones(d)), bh_strategy="nearest",
                        velocity_clamp=None if vmax is None else (-vmax, vmax))
    cost, pos = opt.optimize(f, 60, verbose=False)
    ours = ps.reference_pso(f, n, d, b, 60, params, rng=ps.pyswarms_stream(11, n, d, b, params))
    assert cost == ours["cost"] and np.array_equal(pos, ours["position"])
    assert np.array_equal(np.array(opt.cost_history), ours["history"])


def test_pyswarms_local_best_and_our_islands_reach_the_same_quality_on_the_sphere():
    from pyswarms.single import LocalBestPSO

    d, n = 6, 30
    ours = [ps.reference_pso_islands(ps.sphere, n, d, 5.12, 150, 3, every=5, seed=s)["cost"] for s in range(4)]
    theirs = []
    for s in range(4):
        np.random.seed(s)
        opt = LocalBestPSO(n, d, {**ps.PSOParams().options(), "k": 4, "p": 2},
                           bounds=(-5.12 * np.ones(d), 5.12 * np.ones(d)), bh_strategy="nearest")
        theirs.append(opt.optimize(ps.sphere, 150, verbose=False)[0])
    assert max(ours) < 1e-4 and max(theirs) < 1e-4  # both solve it; the factor between them is reported in Ch31


def test_constriction_gives_clerc_and_kennedys_coefficients():
    p = ps.constriction()
    assert p.w == pytest.approx(0.729843788, abs=1e-9) and p.c1 == pytest.approx(1.496179765, abs=1e-9)
    with pytest.raises(ValueError, match="phi1 \\+ phi2 > 4"):
        ps.constriction(2.0, 2.0)


def test_a_crashed_island_is_skipped_and_lost_migrations_do_not_stop_the_others():
    f = ps.sphere
    got, res = ps.run_pso(f, 40, 4, 5.12, 60, 4, every=5, faults=cluster.Faults(crash={2: 3}), timeout=30)
    assert isinstance(res.values[2], BaseException) and got["island"] != 2 and got["cost"] < 1e-2
    lossy, res = ps.run_pso(f, 40, 4, 5.12, 60, 4, every=5, topology="all", faults=cluster.Faults(loss=0.3, seed=1))
    assert all(isinstance(v, dict) for v in res.values) and lossy["cost"] < 1e-2


@pytest.mark.parametrize("kwargs, match", [(dict(n=0), "n >= 1"), (dict(every=0), "M must be"),
                                           (dict(topology="star"), "'ring' or 'all'")])
def test_bad_pso_arguments_are_refused_with_a_clear_error(kwargs, match):
    args = dict(n=10, every=5, topology="ring") | kwargs
    with pytest.raises(ValueError, match=match):
        ps.reference_pso_islands(ps.sphere, args["n"], 3, 5.0, 10, 2, every=args["every"], topology=args["topology"])


# ----------------------------------------------------------------------------------------------- consensus
FAMILIES = ["ring", "torus", "geometric", "erdos_renyi", "complete"]


@pytest.mark.parametrize("name", FAMILIES)
def test_consensus_on_ranks_equals_the_laplacian_iteration_and_keeps_the_mean(name):
    for n in (1, 2, 3, 5, 8):
        nb = sc.graph(name, n, seed=n)
        X0 = np.random.default_rng(n).standard_normal((n, 3))
        gamma = 1.0 / (1 + max(map(len, nb)))
        path, res = sc.run_consensus(X0, nb, gamma, 25)
        assert np.array_equal(path, sc.reference_consensus(X0, nb, gamma, 25)), n
        assert np.allclose(path[-1].mean(0), X0.mean(0), rtol=0, atol=1e-12)
        assert sum(s.messages_sent for s in res.stats) == 25 * sum(map(len, nb))  # 2 |E| per step


@pytest.mark.parametrize("name", FAMILIES[:4])
def test_measured_consensus_rate_is_the_one_predicted_by_the_algebraic_connectivity(name):
    nb = sc.graph(name, 36, seed=1)
    lam2 = sc.algebraic_connectivity(nb)
    X0 = np.random.default_rng(0).standard_normal((36, 2))
    for gamma in (1.0 / (1 + max(map(len, nb))), sc.optimal_step(nb)):
        rho = sc.predicted_rate(nb, gamma)
        assert rho == pytest.approx(1 - gamma * lam2, abs=1e-12)  # gamma <= gamma*: the slow end binds
        steps = int(min(4000, sc.predicted_iterations(nb, gamma, 1e-12)))
        err = sc.disagreement(sc.reference_consensus(X0, nb, gamma, steps))
        assert np.all(err <= rho ** np.arange(steps + 1) * (1 + 1e-9) + 1e-14)
        measured = sc.measured_rate(err)
        assert abs(measured - rho) < 0.02 * rho, (gamma, measured, rho)


def test_the_complete_graph_reaches_the_mean_in_one_step_and_an_even_ring_at_one_over_d_max_never_does():
    X0 = np.random.default_rng(0).standard_normal((7, 2))
    one = sc.reference_consensus(X0, sc.complete(7), 1 / 7, 1)[-1]
    assert np.allclose(one, X0.mean(0), rtol=0, atol=1e-14) and sc.optimal_step(sc.complete(7)) == pytest.approx(1 / 7)
    ring = sc.ring(8)
    assert sc.predicted_rate(ring, 0.5) == pytest.approx(1.0) and sc.predicted_iterations(ring, 0.5) == np.inf
    err = sc.disagreement(sc.reference_consensus(np.arange(8.0)[:, None] % 2, ring, 0.5, 50))
    assert err[-1] == pytest.approx(1.0)  # the alternating mode flips sign for ever


def test_lost_messages_move_the_mean_and_the_seed_makes_the_run_reproducible():
    nb = sc.graph("torus", 16)
    X0 = np.random.default_rng(2).standard_normal((16, 1))
    gamma = 1 / 5
    clean, _ = sc.run_consensus(X0, nb, gamma, 200)
    for on_loss in ("skip", "stale"):
        runs = [sc.run_consensus(X0, nb, gamma, 200, on_loss, faults=cluster.Faults(loss=0.1, seed=s))[0]
                for s in (3, 3, 4)]
        assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
        final = runs[0][-1]
        assert np.ptp(final) < 1e-6  # the nodes still agree ...
        assert abs(final.mean() - X0.mean()) > 1e-6  # ... on a value that is not the mean any more
    assert abs(clean[-1].mean() - X0.mean()) < 1e-12


def test_bad_consensus_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="undirected"):
        sc.laplacian([[1], []])
    with pytest.raises(ValueError, match="step gamma"):
        sc.reference_consensus(np.zeros((4, 1)), sc.ring(4), 1.5, 1)
    with pytest.raises(ValueError, match="unknown graph"):
        sc.graph("star", 5)
