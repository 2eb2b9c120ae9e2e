"""Small multi-agent environments for Chapter 30, NumPy only, vectorised over E copies played at once.

Every environment here is a *vector* environment: one call plays E independent copies. The contract:

    reset(rng, E)           -> obs     (n_agents, E) int   (tabular observations 0..n_obs-1 per agent)
    step(actions, rng)      -> obs, rewards (n_agents, E) float, done (E,) bool
                               (copies that end are reset at once; obs is then the new episode's first)

``marl_envs`` describes each game and re-exports them with the PettingZoo bridge (``marl_pettingzoo``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MatrixGame", "climbing_game", "penalty_game", "matching_pennies", "rock_paper_scissors",
           "prisoners_dilemma", "SignalGame", "PredatorPrey", "MOVES"]


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
