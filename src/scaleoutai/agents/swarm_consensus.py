"""Average consensus on a graph through its Laplacian (Chapter 31, Sections 2-7).

Node i holds x_i and talks to its neighbours N(i) only. With the Laplacian L = D - A (degrees on the
diagonal, -1 per edge) one step is

    x_{t+1} = x_t - gamma L x_t,      i.e.  x_i <- x_i + gamma sum_{j in N(i)} (x_j - x_i).

1^T L = 0, so every step keeps the sum. On a connected graph with eigenvalues 0 = l_1 < l_2 <= ... <= l_n,
the disagreement shrinks as ||x_t - xbar 1|| <= rho^t ||x_0 - xbar 1||, rho = max(|1 - gamma l_2|,
|1 - gamma l_n|) (Olfati-Saber, Fax and Murray 2007). Any gamma < 1/d_max converges (l_n <= 2 d_max; at
gamma = 1/d_max a bipartite graph such as an even ring keeps an oscillating mode, rho = 1), and for every
gamma <= gamma* = 2 / (l_2 + l_n) the slow end binds, rho = 1 - gamma l_2: the algebraic connectivity l_2
(Fiedler 1973) sets the rate. gamma* itself gives the smallest rho* = (l_n - l_2) / (l_n + l_2) (Xiao and
Boyd 2004).

I - gamma L is one doubly stochastic mixing matrix; Chapter 14's Metropolis weights are another.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from .. import datasets as ds
from ..cluster import Comm
from ..datasets import Neighbours

__all__ = ["ring", "grid", "complete", "random_geometric", "erdos_renyi", "graph", "laplacian", "spectrum",
           "algebraic_connectivity", "predicted_rate", "optimal_step", "reference_consensus",
           "consensus_average", "run_consensus", "disagreement", "iterations_to", "predicted_iterations",
           "measured_rate"]

# The communication graphs are the shared ones (datasets); Chapter 31 names them as the book does.
ring, grid, complete, _check = ds.ring_graph, ds.grid_graph, ds.complete_graph, ds.check_neighbours
random_geometric, erdos_renyi = ds.random_geometric_graph, ds.erdos_renyi_graph


def _n(n: Any) -> int:
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"a graph needs n >= 1 nodes, got {n!r}")
    return int(n)


def graph(name: str, n: int, seed: int = 0) -> Neighbours:
    """``ring``, ``torus`` (the most nearly square rows x cols = n), ``geometric`` (pi r^2 n = 2 log n: twice
    the connectivity threshold, mean degree about 2 log n), ``erdos_renyi`` (p = 2 log n / n) or ``complete``."""
    n = _n(n)
    if name == "ring":
        return ring(n)
    if name == "torus":
        rows = max(r for r in range(1, int(np.sqrt(n)) + 1) if n % r == 0)
        return grid(rows, n // rows)
    if name == "geometric":
        return random_geometric(n, min(1.5, np.sqrt(2 * np.log(max(n, 3)) / (np.pi * n))), seed)
    if name == "erdos_renyi":
        return erdos_renyi(n, min(1.0, 2 * np.log(max(n, 2)) / n), seed)
    if name == "complete":
        return complete(n)
    raise ValueError(f"unknown graph {name!r}: choose ring, torus, geometric, erdos_renyi or complete")


def laplacian(nb: Neighbours) -> np.ndarray:
    """L = D - A: L_ii = d_i, L_ij = -1 on an edge. Symmetric, positive semidefinite, L 1 = 0."""
    nb = _check(nb)
    L = np.zeros((len(nb), len(nb)))
    for i, row in enumerate(nb):
        L[i, row] = -1.0
        L[i, i] = len(row)
    return L


def spectrum(nb: Neighbours) -> np.ndarray:
    """The Laplacian's eigenvalues in increasing order (l_1 = 0)."""
    return np.linalg.eigvalsh(laplacian(nb))


def algebraic_connectivity(nb: Neighbours) -> float:
    """l_2(L): > 0 exactly when the graph is connected (0 for a single node)."""
    lam = spectrum(nb)
    return float(lam[1]) if len(lam) > 1 else 0.0


def optimal_step(nb: Neighbours) -> float:
    """gamma* = 2 / (l_2 + l_n), the constant step with the smallest rho."""
    lam = spectrum(nb)
    if len(lam) < 2 or lam[1] <= 1e-12:
        raise ValueError("the optimal step needs a connected graph with at least 2 nodes")
    return float(2.0 / (lam[1] + lam[-1]))


def predicted_rate(nb: Neighbours, gamma: float) -> float:
    """rho = max(|1 - gamma l_2|, |1 - gamma l_n|): the factor per step of the slowest mode."""
    lam = spectrum(nb)
    if len(lam) < 2:
        return 0.0
    return float(max(abs(1 - gamma * lam[1]), abs(1 - gamma * lam[-1])))


def predicted_iterations(nb: Neighbours, gamma: float, tol: float = 1e-6) -> float:
    """ceil(log(tol) / log(rho)): steps for the bound rho^t to fall to ``tol`` (0 when rho = 0, inf when rho >= 1)."""
    rho = predicted_rate(nb, gamma)
    if rho >= 1 - 1e-12:
        return float("inf")
    return 0.0 if rho <= 1e-15 else float(np.ceil(np.log(tol) / np.log(rho)))


def _step(xi: np.ndarray, got: dict[int, np.ndarray], gamma: float) -> np.ndarray:
    acc = np.zeros_like(xi)
    for j in sorted(got):  # one fixed order in the reference and on every rank
        acc = acc + (got[j] - xi)
    return xi + gamma * acc


def _gamma(nb: Neighbours, gamma: float) -> float:
    dmax = max((len(r) for r in nb), default=0)
    if not 0 < gamma or (dmax and gamma * dmax > 2):
        raise ValueError(f"the step gamma must be in (0, 2/d_max] = (0, {2 / max(dmax, 1):g}], got {gamma}")
    return float(gamma)


def reference_consensus(X0: np.ndarray, nb: Neighbours, gamma: float, steps: int) -> np.ndarray:
    """Rows x_i after ``steps`` Laplacian steps on one machine, summed in the order the ranks use: (steps+1, n, ...)."""
    nb, gamma = _check(nb), _gamma(nb, gamma)
    X = np.array(X0, dtype=np.float64, copy=True)
    if len(X) != len(nb):
        raise ValueError(f"X0 has {len(X)} rows but the graph has {len(nb)} nodes: one row per node")
    path = [X]
    for _ in range(int(steps)):
        X = np.stack([_step(X[i], {j: X[j] for j in nb[i]}, gamma) for i in range(len(nb))])
        path.append(X)
    return np.stack(path)


def consensus_average(comm: Comm, x: np.ndarray, nb: Neighbours, gamma: float, steps: int,
                      on_loss: str = "skip") -> np.ndarray:
    """Per rank: ``steps`` steps, one ``sendrecv`` with each neighbour (in increasing rank) per step.
    Chapter 31, Section 4. Returns x after every step, (steps + 1, ...).

    A lost message (``MessageLostError``) drops the term of that neighbour for this step (``on_loss="skip"``)
    or reuses its last value (``"stale"``): either way the sender does not know, so the sum is no longer kept.
    """
    if len(nb) != comm.size:
        raise ValueError(f"the graph has {len(nb)} nodes but the communicator has {comm.size} ranks")
    if on_loss not in ("skip", "stale"):
        raise ValueError(f"on_loss must be 'skip' or 'stale', got {on_loss!r}")
    gamma = _gamma(nb, gamma)
    i, xi = comm.rank, np.array(x, dtype=np.float64, copy=True)
    last = {j: xi for j in nb[i]}  # before any message, the stale guess of a neighbour is our own value
    path = [xi]
    for _ in range(int(steps)):
        got = {}
        for j in nb[i]:
            try:
                got[j] = last[j] = comm.sendrecv(xi, j, j)
            except cluster.MessageLostError:
                if on_loss == "stale":
                    got[j] = last[j]
        xi = _step(xi, got, gamma)
        path.append(xi)
    return np.stack(path)


def run_consensus(X0: np.ndarray, nb: Neighbours, gamma: float, steps: int, on_loss: str = "skip",
                  faults: cluster.Faults | None = None, backend: str = "sim", timeout: float = 120.0
                  ) -> tuple[np.ndarray, Any]:
    """Driver: rank i starts from X0[i]; returns the trajectory (steps + 1, n, ...) and the run."""
    X0 = np.asarray(X0, dtype=np.float64)
    res = cluster.run(_consensus_rank, len(nb), backend=backend, args=(X0, nb, gamma, int(steps), on_loss),
                      faults=faults, timeout=timeout)
    return np.stack(res.values, axis=1), res


def _consensus_rank(comm: Comm, X0: np.ndarray, nb: Neighbours, gamma: float, steps: int, on_loss: str) -> Any:
    return consensus_average(comm, X0[comm.rank], nb, gamma, steps, on_loss)


def disagreement(path: np.ndarray) -> np.ndarray:
    """||x_t - xbar_0 1|| / ||x_0 - xbar_0 1|| per step, against the initial mean (what the protocol must reach)."""
    path = np.asarray(path, dtype=np.float64)
    mean = path[0].mean(axis=0, keepdims=True)
    flat = (path - mean).reshape(len(path), -1)
    den = np.linalg.norm(flat[0])
    return np.linalg.norm(flat, axis=1) / den if den > 0 else np.zeros(len(path))


def iterations_to(err: np.ndarray, tol: float = 1e-6) -> int | None:
    """The first step t with err_t <= tol, or None if it never gets there."""
    hit = np.nonzero(np.asarray(err) <= tol)[0]
    return int(hit[0]) if len(hit) else None


def measured_rate(err: np.ndarray, lo: float = 1e-11, hi: float = 1e-7) -> float:
    """The factor per step fitted to log err_t where lo < err_t < hi (late: past the faster modes, above round-off);
    nan when fewer than 4 steps fall in that band."""
    err = np.asarray(err, dtype=np.float64)
    t = np.nonzero((err > lo) & (err < hi))[0]
    return float(np.exp(np.polyfit(t, np.log(err[t]), 1)[0])) if len(t) >= 4 else float("nan")
