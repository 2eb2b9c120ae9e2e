"""A robot swarm on the communicator: Lloyd coverage and leader-follower formation (Chapter 39).

n robots live on K ranks in contiguous blocks (``collectives.block_bounds``: K = n is one robot per rank, the
deployed swarm; K > n leaves ranks idle; K = 1 is the centralised planner). Each step every rank sends to each
peer rank, in increasing rank, the positions of its robots that neighbour one of the peer's, then receives the
peer's: ``exchange_plan``. The neighbour lists never depend on a message, so a rank always knows whom it waits
for, and a lost message cannot desynchronise the pattern.

Coverage (Lloyd 1982; Cortes, Martinez, Karatas and Bullo 2004, range-limited as in Cortes, Martinez and Bullo
2005). Robot i senses the disc of radius R = r / 2 (r: radio range) and owns the grid cells q of that disc
closer to it than to any other robot (ties: the lower id). With weights phi(q) it moves from x_i along the
segment towards the centroid c_i of its cell, by at most ``gain`` of the way and ``speed``, and never farther
than ``tether`` D from its home h_i (its start). The cost

    H(x) = sum_q phi(q) min(min_i |q - x_i|^2, R^2)

never increases (a step along [x_i, c_i] lowers sum_{q in cell i} phi |q - x_i|^2, and reassigning lowers it
again). Only robots within r can own a point of i's disc, and |x - h| <= D, so the candidates |h_i - h_j| <
r + 2D, fixed for the whole run, contain every robot that matters: a Verlet list whose skin is the tether.

Formation (consensus on relative positions, Olfati-Saber, Fax and Murray 2007). Leaders walk to goal + z_i;
follower i moves by gamma sum_{j in N(i)} ((x_j - x_i) - (z_j - z_i)), capped at ``speed``. On a connected
graph the formation error goes to 0 once the leaders stop.

Lossy radio: a lost message (``MessageLostError``) leaves the receiver with the last known positions of the
sender's robots (at first, their deployment positions); a crashed peer (``PeerCrashedError``) is dropped, and
the others re-cover its area. ``reference_swarm`` replays the radio of K ranks on one machine, losses included:
the simulator draws one number per send from a generator seeded (seed, rank), so a fixed send order fixes them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds
from ..datasets import Neighbours, check_neighbours
from ..datasets.arenas import Arena

__all__ = ["CoverageParams", "FormationParams", "Coverage", "Formation", "candidates", "exchange_plan",
           "coverage_cost", "formation_error", "lloyd_step", "reference_coverage", "reference_swarm",
           "train_swarm", "run_swarm", "messages_per_step"]


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


def exchange_plan(nb: Neighbours, K: int) -> list[list[tuple[int, np.ndarray, np.ndarray]]]:
    """plan[r] = [(q, send, recv), ...] by increasing q: r sends the positions of its robots ``send`` that
    neighbour a robot of q, and receives those of q's robots ``recv`` that neighbour one of r's."""
    n = len(nb)
    owner = np.zeros(n, dtype=np.int64)
    for r, (lo, hi) in enumerate(block_bounds(n, K)):
        owner[lo:hi] = r
    pairs: dict[tuple[int, int], set[int]] = {}
    for i in range(n):
        for j in nb[i]:
            if owner[i] != owner[j]:
                pairs.setdefault((int(owner[i]), int(owner[j])), set()).add(i)
    plan: list[list[tuple[int, np.ndarray, np.ndarray]]] = [[] for _ in range(K)]
    for (r, q), ids in sorted(pairs.items()):
        plan[r].append((q, np.array(sorted(ids), dtype=np.int64), np.array(sorted(pairs[(q, r)]), dtype=np.int64)))
    return plan


def messages_per_step(nb: Neighbours, K: int) -> np.ndarray:
    """Messages each rank sends per step: its number of peer ranks."""
    return np.array([len(p) for p in exchange_plan(nb, K)])


def _check(task: Any, X0: Any, steps: int, K: int) -> np.ndarray:
    if not isinstance(task, (Coverage, Formation)):
        raise ValueError(f"task must be a robotics.Coverage or robotics.Formation, got {type(task).__name__}")
    if isinstance(steps, bool) or int(steps) != steps or steps < 0 or isinstance(K, bool) or int(K) != K or K < 1:
        raise ValueError(f"need steps >= 0 and K >= 1 ranks, got steps={steps!r}, K={K!r}")
    return _positions(X0, len(task.nb))


def reference_swarm(task: Coverage | Formation, X0: np.ndarray, steps: int, K: int = 1, loss: float = 0.0,
                    seed: int = 0) -> np.ndarray:
    """The per-robot rules on one machine, with the radio of K ranks replayed: rank r's n-th send is lost when
    the n-th draw of default_rng([seed, r]) is below ``loss`` (as ``cluster.Faults(loss=, seed=)`` draws).
    K = 1 (no messages) is the centralised planner. Returns (steps + 1, n, 2)."""
    X = _check(task, X0, steps, K)
    if not 0 <= loss < 1:
        raise ValueError(f"loss is a probability: choose 0 <= loss < 1, got {loss}")
    n, plan, blocks = len(X), exchange_plan(task.nb, K), block_bounds(len(X), K)
    rngs = [np.random.default_rng([seed, r]) for r in range(K)] if loss > 0 else None
    views, alive, path = [X.copy() for _ in range(K)], np.ones(n, dtype=bool), [X.copy()]
    for _ in range(int(steps)):
        for r in range(K):
            for q, send, _ in plan[r]:
                if rngs is None or not rngs[r].random() < loss:
                    views[q][send] = X[send]
        X = X.copy()
        for r, (lo, hi) in enumerate(blocks):
            views[r][lo:hi] = X[lo:hi]
            if hi > lo:
                X[lo:hi] = task.move(range(lo, hi), views[r], alive)
        path.append(X)
    return np.stack(path)


def train_swarm(comm: Comm, task: Coverage | Formation, X0: np.ndarray, steps: int) -> np.ndarray:
    """Per rank: its block of robots; per step one ``sendrecv`` with each peer rank in increasing rank, then
    the rule for each of its robots. Chapter 39, Section 4. Returns its robots' path (steps + 1, m, 2)."""
    X = _check(task, X0, steps, comm.size)
    bounds = block_bounds(len(X), comm.size)
    lo, hi = bounds[comm.rank]
    plan = exchange_plan(task.nb, comm.size)[comm.rank]
    view, alive, dead = X.copy(), np.ones(len(X), dtype=bool), set()
    path = [X[lo:hi].copy()]
    for _ in range(int(steps)):
        for q, send, recv in plan:
            if q in dead:
                continue
            try:
                view[recv] = comm.sendrecv(np.ascontiguousarray(view[send]), q, q)
            except cluster.MessageLostError:
                pass  # keep the last known positions of q's robots
            except cluster.PeerCrashedError:
                dead.add(q)
                alive[bounds[q][0]:bounds[q][1]] = False
        if hi > lo:
            comm.compute(task.seconds * (hi - lo))
            view[lo:hi] = task.move(range(lo, hi), view, alive)
        path.append(view[lo:hi].copy())
    return np.stack(path)


def run_swarm(task: Coverage | Formation, X0: np.ndarray, steps: int, K: int, faults: cluster.Faults | None = None,
              network: cluster.Network | None = None, backend: str = "sim", timeout: float = 120.0
              ) -> tuple[np.ndarray, Any]:
    """Driver: K ranks; returns the path (steps + 1, n, 2), NaN for the robots of a crashed rank, and the run."""
    X = _check(task, X0, steps, K)
    res = cluster.run(train_swarm, int(K), backend=backend, args=(task, X, int(steps)), faults=faults,
                      network=network, timeout=timeout)
    parts = [v if isinstance(v, np.ndarray) else np.full((int(steps) + 1, hi - lo, 2), np.nan)
             for v, (lo, hi) in zip(res.values, block_bounds(len(X), K))]
    return np.concatenate(parts, axis=1), res
