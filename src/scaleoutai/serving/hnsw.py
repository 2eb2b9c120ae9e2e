"""HNSW, hierarchical navigable small-world graphs (Malkov and Yashunin, TPAMI 2018; Chapter 25).

Every vector gets a level l = floor(-ln(U) mL) with U uniform in (0, 1] and mL = 1/ln(M), so a level
holds about 1/M of the level below it. Each level is a proximity graph: a node links to at most M
neighbours (2M on level 0). A search descends greedily from the single entry point on the top level
to level 1 (ef = 1), then runs a best-first search on level 0 that keeps the ``ef`` nearest nodes seen
and stops when the nearest unexpanded candidate is farther than the farthest of them. Insertion is a
search with ``ef_construction`` on each of the node's levels, then the **neighbour-selection
heuristic** (the paper's Algorithm 4): take candidates nearest first and keep one only if it is
nearer to the new node than to every neighbour already kept, which spreads the links over
directions instead of spending them on one cluster. A neighbour whose list overflows is pruned with
the same heuristic. Given the seed and the insertion order, the graph is deterministic.

Metric: squared L2; results follow the order rule of ``vectors`` (distance, then id), padded to k.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from .vectors import _check, _pad


@dataclass
class HNSW:
    """The graph: ``links[node][level]`` is a list of neighbour ids; ``levels[node]`` its top level."""

    data: np.ndarray
    M: int
    ef_construction: int
    seed: int
    levels: list[int] = field(default_factory=list)
    links: list[list[list[int]]] = field(default_factory=list)
    entry: int = -1
    max_level: int = -1

    def _dist(self, q: np.ndarray, ids: list[int]) -> list[float]:
        diff = self.data[ids] - q
        return np.einsum("ij,ij->i", diff, diff).tolist()

    def search_layer(self, q: np.ndarray, entry: list[tuple[float, int]], ef: int, level: int) -> list[tuple[float, int]]:
        """Best-first search of one level from ``entry`` [(distance, id)]: the ef nearest found, sorted."""
        visited = {i for _, i in entry}
        cand = list(entry)
        heapq.heapify(cand)
        best = [(-d, i) for d, i in entry]  # a max-heap of the ef nearest by negated distance
        heapq.heapify(best)
        while len(best) > ef:
            heapq.heappop(best)
        while cand:
            d, c = heapq.heappop(cand)
            if d > -best[0][0]:
                break  # the nearest unexpanded node is farther than every kept one
            nbrs = [n for n in self.links[c][level] if n not in visited]
            if not nbrs:
                continue
            visited.update(nbrs)
            for n, dn in zip(nbrs, self._dist(q, nbrs)):
                if len(best) < ef or dn < -best[0][0]:
                    heapq.heappush(cand, (dn, n))
                    heapq.heappush(best, (-dn, n))
                    if len(best) > ef:
                        heapq.heappop(best)
        return sorted((-d, i) for d, i in best)

    def select_neighbors(self, candidates: list[tuple[float, int]], m: int) -> list[int]:
        """Algorithm 4: keep candidate e (nearest first) unless some kept r is nearer to e than the query is."""
        kept: list[int] = []
        for d, e in candidates:
            if len(kept) >= m:
                break
            if not kept or min(self._dist(self.data[e], kept)) >= d:
                kept.append(e)
        return kept

    def _connect(self, node: int, level: int, nbrs: list[int]) -> None:
        self.links[node][level] = list(nbrs)
        cap = 2 * self.M if level == 0 else self.M
        for e in nbrs:
            own = self.links[e][level]
            own.append(node)
            if len(own) > cap:  # prune the overflowing list with the same heuristic, seen from e
                ds = self._dist(self.data[e], own)
                self.links[e][level] = self.select_neighbors(sorted(zip(ds, own)), cap)

    def insert(self, node: int, level: int) -> None:
        q = self.data[node]
        self.levels.append(level)
        self.links.append([[] for _ in range(level + 1)])
        if self.entry < 0:
            self.entry, self.max_level = node, level
            return
        ep = [(self._dist(q, [self.entry])[0], self.entry)]
        for lc in range(self.max_level, level, -1):
            ep = self.search_layer(q, ep, 1, lc)[:1]
        for lc in range(min(level, self.max_level), -1, -1):
            W = self.search_layer(q, ep, self.ef_construction, lc)
            # a new node keeps up to 2M links on level 0, as FAISS does (the paper's Algorithm 1 keeps M)
            self._connect(node, lc, self.select_neighbors(W, 2 * self.M if lc == 0 else self.M))
            ep = W
        if level > self.max_level:
            self.entry, self.max_level = node, level


def hnsw_levels(n: int, M: int, seed: int = 0) -> np.ndarray:
    """l = floor(-ln(U) / ln(M)), U uniform in (0, 1], from ``seed``: the level of each of n nodes."""
    u = 1.0 - np.random.default_rng(seed).random(n)
    return np.floor(-np.log(u) / np.log(M)).astype(np.int64)


def hnsw_build(base: np.ndarray, M: int = 16, ef_construction: int = 40, seed: int = 0) -> HNSW:
    """Insert the base vectors in order (ids 0..n-1) into a new graph."""
    base = np.ascontiguousarray(base)
    if base.ndim != 2 or len(base) == 0:
        raise ValueError(f"hnsw_build needs a non-empty (n, d) base, got shape {base.shape}")
    if M < 2 or ef_construction < 1:
        raise ValueError(f"HNSW needs M >= 2 and ef_construction >= 1, got M={M}, ef_construction={ef_construction}")
    if not np.all(np.isfinite(base)):
        raise ValueError("the base must be finite: drop or fix the NaN/inf vectors first")
    g = HNSW(base, M, ef_construction, seed)
    for node, level in enumerate(hnsw_levels(len(base), M, seed).tolist()):
        g.insert(node, level)
    return g


def hnsw_add(g: HNSW, vectors: np.ndarray) -> None:
    """Insert more vectors (ids continue from the current size): HNSW grows without a rebuild."""
    start = len(g.data)
    g.data = np.ascontiguousarray(np.concatenate([g.data, np.asarray(vectors, dtype=g.data.dtype)]))
    levels = hnsw_levels(len(g.data), g.M, g.seed)[start:]  # the same draw a full build would make
    for node, level in zip(range(start, len(g.data)), levels.tolist()):
        g.insert(node, level)


def hnsw_search(g: HNSW, queries: np.ndarray, k: int, ef: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Greedy descent to level 1, then a search of level 0 with max(ef, k): (D, I) by the order rule."""
    q, _, k = _check(queries, g.data[:1], k, "l2")
    D, I = _pad(len(q), k, np.result_type(q, g.data), "l2")
    for r in range(len(q)):
        ep = [(g._dist(q[r], [g.entry])[0], g.entry)]
        for lc in range(g.max_level, 0, -1):
            ep = g.search_layer(q[r], ep, 1, lc)[:1]
        W = g.search_layer(q[r], ep, max(ef, k), 0)[:k]
        D[r, :len(W)] = [d for d, _ in W]
        I[r, :len(W)] = [i for _, i in W]
    return D, I
