"""Chapter 32: planner and worker agents over a task graph against the single-machine reference; retries,
idempotency keys, lost messages, crashes, timeouts, checkpoint/resume; and the same under LangGraph."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import orchestration as orc
from scaleoutai.agents import orchestration_plan as op
from scaleoutai.agents import orchestration_tools as ot

REQUEST = "Research raft, paxos, gossip and crdt; charge acct-7 $12.50; save the report"
MESSAGES = [{"role": "system", "content": "You plan tool calls."}, {"role": "user", "content": REQUEST}]
PLAN = op.plan_from_message(op.ScriptedPlanner().invoke(MESSAGES))
BOX = ot.default_toolbox()
REF = ot.reference_orchestration(PLAN)
FREE = cluster.Network(alpha=0.0, beta=0.0)
SIDE_EFFECTS = {"run/charge", "run/record"}


def _run(plan=PLAN, K=3, **kw):
    ledger = kw.pop("ledger", None) or ot.ToolLedger()
    out, res = orc.run_orchestration(plan, K, ledger=ledger, timeout=30, **kw)
    return out, res, ledger


def test_scripted_planner_is_deterministic_and_fans_out_per_topic_then_fans_in():
    again = op.plan_from_message(op.ScriptedPlanner().invoke(MESSAGES))
    assert [t.as_dict() for t in again.tasks] == [t.as_dict() for t in PLAN.tasks]
    assert len(PLAN) == 4 * 2 + 3
    assert PLAN.by_id["summarize:gossip"].deps == ("search:gossip",)
    assert PLAN.by_id["merge"].deps == tuple(f"summarize:{t}" for t in ("raft", "paxos", "gossip", "crdt"))
    assert PLAN.by_id["charge"].args == {"account": "acct-7", "amount_cents": 1250}
    assert PLAN.by_id["record"].deps == ("merge", "charge")
    assert all(t.timeout == pytest.approx(4 * BOX.cost(t)) for t in PLAN.tasks)
    reply = op.ScriptedPlanner().invoke([{"role": "user", "content": "research raft; dance a jig"}])
    assert reply["tool_calls"] == [] and "dance a jig" in reply["content"]
    with pytest.raises(ValueError, match="no tool calls"):
        op.plan_from_message(reply)


@pytest.mark.parametrize("tasks, match", [
    ([op.Task("a", "step", {"cost": 1}), op.Task("a", "step", {"cost": 1})], "unique"),
    ([op.Task("a", "step", {"cost": 1}, ("zz",))], "unknown task"),
    ([op.Task("a", "step", {"cost": 1}, ("b",)), op.Task("b", "step", {"cost": 1}, ("a",))], "cycle"),
])
def test_bad_plans_are_refused_with_a_clear_error(tasks, match):
    with pytest.raises(ValueError, match=match):
        op.Plan(tasks)


def test_bad_options_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="no tool named"):
        ot.reference_orchestration(op.Plan([op.Task("a", "teleport")]))
    with pytest.raises(ValueError, match="fail \\+ hang < 1"):
        ot.ToolFaults(fail=0.6, hang=0.5)
    with pytest.raises(cluster.RankError, match="schedule must be"):
        _run(schedule="fastest")
    with pytest.raises(ValueError, match="at least one worker"):
        op.list_schedule(PLAN, BOX.cost, 0)
    with pytest.raises(cluster.RankError, match="shared by every rank"):  # a ledger per rank would not dedupe
        cluster.run(orc.orchestrate, 2, args=(PLAN,), timeout=10)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 16])  # 16: more workers than the 11 tasks
def test_orchestration_equals_the_reference_and_the_predicted_list_schedule(K):
    out, res, ledger = _run(K=K, network=FREE)
    assert out["results"] == REF
    assert out["tries"] == {i: 1 for i in PLAN.order} and ledger.calls == {i: 1 for i in PLAN.order}
    assert set(ledger.effects) == SIDE_EFFECTS and ledger.duplicates == 0
    makespan, sched = op.list_schedule(PLAN, BOX.cost, max(1, K - 1))
    assert out["makespan"] == pytest.approx(makespan, abs=1e-12)
    if K > 1:
        assert sorted(sched) == sorted(out["schedule"])
        for i, (w, s, e) in sched.items():  # the same worker, start and end for every task
            assert out["schedule"][i] == (w + 1, pytest.approx(s, abs=1e-12), pytest.approx(e, abs=1e-12))
        assert res.stats[0].messages_sent == len(PLAN) + (K - 1)  # one request per task, one stop per worker


@pytest.mark.parametrize("K", [1, 2, 3, 5, 45])
@pytest.mark.parametrize("schedule", ["greedy", "waves"])
def test_random_graphs_match_the_reference_and_the_work_span_bounds(K, schedule):
    plan = op.random_plan(40, width=5, fan_in=2, seed=K)
    out, _, _ = _run(plan, K, network=FREE, schedule=schedule)
    assert out["results"] == ot.reference_orchestration(plan)
    W = max(1, K - 1)
    T1, Tinf = op.work(plan, BOX.cost), op.span(plan, BOX.cost)
    assert out["makespan"] == pytest.approx(op.list_schedule(plan, BOX.cost, W, schedule)[0], abs=1e-9)
    assert max(Tinf, T1 / W) - 1e-9 <= out["makespan"]
    if schedule == "greedy":
        assert out["makespan"] <= T1 / W + Tinf + 1e-9  # Graham's bound for list scheduling
        assert out["makespan"] <= op.list_schedule(plan, BOX.cost, W, "waves")[0] + 1e-9
    if K == 1:
        assert out["makespan"] == pytest.approx(T1)


def test_critical_path_is_a_chain_whose_costs_sum_to_the_span():
    plan = op.random_plan(30, width=4, seed=3)
    total, path = op.critical_path(plan, BOX.cost)
    assert all(a in plan.by_id[b].deps for a, b in zip(path, path[1:]))
    assert total == pytest.approx(sum(BOX.cost(plan.by_id[i]) for i in path))
    _, res, _ = _run(plan, 60, network=FREE)  # unlimited workers: the makespan is the span
    assert res.sim_time == pytest.approx(total)


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_transient_failures_and_timeouts_are_retried_until_the_result_equals_the_reference(K):
    faults = ot.ToolFaults(fail=0.3, hang=0.15, seed=1)
    out, _, ledger = _run(K=K, tool_faults=faults, max_attempts=8)
    assert out["results"] == REF and out["failed"] == {}
    kinds = {e[1] for e in out["events"]}
    assert {"failed", "timeout", "ok"} <= kinds
    assert sum(out["tries"].values()) > len(PLAN)
    assert dict(ledger.calls) == out["tries"]  # every try reached a tool once
    want = {i: next(a for a in range(1, 9) if faults.outcome(i, a) == "ok") for i in PLAN.order}
    assert out["tries"] == want  # tries are a pure function of (seed, task, attempt), whatever K is
    assert set(ledger.effects) == SIDE_EFFECTS


def test_a_retry_waits_its_exponential_backoff_on_the_simulated_clock():
    plan = op.Plan([op.Task("a", "step", {"cost": 1.0})])
    seed = next(s for s in range(100) if [ot.ToolFaults(fail=0.5, seed=s).outcome("a", n) for n in (1, 2, 3)]
                == ["fail", "fail", "ok"])
    for K in (1, 2):
        out, _, _ = _run(plan, K, network=FREE, tool_faults=ot.ToolFaults(fail=0.5, seed=seed), backoff=0.25,
                         backoff_factor=3.0)
        assert out["tries"] == {"a": 3}
        assert out["makespan"] == pytest.approx(1.0 + 0.25 + 1.0 + 0.75 + 1.0)


def test_a_lost_reply_of_a_charge_is_retried_and_the_ledger_charges_once():
    n = PLAN.order.index("charge")  # one worker runs the tasks in plan order: its n-th reply is the charge's
    out, _, ledger = _run(K=2, faults=cluster.Faults(drop={1: {n}}))
    assert out["results"] == REF
    assert ("reply lost" in [e[1] for e in out["events"] if e[2] == "charge"])
    assert out["tries"]["charge"] == 2 and ledger.calls["charge"] == 2
    assert set(ledger.effects) == SIDE_EFFECTS and ledger.duplicates == 1  # the second call found its key
    without_keys = ot.ToolLedger()
    for k in ("run/charge/try1", "run/charge/try2"):  # a key per attempt would charge twice
        without_keys.apply(k, "charge_card", {"amount_cents": 1250})
    assert len(without_keys.effects) == 2


def test_a_worker_that_crashes_after_charging_is_replaced_and_the_charge_applies_once():
    clean, _, _ = _run(K=3, network=FREE)
    w = clean["schedule"]["charge"][0]
    before = sum(1 for i, (r, s, _) in clean["schedule"].items() if r == w and s < clean["schedule"]["charge"][1])
    out, res, ledger = _run(K=3, network=FREE, faults=cluster.Faults(crash={w: before}))
    assert isinstance(res.values[w], cluster.RankCrashed) and out["dead"] == [w]
    assert out["results"] == REF
    assert ledger.calls["charge"] == 2 and ledger.duplicates == 1 and set(ledger.effects) == SIDE_EFFECTS
    assert [e[1] for e in out["events"] if e[2] == "charge"] == ["worker crashed", "ok"]


def test_every_worker_crashing_leaves_the_orchestrator_to_finish_alone():
    out, _, ledger = _run(K=4, faults=cluster.Faults(crash={1: 1, 2: 0, 3: 2}))
    assert out["dead"] == [1, 2, 3] and out["results"] == REF
    assert set(ledger.effects) == SIDE_EFFECTS


def test_a_lost_request_is_sent_again_and_not_counted_as_a_try():
    out, _, ledger = _run(K=3, faults=cluster.Faults(drop={0: {0, 3}}))
    assert out["results"] == REF and out["tries"] == {i: 1 for i in PLAN.order}
    assert sum(e[1] == "request lost" for e in out["events"]) == 2 and ledger.duplicates == 0


@pytest.mark.parametrize("seed", range(4))
def test_random_message_loss_is_survived_with_one_effect_per_key(seed):
    out, _, ledger = _run(K=4, faults=cluster.Faults(loss=0.15, seed=seed))
    assert out["results"] == REF
    assert set(ledger.effects) == SIDE_EFFECTS
    assert sum(out["tries"].values()) >= len(PLAN)


def test_a_task_that_exhausts_its_retries_fails_and_its_dependents_are_skipped():
    faults = ot.ToolFaults(fail=0.7, seed=2)
    out, _, _ = _run(K=3, tool_faults=faults, max_attempts=2)
    assert out["failed"] and set(out["failed"].values()) == {"failed"}
    assert all(out["tries"][i] == 2 for i in out["failed"])
    bad = set(out["failed"])
    for i in PLAN.order:  # skipped = exactly the tasks downstream of a failure
        upstream_failed = any(d in bad or d in out["skipped"] for d in PLAN.by_id[i].deps)
        assert (i in out["skipped"]) == upstream_failed
    assert {i: REF[i] for i in out["results"]} == out["results"]


@pytest.mark.parametrize("K, crash_at", [(2, 4), (3, 5), (5, 6), (5, 9)])
def test_resume_after_the_orchestrator_crashes_equals_an_uninterrupted_run_and_reruns_no_finished_tool(
        tmp_path, K, crash_at):
    ck = tmp_path / "plan.json"
    ledger = ot.ToolLedger()
    first, res = orc.run_orchestration(PLAN, K, ledger=ledger, faults=cluster.Faults(crash={0: crash_at}),
                                       checkpoint=str(ck), timeout=30)
    assert first is None and isinstance(res.values[0], cluster.RankCrashed)
    assert all(v["orchestrator"] == "crashed" for v in res.values[1:])
    saved = json.loads(ck.read_text())["done"]
    assert 0 < len(saved) < len(PLAN)
    calls_before = dict(ledger.calls)
    out, _, _ = _run(K=K, ledger=ledger, checkpoint=str(ck))
    assert out["results"] == REF and out["resumed"] == sorted(saved)
    for i in saved:  # a checkpointed task is never called again
        assert ledger.calls[i] == calls_before[i] == 1
    rerun = [i for i in PLAN.order if ledger.calls[i] > 1]  # only tasks that were in flight at the crash
    assert len(rerun) <= K - 1 and set(ledger.effects) == SIDE_EFFECTS
    done_again, _, _ = _run(K=K, ledger=ledger, checkpoint=str(ck))
    assert done_again["resumed"] == sorted(PLAN.order) and done_again["tries"] == out["tries"]


def test_a_torn_temp_file_is_ignored_and_a_checkpoint_of_another_plan_is_refused(tmp_path):
    ck = tmp_path / "plan.json"
    orc.save_checkpoint(ck, PLAN, {"search:raft": REF["search:raft"]}, {}, Counter({"search:raft": 1}))
    (tmp_path / "plan.json.tmp").write_text('{"plan": "half a wri')  # a crash in the middle of a write
    out, _, ledger = _run(K=3, checkpoint=str(ck))
    assert out["results"] == REF and out["resumed"] == ["search:raft"] and "search:raft" not in ledger.calls
    other = op.random_plan(5, seed=0)
    with pytest.raises(cluster.RankError, match="another plan"):
        _run(other, K=2, checkpoint=str(ck))


def test_waves_are_slower_than_greedy_on_uneven_tasks_and_speedup_stays_below_work_over_span():
    plan = op.random_plan(60, width=6, fan_in=2, seed=7)
    T1, Tinf = op.work(plan, BOX.cost), op.span(plan, BOX.cost)
    greedy = {K: _run(plan, K, network=FREE)[0]["makespan"] for K in (1, 3, 5, 9)}
    waves = {K: _run(plan, K, network=FREE, schedule="waves")[0]["makespan"] for K in (3, 5, 9)}
    assert all(waves[K] > greedy[K] for K in waves)
    speedups = [T1 / greedy[K] for K in (1, 3, 5, 9)]
    assert speedups[0] == pytest.approx(1.0) and np.all(np.diff(speedups) > 0)
    assert max(speedups) <= T1 / Tinf + 1e-9


# LangGraph (Section 5): the same plan, tools, ledger and seeded faults as a StateGraph.
lg = pytest.importorskip("langgraph")


def _langgraph(faults=None, kill_at=None, max_attempts=8):
    from langgraph.checkpoint.memory import InMemorySaver

    from scaleoutai.agents import orchestration_langgraph as olg

    ledger = ot.ToolLedger()
    app, attempts = olg.build_langgraph(ledger=ledger, faults=faults, max_attempts=max_attempts,
                                        checkpointer=InMemorySaver(), kill_at=kill_at)
    return app, attempts, ledger, {"configurable": {"thread_id": "t"}}


def test_langgraph_reaches_our_final_state_with_the_same_tool_executions_under_the_same_faults():
    faults = ot.ToolFaults(fail=0.3, hang=0.15, seed=1)
    app, attempts, ledger, config = _langgraph(faults)
    state = app.invoke({"messages": MESSAGES}, config)
    ours, _, our_ledger = _run(K=4, tool_faults=faults, max_attempts=8)
    assert state["done"] == ours["results"] == REF
    assert dict(attempts) == ours["tries"] and ledger.calls == our_ledger.calls
    assert sum(attempts.values()) > len(PLAN)  # the RetryPolicy really retried
    assert ledger.effects == our_ledger.effects
    assert state["messages"][-1]["tool_calls"][0]["id"] == "search:raft"


def test_langgraph_resumes_from_its_checkpointer_without_calling_a_finished_tool_again():
    from scaleoutai.agents.orchestration_langgraph import Interrupted

    faults = ot.ToolFaults(fail=0.3, seed=4)
    app, attempts, ledger, config = _langgraph(faults, kill_at="summarize:paxos")
    with pytest.raises(Interrupted):
        app.invoke({"messages": MESSAGES}, config)
    before = dict(ledger.calls)
    saved = app.get_state(config)
    assert "summarize:paxos" not in before and "summarize:raft" in before and saved.next == ("call_tool",)
    state = app.invoke(None, config)
    assert state["done"] == REF
    assert all(ledger.calls[i] == n for i, n in before.items())  # finished tools were not called again
    straight, _, _ = _run(K=4, tool_faults=faults, max_attempts=8)
    assert dict(ledger.calls) == straight["tries"]  # interrupted + resumed = one uninterrupted run
    assert set(ledger.effects) == SIDE_EFFECTS


def test_langgraph_gives_up_on_a_task_that_exhausts_its_retries_where_ours_marks_it_failed():
    from scaleoutai.agents.orchestration_langgraph import ToolFailed

    faults = ot.ToolFaults(fail=0.7, seed=2)
    app, _, _, config = _langgraph(faults, max_attempts=2)
    with pytest.raises(ToolFailed) as err:
        app.invoke({"messages": MESSAGES}, config)
    ours, _, _ = _run(K=3, tool_faults=faults, max_attempts=2)
    assert err.value.task in ours["failed"] and err.value.attempt == 2
