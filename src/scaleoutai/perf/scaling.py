"""Scaling laws and utilisation (Chapter 19, used by every part that sizes a model): how big a model, on how many tokens, at what efficiency.

Scaling laws (Hoffmann et al. 2022): L(N, D) = E + A / N^alpha + B / D^beta, compute C = 6 N D, and
MFU = 6 N * tokens/s / peak FLOP/s (H100 SXM dense bf16: 989 TFLOP/s).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["CHINCHILLA", "H100_BF16_PEAK", "chinchilla_loss", "compute_optimal", "compute_optimal_closed_form",
           "training_flops", "mfu"]

H100_BF16_PEAK = 989e12  # FLOP/s, dense bf16, H100 SXM
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def chinchilla_loss(N: Any, D: Any, E: float = 1.69, A: float = 406.4, B: float = 410.7, alpha: float = 0.34,
                    beta: float = 0.28) -> Any:
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, approach 3), in nats per token."""
    return E + A / np.power(N, alpha) + B / np.power(D, beta)


def training_flops(N: float, D: float) -> float:
    """C = 6 N D: 2 N FLOPs per token forward, 4 N backward."""
    return 6.0 * N * D


def compute_optimal(C: float, iters: int = 200, **constants: float) -> tuple[float, float]:
    """(N, D) minimising L(N, C / (6N)): golden-section search on log N (L is convex in log N)."""
    if not C > 0:
        raise ValueError(f"compute budget C must be positive FLOPs, got {C}")
    f = lambda x: chinchilla_loss(math.exp(x), C / (6 * math.exp(x)), **constants)  # noqa: E731
    lo, hi = 0.0, math.log(C / 6)  # N from 1 to C/6 (D = 1 token)
    r = (math.sqrt(5) - 1) / 2
    a, b = hi - r * (hi - lo), lo + r * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(iters):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - r * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + r * (hi - lo)
            fb = f(b)
    N = math.exp((lo + hi) / 2)
    return N, C / (6 * N)


def compute_optimal_closed_form(C: float, A: float = 406.4, B: float = 410.7, alpha: float = 0.34,
                                beta: float = 0.28) -> tuple[float, float]:
    """N* = G (C/6)^(beta/(alpha+beta)), D* = (C/6)^(alpha/(alpha+beta)) / G, G = (alpha A / (beta B))^(1/(alpha+beta))."""
    G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    return G * (C / 6) ** (beta / (alpha + beta)), (C / 6) ** (alpha / (alpha + beta)) / G


def mfu(tokens_per_s: float, N: float, peak_flops: float = H100_BF16_PEAK) -> float:
    """Model FLOP utilisation: 6 N tokens/s / peak (recomputation not counted: that is HFU)."""
    if not peak_flops > 0:
        raise ValueError(f"peak_flops must be positive, got {peak_flops}")
    return 6.0 * N * tokens_per_s / peak_flops
