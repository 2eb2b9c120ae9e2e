"""Performance models of Chapter 3: speedup, efficiency, Amdahl, Gustafson, Karp-Flatt, stragglers,
roofline, and the cost side of Chapter 5 (scaling tables, run cost).

Notation (Appendix C): K or p workers, T_1 the one-worker time, T_p the time on p workers,
S_p = T_1 / T_p, E_p = S_p / p. Every function takes scalars or NumPy arrays (broadcast together)
and returns a float for scalar input.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _check as ck


def speedup(t1: Any, tp: Any) -> Any:
    """S_p = T_1 / T_p (Ch 3)."""
    return ck.out(ck.positive("t1", t1) / ck.positive("tp", tp))


def efficiency(t1: Any, tp: Any, p: Any) -> Any:
    """E_p = S_p / p = T_1 / (p T_p) (Ch 3); 1 means perfect scaling."""
    return ck.out(ck.positive("t1", t1) / ck.positive("tp", tp) / ck.workers(p))


def amdahl_speedup(serial_fraction: Any, p: Any) -> Any:
    """Fixed problem size: S_p = 1 / (s + (1 - s) / p), bounded by 1/s as p grows (Ch 3)."""
    s = ck.fraction("serial_fraction", serial_fraction)
    return ck.out(1.0 / (s + (1.0 - s) / ck.workers(p)))


def gustafson_speedup(serial_fraction: Any, p: Any) -> Any:
    """Problem grown with p (scaled speedup): S_p = p - s (p - 1), linear in p (Ch 3)."""
    s = ck.fraction("serial_fraction", serial_fraction)
    p = ck.workers(p)
    return ck.out(p - s * (p - 1.0))


def karp_flatt(speedup: Any, p: Any) -> Any:
    """Experimentally determined serial fraction e = (1/S_p - 1/p) / (1 - 1/p), p > 1 (Ch 3).

    For a program that obeys Amdahl's law e equals s at every p; an e that grows with p points at
    overhead (communication, imbalance) rather than at a fixed serial part.
    """
    s = ck.positive("speedup", speedup)
    p = ck.workers(p, minimum=2)
    return ck.out((1.0 / s - 1.0 / p) / (1.0 - 1.0 / p))


def straggler_step_time(times: Any) -> Any:
    """Synchronous step time: every worker waits for the slowest, so T_step = max_k t_k (axis -1)."""
    t = ck.non_negative("times", times)
    if t.ndim == 0:
        raise ValueError("times must hold one time per worker along the last axis, got a single number")
    return ck.out(t.max(axis=-1))


def expected_max_normal(mu: float, sigma: float, p: int, samples: int = 200_000, seed: int = 0) -> float:
    """E[max of p iid N(mu, sigma^2) step times] by Monte Carlo with a fixed seed (Ch 3 straggler model).

    Grows like mu + sigma * sqrt(2 ln p): the more workers a synchronous step waits for, the longer
    it takes, even though no single worker got slower. p = 2 gives mu + sigma / sqrt(pi) exactly.
    """
    mu_ = float(ck.as_float("mu", mu))
    sigma_ = float(ck.non_negative("sigma", sigma))
    p_ = int(ck.workers(p))
    n = int(ck.workers(samples, name="samples"))
    rng = np.random.default_rng(seed)
    total, done = 0.0, 0
    chunk = max(1, 4_000_000 // p_)  # bounded memory for large p
    while done < n:
        m = min(chunk, n - done)
        total += rng.standard_normal((m, p_)).max(axis=1).sum()
        done += m
    return mu_ + sigma_ * total / n


def roofline(intensity: Any, peak_flops: float, peak_bandwidth: float) -> Any:
    """Attainable FLOP/s = min(peak_flops, I * peak_bandwidth), I in FLOP per byte moved (Ch 3)."""
    i = ck.non_negative("intensity", intensity)
    return ck.out(np.minimum(ck.positive("peak_flops", peak_flops),
                             i * ck.positive("peak_bandwidth", peak_bandwidth)))


def ridge_point(peak_flops: float, peak_bandwidth: float) -> float:
    """Intensity (FLOP/byte) where the roofline bends: below it memory-bound, above compute-bound."""
    return ck.out(ck.positive("peak_flops", peak_flops) / ck.positive("peak_bandwidth", peak_bandwidth))


def run_cost(price_per_hour: Any, workers: Any, seconds: Any) -> Any:
    """Cost of a run on ``workers`` machines billed at ``price_per_hour`` each: price * K * seconds / 3600."""
    return ck.out(ck.non_negative("price_per_hour", price_per_hour) * ck.non_negative("workers", workers)
                  * ck.non_negative("seconds", seconds) / 3600.0)


def scaling_table(times: dict[int, float], baseline: float | None = None) -> list[dict[str, float]]:
    """Rows {p, time, speedup, efficiency} sorted by p (Ch 5 scaling sweep).

    Without ``baseline`` the reference is the run at the smallest p0 (p0 = 1 when present):
    S_p = T_p0 / T_p and E_p = S_p * p0 / p, so the reference row reads S = E = 1.
    An explicit ``baseline`` is a one-worker time T_1 (e.g. the serial program): S_p = T_1 / T_p,
    E_p = S_p / p.
    """
    if not isinstance(times, dict) or not times:
        raise ValueError("times must be a non-empty dict {workers p: seconds}, e.g. {1: 8.0, 2: 4.1}")
    ps = sorted(times)
    ck.workers(ps, name="the keys of times (worker counts)")
    ck.positive("the values of times (seconds)", [times[p] for p in ps])
    if baseline is None:
        ref_t, ref_p = float(times[ps[0]]), int(ps[0])
    else:
        ref_t, ref_p = float(ck.positive("baseline", baseline)), 1
    rows = []
    for p in ps:
        s = ref_t / float(times[p])
        rows.append({"p": int(p), "time": float(times[p]), "speedup": s, "efficiency": s * ref_p / int(p)})
    return rows
