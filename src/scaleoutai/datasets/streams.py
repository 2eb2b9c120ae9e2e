"""Streams, each a pure function of its seed (Appendix D).

    Events, generate_events  keyed events in arrival order, some out of order, some late    (Ch9)
    drifting_regression      micro-batches of y = x . w_t + noise, w_t rotating per batch  (Ch9)
    shifted_stream           N(0, 1) values that change distribution at a known point     (Ch26)

``Events`` is the record ``data.streaming`` windows: three aligned columns plus the one-array message
encoding (``pack`` / ``unpack``) a shuffle sends.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Events:
    """A stream in arrival order: event time (int64 ms), key (int64), value (float64)."""

    time: np.ndarray
    key: np.ndarray
    value: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "time", np.asarray(self.time, dtype=np.int64).reshape(-1))
        object.__setattr__(self, "key", np.asarray(self.key, dtype=np.int64).reshape(-1))
        object.__setattr__(self, "value", np.asarray(self.value, dtype=np.float64).reshape(-1))
        if not len(self.time) == len(self.key) == len(self.value):
            raise ValueError(f"Events needs time, key and value of one length, got "
                             f"{len(self.time)}, {len(self.key)}, {len(self.value)}")
        if len(self.time) and self.time.min() < 0:
            raise ValueError("event times are ms since the epoch and must be >= 0 (the first watermark is 0)")

    def __len__(self) -> int:
        return len(self.time)

    def __getitem__(self, index: slice | np.ndarray) -> "Events":
        return Events(self.time[index], self.key[index], self.value[index])

    def pack(self) -> np.ndarray:
        """One (n, 3) float64 message; times below 2^53 ms and integer keys survive exactly."""
        return np.stack([self.time, self.key, self.value], axis=1).astype(np.float64)

    @staticmethod
    def unpack(arr: np.ndarray) -> "Events":
        arr = np.asarray(arr, dtype=np.float64).reshape(-1, 3)
        return Events(arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2])

    @staticmethod
    def concat(parts: Sequence["Events"]) -> "Events":
        if not parts:
            return Events([], [], [])
        return Events(*(np.concatenate([getattr(p, a) for p in parts]) for a in ("time", "key", "value")))


def generate_events(n: int, keys: int = 8, rate: float = 1000.0, disorder_ms: int = 200,
                    lateness: float = 0.05, late_ms: int = 5_000, seed: int = 0) -> Events:
    """n events arriving at ``rate`` per second; event time = arrival time - delay.

    Most delays are uniform in [0, disorder_ms) (out of order, not late); a fraction ``lateness`` of
    events is delayed by [late_ms, 2 late_ms) (late for any allowed lateness below late_ms). Key k's
    values are normal with mean k, so per-key means are easy to read (Chapter 9, Section 2).
    """
    if n < 0 or keys < 1 or rate <= 0 or disorder_ms < 0 or late_ms < 0 or not 0 <= lateness <= 1:
        raise ValueError("need n >= 0, keys >= 1, rate > 0, disorder_ms >= 0, late_ms >= 0, 0 <= lateness <= 1")
    rng = np.random.default_rng(seed)
    arrival = 2 * late_ms + disorder_ms + np.arange(n) * (1000.0 / rate)
    delay = rng.uniform(0, disorder_ms, n)
    late = rng.random(n) < lateness
    delay[late] = rng.uniform(late_ms, 2 * late_ms, late.sum())
    key = rng.integers(0, keys, n)
    return Events(np.floor(arrival - delay).astype(np.int64), key, key + rng.normal(0.0, 1.0, n))


def drifting_regression(n_batches: int, batch_size: int, dim: int = 2, drift: float = 0.02,
                        noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, W): features (n_batches, b, d), targets (n_batches, b), the true weights per batch (n_batches, d).

    w_t is w_0 rotated by drift * t radians in the plane of the first two coordinates, so a model fitted
    once goes stale at a known rate (Chapter 9, Section 7).
    """
    if n_batches < 1 or batch_size < 1 or dim < 2:
        raise ValueError("need n_batches >= 1, batch_size >= 1 and dim >= 2 (the drift rotates two coordinates)")
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=dim)
    W = np.repeat(w0[None, :], n_batches, axis=0)
    angle = drift * np.arange(n_batches)
    W[:, 0] = np.cos(angle) * w0[0] - np.sin(angle) * w0[1]
    W[:, 1] = np.sin(angle) * w0[0] + np.cos(angle) * w0[1]
    X = rng.normal(size=(n_batches, batch_size, dim))
    y = np.einsum("nbd,nd->nb", X, W) + noise * rng.normal(size=(n_batches, batch_size))
    return X, y, W


def shifted_stream(n: int, change_at: int, shift: float = 0.5, scale: float = 1.0, seed: int = 0
                   ) -> np.ndarray:
    """N(0, 1) values, then N(shift, scale^2) from ``change_at`` on: a stream with one known change
    for a drift detector to find (Chapter 26, Section 6)."""
    if not 0 <= change_at <= n:
        raise ValueError(f"change_at must lie in [0, n={n}], got {change_at}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    x[change_at:] = shift + scale * x[change_at:]
    return x
