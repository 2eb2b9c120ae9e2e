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

Modules (this one re-exports them all, so ``from scaleoutai.parallel import hpo`` gives every name):
    hpo_search      Job, search spaces, the scheduler base and RandomSearch
    hpo_halving     rung_resources, SuccessiveHalving, ASHA
    hpo_pbt         PBT
    hpo_objectives  the curve and toy objectives with a known optimum
    hpo             the driver: hpo_run over the communicator and its serial reference run_serial
"""
from __future__ import annotations

import bisect
from typing import Any, Callable

import numpy as np

from ..cluster import Comm
from .hpo_halving import ASHA, SuccessiveHalving, rung_resources
from .hpo_objectives import (CURVE_OPTIMUM, CURVE_SPACE, TOY_SPACE, curve_quality, curve_score, curve_trainable,
                             toy_trainable)
from .hpo_pbt import PBT
from .hpo_search import Job, RandomSearch, Space, Trainable, sample_config  # noqa: F401 (Space: re-export)

__all__ = ["Job", "sample_config", "rung_resources", "RandomSearch", "SuccessiveHalving", "ASHA", "PBT",
           "CURVE_SPACE", "CURVE_OPTIMUM", "curve_quality", "curve_score", "curve_trainable", "TOY_SPACE",
           "toy_trainable", "hpo_run", "run_serial"]


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
