"""Gossip averaging on a graph (Chapter 14): no server, every rank talks to its neighbours only.

Each rank i holds x_i. One gossip step is x_i <- W_ii x_i + sum_{j in N(i)} W_ij x_j with a symmetric,
doubly stochastic W (Metropolis weights W_ij = 1 / (1 + max(d_i, d_j)) on edges). Every step keeps
the mean, and on a connected graph the disagreement shrinks at least as |lambda_2|^t,

    ||X_t - 1 xbar^T||_F <= |lambda_2(W)|^t ||X_0 - 1 xbar^T||_F,

with |lambda_2| the second-largest eigenvalue modulus: the spectral gap 1 - |lambda_2| sets the rate
(Boyd et al. 2006; Koloskova et al. 2020). Topologies: ring, 2-D torus, complete, random d-regular.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from .. import datasets as ds
from ..cluster import Comm
from ..datasets import Neighbours

__all__ = ["ring", "torus", "complete", "random_regular", "topology", "metropolis_weights", "second_eigenvalue",
           "spectral_gap", "reference_gossip", "gossip_average", "run_gossip", "consensus_error"]

# The communication graphs are the shared ones (datasets); Chapter 14 names them as the book does.
ring, complete, random_regular, _check = ds.ring_graph, ds.complete_graph, ds.random_regular_graph, ds.check_neighbours


def torus(rows: int, cols: int) -> Neighbours:
    """A rows x cols grid with wrap-around; node i = r * cols + c. Up to 4 neighbours."""
    return ds.grid_graph(rows, cols, periodic=True)


def topology(name: str, K: int, seed: int = 0) -> Neighbours:
    """``ring``, ``torus`` (the most nearly square rows x cols = K), ``complete`` or ``regular3`` (3-regular)."""
    if name == "ring":
        return ring(K)
    if name == "torus":
        rows = max(r for r in range(1, int(np.sqrt(K)) + 1) if K % r == 0)
        return torus(rows, K // rows)
    if name == "complete":
        return complete(K)
    if name == "regular3":
        return random_regular(K, 3, seed)
    raise ValueError(f"unknown topology {name!r}: choose ring, torus, complete or regular3")


def metropolis_weights(nb: Neighbours) -> np.ndarray:
    """W_ij = 1 / (1 + max(d_i, d_j)) on edges, W_ii = 1 - sum_j W_ij: symmetric and doubly stochastic."""
    nb = _check(nb)
    K = len(nb)
    W = np.zeros((K, K))
    for i in range(K):
        for j in nb[i]:
            W[i, j] = 1.0 / (1 + max(len(nb[i]), len(nb[j])))
        W[i, i] = 1.0 - W[i].sum()
    return W


def second_eigenvalue(W: np.ndarray) -> float:
    """|lambda_2|: the second-largest eigenvalue modulus of a symmetric W (0 when K = 1)."""
    mods = np.sort(np.abs(np.linalg.eigvalsh(W)))[::-1]
    return float(mods[1]) if len(mods) > 1 else 0.0


def spectral_gap(W: np.ndarray) -> float:
    """1 - |lambda_2(W)|: the larger, the faster gossip forgets the initial disagreement."""
    return 1.0 - second_eigenvalue(W)


def _mix(i: int, xi: np.ndarray, got: dict[int, np.ndarray], W: np.ndarray) -> np.ndarray:
    acc = float(W[i, i]) * xi  # Python floats keep float32 rows float32
    for j in sorted(got):  # one fixed order on every backend and in the reference
        acc = acc + float(W[i, j]) * got[j]
    return acc


def reference_gossip(X0: np.ndarray, nb: Neighbours, steps: int) -> np.ndarray:
    """Rows x_i after ``steps`` gossip steps on one machine, summed in the order ``gossip_average`` uses."""
    W = metropolis_weights(nb)
    X = np.array(X0, copy=True)
    for _ in range(int(steps)):
        X = np.stack([_mix(i, X[i], {j: X[j] for j in nb[i]}, W) for i in range(len(nb))])
    return X


def gossip_average(comm: Comm, x: np.ndarray, nb: Neighbours, steps: int, trajectory: bool = False
                   ) -> np.ndarray | tuple[np.ndarray, list[np.ndarray]]:
    """Per rank: ``steps`` gossip steps, one ``sendrecv`` with each neighbour per step. Chapter 14, Section 4.

    Bytes per rank per step: d_i * x.nbytes. With ``trajectory`` also returns x after every step.
    """
    if len(nb) != comm.size:
        raise ValueError(f"the graph has {len(nb)} nodes but the communicator has {comm.size} ranks")
    W = metropolis_weights(nb)
    i, xi, path = comm.rank, np.array(x, copy=True), []
    for _ in range(int(steps)):
        got = {j: comm.sendrecv(xi, j, j) for j in nb[i]}
        xi = _mix(i, xi, got, W)
        if trajectory:
            path.append(xi.copy())
    return (xi, path) if trajectory else xi


def run_gossip(X0: np.ndarray, nb: Neighbours, steps: int, backend: str = "sim", timeout: float = 120.0,
               trajectory: bool = False) -> tuple[np.ndarray, Any]:
    """Driver: rank i starts from row X0[i]; returns the rows after ``steps`` (or the trajectory) and the run."""
    X0 = np.asarray(X0)
    res = cluster.run(_gossip_rank, len(nb), backend=backend, args=(X0, nb, int(steps), trajectory),
                      timeout=timeout)
    if trajectory:
        if steps == 0:
            return np.zeros((0,) + X0.shape, X0.dtype), res
        return np.stack([np.stack(v[1]) for v in res.values], axis=1), res  # (steps, K, ...)
    return np.stack(res.values), res


def _gossip_rank(comm: Comm, X0: np.ndarray, nb: Neighbours, steps: int, trajectory: bool) -> Any:
    return gossip_average(comm, X0[comm.rank], nb, steps, trajectory)


def consensus_error(X: np.ndarray, X0: np.ndarray) -> float:
    """||X - 1 xbar_0^T||_F / ||X0 - 1 xbar_0^T||_F: the share of the initial disagreement left."""
    X, X0 = np.asarray(X, dtype=np.float64), np.asarray(X0, dtype=np.float64)
    mean = X0.mean(axis=0, keepdims=True)
    den = np.linalg.norm(X0 - mean)
    return float(np.linalg.norm(X - mean) / den) if den > 0 else 0.0
