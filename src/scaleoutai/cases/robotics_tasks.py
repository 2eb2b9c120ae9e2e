"""Chapter 39: the two swarm tasks, Lloyd coverage and leader-follower formation, as per-robot rules.

Each task has ``nb`` (the fixed lists of who talks to whom) and ``move(ids, view, alive)``: the next positions
of robots ``ids`` from a view of every robot's position (``alive[j]`` False: robot j is ignored). The radio
that fills the view, and the drivers, are in ``cases.robotics``; the rules and the cost are in its docstring.

Coverage: robot i owns the grid cells of its disc of radius R = radio / 2 nearer to it than to any other robot
(ties: the lower id) and steps towards their centroid c_i by lam = min(gain, speed / |c_i - x_i|, the largest
lam keeping |x_i - h_i| <= tether); the cost H(x) = sum_q phi(q) min(min_i |q - x_i|^2, R^2) never increases.
Formation: leaders walk to goal + z_i; follower i moves by gamma sum_{j in N(i)} ((x_j - x_i) - (z_j - z_i)),
capped at ``speed``. ``lloyd_step`` / ``reference_coverage`` are the centralised (vectorised) planner.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..datasets import Neighbours, check_neighbours
from ..datasets.arenas import Arena

__all__ = ["CoverageParams", "FormationParams", "Coverage", "Formation", "candidates", "coverage_cost",
           "formation_error", "lloyd_step", "reference_coverage"]


@dataclass(frozen=True)
class CoverageParams:
    """Radio range r (the sensing disc has radius r / 2), tether D, top speed per step, gain in (0, 1]."""
    radio: float = 2.0
    tether: float = 1.0
    speed: float = 0.25
    gain: float = 1.0

    def check(self) -> None:
        if not (self.radio > 0 and self.tether >= 0 and self.speed > 0 and 0 < self.gain <= 1):
            raise ValueError(f"need radio > 0, tether >= 0, speed > 0 and 0 < gain <= 1, got {self}")


@dataclass(frozen=True)
class FormationParams:
    """Consensus step gamma (keep gamma * max degree < 1), top speed per step, the robots that know the goal."""
    gamma: float = 0.2
    speed: float = 0.3
    leaders: tuple[int, ...] = (0,)

    def check(self, nb: Neighbours) -> None:
        dmax = max((len(r) for r in nb), default=0)
        if not (self.gamma > 0 and self.speed > 0 and self.gamma * dmax < 1):
            raise ValueError(f"need gamma > 0, speed > 0 and gamma * d_max < 1 (d_max = {dmax}), got {self}")
        if any(not 0 <= i < len(nb) for i in self.leaders):
            raise ValueError(f"leaders {self.leaders} must be robots 0..{len(nb) - 1}")


def _positions(X: Any, n: int | None = None) -> np.ndarray:
    X = np.array(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 2 or len(X) < 1 or (n is not None and len(X) != n):
        raise ValueError(f"positions must be an (n, 2) array{'' if n is None else f' with n = {n}'}, got {X.shape}")
    return X


def candidates(P: np.ndarray, reach: float) -> Neighbours:
    """nb[i]: the j != i with |p_i - p_j| < reach, increasing (the fixed lists of who talks to whom)."""
    P = _positions(P)
    D2 = (P[:, None, 0] - P[None, :, 0]) ** 2 + (P[:, None, 1] - P[None, :, 1]) ** 2
    near = D2 < reach * reach
    np.fill_diagonal(near, False)
    return [np.flatnonzero(row).tolist() for row in near]


def _advance(X: np.ndarray, C: np.ndarray, H: np.ndarray, p: CoverageParams) -> np.ndarray:
    """x + lam (c - x), lam = min(gain, speed / |c - x|, the largest lam that keeps |x - h| <= D)."""
    d = C - X
    L2 = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]
    e = X - H
    b = 2 * (e[:, 0] * d[:, 0] + e[:, 1] * d[:, 1])
    cc = e[:, 0] * e[:, 0] + e[:, 1] * e[:, 1] - p.tether * p.tether
    safe = np.where(L2 > 0, L2, 1.0)
    lam_disc = (-b + np.sqrt(np.maximum(b * b - 4 * safe * cc, 0.0))) / (2 * safe)
    lam = np.minimum(np.minimum(p.gain, p.speed / np.sqrt(safe)), np.maximum(lam_disc, 0.0))
    return np.where(L2[:, None] > 0, X + lam[:, None] * d, X)


def _own_cell(i: int, x: np.ndarray, others: np.ndarray, ids: np.ndarray, where: Arena, R: float
              ) -> tuple[float, np.ndarray]:
    """Mass and centroid of robot i's cell: the grid cells within R of x nearer to i than to ``others``
    (rows of positions with ids ``ids``; ties go to the lower id). Centroid = x when the mass is 0."""
    h, G = where.h, where.G
    c0, c1 = max(0, int(np.floor((x[0] - R) / h)) - 1), min(G, int(np.ceil((x[0] + R) / h)) + 1)
    r0, r1 = max(0, int(np.floor((x[1] - R) / h)) - 1), min(G, int(np.ceil((x[1] + R) / h)) + 1)
    QX, QY = np.meshgrid((np.arange(c0, c1) + 0.5) * h, (np.arange(r0, r1) + 0.5) * h)
    d_me = (QX - x[0]) ** 2 + (QY - x[1]) ** 2
    mine = d_me <= R * R
    for j, y in zip(ids, others):
        dj = (QX - y[0]) ** 2 + (QY - y[1]) ** 2
        mine &= (dj > d_me) if j < i else (dj >= d_me)
    w = np.where(mine, where.density[r0:r1, c0:c1], 0.0)
    mass = w.sum()
    return float(mass), (np.array([(w * QX).sum(), (w * QY).sum()]) / mass if mass > 0 else x.copy())


@dataclass(eq=False)
class Coverage:
    """Lloyd coverage of ``where`` by robots whose homes are ``homes`` (also their start). ``seconds``: the
    compute charged per robot per step on the simulator's clock."""
    where: Arena
    homes: np.ndarray
    params: CoverageParams = CoverageParams()
    seconds: float = 0.0
    nb: Neighbours = field(init=False)

    def __post_init__(self) -> None:
        self.params.check()
        self.homes = _positions(self.homes)
        self.nb = candidates(self.homes, self.params.radio + 2 * self.params.tether)

    def move(self, ids: range, view: np.ndarray, alive: np.ndarray) -> np.ndarray:
        R, C = self.params.radio / 2, np.empty((len(ids), 2))
        for k, i in enumerate(ids):
            js = np.array([j for j in self.nb[i] if alive[j]], dtype=np.int64)
            C[k] = _own_cell(i, view[i], view[js], js, self.where, R)[1]
        return _advance(view[ids.start:ids.stop], C, self.homes[ids.start:ids.stop], self.params)


@dataclass(eq=False)
class Formation:
    """Leader-follower formation with target offsets Z on the graph ``nb``; leaders walk to goal + z_i."""
    Z: np.ndarray
    nb: Neighbours
    goal: np.ndarray
    params: FormationParams = FormationParams()
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self.Z = _positions(self.Z)
        self.nb = check_neighbours([sorted(int(j) for j in r) for r in self.nb])
        if len(self.nb) != len(self.Z):
            raise ValueError(f"the graph has {len(self.nb)} nodes but Z has {len(self.Z)} rows: one per robot")
        self.params.check(self.nb)
        self.goal = np.asarray(self.goal, dtype=np.float64).reshape(2)

    def move(self, ids: range, view: np.ndarray, alive: np.ndarray) -> np.ndarray:
        p, Z, out = self.params, self.Z, np.empty((len(ids), 2))
        for k, i in enumerate(ids):
            x = view[i]
            if i in p.leaders:
                u = self.goal + Z[i] - x
            else:
                u = np.zeros(2)
                for j in self.nb[i]:  # one neighbour at a time, in increasing id: the same bits everywhere
                    if alive[j]:
                        u = u + ((view[j] - x) - (Z[j] - Z[i]))
                u = p.gamma * u
            n = np.sqrt(u[0] * u[0] + u[1] * u[1])
            out[k] = x + (u * (p.speed / n) if n > p.speed else u)
        return out


def coverage_cost(X: np.ndarray, where: Arena, params: CoverageParams) -> float:
    """H(x) = sum_q phi(q) min(min_i |q - x_i|^2, R^2), R = radio / 2; rows with NaN (lost robots) are skipped."""
    X = np.asarray(X, dtype=np.float64)
    X = X[~np.isnan(X).any(axis=1)]
    R2, P = (params.radio / 2) ** 2, where.points()
    if not len(X):
        return float(where.density.sum() * R2)
    d2 = (P[:, None, 0] - X[None, :, 0]) ** 2 + (P[:, None, 1] - X[None, :, 1]) ** 2
    return float(where.density.ravel() @ np.minimum(d2.min(axis=1), R2))


def formation_error(X: np.ndarray, Z: np.ndarray) -> float:
    """sqrt(mean_i |(x_i - mean x) - (z_i - mean z)|^2) over the robots without NaN: 0 exactly in formation."""
    X, Z = np.asarray(X, dtype=np.float64), np.asarray(Z, dtype=np.float64)
    ok = ~np.isnan(X).any(axis=1)
    E = (X[ok] - X[ok].mean(axis=0)) - (Z[ok] - Z[ok].mean(axis=0))
    return float(np.sqrt((E * E).sum(axis=1).mean()))


def lloyd_step(X: np.ndarray, task: Coverage) -> np.ndarray:
    """One step of every robot at once with all positions known (the centralised planner, vectorised)."""
    P, w, R = task.where.points(), task.where.density.ravel(), task.params.radio / 2
    d2 = (P[:, None, 0] - X[None, :, 0]) ** 2 + (P[:, None, 1] - X[None, :, 1]) ** 2
    a = np.argmin(d2, axis=1)  # the first minimum: ties go to the lower id
    inside = d2[np.arange(len(P)), a] <= R * R
    n = len(X)
    mass = np.bincount(a[inside], w[inside], n)
    mom = np.column_stack([np.bincount(a[inside], (w * P[:, k])[inside], n) for k in (0, 1)])
    C = np.where(mass[:, None] > 0, mom / np.where(mass > 0, mass, 1.0)[:, None], X)
    return _advance(X, C, task.homes, task.params)


def reference_coverage(task: Coverage, steps: int) -> np.ndarray:
    """The centralised planner: ``steps`` vectorised Lloyd steps from the homes; (steps + 1, n, 2)."""
    X, path = task.homes.copy(), [task.homes.copy()]
    for _ in range(int(steps)):
        X = lloyd_step(X, task)
        path.append(X)
    return np.stack(path)
