"""Planner and worker agents over a task graph on the communicator (Chapter 32, Agent orchestration).

Rank 0 is the orchestrator, ranks 1..K-1 are workers; with K = 1 (or once every worker has crashed) the
orchestrator calls the tools itself. The orchestrator keeps the state of the plan (done, failed, tries),
dispatches the first ready task in ``plan.order`` to the lowest idle worker, and then waits for the worker
whose task should finish first (dispatch time + nominal cost): there is no receive-from-any, so it always
knows whom it waits for, and with free messages and no faults the schedule is exactly ``list_schedule``.

Request-reply, one request outstanding per worker: for every request the worker sends one reply,
{"status": ok | failed | timeout} with the result, or "lost" when the request itself was lost on the link.
What the orchestrator does with each (Section 6):
  ok                      record the result, write the checkpoint (temp file + rename), the worker is idle
  failed / timeout        retry after backoff * factor^(tries - 1) simulated seconds, up to max_attempts
  MessageLostError        the reply vanished: the tool may have run; retry with backoff (same key)
  PeerCrashedError        the worker is gone: the tool may have run; reassign at once (same key)
  "lost"                  the request never arrived: send it again, not counted as a try
Side effects go through the ToolLedger under ``idempotency_key(run_id, task)``, so whatever the retries,
each key takes effect once. Tasks whose dependencies failed are reported as skipped.

Checkpoint/resume: with ``checkpoint=path`` the state is rewritten after every completion or final
failure; a later run with the same path and plan starts from it and never dispatches a finished task.

Shutdown: each worker gets "stop" and answers "bye". A lost "stop" comes back as "lost" and is resent. A
lost reply to "stop" is ambiguous (a lost "bye", or a lost "stop" and a lost "lost"): the orchestrator sends
one more "stop" without waiting and leaves. If that one is lost too (chance loss^3), the worker is left
waiting and the simulator reports a DeadlockError: no finite exchange over a lossy link makes both sides
sure (the two generals problem); real workers end on a lease timeout, which the communicator lacks.
The ledger is shared by reference, like the external services it models: run on the simulator.
"""
from __future__ import annotations

import bisect
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from .. import cluster
from ..cluster import Comm
from ..errors import MessageLostError, PeerCrashedError
from .orchestration_plan import Plan, Task
from .orchestration_tools import (Toolbox, ToolFaults, ToolLedger, decode, default_toolbox, encode, execute,
                                  idempotency_key)

__all__ = ["orchestrate", "serve_tools", "run_orchestration", "save_checkpoint", "load_checkpoint"]


def save_checkpoint(path: str | os.PathLike, plan: Plan, done: dict, failed: dict, tries: Counter) -> None:
    """Write the orchestrator's state atomically: a temp file, fsync, then os.replace (a reader sees the old
    checkpoint or the new one, never half of one). Chapter 32, Section 6; Chapter 18 for checkpoints."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"plan": plan.fingerprint(), "done": done, "failed": failed, "tries": dict(tries)}, f,
                  sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: str | os.PathLike, plan: Plan) -> tuple[dict, dict, Counter]:
    """(done, failed, tries) from a checkpoint of this plan; empty state when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return {}, {}, Counter()
    state = json.loads(path.read_text())
    if state.get("plan") != plan.fingerprint():
        raise ValueError(f"checkpoint {path} was written for another plan: delete it or pass another path")
    return state["done"], state["failed"], Counter(state["tries"])


def serve_tools(comm: Comm, toolbox: Toolbox, ledger: ToolLedger, faults: ToolFaults | None) -> dict[str, Any]:
    """A worker rank: answer each request of rank 0 with exactly one reply, until "stop" (or rank 0 dies)."""
    served = 0
    while True:
        try:
            msg = decode(comm.recv(0))
        except MessageLostError:  # our request vanished: say so, the orchestrator sends it again
            comm.send(encode({"status": "lost"}), 0)
            continue
        except PeerCrashedError:  # the orchestrator died: nothing more will come (a resume starts afresh)
            return {"served": served, "orchestrator": "crashed"}
        if msg["op"] == "stop":
            comm.send(encode({"status": "bye"}), 0)
            return {"served": served, "orchestrator": "done"}
        t = msg["task"]
        task = Task(t["id"], t["tool"], t["args"], tuple(t["deps"]), t["timeout"])
        status, result, seconds = execute(task, msg["inputs"], msg["attempt"], toolbox, ledger, faults, msg["key"])
        comm.compute(seconds)
        served += 1
        comm.send(encode({"status": status, "result": result}), 0)


def orchestrate(comm: Comm, plan: Plan, toolbox: Toolbox | None = None, ledger: ToolLedger | None = None,
                faults: ToolFaults | None = None, *, run_id: str = "run", checkpoint: str | None = None,
                schedule: str = "greedy", max_attempts: int = 4, backoff: float = 0.05,
                backoff_factor: float = 2.0) -> dict[str, Any] | None:
    """Per rank: rank 0 orchestrates ``plan`` (returns its record), the others serve tool calls.

    The record: results {task: value}, failed {task: last status}, skipped (dependencies failed), tries
    {task: attempts that may have reached the tool}, resumed (tasks found in the checkpoint), schedule
    {task: (rank, start, end)}, events [(time, what, task, rank)], dead (crashed workers), makespan.
    """
    toolbox = toolbox or default_toolbox()
    if ledger is None:
        if comm.size > 1:
            raise ValueError("orchestrate needs one ToolLedger shared by every rank: pass ledger= "
                             "(run_orchestration makes one)")
        ledger = ToolLedger()
    if comm.rank != 0:
        return serve_tools(comm, toolbox, ledger, faults)
    if schedule not in ("greedy", "waves"):
        raise ValueError(f"schedule must be 'greedy' or 'waves', got {schedule!r}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    toolbox.check(plan)
    done, failed, tries = load_checkpoint(checkpoint, plan) if checkpoint else ({}, {}, Counter())
    resumed = sorted(done)
    not_before: dict[str, float] = {}
    alive, idle = list(range(1, comm.size)), list(range(1, comm.size))
    inflight: dict[int, tuple[str, int, float, float]] = {}  # worker -> (task, attempt, start, expected end)
    sched: dict[str, tuple[int, float, float]] = {}
    events: list[tuple[float, str, str, int]] = []

    def ready() -> list[str]:
        taken = {v[0] for v in inflight.values()}
        return [i for i in plan.order if i not in done and i not in failed and i not in taken
                and all(d in done for d in plan.by_id[i].deps)]

    def settle(i: str, status: str, result: Any, w: int, start: float, wait: bool = True) -> None:
        now = comm.clock
        events.append((now, status, i, w))
        if status == "ok":
            done[i] = result
            sched[i] = (w, start, now)
        elif tries[i] >= max_attempts:
            failed[i] = status
        else:  # exponential backoff before the next try (none after a crash: another worker takes it)
            not_before[i] = now + (backoff * backoff_factor ** (tries[i] - 1) if wait else 0.0)
            return
        if checkpoint:
            save_checkpoint(checkpoint, plan, done, failed, tries)

    def call(i: str) -> tuple[Task, list, int, str]:
        t = plan.by_id[i]
        return t, [done[d] for d in t.deps], tries[i] + 1, idempotency_key(run_id, i)

    while True:
        now = comm.clock
        cands = ready()
        eligible = [i for i in cands if not_before.get(i, 0.0) <= now]
        if not alive:  # K = 1, or every worker crashed: the orchestrator calls the tools itself
            if eligible:
                t, inputs, attempt, key = call(eligible[0])
                status, result, seconds = execute(t, inputs, attempt, toolbox, ledger, faults, key)
                comm.compute(seconds)
                tries[t.id] = attempt
                settle(t.id, status, result, 0, now)
            elif cands:
                comm.compute(min(not_before[i] for i in cands) - now)  # idle until the first backoff ends
            else:
                break
            continue
        if not (schedule == "waves" and inflight):
            while eligible and idle:
                w, (t, inputs, attempt, key) = idle.pop(0), call(eligible.pop(0))
                comm.send(encode({"op": "run", "task": t.as_dict(), "inputs": inputs, "attempt": attempt,
                                  "key": key}), w)
                inflight[w] = (t.id, attempt, now, comm.clock + toolbox.cost(t))
        later = [not_before[i] for i in ready() if not_before.get(i, 0.0) > now]
        if not inflight:
            if not later:
                break
            comm.compute(min(later) - now)
            continue
        w = min(inflight, key=lambda r: (inflight[r][3], r))  # the worker expected to finish first
        if later and idle and schedule == "greedy" and min(later) < inflight[w][3]:
            comm.compute(min(later) - now)  # a backoff ends before that: go and dispatch the retry
            continue
        i, attempt, start, _ = inflight.pop(w)
        try:
            reply = decode(comm.recv(w))
        except MessageLostError:
            tries[i] = attempt
            settle(i, "reply lost", None, w, start)
            bisect.insort(idle, w)
            continue
        except PeerCrashedError:
            alive.remove(w)
            tries[i] = attempt
            settle(i, "worker crashed", None, w, start, wait=False)
            continue
        bisect.insort(idle, w)
        if reply["status"] == "lost":
            events.append((comm.clock, "request lost", i, w))  # never reached the tool: not a try
            continue
        tries[i] = attempt
        settle(i, reply["status"], reply["result"], w, start)
    for w in alive:
        while True:
            comm.send(encode({"op": "stop"}), w)
            try:
                if decode(comm.recv(w))["status"] == "bye":
                    break
            except PeerCrashedError:
                break
            except MessageLostError:  # a lost "bye", or a lost "stop" and a lost "lost": one more stop, no wait
                comm.send(encode({"op": "stop"}), w)
                break
    return {"results": done, "failed": failed, "tries": dict(tries), "resumed": resumed, "schedule": sched,
            "skipped": [i for i in plan.order if i not in done and i not in failed], "events": events,
            "dead": [w for w in range(1, comm.size) if w not in alive], "makespan": comm.clock}


def run_orchestration(plan: Plan, K: int, toolbox: Toolbox | None = None, ledger: ToolLedger | None = None,
                      tool_faults: ToolFaults | None = None, *, faults: cluster.Faults | None = None,
                      network: cluster.Network | None = None, timeout: float = 60.0, trace: bool = False,
                      **opts: Any) -> tuple[dict[str, Any] | None, cluster.RunResult]:
    """Run ``orchestrate`` on K simulated ranks; returns (the orchestrator's record, or None if rank 0
    crashed, and the RunResult). ``opts``: run_id, checkpoint, schedule, max_attempts, backoff, backoff_factor."""
    ledger = ledger if ledger is not None else ToolLedger()
    res = cluster.run(orchestrate, K, args=(plan, toolbox, ledger, tool_faults), kwargs=opts, network=network,
                      faults=faults, timeout=timeout, trace=trace)
    out = res.values[0] if isinstance(res.values[0], dict) else None
    if out is not None:
        out["ledger"] = ledger
    return out, res
