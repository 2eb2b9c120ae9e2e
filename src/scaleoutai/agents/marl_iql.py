"""Independent Q-learning with every agent on a rank (Chapter 30, Section 4).

Each agent learns Q_i(o_i, a_i) as if the others were part of the environment (Tan 1993), by the batch
Q-learning step Q(o, a) += lr * mean_e [r_e + gamma (1 - done_e) max_b Q(o'_e, b) - Q(o, a)] over the E
copies that visited (o, a). The host (rank 0) runs the environment; see ``marl`` for the protocol and
``marl_protocol`` for the shared streams and fault handling.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from .marl_protocol import _check, _collect, _host_recv, _owned, _streams

__all__ = ["QLearner", "epsilon", "train_iql", "reference_iql", "run_iql", "evaluate"]


def epsilon(t: int, steps: int, start: float = 1.0, end: float = 0.05, frac: float = 0.5) -> float:
    """Linear decay from ``start`` to ``end`` over the first ``frac`` of the steps, then ``end``."""
    span = max(1.0, frac * steps)
    return float(end + (start - end) * max(0.0, 1.0 - t / span))


def _argmax_random_ties(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    best = q == q.max(axis=1, keepdims=True)
    return np.argmax(best * rng.random(q.shape), axis=1)  # a uniform choice among the maximisers


class QLearner:
    """Tabular Q-learning on a batch: each visited cell (o, a) moves ``lr`` of the way towards the mean
    of its targets r + gamma (1 - done) max_b Q(o', b) (Watkins 1989, one batch of E copies per step)."""

    def __init__(self, n_obs: int, n_actions: int, lr: float = 0.1, gamma: float = 0.95) -> None:
        self.Q = np.zeros((int(n_obs), int(n_actions)))
        self.lr, self.gamma = float(lr), float(gamma)

    def act(self, obs: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        greedy = _argmax_random_ties(self.Q[obs], rng)
        explore = rng.random(len(obs)) < eps
        return np.where(explore, rng.integers(0, self.Q.shape[1], len(obs)), greedy)

    def learn(self, o: np.ndarray, a: np.ndarray, r: np.ndarray, o2: np.ndarray, done: np.ndarray) -> None:
        A = self.Q.shape[1]
        target = r + self.gamma * (1.0 - done) * self.Q[o2].max(axis=1)
        cell = o * A + a
        count = np.bincount(cell, minlength=self.Q.size)
        td = np.bincount(cell, weights=target - self.Q.ravel()[cell], minlength=self.Q.size)
        seen = count > 0
        self.Q.ravel()[seen] += self.lr * td[seen] / count[seen]


def _iql_step(env: Any, agents: dict[int, QLearner], obs: np.ndarray, t: int, steps: int, eps: tuple,
              rngs: list[np.random.Generator]) -> np.ndarray:
    return np.stack([agents[i].act(obs[i], epsilon(t, steps, *eps), rngs[i]) for i in sorted(agents)])


def train_iql(comm: Comm, env: Any, steps: int, E: int = 32, lr: float = 0.1, gamma: float = 0.95,
              eps: tuple = (1.0, 0.05, 0.5), seed: int = 0) -> dict[str, Any]:
    """Per rank: independent Q-learners, the environment on rank 0. Chapter 30, Section 4.

    Per step the host sends rank r a float64 (4, n_r, E) block [executed actions, rewards, done, new obs]
    and receives its (n_r, E) actions: 2 messages and (4 + 1) 8 n_r E bytes per agent rank per step.
    """
    _check(steps, E)
    owned = _owned(env.n_agents, comm.size)
    env_rng, rngs, fb_rng = _streams(seed, env.n_agents)
    agents = {i: QLearner(env.n_obs, env.n_actions, lr, gamma) for i in owned[comm.rank]}
    if comm.rank != 0:  # a rank with no agent (K > n) has nothing to do
        return _iql_agent(comm, agents, steps, eps, rngs) if agents else {"Q": {}}
    env, dead = copy.deepcopy(env), set()
    peers = [r for r in range(1, comm.size) if len(owned[r])]
    obs = env.reset(env_rng, E)
    last = np.full((env.n_agents, E), -1.0), np.zeros((env.n_agents, E)), np.zeros((1, E))
    curve = np.zeros((steps, env.n_agents))
    for t in range(steps + 1):
        for r in peers:
            if r not in dead:
                rows = owned[r]
                comm.send(np.stack([last[0][rows], last[1][rows], np.repeat(last[2], len(rows), 0),
                                    obs[rows].astype(np.float64)]), r)
        if t > 0:
            for i in agents:
                agents[i].learn(prev_obs[i], last[0][i].astype(np.int64), last[1][i], obs[i], last[2][0])
        if t == steps:
            break
        actions = np.empty((env.n_agents, E), dtype=np.int64)
        if agents:
            actions[owned[0]] = _iql_step(env, agents, obs, t, steps, eps, rngs)
        for r in peers:
            got = _host_recv(comm, r, dead)
            for j, i in enumerate(owned[r]):
                ok = got is not None and got[j, 0] >= 0
                actions[i] = got[j] if ok else fb_rng.integers(0, env.n_actions, E)
        prev_obs = obs
        obs, rewards, done = env.step(actions, env_rng)
        last = actions.astype(np.float64), rewards, done[None].astype(np.float64)
        curve[t] = rewards.mean(axis=1)
    return {"curve": curve, "Q": {i: a.Q for i, a in agents.items()}, "dead": sorted(dead)}


def _iql_agent(comm: Comm, agents: dict[int, QLearner], steps: int, eps: tuple,
               rngs: list[np.random.Generator]) -> dict[str, Any]:
    ids, prev = sorted(agents), None
    for t in range(steps + 1):
        try:
            msg = comm.recv(0)
        except cluster.MessageLostError:
            msg = None
        if msg is not None and prev is not None:
            for j, i in enumerate(ids):
                agents[i].learn(prev[j], msg[0, j].astype(np.int64), msg[1, j], msg[3, j].astype(np.int64),
                                msg[2, j])
        if t == steps:
            break
        if msg is None:  # no observation: tell the host so it plays the fallback, skip the next update
            comm.send(np.full((len(ids), 1), -1, dtype=np.int64), 0)
            prev = None
            continue
        prev = msg[3].astype(np.int64)
        comm.send(np.stack([agents[i].act(prev[j], epsilon(t, steps, *eps), rngs[i]) for j, i in enumerate(ids)]), 0)
    return {"Q": {i: a.Q for i, a in agents.items()}}


def reference_iql(env: Any, steps: int, E: int = 32, lr: float = 0.1, gamma: float = 0.95,
                  eps: tuple = (1.0, 0.05, 0.5), seed: int = 0) -> dict[str, Any]:
    """The same independent Q-learners in one plain loop on one machine."""
    _check(steps, E)
    env_rng, rngs, _ = _streams(seed, env.n_agents)
    env = copy.deepcopy(env)
    agents = [QLearner(env.n_obs, env.n_actions, lr, gamma) for _ in range(env.n_agents)]
    obs = env.reset(env_rng, E)
    curve = np.zeros((steps, env.n_agents))
    for t in range(steps):
        actions = np.stack([ag.act(obs[i], epsilon(t, steps, *eps), rngs[i]) for i, ag in enumerate(agents)])
        obs2, rewards, done = env.step(actions, env_rng)
        for i, ag in enumerate(agents):
            ag.learn(obs[i], actions[i], rewards[i], obs2[i], done.astype(np.float64))
        obs, curve[t] = obs2, rewards.mean(axis=1)
    return {"curve": curve, "Q": {i: a.Q for i, a in enumerate(agents)}, "dead": []}


def run_iql(env: Any, K: int, steps: int, timeout: float = 120.0, faults: cluster.Faults | None = None,
            network: cluster.Network | None = None, **kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: K ranks, the environment on rank 0; returns (curve, surviving agents' Q tables, ...) and the run."""
    res = cluster.run(train_iql, K, args=(env, steps), kwargs=kw, timeout=timeout, faults=faults,
                      network=network)
    return _collect(res), res


def evaluate(env: Any, tables: list[np.ndarray] | None, steps: int = 200, E: int = 64, seed: int = 1
             ) -> np.ndarray:
    """Mean reward per agent per step of the greedy joint policy argmax_a tables[i][o_i] (random ties),
    or of uniformly random agents when ``tables`` is None: (n_agents,)."""
    env = copy.deepcopy(env)
    env_rng, rngs, _ = _streams(seed, env.n_agents)
    obs, total = env.reset(env_rng, E), np.zeros(env.n_agents)
    for _ in range(int(steps)):
        if tables is None:
            actions = np.stack([g.integers(0, env.n_actions, E) for g in rngs])
        else:
            actions = np.stack([_argmax_random_ties(tables[i][obs[i]], rngs[i]) for i in range(env.n_agents)])
        obs, rewards, _ = env.step(actions, env_rng)
        total += rewards.mean(axis=1)
    return total / max(1, int(steps))
