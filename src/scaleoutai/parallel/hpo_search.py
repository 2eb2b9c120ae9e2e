"""Chapter 21: the shared parts of every HPO scheduler (search spaces, jobs, results) and random search.

A space maps a hyperparameter to (low, high) (uniform) or (low, high, 'log') (log-uniform). Every scheduler
derives from ``_Scheduler``: it samples trial configs with its own ``seed``, records results in arrival order,
and ``best()`` returns the best score at the highest rung any trial reached (ties: the older trial).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Job", "sample_config", "RandomSearch"]

Space = dict[str, tuple]
Trainable = Callable[[dict, np.ndarray, float, float], tuple[float, np.ndarray]]


@dataclass
class Job:
    """Train ``trial`` with ``config`` from resource r_from to r_to, starting from ``state``."""

    trial: int
    rung: int
    config: dict[str, float]
    r_from: float
    r_to: float
    state: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _check_space(space: Space) -> Space:
    if not space:
        raise ValueError("the search space is empty: give {name: (low, high)} or {name: (low, high, 'log')}")
    for k, b in space.items():
        log = len(b) == 3 and b[2] == "log"
        if len(b) not in (2, 3) or (len(b) == 3 and not log) or not b[0] <= b[1] or (log and b[0] <= 0):
            raise ValueError(f"space[{k!r}] = {b!r}: use (low, high) or (low, high, 'log') with low <= high "
                             f"(and low > 0 for 'log')")
    return space


def sample_config(space: Space, rng: np.random.Generator) -> dict[str, float]:
    """Uniform in [low, high], or log-uniform for (low, high, 'log'); keys drawn in sorted order."""
    out = {}
    for k in sorted(space):
        lo, hi = space[k][:2]
        out[k] = float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) if len(space[k]) == 3 \
            else float(rng.uniform(lo, hi))
        out[k] = min(max(out[k], lo), hi)  # exp(log(x)) may round just past a bound
    return out


class _Scheduler:
    def __init__(self, space: Space, seed: int):
        self.space = _check_space(space)
        self.keys = sorted(space)
        self.rng = np.random.default_rng(seed)
        self.configs: dict[int, dict[str, float]] = {}
        self.states: dict[int, np.ndarray] = {}
        self.results: list[tuple[int, int, float]] = []  # (trial, rung, score) in arrival order

    def _new_trial(self, config: dict[str, float] | None = None) -> int:
        t = len(self.configs)
        self.configs[t] = dict(config) if config else sample_config(self.space, self.rng)
        self.states[t] = np.zeros(0)
        return t

    def _record(self, trial: int, rung: int, score: float, state: Any) -> None:
        if trial not in self.configs:
            raise ValueError(f"on_result for unknown trial {trial}: trials come from next_job()")
        self.results.append((trial, rung, float(score)))
        if state is not None:
            self.states[trial] = np.asarray(state, dtype=np.float64)

    def best(self) -> tuple[int, dict[str, float], float]:
        if not self.results:
            raise ValueError("no results yet: run some jobs first")
        top = max(r for _, r, _ in self.results)
        t, _, s = max((x for x in self.results if x[1] == top), key=lambda x: (x[2], -x[0]))
        return t, self.configs[t], s


def _ranked(scores: dict[int, float]) -> list[int]:
    """Trials by decreasing score; ties go to the older (lower-numbered) trial."""
    return sorted(scores, key=lambda t: (-scores[t], t))


class RandomSearch(_Scheduler):
    """n_trials configs sampled with ``seed``, each trained to max_r."""

    def __init__(self, space: Space, n_trials: int, max_r: float, seed: int = 0):
        super().__init__(space, seed)
        self.n_trials, self.max_r = int(n_trials), float(max_r)

    def next_job(self) -> Job | None:
        if len(self.configs) >= self.n_trials:
            return None
        t = self._new_trial()
        return Job(t, 0, self.configs[t], 0.0, self.max_r)

    def on_result(self, trial: int, rung: int, score: float, state: Any = None) -> str:
        self._record(trial, rung, score, state)
        return "stop"
