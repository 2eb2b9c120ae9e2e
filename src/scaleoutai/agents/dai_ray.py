"""The contract net on Ray actors (Chapter 27, Section 5): each contractor is an actor, the driver manages.

The same protocol as ``dai.contract_net``: per phase the driver announces each pending task to every live
actor (``bid``), awards it to the lowest bid (``award``), then has every actor execute what it won, one
call per task, and collects the results contractor by contractor. An actor that dies (``ray.kill``, a lost
node) makes its pending calls raise RayActorError; its unreported tasks are re-announced to the survivors
in the next phase. Bids come from the same ``make_bid`` and costs, so the allocation equals ours.
Needs a running Ray (``ray.init``); Ray is imported here, not at module import.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from .dai import _check, _cost, make_bid, task_value

__all__ = ["ray_contract_net"]


def ray_contract_net(tasks: np.ndarray, contractors: np.ndarray, capacity: int | None = None, load: float = 0.0,
                     kill: tuple[int, int] | None = None, seconds_per_cost: float = 0.05,
                     timeout: float = 60.0) -> dict[str, Any]:
    """Run the contract net with one Ray actor per contractor. ``kill=(c, n)``: ``ray.kill`` contractor
    c's actor as soon as n of its phase-0 results are ready, while it works on the next task. The record's
    ``died`` maps each contractor lost while executing to the number of results it reported first."""
    import ray

    tasks, contractors = np.asarray(tasks, dtype=np.float64), np.asarray(contractors, dtype=np.float64)
    _check(tasks, capacity, load)

    @ray.remote(num_cpus=0)
    class Contractor:
        def __init__(self, me: np.ndarray):
            self.me, self.held, self.work = me, 0, 0.0  # its capability stays inside the actor

        def bid(self, task: np.ndarray) -> float:
            return make_bid(_cost(task, self.me), self.work, self.held, capacity, load)

        def award(self, task: np.ndarray) -> None:
            self.held, self.work = self.held + 1, self.work + _cost(task, self.me)

        def execute(self, task: np.ndarray) -> float:
            time.sleep(_cost(task, self.me) * seconds_per_cost)  # the work itself
            self.held, self.work = self.held - 1, self.work - _cost(task, self.me)
            return task_value(task)

    actors = {c: Contractor.remote(contractors[c]) for c in range(len(contractors))}
    alive, T = list(actors), len(tasks)
    pending, done_by, values, awards, lost, phase, died = list(range(T)), {}, {}, [], [], 0, {}
    while pending and alive:
        held: dict[int, list[int]] = {c: [] for c in alive}
        for t in pending:
            bids = []
            for c, ref in [(c, actors[c].bid.remote(tasks[t])) for c in list(alive)]:
                try:
                    bids.append((ray.get(ref, timeout=timeout), c))
                except ray.exceptions.RayActorError:
                    alive.remove(c)
                    lost += held.pop(c)
            finite = [(b, c) for b, c in bids if np.isfinite(b)]
            if finite:
                b, c = min(finite)
                actors[c].award.remote(tasks[t])  # calls from one caller run in order: the next bid sees it
                held[c].append(t)
                awards.append((phase, t, c, b))
        refs = {c: [actors[c].execute.remote(tasks[t]) for t in held[c]] for c in alive}
        if kill is not None and phase == 0 and kill[0] in refs:
            ray.get(refs[kill[0]][:kill[1]], timeout=timeout)
            ray.kill(actors[kill[0]])  # mid-task: its next call is running, the rest are queued
        for c in list(alive):
            for k, (t, ref) in enumerate(zip(held[c], refs[c])):
                try:
                    values[t] = ray.get(ref, timeout=timeout)
                except ray.exceptions.RayActorError:
                    alive.remove(c)
                    lost += held[c][k:]
                    died[c] = k  # it reported k results this phase
                    break
                done_by[t] = c
        pending = [t for t in range(T) if t not in done_by]
        phase += 1
    for a in actors.values():
        ray.kill(a)
    return {"done_by": done_by, "values": values, "awards": awards, "phases": phase, "alive": alive,
            "reannounced": sorted(set(lost)), "died": died}
