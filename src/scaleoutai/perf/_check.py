"""Input checks shared by the perf modules: one readable line per bad input."""
from __future__ import annotations

from typing import Any

import numpy as np


def as_float(name: str, x: Any) -> np.ndarray:
    """``x`` as a float array; ValueError naming ``name`` if it is not numeric or not finite."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {x!r}") from None
    if arr.size == 0:
        raise ValueError(f"{name} is empty: pass at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return arr


def positive(name: str, x: Any) -> np.ndarray:
    arr = as_float(name, x)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return arr


def non_negative(name: str, x: Any) -> np.ndarray:
    arr = as_float(name, x)
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {x!r}")
    return arr


def workers(x: Any, minimum: int = 1, name: str = "p") -> np.ndarray:
    """A worker count (or array of them): whole numbers >= ``minimum``."""
    arr = as_float(name, x)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} is a number of workers and must be a whole number, got {x!r}")
    if np.any(arr < minimum):
        raise ValueError(f"{name} is a number of workers and must be >= {minimum}, got {x!r}")
    return arr


def fraction(name: str, x: Any) -> np.ndarray:
    arr = as_float(name, x)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} is a fraction of the work and must lie in [0, 1], got {x!r}")
    return arr


def out(x: np.ndarray) -> Any:
    """A Python float for scalar results, the array otherwise."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x
