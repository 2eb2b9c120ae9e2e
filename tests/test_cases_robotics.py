"""Chapter 39: a robot swarm on the communicator (Lloyd coverage, formation) against single-machine references,
with lossy radio and crashed robots; the coverage gridworld and its arenas."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cases import robotics as rb
from scaleoutai.cases import robotics_grid as rg
from scaleoutai.datasets import arenas, is_connected

N = 12
STEPS = 10


@pytest.fixture(scope="module")
def cover():
    where = arenas.arena(G=24, side=8.0, seed=3)
    X0 = arenas.start_positions(N, where, seed=4)
    return rb.Coverage(where, X0, rb.CoverageParams(radio=2.5, tether=0.8, speed=0.3), seconds=1e-3)


@pytest.fixture(scope="module")
def form():
    Z = arenas.formation_shape(N, "circle", spacing=1.0)
    nb = rb.candidates(Z, 3.1)  # three slots each side on the circle
    start = Z + np.random.default_rng(5).normal(0, 0.5, Z.shape) + [4.0, 4.0]
    goal = start[0] - Z[0]  # the leader starts in its slot and stays there
    return rb.Formation(Z, nb, goal, rb.FormationParams(gamma=0.15, speed=0.5)), start


@pytest.fixture(scope="module")
def cover_ref(cover):
    return rb.reference_swarm(cover, cover.homes, STEPS)


def test_per_robot_rules_equal_the_vectorised_centralised_lloyd(cover, cover_ref):
    np.testing.assert_allclose(cover_ref, rb.reference_coverage(cover, STEPS), rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [1, 2, 3, 5, N + 3])
def test_distributed_coverage_equals_the_centralised_planner_for_every_K(cover, cover_ref, K):
    path, res = rb.run_swarm(cover, cover.homes, STEPS, K, timeout=60)
    np.testing.assert_array_equal(path, cover_ref)  # every rank sees exact positions: the same bits
    per_step = rb.messages_per_step(cover.nb, K)
    for r in range(K):  # one message per peer rank per step, nothing else
        assert res.stats[r].messages_sent == STEPS * per_step[r]
    if K >= N:  # one robot per rank: the messages are its candidates, 16 bytes each
        assert all(res.stats[i].bytes_sent == STEPS * 16 * len(cover.nb[i]) for i in range(N))


@pytest.mark.parametrize("K", [2, 3, 5, N + 3])
def test_lossy_radio_equals_the_replayed_reference(cover, form, K):
    path, _ = rb.run_swarm(cover, cover.homes, STEPS, K, faults=cluster.Faults(loss=0.3, seed=K), timeout=60)
    np.testing.assert_array_equal(path, rb.reference_swarm(cover, cover.homes, STEPS, K=K, loss=0.3, seed=K))
    task, start = form
    path, _ = rb.run_swarm(task, start, 3 * STEPS, K, faults=cluster.Faults(loss=0.2, seed=7), timeout=60)
    lossy = rb.reference_swarm(task, start, 3 * STEPS, K=K, loss=0.2, seed=7)
    np.testing.assert_array_equal(path, lossy)
    assert not np.array_equal(lossy, rb.reference_swarm(task, start, 3 * STEPS))  # some message was lost


def test_loss_is_a_pure_function_of_the_seed(cover):
    a = rb.reference_swarm(cover, cover.homes, STEPS, K=N, loss=0.3, seed=1)
    np.testing.assert_array_equal(a, rb.reference_swarm(cover, cover.homes, STEPS, K=N, loss=0.3, seed=1))
    assert not np.array_equal(a, rb.reference_swarm(cover, cover.homes, STEPS, K=N, loss=0.3, seed=2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lloyd_coverage_cost_never_increases_and_respects_speed_and_tether(seed):
    where = arenas.arena(G=32, side=10.0, obstacles=3, seed=seed)
    p = rb.CoverageParams(radio=3.0, tether=1.0, speed=0.25, gain=0.7)
    task = rb.Coverage(where, arenas.start_positions(20, where, seed=seed), p)
    path = rb.reference_coverage(task, 25)
    H = np.array([rb.coverage_cost(X, where, p) for X in path])
    assert np.all(np.diff(H) <= 1e-15) and H[-1] < 0.9 * H[0]
    assert np.all(np.linalg.norm(np.diff(path, axis=0), axis=2) <= p.speed + 1e-12)
    assert np.all(np.linalg.norm(path - task.homes, axis=2) <= p.tether + 1e-12)


def test_candidates_hold_every_robot_in_radio_range_and_match_scipy(cover, cover_ref):
    from scipy.spatial import cKDTree

    reach = cover.params.radio + 2 * cover.params.tether
    pairs = cKDTree(cover.homes).query_pairs(reach * (1 - 1e-12))
    assert {(i, j) for i in range(N) for j in cover.nb[i] if i < j} == pairs
    for X in cover_ref:  # a robot within radio range r is always a candidate (the tether is the skin)
        near = rb.candidates(X, cover.params.radio)
        assert all(set(near[i]) <= set(cover.nb[i]) for i in range(N))


def test_formation_error_goes_to_zero_without_loss_on_a_connected_graph(form):
    task, start = form
    assert is_connected(task.nb)
    path = rb.reference_swarm(task, start, 300)
    err = [rb.formation_error(X, task.Z) for X in path]
    assert err[0] > 0.3 and err[-1] < 1e-6
    np.testing.assert_array_equal(path[-1][0], start[0])  # the leader never moved
    np.testing.assert_allclose(path[-1] - path[-1][0], task.Z - task.Z[0], atol=1e-6)


def test_a_moving_leader_pulls_the_formation_to_the_goal(form):
    task, start = form
    moving = rb.Formation(task.Z, task.nb, [9.0, 6.0], task.params)
    path, _ = rb.run_swarm(moving, start, 250, 4, timeout=60)
    assert rb.formation_error(path[-1], task.Z) < 1e-3
    np.testing.assert_allclose(path[-1].mean(axis=0), [9.0, 6.0], atol=1e-3)


def test_a_crashed_robot_is_dropped_and_its_neighbours_recover_its_area(cover):
    steps, dead = 30, 5
    path, res = rb.run_swarm(cover, cover.homes, steps, N, faults=cluster.Faults(crash={dead: 4 * len(cover.nb[dead])}),
                             timeout=60)
    assert isinstance(res.values[dead], BaseException) and np.isnan(path[:, dead]).all()
    alive = np.delete(np.arange(N), dead)
    assert not np.isnan(path[:, alive]).any()
    p = cover.params
    at_crash = rb.coverage_cost(path[5, alive], cover.where, p)
    assert rb.coverage_cost(path[-1, alive], cover.where, p) < at_crash  # the survivors re-cover
    H = [rb.coverage_cost(X[alive], cover.where, p) for X in path[6:]]
    assert np.all(np.diff(H) <= 1e-12)  # after the crash is detected, Lloyd again never loses ground


def test_the_gridworld_keeps_the_vector_contract_and_lloyd_beats_random():
    env = rg.CoverageGrid(arenas.coarsen(arenas.arena(G=48, seed=0), 6), n_agents=3, horizon=8)
    rng = np.random.default_rng(0)
    obs = env.reset(rng, 5)
    assert obs.shape == (3, 5) and obs.min() >= 0 and obs.max() < env.n_obs
    for _ in range(10):
        obs, rew, done = env.step(rng.integers(0, 5, (3, 5)), rng)
        assert obs.max() < env.n_obs and np.all((0 <= rew) & (rew <= 1 + 1e-12)) and done.shape == (5,)
    lloyd = rg.evaluate_rule(env, rg.lloyd_rule, 60, 32)
    rand = rg.evaluate_rule(env, rg.random_rule, 60, 32)
    assert lloyd > rand + 0.1
    assert rg.evaluate_rule(env, rg.lloyd_rule, 60, 32) == lloyd  # a pure function of the seed


@pytest.mark.parametrize("K", [1, 2, 4])
def test_independent_learners_on_the_gridworld_equal_their_one_machine_loop(K):
    from scaleoutai.agents import marl

    env = rg.CoverageGrid(arenas.coarsen(arenas.arena(G=24, seed=1), 4), n_agents=3, horizon=6)
    out, _ = marl.run_iql(env, K, 40, E=8, seed=2, timeout=60)
    ref = marl.reference_iql(env, 40, E=8, seed=2)
    np.testing.assert_array_equal(out["curve"], ref["curve"])
    for i in range(3):
        np.testing.assert_array_equal(out["Q"][i], ref["Q"][i])


def test_the_gridworld_passes_the_pettingzoo_parallel_api_test():
    from pettingzoo.test import parallel_api_test

    from scaleoutai.agents import marl_envs

    env = rg.CoverageGrid(arenas.coarsen(arenas.arena(G=24, seed=1), 4), n_agents=2, horizon=6)
    parallel_api_test(marl_envs.as_pettingzoo(env, max_cycles=10, name="coverage"), num_cycles=30)


def test_arenas_are_pure_functions_of_the_seed():
    a, b, c = arenas.arena(seed=2), arenas.arena(seed=2), arenas.arena(seed=3)
    np.testing.assert_array_equal(a.density, b.density)
    assert not np.array_equal(a.density, c.density)
    assert abs(a.density.sum() - 1) < 1e-12 and np.all(a.density[a.obstacle] == 0) and a.obstacle.any()
    for kind in ("drop", "dock"):
        X = arenas.start_positions(30, a, kind, seed=1)
        np.testing.assert_array_equal(X, arenas.start_positions(30, a, kind, seed=1))
        cells = np.floor(X / a.h).astype(int)
        assert not a.obstacle[cells[:, 1], cells[:, 0]].any()
    for kind in ("wedge", "grid", "circle", "line"):
        np.testing.assert_allclose(arenas.formation_shape(7, kind).mean(axis=0), 0, atol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda w, X: rb.CoverageParams(gain=0.0).check(), "gain"),
    (lambda w, X: rb.Coverage(w, X[:, :1]), r"\(n, 2\)"),
    (lambda w, X: rb.reference_swarm(rb.Coverage(w, X), X, 3, K=2, loss=1.0), "0 <= loss < 1"),
    (lambda w, X: rb.run_swarm(rb.Coverage(w, X), X, 3, 0), "K >= 1"),
    (lambda w, X: rb.run_swarm("coverage", X, 3, 2), "robotics.Coverage"),
    (lambda w, X: rb.Formation(X, [[1], []] + [[]] * (len(X) - 2), [0, 0]), "undirected"),
    (lambda w, X: rb.Formation(X, rb.candidates(X, 100.0), [0, 0], rb.FormationParams(gamma=0.5)), "gamma"),
    (lambda w, X: arenas.start_positions(3, w, "air"), "drop"),
    (lambda w, X: arenas.coarsen(w, 7), "divide"),
    (lambda w, X: rg.CoverageGrid(w, start="roof"), "start"),
])
def test_bad_input_is_refused_with_a_clear_error(call, match):
    where = arenas.arena(G=24, seed=0)
    with pytest.raises(ValueError, match=match):
        call(where, arenas.start_positions(5, where))
