"""Robot arenas for the swarm case study (Chapter 39), each a pure function of its seed.

    arena             a square of side ``side`` cut into G x G cells: an importance density (a floor plus
                      Gaussian bumps) that is zero on rectangular obstacles, normalised to sum 1
    start_positions   n robots dropped uniformly on free cells ("drop"), or packed near one corner ("dock")
    formation_shape   n target offsets z_i of a formation (wedge, grid, circle, line), centred on 0
    coarsen           the same arena on an m x m grid (block sums), for a gridworld
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tabular import _positive


@dataclass(frozen=True, eq=False)
class Arena:
    """``density[a, b]`` is the weight of the cell whose centre is ((b + 1/2) h, (a + 1/2) h), h = side / G
    (row a is y, column b is x); it sums to 1 and is 0 where ``obstacle`` is True."""

    side: float
    density: np.ndarray
    obstacle: np.ndarray

    @property
    def G(self) -> int:
        return int(self.density.shape[0])

    @property
    def h(self) -> float:
        return self.side / self.G

    def points(self) -> np.ndarray:
        """(G * G, 2) cell centres (x, y), in the row-major order of ``density.ravel()``."""
        c = (np.arange(self.G) + 0.5) * self.h
        X, Y = np.meshgrid(c, c)
        return np.column_stack([X.ravel(), Y.ravel()])


def arena(G: int = 48, side: float = 10.0, bumps: int = 3, obstacles: int = 2, floor: float = 0.2,
          seed: int = 0) -> Arena:
    """phi(q) = floor + sum_k exp(-|q - m_k|^2 / (2 s_k^2)) on free cells, 0 on obstacles, sum 1.

    Bump centres m_k are uniform in the middle 80 % of the square, widths s_k in [0.08, 0.18] side;
    each obstacle is a rectangle of 8-20 % of the side per edge, anywhere inside.
    """
    G = _positive("the grid size G", G)
    if not side > 0 or bumps < 0 or obstacles < 0 or floor < 0 or (bumps == 0 and floor == 0):
        raise ValueError(f"need side > 0, bumps >= 0, obstacles >= 0, floor >= 0 and some mass; got side={side}, "
                         f"bumps={bumps}, obstacles={obstacles}, floor={floor}")
    rng = np.random.default_rng([seed, 39])
    c = (np.arange(G) + 0.5) * side / G
    X, Y = np.meshgrid(c, c)
    phi = np.full((G, G), float(floor))
    for _ in range(int(bumps)):
        mx, my = rng.uniform(0.1 * side, 0.9 * side, 2)
        s = rng.uniform(0.08, 0.18) * side
        phi += np.exp(-((X - mx) ** 2 + (Y - my) ** 2) / (2 * s * s))
    blocked = np.zeros((G, G), dtype=bool)
    for _ in range(int(obstacles)):
        w, hgt = rng.uniform(0.08, 0.2, 2) * side
        x0, y0 = rng.uniform(0, side - w), rng.uniform(0, side - hgt)
        blocked |= (X >= x0) & (X <= x0 + w) & (Y >= y0) & (Y <= y0 + hgt)
    if blocked.all():
        raise ValueError("the obstacles cover the whole arena: use fewer")
    phi[blocked] = 0.0
    return Arena(float(side), phi / phi.sum(), blocked)


def start_positions(n: int, where: Arena, kind: str = "drop", seed: int = 0) -> np.ndarray:
    """(n, 2) start positions on free cells, jittered inside the cell: ``drop`` spreads them uniformly over
    the free cells, ``dock`` takes the free cells nearest the corner (0, 0) (a charging dock)."""
    n = _positive("the number of robots n", n)
    rng = np.random.default_rng([seed, 391])
    free = np.flatnonzero(~where.obstacle.ravel())
    pts = where.points()
    if kind == "drop":
        cells = rng.choice(free, size=n, replace=n > len(free))
    elif kind == "dock":
        order = free[np.argsort(np.hypot(*pts[free].T), kind="stable")]
        cells = order[np.arange(n) % len(order)]
    else:
        raise ValueError(f"unknown start kind {kind!r}: choose 'drop' or 'dock'")
    return pts[cells] + rng.uniform(-0.4, 0.4, (n, 2)) * where.h


def formation_shape(n: int, kind: str = "wedge", spacing: float = 1.0) -> np.ndarray:
    """(n, 2) offsets z_i of a formation with neighbouring slots ``spacing`` apart, centred (mean 0).

    ``wedge``: robot 0 at the tip, then pairs behind it (a V); ``grid``: rows of ceil(sqrt n);
    ``circle``: a regular polygon; ``line``: abreast.
    """
    n = _positive("the number of robots n", n)
    i = np.arange(n)
    if kind == "wedge":
        rank, side = (i + 1) // 2, np.where(i % 2 == 1, -1.0, 1.0)
        Z = np.column_stack([-rank * spacing * 0.8, np.where(i == 0, 0.0, side * rank * spacing * 0.6)])
    elif kind == "grid":
        cols = int(np.ceil(np.sqrt(n)))
        Z = np.column_stack([(i % cols) * spacing, (i // cols) * spacing]).astype(float)
    elif kind == "circle":
        radius = spacing / (2 * np.sin(np.pi / n)) if n > 1 else 0.0
        Z = radius * np.column_stack([np.cos(2 * np.pi * i / n), np.sin(2 * np.pi * i / n)])
    elif kind == "line":
        Z = np.column_stack([np.zeros(n), i * spacing]).astype(float)
    else:
        raise ValueError(f"unknown formation {kind!r}: choose wedge, grid, circle or line")
    return Z - Z.mean(axis=0)


def coarsen(where: Arena, m: int) -> Arena:
    """The arena on an m x m grid: each coarse cell sums its G/m x G/m fine cells (m must divide G); a coarse
    cell is an obstacle when more than half of it is."""
    m = _positive("the coarse grid size m", m)
    if where.G % m:
        raise ValueError(f"m = {m} must divide the arena's grid size G = {where.G}")
    f = where.G // m
    dens = where.density.reshape(m, f, m, f).sum(axis=(1, 3))
    blocked = where.obstacle.reshape(m, f, m, f).mean(axis=(1, 3)) > 0.5
    dens = np.where(blocked, 0.0, dens)
    if not dens.sum() > 0:
        raise ValueError(f"on an {m} x {m} grid every cell with mass is an obstacle: choose a larger m")
    return Arena(where.side, dens / dens.sum(), blocked)
