"""Chapter 20: distributed reinforcement learning, an IMPALA-style actor-learner with V-trace, from scratch.

Rank 0 is the learner, ranks 1..K-1 are actors. An actor acts with a possibly stale copy of the policy
(the behaviour policy mu) and sends trajectories (states, actions, rewards, discounts, log mu(a|x)) to the
learner, which corrects for the lag with V-trace (Espeholt et al., 2018) before each Adam step.

V-trace for a trajectory x_s, a_s, r_s (s < T) with per-step discounts gamma_s (0 where an episode ends):
    ratio_t = pi(a_t|x_t) / mu(a_t|x_t),  rho_t = min(rho_bar, ratio_t),  c_t = min(c_bar, ratio_t)
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)),                 V(x_T) = bootstrap
    v_s = V(x_s) + sum_{t=s}^{T-1} gamma^(t-s) (prod_{i=s}^{t-1} c_i) delta_t V  (explicit sum, vtrace_sum)
        = V(x_s) + delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1})),  v_T = V(x_T)   (recursion, vtrace)
    policy-gradient advantage A_s = rho_s (r_s + gamma_s v_{s+1} - V(x_s))
(gamma^(t-s) means prod_{i=s}^{t-1} gamma_i when discounts vary.) On-policy with rho_bar = c_bar = 1 the
sum telescopes to the n-step return v_s = sum_{t=s}^{T-1} gamma^(t-s) r_t + gamma^(T-s) V(x_T).
Loss per step: -A_s log pi(a_s|x_s) + value_coef/2 (v_s - V(x_s))^2 - entropy_coef H(pi(.|x_s)).

Schedule (deterministic, so that every K has a single-process twin, ``reference_run``): update u consumes
the next trajectory of actor 1 + u mod (K-1); the learner sends its parameters after every n-th update
(n = ``every``), and that trajectory was generated with parameter version
    V(u) = n floor(max(u - lag, 0) / n)     (the number of updates behind those parameters),
so the policy lag u - V(u) lies in [lag, lag + n - 1] once u >= lag. lag = 0, n = 1 is on-policy and
synchronous; a larger lag lets actors run ahead of the learner, which is where the throughput comes from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import nn
from ..cluster import Comm

__all__ = ["RLConfig", "ChainEnv", "vtrace", "vtrace_sum", "init_params", "policy_forward", "rollout", "unpack",
           "vtrace_loss", "learner_update", "policy_value", "behaviour_version", "actor_learner_run",
           "reference_run"]

N_ACTIONS = 2  # 0 = left, 1 = right


@dataclass(frozen=True)
class RLConfig:
    """Environment, network and learner settings shared by every rank (seeded, so runs repeat exactly)."""

    n_states: int = 8          # chain 0..n-1; 0 and n-1 are terminal
    start: int = 2
    slip: float = 0.1          # probability that the environment flips the chosen action
    left_reward: float = 0.2   # a nearby, small reward: the trap a random policy falls into
    right_reward: float = 1.0
    gamma: float = 0.9
    unroll: int = 16           # T, steps per trajectory
    hidden: int = 0            # 0: a linear softmax policy; > 0: one ReLU hidden layer (model.mlp_*)
    lr: float = 0.05
    rho_bar: float = 1.0
    c_bar: float = 1.0
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_states < 3 or not 0 < self.start < self.n_states - 1:
            raise ValueError(f"need n_states >= 3 and 0 < start < n_states - 1, got {self.n_states}, {self.start}")
        if not (0 <= self.slip <= 1 and 0 <= self.gamma <= 1 and self.unroll >= 1):
            raise ValueError("need 0 <= slip <= 1, 0 <= gamma <= 1 and unroll >= 1")
        if not (self.rho_bar > 0 and self.c_bar > 0):
            raise ValueError(f"truncation levels must be > 0, got rho_bar={self.rho_bar}, c_bar={self.c_bar}")


class ChainEnv:
    """Slippery chain: action 0 moves left, 1 right, flipped with probability ``slip``. Entering state 0
    pays ``left_reward``, entering n-1 pays ``right_reward``; both end the episode (back to ``start``)."""

    def __init__(self, cfg: RLConfig, seed: int):
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.state = cfg.start

    def step(self, action: int) -> tuple[float, bool]:
        c = self.cfg
        if self.rng.random() < c.slip:
            action = 1 - action
        s = self.state + (1 if action == 1 else -1)
        reward = c.left_reward if s == 0 else c.right_reward if s == c.n_states - 1 else 0.0
        done = s in (0, c.n_states - 1)
        self.state = c.start if done else s
        return reward, done


def vtrace(behaviour_logp: np.ndarray, target_logp: np.ndarray, rewards: np.ndarray, values: np.ndarray,
           bootstrap: Any, gamma: Any, rho_bar: float = 1.0, c_bar: float = 1.0
           ) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets v_s and advantages A_s by the backward recursion (module docstring). Arrays have
    time as axis 0 (shape (T, ...)); ``gamma`` is a scalar or per-step discounts; ``bootstrap`` = V(x_T)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != rewards.shape or np.shape(behaviour_logp) != rewards.shape \
            or np.shape(target_logp) != rewards.shape or rewards.ndim < 1:
        raise ValueError("behaviour_logp, target_logp, rewards and values need one shape (T, ...), got "
                         f"{np.shape(behaviour_logp)}, {np.shape(target_logp)}, {rewards.shape}, {values.shape}")
    ratio = np.exp(np.asarray(target_logp, dtype=np.float64) - behaviour_logp)
    rho, c = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio)
    disc = np.broadcast_to(np.asarray(gamma, dtype=np.float64), rewards.shape)
    boot = np.broadcast_to(np.asarray(bootstrap, dtype=np.float64), rewards.shape[1:])
    v_next = np.concatenate([values[1:], boot[None]])
    delta = rho * (rewards + disc * v_next - values)
    corr = np.empty_like(values)
    acc = np.zeros_like(boot)
    for s in reversed(range(len(rewards))):
        acc = delta[s] + disc[s] * c[s] * acc
        corr[s] = acc
    vs = values + corr
    adv = rho * (rewards + disc * np.concatenate([vs[1:], boot[None]]) - values)
    return vs, adv


def vtrace_sum(behaviour_logp: np.ndarray, target_logp: np.ndarray, rewards: np.ndarray, values: np.ndarray,
               bootstrap: float, gamma: Any, rho_bar: float = 1.0, c_bar: float = 1.0) -> np.ndarray:
    """The naive O(T^2) twin of ``vtrace`` for one trajectory: v_s by the explicit sum over t >= s."""
    T = len(rewards)
    ratio = [float(np.exp(target_logp[t] - behaviour_logp[t])) for t in range(T)]
    disc = [float(g) for g in np.broadcast_to(gamma, (T,))]
    V = [float(v) for v in values] + [float(bootstrap)]
    out = np.empty(T)
    for s in range(T):
        total, weight = V[s], 1.0  # weight = prod_{i=s}^{t-1} gamma_i c_i
        for t in range(s, T):
            total += weight * min(rho_bar, ratio[t]) * (rewards[t] + disc[t] * V[t + 1] - V[t])
            weight *= disc[t] * min(c_bar, ratio[t])
        out[s] = total
    return out


# --- policy, actor, learner ----------------------------------------------------------------------

def init_params(cfg: RLConfig) -> nn.Params:
    """One network, two heads: outputs [logit_left, logit_right, V(x)] from a one-hot state."""
    sizes = [cfg.n_states] + ([cfg.hidden] if cfg.hidden else []) + [N_ACTIONS + 1]
    return nn.mlp_init(sizes, seed=cfg.seed)


def policy_forward(params: nn.Params, states: np.ndarray, cfg: RLConfig) -> tuple[np.ndarray, np.ndarray, Any]:
    """(log pi(.|x) of shape (n, A), V(x) of shape (n,), cache for ``model.mlp_backward``)."""
    out, cache = nn.mlp_forward(params, np.eye(cfg.n_states)[np.asarray(states, dtype=np.int64)])
    z = out[:, :N_ACTIONS] - out[:, :N_ACTIONS].max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True)), out[:, N_ACTIONS], cache


def rollout(params: nn.Params, env: ChainEnv, rng: np.random.Generator, cfg: RLConfig) -> np.ndarray:
    """T steps of the behaviour policy, packed as [states (T+1), actions, rewards, discounts, log mu]."""
    T = cfg.unroll
    logp_all, _, _ = policy_forward(params, np.arange(cfg.n_states), cfg)
    states, actions, rewards, disc, blogp = (np.zeros(T + 1), np.zeros(T), np.zeros(T), np.zeros(T), np.zeros(T))
    for t in range(T):
        s = env.state
        p = np.exp(logp_all[s])
        a = min(int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right")), N_ACTIONS - 1)
        r, done = env.step(a)
        states[t], actions[t], rewards[t], blogp[t] = s, a, r, logp_all[s, a]
        disc[t] = 0.0 if done else cfg.gamma
    states[T] = env.state
    return np.concatenate([states, actions, rewards, disc, blogp])


def unpack(traj: np.ndarray, cfg: RLConfig) -> tuple[np.ndarray, ...]:
    """Inverse of ``rollout``'s packing: (states (T+1), actions, rewards, discounts, behaviour log-probs)."""
    T = cfg.unroll
    return (traj[:T + 1].astype(np.int64), traj[T + 1:2 * T + 1].astype(np.int64), traj[2 * T + 1:3 * T + 1],
            traj[3 * T + 1:4 * T + 1], traj[4 * T + 1:])


def vtrace_loss(params: nn.Params, traj: np.ndarray, cfg: RLConfig, targets: tuple | None = None
                ) -> tuple[float, nn.Params, dict[str, Any]]:
    """Mean over steps of -A_s log pi(a_s|x_s) + value_coef/2 (v_s - V(x_s))^2 - entropy_coef H_s and its
    gradient. (v_s, A_s) are constants (stop-gradient): computed here by V-trace, or given as ``targets``."""
    states, actions, rewards, disc, blogp = unpack(traj, cfg)
    T, idx = len(actions), np.arange(len(actions))
    logp, values, cache = policy_forward(params, states, cfg)
    tlogp = logp[idx, actions]
    vs, adv = targets or vtrace(blogp, tlogp, rewards, values[:T], values[T], disc, cfg.rho_bar, cfg.c_bar)
    p = np.exp(logp[:T])
    H = -(p * logp[:T]).sum(axis=1)
    loss = float(np.mean(-adv * tlogp + 0.5 * cfg.value_coef * (vs - values[:T]) ** 2 - cfg.entropy_coef * H))
    dlogits = adv[:, None] * p
    dlogits[idx, actions] -= adv                                      # d(-A log pi(a)) / dz = A (p - onehot)
    dlogits += cfg.entropy_coef * p * (logp[:T] + H[:, None])         # d(-H) / dz = p (log p + H)
    dy = np.zeros((T + 1, N_ACTIONS + 1))
    dy[:T, :N_ACTIONS] = dlogits
    dy[:T, N_ACTIONS] = cfg.value_coef * (values[:T] - vs)
    _, grads = nn.mlp_backward(params, cache, dy / T)
    stats = {"reward": float(rewards.mean()), "entropy": float(H.mean()),
             "rho": float(np.minimum(cfg.rho_bar, np.exp(tlogp - blogp)).mean()), "vs": vs, "adv": adv}
    return loss, grads, stats


def learner_update(params: nn.Params, opt: dict, traj: np.ndarray, cfg: RLConfig) -> dict[str, float]:
    """One V-trace actor-critic step (Adam, in place) on a packed trajectory; returns a few statistics."""
    loss, grads, stats = vtrace_loss(params, traj, cfg)
    nn.adam_step(params, grads, opt, lr=cfg.lr)
    return {"loss": loss, "reward": stats["reward"], "entropy": stats["entropy"], "rho": stats["rho"]}


def policy_value(params: nn.Params, cfg: RLConfig) -> float:
    """Exact expected discounted return from ``start`` under pi: solve (I - gamma P_pi) V = r_pi."""
    n = cfg.n_states
    logp, _, _ = policy_forward(params, np.arange(n), cfg)
    right = np.exp(logp[:, 1]) * (1 - cfg.slip) + np.exp(logp[:, 0]) * cfg.slip
    P, r = np.zeros((n - 2, n - 2)), np.zeros(n - 2)
    for s in range(1, n - 1):
        for s2, pm in ((s + 1, right[s]), (s - 1, 1.0 - right[s])):
            if s2 == 0:
                r[s - 1] += pm * cfg.left_reward
            elif s2 == n - 1:
                r[s - 1] += pm * cfg.right_reward
            else:
                P[s - 1, s2 - 1] += pm
    return float(np.linalg.solve(np.eye(n - 2) - cfg.gamma * P, r)[cfg.start - 1])


def behaviour_version(u: int, lag: int, every: int) -> int:
    """V(u) = every * floor(max(u - lag, 0) / every): the parameters that generated update u's data."""
    return every * (max(u - lag, 0) // every)


def _actor_streams(cfg: RLConfig, actor: int) -> tuple[ChainEnv, np.random.Generator]:
    env_seed, act_seed = np.random.SeedSequence([cfg.seed, actor]).generate_state(2)
    return ChainEnv(cfg, int(env_seed)), np.random.default_rng(int(act_seed))


def _check(n_updates: int, n_actors: int, lag: int, every: int) -> None:
    if n_actors < 1:
        raise ValueError("actor-learner needs K >= 2 ranks: rank 0 learns, ranks 1..K-1 act")
    if n_updates < 0 or lag < 0 or every < 1:
        raise ValueError(f"need n_updates >= 0, lag >= 0, every >= 1, got {n_updates}, {lag}, {every}")


def _record(curves: dict[str, list], stats: dict[str, float], params: nn.Params, cfg: RLConfig, lag: int) -> None:
    for k, v in stats.items():
        curves.setdefault(k, []).append(v)
    curves.setdefault("value", []).append(policy_value(params, cfg))
    curves.setdefault("lag", []).append(lag)


def actor_learner_run(comm: Comm, n_updates: int, lag: int = 0, every: int = 1,
                      cfg: RLConfig = RLConfig()) -> dict[str, Any]:
    """Rank 0 learns, ranks 1..K-1 act (schedule in the module docstring). Rank 0 returns learning
    curves (per update: value of pi from the start state, mean reward, lag, rho, entropy) and the final
    flat parameters; an actor returns the parameter versions it acted with."""
    n_act = comm.size - 1
    _check(n_updates, n_act, lag, every)
    params = init_params(cfg)
    if comm.rank > 0:
        env, rng = _actor_streams(cfg, comm.rank)
        version, used = 0, []
        for u in range(comm.rank - 1, n_updates, n_act):
            v = behaviour_version(u, lag, every)
            if v != version:  # the learner sends exactly the versions this actor will act with, in order
                params, version = nn.unflatten(comm.recv(0), params), v
            used.append(version)
            comm.send(rollout(params, env, rng, cfg), 0)
        return {"versions": used}
    needed = {a: {behaviour_version(u, lag, every) for u in range(a - 1, n_updates, n_act)} - {0}
              for a in range(1, comm.size)}
    opt, curves = nn.adam_init(params), {}
    for u in range(n_updates):
        stats = learner_update(params, opt, comm.recv(1 + u % n_act), cfg)
        _record(curves, stats, params, cfg, u - behaviour_version(u, lag, every))
        if (u + 1) % every == 0:
            flat = nn.flatten(params)
            for a in range(1, comm.size):
                if u + 1 in needed[a]:
                    comm.send(flat, a)
    return {"curves": curves, "params": nn.flatten(params)}


def reference_run(n_updates: int, n_actors: int = 1, lag: int = 0, every: int = 1,
                  cfg: RLConfig = RLConfig()) -> dict[str, Any]:
    """Single process: the same schedule with ``n_actors`` actor streams and a table of parameter
    versions. With n_actors = 1, lag = 0, every = 1 it is plain on-policy actor-critic."""
    _check(n_updates, n_actors, lag, every)
    params = init_params(cfg)
    opt, curves, versions = nn.adam_init(params), {}, {0: nn.flatten(params)}
    streams = {a: _actor_streams(cfg, a) for a in range(1, n_actors + 1)}
    for u in range(n_updates):
        v = behaviour_version(u, lag, every)
        env, rng = streams[1 + u % n_actors]
        traj = rollout(nn.unflatten(versions[v], params), env, rng, cfg)
        stats = learner_update(params, opt, traj, cfg)
        _record(curves, stats, params, cfg, u - v)
        if (u + 1) % every == 0:
            versions[u + 1] = nn.flatten(params)
    return {"curves": curves, "params": nn.flatten(params)}
