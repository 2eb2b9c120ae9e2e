"""Synthetic clinical data from several hospital sites, each a pure function of its seed (Chapter 37).

Every site draws patients from one shared physiology and labels them with one logistic ground truth,
but the sites differ the way real hospitals do:

    patient mix      site k's outcome prevalence is pi_k (default evenly spaced from 0.10 to 0.40),
                     met exactly by case-control sampling: round(pi_k n_k) positives, the rest negatives
    covariate shift  each site has its own age mean and spread, BMI and glucose levels (``shift`` scales it)
    measurement      each site's instruments add a fixed offset per lab value (a glucose meter reading
                     high, a blood-pressure cuff reading low) and per-reading noise; the outcome depends
                     on the true values, the model sees the measured ones
    size             whatever ``sizes`` lists: a teaching hospital beside a rural clinic

The true risk of an outcome (think: an adverse cardiovascular event within five years) is

    logit P(y = 1 | x) = INTERCEPT + sum_j COEF_j s_j(x),    s_j = (x_j - centre_j) / scale_j,
    except creatinine, which enters as log(x / centre) / 0.3,

with (centre, scale) the consortium's agreed reference ranges ``REFERENCE``. Case-control sampling keeps
P(x | y) and moves only P(y), so a site's true logit is the shared one plus log-odds of its prior shift.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["FEATURES", "UNITS", "REFERENCE", "COEF", "INTERCEPT", "clinical_profiles", "clinical_sites",
           "clinical_split", "true_logit"]

FEATURES: tuple[str, ...] = ("age", "systolic_bp", "glucose", "bmi", "creatinine", "cholesterol", "hba1c",
                             "heart_rate")
UNITS: tuple[str, ...] = ("years", "mmHg", "mg/dL", "kg/m^2", "mg/dL", "mg/dL", "%", "bpm")
# (centre, scale) per feature: the reference ranges a consortium agrees on before training
REFERENCE = np.array([[55.0, 15.0], [130.0, 20.0], [110.0, 35.0], [28.0, 6.0], [1.0, 0.3], [200.0, 40.0],
                      [5.5, 0.8], [75.0, 12.0]])
COEF = np.array([0.9, 0.5, 0.35, 0.3, 0.5, 0.3, 0.4, 0.2])  # per standardised true value
INTERCEPT = -1.3
_OFFSET_SD = np.array([0.0, 5.0, 8.0, 0.6, 0.12, 10.0, 0.3, 3.0])  # site calibration bias, in the units
_NOISE_SD = np.array([0.0, 6.0, 6.0, 0.4, 0.06, 12.0, 0.15, 5.0])  # per reading; age is not measured


def _check_sites(sites: Any) -> int:
    if isinstance(sites, bool) or int(sites) != sites or sites < 1:
        raise ValueError(f"sites must be an integer >= 1 (the number of hospitals), got {sites!r}")
    return int(sites)


def _prevalences(sites: int, prevalence: Sequence[float] | None) -> np.ndarray:
    if prevalence is None:
        return np.array([0.25]) if sites == 1 else np.linspace(0.10, 0.40, sites)
    pi = np.asarray(prevalence, dtype=np.float64).reshape(-1)
    if len(pi) != sites or not np.all((pi > 0) & (pi < 1)):
        raise ValueError(f"prevalence must list {sites} outcome rates strictly between 0 and 1, one per site, "
                         f"got {list(prevalence)!r}")
    return pi


def clinical_profiles(sites: int, seed: int = 0, prevalence: Sequence[float] | None = None,
                      shift: float = 1.0) -> list[dict[str, Any]]:
    """What makes each site different: prevalence, age mean and spread, BMI and glucose shifts, offsets.

    ``shift`` = 0 makes every site draw the same patients with the same instruments (only the
    prevalence and the size still differ); 1 is the default skew; larger is stronger.
    """
    S = _check_sites(sites)
    if not shift >= 0:
        raise ValueError(f"shift must be >= 0 (0: identical sites, 1: the default skew), got {shift!r}")
    pi = _prevalences(S, prevalence)
    out = []
    for k in range(S):
        rng = np.random.default_rng([seed, k, 101])
        out.append({"site": k, "prevalence": float(pi[k]),
                    "age_mean": 55.0 + shift * 10.0 * rng.uniform(-1, 1), "age_sd": 10.0 + 4.0 * rng.uniform(),
                    "bmi_shift": shift * 3.0 * rng.uniform(-1, 1), "glucose_shift": shift * 10.0 * rng.uniform(-1, 1),
                    "offsets": shift * _OFFSET_SD * rng.standard_normal(len(FEATURES))})
    return out


def _true_patients(n: int, prof: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """n patients' true values, with the correlations of the physiology (BP and creatinine rise with age, ...)."""
    z = rng.standard_normal((n, 7))
    age = np.clip(prof["age_mean"] + prof["age_sd"] * z[:, 0], 18, 95)
    bmi = np.clip(27.0 + prof["bmi_shift"] + 5.0 * z[:, 1], 15, 60)
    sbp = 120.0 + 0.5 * (age - 55) + 0.8 * (bmi - 27) + 14.0 * z[:, 2]
    glucose = (100.0 + prof["glucose_shift"] + 1.8 * (bmi - 27) + 0.3 * (age - 55)) * np.exp(0.18 * z[:, 3])
    hba1c = (glucose + 46.7) / 28.7 + 0.3 * z[:, 4]  # the ADAG relation between mean glucose and HbA1c
    creatinine = 0.9 * np.exp(0.006 * (age - 55) + 0.22 * z[:, 5])
    cholesterol = 195.0 + 0.5 * (age - 55) + 35.0 * z[:, 6]
    heart_rate = 74.0 + 0.3 * (bmi - 27) + 11.0 * rng.standard_normal(n)
    return np.stack([age, sbp, glucose, bmi, creatinine, cholesterol, hba1c, heart_rate], axis=1)


def true_logit(X_true: np.ndarray) -> np.ndarray:
    """INTERCEPT + sum_j COEF_j s_j(x) on true (unmeasured) values: the population's log-odds of the outcome."""
    X_true = np.asarray(X_true, dtype=np.float64)
    if X_true.ndim != 2 or X_true.shape[1] != len(FEATURES):
        raise ValueError(f"X_true must be (n, {len(FEATURES)}) with columns {FEATURES}, got shape {X_true.shape}")
    s = (X_true - REFERENCE[:, 0]) / REFERENCE[:, 1]
    s[:, 4] = np.log(X_true[:, 4] / REFERENCE[4, 0]) / 0.3
    return INTERCEPT + s @ COEF


def clinical_sites(sizes: Sequence[int], seed: int = 0, prevalence: Sequence[float] | None = None,
                   shift: float = 1.0, dtype: Any = np.float64) -> list[tuple[np.ndarray, np.ndarray]]:
    """One (X, y) per site: X (n_k, 8) measured values in the order of FEATURES, y (n_k,) int64 in {0, 1}.

    Site k has exactly round(pi_k n_k) positives (case-control sampling from its own population, see the
    module); rows are in random order. A pure function of (sizes, seed, prevalence, shift).
    """
    sizes = list(sizes)
    if not sizes or any(isinstance(n, bool) or int(n) != n or n < 1 for n in sizes):
        raise ValueError(f"sizes must list one patient count >= 1 per site, got {sizes!r}")
    profiles = clinical_profiles(len(sizes), seed, prevalence, shift)
    out = []
    for k, (n, prof) in enumerate(zip(sizes, profiles)):
        rng = np.random.default_rng([seed, k, 202])
        n = int(n)
        need = np.array([n - int(round(prof["prevalence"] * n)), int(round(prof["prevalence"] * n))])
        kept: list[list[np.ndarray]] = [[], []]
        have = np.zeros(2, dtype=np.int64)
        for _ in range(10_000):  # draw the population in batches until both strata are full
            if np.all(have >= need):
                break
            batch = _true_patients(max(4 * n, 512), prof, rng)
            yb = (rng.random(len(batch)) < 1.0 / (1.0 + np.exp(-true_logit(batch)))).astype(np.int64)
            for c in (0, 1):
                take = batch[yb == c][:max(0, need[c] - have[c])]
                kept[c].append(take)
                have[c] += len(take)
        else:
            raise ValueError(f"site {k}: could not reach prevalence {prof['prevalence']:g}; choose a rate nearer 0.25")
        X_true = np.concatenate([np.concatenate(kept[0]), np.concatenate(kept[1])])
        y = np.repeat(np.array([0, 1], dtype=np.int64), need)
        order = rng.permutation(n)
        X_true, y = X_true[order], y[order]
        X = X_true + prof["offsets"] + _NOISE_SD * rng.standard_normal(X_true.shape)
        out.append((X.astype(dtype), y))
    return out


def clinical_split(sites: list[tuple[np.ndarray, np.ndarray]], test_fraction: float | Sequence[float] = 0.25,
                   seed: int = 0) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
    """Per site, a stratified split: floor(f_k n_c) of each class c to the test set, the rest to train.

    ``test_fraction`` is one f for every site or one f_k per site (to hold out the same number of patients
    at a large and a small site). Returns (train_sites, test_sites), in the sites' order, rows in order.
    """
    fracs = np.broadcast_to(np.asarray(test_fraction, dtype=np.float64), (len(sites),)) \
        if np.ndim(test_fraction) == 0 or len(test_fraction) == len(sites) else None
    if fracs is None or not np.all((fracs > 0) & (fracs < 1)):
        raise ValueError(f"test_fraction must be strictly between 0 and 1, one value or one per site "
                         f"({len(sites)}), got {test_fraction!r}")
    train, test = [], []
    for k, ((X, y), f) in enumerate(zip(sites, fracs)):
        if len(X) != len(y):
            raise ValueError(f"site {k}: X has {len(X)} rows but y has {len(y)}")
        rng = np.random.default_rng([seed, k, 303])
        held = np.zeros(len(y), dtype=bool)
        for c in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == c))
            held[idx[:int(np.floor(f * len(idx)))]] = True
        train.append((X[~held], y[~held]))
        test.append((X[held], y[held]))
    return train, test
