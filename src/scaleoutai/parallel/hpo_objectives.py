"""Chapter 21: objectives with a known optimum, to check that a search finds it.

``curve_*``: a synthetic learning curve whose order of configs is the same at every resource r;
``toy_*``: the toy problem of the PBT paper (Jaderberg et al., 2017), where exploiting weights pays off.
A trainable has the signature ``score, state = trainable(config, state, r_from, r_to)``.
"""
from __future__ import annotations

import math

import numpy as np

from .hpo_search import Space

__all__ = ["CURVE_SPACE", "CURVE_OPTIMUM", "curve_quality", "curve_score", "curve_trainable", "TOY_SPACE",
           "toy_trainable"]

CURVE_SPACE: Space = {"lr": (1e-4, 1.0, "log"), "momentum": (0.0, 0.99)}
CURVE_OPTIMUM = {"lr": 1e-2, "momentum": 0.9}


def curve_quality(config: dict[str, float]) -> float:
    """q = 1 - (log10 lr + 2)^2 / 4 - (momentum - 0.9)^2: maximal (1) at lr = 0.01, momentum = 0.9."""
    return 1.0 - 0.25 * (math.log10(config["lr"]) + 2.0) ** 2 - (config["momentum"] - 0.9) ** 2


def curve_score(config: dict[str, float], r: float, tau: float = 10.0) -> float:
    """Synthetic learning curve q(config) - exp(-r / tau): configs keep one order at every resource r."""
    return curve_quality(config) - math.exp(-r / tau)


def curve_trainable(config: dict[str, float], state: np.ndarray, r_from: float, r_to: float
                    ) -> tuple[float, np.ndarray]:
    return curve_score(config, r_to), state


TOY_SPACE: Space = {"h0": (0.0, 1.0), "h1": (0.0, 1.0)}


def toy_trainable(config: dict[str, float], state: np.ndarray, r_from: float, r_to: float,
                  lr: float = 0.05) -> tuple[float, np.ndarray]:
    """PBT paper's toy: gradient ascent on the surrogate 1.2 - h0 t0^2 - h1 t1^2 for r_to - r_from steps;
    the score is the true objective Q(theta) = 1.2 - t0^2 - t1^2 (optimum 1.2 at theta = 0)."""
    theta = np.array(state if len(state) else (0.9, 0.9), dtype=np.float64)
    h = np.array([config["h0"], config["h1"]])
    for _ in range(int(round(r_to - r_from))):
        theta -= lr * 2.0 * h * theta
    return 1.2 - float(theta @ theta), theta
