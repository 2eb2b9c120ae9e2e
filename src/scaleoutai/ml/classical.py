"""Chapter 12, Sections 2-4: classical models whose training data reduce to a few sums.

Linear and ridge regression need only the sufficient statistics X^T X, X^T y, sum(x), sum(y) and n:
every rank computes them on its rows and ONE all-reduce of d^2 + 2d + 2 numbers gives the whole data's,
whatever n is. Lloyd's k-means needs, per iteration, each cluster's coordinate sums and point count:
one all-reduce of k d + k + 2 numbers. Both equal the single-machine answer up to the order of the
floating-point sums (exactly, for the k-means assignments).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import broadcast, gather, ring_allreduce


def _check_xy(X: Any, y: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"{where} needs X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}: "
                         "reshape y with y.ravel() and a single feature with X[:, None]")
    if not (np.issubdtype(X.dtype, np.floating) and np.issubdtype(y.dtype, np.floating)):
        raise TypeError(f"{where} needs floating-point X and y, got {X.dtype} and {y.dtype}: cast with .astype(np.float64)")
    return X, y.astype(X.dtype, copy=False)


def _check_ridge(ridge: float) -> float:
    if not ridge >= 0:
        raise ValueError(f"ridge must be >= 0 (the L2 penalty lambda), got {ridge!r}")
    return float(ridge)


def linear_statistics_size(d: int, intercept: bool = True) -> int:
    """Numbers in one rank's sufficient statistics: d^2 + d (X^T X, X^T y), + d + 2 for the intercept."""
    return d * d + d + (d + 2 if intercept else 0)


def linear_statistics(X: np.ndarray, y: np.ndarray, intercept: bool = True) -> np.ndarray:
    """One shard's [X^T X, X^T y, sum x, sum y, n]: sums over rows, so shards add up to the whole (Ch12, Section 2)."""
    parts = [(X.T @ X).ravel(), X.T @ y]
    if intercept:
        parts += [X.sum(axis=0), np.array([y.sum(), len(y)], dtype=X.dtype)]
    return np.concatenate(parts).astype(X.dtype, copy=False)


def solve_statistics(stats: np.ndarray, d: int, ridge: float = 0.0, intercept: bool = True) -> tuple[np.ndarray, float]:
    """Coefficients from the summed statistics: w = (X_c^T X_c + ridge I)^-1 X_c^T y_c, b = ybar - xbar^T w.

    X_c is X centred by its column means, so the intercept is not penalised (scikit-learn's Ridge).
    """
    A = stats[: d * d].reshape(d, d)
    r = stats[d * d: d * d + d]
    b0 = stats.dtype.type(0)
    if intercept:
        sx, sy, n = stats[d * d + d: d * d + 2 * d], stats[-2], stats[-1]
        if n == 0:
            raise ValueError("no rows on any rank: linear regression needs at least one sample")
        xbar, ybar = sx / n, sy / n
        A = A - n * np.outer(xbar, xbar)  # X_c^T X_c = X^T X - n xbar xbar^T
        r = r - n * xbar * ybar
    A = A + ridge * np.eye(d, dtype=A.dtype)
    sv = np.linalg.svd(A.astype(np.float64), compute_uv=False)
    if not sv[-1] > sv[0] * np.finfo(A.dtype).eps:  # singular to working precision: solve would return noise
        raise ValueError("X^T X is singular (fewer rows than features, or collinear columns): pass ridge > 0")
    w = np.linalg.solve(A, r)
    if intercept:
        b0 = ybar - xbar @ w
    return w, float(b0)


def fit_linear(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, ridge: float = 0.0,
               intercept: bool = True, row_seconds: float = 0.0) -> tuple[np.ndarray, float]:
    """Per rank: one ring all-reduce of the sufficient statistics, then the same solve on every rank.

    Sends 2 (K-1)/K (d^2 + 2d + 2) numbers per rank, independent of n (Ch12, Section 3). Arithmetic in
    X's dtype, so float32 shows the conditioning problem of the normal equations (Section 6).
    ``row_seconds`` charges simulated compute per row and feature (Section 7).
    """
    X, y = _check_xy(X_shard, y_shard, "fit_linear")
    ridge = _check_ridge(ridge)
    comm.compute(row_seconds * X.shape[0] * X.shape[1] * X.shape[1])
    total = ring_allreduce(comm, linear_statistics(X, y, intercept))
    return solve_statistics(total, X.shape[1], ridge, intercept)


def naive_linear(comm: Comm, X_shard: np.ndarray, y_shard: np.ndarray, ridge: float = 0.0,
                 intercept: bool = True) -> tuple[np.ndarray, float]:
    """Gather every row to rank 0, fit there, broadcast the coefficients: rank r sends n_r (d + 1) numbers."""
    X, y = _check_xy(X_shard, y_shard, "naive_linear")
    ridge = _check_ridge(ridge)
    rows = gather(comm, np.concatenate([X, y[:, None]], axis=1), root=0)
    packed = None
    if comm.rank == 0:
        w, b = reference_linear(rows[:, :-1], rows[:, -1], ridge, intercept)
        packed = np.append(w, b).astype(X.dtype)
    out = broadcast(comm, packed, root=0)
    return out[:-1], float(out[-1])


def reference_linear(X: np.ndarray, y: np.ndarray, ridge: float = 0.0, intercept: bool = True) -> tuple[np.ndarray, float]:
    """Single-machine least squares by QR (``lstsq``) on the centred data stacked on sqrt(ridge) I.

    Never forms X^T X, so it keeps the accuracy the normal equations lose in float32.
    """
    X, y = _check_xy(X, y, "reference_linear")
    ridge = _check_ridge(ridge)
    xbar = X.mean(axis=0) if intercept else np.zeros(X.shape[1], X.dtype)
    ybar = y.mean() if intercept else X.dtype.type(0)
    A, t = X - xbar, y - ybar
    if ridge > 0:
        A = np.vstack([A, np.sqrt(ridge) * np.eye(X.shape[1], dtype=X.dtype)])
        t = np.concatenate([t, np.zeros(X.shape[1], X.dtype)])
    w = np.linalg.lstsq(A, t, rcond=None)[0]
    return w, float(ybar - xbar @ w) if intercept else 0.0


# --- Lloyd's k-means ----------------------------------------------------------------------------

def _check_centres(X: np.ndarray, centres: Any, where: str) -> np.ndarray:
    C = np.asarray(centres)
    if X.ndim != 2 or C.ndim != 2 or C.shape[1] != X.shape[1] or len(C) < 1:
        raise ValueError(f"{where} needs X of shape (n, d) and centres of shape (k, d), got {X.shape} and {C.shape}")
    return C.astype(np.float64)


def assign(X: np.ndarray, centres: np.ndarray, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Nearest centre of every row (ties to the lowest index) and the squared distance to it.

    Row by row (x - c)^2 summed over d: a row's result never depends on which other rows share its shard.
    """
    labels = np.empty(len(X), dtype=np.int64)
    d2 = np.empty(len(X), dtype=np.float64)
    for lo in range(0, len(X), chunk):
        dist = ((X[lo: lo + chunk, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        labels[lo: lo + chunk] = dist.argmin(axis=1)
        d2[lo: lo + chunk] = dist[np.arange(len(dist)), labels[lo: lo + chunk]]
    return labels, d2


def _cluster_sums(X: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sums = np.zeros((k, X.shape[1]))
    np.add.at(sums, labels, X)
    return sums, np.bincount(labels, minlength=k).astype(np.float64)


def _update(centres: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The mean of each cluster; an EMPTY cluster keeps its previous centre (the stated rule)."""
    new = centres.copy()
    full = counts > 0
    new[full] = sums[full] / counts[full, None]
    return new


def kmeans(comm: Comm, X_shard: np.ndarray, init: np.ndarray, iters: int = 100,
           row_seconds: float = 0.0) -> dict[str, Any]:
    """Per rank: Lloyd's k-means from ``init`` (the same k x d centres on every rank).

    Each iteration assigns this rank's rows, then ONE ring all-reduce of [cluster sums (k d), counts (k),
    inertia, labels changed] (k d + k + 2 numbers) updates the centres on every rank. Stops when no label
    changes (scikit-learn's strict convergence) or after ``iters``; the returned labels and inertia are
    recomputed against the final centres, as scikit-learn reports them. Ch12, Section 4.
    """
    X = np.asarray(X_shard)
    C = _check_centres(X, init, "kmeans")
    k, d = C.shape
    history: list[float] = []
    counts_history: list[np.ndarray] = []
    labels = np.full(len(X), -1, dtype=np.int64)
    for _ in range(int(iters)):
        comm.compute(row_seconds * len(X) * k * d)
        new_labels, d2 = assign(X, C)
        sums, counts = _cluster_sums(X, new_labels, k)
        changed = float(np.count_nonzero(new_labels != labels))
        total = ring_allreduce(comm, np.concatenate([sums.ravel(), counts, [d2.sum(), changed]]))
        labels = new_labels
        history.append(float(total[-2]))
        counts_history.append(total[k * d: k * d + k].copy())
        if total[-1] == 0:  # no rank changed a label: the centres are a fixed point
            break
        C = _update(C, total[: k * d].reshape(k, d), total[k * d: k * d + k])
    labels, d2 = assign(X, C)
    inertia = float(ring_allreduce(comm, np.array([d2.sum()]))[0])
    return {"centres": C, "labels": labels, "inertia": inertia, "history": history,
            "counts": counts_history, "iterations": len(history)}


def reference_kmeans(X: np.ndarray, init: np.ndarray, iters: int = 100) -> dict[str, Any]:
    """Lloyd's k-means on one machine, the same rules as ``kmeans`` (ties, empty clusters, stopping)."""
    X = np.asarray(X)
    C = _check_centres(X, init, "reference_kmeans")
    k = len(C)
    history: list[float] = []
    all_labels: list[np.ndarray] = []
    labels = np.full(len(X), -1, dtype=np.int64)
    for _ in range(int(iters)):
        new_labels, d2 = assign(X, C)
        history.append(float(d2.sum()))
        all_labels.append(new_labels)
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
        C = _update(C, *_cluster_sums(X, labels, k))
    labels, d2 = assign(X, C)
    return {"centres": C, "labels": labels, "inertia": float(d2.sum()), "history": history,
            "labels_per_iteration": all_labels, "iterations": len(history)}


def init_centres(X: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """k distinct rows of X chosen with a seeded generator (Forgy): the shared starting point."""
    X = np.asarray(X)
    if not 1 <= k <= len(X):
        raise ValueError(f"init_centres needs 1 <= k <= n rows, got k={k} for {len(X)} rows")
    return X[np.random.default_rng(seed).choice(len(X), size=k, replace=False)].astype(np.float64)
