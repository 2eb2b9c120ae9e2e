"""Boids (Reynolds 1987) in a periodic box, on one machine and split by space over ranks (Chapter 31).

Boid i sees the boids j != i within ``radius`` (minimum-image offsets d_ij = x_j - x_i on the torus) and steers

    v_i <- v_i + w_sep sep_i + w_ali (mean_j v_j - v_i) + w_coh mean_j d_ij,   sep_i = -sum_{|d_ij| < r_sep} d_ij,

then its speed is clamped to [v_min, v_max] and x_i <- (x_i + dt v_i) mod box. The polarisation
phi = |sum_i v_i / |v_i|| / n is 0 for random headings and 1 for a flock that moves as one.

Every neighbour sum adds a boid's neighbours one at a time in increasing id (a padded neighbour table, the
padding adds exact zeros). So any candidate set that holds all of a boid's neighbours, in id order, gives the
same bits: the spatial split (vertical strips, a halo of width ``radius`` from the two adjacent
strips, then migration of the boids that crossed) equals ``reference_boids`` bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm

__all__ = ["BoidsParams", "random_flock", "steer", "boids_step", "polarisation", "reference_boids", "train_boids",
           "run_boids", "strip_of"]


@dataclass(frozen=True)
class BoidsParams:
    """The three rules' radii and weights, speed limits, time step and the side of the periodic box."""
    radius: float = 1.0
    r_sep: float = 0.3
    w_sep: float = 0.05
    w_ali: float = 0.1
    w_coh: float = 0.01
    v_min: float = 0.2
    v_max: float = 0.5
    dt: float = 0.2
    box: float = 10.0

    def check(self) -> None:
        if not 0 < self.r_sep <= self.radius < self.box / 2:
            raise ValueError(f"need 0 < r_sep <= radius < box / 2, got r_sep={self.r_sep}, radius={self.radius}, "
                             f"box={self.box}")
        if not 0 <= self.v_min <= self.v_max or self.dt <= 0:
            raise ValueError(f"need 0 <= v_min <= v_max and dt > 0, got {self.v_min}, {self.v_max}, {self.dt}")


def random_flock(n: int, params: BoidsParams = BoidsParams(), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n boids uniform in the box with random headings at speed (v_min + v_max) / 2."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"a flock needs n >= 1 boids, got {n!r}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, params.box, (int(n), 2))
    ang = rng.uniform(0, 2 * np.pi, int(n))
    return X, 0.5 * (params.v_min + params.v_max) * np.stack([np.cos(ang), np.sin(ang)], axis=1)


def _neighbour_table(near: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row i: the candidate columns of i's neighbours in increasing order, padded with -1; and the counts."""
    ii, jj = np.nonzero(near)  # row-major: j increases within each i
    count = np.bincount(ii, minlength=near.shape[0])
    table = np.full((near.shape[0], int(count.max(initial=0))), -1, dtype=np.int64)
    table[ii, np.arange(len(ii)) - (np.cumsum(count) - count)[ii]] = jj
    return table, count


def steer(X: np.ndarray, V: np.ndarray, CX: np.ndarray, CV: np.ndarray, params: BoidsParams
          ) -> tuple[np.ndarray, np.ndarray]:
    """New (X, V) of the boids (X, V) given candidates (CX, CV) in increasing id that include all their neighbours.

    Each sum adds a boid's neighbours one at a time in id order, so the bits do not depend on which other
    candidates are present.
    """
    D = CX[None, :, :] - X[:, None, :]
    D = D - params.box * np.round(D / params.box)  # minimum image on the torus
    d2 = D[..., 0] * D[..., 0] + D[..., 1] * D[..., 1]
    table, count = _neighbour_table((d2 < params.radius ** 2) & (d2 > 0))  # d2 == 0: the boid itself
    rows = np.arange(len(X))[:, None]
    valid = table >= 0
    Dn = np.where(valid[..., None], D[rows, np.maximum(table, 0)], 0.0)  # (n, m, 2) offsets to the neighbours
    Vn = np.where(valid[..., None], CV[np.maximum(table, 0)], 0.0)
    closeM = valid & (np.where(valid, d2[rows, np.maximum(table, 0)], np.inf) < params.r_sep ** 2)
    sep, vsum, dsum = np.zeros_like(X), np.zeros_like(X), np.zeros_like(X)
    for k in range(table.shape[1]):  # one neighbour at a time: a sequential sum, padding adds exact zeros
        sep = sep - np.where(closeM[:, k, None], Dn[:, k], 0.0)
        vsum = vsum + Vn[:, k]
        dsum = dsum + Dn[:, k]
    has, safe = count[:, None] > 0, np.maximum(count, 1)[:, None]
    ali = np.where(has, vsum / safe - V, 0.0)
    coh = np.where(has, dsum / safe, 0.0)
    V = V + params.w_sep * sep + params.w_ali * ali + params.w_coh * coh
    speed = np.sqrt(V[:, 0] * V[:, 0] + V[:, 1] * V[:, 1])[:, None]
    target = np.clip(speed, params.v_min, params.v_max)
    V = np.where(speed > 0, V * (target / np.where(speed > 0, speed, 1.0)), V)
    return np.mod(X + params.dt * V, params.box), V


def boids_step(X: np.ndarray, V: np.ndarray, params: BoidsParams = BoidsParams()) -> tuple[np.ndarray, np.ndarray]:
    """One step of the whole flock on one machine (every boid a candidate, in id order)."""
    return steer(X, V, X, V, params)


def polarisation(V: np.ndarray) -> float:
    """phi = |sum_i v_i / |v_i|| / n, in [0, 1]."""
    u = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-300)
    return float(np.linalg.norm(u.sum(axis=0)) / max(len(V), 1))


def reference_boids(X0: np.ndarray, V0: np.ndarray, steps: int, params: BoidsParams = BoidsParams()
                    ) -> dict[str, Any]:
    """``steps`` steps on one machine: {'X', 'V', 'polarisation' (per step, the start included)}."""
    params.check()
    X, V = np.array(X0, dtype=np.float64), np.array(V0, dtype=np.float64)
    phi = [polarisation(V)]
    for _ in range(int(steps)):
        X, V = boids_step(X, V, params)
        phi.append(polarisation(V))
    return {"X": X, "V": V, "polarisation": np.array(phi)}


def strip_of(x: np.ndarray, K: int, box: float) -> np.ndarray:
    """The rank owning each x-coordinate: vertical strips of width box / K."""
    return np.minimum((x // (box / K)).astype(np.int64), K - 1)


def _rows(ids: np.ndarray, X: np.ndarray, V: np.ndarray) -> np.ndarray:
    return np.concatenate([ids[:, None].astype(np.float64), X, V], axis=1)  # ids < 2^53: exact as floats


def _swap(comm: Comm, left: np.ndarray, right: np.ndarray) -> list[np.ndarray]:
    """Send ``left`` to rank - 1 and ``right`` to rank + 1 (mod K); receive what they send us (two rounds)."""
    K, r = comm.size, comm.rank
    a = comm.sendrecv(left, (r - 1) % K, (r + 1) % K)
    b = comm.sendrecv(right, (r + 1) % K, (r - 1) % K)
    return [a, b]


def train_boids(comm: Comm, X0: np.ndarray, V0: np.ndarray, steps: int, params: BoidsParams = BoidsParams()
                ) -> np.ndarray:
    """Per rank: the boids in strip ``comm.rank``; per step a halo exchange with the two adjacent strips, the
    rules, then migration. Chapter 31, Section 4. Returns rows [id, x, y, vx, vy] of the boids it owns at the end.

    Needs radius <= box / K (the halo comes from adjacent strips only) and dt v_max < box / K (a boid moves
    at most one strip per step).
    """
    params.check()
    K, r, width = comm.size, comm.rank, params.box / comm.size
    if K > 1 and (params.radius > width or params.dt * params.v_max >= width):
        raise ValueError(f"strips of width box/K = {width:g} must be >= radius ({params.radius}) and > dt v_max "
                         f"({params.dt * params.v_max:g}): use fewer ranks or a bigger box")
    X0, V0 = np.asarray(X0, dtype=np.float64), np.asarray(V0, dtype=np.float64)
    mine = strip_of(X0[:, 0], K, params.box) == r
    own = _rows(np.nonzero(mine)[0], X0[mine], V0[mine])
    for _ in range(int(steps)):
        if K > 1:
            lo, x, reach = r * width, own[:, 1], params.radius * (1 + 1e-9)  # slack for rounding at the edges:
            halo = _swap(comm, own[x - lo < reach], own[lo + width - x < reach])  # extra candidates add exact zeros
            cand = np.concatenate([own] + halo)
            cand = cand[np.unique(cand[:, 0], return_index=True)[1]]  # id order, each boid once (K = 2)
        else:
            cand = own
        Xn, Vn = steer(own[:, 1:3], own[:, 3:5], cand[:, 1:3], cand[:, 3:5], params)
        own = np.concatenate([own[:, :1], Xn, Vn], axis=1)
        if K > 1:
            dest = strip_of(own[:, 1], K, params.box)
            moved = _swap(comm, own[dest == (r - 1) % K], own[(dest == (r + 1) % K) & (dest != (r - 1) % K)])
            own = np.concatenate([own[dest == r]] + moved)
            own = own[np.argsort(own[:, 0], kind="stable")]
    return own


def run_boids(X0: np.ndarray, V0: np.ndarray, steps: int, K: int, params: BoidsParams = BoidsParams(),
              timeout: float = 120.0) -> tuple[dict[str, Any], Any]:
    """Driver: K strips on K ranks; returns {'X', 'V', 'owner'} in id order and the run."""
    res = cluster.run(train_boids, K, args=(X0, V0, int(steps), params), timeout=timeout)
    rows = np.concatenate([np.column_stack([v, np.full(len(v), k)]) for k, v in enumerate(res.values)])
    rows = rows[np.argsort(rows[:, 0])]
    if not np.array_equal(rows[:, 0], np.arange(len(X0))):
        raise RuntimeError("a boid was lost or duplicated between strips")  # a bug, never an expected outcome
    return {"X": rows[:, 1:3], "V": rows[:, 3:5], "owner": rows[:, 5].astype(int)}, res
