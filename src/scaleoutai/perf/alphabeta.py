"""The alpha-beta model of communication (Chapters 3-4): closed forms for the course's collectives
and a least-squares fit of alpha and beta from measured message times.

Model (the simulator's, cluster.Network): a single-port, full-duplex link per rank. A message of m
bytes occupies the sender's egress and then the receiver's ingress for alpha + m * beta seconds; a rank
sends one message and receives one message at a time, so k messages converging on one rank cost
k (alpha + m beta) there (Thakur, Rabenseifner and Gropp's model). Every collective then costs
    T(n, p) = a(p) * alpha + b(p) * n * beta,
a latency term (a(p) message rounds on the critical path) and a bandwidth term (b(p) * n bytes on
it). ``nbytes`` (n) is the vector each rank holds for reductions and broadcast, the full result for
all_gather and gather, the root's full array for scatter, and each rank's total send buffer for
all_to_all. For p = 1 nothing is sent.

The block algorithms cut n into ``np.array_split`` blocks. When the item count is not a multiple of p
the blocks differ by one item of w bytes, and the simulated time differs from T(n, p) by at most
a(p) * w * beta (one item per round on the critical path); for multiples of p it is exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import _check as ck

Terms = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _lg(p: np.ndarray) -> np.ndarray:
    return np.ceil(np.log2(p))


def _rec_doubling(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Non-powers of two: the p - 2^k extra ranks fold into a partner first and get the result back
    # last, two more rounds; the partner sends the most bytes: k exchanges plus the hand-back.
    k = np.floor(np.log2(p))
    pow2 = 2.0 ** k == p
    steps = np.where(pow2, k, k + 2)
    return steps, steps, np.where(pow2, k, k + 1)


# name -> p -> (latency rounds a(p), bandwidth factor b(p), bytes one rank sends / n, max over ranks)
_TERMS: dict[str, Terms] = {
    "broadcast": lambda p: (_lg(p), _lg(p), _lg(p)),
    "reduce": lambda p: (_lg(p), _lg(p), np.ones_like(p)),
    "scatter": lambda p: (p - 1, (p - 1) / p, (p - 1) / p),
    "gather": lambda p: (p - 1, (p - 1) / p, 1 / p),  # incast: the root receives p - 1 blocks in turn
    "naive_allreduce": lambda p: (2 * (p - 1), 2 * (p - 1), p - 1),  # p - 1 full copies in, then out
    "tree_allreduce": lambda p: (2 * _lg(p), 2 * _lg(p), _lg(p)),
    "ring_allreduce": lambda p: (2 * (p - 1), 2 * (p - 1) / p, 2 * (p - 1) / p),
    "recursive_doubling_allreduce": _rec_doubling,
    "reduce_scatter": lambda p: (p - 1, (p - 1) / p, (p - 1) / p),
    "all_gather": lambda p: (p - 1, (p - 1) / p, (p - 1) / p),
    "all_to_all": lambda p: (p - 1, (p - 1) / p, (p - 1) / p),
}
COLLECTIVES: tuple[str, ...] = tuple(_TERMS)


def _terms(name: str, p: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if name not in _TERMS:
        raise ValueError(f"unknown collective {name!r}: choose one of {', '.join(COLLECTIVES)}")
    p_ = ck.workers(p)
    single = p_ == 1  # one rank: nothing to send
    return tuple(np.where(single, 0.0, t) for t in _TERMS[name](p_))  # type: ignore[return-value]


def collective_time(name: str, nbytes: Any, p: Any, alpha: float, beta: float) -> Any:
    """Alpha-beta time of collective ``name`` on p ranks: a(p) * alpha + b(p) * n * beta (Ch 4).

    E.g. ring_allreduce: 2(p-1)(alpha + n/p beta); broadcast (binomial tree): ceil(log2 p)(alpha + n beta).
    """
    a, b, _ = _terms(name, p)
    n = ck.non_negative("nbytes", nbytes)
    return ck.out(a * ck.non_negative("alpha", alpha) + b * n * ck.non_negative("beta", beta))


def collective_bytes_per_rank(name: str, nbytes: Any, p: Any) -> Any:
    """Bytes the busiest rank sends in collective ``name`` (e.g. ring_allreduce: 2(p-1)/p * n)."""
    _, _, c = _terms(name, p)
    return ck.out(c * ck.non_negative("nbytes", nbytes))


def crossover_bytes(alpha: float, beta: float) -> float:
    """n* = alpha / beta: below it a message's time is mostly latency, above it mostly bandwidth."""
    return ck.out(ck.non_negative("alpha", alpha) / ck.positive("beta", beta))


@dataclass(frozen=True)
class AlphaBetaFit:
    """t(n) = alpha + beta * n fitted to measurements; ``r2`` is the coefficient of determination."""

    alpha: float
    beta: float
    r2: float

    def predict(self, nbytes: Any) -> Any:
        return ck.out(self.alpha + self.beta * ck.non_negative("nbytes", nbytes))

    @property
    def bandwidth(self) -> float:
        """1 / beta in bytes per second (inf when the fit finds no per-byte cost)."""
        return 1.0 / self.beta if self.beta > 0 else float("inf")

    def __str__(self) -> str:
        return (f"alpha = {self.alpha * 1e6:.3g} us, beta = {self.beta * 1e9:.3g} ns/B "
                f"({self.bandwidth / 1e9:.3g} GB/s), R^2 = {self.r2:.4f}")


def fit_alpha_beta(nbytes: Any, seconds: Any) -> AlphaBetaFit:
    """Least-squares fit of t = alpha + beta * n (np.linalg.lstsq) to message sizes and times (Ch 3).

    Needs at least two distinct sizes; repeated sizes are fine (and average out noise).
    """
    n = ck.non_negative("nbytes", nbytes).ravel()
    t = ck.as_float("seconds", seconds).ravel()
    if n.shape != t.shape:
        raise ValueError(f"nbytes and seconds must have one time per size, got {n.size} sizes and {t.size} times")
    if np.unique(n).size < 2:
        raise ValueError("fit_alpha_beta needs at least 2 distinct message sizes to separate alpha from beta")
    scale = float(n.max())  # sizes span many decades; scaling keeps the design matrix well conditioned
    design = np.column_stack([np.ones_like(n), n / scale])
    (alpha, beta_scaled), *_ = np.linalg.lstsq(design, t, rcond=None)
    resid = t - design @ np.array([alpha, beta_scaled])
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    ss_res = float(np.sum(resid ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return AlphaBetaFit(alpha=float(alpha), beta=float(beta_scaled) / scale, r2=r2)
