"""The same orchestration as a LangGraph StateGraph (Chapter 32, Section 5).

The graph: START -> plan (the scripted model turns the request into tool calls) -> fan out one ``Send`` per
ready task to ``call_tool`` -> join -> fan out again, until no task is left -> END. LangGraph runs a graph
in supersteps: every ``call_tool`` branch of a superstep runs in parallel, and the next superstep starts when
all of them are done (our ``schedule="waves"``). ``call_tool`` carries a ``RetryPolicy`` that retries the
transient ``ToolFailed`` and ``ToolTimeout`` errors; the checkpointer (``InMemorySaver``) stores the state
after every superstep, and the writes of the branches that finished in a superstep that failed, so
``invoke(None, config)`` resumes an interrupted run without calling a finished tool again.

The tool calls go through the same ``execute`` harness, ledger and seeded ``ToolFaults`` as ours, so under
the same faults the final state and the number of tool executions are the same. ``kill_at=task``: the
first time that task starts, raise ``Interrupted`` (not retried), as if the process died there.
Needs langgraph (imported here, not at module import).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Annotated, Any, TypedDict

from .orchestration_plan import ScriptedPlanner, Task, plan_from_message
from .orchestration_tools import Toolbox, ToolFaults, ToolLedger, default_toolbox, execute, idempotency_key

__all__ = ["ToolFailed", "ToolTimeout", "Interrupted", "State", "build_langgraph"]


class ToolFailed(Exception):
    """A transient tool failure: the RetryPolicy retries it. ``task`` and ``attempt`` say which call."""

    def __init__(self, task: str, attempt: int, why: str = "transient failure"):
        self.task, self.attempt = task, attempt
        super().__init__(f"{task}: {why} on attempt {attempt}")


class ToolTimeout(ToolFailed):
    """The tool did not answer within its (simulated) timeout: retried too."""


class Interrupted(Exception):
    """The injected kill: not retried, so it ends the run and leaves the checkpoint behind."""


def _merge(a: dict, b: dict) -> dict:
    return {**a, **b}


class State(TypedDict, total=False):
    """The graph's state: the conversation, the plan (task dicts in plan order), and the results so far
    (``done`` merges the writes of parallel branches: each branch adds its own task)."""

    messages: list
    plan: list
    done: Annotated[dict, _merge]


def build_langgraph(toolbox: Toolbox | None = None, ledger: ToolLedger | None = None,
                    faults: ToolFaults | None = None, *, planner: ScriptedPlanner | None = None,
                    run_id: str = "run", max_attempts: int = 4, retry_interval: float = 1e-3,
                    checkpointer: Any = None, kill_at: str | None = None) -> tuple[Any, Counter]:
    """Compile the orchestration graph; returns (app, attempts) where attempts[task] counts its tries.

    Invoke with ``app.invoke({"messages": [{"role": "user", "content": request}]}, config)``; the final
    state's ``done`` maps each task id to its result. ``retry_interval`` is the real first backoff (s).
    """
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy, Send

    toolbox = toolbox or default_toolbox()
    ledger = ledger if ledger is not None else ToolLedger()
    planner = planner or ScriptedPlanner()
    attempts: Counter = Counter()
    lock = threading.Lock()
    armed = {"kill": kill_at}

    def plan_node(state: State) -> dict:
        reply = planner.invoke(state["messages"])
        plan = plan_from_message(reply)  # validates the DAG, raises on a reply without tool calls
        toolbox.check(plan)
        return {"messages": state["messages"] + [reply], "plan": [plan.by_id[i].as_dict() for i in plan.order],
                "done": {}}

    def fan_out(state: State) -> Any:
        done = state.get("done", {})
        ready = [t for t in state["plan"] if t["id"] not in done and all(d in done for d in t["deps"])]
        if not ready:
            return END
        return [Send("call_tool", {"task": t, "inputs": [done[d] for d in t["deps"]]}) for t in ready]

    def call_tool(arg: dict) -> dict:
        t = arg["task"]
        task = Task(t["id"], t["tool"], t["args"], tuple(t["deps"]), t["timeout"])
        with lock:
            if armed["kill"] == task.id:
                armed["kill"] = None
                raise Interrupted(f"killed as {task.id} started")
            attempts[task.id] += 1
            attempt = attempts[task.id]
        status, result, _ = execute(task, arg["inputs"], attempt, toolbox, ledger, faults,
                                    idempotency_key(run_id, task.id))
        if status == "failed":
            raise ToolFailed(task.id, attempt)
        if status == "timeout":
            raise ToolTimeout(task.id, attempt, f"no answer within {task.timeout} s")
        return {"done": {task.id: result}}

    g = StateGraph(State)
    g.add_node("plan", plan_node)
    g.add_node("call_tool", call_tool, retry_policy=RetryPolicy(
        initial_interval=retry_interval, backoff_factor=2.0, jitter=False, max_attempts=max_attempts,
        retry_on=(ToolFailed, ToolTimeout)))
    g.add_node("join", lambda state: {})
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan_out, ["call_tool", END])
    g.add_edge("call_tool", "join")
    g.add_conditional_edges("join", fan_out, ["call_tool", END])
    return g.compile(checkpointer=checkpointer), attempts
