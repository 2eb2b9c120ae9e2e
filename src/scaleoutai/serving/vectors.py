"""Vector search: exact k-NN, IVF, product quantization and a sharded scatter-gather (Chapter 25).

Distances: ``metric="l2"`` is the squared Euclidean distance ||q - x||^2 (what FAISS's IndexFlatL2
returns), ``metric="ip"`` the inner product q.x. **Order rule** (every function here, and lab25):
best first, that is smaller squared distance (larger inner product) first, and among equal
distances the smaller id first. Rows with fewer than k candidates are padded with id -1 and distance
+inf (l2) or -inf (ip), as FAISS pads.

Each distance is computed from the pair (q, x) alone, sum_j (q_j - x_j)^2 with NumPy's summation
over the d coordinates, never through a matrix product whose rounding depends on the block shape.
That makes a shard's distances bit-identical to the whole base's, so the sharded top-k equals the
brute-force top-k exactly for any K and any ties (Section 4); the price is speed (Section 7).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..cluster import Comm
from ..collectives import block_range

METRICS = ("l2", "ip")


def _check(queries: Any, base: Any, k: Any, metric: str) -> tuple[np.ndarray, np.ndarray, int]:
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not supported: choose one of {METRICS}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    q, b = np.atleast_2d(np.asarray(queries)), np.asarray(base)
    if b.ndim == 1 and b.size == 0:
        b = b.reshape(0, q.shape[1])
    if b.ndim != 2 or q.ndim != 2 or q.shape[1] != b.shape[1]:
        raise ValueError(f"queries (nq, d) and base (n, d) must share d: got {q.shape} and {b.shape}")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(b))):
        raise ValueError("queries and base must be finite: drop or fix the NaN/inf vectors first")
    return q, b, int(k)


def distances(queries: np.ndarray, base: np.ndarray, metric: str = "l2") -> np.ndarray:
    """(nq, n) distances, each from its own pair: sum_j (q_j - x_j)^2 (l2) or sum_j q_j x_j (ip)."""
    if metric == "l2":
        diff = queries[:, None, :] - base[None, :, :]
        return np.sum(diff * diff, axis=-1)
    return np.sum(queries[:, None, :] * base[None, :, :], axis=-1)


def _keys(dist: np.ndarray, metric: str) -> np.ndarray:
    return dist if metric == "l2" else -dist  # smaller key is better for both metrics


def _pad(nq: int, k: int, dtype: Any, metric: str) -> tuple[np.ndarray, np.ndarray]:
    fill = np.inf if metric == "l2" else -np.inf
    return np.full((nq, k), fill, dtype=dtype), np.full((nq, k), -1, dtype=np.int64)


def select_topk(dist: np.ndarray, ids: np.ndarray, k: int, metric: str = "l2") -> tuple[np.ndarray, np.ndarray]:
    """The k best of one row of candidates by the order rule: (distance, then id), padded to k."""
    D, I = _pad(1, k, dist.dtype, metric)
    if dist.size == 0:
        return D[0], I[0]
    key = _keys(dist, metric)
    if dist.size > k:  # keep every candidate tied with the k-th key: the id decides among them
        cut = np.partition(key, k - 1)[k - 1]
        keep = key <= cut
        key, dist, ids = key[keep], dist[keep], ids[keep]
    order = np.lexsort((ids, key))[:k]
    D[0, :order.size], I[0, :order.size] = dist[order], ids[order]
    return D[0], I[0]


def naive_knn(queries: np.ndarray, base: np.ndarray, k: int, metric: str = "l2") -> tuple[np.ndarray, np.ndarray]:
    """The definition, one query and one base vector at a time: a sorted list of (key, id) pairs."""
    q, b, k = _check(queries, base, k, metric)
    D, I = _pad(len(q), k, np.result_type(q, b), metric)
    for i in range(len(q)):
        pairs = []
        for j in range(len(b)):
            d = distances(q[i:i + 1], b[j:j + 1], metric)[0, 0]
            pairs.append((float(_keys(d, metric)), j, d))
        for c, (_, j, d) in enumerate(sorted(pairs)[:k]):
            D[i, c], I[i, c] = d, j
    return D, I


def knn(queries: np.ndarray, base: np.ndarray, k: int, metric: str = "l2",
        block: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
    """Exact k-NN (the reference): (D, I) of shape (nq, k) by the order rule, in blocks of queries
    whose (rows x n x d) temporaries hold about ``block`` numbers."""
    q, b, k = _check(queries, base, k, metric)
    D, I = _pad(len(q), k, np.result_type(q, b), metric)
    ids = np.arange(len(b), dtype=np.int64)
    rows = max(1, block // max(1, b.size))
    for s in range(0, len(q), rows):
        dist = distances(q[s:s + rows], b, metric)
        for r in range(dist.shape[0]):
            D[s + r], I[s + r] = select_topk(dist[r], ids, k, metric)
    return D, I


def merge_topk(parts: list[tuple[np.ndarray, np.ndarray]], k: int, metric: str = "l2") -> tuple[np.ndarray, np.ndarray]:
    """Merge per-shard (D, I) lists of the same queries into the global top-k by the order rule;
    padding (id -1) never wins over a real candidate."""
    D = np.concatenate([p[0] for p in parts], axis=1)
    I = np.concatenate([p[1] for p in parts], axis=1)
    outD, outI = _pad(D.shape[0], k, D.dtype, metric)
    for r in range(D.shape[0]):
        real = I[r] >= 0
        outD[r], outI[r] = select_topk(D[r][real], I[r][real], k, metric)
    return outD, outI


def local_topk(queries: np.ndarray, shard: np.ndarray, offset: int, k: int,
               metric: str = "l2") -> tuple[np.ndarray, np.ndarray]:
    """One shard's top-min(k, n_local) with global ids (local id + offset): what it sends."""
    q, b, k = _check(queries, shard, k, metric)
    m = min(k, len(b))
    D, I = knn(q, b, m, metric) if m else _pad(len(q), 0, np.result_type(q, b), metric)
    return D, (I + offset).astype(np.int64)


def search_shard(comm: Comm, queries: np.ndarray, shard: np.ndarray, offset: int, k: int, metric: str = "l2",
                 merge: str = "root", seconds_per_vector: float = 0.0) -> tuple[np.ndarray, np.ndarray] | None:
    """Scatter-gather, per rank: the local top-k (at most k entries per query, so a shard sends at most
    nq * k * (itemsize + 8) bytes), then a merge at rank 0, either ``"root"`` (every rank sends to 0,
    a K-way merge there) or ``"tree"`` (a binomial tree, a 2-way merge per level). Rank 0 returns
    the global (D, I); the other ranks return None. ``seconds_per_vector`` charges the scan's
    simulated compute (Section 7)."""
    if merge not in ("root", "tree"):
        raise ValueError(f"merge={merge!r} is not a merge: choose 'root' or 'tree'")
    D, I = local_topk(queries, shard, offset, k, metric)
    if seconds_per_vector:
        comm.compute(seconds_per_vector * len(shard) * len(np.atleast_2d(queries)))
    if merge == "root":
        if comm.rank:
            comm.send(D, 0)
            comm.send(I, 0)
            return None
        parts = [(D, I)] + [(comm.recv(src), comm.recv(src)) for src in range(1, comm.size)]
        return merge_topk(parts, k, metric)
    mask = 1
    while mask < comm.size:
        if comm.rank & mask:
            comm.send(D, comm.rank - mask)
            comm.send(I, comm.rank - mask)
            return None
        if comm.rank + mask < comm.size:
            src = comm.rank + mask
            D, I = merge_topk([(D, I), (comm.recv(src), comm.recv(src))], k, metric)
        mask <<= 1
    return merge_topk([(D, I)], k, metric)  # K = 1, and pads a short answer to k columns


def sharded_knn_worker(comm: Comm, queries: np.ndarray, base: np.ndarray, k: int, metric: str = "l2",
                       merge: str = "root", seconds_per_vector: float = 0.0) -> tuple[np.ndarray, np.ndarray] | None:
    """Rank r holds the r-th block of the base (``block_range``, uneven or empty) and searches it."""
    lo, hi = block_range(len(base), comm.size, comm.rank)
    return search_shard(comm, queries, base[lo:hi], lo, k, metric, merge, seconds_per_vector)


def run_sharded_knn(queries: np.ndarray, base: np.ndarray, k: int, K: int, metric: str = "l2", merge: str = "root",
                    backend: str = "sim", timeout: float = 120.0, **run_kwargs: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """Driver: split the base over K ranks, search, merge; returns (D, I, the cluster.run result)."""
    from .. import cluster

    res = cluster.run(sharded_knn_worker, K, backend=backend, args=(queries, base, k, metric, merge),
                      timeout=timeout, **run_kwargs)
    D, I = res.values[0]
    return D, I, res


def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int | None = None) -> float:
    """recall@k = |found[:, :k] & truth[:, :k]| / (nq k), averaged over queries (ids -1 never count)."""
    found, truth = np.atleast_2d(found), np.atleast_2d(truth)
    k = truth.shape[1] if k is None else k
    if found.shape[0] != truth.shape[0] or k > truth.shape[1]:
        raise ValueError(f"found {found.shape} and truth {truth.shape} must have the same queries and k <= truth's k")
    hits = sum(len(np.intersect1d(f[:k][f[:k] >= 0], t[:k])) for f, t in zip(found, truth))
    return hits / (truth.shape[0] * k)


def queries_per_second(search: Callable[[np.ndarray], Any], queries: np.ndarray, repeats: int = 1) -> tuple[float, Any]:
    """Best-of-``repeats`` throughput of ``search(queries)`` in queries/s, and its last answer."""
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = search(queries)
        best = min(best, time.perf_counter() - t0)
    return len(queries) / best, out

