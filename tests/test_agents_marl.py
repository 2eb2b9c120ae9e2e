"""Chapter 30: independent Q-learners, a COMA-style centralised critic, self-play; PettingZoo and MPE2."""
from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import marl
from scaleoutai.agents import marl_envs as me
from scaleoutai.agents import marl_selfplay as sp


def _same(got: dict, want: dict, key: str) -> None:
    np.testing.assert_array_equal(got["curve"], want["curve"])
    assert sorted(got[key]) == sorted(want[key])
    for i in want[key]:
        np.testing.assert_array_equal(got[key][i], want[key][i])


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_independent_q_learners_equal_the_reference_loop_bit_for_bit_for_every_world_size(K):
    for env, steps, E in [(me.climbing_game(), 120, 16), (me.PredatorPrey(4, 12), 150, 8)]:
        want = marl.reference_iql(env, steps, E=E, seed=3)
        got, res = marl.run_iql(env, K, steps, E=E, seed=3)
        _same(got, want, "Q")
        assert np.abs(want["Q"][0]).max() > 0  # something was learned
        if K > 1:  # the host sends every agent rank one block per step, plus the last rewards
            assert res.stats[1].messages_received == steps + 1 and res.stats[1].messages_sent == steps


@pytest.mark.parametrize("K", [1, 2, 3, 5])
@pytest.mark.parametrize("baseline", ["counterfactual", "mean"])
def test_coma_actors_and_critic_equal_the_reference_bit_for_bit_with_uneven_agent_blocks(K, baseline):
    game = me.SignalGame(3, 2, 2, bonus=1.0)  # 3 agents: blocks 2 + 1 on K = 2, idle ranks on K = 5
    want = marl.reference_coma(game, 40, E=8, baseline=baseline, seed=1)
    got, res = marl.run_coma(game, K, 40, E=8, baseline=baseline, seed=1)
    _same(got, want, "theta")
    if baseline == "counterfactual":
        np.testing.assert_array_equal(got["critic"].Q, want["critic"].Q)
    if K > 1:
        assert res.stats[1].messages_received == 2 * 40 and res.stats[1].messages_sent == 40
    assert want["curve"][-10:].mean() > want["curve"][:10].mean()


@pytest.mark.parametrize("K", [1, 2, 3, 5])
@pytest.mark.parametrize("samples", [0, 4])
def test_self_play_equals_the_reference_bit_for_bit_for_every_world_size(K, samples):
    game, start = me.rock_paper_scissors(), [[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]
    want = sp.reference_self_play(game, 60, lr=0.1, samples=samples, start=start, seed=2)
    got, res = sp.run_self_play(game, K, 60, lr=0.1, samples=samples, start=start, seed=2)
    for i in range(2):
        np.testing.assert_array_equal(got["policies"][i], want["policies"][i])
        np.testing.assert_array_equal(got["average"][i], want["average"][i])
    if K > 1:
        assert res.stats[1].messages_sent == 60 and res.stats[1].bytes_sent == 60 * 8 * (samples or 3)


def test_batched_q_update_moves_each_visited_cell_lr_of_the_way_to_its_mean_target():
    q = marl.QLearner(2, 2, lr=0.5, gamma=0.9)
    q.Q[1] = [1.0, 3.0]
    o, a = np.array([0, 0, 0, 1]), np.array([1, 1, 0, 0])
    r, o2, done = np.array([1.0, 3.0, 2.0, 0.0]), np.array([1, 1, 0, 0]), np.array([0.0, 1.0, 1.0, 0.0])
    q.learn(o, a, r, o2, done)
    targets_01 = [1 + 0.9 * 3, 3.0]
    np.testing.assert_allclose(q.Q, [[0.5 * 2.0, 0.5 * np.mean(targets_01)], [1.0 + 0.5 * (0.9 * 0 - 1.0), 3.0]],
                               rtol=0, atol=1e-12)


def test_counterfactual_advantage_with_the_exact_critic_is_the_agents_own_contribution():
    game = me.SignalGame(3, 2, 2, bonus=2.0)
    critic = marl.Critic(3, 2, 2)
    S = np.array([[(s >> i) & 1 for i in range(3)] for s in range(8)]).T          # every joint signal
    A = np.array([[(a >> i) & 1 for i in range(3)] for a in range(8)]).T          # every joint action
    for s in range(8):
        critic.Q[s] = game.team_reward(np.repeat(S[:, [s]], 8, axis=1), A)
    rng = np.random.default_rng(0)
    obs, act = rng.integers(0, 2, (3, 50)), rng.integers(0, 2, (3, 50))
    probs = rng.dirichlet([1, 1], size=(3, 50))
    adv = marl.counterfactual_advantages(critic, obs, act, probs)
    own = (act == obs).astype(float) - np.take_along_axis(probs, obs[..., None], axis=2)[..., 0]
    np.testing.assert_allclose(adv, own / 3, rtol=0, atol=1e-12)  # the windfall and the others cancel


def test_independent_q_learners_settle_on_a_shadowed_equilibrium_of_the_climbing_game():
    game = me.climbing_game()
    finals = [marl.evaluate(game, list(marl.reference_iql(game, 300, E=32, seed=s)["Q"].values()), 4)[0]
              for s in range(4)]
    assert all(f in (5.0, 6.0, 7.0) for f in finals) and 11.0 not in finals  # Claus and Boutilier 1998


def test_independent_q_learners_capture_the_prey_far_more_often_than_random_agents():
    env = me.PredatorPrey(5, 30)
    got = marl.reference_iql(env, 1500, E=32, lr=0.2, gamma=0.9, seed=0)
    learned = marl.evaluate(env, list(got["Q"].values()), 200)[0]
    rand = marl.evaluate(env, None, 200)[0]
    assert learned > 4 * rand > 0


def test_self_play_average_policy_converges_while_the_last_iterate_cycles():
    game, start = me.rock_paper_scissors(), [[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]
    out = sp.reference_self_play(game, 2000, lr=0.05, start=start)
    last = sp.exploitability(game, out["policies"][0][-1], out["policies"][1][-1])
    first = sp.exploitability(game, out["policies"][0][0], out["policies"][1][0])
    assert sp.exploitability(game, out["average"][0], out["average"][1]) < 0.05
    assert last > first > 0.3
    opt = sp.reference_self_play(game, 2000, lr=0.1, start=start, optimistic=True)
    assert sp.exploitability(game, opt["policies"][0][-1], opt["policies"][1][-1]) < 0.1 * first
    u = np.full(3, 1 / 3)
    assert sp.exploitability(game, u, u) == 0.0


def test_a_crashed_agent_rank_is_replaced_by_the_fallback_and_the_team_plays_on():
    env = me.PredatorPrey(4, 12)
    got, res = marl.run_iql(env, 2, 60, E=8, faults=cluster.Faults(crash={1: 10}), timeout=60)
    assert got["dead"] == [1] and sorted(got["Q"]) == [0]
    assert isinstance(res.values[1], cluster.RankCrashed)
    coma, _ = marl.run_coma(me.SignalGame(3), 3, 30, E=8, faults=cluster.Faults(crash={2: 5}), timeout=60)
    assert coma["dead"] == [2] and sorted(coma["theta"]) == [0, 1]


@pytest.mark.parametrize("run", [marl.run_iql, marl.run_coma])
def test_lost_messages_neither_hang_nor_crash_and_change_only_what_they_must(run):
    env = me.climbing_game() if run is marl.run_iql else me.SignalGame(3)
    clean, _ = run(env, 3, 50, E=8)
    lossy, res = run(env, 3, 50, E=8, faults=cluster.Faults(loss=0.1, seed=4), timeout=60)
    assert np.isfinite(lossy["curve"]).all() and lossy["dead"] == []
    assert not np.array_equal(lossy["curve"], clean["curve"])
    # a host message that is lost is answered with a sentinel: the run still has every step
    one, _ = run(env, 2, 20, E=8, faults=cluster.Faults(drop={0: {3}}), timeout=60)
    assert one["curve"].shape[0] == 20


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="E >= 1"):
        marl.reference_iql(me.climbing_game(), 10, E=0)
    with pytest.raises(ValueError, match="baseline"):
        marl.reference_coma(me.SignalGame(), 10, baseline="value")
    with pytest.raises(ValueError, match="5 M cells"):
        marl.Critic(12, 2, 3)
    with pytest.raises(ValueError, match="shape \\(n_agents=2, E\\)"):
        me.climbing_game().step(np.zeros(3, dtype=int), np.random.default_rng())
    with pytest.raises(ValueError, match="start"):
        sp.reference_self_play(me.matching_pennies(), 5, start=[[1.0, 0.0], [0.5, 0.5]])


ENVS = [me.climbing_game(), me.SignalGame(3, bonus=1.0), me.PredatorPrey(5, 20), me.rock_paper_scissors()]


@pytest.mark.parametrize("env", ENVS, ids=lambda e: type(e).__name__)
def test_our_environments_pass_pettingzoos_parallel_and_aec_api_tests(env):
    from pettingzoo.test import api_test, parallel_api_test
    from pettingzoo.utils import parallel_to_aec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(me.as_pettingzoo(env, 25), num_cycles=100)
        api_test(parallel_to_aec(me.as_pettingzoo(env, 25)), num_cycles=100)
    allowed = {"Observation numpy array is all zeros."}  # a stateless game's observation is constant 0
    assert {str(w.message) for w in caught} <= allowed


def test_independent_learners_beat_random_agents_on_mpe2_simple_spread():
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=2, max_cycles=25, local_ratio=0.0)
    feats = partial(me.spread_features, n_landmarks=2)
    greedy = []
    for seed in range(3):
        learners = {a: me.BinnedQLearner(feats, 9, env.action_space(a).n, lr=0.1, gamma=0.5)
                    for a in env.possible_agents}
        me.play_parallel_env(env, learners, 60, seed=seed)
        greedy.append(me.play_parallel_env(env, learners, 20, seed=100, learn=False, eps=(0.0, 0.0, 1.0)).mean())
    rand = me.play_parallel_env(env, None, 20, seed=100).mean()
    env.close()
    assert np.mean(greedy) > rand + 5  # returns are negative distances: higher is better
