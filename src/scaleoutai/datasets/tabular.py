"""Tabular and graph-ML datasets, each a pure function of its seed (Appendix D).

    linear_regression   y = X w* + noise                                   (Ch10, Ch12)
    classification      Gaussian classes around well-separated means       (Ch10, Ch11, Ch14)
    blobs               k clusters for k-means                             (Ch12)
    power_law_graph     a directed graph with a heavy-tailed degree (Chung-Lu)       (Ch13)
    community_graph     an undirected stochastic block model with node features and labels (Ch13)
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _positive(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def linear_regression(n: int, d: int, noise: float = 0.1, seed: int = 0,
                      dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X ~ N(0, 1)^{n x d}, w* ~ N(0, 1)^d, y = X w* + noise * N(0, 1): returns (X, y, w*)."""
    n, d = _positive("n", n), _positive("d", d)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = X @ w + noise * rng.standard_normal(n)
    return X.astype(dtype), y.astype(dtype), w.astype(dtype)


def classification(n: int, d: int, classes: int = 2, separation: float = 2.0, seed: int = 0,
                   dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Class c has mean mu_c (norm = separation, random direction) and unit-variance noise.

    Labels are balanced up to one sample and shuffled: returns (X of shape (n, d), y int64 in [0, classes)).
    """
    n, d, classes = _positive("n", n), _positive("d", d), _positive("classes", classes)
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((classes, d))
    means *= separation / np.linalg.norm(means, axis=1, keepdims=True)
    y = rng.permutation(np.arange(n) % classes).astype(np.int64)
    X = means[y] + rng.standard_normal((n, d))
    return X.astype(dtype), y


def blobs(n: int, k: int, d: int = 2, spread: float = 1.0, box: float = 10.0, seed: int = 0,
          dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """k isotropic clusters, centres uniform in [-box, box]^d: returns (X, labels, centres)."""
    n, k, d = _positive("n", n), _positive("k", k), _positive("d", d)
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-box, box, size=(k, d))
    labels = rng.integers(0, k, size=n)
    X = centres[labels] + spread * rng.standard_normal((n, d))
    return X.astype(dtype), labels.astype(np.int64), centres.astype(dtype)


def power_law_graph(n: int, m: int, exponent: float = 2.2, seed: int = 0) -> np.ndarray:
    """m distinct directed edges (src, dst), no self-loops, over n vertices (Chung-Lu model).

    Vertex i is chosen with probability proportional to (i + 1)^(-1 / (exponent - 1)), so degrees
    follow a power law with that exponent: a few hubs, many leaves, as in web and social graphs.
    Returns an int64 array of shape (m, 2), rows in a random order.
    """
    n, m = _positive("n", n), _positive("m", m)
    if m > n * (n - 1):
        raise ValueError(f"a simple directed graph on {n} vertices has at most {n * (n - 1)} edges, "
                         f"asked for m={m}: lower m or raise n")
    if exponent <= 1.0:
        raise ValueError(f"exponent must be > 1, got {exponent}")
    rng = np.random.default_rng(seed)
    w = (np.arange(n) + 1.0) ** (-1.0 / (exponent - 1.0))
    p = w / w.sum()
    codes = np.empty(0, dtype=np.int64)
    while codes.size < m:
        k = 2 * (m - codes.size) + 16
        src, dst = rng.choice(n, size=k, p=p), rng.choice(n, size=k, p=p)
        keep = src != dst
        new = src[keep].astype(np.int64) * n + dst[keep]
        # First occurrence wins and order stays random: keeps the result a pure function of the seed.
        both = np.concatenate([codes, new])
        _, first = np.unique(both, return_index=True)
        codes = both[np.sort(first)]
        if codes.size < m and new.size == 0:
            raise ValueError(f"could not draw {m} distinct edges on {n} vertices: lower m")
    codes = codes[:m]
    return np.stack([codes // n, codes % n], axis=1)


def community_graph(n: int, communities: int = 4, d: int = 16, degree_in: float = 8.0,
                    degree_out: float = 1.0, feature_noise: float = 1.0, seed: int = 0,
                    dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stochastic block model: about degree_in neighbours inside a vertex's community and
    degree_out outside; features are the community's mean plus noise.

    Returns (edges, X, y): edges int64 (E, 2) listing both directions of each undirected edge (no
    self-loops, no duplicates, sorted), X of shape (n, d), y int64 community labels.
    """
    n, communities, d = _positive("n", n), _positive("communities", communities), _positive("d", d)
    rng = np.random.default_rng(seed)
    y = (np.arange(n) * communities // n).astype(np.int64)
    size = np.bincount(y, minlength=communities)
    p_in = min(1.0, degree_in / max(1, size.max() - 1))
    p_out = min(1.0, degree_out / max(1, n - size.max()))
    pairs = []
    for i in range(n):
        # Sample each vertex's higher-numbered neighbours: O(n^2) coin flips, fine for n <= ~1e4.
        j = np.arange(i + 1, n)
        prob = np.where(y[j] == y[i], p_in, p_out)
        pairs.append(np.stack([np.full(j.size, i), j], axis=1)[rng.random(j.size) < prob])
    und = np.concatenate(pairs) if pairs else np.empty((0, 2), dtype=np.int64)
    edges = np.concatenate([und, und[:, ::-1]]).astype(np.int64)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    means = rng.standard_normal((communities, d))
    X = means[y] + feature_noise * rng.standard_normal((n, d))
    return edges, X.astype(dtype), y
