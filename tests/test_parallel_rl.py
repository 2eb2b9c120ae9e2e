"""Chapter 20 actor-learner RL: V-trace equals its explicit sum, the distributed run equals its single-process twin."""
import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai import nn
from scaleoutai.parallel import rl

CFG = rl.RLConfig()


def _offpolicy(T, seed, batch=()):
    rng = np.random.default_rng(seed)
    shape = (T,) + batch
    blogp = np.log(rng.uniform(0.05, 1.0, shape))
    tlogp = np.log(rng.uniform(0.05, 1.0, shape))
    disc = np.where(rng.random(shape) < 0.2, 0.0, 0.9)  # some episode ends inside the trajectory
    return blogp, tlogp, rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(batch), disc


@pytest.mark.parametrize("T", [1, 2, 7, 20])
@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5), (0.7, 0.7), (np.inf, np.inf)])
def test_vtrace_recursion_equals_explicit_sum_and_advantage_formula(T, rho_bar, c_bar):
    blogp, tlogp, r, v, boot, disc = _offpolicy(T, seed=T)
    vs, adv = rl.vtrace(blogp, tlogp, r, v, boot, disc, rho_bar, c_bar)
    np.testing.assert_allclose(vs, rl.vtrace_sum(blogp, tlogp, r, v, float(boot), disc, rho_bar, c_bar),
                               rtol=1e-12, atol=1e-12)
    rho = np.minimum(rho_bar, np.exp(tlogp - blogp))
    np.testing.assert_allclose(adv, rho * (r + disc * np.append(vs[1:], boot) - v), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.99])
def test_on_policy_vtrace_reduces_to_n_step_returns(gamma):
    T = 9
    _, logp, r, v, boot, _ = _offpolicy(T, seed=1)
    vs, adv = rl.vtrace(logp, logp, r, v, boot, gamma)  # rho_bar = c_bar = 1, pi = mu
    nstep = [sum(gamma ** (t - s) * r[t] for t in range(s, T)) + gamma ** (T - s) * float(boot) for s in range(T)]
    np.testing.assert_allclose(vs, nstep, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(adv, r + gamma * np.append(vs[1:], boot) - v, rtol=1e-12, atol=1e-12)


def test_vtrace_with_c_bar_zero_is_the_one_step_importance_weighted_td_target():
    blogp, tlogp, r, v, boot, disc = _offpolicy(6, seed=2)
    vs, _ = rl.vtrace(blogp, tlogp, r, v, boot, disc, rho_bar=1.5, c_bar=0.0)
    rho = np.minimum(1.5, np.exp(tlogp - blogp))
    np.testing.assert_allclose(vs, v + rho * (r + disc * np.append(v[1:], boot) - v), rtol=1e-12, atol=1e-12)


def test_vtrace_on_a_batch_equals_each_column_alone():
    blogp, tlogp, r, v, boot, disc = _offpolicy(8, seed=3, batch=(4,))
    vs, adv = rl.vtrace(blogp, tlogp, r, v, boot, disc, 1.2, 0.9)
    for j in range(4):
        vs_j, adv_j = rl.vtrace(blogp[:, j], tlogp[:, j], r[:, j], v[:, j], boot[j], disc[:, j], 1.2, 0.9)
        np.testing.assert_allclose(vs[:, j], vs_j, rtol=1e-13)
        np.testing.assert_allclose(adv[:, j], adv_j, rtol=1e-13)
    with pytest.raises(ValueError, match="one shape"):
        rl.vtrace(blogp[:-1], tlogp, r, v, boot, disc)


@pytest.mark.parametrize("hidden", [0, 5])
def test_vtrace_loss_gradient_matches_finite_differences(hidden):
    cfg = rl.RLConfig(hidden=hidden, unroll=6, entropy_coef=0.1, seed=4)
    params = rl.init_params(cfg)
    env, rng = rl.ChainEnv(cfg, 0), np.random.default_rng(1)
    behaviour = nn.mlp_init([cfg.n_states] + ([hidden] if hidden else []) + [3], seed=9)  # off-policy data
    traj = rl.rollout(behaviour, env, rng, cfg)
    _, grads, stats = rl.vtrace_loss(params, traj, cfg)
    targets = (stats["vs"], stats["adv"])
    num = nn.numerical_gradient(lambda p: rl.vtrace_loss(p, traj, cfg, targets)[0], params)
    for k in params:
        np.testing.assert_allclose(grads[k], num[k], rtol=1e-5, atol=1e-8, err_msg=k)


def test_actor_learner_k2_without_lag_equals_single_process_on_policy_training_exactly():
    res = cluster.run(rl.actor_learner_run, 2, kwargs=dict(n_updates=60, cfg=CFG), timeout=60)
    ref = rl.reference_run(60, cfg=CFG)
    assert np.array_equal(res.values[0]["params"], ref["params"])
    assert res.values[0]["curves"] == ref["curves"]
    assert res.values[1]["versions"] == list(range(60)) and set(ref["curves"]["lag"]) == {0}


@pytest.mark.parametrize("K,lag,every", [(3, 0, 1), (3, 2, 3), (5, 1, 4), (8, 5, 2), (8, 0, 7)])
def test_actor_learner_equals_reference_with_the_same_actors_and_policy_lag(K, lag, every):
    cfg = rl.RLConfig(hidden=4, unroll=8, seed=K)
    res = cluster.run(rl.actor_learner_run, K, kwargs=dict(n_updates=40, lag=lag, every=every, cfg=cfg), timeout=60)
    ref = rl.reference_run(40, K - 1, lag, every, cfg)
    assert np.array_equal(res.values[0]["params"], ref["params"])
    assert res.values[0]["curves"] == ref["curves"]
    lags = np.array(ref["curves"]["lag"])
    assert lags[lag:].min() >= lag and lags.max() <= lag + every - 1
    for a in range(1, K):  # actor a acted at updates a-1, a-1+(K-1), ... with version V(u)
        us = range(a - 1, 40, K - 1)
        assert res.values[a]["versions"] == [rl.behaviour_version(u, lag, every) for u in us]


def _optimal_value(cfg):
    V = np.zeros(cfg.n_states)  # value iteration; terminals keep 0
    rew = np.zeros(cfg.n_states)
    rew[0], rew[-1] = cfg.left_reward, cfg.right_reward
    for _ in range(500):
        new = V.copy()
        for s in range(1, cfg.n_states - 1):
            q = [(1 - cfg.slip) * (rew[s + d] + cfg.gamma * V[s + d]) + cfg.slip * (rew[s - d] + cfg.gamma * V[s - d])
                 for d in (-1, 1)]
            new[s] = max(q)
        V = new
    return V[cfg.start]


@pytest.mark.parametrize("K,lag,every", [(2, 0, 1), (5, 3, 4)])
def test_learning_raises_the_return_to_near_optimal_on_the_chain(K, lag, every):
    res = cluster.run(rl.actor_learner_run, K, kwargs=dict(n_updates=150, lag=lag, every=every, cfg=CFG), timeout=60)
    value = res.values[0]["curves"]["value"]
    start, best = rl.policy_value(rl.init_params(CFG), CFG), _optimal_value(CFG)
    assert start < 0.5 * best  # the random initial policy often walks into the small left reward
    assert np.mean(value[-20:]) > 0.95 * best


def test_actor_learner_rejects_a_world_without_actors():
    with pytest.raises(cluster.RankError, match="K >= 2"):
        cluster.run(rl.actor_learner_run, 1, kwargs=dict(n_updates=3), timeout=30)
    with pytest.raises(ValueError, match="every >= 1"):
        rl.reference_run(3, every=0)


@pytest.mark.timeout(120)
def test_actor_learner_on_real_processes_equals_reference():
    cfg = rl.RLConfig(unroll=8, seed=1)
    res = cluster.run(rl.actor_learner_run, 2, backend="process", kwargs=dict(n_updates=20, lag=1, every=2, cfg=cfg),
                      timeout=100, quiet=True)
    ref = rl.reference_run(20, 1, 1, 2, cfg)
    assert np.array_equal(res.values[0]["params"], ref["params"])
