"""Timing harness of Chapter 5: warm up, repeat, report the median with its spread and a 95% CI.

Speed is measured here and in benchmarks/, never asserted in tests: a timing is a sample from a
noisy distribution (caches, frequency scaling, other processes), so report a robust centre (the
median), a spread (IQR, std) and an interval, and say how many repeats it came from.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_BOOT_RESAMPLES = 2000
_BOOT_SEED = 0


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclass(frozen=True)
class Timing:
    """Repeated timings of one call, in seconds. ``str(t)`` reads "12.3 ms ± 0.4 ms (median of 5, IQR 0.6 ms)"
    where ± is the sample standard deviation."""

    times: tuple[float, ...]

    def __post_init__(self) -> None:
        t = tuple(float(x) for x in self.times)
        if not t:
            raise ValueError("Timing needs at least one measured time")
        if not all(np.isfinite(x) and x >= 0 for x in t):
            raise ValueError(f"times must be finite and >= 0 seconds, got {t}")
        object.__setattr__(self, "times", t)

    @property
    def median(self) -> float:
        return float(np.median(self.times))

    @property
    def mean(self) -> float:
        return float(np.mean(self.times))

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof = 1); 0 for a single repeat."""
        return float(np.std(self.times, ddof=1)) if len(self.times) > 1 else 0.0

    @property
    def min(self) -> float:
        return float(np.min(self.times))

    @property
    def iqr(self) -> float:
        q25, q75 = np.percentile(self.times, [25, 75])
        return float(q75 - q25)

    @property
    def ci95(self) -> tuple[float, float]:
        """Percentile-bootstrap 95% interval of the median (2000 resamples, seed 0, so it is reproducible).

        Chosen over the normal interval of the mean because timings are skewed (rare slow outliers).
        With one repeat the interval collapses to that time.
        """
        t = np.asarray(self.times)
        rng = np.random.default_rng(_BOOT_SEED)
        meds = np.median(t[rng.integers(0, t.size, size=(_BOOT_RESAMPLES, t.size))], axis=1)
        lo, hi = np.percentile(meds, [2.5, 97.5])
        return float(lo), float(hi)

    def __str__(self) -> str:
        return (f"{_fmt(self.median)} ± {_fmt(self.std)} "
                f"(median of {len(self.times)}, IQR {_fmt(self.iqr)})")


def measure(fn: Callable[..., Any], *args: Any, warmup: int = 1, repeats: int = 5,
            timer: Callable[[], float] = time.perf_counter, **kwargs: Any) -> Timing:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``repeats`` times timed (Ch 5).

    Warm-up runs absorb one-off costs (imports, allocation, JIT, caches) that are not the steady
    state. ``timer`` defaults to time.perf_counter; pass another clock to time something else
    (e.g. a simulated clock). fn must not take keyword arguments named warmup, repeats or timer.
    """
    if not callable(fn):
        raise ValueError(f"measure needs a callable to time, got {type(fn).__name__}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a whole number >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeats):
        start = timer()
        fn(*args, **kwargs)
        times.append(timer() - start)
    return Timing(tuple(times))
