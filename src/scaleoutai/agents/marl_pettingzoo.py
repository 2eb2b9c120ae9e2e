"""Our environments behind PettingZoo's ParallelEnv API, and independent learners on any ParallelEnv
(MPE2's included), Chapter 30, Section 5. PettingZoo and Gymnasium are imported inside ``as_pettingzoo``
so that ``import scaleoutai`` stays light.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .marl_games import PredatorPrey

__all__ = ["as_pettingzoo", "BinnedQLearner", "spread_features", "play_parallel_env"]


def as_pettingzoo(env: Any, max_cycles: int = 25, name: str | None = None) -> Any:
    """Our environment (one copy, E = 1) behind PettingZoo's ParallelEnv API. Chapter 30, Section 5.

    Agents ``agent_0 .. agent_{n-1}``, Discrete observation and action spaces (the same object on every
    call, as PettingZoo requires). A one-step game (MatrixGame, SignalGame) is played ``max_cycles`` times
    in a row and then truncated; PredatorPrey terminates on a capture. ``reset(seed=s)`` reseeds.
    ``pettingzoo.utils.parallel_to_aec`` turns it into an AEC environment.
    """
    from gymnasium import spaces
    from pettingzoo import ParallelEnv

    one_shot = not isinstance(env, PredatorPrey)
    label = name or type(env).__name__.lower()

    class OurParallelEnv(ParallelEnv):
        metadata = {"name": f"scaleoutai_{label}_v0", "render_modes": [], "is_parallelizable": True}

        def __init__(self) -> None:
            self.env = copy.deepcopy(env)
            self.max_cycles = int(max_cycles)
            self.possible_agents = [f"agent_{i}" for i in range(env.n_agents)]
            self.agents: list[str] = []
            self.render_mode = None
            self._obs_space = {a: spaces.Discrete(env.n_obs) for a in self.possible_agents}
            self._act_space = {a: spaces.Discrete(env.n_actions) for a in self.possible_agents}
            self._rng, self._cycles = np.random.default_rng(), 0

        def observation_space(self, agent: str) -> Any:
            return self._obs_space[agent]

        def action_space(self, agent: str) -> Any:
            return self._act_space[agent]

        def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
            if seed is not None:
                self._rng = np.random.default_rng(seed)
                for i, a in enumerate(self.possible_agents):
                    self._act_space[a].seed(seed + 1 + i)
            self.agents, self._cycles = self.possible_agents[:], 0
            obs = self.env.reset(self._rng, 1)
            return self._obs(obs), {a: {} for a in self.agents}

        def _obs(self, obs: np.ndarray) -> dict:
            return {a: np.asarray(obs[i, 0], dtype=np.int64) for i, a in enumerate(self.agents)}

        def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
            if not self.agents:
                raise ValueError("the episode is over: call reset() before step()")
            joint = np.array([[int(actions[a])] for a in self.possible_agents], dtype=np.int64)
            obs, rew, done = self.env.step(joint, self._rng)
            self._cycles += 1
            term = bool(done[0]) and not one_shot
            trunc = self._cycles >= self.max_cycles and not term
            agents = self.agents
            out = (self._obs(obs), {a: float(rew[i, 0]) for i, a in enumerate(agents)},
                   {a: term for a in agents}, {a: trunc for a in agents}, {a: {} for a in agents})
            if term or trunc:
                self.agents = []
            return out

        def state(self) -> np.ndarray:
            return np.array(getattr(self.env, "_pos", getattr(self.env, "_s", np.zeros(1)))).ravel()

        def close(self) -> None:
            pass

    return OurParallelEnv()


def play_parallel_env(par_env: Any, learners: dict[str, Any] | None, episodes: int, eps: tuple = (1.0, 0.05, 0.5),
                      seed: int = 0, learn: bool = True) -> np.ndarray:
    """Independent learners on any PettingZoo ParallelEnv: each agent acts on its own observation only.

    ``learners`` maps agent name to a learner with ``act(o, eps, rng)`` and ``learn(o, a, r, o2, done)``;
    None plays uniformly random actions (the baseline); with ``learn=False`` the learners act with
    eps = end. Returns each episode's team return (the sum over steps of the mean reward over agents);
    ``eps`` = (start, end, fraction of episodes) as in ``marl.epsilon``.
    """
    rng = np.random.default_rng([seed, 3])
    out = np.zeros(int(episodes))
    start, end, frac = eps
    for ep in range(int(episodes)):
        e = end + (start - end) * max(0.0, 1.0 - ep / max(1.0, frac * episodes)) if learn else end
        obs, _ = par_env.reset(seed=seed * 100_003 + ep)
        while par_env.agents:
            names = list(par_env.agents)
            if learners is None:
                acts = {a: int(rng.integers(0, par_env.action_space(a).n)) for a in names}
            else:
                acts = {a: learners[a].act(obs[a], e, rng) for a in names}
            obs2, rew, term, trunc, _ = par_env.step(acts)
            out[ep] += float(np.mean([rew[a] for a in names]))
            if learners is not None and learn:
                for a in names:
                    learners[a].learn(obs[a], acts[a], rew[a], obs2[a], bool(term[a]))
            obs = obs2
    return out


def spread_features(o: np.ndarray, n_landmarks: int, lead: float = 0.3, dead: float = 0.05) -> int:
    """A coarse state of an MPE ``simple_spread`` agent from its own observation
    [vel(2), pos(2), landmark offsets(2N), ...]: the signs (-, 0, +; |x| < dead is 0) of the offset to its
    nearest landmark minus ``lead`` times its velocity (where it will be, not where it is): 9 states."""
    o = np.asarray(o, dtype=np.float64)
    rel = o[4:4 + 2 * n_landmarks].reshape(n_landmarks, 2)
    d = rel[np.argmin((rel ** 2).sum(axis=1))] - lead * o[:2]
    sx, sy = (np.sign(np.where(np.abs(d) < dead, 0.0, d)) + 1).astype(int)
    return int(sx * 3 + sy)


class BinnedQLearner:
    """Tabular Q-learning on ``features(o)`` (an int), one transition at a time, for PettingZoo loops."""

    def __init__(self, features: Any, n_states: int, n_actions: int, lr: float = 0.1, gamma: float = 0.9) -> None:
        self.features, self.Q = features, np.zeros((int(n_states), int(n_actions)))
        self.lr, self.gamma = float(lr), float(gamma)

    def act(self, o: np.ndarray, eps: float, rng: np.random.Generator) -> int:
        if rng.random() < eps:
            return int(rng.integers(0, self.Q.shape[1]))
        q = self.Q[self.features(o)]
        return int(rng.choice(np.flatnonzero(q == q.max())))

    def learn(self, o: np.ndarray, a: int, r: float, o2: np.ndarray, done: bool) -> None:
        s, s2 = self.features(o), self.features(o2)
        target = r + (0.0 if done else self.gamma * self.Q[s2].max())
        self.Q[s, a] += self.lr * (target - self.Q[s, a])
