"""Chapter 21: successive halving (synchronous) and ASHA (asynchronous successive halving).

Rungs: r_k = min_r eta^k for k = 0..s, s = floor(log_eta(max_r / min_r)) (resource: epochs, steps).
Successive halving: n trials at r_0; once all n_k results of rung k are in, the top max(1, floor(n_k / eta))
    continue to r_{k+1}, the rest stop: one barrier per rung.
ASHA (Li et al., 2020), no barrier: whenever a worker is free, look at rungs k = s-1, ..., 0 and promote the
    best trial that is in the top floor(n_k / eta) of the n_k results seen so far at rung k and has not been
    promoted from k yet; if there is none, start a new trial at r_0 (until max_trials).
"""
from __future__ import annotations

from collections import deque
from typing import Any

from .hpo_search import Job, Space, _ranked, _Scheduler

__all__ = ["rung_resources", "SuccessiveHalving", "ASHA"]


def rung_resources(min_r: float, max_r: float, eta: int) -> list[float]:
    """[min_r, min_r eta, ..., min_r eta^s] with s = floor(log_eta(max_r / min_r))."""
    if not (min_r > 0 and max_r >= min_r and int(eta) == eta and eta >= 2):
        raise ValueError(f"need 0 < min_r <= max_r and an integer eta >= 2, got {min_r}, {max_r}, {eta}")
    out = [float(min_r)]
    while out[-1] * eta <= max_r * (1 + 1e-12):
        out.append(out[-1] * eta)
    return out


class SuccessiveHalving(_Scheduler):
    """Synchronous successive halving; ``survivors[k]`` lists the trials that ran at rung k."""

    def __init__(self, space: Space, n_trials: int, eta: int, min_r: float, max_r: float, seed: int = 0):
        super().__init__(space, seed)
        self.eta, self.r = int(eta), rung_resources(min_r, max_r, eta)
        self.survivors = [[self._new_trial() for _ in range(int(n_trials))]]
        self.queue = deque(self.survivors[0])
        self.scores: list[dict[int, float]] = [{}]

    def next_job(self) -> Job | None:
        if not self.queue:
            return None  # the barrier: wait for the whole rung
        t, k = self.queue.popleft(), len(self.survivors) - 1
        return Job(t, k, self.configs[t], self.r[k - 1] if k else 0.0, self.r[k], self.states[t])

    def on_result(self, trial: int, rung: int, score: float, state: Any = None) -> str:
        self._record(trial, rung, score, state)
        self.scores[rung][trial] = float(score)
        if rung == len(self.r) - 1:
            return "stop"
        if len(self.scores[rung]) == len(self.survivors[rung]):
            keep = _ranked(self.scores[rung])[:max(1, len(self.survivors[rung]) // self.eta)]
            self.survivors.append(keep)
            self.scores.append({})
            self.queue.extend(keep)
        return "continue"


class ASHA(_Scheduler):
    """Asynchronous successive halving (promotion rule in the module docstring). on_result returns "promote"
    (the trial is promotable now), "continue" (paused at rung k: it can still be promoted as rung k fills up)
    or "stop" (it finished the top rung)."""

    def __init__(self, space: Space, eta: int, min_r: float, max_r: float, max_trials: int, seed: int = 0):
        super().__init__(space, seed)
        self.eta, self.r, self.max_trials = int(eta), rung_resources(min_r, max_r, eta), int(max_trials)
        self.scores: list[dict[int, float]] = [{} for _ in self.r]
        self.promoted: list[set[int]] = [set() for _ in self.r]

    def promotable(self, k: int) -> list[int]:
        """Top floor(n_k / eta) of the results seen at rung k, minus those already promoted, best first."""
        top = _ranked(self.scores[k])[:len(self.scores[k]) // self.eta]
        return [t for t in top if t not in self.promoted[k]]

    def next_job(self) -> Job | None:
        for k in reversed(range(len(self.r) - 1)):
            cand = self.promotable(k)
            if cand:
                t = cand[0]
                self.promoted[k].add(t)
                return Job(t, k + 1, self.configs[t], self.r[k], self.r[k + 1], self.states[t])
        if len(self.configs) < self.max_trials:
            t = self._new_trial()
            return Job(t, 0, self.configs[t], 0.0, self.r[0])
        return None

    def on_result(self, trial: int, rung: int, score: float, state: Any = None) -> str:
        self._record(trial, rung, score, state)
        self.scores[rung][trial] = float(score)
        if rung == len(self.r) - 1:
            return "stop"
        return "promote" if trial in self.promotable(rung) else "continue"
