"""Record, rating and vector datasets, each a pure function of its seed (Appendix D).

    make_records      variable-length int32 token records                     (Ch8 sharded files)
    low_rank_ratings  user-item ratings of a rank-r model, Zipf item popularity (Ch11, lab11)
    vector_data       base and query vectors from one Gaussian mixture          (Ch25)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tabular import blobs


def make_records(n: int, seed: int = 0, min_len: int = 16, max_len: int = 256) -> list[np.ndarray]:
    """n int32 'token' records, lengths uniform in [min_len, max_len], tokens uniform in [0, 50,000)."""
    if int(n) != n or n < 0 or not 0 <= min_len <= max_len:
        raise ValueError(f"need n >= 0 and 0 <= min_len <= max_len, got n={n}, min_len={min_len}, max_len={max_len}")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=int(n))
    return [rng.integers(0, 50_000, size=int(m), dtype=np.int32) for m in lengths]


def low_rank_ratings(n_users: int, n_items: int, n: int, rank: int = 4, popularity: float = 1.1,
                     noise: float = 0.1, seed: int = 0,
                     dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n ratings r = u* . v* + noise; users uniform, item i drawn with weight (i + 1)^-popularity.

    u*, v* ~ N(0, 1)^rank / rank^(1/4), so r has unit variance before noise; low item ids are the hot
    keys a parameter server must spread (Chapter 11, Section 2). Returns (users, items, r).
    """
    for name, v in (("n_users", n_users), ("n_items", n_items), ("n", n), ("rank", rank)):
        if int(v) != v or v < 1:
            raise ValueError(f"low_rank_ratings needs {name} >= 1, got {v!r}")
    rng = np.random.default_rng(seed)
    weights = (np.arange(1, n_items + 1, dtype=np.float64)) ** -float(popularity)
    items = rng.choice(n_items, size=n, p=weights / weights.sum())
    users = rng.integers(0, n_users, size=n)
    U = rng.standard_normal((n_users, rank)) / rank ** 0.25
    V = rng.standard_normal((n_items, rank)) / rank ** 0.25
    r = np.einsum("ij,ij->i", U[users], V[items]) + noise * rng.standard_normal(n)
    return users.astype(np.int64), items.astype(np.int64), r.astype(dtype)


def vector_data(n_base: int, n_queries: int, d: int, clusters: int = 64, spread: float = 1.0, box: float = 1.0,
                seed: int = 0, dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray]:
    """Base and query vectors drawn from one mixture of ``clusters`` Gaussians (``blobs``): queries
    land near base clusters, as real queries land near the documents they seek (Chapter 25)."""
    X, _, _ = blobs(n_base + n_queries, clusters, d, spread=spread, box=box, seed=seed, dtype=dtype)
    return np.ascontiguousarray(X[:n_base]), np.ascontiguousarray(X[n_base:])
