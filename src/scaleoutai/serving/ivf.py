"""Approximate search by partitioning and by compression: IVF and product quantization (Chapter 25).

- ``kmeans``: Lloyd's algorithm from a seeded choice of starting points (Chapter 12), an empty
  cluster re-seeded with the point farthest from its centroid.
- IVF (inverted file): k-means with ``nlist`` centroids splits the base into lists; a query scans the
  ``nprobe`` lists whose centroids are nearest, about n * nprobe / nlist vectors instead of n. With
  nprobe = nlist every vector is scanned and the answer equals ``vectors.knn`` exactly (tested).
- PQ (product quantization, Jegou, Douze and Schmid 2011): split d into m sub-vectors, k-means each
  with 2^nbits centroids, store m one-byte codes per vector (m bytes instead of 4d). Search by
  asymmetric distance computation: the query stays exact, a table T[j, c] = ||q_j - C_j[c]||^2 is
  built once per query and each code's distance is sum_j T[j, code_j], m lookups.

Metric: squared L2 (the order rule of ``vectors``: smaller distance, then smaller id).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .vectors import _check, distances, select_topk


def _assign(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Nearest centroid of each row (smallest index on ties), via ||x||^2 - 2 x.c + ||c||^2: training
    tolerates the matrix product's rounding, search does not use this."""
    x64, c64 = x.astype(np.float64), centroids.astype(np.float64)
    d = (x64 * x64).sum(1)[:, None] - 2.0 * x64 @ c64.T + (c64 * c64).sum(1)[None, :]
    return np.argmin(d, axis=1)


def kmeans(x: np.ndarray, n_clusters: int, iters: int = 20, seed: int = 0) -> np.ndarray:
    """Lloyd's k-means: ``n_clusters`` centroids (same dtype as x), deterministic given ``seed``."""
    x = np.asarray(x)
    if x.ndim != 2 or not 1 <= n_clusters <= len(x):
        raise ValueError(f"kmeans needs 2-D data with at least n_clusters={n_clusters} rows, got shape {x.shape}")
    rng = np.random.default_rng(seed)
    C = x[np.sort(rng.choice(len(x), n_clusters, replace=False))].astype(np.float64)
    x64 = x.astype(np.float64)
    for _ in range(iters):
        a = _assign(x64, C)
        counts = np.bincount(a, minlength=n_clusters)
        sums = np.zeros_like(C)
        np.add.at(sums, a, x64)
        full = counts > 0
        C[full] = sums[full] / counts[full, None]
        if not full.all():  # re-seed empty clusters with the worst-served points
            err = ((x64 - C[a]) ** 2).sum(1)
            C[~full] = x64[np.argsort(-err, kind="stable")[: int((~full).sum())]]
    return C.astype(x.dtype)


@dataclass
class IVFIndex:
    """Centroids (nlist, d) and, per list, the ids and vectors it holds (stored contiguously, as FAISS does)."""

    centroids: np.ndarray
    list_ids: list[np.ndarray]
    list_vectors: list[np.ndarray]

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    def list_sizes(self) -> np.ndarray:
        return np.array([len(i) for i in self.list_ids])


def ivf_build(base: np.ndarray, nlist: int, iters: int = 20, seed: int = 0,
              centroids: np.ndarray | None = None) -> IVFIndex:
    """Train the coarse quantizer on the base (or take ``centroids``) and file every vector in the list
    of its nearest centroid."""
    base = np.asarray(base)
    C = kmeans(base, nlist, iters, seed) if centroids is None else np.asarray(centroids, dtype=base.dtype)
    if C.ndim != 2 or C.shape[1] != base.shape[1]:
        raise ValueError(f"centroids must be (nlist, d={base.shape[1]}), got {C.shape}")
    a = _assign(base, C)
    ids = [np.flatnonzero(a == c).astype(np.int64) for c in range(len(C))]
    return IVFIndex(C, ids, [np.ascontiguousarray(base[i]) for i in ids])


def ivf_search(index: IVFIndex, queries: np.ndarray, k: int, nprobe: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Scan the ``nprobe`` nearest lists of each query; exact top-k among the vectors scanned."""
    q, _, k = _check(queries, index.centroids, k, "l2")
    if not 1 <= nprobe <= index.nlist:
        raise ValueError(f"nprobe must lie in 1..nlist={index.nlist}, got {nprobe}")
    coarse = distances(q, index.centroids)
    lists = np.arange(index.nlist, dtype=np.int64)
    D = np.empty((len(q), k), dtype=np.result_type(q, index.centroids))
    I = np.empty((len(q), k), dtype=np.int64)
    for r in range(len(q)):
        probe = select_topk(coarse[r], lists, nprobe)[1]
        ids = np.concatenate([index.list_ids[p] for p in probe])
        vecs = np.concatenate([index.list_vectors[p] for p in probe])
        D[r], I[r] = select_topk(distances(q[r:r + 1], vecs)[0], ids, k)
    return D, I


@dataclass
class ProductQuantizer:
    """m codebooks of 2^nbits centroids over d/m coordinates each: (m, 2^nbits, d/m)."""

    codebooks: np.ndarray

    @property
    def m(self) -> int:
        return self.codebooks.shape[0]

    @property
    def dsub(self) -> int:
        return self.codebooks.shape[2]

    def bytes_per_vector(self) -> int:
        return self.m * int(np.ceil(np.log2(self.codebooks.shape[1]) / 8))


def pq_train(x: np.ndarray, m: int, nbits: int = 8, iters: int = 20, seed: int = 0) -> ProductQuantizer:
    """k-means with 2^nbits centroids in each of the m sub-spaces of x."""
    x = np.asarray(x)
    if x.ndim != 2 or m < 1 or x.shape[1] % m:
        raise ValueError(f"pq_train needs d divisible by m: d={x.shape[-1]}, m={m}")
    if not 1 <= nbits <= 8 or len(x) < 2 ** nbits:
        raise ValueError(f"pq_train needs 1 <= nbits <= 8 and at least 2^nbits={2 ** nbits} training vectors, "
                         f"got nbits={nbits} and {len(x)} vectors")
    ds = x.shape[1] // m
    return ProductQuantizer(np.stack([kmeans(x[:, j * ds:(j + 1) * ds], 2 ** nbits, iters, seed + j)
                                      for j in range(m)]))


def pq_encode(pq: ProductQuantizer, x: np.ndarray) -> np.ndarray:
    """(n, m) uint8 codes: the nearest centroid of each sub-vector."""
    x, ds = np.asarray(x), pq.dsub
    if x.ndim != 2 or x.shape[1] != pq.m * ds:
        raise ValueError(f"pq_encode needs vectors of d={pq.m * ds}, got shape {x.shape}")
    return np.stack([_assign(x[:, j * ds:(j + 1) * ds], pq.codebooks[j]) for j in range(pq.m)], axis=1).astype(np.uint8)


def pq_decode(pq: ProductQuantizer, codes: np.ndarray) -> np.ndarray:
    """The reconstruction: each sub-vector replaced by its centroid."""
    return np.concatenate([pq.codebooks[j][codes[:, j]] for j in range(pq.m)], axis=1)


def pq_search(pq: ProductQuantizer, codes: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Asymmetric distance computation: per query a table T (m, 2^nbits), then sum_j T[j, codes[:, j]]."""
    q, _, k = _check(queries, pq_decode(pq, codes[:1]) if len(codes) else np.zeros((0, pq.m * pq.dsub)), k, "l2")
    ids = np.arange(len(codes), dtype=np.int64)
    ds = pq.dsub
    D = np.empty((len(q), k), dtype=pq.codebooks.dtype)
    I = np.empty((len(q), k), dtype=np.int64)
    for r in range(len(q)):
        table = np.stack([distances(q[r:r + 1, j * ds:(j + 1) * ds], pq.codebooks[j])[0] for j in range(pq.m)])
        dist = np.zeros(len(codes), dtype=table.dtype)
        for j in range(pq.m):
            dist += table[j][codes[:, j]]
        D[r], I[r] = select_topk(dist, ids, k)
    return D, I
