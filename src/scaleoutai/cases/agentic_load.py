"""Many agent sessions on a service of K machines: the latency model of Chapter 40, Section 7.

Resources ("pools"): ``workers`` (the K - 1 tool ranks of Chapter 32's orchestrator; 1 when K = 1) run
read, calculator and respond; ``index`` lanes run retrievals, each one scatter-gather over the K shards
(a shard serves ``lanes`` queries at once, one per core); the ``engine`` is the continuous-batching LLM
server of Chapter 24, passed in as a function. A session arrives, its planner call goes to a planner
replica (another such function; without one, each planner call takes ``AgentCosts.llm_seconds`` alone),
then its tool calls become ready.

``schedule_sessions`` is greedy list scheduling with release times: whenever a lane of a pool is idle it
takes the ready call of that pool that comes first in ``order`` (sessions by arrival, each session's calls
in plan order), lanes lowest first, and time moves to the earliest finish or release. With one pool, no
planner and every release at 0, it is Chapter 32's ``list_schedule`` exactly (tested), and so the
orchestrator's makespan on a free network. Generation requests leave the pools for the engine when their
inputs are ready; the engine returns when each finishes; ``respond`` then takes respond_s.
``reference_service`` is the sequential baseline: one machine, one session after another, one call at a time.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .agentic import AgentCosts

__all__ = ["POOLS", "Span", "ServiceRun", "schedule_sessions", "sequential_seconds", "reference_service",
           "percentiles", "stage_means"]

POOLS = {"retrieve": "index", "generate": "engine"}  # every other tool runs on "workers"
Engine = Callable[[list[tuple[float, str, int, int]]], list[float]]


@dataclass(frozen=True)
class Span:
    session: str
    stage: str  # planner, a tool name, or "engine" (queueing and generation in the LLM server)
    start: float
    end: float
    lane: str = ""  # "workers/0", "index/3", ...


@dataclass
class ServiceRun:
    arrival: dict[str, float]
    end: dict[str, float]
    spans: list[Span] = field(default_factory=list)

    @property
    def latency(self) -> np.ndarray:
        """End-to-end seconds per session, in session order of arrival."""
        return np.array([self.end[s] - self.arrival[s] for s in sorted(self.arrival, key=self.arrival.get)])

    @property
    def makespan(self) -> float:
        return max(self.end.values()) - min(self.arrival.values())


def _pool(tool: str, pools: dict[str, int], engine: Engine | None) -> str:
    name = POOLS.get(tool, "workers")
    if name == "engine" and engine is not None:
        return "engine"
    return name if name in pools else "workers"


def schedule_sessions(plans: dict[str, list[dict]], arrivals: dict[str, float], costs: AgentCosts,
                      pools: dict[str, int], engine: Engine | None = None, order: list[str] | None = None,
                      planner: bool = True, planner_engine: Engine | None = None) -> ServiceRun:
    """Greedy list scheduling of every session's tool calls on the pools (module docstring).

    plans: session -> its tool calls (the planner's output); pools: {"workers": lanes, "index": lanes};
    engine(requests) with requests [(ready_s, session, prompt_tokens, max_new)] -> finish times, for the
    generation calls; planner_engine the same for the planner calls (None: each planner call alone).
    """
    if set(plans) != set(arrivals) or pools.get("workers", 0) < 1 or min(pools.values()) < 1:
        raise ValueError("schedule_sessions needs an arrival per plan and at least one lane per pool, "
                         f"a 'workers' pool included; got pools {pools}")
    calls = {c["id"]: (sid, c) for sid in plans for c in plans[sid]}
    sessions = sorted(plans, key=lambda s: (arrivals[s], s))
    order = order or [c["id"] for s in sessions for c in plans[s]]
    if sorted(order) != sorted(calls):
        raise ValueError("order must name every tool call of the plans exactly once")
    prio = {i: n for n, i in enumerate(order)}
    run = ServiceRun(dict(arrivals), {})
    release = dict(arrivals)
    if planner:
        reqs = [(arrivals[s], s, *costs.planner_tokens(len(plans[s]))) for s in sessions]
        ends = planner_engine(reqs) if planner_engine else [t + costs.llm_seconds(p, n) for t, _, p, n in reqs]
        for (t, s, _, _), end in zip(reqs, ends):
            release[s] = end
            run.spans.append(Span(s, "planner", t, end))
    left = {i: len(c["depends_on"]) for i, (_, c) in calls.items()}
    children: dict[str, list[str]] = {i: [] for i in calls}
    for i, (_, c) in calls.items():
        for d in c["depends_on"]:
            children[d].append(i)
    idle = {p: list(range(n)) for p, n in pools.items()}
    waiting = [(release[calls[i][0]], prio[i], i) for i in calls if left[i] == 0]
    heapq.heapify(waiting)
    ready: dict[str, list] = {p: [] for p in pools}
    running: list = []
    gen_ready: dict[str, tuple[float, dict]] = {}
    now = 0.0
    while True:
        while waiting and waiting[0][0] <= now:
            _, pr, i = heapq.heappop(waiting)
            sid, c = calls[i]
            pool = _pool(c["name"], pools, engine)
            if pool == "engine":  # leaves the pools: the engine serves it after this loop
                gen_ready[sid] = (now, c)
                continue
            heapq.heappush(ready[pool], (pr, i))
        for pool in pools:
            while idle[pool] and ready[pool]:
                lane, (_, i) = heapq.heappop(idle[pool]), heapq.heappop(ready[pool])
                sid, c = calls[i]
                end = now + costs.tool_seconds(c["name"], c["args"])
                run.spans.append(Span(sid, c["name"], now, end, f"{pool}/{lane}"))
                heapq.heappush(running, (end, pool, lane, i))
        next_release = waiting[0][0] if waiting else math.inf
        if running and not (next_release < running[0][0] and any(idle[p] for p in pools)):
            now, pool, lane, i = heapq.heappop(running)
            heapq.heappush(idle[pool], lane)
            sid = calls[i][0]
            run.end[sid] = max(run.end.get(sid, now), now)
            for ch in children[i]:
                left[ch] -= 1
                if left[ch] == 0:
                    heapq.heappush(waiting, (release[calls[ch][0]], prio[ch], ch))
        elif next_release < math.inf:
            now = max(now, next_release)
        else:
            break
    if gen_ready:
        reqs = [(t, s, c["args"]["prompt_tokens"], c["args"]["max_new"]) for s, (t, c) in sorted(gen_ready.items())]
        for (t, s, _, _), fin in zip(reqs, engine(reqs)):
            run.spans.append(Span(s, "engine", t, fin))
            run.spans.append(Span(s, "respond", fin, fin + costs.respond_s))
            run.end[s] = fin + costs.respond_s
    return run


def sequential_seconds(calls: list[dict], costs: AgentCosts) -> float:
    """One session on one machine: the planner call, then every tool call one after another, alone."""
    p_in, p_out = costs.planner_tokens(len(calls))
    return costs.llm_seconds(p_in, p_out) + sum(costs.tool_seconds(c["name"], c["args"]) for c in calls)


def reference_service(arrivals: list[float], seconds: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The sequential baseline: FIFO, one session at a time; start_i = max(a_i, end_{i-1}). (start, end)."""
    if len(arrivals) != len(seconds):
        raise ValueError("reference_service needs one service time per arrival")
    start, end, t = np.zeros(len(arrivals)), np.zeros(len(arrivals)), -math.inf
    for n in np.argsort(arrivals, kind="stable"):
        start[n] = max(arrivals[n], t)
        end[n] = t = start[n] + seconds[n]
    return start, end


def percentiles(x: np.ndarray | list[float], qs: tuple[float, ...] = (50, 95, 99)) -> dict[float, float]:
    """Nearest-rank percentiles: the q-th is the ceil(q n / 100)-th smallest value (a value that occurred)."""
    v = np.sort(np.asarray(x, dtype=np.float64))
    if v.size == 0 or any(not 0 < q <= 100 for q in qs):
        raise ValueError("percentiles needs at least one value and 0 < q <= 100")
    return {q: float(v[max(1, math.ceil(q * v.size / 100)) - 1]) for q in qs}


def stage_means(run: ServiceRun) -> dict[str, float]:
    """Mean seconds per session spent in each stage's spans (overlapping calls of a session add up)."""
    out: dict[str, float] = {}
    for s in run.spans:
        out[s.stage] = out.get(s.stage, 0.0) + (s.end - s.start)
    return {k: v / len(run.arrival) for k, v in out.items()}
