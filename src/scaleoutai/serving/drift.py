"""Drift detection on a stream of model inputs or scores (Chapter 26, Sections 3-4 and 6).

Two statistics compare a window of recent values with a reference sample:

- PSI (population stability index): bins from the reference's quantiles, then
  PSI = sum_i (p_i - q_i) ln(p_i / q_i) over the bins, p the recent and q the reference shares
  (each share floored at ``eps`` so an empty bin stays finite). Rule of thumb: < 0.1 stable,
  0.1-0.25 moderate, > 0.25 a shift.
  Bin counts add up across replicas, so a fleet's PSI is one all-reduce (``fleet_psi``).
- KS (two-sample Kolmogorov-Smirnov): D = sup_x |F_recent(x) - F_ref(x)|, the largest gap between
  the two empirical CDFs; it equals ``scipy.stats.ks_2samp(...).statistic`` (tested).

``DriftMonitor`` slides a window over the stream and raises an alarm when the statistic crosses
its threshold; ``detection_delay`` and ``false_alarm_rate`` measure a detector on streams with a
known change point, the two numbers a threshold trades against each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cluster import Comm
from ..collectives import ring_allreduce


def _edges(reference: np.ndarray, bins: int) -> np.ndarray:
    return np.unique(np.quantile(reference, np.linspace(0, 1, bins + 1)[1:-1]))


def _counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.bincount(np.searchsorted(edges, values, side="right"), minlength=edges.size + 1).astype(np.int64)


def psi_from_counts(recent_counts: np.ndarray, reference_counts: np.ndarray, eps: float = 1e-4) -> float:
    """PSI = sum_i (p_i - q_i) ln(p_i / q_i) from bin counts; shares floored at ``eps``."""
    p = np.maximum(recent_counts / max(recent_counts.sum(), 1), eps)
    q = np.maximum(reference_counts / max(reference_counts.sum(), 1), eps)
    return float(np.sum((p - q) * np.log(p / q)))


def psi(reference: np.ndarray, recent: np.ndarray, bins: int = 10, eps: float = 1e-4) -> float:
    """Population stability index of ``recent`` against ``reference`` over ``bins`` quantile bins."""
    reference, recent = np.asarray(reference, dtype=np.float64), np.asarray(recent, dtype=np.float64)
    if reference.size < bins or recent.size == 0:
        raise ValueError(f"psi needs at least bins={bins} reference values and one recent value, "
                         f"got {reference.size} and {recent.size}")
    edges = _edges(reference, bins)
    return psi_from_counts(_counts(recent, edges), _counts(reference, edges), eps)


def fleet_psi(comm: Comm, reference: np.ndarray, recent: np.ndarray, bins: int = 10, eps: float = 1e-4) -> float:
    """PSI of the whole fleet's recent traffic: each replica bins its own window against the shared
    reference edges and one all-reduce sums the counts (bins + 1 integers per replica, whatever the
    traffic), so the result equals ``psi`` of all windows concatenated. A replica may have no traffic."""
    reference = np.asarray(reference, dtype=np.float64)
    if reference.size < bins:
        raise ValueError(f"psi needs at least bins={bins} reference values, got {reference.size}")
    edges = _edges(reference, bins)
    total = ring_allreduce(comm, _counts(np.asarray(recent, dtype=np.float64), edges))
    if total.sum() == 0:
        raise ValueError("no replica has recent values: nothing to compare with the reference")
    return psi_from_counts(total, _counts(reference, edges), eps)


def naive_ks(reference: np.ndarray, recent: np.ndarray) -> float:
    """D by evaluating both empirical CDFs at every observed value: O((n + m)^2), the definition."""
    a, b = np.asarray(reference, dtype=np.float64), np.asarray(recent, dtype=np.float64)
    xs = np.concatenate([a, b])
    return float(max(abs((a <= x).mean() - (b <= x).mean()) for x in xs))


def ks_statistic(reference: np.ndarray, recent: np.ndarray) -> float:
    """D = sup |F_a - F_b| in O((n + m) log(n + m)): both CDFs evaluated at every observed value."""
    a, b = np.sort(np.asarray(reference, dtype=np.float64)), np.sort(np.asarray(recent, dtype=np.float64))
    if a.size == 0 or b.size == 0:
        raise ValueError("ks_statistic needs at least one value on each side")
    xs = np.concatenate([a, b])
    fa = np.searchsorted(a, xs, side="right") / a.size
    fb = np.searchsorted(b, xs, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def ks_threshold(n: int, m: int, alpha: float = 0.01) -> float:
    """The asymptotic critical value c(alpha) sqrt((n + m) / (n m)), c = sqrt(-ln(alpha / 2) / 2)."""
    return float(np.sqrt(-np.log(alpha / 2) / 2) * np.sqrt((n + m) / (n * m)))


@dataclass
class DriftMonitor:
    """Slides a window of ``window`` recent values over a stream, testing every ``every`` values.

    ``statistic`` is "psi" or "ks"; an alarm is a test index where the statistic exceeds
    ``threshold`` (default: 0.25 for PSI, the alpha = 0.01 critical value for KS).
    """

    reference: np.ndarray
    window: int = 500
    every: int = 50
    statistic: str = "ks"
    threshold: float | None = None
    values: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.statistic not in ("psi", "ks"):
            raise ValueError(f"statistic must be 'psi' or 'ks', got {self.statistic!r}")
        if self.window < 2 or self.every < 1:
            raise ValueError("window must be at least 2 and every at least 1")
        if self.threshold is None:
            self.threshold = 0.25 if self.statistic == "psi" else ks_threshold(len(self.reference), self.window)

    def scan(self, stream: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, statistic values, alarm flags): tested at positions window, window + every, ..."""
        stream = np.asarray(stream, dtype=np.float64)
        stat = psi if self.statistic == "psi" else ks_statistic
        pos = np.arange(self.window, stream.size + 1, self.every)
        vals = np.array([stat(self.reference, stream[t - self.window:t]) for t in pos])
        self.values = vals.tolist()
        return pos, vals, vals > self.threshold


def detection_delay(positions: np.ndarray, alarms: np.ndarray, change_at: int) -> float:
    """Values seen after the change until the first alarm at or after it (inf if none)."""
    hit = positions[(positions > change_at) & alarms]
    return float(hit[0] - change_at) if hit.size else float("inf")


def false_alarm_rate(positions: np.ndarray, alarms: np.ndarray, change_at: int) -> float:
    """Share of tests whose whole window lies before the change that still raised an alarm."""
    before = positions <= change_at
    return float(alarms[before].mean()) if before.any() else 0.0
