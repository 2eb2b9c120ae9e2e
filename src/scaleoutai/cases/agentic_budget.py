"""The budget of one agent request: its predicted latency and cost, and the degradation rule (Chapter 40,
Sections 2 and 4).

An LLM call of p prompt and n new tokens, alone on its server, takes n t_fixed + (p + n - 1) t_token
(``AgentCosts.llm_seconds``). The predicted latency of a request is its planner call plus the critical path
of its plan, every call alone; its cost is tokens x ``usd_per_token`` plus the CPU machine-seconds of its
tools x the CPU price (a retrieval occupies every index shard). ``decide`` serves a request at the first
level of a degradation ladder (fewer passages per hop, a shorter answer) whose prediction fits the
request's latency and cost budget, and refuses it when none does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .agentic import AgentCosts, AgentPlanner, Level

__all__ = ["critical_path", "Prediction", "predict", "Budget", "Decision", "decide"]


def critical_path(calls: list[dict], seconds: Callable[[dict], float]) -> tuple[float, list[str]]:
    """(T_inf, the ids of a longest path) of tool calls in a topological order: finish = own + max over deps."""
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for c in calls:
        best = max(c["depends_on"], key=lambda d: finish[d], default=None)
        finish[c["id"]] = seconds(c) + (finish[best] if best is not None else 0.0)
        via[c["id"]] = best
    end = max(finish, key=finish.get, default=None)
    total, path = (finish[end] if end else 0.0), []
    while end is not None:
        path.append(end)
        end = via[end]
    return float(total), path[::-1]


@dataclass(frozen=True)
class Prediction:
    latency_s: float  # planner call + critical path of the plan
    cost_usd: float  # tokens x usd_per_token + CPU machine-seconds x CPU price
    tokens: int  # planner prompt + output, generation prompt + output
    cpu_seconds: float  # machine-seconds of the CPU tools (a retrieval occupies index_machines)
    stages: dict[str, float]  # seconds on the critical path per stage: planner, retrieve, read, ...


def predict(calls: list[dict], costs: AgentCosts) -> Prediction:
    """The budget accounting of one request whose plan is ``calls`` (Section 2), every call alone."""
    if not calls:
        raise ValueError("predict needs the tool calls of a plan: the planner returned none")
    sec = lambda c: costs.tool_seconds(c["name"], c["args"])  # noqa: E731
    span_s, path = critical_path(calls, sec)
    p_in, p_out = costs.planner_tokens(len(calls))
    by_id = {c["id"]: c for c in calls}
    stages = {"planner": costs.llm_seconds(p_in, p_out)}
    for i in path:
        stages[by_id[i]["name"]] = stages.get(by_id[i]["name"], 0.0) + sec(by_id[i])
    gen = [c for c in calls if c["name"] == "generate"]
    tokens = p_in + p_out + sum(c["args"]["prompt_tokens"] + c["args"]["max_new"] for c in gen)
    cpu = sum(sec(c) * (costs.index_machines if c["name"] == "retrieve" else 1)
              for c in calls if c["name"] != "generate")
    return Prediction(stages["planner"] + span_s, tokens * costs.usd_per_token + cpu * costs.cpu_usd_per_hour / 3600,
                      tokens, cpu, stages)


@dataclass(frozen=True)
class Budget:
    latency_s: float = math.inf
    cost_usd: float = math.inf


@dataclass(frozen=True)
class Decision:
    status: str  # "full", "degraded" or "refused"
    level: Level | None  # None when refused
    prediction: Prediction  # of the chosen level (of the cheapest when refused)


def decide(question: str, budget: Budget, ladder: list[Level], costs: AgentCosts, sid: str = "q0") -> Decision:
    """The first level of ``ladder`` whose predicted latency and cost both fit ``budget``: "full" for the
    first, "degraded" for a later one; "refused" when even the last does not fit."""
    if not ladder:
        raise ValueError("decide needs a ladder of at least one Level, the full service first")
    pred = None
    for i, level in enumerate(ladder):
        pred = predict(AgentPlanner(costs, level).calls(question, sid), costs)
        if pred.latency_s <= budget.latency_s and pred.cost_usd <= budget.cost_usd:
            return Decision("full" if i == 0 else "degraded", level, pred)
    return Decision("refused", None, pred)
