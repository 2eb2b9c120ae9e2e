"""The template's problem: logistic regression by full-batch gradient descent on seeded synthetic data.

Distribution axis: data. The n rows come in fixed chunks of CHUNK rows, each generated from its own
seed, so rank r of K can build just its contiguous block of chunks without touching the rest. The
gradient is a sum over rows, so the K shard sums add up to the single-machine gradient exactly
(Chapter 1): g = (1/n) sum_k X_k^T (sigmoid(X_k w) - y_k). One all-reduce of d + 1 numbers per step.
"""
from __future__ import annotations

import os

CHUNK = 4096


def set_threads(threads: int) -> None:
    """One BLAS thread per process by default, so K processes use K cores and S_p measures
    distribution rather than threading. Must run before NumPy is imported."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def my_chunks(n: int, rank: int, size: int) -> range:
    """The contiguous block of chunk ids of ``rank``: the first (chunks % size) ranks get one more."""
    chunks = -(-n // CHUNK)
    base, extra = divmod(chunks, size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def make_shard(n: int, d: int, seed: int, rank: int = 0, size: int = 1):
    """Rows of this rank's chunks: X (rows, d) float64, y (rows,) in {0, 1}; the same rows at any K."""
    import numpy as np

    w_true = np.random.default_rng([seed, 0]).standard_normal(d) / np.sqrt(d) * 3.0
    xs, ys = [np.empty((0, d))], [np.empty(0)]
    for c in my_chunks(n, rank, size):
        rows = min(CHUNK, n - c * CHUNK)
        rng = np.random.default_rng([seed, 1, c])
        x = rng.standard_normal((rows, d))
        p = 1.0 / (1.0 + np.exp(-(x @ w_true)))
        xs.append(x)
        ys.append((rng.random(rows) < p).astype(np.float64))
    return np.concatenate(xs), np.concatenate(ys)


def local_sums(X, y, w):
    """[sum of per-row gradients (d numbers), sum of per-row log losses]: sums, so shards add up."""
    import numpy as np

    z = X @ w
    g = X.T @ (1.0 / (1.0 + np.exp(-z)) - y)
    loss = np.sum(np.logaddexp(0.0, z) - y * z)
    return np.append(g, loss)


def fit(X, y, n: int, steps: int, lr: float, allreduce=None):
    """Gradient descent w <- w - lr * g / n. ``allreduce(buf)`` sums ``buf`` over ranks in place
    (None: a single machine). Returns the weights and the mean loss before each step."""
    import numpy as np

    w = np.zeros(X.shape[1])
    losses = []
    for _ in range(steps):
        buf = local_sums(X, y, w)
        if allreduce is not None:
            allreduce(buf)
        losses.append(buf[-1] / n)
        w -= lr * buf[:-1] / n
    return w, np.array(losses)


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --n 20000 --steps 20)."""
    parser.add_argument("--n", type=int, default=200_000, help="rows of data")
    parser.add_argument("--d", type=int, default=64, help="features")
    parser.add_argument("--steps", type=int, default=100, help="gradient steps")
    parser.add_argument("--lr", type=float, default=0.5, help="step size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")
