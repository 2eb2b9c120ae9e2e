"""Small multi-agent environments for Chapter 30, NumPy only, vectorised over E copies played at once.

Every environment here is a *vector* environment: one call plays E independent copies, so a message
between an agent's rank and the host carries E observations or E actions, not one. The contract:

    reset(rng, E)           -> obs     (n_agents, E) int   (tabular observations 0..n_obs-1 per agent)
    step(actions, rng)      -> obs, rewards (n_agents, E) float, done (E,) bool
                               (copies that end are reset at once; obs is then the new episode's first)

    MatrixGame     a repeated two-player normal-form game (climbing, penalty, matching pennies, RPS, ...):
                   one play is one episode, the observation is constant (n_obs = 1)
    SignalGame     a one-step cooperative game of n agents, each seeing only its private signal s_i;
                   the team reward (1/n) sum_i [a_i = s_i] is shared, so credit assignment is the problem
    PredatorPrey   two predators chase a randomly walking prey on an m x m torus; both are rewarded 1
                   when both stand within distance 1 of it (capture needs coordination); a time limit ends
                   an episode without reward
``as_pettingzoo`` wraps them in PettingZoo's ParallelEnv API; ``play_parallel_env`` runs independent learners
(``BinnedQLearner``) on any PettingZoo ParallelEnv, MPE2's included.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["MatrixGame", "climbing_game", "penalty_game", "matching_pennies", "rock_paper_scissors",
           "prisoners_dilemma", "SignalGame", "PredatorPrey", "MOVES", "as_pettingzoo",
           "BinnedQLearner", "spread_features", "play_parallel_env"]


def _actions(actions: np.ndarray, n_agents: int, n_actions: int) -> np.ndarray:
    a = np.asarray(actions)
    if a.ndim != 2 or a.shape[0] != n_agents or a.dtype.kind not in "iu":
        raise ValueError(f"actions must be an integer array of shape (n_agents={n_agents}, E), got "
                         f"{a.dtype} {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= n_actions):
        raise ValueError(f"actions must lie in 0..{n_actions - 1}")
    return a.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class MatrixGame:
    """A two-player normal-form game played E times at once; ``payoffs[i][a0, a1]`` is player i's reward."""

    name: str
    payoffs: np.ndarray  # (2, A, A)
    labels: tuple[str, ...] = ()
    n_agents: int = 2
    n_obs: int = 1

    def __post_init__(self) -> None:
        p = np.asarray(self.payoffs, dtype=np.float64)
        if p.ndim != 3 or p.shape[0] != 2 or p.shape[1] != p.shape[2]:
            raise ValueError(f"payoffs must have shape (2, A, A), got {p.shape}")
        object.__setattr__(self, "payoffs", p)

    @property
    def n_actions(self) -> int:
        return int(self.payoffs.shape[1])

    @property
    def zero_sum(self) -> bool:
        return bool(np.array_equal(self.payoffs[0], -self.payoffs[1]))

    @property
    def cooperative(self) -> bool:
        return bool(np.array_equal(self.payoffs[0], self.payoffs[1]))

    def reset(self, rng: np.random.Generator, E: int) -> np.ndarray:
        return np.zeros((2, int(E)), dtype=np.int64)

    def step(self, actions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = _actions(actions, 2, self.n_actions)
        E = a.shape[1]
        return np.zeros((2, E), np.int64), self.payoffs[:, a[0], a[1]], np.ones(E, dtype=bool)


def climbing_game() -> MatrixGame:
    """Claus and Boutilier (1998): the optimum (0, 0) = 11 sits next to -30 penalties; (1, 1) = 7 and
    (2, 2) = 5 are the safe equilibria that independent learners find."""
    R = np.array([[11, -30, 0], [-30, 7, 6], [0, 0, 5]], dtype=float)
    return MatrixGame("climbing", np.stack([R, R]), ("a", "b", "c"))


def penalty_game(k: float = -10.0) -> MatrixGame:
    """Two optimal equilibria (0, 0) and (2, 2) worth 10, a miscoordination costs k <= 0; (1, 1) = 2 is safe."""
    if k > 0:
        raise ValueError(f"the penalty k must be <= 0, got {k}")
    R = np.array([[10, 0, k], [0, 2, 0], [k, 0, 10]], dtype=float)
    return MatrixGame(f"penalty k={k:g}", np.stack([R, R]), ("a", "b", "c"))


def matching_pennies() -> MatrixGame:
    """Zero-sum; the unique Nash equilibrium is (1/2, 1/2) for both."""
    R = np.array([[1, -1], [-1, 1]], dtype=float)
    return MatrixGame("matching pennies", np.stack([R, -R]), ("heads", "tails"))


def rock_paper_scissors(win: float = 1.0) -> MatrixGame:
    """Zero-sum; the unique Nash equilibrium is uniform (1/3, 1/3, 1/3) for both."""
    R = np.array([[0, -win, win], [win, 0, -win], [-win, win, 0]], dtype=float)
    return MatrixGame("rock-paper-scissors", np.stack([R, -R]), ("rock", "paper", "scissors"))


def prisoners_dilemma() -> MatrixGame:
    """General-sum; defecting (1) is dominant, so (1, 1) is the only equilibrium though (0, 0) pays both more."""
    R0 = np.array([[3, 0], [5, 1]], dtype=float)
    return MatrixGame("prisoner's dilemma", np.stack([R0, R0.T]), ("cooperate", "defect"))


@dataclass
class SignalGame:
    """n agents each see a private signal s_i in 0..m-1 (uniform); the shared team reward is

        r(s, a) = (1/n) sum_i [a_i = s_i] + bonus * (1/n) sum_i s_i / (m - 1),

    the second term a windfall that depends on the state only (total demand, say), which no agent controls.
    The optimum a_i = s_i needs no communication, but every agent is trained on the *team* reward, in which
    the other agents' choices and the windfall are noise: the credit-assignment problem.
    """

    n_agents: int = 4
    n_signals: int = 2
    n_actions: int = 2
    bonus: float = 0.0
    _s: np.ndarray = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.n_agents < 1 or self.n_signals < 1 or self.n_actions < self.n_signals:
            raise ValueError("SignalGame needs n_agents >= 1, n_signals >= 1 and n_actions >= n_signals")

    @property
    def n_obs(self) -> int:
        return self.n_signals

    def reset(self, rng: np.random.Generator, E: int) -> np.ndarray:
        self._s = rng.integers(0, self.n_signals, size=(self.n_agents, int(E)))
        return self._s.copy()

    def team_reward(self, signals: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """(n, E) signals and actions -> (E,) team reward."""
        s = np.asarray(signals)
        windfall = self.bonus * s.mean(axis=0) / max(1, self.n_signals - 1)
        return (np.asarray(actions) == s).mean(axis=0) + windfall

    def step(self, actions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Reward the plays and draw the next signals (a one-step game: every copy is done)."""
        if self._s is None:
            raise ValueError("call reset(rng, E) before step")
        a = _actions(actions, self.n_agents, self.n_actions)
        r = self.team_reward(self._s, a)
        E = a.shape[1]
        return self.reset(rng, E), np.broadcast_to(r, (self.n_agents, E)).copy(), np.ones(E, dtype=bool)


# stay, up, down, left, right as (drow, dcol)
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)


@dataclass
class PredatorPrey:
    """Two predators, one prey on an m x m torus, E copies. Actions: stay, up, down, left, right.

    Predator i observes the prey's offset from itself and the other predator's offset (torus coordinates):
    n_obs = m^4. After the predators move, the prey moves uniformly at random; a capture (both predators at
    torus distance <= 1 of the prey) pays both 1 and ends the episode; ``horizon`` steps end it with 0.
    """

    size: int = 5
    horizon: int = 30
    n_agents: int = 2
    n_actions: int = 5
    _pos: np.ndarray = field(default=None, repr=False)   # (3, E, 2): predator 0, predator 1, prey
    _t: np.ndarray = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.size < 3 or self.horizon < 1:
            raise ValueError(f"PredatorPrey needs size >= 3 and horizon >= 1, got {self.size}, {self.horizon}")

    @property
    def n_obs(self) -> int:
        return self.size ** 4

    def _observe(self) -> np.ndarray:
        m, p = self.size, self._pos
        out = []
        for i in (0, 1):
            prey = (p[2] - p[i]) % m
            other = (p[1 - i] - p[i]) % m
            out.append(((prey[:, 0] * m + prey[:, 1]) * m + other[:, 0]) * m + other[:, 1])
        return np.stack(out)

    def _dist(self, i: int) -> np.ndarray:
        d = np.abs(self._pos[i] - self._pos[2]) % self.size
        return np.minimum(d, self.size - d).sum(axis=1)

    def _place(self, rng: np.random.Generator, idx: np.ndarray) -> None:
        self._pos[:, idx] = rng.integers(0, self.size, size=(3, len(idx), 2))
        self._t[idx] = 0

    def reset(self, rng: np.random.Generator, E: int) -> np.ndarray:
        self._pos = np.zeros((3, int(E), 2), dtype=np.int64)
        self._t = np.zeros(int(E), dtype=np.int64)
        self._place(rng, np.arange(int(E)))
        return self._observe()

    def step(self, actions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._pos is None:
            raise ValueError("call reset(rng, E) before step")
        a = _actions(actions, 2, 5)
        if a.shape[1] != self._pos.shape[1]:
            raise ValueError(f"expected actions for E = {self._pos.shape[1]} copies, got {a.shape[1]}")
        self._pos[:2] = (self._pos[:2] + MOVES[a]) % self.size
        self._pos[2] = (self._pos[2] + MOVES[rng.integers(0, 5, size=a.shape[1])]) % self.size
        self._t += 1
        caught = (self._dist(0) <= 1) & (self._dist(1) <= 1)
        done = caught | (self._t >= self.horizon)
        rewards = np.broadcast_to(caught.astype(np.float64), (2, a.shape[1])).copy()
        if done.any():
            self._place(rng, np.flatnonzero(done))
        return self._observe(), rewards, done


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
