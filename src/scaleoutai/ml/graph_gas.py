"""Chapter 13, Section 6: PageRank on a vertex-cut, PowerGraph's gather-apply-scatter (GAS).

Rank r holds the edges with ``edge_parts[e] == r`` and a copy of every endpoint of them. One copy of
each vertex is its *master*; the others are *mirrors*. A superstep: every rank sums the messages of its
own edges per destination (gather, partial), mirrors send the partial sums to the master, the master
applies the PageRank rule of ``graph.reference_pagerank``, and sends the new value back to every mirror
(scatter). Two values cross the network per mirror per superstep, whatever the degree: a hub's edges
spread over all ranks instead of loading its owner, which is what the edge-cut cannot do.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, recursive_doubling_allreduce
from .graph import _check_pr
from .graph_partition import check_edges, vertex_replicas


def masters(held: np.ndarray) -> np.ndarray:
    """Master rank of each vertex: its (v mod copies)-th copy, spreading masters over the ranks that
    hold the vertex; a vertex without edges is mastered by rank v mod K."""
    n, K = held.shape
    copies = held.sum(axis=1)
    v = np.arange(n)
    k = np.where(copies > 0, v % np.maximum(copies, 1), 0)
    chosen = np.argmax(np.cumsum(held, axis=1) > k[:, None], axis=1)
    return np.where(copies > 0, chosen, v % K).astype(np.int64)


class _Replicas:
    """Static routes between copies: both ends compute the list L[r][j] (vertices held by r whose
    master is j) from the global partition, so no ids travel and each list is in sorted id order."""

    def __init__(self, comm: Comm, e: np.ndarray, edge_parts: np.ndarray, n: int):
        K, r = comm.size, comm.rank
        held = vertex_replicas(e, edge_parts, n, K)
        self.master = masters(held)
        self.mastered = np.flatnonzero(self.master == r)
        local = np.union1d(np.flatnonzero(held[:, r]), self.mastered)
        self.g2l = np.full(n, -1, dtype=np.int64)
        self.g2l[local] = np.arange(len(local))
        self.size = len(local)
        mine = e[edge_parts == r]
        self.n_edges = len(mine)
        self.src, self.dst = self.g2l[mine[:, 0]], self.g2l[mine[:, 1]]
        self.to = [self.g2l[np.flatnonzero(held[:, r] & (self.master == j))] if j != r else np.empty(0, np.int64)
                   for j in range(K)]  # my mirrors of j's masters
        self.back = [self.g2l[np.flatnonzero(held[:, j] & (self.master == r))] if j != r else np.empty(0, np.int64)
                     for j in range(K)]  # j's mirrors of my masters

    def gather(self, comm: Comm, partial: np.ndarray) -> np.ndarray:
        """Partial sums of all copies added up at the master (mirror positions keep their own)."""
        total = partial.copy()
        for idx, got in zip(self.back, all_to_all(comm, [partial[idx] for idx in self.to])):
            np.add.at(total, idx, got)
        return total

    def scatter(self, comm: Comm, values: np.ndarray) -> np.ndarray:
        """The master's value copied to every mirror."""
        out = values.copy()
        for idx, got in zip(self.to, all_to_all(comm, [values[idx] for idx in self.back])):
            out[idx] = got
        return out


def pagerank_vertex_cut(comm: Comm, edges: np.ndarray, n: int, edge_parts: np.ndarray, damping: float = 0.85,
                        iters: int | None = None, tol: float | None = None, dangling: str = "uniform",
                        dtype: Any = np.float64, seconds_per_edge: float = 0.0, max_iters: int = 1000
                        ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """GAS PageRank on this rank: (mastered vertex ids, their ranks, info with per-superstep
    residuals and bytes sent). Same rule and result as ``graph.pagerank``."""
    e = check_edges(edges, n)
    _check_pr(n, damping, iters, tol, dangling)
    edge_parts = np.asarray(edge_parts, dtype=np.int64)
    if edge_parts.shape != (len(e),) or (len(e) and (edge_parts.min() < 0 or edge_parts.max() >= comm.size)):
        raise ValueError(f"edge_parts must give each of the {len(e)} edges a rank in 0..{comm.size - 1}")
    rep = _Replicas(comm, e, edge_parts, n)
    outdeg = rep.scatter(comm, rep.gather(comm, np.bincount(rep.src, minlength=rep.size).astype(np.float64)))
    inv = np.where(outdeg > 0, 1.0 / np.maximum(outdeg, 1), 0.0).astype(dtype)
    mine = rep.g2l[rep.mastered]
    sink = mine[outdeg[mine] == 0]
    x = np.full(rep.size, 1.0 / n, dtype=dtype)
    dmass = recursive_doubling_allreduce(comm, np.array([x[sink].sum()], dtype=np.float64))[0]
    info: dict[str, Any] = {"residuals": [], "bytes_sent": [], "local_edges": rep.n_edges}
    for _ in range(iters if iters is not None else max_iters):
        if seconds_per_edge:
            comm.compute(rep.n_edges * seconds_per_edge)
        partial = np.bincount(rep.dst, weights=x[rep.src] * inv[rep.src], minlength=rep.size)
        before = comm.stats.bytes_sent
        total = rep.gather(comm, partial)
        moved = comm.stats.bytes_sent - before  # gather + scatter only, as graph.pagerank counts its exchange
        spread = dmass / n if dangling == "uniform" else 0.0
        new = x.copy()
        new[mine] = (1 - damping) / n + damping * (total[mine] + spread)
        res, dmass = recursive_doubling_allreduce(comm, np.array([np.abs(new[mine] - x[mine]).sum(),
                                                                  new[sink].sum()]))
        before = comm.stats.bytes_sent
        x = rep.scatter(comm, new)
        info["bytes_sent"].append(moved + comm.stats.bytes_sent - before)
        info["residuals"].append(float(res))
        if tol is not None and res < tol:
            break
    return rep.mastered, x[mine], info
