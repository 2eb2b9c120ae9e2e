"""Floating-point sums and variances as distributed training computes them (Appendix A, Section 4).

An all-reduce is a sum in some order, and floating-point addition is not associative: the same K
shards added in another order (another ring start, a tree instead of a ring, another K) give other
bits. With u the unit roundoff (2^-11 float16, 2^-24 float32, 2^-53 float64) and S = sum |x_i|,
the first-order error bounds (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 4) are

    naive_sum      left to right           |err| <= (n - 1) u S
    pairwise_sum   halves, recursively     |err| <= ceil(log2 n) u S
    kahan_sum      compensated             |err| <= (2u + O(n u^2)) S
    tree_sum       K shards, then combine  |err| <= (ceil(n/K) - 1 + depth) u S   (depth: K - 1 ring, ceil(log2 K) tree)

``sum_error_bound`` returns these; ``exact_sum`` (math.fsum) is the reference they are measured against.
``naive_variance`` (E[x^2] - E[x]^2) shows catastrophic cancellation; ``two_pass_variance`` avoids it.
NumPy and the course's split rule (collectives.block_bounds) only.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..collectives import block_bounds

__all__ = ["unit_roundoff", "naive_sum", "pairwise_sum", "kahan_sum", "tree_sum", "exact_sum", "sum_error_bound",
           "naive_variance", "two_pass_variance"]

_FLOATS = (np.float16, np.float32, np.float64)


def _values(values: Any, dtype: Any = None) -> np.ndarray:
    """A 1-D float16/32/64 array (``dtype``, or the input's own float type)."""
    arr = np.asarray(values)
    dt = np.dtype(dtype) if dtype is not None else arr.dtype
    if dt.type not in _FLOATS:
        raise ValueError(f"sums here work in float16, float32 or float64; got dtype {dt}: pass dtype=np.float32")
    arr = arr.astype(dt, copy=False).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("values must be finite: remove inf and nan before summing")
    return arr


def unit_roundoff(dtype: Any) -> float:
    """u = eps / 2: the largest relative error of rounding one real number to ``dtype``."""
    dt = np.dtype(dtype)
    if dt.type not in _FLOATS:
        raise ValueError(f"unit_roundoff needs float16, float32 or float64, got {dt}")
    return float(np.finfo(dt).eps) / 2


def naive_sum(values: Any, dtype: Any = None) -> np.floating:
    """Recursive summation s_i = s_{i-1} + x_i, every partial sum rounded to ``dtype``."""
    x = _values(values, dtype)
    if x.size == 0:
        return x.dtype.type(0)
    return np.cumsum(x, dtype=x.dtype)[-1]  # add.accumulate is strictly left to right, unlike np.sum


def pairwise_sum(values: Any, dtype: Any = None) -> np.floating:
    """Sum the halves recursively: a balanced tree of depth ceil(log2 n), each node rounded to ``dtype``.

    Level by level: neighbours are added in pairs (an odd last element waits for the next level), which
    is the same tree as recursive halving up to where the odd elements join.
    """
    x = _values(values, dtype)
    if x.size == 0:
        return x.dtype.type(0)
    while x.size > 1:
        head = x[: x.size - x.size % 2]
        paired = head[0::2] + head[1::2]  # stays in x.dtype: one rounding per addition
        x = np.concatenate([paired, x[head.size:]])
    return x[0]


def kahan_sum(values: Any, dtype: Any = None) -> np.floating:
    """Compensated summation (Kahan, 1965): c carries the low-order bits each addition loses.

    y = x_i - c; t = s + y; c = (t - s) - y; s = t. Every operation in ``dtype`` (NumPy scalars), so the
    bound 2u S holds for that dtype; the compensation must not be simplified away algebraically.
    """
    x = _values(values, dtype)
    zero = x.dtype.type(0)
    s, c = zero, zero
    for xi in x:
        y = xi - c
        t = s + y
        c = (t - s) - y  # what the rounding of s + y dropped, with its sign flipped
        s = t
    return s


def tree_sum(values: Any, K: int, order: str = "tree", first: int = 0, dtype: Any = None) -> np.floating:
    """The sum as K workers reduce it: shard k = block k of ``block_bounds(n, K)``, summed left to right
    by its worker; the K partial sums are then combined in ``dtype``:

    - ``order="ring"``: sequentially, starting at shard ``first`` and going round (a ring reduce's order),
    - ``order="tree"``: a binomial tree over the shards, rotated so that ``first`` is the root.
    """
    x = _values(values, dtype)
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"tree_sum needs K >= 1 shards (workers), got {K!r}")
    if order not in ("ring", "tree"):
        raise ValueError(f"order must be 'ring' or 'tree', got {order!r}")
    if not isinstance(first, (int, np.integer)) or not 0 <= first < K:
        raise ValueError(f"first={first!r} must be a shard index 0..{K - 1}")
    partial = [naive_sum(x[lo:hi]) for lo, hi in block_bounds(x.size, int(K))]
    partial = partial[first:] + partial[:first]
    if order == "ring":
        return naive_sum(np.array(partial, dtype=x.dtype))
    step = 1
    while step < K:  # binomial tree: at distance `step`, shard i absorbs shard i + step
        for i in range(0, K - step, 2 * step):
            partial[i] = partial[i] + partial[i + step]
        step *= 2
    return partial[0]


def exact_sum(values: Any) -> float:
    """The sum of the values as stored, rounded once to float64 (math.fsum is exact until that rounding)."""
    x = np.asarray(values)
    if x.dtype.kind not in "fiu":
        raise ValueError(f"exact_sum needs numbers, got dtype {x.dtype}")
    return math.fsum(x.astype(np.float64).reshape(-1).tolist())


def sum_error_bound(values: Any, method: str, dtype: Any = None, K: int = 1, order: str = "tree") -> float:
    """First-order bound on |computed - exact| for ``method``: the table of the module docstring, times S.

    Uses gamma_m = m u / (1 - m u) instead of m u, so it is a true bound, not only a first-order one.
    Returns inf when m u >= 1 (the bound says nothing: float16 and long sums).
    """
    x = _values(values, dtype)
    u, n, S = unit_roundoff(x.dtype), x.size, math.fsum(np.abs(x.astype(np.float64)).tolist())
    if method == "naive":
        m = max(n - 1, 0)
    elif method == "pairwise":
        m = math.ceil(math.log2(n)) if n > 1 else 0
    elif method == "kahan":
        # (2u + O(n u^2)) / u; the textbooks leave the O constant open: we take 2 (checked in the tests)
        m = 2 + 2 * n * u
    elif method == "tree":
        depth = K - 1 if order == "ring" else math.ceil(math.log2(K)) if K > 1 else 0
        m = max(math.ceil(n / K) - 1, 0) + depth
    else:
        raise ValueError(f"method must be 'naive', 'pairwise', 'kahan' or 'tree', got {method!r}")
    return math.inf if m * u >= 1 else m * u / (1 - m * u) * S


def naive_variance(values: Any, dtype: Any = None) -> np.floating:
    """E[x^2] - E[x]^2 in ``dtype``: two large nearly equal numbers subtracted (catastrophic cancellation).

    Its absolute error is a few u E[x^2] = u (mean^2 + var), so relative to the variance it is about
    u (1 + (mean / std)^2): hopeless in float32 once |mean| / std exceeds about 10^3.
    """
    x = _values(values, dtype)
    n = x.dtype.type(x.size)
    return pairwise_sum(x * x) / n - (pairwise_sum(x) / n) ** 2


def two_pass_variance(values: Any, dtype: Any = None) -> np.floating:
    """Mean first, then the mean of squared deviations: relative error a few log2(n) u, whatever the mean."""
    x = _values(values, dtype)
    n = x.dtype.type(x.size)
    d = x - pairwise_sum(x) / n
    return pairwise_sum(d * d) / n
