"""Task graphs, the scripted planner and the schedule arithmetic of Chapter 32 (Agent orchestration).

A *plan* is a DAG of tool calls: task i calls tool ``tool`` with ``args`` and the results of its ``deps``.
The planner is a "model" with the interface of a chat client, ``invoke(messages) -> assistant message with
tool_calls``, but it is a small rule set, so every plan (and every test) is exact and nothing is downloaded.

Work and span (Chapter 32, Section 2): with c_i the cost of task i, the work is T_1 = sum_i c_i and the span
T_inf is the cost of the longest (critical) path. On K - 1 workers any schedule takes at least
max(T_inf, T_1 / (K - 1)), greedy list scheduling at most T_1 / (K - 1) + T_inf (Graham 1969), and the
speedup T_1 / T_K never exceeds T_1 / T_inf. ``list_schedule`` predicts the orchestrator's makespan exactly
when messages are free and nothing fails.
"""
from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Task", "Plan", "ScriptedPlanner", "plan_from_message", "random_plan", "work", "span",
           "critical_path", "list_schedule", "stable_hash"]


def stable_hash(*parts: Any) -> int:
    """A 32-bit hash that is the same in every process (Python's hash() of a str is salted per process)."""
    return zlib.crc32(json.dumps(parts, sort_keys=True).encode())


@dataclass(frozen=True)
class Task:
    """One tool call of a plan: ``tool(args, [results of deps])``; ``timeout`` in simulated seconds or None."""

    id: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    deps: tuple[str, ...] = ()
    timeout: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tool": self.tool, "args": self.args, "deps": list(self.deps), "timeout": self.timeout}


class Plan:
    """A validated DAG of tasks. ``order`` is the topological order that breaks ties by position in the plan
    (Kahn's algorithm), the order every executor of the chapter uses to pick among ready tasks."""

    def __init__(self, tasks: list[Task] | tuple[Task, ...]):
        self.tasks = tuple(tasks)
        self.by_id = {t.id: t for t in self.tasks}
        if len(self.by_id) != len(self.tasks):
            raise ValueError("a plan's task ids must be unique: rename the duplicated task")
        for t in self.tasks:
            missing = [d for d in t.deps if d not in self.by_id]
            if missing:
                raise ValueError(f"task {t.id!r} depends on unknown task(s) {missing}: add them to the plan")
        pos = {t.id: i for i, t in enumerate(self.tasks)}
        indeg = {t.id: len(t.deps) for t in self.tasks}
        self.children: dict[str, list[str]] = {t.id: [] for t in self.tasks}
        for t in self.tasks:
            for d in t.deps:
                self.children[d].append(t.id)
        order, ready = [], sorted((i for i, n in indeg.items() if n == 0), key=pos.get)
        while ready:
            i = ready.pop(0)
            order.append(i)
            for c in self.children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready = sorted(ready + [c], key=pos.get)
        if len(order) != len(self.tasks):
            cyc = sorted(i for i, n in indeg.items() if n > 0)
            raise ValueError(f"the plan has a cycle through {cyc}: a plan must be a DAG")
        self.order = tuple(order)

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"Plan({len(self)} tasks: {', '.join(self.order[:6])}{', ...' if len(self) > 6 else ''})"

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of the plan: a checkpoint is only resumed with the plan that wrote it."""
        text = json.dumps([t.as_dict() for t in self.tasks], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class ScriptedPlanner:
    """A deterministic stand-in for an LLM planner: ``invoke(messages)`` returns an assistant message
    ``{"role": "assistant", "content": ..., "tool_calls": [{"id", "name", "args", "depends_on"}, ...]}``.

    Rules, one per clause of the last user message (clauses separated by ';'):
    "research A, B and C" -> per topic search:X then summarize:X (fan-out), then merge (fan-in);
    "charge ACCOUNT AMOUNT" -> charge_card after merge; "save ..." -> write_record after merge (and the charge).
    ``timeout_factor``: each call's timeout is that many times its nominal cost ``cost(tool, args)``
    (default: the costs of ``default_toolbox``); None: no timeouts.
    """

    def __init__(self, cost: Callable[[str, dict], float] | None = None, timeout_factor: float | None = 4.0):
        self.cost = cost
        self.timeout_factor = timeout_factor

    def invoke(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        users = [m for m in messages if m.get("role") == "user"]
        if not users:
            raise ValueError("the planner needs at least one message with role 'user'")
        topics, charge, save, unknown = [], None, False, []
        for clause in (c.strip() for c in str(users[-1]["content"]).split(";")):
            if not clause:
                continue
            if m := re.fullmatch(r"(?i)(?:research|compare)\s+(.+?)\.?", clause):
                topics += [t.strip() for t in re.split(r",|\band\b", m.group(1)) if t.strip()]
            elif m := re.fullmatch(r"(?i)charge\s+(\S+)\s+\$?(\d+(?:\.\d{1,2})?)\.?", clause):
                charge = (m.group(1), int(round(float(m.group(2)) * 100)))
            elif re.match(r"(?i)(save|record|file)\b", clause):
                save = True
            else:
                unknown.append(clause)
        if unknown or not topics:
            why = f"I do not understand {unknown}" if unknown else "there is nothing to research"
            return {"role": "assistant", "content": f"I cannot plan this: {why}.", "tool_calls": []}
        calls: list[dict[str, Any]] = []
        for t in dict.fromkeys(topics):  # a topic named twice is researched once
            calls.append(self._call(f"search:{t}", "search", {"topic": t}, []))
            calls.append(self._call(f"summarize:{t}", "summarize", {"topic": t}, [f"search:{t}"]))
        calls.append(self._call("merge", "merge", {}, [c["id"] for c in calls if c["name"] == "summarize"]))
        if charge:
            calls.append(self._call("charge", "charge_card", {"account": charge[0], "amount_cents": charge[1]},
                                    ["merge"]))
        if save:
            calls.append(self._call("record", "write_record", {}, ["merge"] + (["charge"] if charge else [])))
        return {"role": "assistant", "content": f"Plan of {len(calls)} tool calls.", "tool_calls": calls}

    def _call(self, cid: str, name: str, args: dict, deps: list[str]) -> dict[str, Any]:
        timeout = None
        if self.timeout_factor is not None:
            if self.cost is None:
                from .orchestration_tools import default_toolbox  # the tools module imports this one

                box = default_toolbox()
                self.cost = lambda n, a: box[n].cost(a)
            timeout = round(self.timeout_factor * self.cost(name, args), 9)
        return {"id": cid, "name": name, "args": args, "depends_on": deps, "timeout": timeout}


def plan_from_message(message: dict[str, Any]) -> Plan:
    """The Plan in an assistant message's tool_calls; a reply without tool calls raises with its text."""
    calls = message.get("tool_calls") or []
    if not calls:
        raise ValueError(f"the model returned no tool calls: {message.get('content', '')!r}; rephrase the request")
    return Plan([Task(c["id"], c["name"], dict(c.get("args", {})), tuple(c.get("depends_on", ())), c.get("timeout"))
                 for c in calls])


def random_plan(n: int, width: int = 4, fan_in: int = 2, seed: int = 0, tool: str = "step") -> Plan:
    """A layered random DAG of n tasks, ``width`` per layer, each depending on up to ``fan_in`` tasks of the
    layer before; task costs come from ``args["cost"]`` in [0.1, 1.0] (tool ``step``). Section 7's workloads."""
    if n < 1 or width < 1 or fan_in < 0:
        raise ValueError(f"random_plan needs n >= 1, width >= 1, fan_in >= 0; got {n}, {width}, {fan_in}")
    rng = np.random.default_rng(seed)
    tasks: list[Task] = []
    prev: list[str] = []
    for lo in range(0, n, width):
        layer = []
        for i in range(lo, min(n, lo + width)):
            k = min(len(prev), int(rng.integers(1, fan_in + 1)) if fan_in else 0)
            deps = tuple(sorted(rng.choice(prev, size=k, replace=False).tolist())) if k else ()
            tasks.append(Task(f"t{i}", tool, {"cost": round(float(rng.uniform(0.1, 1.0)), 3)}, deps))
            layer.append(f"t{i}")
        prev = layer
    return Plan(tasks)


def work(plan: Plan, cost: Callable[[Task], float]) -> float:
    """T_1 = sum of the task costs: the time of one worker."""
    return float(sum(cost(t) for t in plan.tasks))


def critical_path(plan: Plan, cost: Callable[[Task], float]) -> tuple[float, list[str]]:
    """(T_inf, the tasks of a longest path): finish(i) = c_i + max over deps of finish(d)."""
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for i in plan.order:
        t = plan.by_id[i]
        best = max(t.deps, key=lambda d: finish[d], default=None)
        finish[i] = cost(t) + (finish[best] if best is not None else 0.0)
        via[i] = best
    if not finish:
        return 0.0, []
    end: str | None = max(plan.order, key=lambda i: finish[i])
    total, path = finish[end], []
    while end is not None:
        path.append(end)
        end = via[end]
    return float(total), path[::-1]


def span(plan: Plan, cost: Callable[[Task], float]) -> float:
    """T_inf, the cost of the critical path: the time of infinitely many workers."""
    return critical_path(plan, cost)[0]


def list_schedule(plan: Plan, cost: Callable[[Task], float], workers: int,
                  schedule: str = "greedy") -> tuple[float, dict[str, tuple[int, float, float]]]:
    """The makespan and {task: (worker, start, end)} of the orchestrator's policy with free messages.

    greedy: whenever a worker is idle, give it the first ready task in ``plan.order``; workers are taken
    lowest first. waves: dispatch only when every worker is idle (bulk-synchronous supersteps, as LangGraph
    runs a graph), so a wave lasts as long as its slowest task.
    """
    if workers < 1:
        raise ValueError(f"list_schedule needs at least one worker, got {workers}")
    if schedule not in ("greedy", "waves"):
        raise ValueError(f"schedule must be 'greedy' or 'waves', got {schedule!r}")
    now, done, out = 0.0, set(), {}
    running: dict[int, tuple[str, float]] = {}
    while len(done) < len(plan):
        if not (schedule == "waves" and running):
            idle = [w for w in range(workers) if w not in running]
            ready = [i for i in plan.order if i not in done and i not in out
                     and all(d in done for d in plan.by_id[i].deps)]
            for w, i in zip(idle, ready):
                running[w] = (i, now + cost(plan.by_id[i]))
                out[i] = (w, now, running[w][1])
        w = min(running, key=lambda r: (running[r][1], r))  # the orchestrator waits for the earliest finish
        i, now = running.pop(w)
        done.add(i)
    return max((e for _, _, e in out.values()), default=0.0), out
