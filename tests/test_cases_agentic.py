"""Chapter 40: the multi-hop agent's budget accounting, its degradation rule, its answers on K ranks against
the sequential baseline, and its answers and exactly-once side effects under injected failures."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.agents import orchestration as orc
from scaleoutai.agents import orchestration_plan as op
from scaleoutai.agents import orchestration_tools as ot
from scaleoutai.cases import agentic as ag
from scaleoutai.cases import agentic_budget as ab
from scaleoutai.cases import agentic_load as al
from scaleoutai.serving import llm, rag, vectors
from scaleoutai.serving.decoder import decoder_init, generate

FREE = cluster.Network(alpha=0.0, beta=0.0)
HAND = ag.AgentCosts(t_fixed=0.02, t_token=1e-3, retrieve_s=0.1, index_machines=2, read_s=0.01, calc_s=0.02,
                     respond_s=0.005, question_tokens=10, passage_tokens=5, answer_tokens=2, call_tokens=3, batch=4,
                     gpu_usd_per_hour=3.6, cpu_usd_per_hour=0.36)
EARLIER, BRIDGE = ag.TEMPLATES["earlier"].format(A="Ka", B="Lo"), ag.TEMPLATES["bridge"].format(A="Ka")


@pytest.fixture(scope="module")
def agent():
    corpus = datasets.make_corpus(12, 3, seed=1)
    embed = rag.hashing_embedder(2048)
    P = embed(corpus.passages)
    costs = ag.AgentCosts(question_tokens=6, passage_tokens=3, answer_tokens=2, call_tokens=2)
    params = decoder_init(vocab=32, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=64, seed=0)
    fns = ag.make_tools(lambda q, k: rag.retrieve(embed([q]), P, k)[0], corpus.passages, rag.read_answer,
                        datasets.RELATIONS, lambda p, n: generate(params, [p], n)[0], costs, vocab=32)
    box = ot.Toolbox([ot.Tool(n, f, (lambda n: lambda a: costs.tool_seconds(n, a))(n), side_effect=n == "respond")
                      for n, f in fns.items()])
    qs = ag.make_questions(corpus.questions, corpus.answers, rag.parse_question, 6, seed=2)
    planner = ag.AgentPlanner(costs, ag.Level("full", 3, 3))
    request = [{"role": "user", "content": "\n".join(f"q{i}: {q.text}" for i, q in enumerate(qs))}]
    plan = op.plan_from_message(planner.invoke(request))
    reference = ot.reference_orchestration(plan, box)
    return dict(corpus=corpus, embed=embed, P=P, costs=costs, box=box, qs=qs, planner=planner, plan=plan,
                request=request, reference=reference)


def answers(results: dict, n: int) -> list:
    return [results[f"q{i}/respond"]["answer"] for i in range(n)]


def test_budget_accounting_equals_the_hand_computed_latency_tokens_and_cost():
    assert HAND.llm_seconds(10, 21) == pytest.approx(21 * 0.02 + 30 * 1e-3)
    e = ab.predict(ag.AgentPlanner(HAND, ag.Level("f", 2, 4)).calls(EARLIER), HAND)
    # planner 0.45; path retrieve 0.1 + read 0.01 + calc 0.02 + generate (32 prompt, 4 new) 0.115 + respond 0.005
    assert e.latency_s == pytest.approx(0.45 + 0.25) and e.tokens == 10 + 21 + 32 + 4
    assert e.cpu_seconds == pytest.approx(2 * 0.1 * 2 + 2 * 0.01 + 0.02 + 0.005)
    assert e.cost_usd == pytest.approx(67 * 3.6 / 3600 * (0.02 / 4 + 1e-3) + 0.445 * 0.36 / 3600)
    assert e.stages == pytest.approx({"planner": 0.45, "retrieve": 0.1, "read": 0.01, "calculator": 0.02,
                                      "generate": 0.115, "respond": 0.005})
    b = ab.predict(ag.AgentPlanner(HAND, ag.Level("s", 1, 2)).calls(BRIDGE), HAND)  # three hops in a chain
    assert b.latency_s == pytest.approx(24 * 0.02 + 33e-3 + 3 * 0.11 + (0.04 + 28e-3) + 0.005)
    assert b.tokens == 10 + 24 + 27 + 2


def test_decide_takes_the_first_level_that_fits_and_refuses_when_none_does():
    ladder = [ag.Level("full", 2, 4), ag.Level("short", 1, 2)]
    full, short = (ab.predict(ag.AgentPlanner(HAND, lv).calls(EARLIER), HAND) for lv in ladder)
    assert short.latency_s < full.latency_s and short.cost_usd < full.cost_usd
    assert ab.decide(EARLIER, ab.Budget(), ladder, HAND).status == "full"
    d = ab.decide(EARLIER, ab.Budget(latency_s=(full.latency_s + short.latency_s) / 2), ladder, HAND)
    assert d.status == "degraded" and d.level == ladder[1] and d.prediction == short
    d = ab.decide(EARLIER, ab.Budget(cost_usd=(full.cost_usd + short.cost_usd) / 2), ladder, HAND)
    assert d.status == "degraded"
    d = ab.decide(EARLIER, ab.Budget(latency_s=short.latency_s, cost_usd=short.cost_usd * 0.99), ladder, HAND)
    assert d.status == "refused" and d.level is None
    assert ab.decide(EARLIER, ab.Budget(full.latency_s, full.cost_usd), ladder, HAND).status == "full"  # <= fits
    with pytest.raises(ValueError, match="ladder"):
        ab.decide(EARLIER, ab.Budget(), [], HAND)


def test_planner_writes_fan_out_for_comparisons_and_a_chain_for_bridges():
    p = ag.AgentPlanner(HAND, ag.Level("f", 2, 4))
    calls = p.calls(EARLIER, "s")
    assert [c["id"] for c in calls] == ["s/retrieve:A", "s/read:A", "s/retrieve:B", "s/read:B", "s/calc",
                                        "s/generate", "s/respond"]
    assert calls[4]["depends_on"] == ["s/read:A", "s/read:B"] and calls[0]["depends_on"] == []
    chain = p.calls(BRIDGE, "s")
    assert [c["depends_on"] for c in chain[2:4]] == [["s/read:river"], ["s/retrieve:capital", "s/read:river"]]
    assert op.span(op.plan_from_message({"tool_calls": chain}), lambda t: 1.0) == 8  # 3 hops of 2, generate, respond
    reply = p.invoke([{"role": "user", "content": f"a: {EARLIER}\nb: {BRIDGE}"}])
    assert len(reply["tool_calls"]) == 7 + 8 and reply["tool_calls"][7]["id"] == "b/retrieve:river"
    assert p.invoke([{"role": "user", "content": "Book a flight to Ka"}])["tool_calls"] == []


def test_questions_are_a_pure_function_of_the_seed_and_follow_the_corpus(agent):
    c = agent["corpus"]
    again = ag.make_questions(c.questions, c.answers, rag.parse_question, 6, seed=2)
    assert again == agent["qs"] and [q.kind for q in again] == ["earlier", "gap", "bridge"] * 2
    facts = {rag.parse_question(q): a for q, a in zip(c.questions, c.answers)}
    for q in again:
        if q.kind == "gap":
            assert q.answer == str(abs(int(facts["founded", q.entities[0]]) - int(facts["founded", q.entities[1]])))
    with pytest.raises(ValueError, match="kinds"):
        ag.make_questions(c.questions, c.answers, rag.parse_question, 3, kinds=("poem",))


@pytest.mark.parametrize("K", [1, 2, 3, 5, 12])  # 12 ranks > 12 passages of the corpus: empty shards too
def test_sharded_retrieval_of_the_sub_questions_equals_the_single_index(agent, K):
    queries = [t.args["query"] for t in agent["plan"].tasks if t.tool == "retrieve" and "{" not in t.args["query"]]
    Q = agent["embed"](queries)
    _, I, _ = vectors.run_sharded_knn(Q, agent["P"], 3, K, metric="ip", timeout=60)
    np.testing.assert_array_equal(I, rag.retrieve(Q, agent["P"], 3))


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_distributed_agent_answers_equal_the_sequential_baseline(agent, K):
    out, _ = orc.run_orchestration(agent["plan"], K, agent["box"], network=FREE, timeout=60)
    assert out["results"] == agent["reference"]
    n = len(agent["qs"])
    assert sum(a == q.answer for a, q in zip(answers(out["results"], n), agent["qs"])) >= n // 2
    plans = {f"q{i}": [c for c in agent["planner"].invoke(agent["request"])["tool_calls"]
                       if c["id"].startswith(f"q{i}/")] for i in range(n)}
    run = al.schedule_sessions(plans, dict.fromkeys(plans, 0.0), agent["costs"], {"workers": max(1, K - 1)},
                               order=list(agent["plan"].order), planner=False)
    want, _ = op.list_schedule(agent["plan"], agent["box"].cost, max(1, K - 1))
    assert run.makespan == pytest.approx(want, abs=1e-12) and out["makespan"] == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("faults, tool_faults", [
    (cluster.Faults(crash={2: 3}), None),  # a tool server dies after three replies
    (None, ot.ToolFaults(fail=0.2, hang=0.15, seed=3)),  # transient failures and hangs past the timeout
    (cluster.Faults(loss=0.05, seed=1), None),  # lost requests and replies
])
def test_failures_keep_the_answers_and_deliver_each_answer_exactly_once(agent, faults, tool_faults):
    ledger = ot.ToolLedger()
    out, _ = orc.run_orchestration(agent["plan"], 4, agent["box"], ledger, tool_faults, faults=faults,
                                   max_attempts=10, timeout=60)
    assert out["results"] == agent["reference"] and not out["failed"]
    assert sorted(ledger.effects) == sorted(f"run/q{i}/respond" for i in range(len(agent["qs"])))
    assert sum(ledger.calls.values()) >= len(agent["plan"])


def test_a_checkpointed_session_resumes_after_the_orchestrator_crashes(agent, tmp_path):
    ck, ledger = tmp_path / "agent.json", ot.ToolLedger()
    first, _ = orc.run_orchestration(agent["plan"], 3, agent["box"], ledger, faults=cluster.Faults(crash={0: 12}),
                                     checkpoint=str(ck), timeout=60)
    assert first is None
    before = dict(ledger.calls)
    out, _ = orc.run_orchestration(agent["plan"], 3, agent["box"], ledger, checkpoint=str(ck), timeout=60)
    assert out["results"] == agent["reference"] and len(out["resumed"]) >= 8
    assert all(ledger.calls[i] == before[i] for i in out["resumed"])  # no finished call runs again
    assert len(ledger.effects) == len(agent["qs"])


def test_release_times_and_the_engine_shape_the_schedule():
    p = ag.AgentPlanner(HAND, ag.Level("f", 2, 4), timeout_factor=None)
    plans = {"a": p.calls(EARLIER, "a"), "b": p.calls(EARLIER, "b")}
    run = al.schedule_sessions(plans, {"a": 0.0, "b": 10.0}, HAND, {"workers": 1})
    # no overlap: each session alone = planner + the sum of its calls on one worker
    alone = al.sequential_seconds(plans["a"], HAND)
    assert run.end["a"] == pytest.approx(alone) and run.end["b"] == pytest.approx(10 + alone)
    params = decoder_init(vocab=32, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=64, seed=0)

    def engine(reqs):  # the real continuous-batching server, one request at a time, arrivals in ticks
        trace = [llm.Request(n, int(t / HAND.t_fixed), np.ones(pt, np.int64), m)
                 for n, (t, _, pt, m) in enumerate(reqs)]
        res = llm.serve(params, trace, 64, 8, max_batch=1, prefill_chunk=None)
        lat = res.latency_seconds(HAND.t_fixed, HAND.t_token)
        return [t + s for (t, *_), s in zip(reqs, lat)]

    both = al.schedule_sessions(plans, {"a": 0.0, "b": 10.0}, HAND, {"workers": 2, "index": 2}, engine=engine)
    assert both.end["a"] == pytest.approx(ab.predict(plans["a"], HAND).latency_s)  # fan-out: the critical path
    assert {s.stage for s in both.spans} == {"planner", "retrieve", "read", "calculator", "engine", "respond"}
    with pytest.raises(ValueError, match="workers"):
        al.schedule_sessions(plans, {"a": 0.0, "b": 0.0}, HAND, {"index": 2})


def test_sequential_service_and_nearest_rank_percentiles_by_hand():
    start, end = al.reference_service([0.0, 1.0, 5.0], [2.0, 2.0, 1.0])
    np.testing.assert_array_equal(start, [0, 2, 5])
    np.testing.assert_array_equal(end, [2, 4, 6])
    assert al.percentiles(range(1, 101)) == {50: 50.0, 95: 95.0, 99: 99.0}
    assert al.percentiles([3.0, 1.0, 2.0], (50, 99)) == {50: 2.0, 99: 3.0}
    with pytest.raises(ValueError):
        al.percentiles([])
    assert math.isclose(ag.AgentCosts(gpu_usd_per_hour=3.6, batch=1).usd_per_token, 1e-3 * (0.02 + 2e-4))
