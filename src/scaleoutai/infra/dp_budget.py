"""A differential-privacy budget ledger across training runs on the same data (Chapter 35, Section 4).

Every DP-SGD run is T steps of the Poisson-subsampled Gaussian mechanism (sampling rate q, noise
multiplier sigma). Its Renyi DP of integer order lambda >= 2 per step is (Mironov, Talwar and Zhang 2019)

    eps_lambda(q, sigma) = 1/(lambda-1) log sum_{i=0}^{lambda} binom(lambda, i) (1-q)^{lambda-i} q^i
                                                   exp((i^2 - i) / (2 sigma^2)),

and RDP composes by addition at each order, within a run (T eps_lambda) and across runs on the same data:
the ledger keeps R(lambda) = sum over runs of T_j eps_lambda(q_j, sigma_j). It converts to (eps, delta)-DP
only at the end, with Balle et al. 2020 (the conversion Opacus uses),

    eps = min_lambda R(lambda) + log((lambda-1)/lambda) - (log delta + log lambda) / (lambda - 1),

which is far tighter than adding each run's eps (``naive_spent``). ``charge`` refuses a run that would
take eps above the budget and leaves the ledger as it was.
"""
from __future__ import annotations

import hmac
import json
import math
import os
from typing import Any

import numpy as np
from scipy.special import gammaln

from .integrity import IntegrityError, atomic_write, sign

__all__ = ["ORDERS", "BudgetExceeded", "rdp_subsampled_gaussian", "rdp_curve", "epsilon_from_rdp", "PrivacyLedger"]

ORDERS: tuple[int, ...] = tuple(range(2, 257))  # integer Renyi orders lambda


class BudgetExceeded(ValueError):
    """The run would spend more privacy than the ledger has left; nothing was charged."""


def rdp_subsampled_gaussian(q: float, sigma: float, order: int) -> float:
    """eps_lambda of one step of the Poisson-subsampled Gaussian, integer order >= 2 (see the module)."""
    if not 0 <= q <= 1 or not sigma >= 0:
        raise ValueError(f"need 0 <= q <= 1 and sigma >= 0, got q={q!r}, sigma={sigma!r}")
    if isinstance(order, bool) or int(order) != order or order < 2:
        raise ValueError(f"the ledger uses integer Renyi orders >= 2, got {order!r}")
    a = int(order)
    if q == 0:
        return 0.0
    if sigma == 0:
        return math.inf
    if q == 1:
        return a / (2 * sigma ** 2)
    i = np.arange(a + 1, dtype=np.float64)
    terms = (gammaln(a + 1) - gammaln(i + 1) - gammaln(a - i + 1) + i * math.log(q) + (a - i) * math.log1p(-q)
             + (i * i - i) / (2 * sigma ** 2))
    return float(np.logaddexp.reduce(terms)) / (a - 1)


def rdp_curve(q: float, sigma: float, steps: int, orders: Any = ORDERS) -> np.ndarray:
    """T eps_lambda(q, sigma) at every order: one run's RDP curve."""
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    return np.array([int(steps) * rdp_subsampled_gaussian(q, sigma, a) if steps else 0.0 for a in orders])


def epsilon_from_rdp(rdp: np.ndarray, orders: Any, delta: float) -> tuple[float, int]:
    """(eps, the order that attains it) from an RDP curve at ``delta`` (Balle et al. 2020, Theorem 21)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    lam = np.asarray(orders, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        eps = np.asarray(rdp, dtype=np.float64) - (math.log(delta) + np.log(lam)) / (lam - 1) + np.log((lam - 1) / lam)
    if np.all(np.isnan(eps)):
        return math.inf, int(lam[0])
    best = int(np.nanargmin(eps))
    return max(0.0, float(eps[best])), int(lam[best])


class PrivacyLedger:
    """The (eps, delta) budget of one data set, charged run by run in RDP. Chapter 35, Section 4."""

    def __init__(self, epsilon: float, delta: float, orders: Any = ORDERS):
        if not epsilon > 0:
            raise ValueError(f"the budget epsilon must be > 0, got {epsilon!r}")
        epsilon_from_rdp(np.zeros(1), [2], delta)  # checks delta
        self.epsilon, self.delta, self.orders = float(epsilon), float(delta), tuple(int(a) for a in orders)
        self.rdp = np.zeros(len(self.orders))
        self.runs: list[dict[str, Any]] = []

    def spent(self) -> float:
        """eps of every charged run together (0 before the first)."""
        return epsilon_from_rdp(self.rdp, self.orders, self.delta)[0] if self.runs else 0.0

    def naive_spent(self) -> float:
        """The loose alternative: each run converted to eps on its own, then the eps added (basic composition)."""
        return sum(epsilon_from_rdp(rdp_curve(r["q"], r["sigma"], r["steps"], self.orders), self.orders,
                                    self.delta)[0] for r in self.runs)

    def epsilon_with(self, q: float, sigma: float, steps: int) -> float:
        """eps if a run (q, sigma, steps) were charged now (the ledger does not change)."""
        return epsilon_from_rdp(self.rdp + rdp_curve(q, sigma, steps, self.orders), self.orders, self.delta)[0]

    def max_steps(self, q: float, sigma: float, cap: int = 10 ** 9) -> int:
        """The most steps of a (q, sigma) run that still fit in the budget (0 if none)."""
        if self.epsilon_with(q, sigma, 1) > self.epsilon:
            return 0
        lo, hi = 1, 2
        while hi < cap and self.epsilon_with(q, sigma, hi) <= self.epsilon:
            lo, hi = hi, min(2 * hi, cap)
        if hi == cap and self.epsilon_with(q, sigma, hi) <= self.epsilon:
            return cap
        while hi - lo > 1:  # invariant: lo fits, hi does not
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.epsilon_with(q, sigma, mid) <= self.epsilon else (lo, mid)
        return lo

    def charge(self, name: str, q: float, sigma: float, steps: int) -> float:
        """Record the run and return the new eps, or raise BudgetExceeded and record nothing."""
        after = self.epsilon_with(q, sigma, steps)
        if after > self.epsilon:
            raise BudgetExceeded(f"run {name!r} ({steps} steps, q={q:g}, sigma={sigma:g}) would bring epsilon to "
                                 f"{after:.3f}, over the budget {self.epsilon:g} at delta={self.delta:g} (spent so far "
                                 f"{self.spent():.3f}): at most {self.max_steps(q, sigma)} such steps fit; raise sigma, "
                                 f"lower q or train fewer steps")
        self.rdp = self.rdp + rdp_curve(q, sigma, steps, self.orders)
        self.runs.append({"name": str(name), "q": float(q), "sigma": float(sigma), "steps": int(steps)})
        return after

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "orders": list(self.orders), "runs": list(self.runs)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrivacyLedger":
        """Rebuild a ledger by charging its runs again (the RDP is recomputed, never trusted from the file)."""
        ledger = cls(data["epsilon"], data["delta"], data["orders"])
        for r in data["runs"]:
            ledger.rdp = ledger.rdp + rdp_curve(r["q"], r["sigma"], r["steps"], ledger.orders)
            ledger.runs.append(dict(r))
        return ledger

    def save(self, path: str | os.PathLike, key: bytes) -> None:
        """Atomically, with an HMAC so that a run deleted from the file by hand is caught on load."""
        body = self.to_dict()
        atomic_write(path, json.dumps(dict(body, hmac=sign(body, key)), indent=1).encode())

    @classmethod
    def load(cls, path: str | os.PathLike, key: bytes) -> "PrivacyLedger":
        """The ledger saved by ``save``, after its HMAC checks out (IntegrityError otherwise)."""
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        tag = data.pop("hmac", "")
        if not hmac.compare_digest(sign(data, key), str(tag)):
            raise IntegrityError(f"{path}: the ledger's HMAC does not match: it was edited (a run removed?) or the "
                                 f"key is wrong")
        return cls.from_dict(data)
