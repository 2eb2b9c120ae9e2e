"""Byzantine-robust aggregation rules and the attacks they face (Chapter 35, Sections 2 and 4).

K workers send K vectors v_1..v_K of d numbers; up to f of them are Byzantine (arbitrary, colluding,
omniscient). A rule maps the (K, d) stack to one vector:

    mean           (1/K) sum_i v_i                                   one attacker moves it anywhere
    median         coordinate-wise median                            f < K/2 (Yin et al. 2018)
    trimmed_mean   per coordinate, drop the f smallest and f largest, average the K - 2f left   f < K/2
    krum           v_i* with i* = argmin_i sum of ||v_i - v_j||^2 over the K - f - 2 nearest j != i
                   (Blanchard et al. 2017)                           K > 2f + 2
    multi_krum     the average of the m vectors of smallest Krum score (m = 1: Krum; m = K: the mean)

Invariants the tests check, for at most f attackers: median and trimmed mean lie coordinate-wise in the
range of the honest vectors; Krum's choice lies within sqrt(K - f - 2) * Delta of some honest vector,
Delta the largest distance between two honest vectors. Every rule computes in float64 and returns the
input's dtype; an entry that is not a finite number (NaN, +-inf) is read as +inf, so it sorts last and is
trimmed like any outlier, and gives its sender an infinite Krum score. Ties in Krum's scores go to the
lower index.
"""
from __future__ import annotations

from statistics import NormalDist
from typing import Any, Callable

import numpy as np

__all__ = ["RULES", "ATTACKS", "mean", "coordinate_median", "trimmed_mean", "krum_scores", "krum", "multi_krum",
           "aggregate", "check_f", "sign_flip", "gaussian_noise", "little_is_enough", "inner_product",
           "attack_vectors", "alie_z"]

RULES: tuple[str, ...] = ("mean", "median", "trimmed_mean", "krum", "multi_krum")


def _stack(vectors: Any) -> tuple[np.ndarray, np.dtype]:
    V = np.asarray(vectors)
    if V.ndim != 2 or V.shape[0] < 1:
        raise ValueError(f"vectors must be a (K, d) array of K >= 1 vectors, got shape {V.shape}")
    if V.dtype.kind not in "fiu":
        raise ValueError(f"vectors must hold real numbers, got dtype {V.dtype}")
    dtype = V.dtype if V.dtype.kind == "f" else np.dtype(np.float64)
    V64 = V.astype(np.float64)
    return np.where(np.isfinite(V64), V64, np.inf), dtype


def check_f(rule: str, K: int, f: int) -> None:
    """ValueError unless ``rule`` is defined for f attackers among K: 2f < K (median, trimmed mean),
    K > 2f + 2 (Krum, multi-Krum); the mean takes any f and tolerates none."""
    if isinstance(f, bool) or int(f) != f or f < 0:
        raise ValueError(f"f (the number of attackers to tolerate) must be an integer >= 0, got {f!r}")
    if rule in ("median", "trimmed_mean") and not 2 * f < K:
        raise ValueError(f"{rule} tolerates f < K/2 attackers; got f={f} of K={K}: use more workers or assume fewer")
    if rule in ("krum", "multi_krum") and not K > 2 * f + 2:
        raise ValueError(f"{rule} needs K > 2f + 2 workers; got K={K}, f={f}: use at least {2 * f + 3} workers")
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: choose one of {RULES}")


def mean(vectors: Any) -> np.ndarray:
    """(1/K) sum_i v_i: the non-robust baseline."""
    V, dtype = _stack(vectors)
    return V.mean(axis=0).astype(dtype)


def coordinate_median(vectors: Any) -> np.ndarray:
    """Per coordinate, the median of the K values (the mean of the two middle ones for even K)."""
    V, dtype = _stack(vectors)
    return np.median(V, axis=0).astype(dtype)


def trimmed_mean(vectors: Any, f: int) -> np.ndarray:
    """Per coordinate: sort the K values, drop the f smallest and the f largest, average the K - 2f left."""
    V, dtype = _stack(vectors)
    check_f("trimmed_mean", len(V), f)
    K, f = len(V), int(f)
    return np.sort(V, axis=0)[f:K - f].mean(axis=0).astype(dtype)


def krum_scores(vectors: Any, f: int) -> np.ndarray:
    """score_i = sum of the K - f - 2 smallest ||v_i - v_j||^2 over j != i (float64, shape (K,))."""
    V, _ = _stack(vectors)
    check_f("krum", len(V), f)
    with np.errstate(invalid="ignore", over="ignore"):
        D = ((V[:, None, :] - V[None, :, :]) ** 2).sum(axis=-1)  # exact differences, no Gram-matrix cancellation
    D = np.where(np.isnan(D), np.inf, D)
    np.fill_diagonal(D, np.inf)  # a vector is never its own neighbour
    return np.sort(D, axis=1)[:, :len(V) - int(f) - 2].sum(axis=1)


def krum(vectors: Any, f: int) -> np.ndarray:
    """The vector of smallest Krum score (the lower index on a tie), returned as a copy."""
    return multi_krum(vectors, f, 1)


def multi_krum(vectors: Any, f: int, m: int | None = None) -> np.ndarray:
    """The average of the m vectors of smallest Krum score (default m = K - f), ties to the lower index."""
    V, dtype = _stack(vectors)
    K = len(V)
    m = K - int(f) if m is None else m
    if isinstance(m, bool) or int(m) != m or not 1 <= m <= K:
        raise ValueError(f"multi-Krum averages m vectors with 1 <= m <= K={K}; got m={m!r}")
    chosen = np.argsort(krum_scores(V, f), kind="stable")[:int(m)]
    return V[np.sort(chosen)].mean(axis=0).astype(dtype)


def aggregate(vectors: Any, rule: str, f: int, m: int | None = None) -> np.ndarray:
    """Apply ``rule`` (one of RULES) to the (K, d) stack, after checking that it is defined for f."""
    V = np.asarray(vectors)
    if V.ndim != 2:
        raise ValueError(f"vectors must be a (K, d) array, got shape {V.shape}")
    check_f(rule, len(V), f)
    if rule == "mean":
        return mean(V)
    if rule == "median":
        return coordinate_median(V)
    if rule == "trimmed_mean":
        return trimmed_mean(V, f)
    if rule == "krum":
        return krum(V, f)
    return multi_krum(V, f, m)


# --- attacks: honest is the (h, d) stack of the honest vectors, n the number of attackers ---------------

def sign_flip(honest: np.ndarray, n: int, rng: np.random.Generator, scale: float = 4.0) -> np.ndarray:
    """Every attacker sends -scale times the honest mean: the descent direction reversed and amplified."""
    return np.tile(-scale * honest.mean(axis=0), (n, 1))


def gaussian_noise(honest: np.ndarray, n: int, rng: np.random.Generator, sigma: float = 100.0) -> np.ndarray:
    """Each attacker sends its own draw of N(0, sigma^2 I) (Blanchard et al. 2017's Gaussian attack)."""
    return sigma * rng.standard_normal((n, honest.shape[1]))


def alie_z(K: int, n: int) -> float:
    """Baruch et al. 2019: s = floor(K/2 + 1) - n honest workers must be out-voted; z = Phi^-1((K - s)/K)."""
    s = K // 2 + 1 - n
    return NormalDist().inv_cdf(min(max((K - s) / K, 1e-6), 1 - 1e-6))


def little_is_enough(honest: np.ndarray, n: int, rng: np.random.Generator, z: float | None = None) -> np.ndarray:
    """"A little is enough": mu - z sigma per coordinate (honest mean and standard deviation), sent by all.

    Small enough to hide inside the honest spread, so median, trimmed mean and Krum keep choosing it."""
    z = alie_z(len(honest) + n, n) if z is None else z
    return np.tile(honest.mean(axis=0) - z * honest.std(axis=0), (n, 1))


def inner_product(honest: np.ndarray, n: int, rng: np.random.Generator, eps: float = 0.5) -> np.ndarray:
    """Inner-product manipulation (Xie et al. 2020): -eps times the honest mean, so <aggregate, g> < 0 is the goal."""
    return np.tile(-eps * honest.mean(axis=0), (n, 1))


ATTACKS: dict[str, Callable[..., np.ndarray]] = {"sign_flip": sign_flip, "gaussian": gaussian_noise,
                                                 "alie": little_is_enough, "ipm": inner_product}


def attack_vectors(attack: str, honest: np.ndarray, n: int, rng: np.random.Generator, **params: Any) -> np.ndarray:
    """The (n, d) vectors the n colluding attackers send, given the honest stack (omniscient attackers).

    ``attack`` "none" means the attackers behave: the caller sends their honest vectors instead."""
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}: choose one of {tuple(ATTACKS)} (or 'none')")
    honest = np.asarray(honest, dtype=np.float64)
    if honest.ndim != 2 or len(honest) < 1:
        raise ValueError(f"attacks need the (h, d) stack of at least one honest vector, got shape {honest.shape}")
    return ATTACKS[attack](honest, int(n), rng, **params)
