"""Chapter 21: population-based training (Jaderberg et al., 2017), asynchronous.

Members train ``interval`` steps per generation; on each result a member in the bottom ``quantile`` of the
latest scores copies weights and hyperparameters of a random member of the top quantile (exploit) and
multiplies each hyperparameter by a factor drawn from ``factors`` (explore).
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from .hpo_search import Job, Space, _ranked, _Scheduler

__all__ = ["PBT"]


class PBT(_Scheduler):
    """Asynchronous population-based training; ``exploits`` logs (member, generation, source) copies."""

    def __init__(self, space: Space, population: int, generations: int, interval: float,
                 quantile: float = 0.25, factors: tuple[float, ...] = (0.8, 1.2), seed: int = 0,
                 init_state: Any = None, configs: list[dict[str, float]] | None = None):
        super().__init__(space, seed)
        if population < 2 or generations < 1 or not 0 <= quantile <= 0.5 or interval <= 0:
            raise ValueError("need population >= 2, generations >= 1, interval > 0 and 0 <= quantile <= 0.5")
        if configs is not None and len(configs) != population:
            raise ValueError(f"configs lists {len(configs)} members, population is {population}")
        self.generations, self.interval, self.factors = int(generations), float(interval), tuple(factors)
        self.n_q = int(quantile * population)  # members in each of the bottom and top quantiles
        for m in range(population):
            self._new_trial(configs[m] if configs else None)
            self.states[m] = np.zeros(0) if init_state is None else np.array(init_state, dtype=np.float64)
        self.latest: dict[int, float] = {}
        self.ready = deque(range(population))
        self.exploits: list[tuple[int, int, int]] = []

    def next_job(self) -> Job | None:
        if not self.ready:
            return None
        m = self.ready.popleft()
        g = sum(1 for t, _, _ in self.results if t == m)
        return Job(m, g, self.configs[m], g * self.interval, (g + 1) * self.interval, self.states[m])

    def explore(self, config: dict[str, float]) -> dict[str, float]:
        """config[k] * f with f drawn uniformly from ``factors``, clipped to the space's bounds."""
        return {k: float(np.clip(v * self.factors[self.rng.integers(len(self.factors))], *self.space[k][:2]))
                for k, v in sorted(config.items())}

    def on_result(self, trial: int, rung: int, score: float, state: Any = None) -> str:
        self._record(trial, rung, score, state)
        self.latest[trial] = float(score)
        if rung + 1 >= self.generations:
            return "stop"
        self.ready.append(trial)
        order = _ranked(self.latest)
        if self.n_q and len(order) >= 2 * self.n_q and trial in order[-self.n_q:]:
            src = order[int(self.rng.integers(self.n_q))]
            self.states[trial] = self.states[src].copy()
            self.configs[trial] = self.explore(self.configs[src])
            self.exploits.append((trial, rung, src))
            return "exploit"
        return "continue"
