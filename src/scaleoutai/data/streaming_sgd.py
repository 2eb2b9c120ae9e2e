"""Online learning on a drifting stream (Chapter 9, Sections 4 and 7).

Linear regression y = x . w_t + noise whose true weights w_t rotate by ``drift`` radians per micro-batch
(in the plane of the first two coordinates). Online SGD takes one step per micro-batch on
f(w) = 1/(2b) sum (x . w - y)^2, gradient g = X^T (X w - y) / b, and is scored *before* it trains on
the batch (prequential, "test then train"). A model fitted once on the first batches and never updated
goes stale: its error grows as w_t rotates away from it.

Distributed: rank r holds block r of every micro-batch; one all-reduce of [X_r^T (X_r w - y_r),
squared error, row count] per batch gives every rank the gradient of the whole batch, so K ranks take
the steps of one rank on the concatenated batch (equal up to float reassociation, rtol 1e-10).
"""
from __future__ import annotations

import numpy as np

from ..cluster import Comm
from ..collectives import block_range, recursive_doubling_allreduce


def _check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if X.ndim != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"need X of shape (batches, b, d) and y of shape (batches, b), got {X.shape} and {y.shape}")
    return X, y


def batch_errors(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean squared error of one fixed weight vector on every micro-batch."""
    X, y = _check_xy(X, y)
    return ((X @ np.asarray(w, dtype=np.float64) - y) ** 2).mean(axis=1)


def stale_model(X: np.ndarray, y: np.ndarray, batches: int = 1) -> np.ndarray:
    """Least squares on the first ``batches`` micro-batches, then frozen: the model trained once."""
    X, y = _check_xy(X, y)
    d = X.shape[2]
    return np.linalg.lstsq(X[:batches].reshape(-1, d), y[:batches].reshape(-1), rcond=None)[0]


def reference_online_sgd(X: np.ndarray, y: np.ndarray, lr: float,
                         w0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One machine: (weights after each batch (n, d), prequential MSE of each batch before its step)."""
    X, y = _check_xy(X, y)
    w = np.zeros(X.shape[2]) if w0 is None else np.array(w0, dtype=np.float64)
    ws, errs = [], []
    for Xb, yb in zip(X, y):
        r = Xb @ w - yb
        errs.append(float((r ** 2).mean()))
        w = w - lr * (Xb.T @ r) / len(yb)
        ws.append(w.copy())
    return np.array(ws), np.array(errs)


def train_online_sgd(comm: Comm, X: np.ndarray, y: np.ndarray, lr: float,
                     w0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rank r trains on block r of every micro-batch; returns what ``reference_online_sgd`` returns."""
    X, y = _check_xy(X, y)
    n, b, d = X.shape
    lo, hi = block_range(b, comm.size, comm.rank)
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=np.float64)
    ws, errs = [], []
    for Xb, yb in zip(X[:, lo:hi], y[:, lo:hi]):
        r = Xb @ w - yb
        local = np.concatenate([Xb.T @ r, [float(r @ r), float(len(yb))]])
        total = recursive_doubling_allreduce(comm, local, op="sum")  # one message per round, d + 2 numbers
        errs.append(total[d] / total[d + 1])
        w = w - lr * total[:d] / total[d + 1]
        ws.append(w.copy())
    return np.array(ws), np.array(errs)
