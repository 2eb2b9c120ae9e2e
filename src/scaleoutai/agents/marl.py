"""Multi-agent reinforcement learning with every agent on a rank (Chapter 30).

Pattern: rank 0 hosts the environment (E copies at once, ``marl_envs``); agents 0..n-1 live on ranks in
contiguous blocks (``collectives.block_bounds``, so K > n leaves ranks idle and K = 1 is one machine). Each
step the host sends rank r the observations of its agents, rank r answers with their actions, and the host
steps the environment. A rank therefore always knows whom it waits for: the host, or (on the host) each
agent rank in turn. Every ``train_*`` equals its ``reference_*`` loop bit for bit for a fixed seed: each
agent draws from its own generator (seed, 1, i), the environment from (seed, 0), and messages carry exact
float64 copies.

    independent Q-learning   each agent learns Q_i(o_i, a_i) as if the others were part of the environment
    COMA-style CTDE          decentralised softmax actors pi_i(a_i | o_i); a centralised critic Q(s, a) on
                             the host gives agent i the counterfactual advantage
                             A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b))      (Foerster et al. 2018)
    self-play                two copies of one no-regret rule (Hedge, optimistic Hedge) on a zero-sum game

Faults: a crashed agent rank (``PeerCrashedError``) or a lost message (``MessageLostError``) makes the host
play a uniformly random *fallback* action for those agents (generator (seed, 2)); the host echoes the
executed action, so a learner never learns from an action that was replaced, and a learner whose
observation was lost skips that update.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds

__all__ = ["QLearner", "SoftmaxActor", "Critic", "epsilon", "train_iql", "reference_iql", "run_iql",
           "counterfactual_advantages", "train_coma", "reference_coma", "run_coma", "evaluate"]


def _streams(seed: int, n: int) -> tuple[np.random.Generator, list[np.random.Generator], np.random.Generator]:
    return (np.random.default_rng([seed, 0]), [np.random.default_rng([seed, 1, i]) for i in range(n)],
            np.random.default_rng([seed, 2]))


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


def _owned(n_agents: int, K: int) -> list[range]:
    return [range(lo, hi) for lo, hi in block_bounds(n_agents, K)]


def _host_recv(comm: Comm, r: int, dead: set[int]) -> np.ndarray | None:
    """Rank r's reply, or None when it crashed (remembered) or the message was lost."""
    if r in dead:
        return None
    try:
        return comm.recv(r)
    except cluster.PeerCrashedError:
        dead.add(r)
    except cluster.MessageLostError:
        pass
    return None


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


def _check(steps: int, E: int) -> None:
    if int(steps) != steps or steps < 0 or int(E) != E or E < 1:
        raise ValueError(f"need steps >= 0 and E >= 1 copies, got steps={steps}, E={E}")


def _collect(res: Any) -> dict[str, Any]:
    out = dict(res.values[0])
    for v in res.values[1:]:
        if isinstance(v, dict):
            out["Q" if "Q" in v else "theta"].update(v.get("Q", v.get("theta", {})))
    return out


def run_iql(env: Any, K: int, steps: int, timeout: float = 120.0, faults: cluster.Faults | None = None,
            network: cluster.Network | None = None, **kw: Any) -> tuple[dict[str, Any], Any]:
    """Driver: K ranks, the environment on rank 0; returns (curve, surviving agents' Q tables, ...) and the run."""
    res = cluster.run(train_iql, K, args=(env, steps), kwargs=kw, timeout=timeout, faults=faults,
                      network=network)
    return _collect(res), res


class Critic:
    """Tabular centralised critic Q(s, a) of a one-step game over the joint observation s and the joint
    action a of n agents; each visited cell moves ``lr`` of the way to the mean reward it received.
    It has m^n A^n cells: exact for any game, but only for a few agents (COMA itself uses a network)."""

    def __init__(self, n_agents: int, n_obs: int, n_actions: int, lr: float = 0.5) -> None:
        if n_obs ** n_agents * n_actions ** n_agents > 5_000_000:
            raise ValueError("the joint critic table would exceed 5 M cells: use fewer agents, signals or actions")
        self.n, self.m, self.A, self.lr = n_agents, n_obs, n_actions, float(lr)
        self.Q = np.zeros((n_obs ** n_agents, n_actions ** n_agents))
        self.pa = n_actions ** np.arange(n_agents)   # place value of agent i's action in the joint index

    def index(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (self.m ** np.arange(self.n)) @ obs, self.pa @ actions

    def learn(self, obs: np.ndarray, actions: np.ndarray, r: np.ndarray) -> None:
        s, a = self.index(obs, actions)
        cell = s * self.Q.shape[1] + a
        count = np.bincount(cell, minlength=self.Q.size)
        err = np.bincount(cell, weights=r - self.Q.ravel()[cell], minlength=self.Q.size)
        seen = count > 0
        self.Q.ravel()[seen] += self.lr * err[seen] / count[seen]


def counterfactual_advantages(critic: Critic, obs: np.ndarray, actions: np.ndarray, probs: np.ndarray
                              ) -> np.ndarray:
    """A_i = Q(s, a) - sum_b pi_i(b | o_i) Q(s, (a_-i, b)) for every agent i and copy e: (n, E)."""
    s, a = critic.index(obs, actions)
    q = critic.Q[s, a]
    out = np.empty(actions.shape)
    for i in range(critic.n):
        base = a - actions[i] * critic.pa[i]
        alt = critic.Q[s[:, None], base[:, None] + np.arange(critic.A)[None] * critic.pa[i]]  # (E, A)
        out[i] = q - (probs[i] * alt).sum(axis=1)
    return out


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
