"""Chapter 13, Sections 3-4: Pregel-style supersteps on the communicator: PageRank and connected components.

Edge-cut (``pagerank``, ``connected_components``): rank r owns the vertices with ``parts[v] == r`` and
their out-edges; a superstep computes a message per edge, combines the messages for one destination
vertex on the sending rank, and ships them in one ``all_to_all`` batch per destination rank.
Vertex-cut (``pagerank_vertex_cut``, in ``graph_gas``) spreads the edges instead. Every rank receives
the whole edge list and keeps its own share: the loading step a real system does with a shuffle.

PageRank rule (networkx's default): x_{t+1}(v) = (1 - d)/n + d (sum_{u->v} x_t(u)/outdeg(u) + D_t/n),
x_0 = 1/n, D_t = mass on dangling vertices (outdeg 0), spread uniformly; ``dangling="drop"`` leaks it.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, recursive_doubling_allreduce
from .graph_partition import check_edges, range_partition

DANGLING = ("uniform", "drop")


def _check_pr(n: int, damping: float, iters: int | None, tol: float | None, dangling: str) -> None:
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if iters is None and tol is None:
        raise ValueError("give iters (a fixed number of supersteps) or tol (stop when the L1 change < tol)")
    if iters is not None and (isinstance(iters, bool) or int(iters) != iters or iters < 0):
        raise ValueError(f"iters must be a count >= 0, got {iters!r}")
    if dangling not in DANGLING:
        raise ValueError(f"dangling={dangling!r}: choose one of {DANGLING}")


def reference_pagerank(edges: np.ndarray, n: int, damping: float = 0.85, iters: int | None = None,
                       tol: float | None = None, dangling: str = "uniform", dtype: Any = np.float64,
                       max_iters: int = 1000) -> tuple[np.ndarray, list[float]]:
    """Power iteration on one machine: (x, L1 change per iteration). The definition the tests use."""
    e = check_edges(edges, n)
    _check_pr(n, damping, iters, tol, dangling)
    outdeg = np.bincount(e[:, 0], minlength=n)
    inv = np.where(outdeg > 0, 1.0 / np.maximum(outdeg, 1), 0.0).astype(dtype)
    x = np.full(n, 1.0 / n, dtype=dtype)
    residuals: list[float] = []
    for _ in range(iters if iters is not None else max_iters):
        dmass = x[outdeg == 0].sum() if dangling == "uniform" else 0.0
        y = np.bincount(e[:, 1], weights=x[e[:, 0]] * inv[e[:, 0]], minlength=n)
        new = ((1 - damping) / n + damping * (y + dmass / n)).astype(dtype)
        residuals.append(float(np.abs(new - x).sum()))
        x = new
        if tol is not None and residuals[-1] < tol:
            break
    return x, residuals


class _Routes:
    """What rank r needs to push along its out-edges, built once: the graph is static, so the vertex
    ids of a batch travel once at set-up and each superstep sends only values, in the agreed order."""

    def __init__(self, comm: Comm, e: np.ndarray, parts: np.ndarray, combine: bool):
        K, r = comm.size, comm.rank
        self.owned = np.flatnonzero(parts == r)
        self.g2l = np.full(len(parts), -1, dtype=np.int64)
        self.g2l[self.owned] = np.arange(len(self.owned))
        mine = e[parts[e[:, 0]] == r]
        self.n_edges = len(mine)
        self.src = self.g2l[mine[:, 0]]
        owner = parts[mine[:, 1]]
        here = owner == r
        self.here, self.here_dst = np.flatnonzero(here), self.g2l[mine[here, 1]]
        self.out_idx, self.slot, self.n_slots, ids = [], [], [], []
        for j in range(K):
            idx = np.flatnonzero(owner == j) if j != r else np.empty(0, dtype=np.int64)
            dst = mine[idx, 1]
            if combine:  # one value per distinct destination vertex: Pregel's combiner
                uniq, slot = np.unique(dst, return_inverse=True)
            else:  # one value per cut edge
                uniq, slot = dst, np.arange(len(dst))
            self.out_idx.append(idx)
            self.slot.append(slot)
            self.n_slots.append(len(uniq))
            ids.append(uniq)
        self.in_dst = [self.g2l[got] for got in all_to_all(comm, ids)]

    def push(self, comm: Comm, per_edge: np.ndarray) -> tuple[np.ndarray, int]:
        """Sum of the messages arriving at each owned vertex; returns (sums, values sent to others)."""
        acc = np.zeros(len(self.owned))  # float64 accumulation whatever the payload dtype
        acc += np.bincount(self.here_dst, weights=per_edge[self.here], minlength=len(self.owned))
        blocks = [np.bincount(s, weights=per_edge[i], minlength=m).astype(per_edge.dtype)
                  for i, s, m in zip(self.out_idx, self.slot, self.n_slots)]
        for dst, got in zip(self.in_dst, all_to_all(comm, blocks)):
            acc += np.bincount(dst, weights=got, minlength=len(self.owned))
        return acc, sum(len(b) for j, b in enumerate(blocks) if j != comm.rank)


def _checkpoint_path(folder: str, step: int, rank: int, K: int) -> str:
    return os.path.join(folder, f"pagerank-K{K}-step{step:06d}-rank{rank}.npy")


def latest_checkpoint(folder: str | None, K: int) -> int:
    """The last superstep every one of the K ranks saved in ``folder`` (0: none)."""
    if not folder or not os.path.isdir(folder):
        return 0
    steps = [int(f.split("-step")[1][:6]) for f in os.listdir(folder) if f.startswith(f"pagerank-K{K}-") and f.endswith(".npy")]
    done = [s for s in set(steps) if all(os.path.exists(_checkpoint_path(folder, s, q, K)) for q in range(K))]
    return max(done, default=0)


def pagerank(comm: Comm, edges: np.ndarray, n: int, damping: float = 0.85, iters: int | None = None,
             tol: float | None = None, parts: np.ndarray | None = None, combine: bool = True,
             dangling: str = "uniform", dtype: Any = np.float64, seconds_per_edge: float = 0.0,
             checkpoint: str | None = None, every: int = 5, max_iters: int = 1000
             ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """PageRank by supersteps on this rank: returns (owned vertex ids, their ranks, info).

    Each superstep: one ``all_to_all`` of combined messages, one all-reduce of [L1 change, dangling
    mass]. info lists per superstep the residual, the values and bytes this rank sent in the exchange.
    ``checkpoint``: a folder; every ``every`` supersteps each rank saves its ranks atomically, and a
    run that finds a complete checkpoint there resumes from it (the result equals the no-crash run).
    """
    e = check_edges(edges, n)
    _check_pr(n, damping, iters, tol, dangling)
    parts = range_partition(n, comm.size) if parts is None else np.asarray(parts, dtype=np.int64)
    if parts.shape != (n,) or (n and (parts.min() < 0 or parts.max() >= comm.size)):
        raise ValueError(f"parts must give each of the n={n} vertices a rank in 0..{comm.size - 1}")
    routes = _Routes(comm, e, parts, combine)
    outdeg = np.bincount(routes.src, minlength=len(routes.owned))  # all out-edges of v live with v
    inv = np.where(outdeg > 0, 1.0 / np.maximum(outdeg, 1), 0.0).astype(dtype)
    sink = outdeg == 0
    start = latest_checkpoint(checkpoint, comm.size)
    x = (np.load(_checkpoint_path(checkpoint, start, comm.rank, comm.size)) if start  # type: ignore[arg-type]
         else np.full(len(routes.owned), 1.0 / n, dtype=dtype))
    dmass = recursive_doubling_allreduce(comm, np.array([x[sink].sum()], dtype=np.float64))[0]
    info: dict[str, Any] = {"start": start, "residuals": [], "values_sent": [], "bytes_sent": [],
                            "local_edges": routes.n_edges}
    step = start
    while step < (iters if iters is not None else max_iters):
        if seconds_per_edge:  # simulated work only: real processes do the real work
            comm.compute(routes.n_edges * seconds_per_edge)
        before = comm.stats.bytes_sent
        y, sent = routes.push(comm, x[routes.src] * inv[routes.src])
        info["bytes_sent"].append(comm.stats.bytes_sent - before)
        info["values_sent"].append(sent)
        spread = dmass / n if dangling == "uniform" else 0.0
        new = ((1 - damping) / n + damping * (y + spread)).astype(dtype)
        res, dmass = recursive_doubling_allreduce(comm, np.array([np.abs(new - x).sum(), new[sink].sum()]))
        x, step = new, step + 1
        info["residuals"].append(float(res))
        if checkpoint and step % every == 0:
            os.makedirs(checkpoint, exist_ok=True)
            path = _checkpoint_path(checkpoint, step, comm.rank, comm.size)
            np.save(path + ".tmp.npy", x)
            os.replace(path + ".tmp.npy", path)  # atomic: a crash never leaves half a checkpoint
        if tol is not None and res < tol:
            break
    return routes.owned, x, info


def assemble(values: list[tuple[np.ndarray, np.ndarray, Any]], n: int) -> np.ndarray:
    """The global vector from every rank's (owned ids, values, ...)."""
    out = np.zeros(n, dtype=np.result_type(*[v[1] for v in values]))
    for ids, x, *_ in values:
        out[ids] = x
    return out


def reference_components(edges: np.ndarray, n: int) -> np.ndarray:
    """Weakly connected components by union-find: label = smallest vertex id in the component."""
    e = check_edges(edges, n)
    root = np.arange(n)

    def find(v: int) -> int:
        while root[v] != v:
            root[v] = root[root[v]]
            v = root[v]
        return v

    for u, v in e:
        a, b = find(u), find(v)
        if a != b:
            root[max(a, b)] = min(a, b)  # the smaller id stays root: labels are component minima
    return np.array([find(v) for v in range(n)], dtype=np.int64)


def connected_components(comm: Comm, edges: np.ndarray, n: int, parts: np.ndarray | None = None,
                         max_supersteps: int | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Min-label propagation with vote-to-halt: (owned ids, labels, info) on this rank.

    Edges are followed both ways (weak connectivity). A vertex whose label fell sends it to its
    neighbours, then halts; messages are (vertex id, label) int64 pairs, min-combined per destination.
    The run stops when a superstep sends no message anywhere (one all-reduce of the count).
    """
    e = check_edges(edges, n)
    parts = range_partition(n, comm.size) if parts is None else np.asarray(parts, dtype=np.int64)
    if parts.shape != (n,):
        raise ValueError(f"parts must give each of the n={n} vertices a rank, shape ({n},)")
    K, r = comm.size, comm.rank
    both = np.concatenate([e, e[:, ::-1]])
    mine = both[parts[both[:, 0]] == r]
    owned = np.flatnonzero(parts == r)
    g2l = np.full(n, -1, dtype=np.int64)
    g2l[owned] = np.arange(len(owned))
    src_l, owner = g2l[mine[:, 0]], parts[mine[:, 1]]
    label = owned.copy()
    active = np.ones(len(owned), dtype=bool)
    info: dict[str, Any] = {"messages": [], "bytes_sent": [], "active": []}
    limit = max_supersteps if max_supersteps is not None else n + 1
    for _ in range(limit):
        go = active[src_l]
        info["active"].append(int(active.sum()))
        blocks = []
        for j in range(K):
            sel = go & (owner == j)
            dst, lab = mine[sel, 1], label[src_l[sel]]
            order = np.lexsort((lab, dst))
            dst, lab = dst[order], lab[order]
            first = np.r_[True, dst[1:] != dst[:-1]] if len(dst) else np.zeros(0, dtype=bool)
            blocks.append(np.stack([dst[first], lab[first]], axis=1))  # smallest label per destination
        before = comm.stats.bytes_sent
        got = np.concatenate(all_to_all(comm, blocks))
        info["bytes_sent"].append(comm.stats.bytes_sent - before)
        sent = sum(len(b) for b in blocks)
        info["messages"].append(sent - len(blocks[r]))  # the ones that leave this rank
        best = label.copy()
        np.minimum.at(best, g2l[got[:, 0]], got[:, 1])
        active = best < label  # the rest vote to halt; a smaller label wakes a vertex up
        label = best
        if recursive_doubling_allreduce(comm, np.array([sent], dtype=np.int64))[0] == 0:
            break
    return owned, label, info
