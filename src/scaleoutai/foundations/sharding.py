"""Chapter 1: the exact gradient decomposition behind data parallelism.

For a loss averaged over N examples split into K shards of sizes N_k (sum_k N_k = N),

    L(w) = (1/N) sum_i l(w; x_i, y_i) = sum_k (N_k/N) L_k(w),   so   grad L = sum_k (N_k/N) grad L_k,

where L_k is the average loss on shard k. Each worker sees only its shard, yet the weighted sum of
their gradients is the single-machine gradient: splitting the work is exact, not an approximation.
Shards follow ``collectives.block_bounds`` (``np.array_split``'s cut): sizes differ by at most one, and shards are empty when K > N.

    linear_mse_gradient        the single-machine reference, (2/N) X^T (X w - y)
    naive_sharded_gradient     gather the weighted gradients at rank 0, sum there, broadcast back
    sharded_gradient           the same sum with a ring all-reduce (Chapter 4): no rank is a hotspot
"""
from __future__ import annotations


import numpy as np

from ..collectives import block_range, naive_allreduce, ring_allreduce
from ..cluster import Comm

__all__ = ["shard", "linear_mse_gradient", "local_weighted_gradient", "sharded_gradient",
           "naive_sharded_gradient"]


def shard(x: np.ndarray, K: int, rank: int) -> np.ndarray:
    """Rank ``rank``'s shard of ``x`` along axis 0 (a view): ``np.array_split(x, K)[rank]``."""
    start, stop = block_range(len(x), K, rank)
    return x[start:stop]


def _check(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
    if X.ndim != 2 or y.ndim != 1 or w.ndim != 1:
        raise ValueError(f"expected X of shape (N, d), y of shape (N,), w of shape (d,); "
                         f"got {X.shape}, {y.shape}, {w.shape}")
    if X.shape[0] != y.shape[0] or X.shape[1] != w.shape[0]:
        raise ValueError(f"shapes do not line up: X {X.shape}, y {y.shape}, w {w.shape} "
                         f"(need X rows == len(y) and X columns == len(w))")


def linear_mse_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Gradient of L(w) = (1/N) ||X w - y||^2: (2/N) X^T (X w - y). An empty X has gradient 0."""
    _check(X, y, w)
    N = X.shape[0]
    dtype = np.result_type(X, y, w)
    if N == 0:
        return np.zeros(X.shape[1], dtype=dtype)
    return ((2.0 / N) * (X.T @ (X @ w - y))).astype(dtype, copy=False)


def local_weighted_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray, K: int, rank: int) -> np.ndarray:
    """(N_k/N) grad L_k(w) for shard ``rank`` of K: the term this worker contributes to the sum."""
    _check(X, y, w)
    Xk, yk = shard(X, K, rank), shard(y, K, rank)
    N = X.shape[0]
    g = linear_mse_gradient(Xk, yk, w)
    return g * (Xk.shape[0] / N) if N else g


def sharded_gradient(comm: Comm, X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Every rank returns grad L(w) = sum_k (N_k/N) grad L_k(w), summed by ring all-reduce.

    Each rank reads only its own shard of X and y. Per rank the ring moves 2(K-1)/K of the d-vector.
    """
    g = local_weighted_gradient(X, y, w, comm.size, comm.rank)
    return ring_allreduce(comm, g, "sum")


def naive_sharded_gradient(comm: Comm, X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The same sum, gathered at rank 0 (which adds the K terms) and sent back to every rank.

    Rank 0 receives and sends (K-1) d-vectors; a ring rank sends 2(K-1)/K d, so rank 0's link carries
    K/2 times the ring's traffic per rank (Chapter 1, Exercise 4).
    """
    g = local_weighted_gradient(X, y, w, comm.size, comm.rank)
    return naive_allreduce(comm, g, "sum")
