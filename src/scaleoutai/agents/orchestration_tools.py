"""Tools, the side-effect ledger with idempotency keys, seeded tool faults and the reference executor
(Chapter 32, Sections 2 and 4).

A tool is a pure function ``fn(args, inputs) -> JSON value`` with a simulated cost in seconds. A
side-effecting tool (charge a card, write a record) returns the effect it asks for; ``execute`` commits it
to the ``ToolLedger`` under the task's *idempotency key*, and the ledger applies each key at most once:
a retry of a call whose reply was lost, or a call re-run after a worker crash or a resume, gets back the
first effect's record instead of a second effect. The key names the task, not the attempt:
``idempotency_key(run_id, task_id)``.

Faults of the tools themselves are seeded coins of (seed, task, attempt): a transient failure (the call
fails before doing anything, like an HTTP 503) or a hang (the call takes ``hang_factor`` times its cost;
with a timeout shorter than that, the caller gives up at the timeout, but a side effect still commits:
the service did the work, only the answer came too late).
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .orchestration_plan import Plan, Task, stable_hash

__all__ = ["Tool", "Toolbox", "default_toolbox", "ToolLedger", "ToolFaults", "idempotency_key", "execute",
           "reference_orchestration", "encode", "decode"]


@dataclass(frozen=True)
class Tool:
    """A named pure function of (args, inputs) with a simulated cost (seconds) that depends on args only."""

    name: str
    fn: Callable[[dict, list], Any]
    cost: Callable[[dict], float]
    side_effect: bool = False


class Toolbox:
    """The tools an executor may call, by name; ``cost(task)`` is the nominal (fault-free) cost."""

    def __init__(self, tools: list[Tool]):
        self.tools = {t.name: t for t in tools}

    def __getitem__(self, name: str) -> Tool:
        if name not in self.tools:
            raise ValueError(f"no tool named {name!r}: the toolbox has {sorted(self.tools)}")
        return self.tools[name]

    def cost(self, task: Task) -> float:
        return float(self[task.tool].cost(task.args))

    def check(self, plan: Plan) -> None:
        for t in plan.tasks:
            self[t.tool]  # noqa: B018 - raises the clear error for an unknown tool


def _search(args: dict, inputs: list) -> dict:
    topic = args["topic"]
    n = 2 + stable_hash("docs", topic) % 3
    return {"topic": topic, "docs": [f"{topic}#{stable_hash(topic, i) % 1000:03d}" for i in range(n)]}


def _summarize(args: dict, inputs: list) -> dict:
    docs = inputs[0]["docs"]
    return {"topic": args["topic"], "summary": f"{args['topic']}: {len(docs)} sources ({', '.join(docs)})",
            "words": 40 * len(docs) + len(args["topic"])}


def _merge(args: dict, inputs: list) -> dict:
    return {"report": " | ".join(s["summary"] for s in inputs), "words": sum(s["words"] for s in inputs),
            "topics": [s["topic"] for s in inputs]}


def _charge(args: dict, inputs: list) -> dict:
    return {"account": args["account"], "amount_cents": args["amount_cents"], "for_words": inputs[0]["words"]}


def _record(args: dict, inputs: list) -> dict:
    return {"report_words": inputs[0]["words"], "charge": inputs[1]["id"] if len(inputs) > 1 else None}


def _step(args: dict, inputs: list) -> int:
    """Section 7's generic task: a number from its args and its inputs' numbers."""
    return int(stable_hash(args, inputs) % 1_000_000)


def default_toolbox() -> Toolbox:
    """search and summarize per topic (their costs vary with the topic), merge, charge_card and write_record
    (side-effecting), and the generic ``step`` of random plans (cost = args["cost"])."""
    return Toolbox([
        Tool("search", _search, lambda a: 0.2 + 0.1 * (stable_hash("search", a["topic"]) % 4)),
        Tool("summarize", _summarize, lambda a: 0.3 + 0.2 * (stable_hash("sum", a["topic"]) % 4)),
        Tool("merge", _merge, lambda a: 0.2),
        Tool("charge_card", _charge, lambda a: 0.1, side_effect=True),
        Tool("write_record", _record, lambda a: 0.1, side_effect=True),
        Tool("step", _step, lambda a: float(a["cost"])),
    ])


def idempotency_key(run_id: str, task_id: str) -> str:
    """The key of a task's side effect: the same for every attempt, retry, reassignment and resume."""
    return f"{run_id}/{task_id}"


@dataclass
class ToolLedger:
    """What happened on the tools' side (the external services). ``calls[task]``: every invocation, failed
    ones included; ``effects[key]``: the one committed effect per idempotency key; ``duplicates``: requests
    that found their key already applied. Thread-safe (LangGraph runs parallel branches in threads)."""

    calls: Counter = field(default_factory=Counter)
    effects: dict[str, dict] = field(default_factory=dict)
    duplicates: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def call(self, task_id: str) -> int:
        """Count one invocation of the task's tool; returns how many there have been."""
        with self._lock:
            self.calls[task_id] += 1
            return self.calls[task_id]

    def apply(self, key: str, tool: str, effect: dict) -> dict:
        """Commit ``effect`` under ``key`` unless the key is already there; return the stored record."""
        with self._lock:
            if key in self.effects:
                self.duplicates += 1
                return self.effects[key]
            self.effects[key] = {"id": f"{tool}-{stable_hash(key) % 10**8:08d}", "key": key, **effect}
            return self.effects[key]


@dataclass(frozen=True)
class ToolFaults:
    """Seeded tool faults: each attempt of each task fails with chance ``fail`` or hangs with chance ``hang``
    (a hang takes ``hang_factor`` times the cost). ``outcome`` is a pure function of (seed, task, attempt)."""

    fail: float = 0.0
    hang: float = 0.0
    hang_factor: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.fail < 1 and 0 <= self.hang < 1 and self.fail + self.hang < 1):
            raise ValueError(f"ToolFaults needs 0 <= fail, hang and fail + hang < 1; got {self.fail}, {self.hang}")

    def outcome(self, task_id: str, attempt: int) -> str:
        if self.fail == 0 and self.hang == 0:
            return "ok"
        u = np.random.default_rng([self.seed, stable_hash(task_id), attempt]).random()
        return "fail" if u < self.fail else "hang" if u < self.fail + self.hang else "ok"


def execute(task: Task, inputs: list, attempt: int, toolbox: Toolbox, ledger: ToolLedger,
            faults: ToolFaults | None, key: str) -> tuple[str, Any, float]:
    """One attempt of a tool call: (status, result, seconds it took). status is "ok", "failed" (transient,
    no effect) or "timeout" (the caller waited ``task.timeout``; a side effect still commits)."""
    tool = toolbox[task.tool]
    ledger.call(task.id)
    outcome = faults.outcome(task.id, attempt) if faults else "ok"
    seconds = toolbox.cost(task) * (faults.hang_factor if outcome == "hang" else 1.0)
    if outcome == "fail":
        return "failed", None, seconds
    result = tool.fn(task.args, inputs)
    if tool.side_effect:
        result = ledger.apply(key, tool.name, result)
    if task.timeout is not None and seconds > task.timeout:
        return "timeout", None, float(task.timeout)
    return "ok", result, seconds


def reference_orchestration(plan: Plan, toolbox: Toolbox | None = None, ledger: ToolLedger | None = None,
                            run_id: str = "run") -> dict[str, Any]:
    """The single-machine reference: every task once, in ``plan.order``, no faults; {task id: result}."""
    toolbox = toolbox or default_toolbox()
    toolbox.check(plan)
    ledger = ledger if ledger is not None else ToolLedger()
    done: dict[str, Any] = {}
    for i in plan.order:
        t = plan.by_id[i]
        status, result, _ = execute(t, [done[d] for d in t.deps], 1, toolbox, ledger, None,
                                    idempotency_key(run_id, i))
        if status != "ok":  # only a hang-free timeout shorter than the cost itself gets here
            raise ValueError(f"task {i!r} times out even without faults: its timeout {t.timeout} < its cost")
        done[i] = result
    return done


def encode(obj: Any) -> np.ndarray:
    """A JSON value as a uint8 array, the payload the communicator carries (canonical: sorted keys)."""
    return np.frombuffer(json.dumps(obj, sort_keys=True).encode(), dtype=np.uint8).copy()


def decode(arr: np.ndarray) -> Any:
    return json.loads(np.asarray(arr, dtype=np.uint8).tobytes().decode())
