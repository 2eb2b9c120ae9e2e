"""Scaling laws and utilisation (Chapter 19, used by every part that sizes a model): how big a model, on how many tokens, at what efficiency.

Scaling laws (Hoffmann et al. 2022): L(N, D) = E + A / N^alpha + B / D^beta, compute C = 6 N D
(here N is the parameter count, as in that paper; Appendix C writes it P or Psi).

FLOP accounting per token of a decoder with N parameters, l layers, hidden size h, sequence length s:
    model FLOPs     6 N + 12 l h s          forward + backward; the second term is attention's
                                            QK^T and AV (PaLM, Appendix B; 6 N alone without it)
    hardware FLOPs  model + 2 N + 4 l h s   plus one recomputed forward (full recomputation), or
                    model + 4 l h s         selective recomputation (only the attention scores)
    MFU = model FLOPs * tokens/s / peak;  HFU = hardware FLOPs * tokens/s / peak (>= MFU).
Megatron-LM's Eq. 3 counts per iteration F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) for batch B and
vocabulary V with full recomputation: hardware FLOPs of the transformer layers (4 forward passes)
plus the logits (3: they are not recomputed); its throughput table is therefore an HFU.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .hardware import H100_SXM

__all__ = ["CHINCHILLA", "H100_BF16_PEAK", "RECOMPUTE", "chinchilla_loss", "compute_optimal",
           "compute_optimal_closed_form", "training_flops", "model_flops_per_token", "hardware_flops_per_token",
           "megatron_flops_per_iteration", "mfu", "hfu"]

H100_BF16_PEAK = H100_SXM.bf16_flops  # FLOP/s, dense bf16, H100 SXM (the one table: perf.hardware)
RECOMPUTE = ("none", "selective", "full")
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


def _shape(layers: float, hidden: float, seq: float) -> float:
    for name, v in (("layers", layers), ("hidden", hidden), ("seq", seq)):
        if not v >= 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    return float(layers) * float(hidden) * float(seq)


def model_flops_per_token(N: float, layers: float = 0, hidden: float = 0, seq: float = 0) -> float:
    """6 N + 12 l h s: forward and backward per token, attention included when l, h, s are given (PaLM)."""
    if not N >= 0:
        raise ValueError(f"parameter count N must be >= 0, got {N}")
    return 6.0 * N + 12.0 * _shape(layers, hidden, seq)


def hardware_flops_per_token(N: float, layers: float = 0, hidden: float = 0, seq: float = 0,
                             recompute: str = "full") -> float:
    """Model FLOPs plus what activation recomputation redoes: a whole forward (2 N + 4 l h s) for
    "full", the attention scores (4 l h s) for "selective", nothing for "none"."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute={recompute!r}: choose one of {RECOMPUTE}")
    extra = {"none": 0.0, "selective": 4.0 * _shape(layers, hidden, seq),
             "full": 2.0 * N + 4.0 * _shape(layers, hidden, seq)}[recompute]
    return model_flops_per_token(N, layers, hidden, seq) + extra


def megatron_flops_per_iteration(batch: float, seq: float, layers: float, hidden: float, vocab: float) -> float:
    """Megatron-LM Eq. 3 (Narayanan et al. 2021): 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), full recomputation."""
    if not (batch > 0 and seq > 0 and layers > 0 and hidden > 0 and vocab >= 0):
        raise ValueError("batch, seq, layers and hidden must be positive and vocab >= 0")
    return 96.0 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def _utilisation(flops_per_token: float, tokens_per_s: float, peak_flops: float) -> float:
    if not peak_flops > 0:
        raise ValueError(f"peak_flops must be positive, got {peak_flops}")
    if not tokens_per_s >= 0:
        raise ValueError(f"tokens_per_s must be >= 0, got {tokens_per_s}")
    return flops_per_token * tokens_per_s / peak_flops


def mfu(tokens_per_s: float, N: float, peak_flops: float = H100_BF16_PEAK, layers: float = 0, hidden: float = 0,
        seq: float = 0) -> float:
    """Model FLOP utilisation: model FLOPs/token * tokens/s / peak. Without layers, hidden and seq it is
    6 N tokens/s / peak (attention left out, as in the Chinchilla-style estimate); recomputation never counts."""
    return _utilisation(model_flops_per_token(N, layers, hidden, seq), tokens_per_s, peak_flops)


def hfu(tokens_per_s: float, N: float, peak_flops: float = H100_BF16_PEAK, layers: float = 0, hidden: float = 0,
        seq: float = 0, recompute: str = "full") -> float:
    """Hardware FLOP utilisation: counts the recomputed FLOPs too, so HFU >= MFU for the same run."""
    return _utilisation(hardware_flops_per_token(N, layers, hidden, seq, recompute), tokens_per_s, peak_flops)
