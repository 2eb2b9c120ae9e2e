"""A coverage gridworld for learned swarm policies, beside hand-written rules (Chapter 39).

``CoverageGrid`` follows the vector-environment contract of Chapter 30 (``agents.marl_envs``), so
``agents.marl.run_iql`` trains independent Q-learners on it and ``marl_envs.as_pettingzoo`` wraps it:

    reset(rng, E)          -> obs (n_agents, E) int
    step(actions, rng)     -> obs, rewards (n_agents, E), done (E,)   (finished copies restart at once)

n robots move on an m x m grid (stay, up, down, left, right; walls and obstacles stop them). A robot covers
the cells within Chebyshev distance ``reach``; every robot gets the team reward, the density mass covered
this step (in [0, 1]). Robot i observes its cell and the sign (-, 0, +) of the offset to its nearest other
robot in rows and columns: n_obs = 9 m^2, a table small enough to learn. An episode lasts ``horizon`` steps
from a start drawn uniformly over the free cells ("drop") or packed at the corner (0, 0) ("dock").

Rules that read the robots' positions (what the radio of Section 4 gives them): ``lloyd_rule`` steps towards
the density centroid of the robot's grid Voronoi cell, ``dispersion_rule`` steps away from the nearest
robot (the separation rule of boids), ``random_rule``; ``table_rule`` plays a learned Q-table greedily.
``evaluate_rule`` scores any of them on the same starts: env stream default_rng([seed, 0]), as
``agents.marl.evaluate`` uses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..datasets.arenas import Arena

__all__ = ["MOVES", "CoverageGrid", "lloyd_rule", "dispersion_rule", "random_rule", "table_rule", "evaluate_rule"]

MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)  # stay, up, down, left, right
Rule = Callable[["CoverageGrid", np.ndarray, np.random.Generator], np.ndarray]


@dataclass
class CoverageGrid:
    """n robots covering ``where`` (an m x m arena, e.g. ``datasets.arenas.coarsen(arena, m)``)."""
    where: Arena
    n_agents: int = 3
    horizon: int = 20
    reach: int = 1
    start: str = "drop"
    n_actions: int = 5
    _pos: np.ndarray = field(default=None, repr=False)  # (n, E, 2) row, column
    _t: np.ndarray = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.n_agents < 1 or self.horizon < 1 or self.reach < 0 or self.start not in ("drop", "dock"):
            raise ValueError(f"CoverageGrid needs n_agents >= 1, horizon >= 1, reach >= 0 and start 'drop' or "
                             f"'dock'; got {self.n_agents}, {self.horizon}, {self.reach}, {self.start!r}")
        self._free = np.argwhere(~self.where.obstacle)
        if self.start == "dock":
            self._free = self._free[np.argsort(self._free.sum(axis=1), kind="stable")][: 2 * self.n_agents]

    @property
    def m(self) -> int:
        return self.where.G

    @property
    def n_obs(self) -> int:
        return 9 * self.m * self.m

    def positions(self) -> np.ndarray:
        """(n, E, 2) current (row, column) of every robot in every copy."""
        return self._pos.copy()

    def _place(self, rng: np.random.Generator, idx: np.ndarray) -> None:
        self._pos[:, idx] = self._free[rng.integers(0, len(self._free), size=(self.n_agents, len(idx)))]
        self._t[idx] = 0

    def _observe(self) -> np.ndarray:
        P, m = self._pos, self.m
        if self.n_agents == 1:
            return (P[0, :, 0] * m + P[0, :, 1])[None] * 9 + 4
        D = P[None, :, :, :] - P[:, None, :, :]  # D[i, j] = p_j - p_i, (n, n, E, 2)
        d2 = (D * D).sum(-1).astype(np.float64)
        d2[np.arange(self.n_agents), np.arange(self.n_agents)] = np.inf
        j = np.argmin(d2, axis=1)  # (n, E): nearest other robot, lower id on ties
        off = np.take_along_axis(D, j[:, None, :, None], axis=1)[:, 0]
        s = np.sign(off) + 1
        return (P[..., 0] * m + P[..., 1]) * 9 + s[..., 0] * 3 + s[..., 1]

    def covered(self) -> np.ndarray:
        """(E,) density mass within Chebyshev distance ``reach`` of some robot."""
        m, E = self.m, self._pos.shape[1]
        mask = np.zeros((E, m, m), dtype=bool)
        for dr in range(-self.reach, self.reach + 1):
            for dc in range(-self.reach, self.reach + 1):
                r, c = self._pos[..., 0] + dr, self._pos[..., 1] + dc  # (n, E)
                ok = (r >= 0) & (r < m) & (c >= 0) & (c < m)
                e = np.broadcast_to(np.arange(E), r.shape)
                mask[e[ok], r[ok], c[ok]] = True
        return (mask * self.where.density[None]).sum(axis=(1, 2))

    def reset(self, rng: np.random.Generator, E: int) -> np.ndarray:
        self._pos = np.zeros((self.n_agents, int(E), 2), dtype=np.int64)
        self._t = np.zeros(int(E), dtype=np.int64)
        self._place(rng, np.arange(int(E)))
        return self._observe()

    def step(self, actions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._pos is None:
            raise ValueError("call reset(rng, E) before step")
        a = np.asarray(actions)
        if a.shape != self._pos.shape[:2] or a.dtype.kind not in "iu" or a.min() < 0 or a.max() > 4:
            raise ValueError(f"actions must be integers 0..4 of shape (n_agents, E) = {self._pos.shape[:2]}, "
                             f"got {a.dtype} {a.shape}")
        new = np.clip(self._pos + MOVES[a], 0, self.m - 1)
        blocked = self.where.obstacle[new[..., 0], new[..., 1]]
        self._pos = np.where(blocked[..., None], self._pos, new)
        self._t += 1
        reward = self.covered()
        done = self._t >= self.horizon
        if done.any():
            self._place(rng, np.flatnonzero(done))
        return self._observe(), np.broadcast_to(reward, self._pos.shape[:2]).copy(), done


def _toward(P: np.ndarray, T: np.ndarray) -> np.ndarray:
    """The move that reduces the larger of the row and column gaps from P to T (stay when both are < 1/2)."""
    d = T - P
    rows = np.abs(d[..., 0]) >= np.abs(d[..., 1])
    big = np.where(rows, d[..., 0], d[..., 1])
    act = np.where(rows, np.where(big > 0, 2, 1), np.where(big > 0, 4, 3))
    return np.where(np.abs(big) < 0.5, 0, act).astype(np.int64)


def lloyd_rule(env: CoverageGrid, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each robot steps towards the density centroid of the cells nearer to it than to any other robot."""
    P = env._pos.astype(np.float64)  # (n, E, 2)
    m = env.m
    cells = np.argwhere(np.ones((m, m), dtype=bool)).astype(np.float64)  # (m^2, 2) row-major
    w = env.where.density.ravel()
    d2 = ((cells[None, None] - P[:, :, None]) ** 2).sum(-1)  # (n, E, m^2)
    owner = np.argmin(d2, axis=0)  # (E, m^2)
    T = np.empty_like(P)
    for i in range(env.n_agents):
        wi = np.where(owner == i, w[None], 0.0)  # (E, m^2)
        mass = wi.sum(axis=1, keepdims=True)
        T[i] = np.where(mass > 0, (wi @ cells) / np.where(mass > 0, mass, 1.0), P[i])
    return _toward(P, T)


def dispersion_rule(env: CoverageGrid, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each robot steps directly away from its nearest other robot; a random step when they share a cell."""
    s = obs % 9  # the sign code of the offset to the nearest robot (4: same cell, or alone)
    dr, dc = s // 3 - 1, s % 3 - 1
    P = env._pos.astype(np.float64)
    jiggle = rng.integers(1, env.n_actions, size=obs.shape) if env.n_agents > 1 else np.zeros(obs.shape, np.int64)
    return np.where(s == 4, jiggle, _toward(P, P - np.stack([dr, dc], axis=-1)))


def random_rule(env: CoverageGrid, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniformly random moves (the floor any rule must beat)."""
    return rng.integers(0, env.n_actions, size=obs.shape)


def table_rule(tables: list[np.ndarray]) -> Rule:
    """Greedy play of learned Q-tables, tables[i][o, a] (ties broken at random)."""
    def rule(env: CoverageGrid, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(obs.shape, dtype=np.int64)
        for i, Q in enumerate(tables):
            q = Q[obs[i]]
            out[i] = np.argmax((q == q.max(axis=1, keepdims=True)) * rng.random(q.shape), axis=1)
        return out
    return rule


def evaluate_rule(env: CoverageGrid, rule: Rule, steps: int = 200, E: int = 64, seed: int = 1) -> float:
    """Mean covered mass per step of ``rule`` over E copies for ``steps`` steps (starts from default_rng([seed, 0]),
    the rule's draws from default_rng([seed, 1]))."""
    if int(steps) != steps or steps < 1 or int(E) != E or E < 1:
        raise ValueError(f"need steps >= 1 and E >= 1, got {steps}, {E}")
    env = CoverageGrid(env.where, env.n_agents, env.horizon, env.reach, env.start)
    env_rng, rng = np.random.default_rng([seed, 0]), np.random.default_rng([seed, 1])
    obs, total = env.reset(env_rng, int(E)), 0.0
    for _ in range(int(steps)):
        obs, rewards, _ = env.step(rule(env, obs, rng), env_rng)
        total += float(rewards[0].mean())
    return total / int(steps)
