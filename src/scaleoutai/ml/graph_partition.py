"""Chapter 13, Section 2: partitioning a graph over K workers, and what each partition costs.

Edge-cut: every vertex has one owner rank (``parts[v]``); an edge whose endpoints have different
owners is *cut* and carries a message every superstep. Vertex-cut: every edge has one owner
(``edge_parts[e]``); a vertex is *replicated* on every rank that holds one of its edges, and the
replication factor (mean copies per vertex) is what a superstep pays. Edges are int64 (E, 2)
arrays of (src, dst) over vertices 0..n-1, as ``scaleoutai.datasets`` returns them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: consecutive ids land far apart


def check_edges(edges: Any, n: int) -> np.ndarray:
    """Validate an edge list: int (E, 2) with endpoints in 0..n-1; returns it as int64."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the graph needs n >= 1 vertices, got n={n!r}")
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[1] != 2 or not (np.issubdtype(e.dtype, np.integer) or e.size == 0):
        raise ValueError(f"edges must be an integer array of shape (E, 2) holding (src, dst) rows, got "
                         f"shape {e.shape} dtype {e.dtype}: build them with scaleoutai.datasets.power_law_graph")
    e = e.astype(np.int64, copy=False)
    if e.size and (e.min() < 0 or e.max() >= n):
        raise ValueError(f"edges name vertex {int(e.min()) if e.min() < 0 else int(e.max())}, outside 0..{n - 1}: "
                         f"pass the right n")
    return e


def _check_k(K: Any) -> int:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K must be a number of parts >= 1, got {K!r}")
    return int(K)


def hash_partition(n: int, K: int, seed: int = 0) -> np.ndarray:
    """Edge-cut by hashing: ``parts[v] = h(v + seed) mod K`` with a multiplicative hash."""
    K = _check_k(K)
    v = np.arange(n, dtype=np.uint64) + np.uint64(seed)
    h = (v * _GOLDEN) >> np.uint64(32)  # the high bits mix best
    return (h % np.uint64(K)).astype(np.int64)


def range_partition(n: int, K: int) -> np.ndarray:
    """Edge-cut by contiguous id ranges, the ``block_bounds`` split: part r owns block r of 0..n-1."""
    K = _check_k(K)
    q, extra = divmod(int(n), K)
    sizes = [q + (r < extra) for r in range(K)]
    return np.repeat(np.arange(K, dtype=np.int64), sizes)


def undirected_csr(edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) of the undirected neighbour lists (each directed edge counted both ways)."""
    e = check_edges(edges, n)
    both = np.concatenate([e, e[:, ::-1]])
    order = np.argsort(both[:, 0], kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(both[:, 0], minlength=n), out=indptr[1:])
    return indptr, both[order, 1]


def ldg_partition(edges: np.ndarray, n: int, K: int, slack: float = 1.05, order: np.ndarray | None = None
                  ) -> np.ndarray:
    """Linear Deterministic Greedy streaming edge-cut (Stanton and Kliot, KDD 2012).

    Vertices arrive in ``order`` (default 0..n-1); v goes to argmax_i |N(v) in part i| * (1 - |part i| / C)
    with capacity C = slack * n / K; ties go to the lighter part, then the lower index. One pass, no
    global view: what a loader can do while it streams the graph in.
    """
    K = _check_k(K)
    if not slack >= 1.0:
        raise ValueError(f"slack must be >= 1 (capacity = slack * n / K), got {slack}")
    indptr, indices = undirected_csr(edges, n)
    cap = slack * n / K
    parts = np.full(n, -1, dtype=np.int64)
    load = np.zeros(K)
    for v in (np.arange(n) if order is None else np.asarray(order, dtype=np.int64)):
        nb = parts[indices[indptr[v]:indptr[v + 1]]]
        together = np.bincount(nb[nb >= 0], minlength=K).astype(float)
        score = together * (1.0 - load / cap)
        score[load >= cap] = -np.inf  # a full part takes no more vertices
        best = np.flatnonzero(score == score.max())
        p = best[np.argmin(load[best])]
        parts[v] = p
        load[p] += 1
    return parts


def random_vertex_cut(edges: np.ndarray, n: int, K: int, seed: int = 0) -> np.ndarray:
    """Vertex-cut: each edge to a uniformly random part (PowerGraph's baseline). Returns edge_parts (E,)."""
    e = check_edges(edges, n)
    return np.random.default_rng(seed).integers(0, _check_k(K), size=len(e)).astype(np.int64)


def hdrf_vertex_cut(edges: np.ndarray, n: int, K: int, lam: float = 1.0, eps: float = 1.0) -> np.ndarray:
    """High-Degree Replicated First streaming vertex-cut (Petroni et al., CIKM 2015).

    Edge (u, v) goes to argmax_p C_rep + C_bal, with partial degrees du, dv seen so far,
    theta_u = du / (du + dv), C_rep = g(u, p) + g(v, p), g(u, p) = 1 + (1 - theta_u) if p already holds
    a copy of u else 0, and C_bal = lam (max - |p|) / (eps + max - min) over edge loads. The
    lower-degree endpoint keeps its edges together; hubs get replicated, which is cheap for them.
    """
    e = check_edges(edges, n)
    K = _check_k(K)
    held = np.zeros((n, K), dtype=bool)
    deg = np.zeros(n)
    load = np.zeros(K)
    out = np.empty(len(e), dtype=np.int64)
    for i, (u, v) in enumerate(e):
        deg[u] += 1
        deg[v] += 1
        tu = deg[u] / (deg[u] + deg[v])
        rep = held[u] * (2.0 - tu) + held[v] * (1.0 + tu)
        bal = lam * (load.max() - load) / (eps + load.max() - load.min())
        score = rep + bal
        p = int(np.flatnonzero(score == score.max())[0])
        out[i] = p
        held[u, p] = held[v, p] = True
        load[p] += 1
    return out


def edge_cut_metrics(edges: np.ndarray, parts: np.ndarray, K: int) -> dict[str, float]:
    """cut_fraction (edges with endpoints on two parts / E), vertex_balance (max / mean vertices per
    part), edge_balance (max / mean out-edges per part: the work of a push superstep)."""
    K = _check_k(K)
    parts = np.asarray(parts, dtype=np.int64)
    e = check_edges(edges, len(parts))
    if parts.size and (parts.min() < 0 or parts.max() >= K):
        raise ValueError(f"parts must hold part ids 0..{K - 1}, got {parts.min()}..{parts.max()}")
    cut = int(np.count_nonzero(parts[e[:, 0]] != parts[e[:, 1]])) if len(e) else 0
    vload = np.bincount(parts, minlength=K)
    eload = np.bincount(parts[e[:, 0]], minlength=K) if len(e) else np.zeros(K)
    return {"cut_edges": cut, "cut_fraction": cut / max(1, len(e)),
            "vertex_balance": float(vload.max() / max(1e-300, vload.mean())),
            "edge_balance": float(eload.max() / eload.mean()) if eload.sum() else 1.0}


def vertex_replicas(edges: np.ndarray, edge_parts: np.ndarray, n: int, K: int) -> np.ndarray:
    """Boolean (n, K): replicas[v, p] is True when part p holds an edge of v."""
    e = check_edges(edges, n)
    ep = np.asarray(edge_parts, dtype=np.int64)
    if ep.shape != (len(e),):
        raise ValueError(f"edge_parts must give one part per edge: shape ({len(e)},), got {ep.shape}")
    held = np.zeros((n, _check_k(K)), dtype=bool)
    held[e[:, 0], ep] = True
    held[e[:, 1], ep] = True
    return held


def vertex_cut_metrics(edges: np.ndarray, edge_parts: np.ndarray, n: int, K: int) -> dict[str, float]:
    """replication_factor (mean copies over vertices with at least one edge), edge_balance (max / mean
    edges per part: the work of a gather), and the number of mirrors (copies beyond the first)."""
    held = vertex_replicas(edges, edge_parts, n, K)
    copies = held.sum(axis=1)
    present = copies > 0
    eload = np.bincount(np.asarray(edge_parts, dtype=np.int64), minlength=K)
    return {"replication_factor": float(copies[present].mean()) if present.any() else 1.0,
            "mirrors": int((copies[present] - 1).sum()),
            "edge_balance": float(eload.max() / eload.mean()) if eload.sum() else 1.0}
