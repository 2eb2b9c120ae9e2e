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

Modules: ``robotics_tasks`` holds the tasks (params, per-robot rules, cost, the centralised planner); this one
the radio and the drivers, and re-exports every name of ``robotics_tasks``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds
from ..datasets import Neighbours
from .robotics_tasks import (Coverage, CoverageParams, Formation, FormationParams, candidates, coverage_cost,
                             formation_error, lloyd_step, reference_coverage)
from .robotics_tasks import _advance, _own_cell, _positions  # noqa: F401 (the old private names stay importable)

__all__ = ["CoverageParams", "FormationParams", "Coverage", "Formation", "candidates", "exchange_plan",
           "coverage_cost", "formation_error", "lloyd_step", "reference_coverage", "reference_swarm",
           "train_swarm", "run_swarm", "messages_per_step"]


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
