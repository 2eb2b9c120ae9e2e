"""An autoscaler that sizes replicas to a p99 latency SLO under a diurnal load, and what it costs
against static provisioning at the peak (Chapter 23, Section 7).

Load: a non-homogeneous Poisson process of rate lambda(t) = mean * (1 + amplitude sin(2 pi t / period))
times a noise factor drawn per ``noise_every`` seconds (lognormal, seeded), sampled by thinning.

Capacity: a replica is a FIFO server with exponential service of rate mu (Section 2); c replicas
behind one queue are M/M/c, whose sojourn time T = W + S has the closed-form tail
    P(T > t) = (1 - C) e^{-mu t} + C (theta e^{-mu t} - mu e^{-theta t}) / (theta - mu),
with C Erlang's C (``replicas.erlang_c``) and theta = c mu - lambda. ``max_rate(c)`` is the largest
lambda whose p99 meets the SLO (bisection); the capacity table is what a load test would give.

Autoscaler: every ``interval`` seconds it counts the arrivals of the last ``window`` seconds, asks for
the fewest replicas whose max_rate covers that rate times (1 + headroom), and adds replicas that serve
after ``cold_start`` seconds (loading the model) or retires replicas at once (a retired replica finishes
what it started). Serving replays the arrivals through one FIFO queue over the replicas up at each
moment (exact: each request starts on the replica free first). A replica is paid from the moment it is
asked for until it is retired and idle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .replicas import erlang_c


def diurnal_arrivals(duration: float, mean: float, amplitude: float = 0.6, period: float = 86400.0,
                     noise: float = 0.1, noise_every: float = 600.0, phase: float = -math.pi / 2,
                     seed: int = 0) -> np.ndarray:
    """Arrival times in [0, duration) of rate mean (1 + amplitude sin(2 pi t / period + phase)) * noise
    factor; phase -pi/2 starts the day at the trough."""
    if not (0 <= amplitude < 1 and mean > 0 and duration > 0):
        raise ValueError("need mean > 0, duration > 0 and 0 <= amplitude < 1")
    rng = np.random.default_rng(seed)
    factors = rng.lognormal(-noise ** 2 / 2, noise, size=int(duration // noise_every) + 1)
    top = mean * (1 + amplitude) * factors.max()
    t = np.cumsum(rng.exponential(1.0 / top, size=int(top * duration * 1.1) + 100))
    while t[-1] < duration:  # rare: extend the candidate process
        t = np.concatenate([t, t[-1] + np.cumsum(rng.exponential(1.0 / top, size=1000))])
    t = t[t < duration]
    keep = rng.uniform(size=t.size) * top < rate_at(t, mean, amplitude, period, phase) * factors[
        (t // noise_every).astype(int)]
    return t[keep]


def rate_at(t: np.ndarray | float, mean: float, amplitude: float, period: float = 86400.0,
            phase: float = -math.pi / 2) -> np.ndarray:
    """The noiseless diurnal rate mean (1 + amplitude sin(2 pi t / period + phase))."""
    return mean * (1 + amplitude * np.sin(2 * np.pi * np.asarray(t, dtype=float) / period + phase))


def mmc_sojourn_tail(t: float, c: int, lam: float, mu: float) -> float:
    """P(T > t) for the M/M/c FIFO sojourn time (module docstring)."""
    C, theta = erlang_c(c, lam, mu), c * mu - lam
    if abs(theta - mu) < 1e-12 * mu:
        hypo = (1 + mu * t) * math.exp(-mu * t)  # Erlang-2 limit
    else:
        hypo = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
    return (1 - C) * math.exp(-mu * t) + C * hypo


def max_rate(c: int, mu: float, slo: float, q: float = 0.99) -> float:
    """Largest arrival rate at which c replicas keep the q-quantile of latency within ``slo`` (0 if none)."""
    if mmc_sojourn_tail(slo, c, 0.0, mu) > 1 - q:
        return 0.0
    lo, hi = 0.0, c * mu * (1 - 1e-9)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mmc_sojourn_tail(slo, c, mid, mu) <= 1 - q else (lo, mid)
    return lo


def replicas_for(rate: float, mu: float, slo: float, q: float = 0.99, c_max: int = 10_000) -> int:
    """Fewest replicas c with max_rate(c) >= rate."""
    if math.exp(-mu * slo) > 1 - q:
        raise ValueError(f"no fleet meets it: one exponential service alone exceeds {slo} s with probability "
                         f"{math.exp(-mu * slo):.3f} > {1 - q:.3f}; the SLO must exceed {-math.log(1 - q) / mu:.3g} s")
    c = max(1, math.ceil(rate / mu))
    while max_rate(c, mu, slo, q) < rate:
        c += 1
        if c > c_max:
            raise ValueError(f"no fleet of up to {c_max} replicas meets a p{q * 100:g} of {slo} s at {rate}/s")
    return c


@dataclass
class ScaleResult:
    latency: np.ndarray         # per request, in arrival order
    schedule: np.ndarray        # (decision time, replicas asked for) per decision
    gpu_seconds: float          # paid replica time
    up: np.ndarray              # when each replica could serve
    paid_from: np.ndarray
    paid_to: np.ndarray

    def p99(self) -> float:
        return float(np.percentile(self.latency, 99))

    def cost(self, price_per_gpu_hour: float, gpus_per_replica: int = 1) -> float:
        return self.gpu_seconds / 3600 * price_per_gpu_hour * gpus_per_replica


def serve(arrivals: np.ndarray, services: np.ndarray, up: np.ndarray, down: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One FIFO queue over replicas that serve in [up_j, down_j): each request starts at the earliest
    max(arrival, free_j, up_j) < down_j. Returns (latencies, each replica's last finish)."""
    free = np.zeros(len(up))
    lat = np.empty(len(arrivals))
    for i, (a, s) in enumerate(zip(arrivals, services)):
        start = np.maximum(np.maximum(free, up), a)
        start[start >= down] = np.inf
        j = int(np.argmin(start))
        if not np.isfinite(start[j]):
            raise ValueError(f"request {i} at {a:.1f} s finds no replica up: the fleet has none")
        free[j] = start[j] + s
        lat[i] = free[j] - a
    return lat, free


def autoscale(arrivals: np.ndarray, services: np.ndarray, mu: float, slo: float, duration: float,
              interval: float = 300.0, window: float = 300.0, headroom: float = 0.2, cold_start: float = 120.0,
              min_replicas: int = 1, initial: int | None = None) -> ScaleResult:
    """Size the fleet every ``interval`` seconds from the last ``window``'s arrival rate (module docstring)."""
    up, down, asked = [], [], []
    start = initial or replicas_for(max(1e-9, np.sum(arrivals < window) / window) * (1 + headroom), mu, slo)
    for _ in range(start):
        up.append(0.0), down.append(math.inf), asked.append(0.0)
    schedule = [(0.0, start)]
    for t in np.arange(interval, duration, interval):
        rate = np.count_nonzero((arrivals >= t - window) & (arrivals < t)) / window
        want = max(min_replicas, replicas_for(rate * (1 + headroom), mu, slo))
        live = [j for j in range(len(up)) if down[j] == math.inf]
        if want > len(live):
            for _ in range(want - len(live)):
                up.append(t + cold_start), down.append(math.inf), asked.append(t)
        else:
            for j in sorted(live, key=lambda j: -up[j])[:len(live) - want]:  # the newest go first
                down[j] = t
        schedule.append((float(t), want))
    up_a, down_a = np.array(up), np.array(down)
    lat, last = serve(arrivals, services, up_a, down_a)
    paid_to = np.maximum(np.where(np.isinf(down_a), duration, down_a), last)  # retired, or the day ends, and idle
    return ScaleResult(lat, np.array(schedule, dtype=np.int64), float(np.sum(paid_to - np.array(asked))), up_a, np.array(asked),
                       paid_to)


def static(arrivals: np.ndarray, services: np.ndarray, replicas: int, duration: float) -> ScaleResult:
    """``replicas`` replicas up all the time (provisioning for the peak)."""
    up, down = np.zeros(replicas), np.full(replicas, math.inf)
    lat, last = serve(arrivals, services, up, down)
    paid_to = np.maximum(duration, last)
    return ScaleResult(lat, np.array([(0, replicas)]), float(np.sum(paid_to)), up, np.zeros(replicas), paid_to)
