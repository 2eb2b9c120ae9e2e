"""DP-SGD and its Renyi accountant (Chapter 14): per-example clipping, Gaussian noise, epsilon.

One step (Abadi et al. 2016) on a Poisson batch (each of N examples in with probability q):

    g_i <- g_i * min(1, C / (||g_i|| + 1e-6))          per-example clipping (Opacus's form of the factor)
    g   <- (sum_i g_i + N(0, sigma^2 C^2 I)) / (q N)    noise once per step, divided by the expected batch

so one example moves the sum by at most C, and the noise hides it. The accountant (Mironov 2017;
Mironov, Talwar and Zhang 2019) bounds the Renyi divergence of order alpha of one step of the
subsampled Gaussian mechanism for integer alpha >= 2,

    eps_alpha = 1/(alpha-1) log sum_{i=0}^{alpha} binom(alpha, i) (1-q)^{alpha-i} q^i exp((i^2 - i) / (2 sigma^2)),

adds it over T steps, and converts to (eps, delta)-DP with Balle et al. 2020 (the conversion Opacus uses):
eps = min_alpha T eps_alpha + log((alpha-1)/alpha) - (log delta + log alpha) / (alpha - 1).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import nn

__all__ = ["ORDERS", "per_example_grads", "clip_per_example", "dp_sum", "dp_sgd_gradient", "train_dp_sgd",
           "rdp_step", "compute_rdp", "rdp_to_epsilon", "epsilon", "sigma_for_epsilon"]

ORDERS: tuple[int, ...] = tuple(range(2, 257))  # integer Renyi orders the accountant minimises over


def per_example_grads(params: nn.Params, X: np.ndarray, y: np.ndarray) -> nn.Params:
    """Gradients of each example's own softmax cross-entropy for an ``nn`` MLP: arrays of shape (n, *p.shape).

    The batch backward of ``nn.mlp_backward`` sums over examples; here every outer product is kept apart.
    """
    logits, cache = nn.mlp_forward(params, X)
    _, d = nn.softmax_cross_entropy(logits, y)
    d = d * len(X)  # undo the mean: the loss of example i alone
    out: nn.Params = {}
    for i in reversed(range(len(cache))):
        h, z = cache[i]
        if i < len(cache) - 1:
            d = nn.relu_backward(z, d)
        out[f"W{i}"] = np.einsum("ni,nj->nij", h, d)
        out[f"b{i}"] = d
        d = d @ params[f"W{i}"].T
    return out


def clip_per_example(grads: nn.Params, C: float) -> tuple[nn.Params, np.ndarray]:
    """Scale each example's whole gradient (all tensors together) to norm <= C; returns (clipped, norms)."""
    if not C > 0:
        raise ValueError(f"the clipping norm C must be > 0, got {C!r}")
    keys = sorted(grads)
    n = len(grads[keys[0]])
    sq = sum(np.sum(grads[k].reshape(n, -1).astype(np.float64) ** 2, axis=1) for k in keys)
    norms = np.sqrt(sq)
    factor = np.minimum(1.0, C / (norms + 1e-6))
    return {k: grads[k] * factor.reshape((n,) + (1,) * (grads[k].ndim - 1)).astype(grads[k].dtype)
            for k in keys}, norms


def dp_sum(clipped: nn.Params, C: float, sigma: float, rng: np.random.Generator) -> nn.Params:
    """sum_i clipped_i + N(0, sigma^2 C^2) per coordinate, in sorted key order (one noise vector per step)."""
    return {k: clipped[k].sum(axis=0) + (sigma * C * rng.standard_normal(clipped[k].shape[1:])
                                         ).astype(clipped[k].dtype) for k in sorted(clipped)}


def dp_sgd_gradient(params: nn.Params, X: np.ndarray, y: np.ndarray, C: float, sigma: float,
                    expected_batch: float, rng: np.random.Generator) -> nn.Params:
    """The DP-SGD gradient of one batch: (sum of clipped per-example gradients + noise) / expected_batch."""
    if not expected_batch > 0 or sigma < 0:
        raise ValueError(f"need expected_batch > 0 and sigma >= 0, got {expected_batch!r}, {sigma!r}")
    if len(X) == 0:
        summed = {k: sigma * C * rng.standard_normal(v.shape).astype(v.dtype) for k, v in sorted(params.items())}
    else:
        summed = dp_sum(clip_per_example(per_example_grads(params, X, y), C)[0], C, sigma, rng)
    return {k: v / expected_batch for k, v in summed.items()}


def train_dp_sgd(params: nn.Params, X: np.ndarray, y: np.ndarray, C: float, sigma: float, q: float,
                 steps: int, lr: float, seed: int = 0) -> nn.Params:
    """``steps`` DP-SGD steps on Poisson batches of rate q; (eps, delta) is ``epsilon(q, sigma, steps, delta)``."""
    p = {k: v.copy() for k, v in params.items()}
    rng = np.random.default_rng(seed)
    for _ in range(int(steps)):
        rows = np.flatnonzero(rng.random(len(X)) < q)
        nn.sgd_step(p, dp_sgd_gradient(p, X[rows], y[rows], C, sigma, q * len(X), rng), lr)
    return p


def _log_add(a: float, b: float) -> float:
    lo, hi = min(a, b), max(a, b)
    return hi if lo == -math.inf else hi + math.log1p(math.exp(lo - hi))


def rdp_step(q: float, sigma: float, order: int) -> float:
    """Renyi DP of order ``order`` (an integer >= 2) of one step of the Poisson-subsampled Gaussian."""
    if not 0 <= q <= 1 or sigma < 0:
        raise ValueError(f"need 0 <= q <= 1 and sigma >= 0, got q={q!r}, sigma={sigma!r}")
    if isinstance(order, bool) or int(order) != order or order < 2:
        raise ValueError(f"this accountant uses integer orders >= 2, got {order!r}")
    a = int(order)
    if q == 0:
        return 0.0
    if sigma == 0:
        return math.inf
    if q == 1:
        return a / (2 * sigma ** 2)
    log_sum = -math.inf
    for i in range(a + 1):
        log_binom = math.lgamma(a + 1) - math.lgamma(i + 1) - math.lgamma(a - i + 1)
        term = log_binom + i * math.log(q) + (a - i) * math.log(1 - q) + (i * i - i) / (2 * sigma ** 2)
        log_sum = _log_add(log_sum, term)
    return log_sum / (a - 1)


def compute_rdp(q: float, sigma: float, steps: int, orders: Any = ORDERS) -> np.ndarray:
    """T * eps_alpha for every order: RDP composes by adding over steps."""
    return np.array([rdp_step(q, sigma, a) * int(steps) for a in orders])


def rdp_to_epsilon(orders: Any, rdp: np.ndarray, delta: float) -> tuple[float, int]:
    """(eps, best order) from RDP by Balle et al. 2020, Theorem 21."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    a = np.asarray(orders, dtype=np.float64)
    eps = np.asarray(rdp, dtype=np.float64) - (math.log(delta) + np.log(a)) / (a - 1) + np.log((a - 1) / a)
    if np.all(np.isnan(eps)):
        return math.inf, int(a[0])
    best = int(np.nanargmin(eps))
    return float(eps[best]), int(a[best])


def epsilon(q: float, sigma: float, steps: int, delta: float, orders: Any = ORDERS) -> float:
    """The epsilon of ``steps`` DP-SGD steps of sampling rate q and noise multiplier sigma, at ``delta``."""
    return rdp_to_epsilon(orders, compute_rdp(q, sigma, steps, orders), delta)[0]


def sigma_for_epsilon(target: float, q: float, steps: int, delta: float, lo: float = 0.3,
                      hi: float = 50.0) -> float:
    """The smallest sigma (to 1e-4 relative, by bisection) whose epsilon is <= target."""
    if epsilon(q, hi, steps, delta) > target:
        raise ValueError(f"even sigma={hi} spends more than eps={target}: raise hi, or lower q or steps")
    while hi / lo > 1 + 1e-4:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if epsilon(q, mid, steps, delta) <= target else (mid, hi)
    return hi
