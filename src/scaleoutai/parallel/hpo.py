"""Chapter 21: distributed hyperparameter optimization from scratch: random search, successive halving,
ASHA and population-based training, scheduled by rank 0 while ranks 1..K-1 evaluate.

Every scheduler is a plain object with one small API (a higher score is better):
    job = sched.next_job()                 # a Job to start now, or None (nothing runnable right now)
    sched.on_result(trial, rung, score, state) -> "promote" | "continue" | "stop" | "exploit"
    sched.best() -> (trial, config, score)  # best score at the highest rung any trial reached
and a worker runs a job with a trainable: ``score, state = trainable(config, state, r_from, r_to)``.

Rungs: r_k = min_r eta^k for k = 0..s, s = floor(log_eta(max_r / min_r)) (resource: epochs, steps).
Successive halving (synchronous): n trials at r_0; once all n_k results of rung k are in, the top
    max(1, floor(n_k / eta)) continue to r_{k+1}, the rest stop: one barrier per rung.
ASHA (Li et al., 2020), no barrier: whenever a worker is free, look at rungs k = s-1, ..., 0 and promote the
    best trial that is in the top floor(n_k / eta) of the n_k results seen so far at rung k and has not been
    promoted from k yet; if there is none, start a new trial at r_0 (until max_trials). on_result returns
    "promote" (the trial is promotable now), "continue" (paused at rung k: it can still be promoted as
    rung k fills up) or "stop" (it finished the top rung).
PBT (Jaderberg et al., 2017): members train ``interval`` steps per generation; on each result a member in the
    bottom ``quantile`` of the latest scores copies weights and hyperparameters of a random member of the
    top quantile (exploit) and multiplies each hyperparameter by a factor drawn from ``factors`` (explore).

The driver ``hpo_run`` is asynchronous in the ASHA sense: a worker gets its next job as soon as it reports.
Rank 0 handles completions in the order of their virtual finish times (start + time_per_unit (r_to -
r_from)), which is the order the simulator's clocks produce; so every backend, and ``run_serial``, sees the
same sequence of results and the outcome is deterministic.
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..cluster import Comm

__all__ = ["Job", "sample_config", "rung_resources", "RandomSearch", "SuccessiveHalving", "ASHA", "PBT",
           "CURVE_SPACE", "CURVE_OPTIMUM", "curve_quality", "curve_score", "curve_trainable", "TOY_SPACE",
           "toy_trainable", "hpo_run", "run_serial"]

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


def rung_resources(min_r: float, max_r: float, eta: int) -> list[float]:
    """[min_r, min_r eta, ..., min_r eta^s] with s = floor(log_eta(max_r / min_r))."""
    if not (min_r > 0 and max_r >= min_r and int(eta) == eta and eta >= 2):
        raise ValueError(f"need 0 < min_r <= max_r and an integer eta >= 2, got {min_r}, {max_r}, {eta}")
    out = [float(min_r)]
    while out[-1] * eta <= max_r * (1 + 1e-12):
        out.append(out[-1] * eta)
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
    """Asynchronous successive halving (promotion rule in the module docstring)."""

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


# --- objectives with a known optimum -------------------------------------------------------------

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


# --- the driver ----------------------------------------------------------------------------------

def _schedule(sched: Any, n_workers: int, time_per_unit: float, dispatch: Callable, collect: Callable
              ) -> tuple[list[tuple], float]:
    """Rank 0's loop: keep every free worker busy, then take the completion with the earliest virtual
    finish time (ties: lower rank). Returns the history (time, worker, trial, rung, r_to, score, decision)."""
    now, busy, idle, history = 0.0, {}, list(range(1, n_workers + 1)), []
    while True:
        while idle:
            job = sched.next_job()
            if job is None:
                break
            w = idle.pop(0)
            dispatch(w, job)
            busy[w] = (now + time_per_unit * (job.r_to - job.r_from), job)
        if not busy:
            return history, now
        w = min(busy, key=lambda q: (busy[q][0], q))
        now, job = busy.pop(w)
        score, state = collect(w, job)
        history.append((now, w, job.trial, job.rung, job.r_to, score,
                        sched.on_result(job.trial, job.rung, score, state)))
        bisect.insort(idle, w)


def run_serial(sched: Any, n_workers: int, trainable: Trainable = curve_trainable, time_per_unit: float = 1.0
               ) -> dict[str, Any]:
    """Single-process reference of ``hpo_run``: the same loop with ``n_workers`` virtual workers."""
    if n_workers < 1:
        raise ValueError(f"need n_workers >= 1, got {n_workers}")
    history, makespan = _schedule(sched, n_workers, time_per_unit, lambda w, job: None,
                                  lambda w, job: trainable(job.config, job.state, job.r_from, job.r_to))
    return {"history": history, "best": sched.best(), "makespan": makespan}


def hpo_run(comm: Comm, sched: Any, trainable: Trainable = curve_trainable, time_per_unit: float = 1.0
            ) -> dict[str, Any]:
    """Rank 0 schedules with ``sched``; ranks 1..K-1 evaluate jobs, each spending comm.compute(time_per_unit
    (r_to - r_from)). Rank 0 returns {history, best, makespan}; a worker returns how many jobs it ran.
    On real processes every rank holds its own copy of ``sched``: read the outcome from rank 0's value."""
    if comm.size < 2:
        raise ValueError("hpo_run needs K >= 2 ranks: rank 0 schedules, ranks 1..K-1 evaluate")
    nk = len(sched.keys)
    if comm.rank > 0:
        n = 0
        while True:
            msg = comm.recv(0)
            if msg.size == 0:  # the stop message
                return {"jobs": n}
            r_from, r_to = float(msg[2]), float(msg[3])
            comm.compute(time_per_unit * (r_to - r_from))
            score, state = trainable(dict(zip(sched.keys, map(float, msg[4:4 + nk]))), msg[4 + nk:], r_from, r_to)
            comm.send(np.concatenate([[float(score)], np.asarray(state, dtype=np.float64)]), 0)
            n += 1

    def dispatch(w: int, job: Job) -> None:
        head = [job.trial, job.rung, job.r_from, job.r_to] + [job.config[k] for k in sched.keys]
        comm.send(np.concatenate([np.array(head, dtype=np.float64), job.state]), w)

    def collect(w: int, job: Job) -> tuple[float, np.ndarray]:
        msg = comm.recv(w)
        return float(msg[0]), msg[1:]

    history, makespan = _schedule(sched, comm.size - 1, time_per_unit, dispatch, collect)
    for w in range(1, comm.size):
        comm.send(np.zeros(0), w)
    return {"history": history, "best": sched.best(), "makespan": makespan}
