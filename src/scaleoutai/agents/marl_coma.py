"""COMA-style CTDE with every agent on a rank (Chapter 30, Section 4).

Decentralised softmax actors pi_i(a_i | o_i) on the agent ranks; the centralised critic Q(s, a) on the host
(``marl_critic``) gives agent i the counterfactual advantage A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b))
(Foerster et al. 2018), or, with ``baseline="mean"``, the shared reward minus its batch mean (REINFORCE).
See ``marl`` for the protocol and ``marl_protocol`` for the shared streams and fault handling.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from .marl_critic import Critic, counterfactual_advantages
from .marl_protocol import _check, _collect, _host_recv, _owned, _streams

__all__ = ["SoftmaxActor", "train_coma", "reference_coma", "run_coma"]


class SoftmaxActor:
    """pi(a | o) = softmax(theta[o]); ``learn`` ascends mean_e A_e grad log pi(a_e | o_e) (REINFORCE form)."""

    def __init__(self, n_obs: int, n_actions: int, lr: float = 0.5) -> None:
        self.theta = np.zeros((int(n_obs), int(n_actions)))
        self.lr = float(lr)

    def probs(self, obs: np.ndarray) -> np.ndarray:
        z = self.theta[obs] - self.theta[obs].max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        p = self.probs(obs)
        u = rng.random(len(obs))[:, None]
        a = np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), p.shape[1] - 1)  # inverse-CDF sampling
        return a, p

    def learn(self, o: np.ndarray, a: np.ndarray, adv: np.ndarray) -> None:
        g = -self.probs(o)
        g[np.arange(len(a)), a] += 1.0  # grad_theta[o] log pi(a | o) = onehot(a) - pi(. | o)
        np.add.at(self.theta, o, (self.lr / len(a)) * adv[:, None] * g)


def _advantages(critic: Critic | None, obs: np.ndarray, actions: np.ndarray, probs: np.ndarray,
                r: np.ndarray, baseline: str) -> np.ndarray:
    if baseline == "counterfactual":
        critic.learn(obs, actions, r)
        return counterfactual_advantages(critic, obs, actions, probs)
    return np.broadcast_to(r - r.mean(), actions.shape).copy()  # shared reward, batch-mean baseline


def _coma_check(game: Any, steps: int, E: int, baseline: str) -> None:
    _check(steps, E)
    if baseline not in ("counterfactual", "mean"):
        raise ValueError(f"baseline={baseline!r}: choose 'counterfactual' (COMA) or 'mean' (shared REINFORCE)")


def train_coma(comm: Comm, game: Any, steps: int, E: int = 64, lr: float = 0.5, critic_lr: float = 0.5,
               baseline: str = "counterfactual", seed: int = 0) -> dict[str, Any]:
    """Per rank: decentralised actors, the centralised critic on rank 0 (CTDE). Chapter 30, Section 4.

    Per step the host sends rank r its agents' observations (n_r, E) and receives their actions and
    probabilities (n_r, E, 1 + A); it updates the critic on the joint play and sends each agent its
    advantage (n_r, E); an agent whose action the host replaced gets advantage 0 (no credit).
    """
    _coma_check(game, steps, E, baseline)
    owned = _owned(game.n_agents, comm.size)
    env_rng, rngs, fb_rng = _streams(seed, game.n_agents)
    actors = {i: SoftmaxActor(game.n_obs, game.n_actions, lr) for i in owned[comm.rank]}
    if comm.rank != 0:
        return _coma_actor(comm, actors, steps, rngs) if actors else {"theta": {}}
    game, dead, n, A = copy.deepcopy(game), set(), game.n_agents, game.n_actions
    critic = Critic(n, game.n_obs, A, critic_lr) if baseline == "counterfactual" else None
    peers = [r for r in range(1, comm.size) if len(owned[r])]
    obs, curve = game.reset(env_rng, E), np.zeros(steps)
    for t in range(steps):
        for r in peers:
            if r not in dead:
                comm.send(obs[owned[r]].astype(np.float64), r)
        actions, probs = np.empty((n, E), dtype=np.int64), np.empty((n, E, A))
        replaced = np.zeros(n, dtype=bool)
        for i in actors:
            actions[i], probs[i] = actors[i].act(obs[i], rngs[i])
        for r in peers:
            got = _host_recv(comm, r, dead)
            for j, i in enumerate(owned[r]):
                if got is not None and got[j, 0, 0] >= 0:
                    actions[i], probs[i] = got[j, :, 0].astype(np.int64), got[j, :, 1:]
                else:
                    actions[i], probs[i], replaced[i] = fb_rng.integers(0, A, E), 1.0 / A, True
        obs2, rewards, _ = game.step(actions, env_rng)
        adv = _advantages(critic, obs, actions, probs, rewards[0], baseline)
        adv[replaced] = 0.0
        for r in peers:
            if r not in dead:
                comm.send(adv[owned[r]], r)
        for i in actors:
            actors[i].learn(obs[i], actions[i], adv[i])
        obs, curve[t] = obs2, rewards[0].mean()
    return {"curve": curve, "theta": {i: a.theta for i, a in actors.items()}, "dead": sorted(dead),
            "critic": critic}


def _coma_actor(comm: Comm, actors: dict[int, SoftmaxActor], steps: int, rngs: list[np.random.Generator]
                ) -> dict[str, Any]:
    ids = sorted(actors)
    for _ in range(steps):
        try:
            o = comm.recv(0).astype(np.int64)
        except cluster.MessageLostError:
            o = None
        if o is None:  # no observation: ask for the fallback, learn nothing this step
            comm.send(np.full((len(ids), 1, 1), -1.0), 0)
        else:
            plays = [actors[i].act(o[j], rngs[i]) for j, i in enumerate(ids)]
            comm.send(np.stack([np.concatenate([a[:, None].astype(np.float64), p], axis=1) for a, p in plays]), 0)
        try:
            adv = comm.recv(0)
        except cluster.MessageLostError:
            continue
        if o is not None:
            for j, i in enumerate(ids):
                actors[i].learn(o[j], plays[j][0], adv[j])
    return {"theta": {i: a.theta for i, a in actors.items()}}


def reference_coma(game: Any, steps: int, E: int = 64, lr: float = 0.5, critic_lr: float = 0.5,
                   baseline: str = "counterfactual", seed: int = 0) -> dict[str, Any]:
    """The same actors and critic in one plain loop on one machine."""
    _coma_check(game, steps, E, baseline)
    env_rng, rngs, _ = _streams(seed, game.n_agents)
    game, n = copy.deepcopy(game), game.n_agents
    actors = [SoftmaxActor(game.n_obs, game.n_actions, lr) for _ in range(n)]
    critic = Critic(n, game.n_obs, game.n_actions, critic_lr) if baseline == "counterfactual" else None
    obs, curve = game.reset(env_rng, E), np.zeros(steps)
    for t in range(steps):
        plays = [actors[i].act(obs[i], rngs[i]) for i in range(n)]
        actions, probs = np.stack([p[0] for p in plays]), np.stack([p[1] for p in plays])
        obs2, rewards, _ = game.step(actions, env_rng)
        adv = _advantages(critic, obs, actions, probs, rewards[0], baseline)
        for i in range(n):
            actors[i].learn(obs[i], actions[i], adv[i])
        obs, curve[t] = obs2, rewards[0].mean()
    return {"curve": curve, "theta": {i: a.theta for i, a in enumerate(actors)}, "dead": [],
            "critic": critic}


def run_coma(game: Any, K: int, steps: int, timeout: float = 120.0, faults: cluster.Faults | None = None,
             network: cluster.Network | None = None, **kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: K ranks, critic and game on rank 0; returns (curve, actors' tables, critic, ...) and the run."""
    res = cluster.run(train_coma, K, args=(game, steps), kwargs=kw, timeout=timeout, faults=faults,
                      network=network)
    return _collect(res), res
