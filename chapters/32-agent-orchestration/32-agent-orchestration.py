# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 32. Agent orchestration
#
# An agent that answers a request by calling tools (search an index, summarise a document, charge a
# card, write a record) is a distributed program whether or not anyone calls it one. The tools are
# remote services with their own latency and their own failures; some of them change the world, so
# calling one twice is not the same as calling it once; and a long request outlives the process that
# started it. This chapter separates the agent into a **planner**, which turns a request into a task
# graph of tool calls, and **workers**, which execute the calls that are ready. An orchestrator on the
# communicator dispatches the graph to worker ranks, retries transient failures with backoff, enforces
# timeouts, makes side effects take place exactly once with idempotency keys when replies are lost or
# workers crash, and writes a checkpoint after every completed call so a half-finished graph resumes
# where it stopped. The same plan then runs under LangGraph, with its retry policy and checkpointer,
# and must end in the same state after the same number of tool executions.
#
# **Prerequisites:** Chapter 27 (Distributed AI: a manager that hands tasks to contractors and re-announces
# them after a crash) and Chapter 2 (failure models, timeouts as failure detectors, idempotence), Chapter 18
# (Elastic and fault-tolerant training: atomic checkpoints and resuming after a crash), and Chapter 4 for
# the communicator.

# %% tags=["parameters"]
REQUEST = "Research raft, paxos, gossip, crdt and vector clocks; charge acct-7 $12.50; save the report"
KS = [1, 2, 3, 5, 8, 16]  # smoke: [1, 2, 3, 5, 16]
P_FAIL = 0.2
P_HANG = 0.1
LOSS_RATES = [0.0, 0.05, 0.1, 0.15, 0.2]  # smoke: [0.0, 0.1, 0.2]
LOSS_SEEDS = 20  # smoke: 4
N_TASKS = 240  # smoke: 60
WIDTHS = [2, 8, 32]  # smoke: [2, 8]
SWEEP_KS = [1, 2, 3, 5, 9, 17, 33, 65]  # smoke: [1, 2, 3, 5, 9, 17]
SEED = 0

# %% [markdown]
# `REQUEST` is what the user asks the agent. `KS` are the world sizes of the checks (rank 0 is the
# orchestrator, ranks 1 to K - 1 are workers). `P_FAIL` and `P_HANG` are the chances that one tool
# call fails transiently or hangs; `LOSS_RATES` the chances that a message is lost on the link, each
# tried with `LOSS_SEEDS` seeds. `N_TASKS` and `WIDTHS` shape the random task graphs of Section 7
# (width: how many tasks a layer of the graph holds), swept over `SWEEP_KS`.
#
# ## 1. Motivation: which ceiling binds
#
# An agent's tool calls are short on CPU and long on waiting: a web search, a retrieval, a model call
# each take a few hundred milliseconds to seconds, almost all of it in someone else's service. Run one
# after another, a request of n calls takes the sum of their latencies, and every call is a chance to
# fail. The binding ceilings are therefore **latency** (the longest chain of calls that depend on each
# other, not the total) and **reliability**: if each call fails with chance q, a run of n calls without
# retries succeeds with chance $(1-q)^n$, which falls fast.

# %%
import json
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, perf
from scaleoutai.agents import orchestration as orc
from scaleoutai.agents import orchestration_plan as op
from scaleoutai.agents import orchestration_tools as ot

n_calls = np.array([1, 5, 10, 20, 50, 100])
for q in (0.01, 0.02, 0.05):
    print(f"q = {q:.2f}: chance that n calls all succeed without retries " +
          ", ".join(f"n={n}: {(1 - q) ** n:.2f}" for n in n_calls))
print(f"one call retried up to 4 times at q = 0.05 fails with chance {0.05 ** 4:.1e}")

# %% [markdown]
# Retrying fixes the second ceiling only if a retry is harmless. For a search it is; for "charge the
# card" it is not, unless the service can tell a retry from a new request. Running independent calls at
# the same time attacks the first ceiling, up to the limit the graph's longest chain sets.
#
# ## 2. Core concepts
#
# **Planner and workers.** The planner is a model with the interface of a chat client: a list of messages
# in, an assistant message with structured `tool_calls` out. Here it is a small scripted rule set, so
# every plan is exact and nothing is downloaded; an LLM would sit behind the same interface. Each tool
# call names the calls whose results it needs (`depends_on`), which makes the plan a directed acyclic
# graph (DAG): a **task graph**.

# %%
planner = op.ScriptedPlanner()
messages = [{"role": "system", "content": "You plan tool calls. Reply with tool_calls only."},
            {"role": "user", "content": REQUEST}]
reply = planner.invoke(messages)
print(reply["content"])
for c in reply["tool_calls"][:3] + reply["tool_calls"][-3:]:
    print(f"  {c['id']:>22}  {c['name']:>12}({json.dumps(c['args'])})  after {c['depends_on']}  "
          f"timeout {c['timeout']} s")
plan = op.plan_from_message(reply)
box = ot.default_toolbox()
assert op.plan_from_message(planner.invoke(messages)).fingerprint() == plan.fingerprint()  # deterministic
print(op.ScriptedPlanner().invoke([{"role": "user", "content": "research raft; book a flight"}])["content"])

# %% [markdown]
# **Work and span.** With $c_i$ the simulated cost of call $i$, the **work** $T_1 = \sum_i c_i$ is the time
# of one worker, and the **span** $T_\infty$ is the cost of the longest chain of dependent calls (the
# critical path), the time of unlimited workers. No schedule on $W = K - 1$ workers beats
# $\max(T_\infty, T_1/W)$, so the speedup can never exceed the graph's **parallelism** $T_1/T_\infty$. The
# plan has a fan-out (a search and a summary per topic) and a fan-in (the merge); the red path is critical.

# %%
def draw_plan(plan, cost, ax, critical=()):
    level = {}
    for i in plan.order:
        level[i] = 1 + max((level[d] for d in plan.by_id[i].deps), default=-1)
    rows = {}
    for i in plan.order:
        rows.setdefault(level[i], []).append(i)
    pos = {i: (lv, -(k - (len(ids) - 1) / 2)) for lv, ids in rows.items() for k, i in enumerate(ids)}
    for i in plan.order:
        for d in plan.by_id[i].deps:
            on = d in critical and i in critical
            ax.annotate("", pos[i], pos[d], arrowprops=dict(arrowstyle="->", color="C3" if on else "0.6",
                                                            lw=2 if on else 1))
    for i, (x, y) in pos.items():
        ax.text(x, y, f"{i}\n{cost(plan.by_id[i]):.1f} s", ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round", fc="mistyrose" if i in critical else "white",
                          ec="C3" if i in critical else "0.4"))
    ax.set(xlim=(-0.6, max(level.values()) + 0.6), ylim=(-max(map(len, rows.values())) / 2 - 0.2,
                                                       max(map(len, rows.values())) / 2 + 0.2))
    ax.axis("off")


T1, (Tinf, crit) = op.work(plan, box.cost), op.critical_path(plan, box.cost)
fig, ax = plt.subplots(figsize=(11, 4))
draw_plan(plan, box.cost, ax, crit)
ax.set_title(f"the plan: {len(plan)} tool calls, T_1 = {T1:.1f} s, T_inf = {Tinf:.1f} s, parallelism {T1 / Tinf:.2f}")
plt.show()
print("critical path:", " -> ".join(crit))

# %% [markdown]
# **Retries, idempotency keys, exactly-once effects.** A caller that hears nothing cannot tell a call that
# never ran from a call whose answer was lost. It must retry (at-least-once delivery), so a side effect is
# applied once only if the service **deduplicates**: each call carries an *idempotency key*, the same for
# every retry of the same task, and the service applies a key once and answers a repeat with the stored
# record. At-least-once delivery plus idempotent application is what "exactly once" means in practice.
# The key must name the task (`run/charge`), never the attempt.
#
# **Timeouts** turn a hung call into a failure the orchestrator can act on; the work the service did is
# not undone, which is one more reason for the keys. **Backoff** spaces the retries out
# ($b, b\gamma, b\gamma^2, \dots$) so that a struggling service is not hammered. A **checkpoint** of the
# orchestrator's state (finished calls and their results), rewritten atomically after every completion,
# lets a new orchestrator resume a half-finished graph.
#
# ## 3. The distribution and communication pattern
#
# Rank 0 is the orchestrator; ranks 1 to K - 1 are workers. The orchestrator keeps the whole state of
# the graph. It sends the first ready call (in the plan's topological order) to the lowest idle worker,
# with the results of its dependencies, and the worker answers once: `ok` with the result, `failed`,
# `timeout`, or `lost` if the request itself vanished. There is no receive-from-any on the communicator, so
# the orchestrator always waits for the worker whose call should finish first (dispatch time plus the
# call's nominal cost): it knows whom it waits for, and a worker that answers late only delays the others'
# next dispatch. Every request and reply goes through rank 0, a star like Chapter 27's contract net:
# results cross the network twice, once back to the orchestrator and once to the next call.

# %%
net = cluster.Network(alpha=5e-3, beta=1e-8)  # 5 ms per message, 100 MB/s
traced, res = orc.run_orchestration(plan, 4, network=net, trace=True)
fig, axes = plt.subplots(1, 2, figsize=(14, 3.8))
cluster.plot_timeline(res, ax=axes[0], title="messages: rank 0 orchestrates, ranks 1-3 run tool calls")


def gantt(schedule, ax, title):
    for k, (i, (w, s, e)) in enumerate(sorted(schedule.items(), key=lambda kv: kv[1][1])):
        ax.barh(w, e - s, left=s, color=f"C{k % 10}", edgecolor="k", lw=0.5)
        label = i if ":" not in i else f"{i.split(':')[0][:3]} {i.split(':')[1][:6]}"  # "sea raft", "sum raft"
        ax.text(s + (e - s) / 2, w, label, ha="center", va="center", fontsize=6, rotation=90 if e - s < 0.15 else 0)
    ax.set(xlabel="simulated time (s)", ylabel="worker rank", title=title)


gantt(traced["schedule"], axes[1], f"tool calls per worker, makespan {traced['makespan']:.2f} s")
plt.tight_layout()
plt.show()
sent = [s.bytes_sent for s in res.stats]
print(f"bytes sent: orchestrator {sent[0]}, workers {sent[1:]}; messages from rank 0: {res.stats[0].messages_sent} "
      f"= {len(plan)} calls + 3 stops")
assert traced["results"] == ot.reference_orchestration(plan)

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `orchestrate` is the whole protocol, one function per rank. A worker rank runs `serve_tools`, a loop
# that answers every request with exactly one reply; rank 0 runs the orchestrator's main loop: dispatch,
# wait for the earliest expected finish, `settle` the reply (record, retry or give up). `execute` is the harness around one tool call (it
# counts the call, draws the seeded fault, commits a side effect under its key, applies the timeout), and
# `ToolLedger.apply` is the deduplicating service.

# %%
from scaleoutai.notebooks import show

show(orc.serve_tools, orc.orchestrate, ot.execute, ot.ToolLedger.apply, orc.save_checkpoint)

# %% [markdown]
# The reference is a single-machine topological executor: every call once, in the plan's order. The
# check: for every K in `KS` and for more workers than calls, the results equal the reference, every call
# ran once, the ledger holds one effect per key, and the simulated makespan equals the greedy list
# schedule that `list_schedule` predicts when messages are free.

# %%
reference = ot.reference_orchestration(plan)
free = cluster.Network(alpha=0.0, beta=0.0)
for K in KS + [len(plan) + 4]:
    ledger = ot.ToolLedger()
    out, _ = orc.run_orchestration(plan, K, ledger=ledger, network=free)
    predicted, _ = op.list_schedule(plan, box.cost, max(1, K - 1))
    assert out["results"] == reference, K
    assert ledger.calls == {i: 1 for i in plan.order} and ledger.duplicates == 0
    assert sorted(ledger.effects) == ["run/charge", "run/record"]
    assert abs(out["makespan"] - predicted) < 1e-9
    assert max(Tinf, T1 / max(1, K - 1)) - 1e-9 <= out["makespan"] <= T1 / max(1, K - 1) + Tinf + 1e-9
    print(f"K = {K:>2}: makespan {out['makespan']:.2f} s (predicted {predicted:.2f} s), "
          f"speedup {T1 / out['makespan']:.2f}")
print(f"equal to the reference for K in {KS + [len(plan) + 4]}; the speedup stops at T_1 / T_inf = {T1 / Tinf:.2f}")

# %% [markdown]
# ## 5. The same task with a production library: LangGraph
#
# LangGraph describes an agent as a `StateGraph`: nodes are functions of a shared state, edges say what
# runs next, and a conditional edge may return `Send` packets to fan out one node over many inputs. Our
# graph is: `plan` (the scripted model writes the tool calls into the state) -> one `Send("call_tool",
# ...)` per ready call -> `join` -> fan out again until nothing is left. `call_tool` carries a
# `RetryPolicy` for the transient `ToolFailed` and `ToolTimeout`, and the graph is compiled with a
# checkpointer (`InMemorySaver`; the SQLite saver lives in a separate package, `langgraph-checkpoint-sqlite`,
# which this environment does not install). The tools, the ledger and the seeded faults are the same
# objects as ours, so the final state and the number of tool executions must be the same.

# %%
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from scaleoutai.agents import orchestration_langgraph as olg  # noqa: E402

show(olg.build_langgraph)

# %%
faults = ot.ToolFaults(fail=P_FAIL, hang=P_HANG, seed=SEED)
t0 = time.perf_counter()
lg_ledger = ot.ToolLedger()
app, lg_attempts = olg.build_langgraph(ledger=lg_ledger, faults=faults, max_attempts=8, checkpointer=InMemorySaver())
state = app.invoke({"messages": messages}, {"configurable": {"thread_id": "straight"}})
lg_seconds = time.perf_counter() - t0
our_ledger = ot.ToolLedger()
ours, _ = orc.run_orchestration(plan, 4, ledger=our_ledger, tool_faults=faults, max_attempts=8)
assert state["done"] == ours["results"] == reference
assert dict(lg_attempts) == ours["tries"] and lg_ledger.calls == our_ledger.calls
assert lg_ledger.effects == our_ledger.effects and sum(lg_attempts.values()) > len(plan)
print(f"LangGraph == ours: same final state, {sum(lg_attempts.values())} tool executions for {len(plan)} calls "
      f"in both (retried: { {i: n for i, n in lg_attempts.items() if n > 1} }); LangGraph took {lg_seconds:.2f} s")

# %% [markdown]
# **Resume from the checkpointer.** The run is killed the first time `summarize:paxos` starts (an
# exception the retry policy does not catch, as if the process died there). LangGraph has stored the state
# after every superstep and the writes of the branches that finished in the superstep that failed;
# `invoke(None, config)` resumes the thread. No finished tool is called again, and the interrupted run plus
# its resumption execute exactly the calls of one uninterrupted run.

# %%
kill_ledger = ot.ToolLedger()
app, _ = olg.build_langgraph(ledger=kill_ledger, faults=faults, max_attempts=8, checkpointer=InMemorySaver(),
                             kill_at="summarize:paxos")
config = {"configurable": {"thread_id": "killed"}}
try:
    app.invoke({"messages": messages}, config)
    raise AssertionError("the injected kill did not happen")
except olg.Interrupted as err:
    print(f"interrupted: {err}")
before = dict(kill_ledger.calls)
snapshot = app.get_state(config)
print(f"checkpointed: {len(snapshot.values['done'])} results, next node {snapshot.next}")
state = app.invoke(None, config)
assert state["done"] == reference
assert all(kill_ledger.calls[i] == n for i, n in before.items())
assert kill_ledger.calls == our_ledger.calls and kill_ledger.effects == our_ledger.effects
print(f"resumed: {len(before)} calls finished before the kill, none repeated; total executions "
      f"{sum(kill_ledger.calls.values())} = the uninterrupted run's")

# %% [markdown]
# One difference in the model of execution: LangGraph runs a graph in **supersteps**; every branch of a
# superstep must finish before the next begins. On the simulator that is our `schedule="waves"`: dispatch
# only when every worker is idle. With uneven call costs, a wave lasts as long as its slowest call.

# %%
for K in (3, 6):
    g = orc.run_orchestration(plan, K, network=free)[0]["makespan"]
    w = orc.run_orchestration(plan, K, network=free, schedule="waves")[0]["makespan"]
    assert w >= g - 1e-12 and abs(w - op.list_schedule(plan, box.cost, K - 1, "waves")[0]) < 1e-9
    print(f"{K - 1} workers: greedy {g:.2f} s, supersteps (waves) {w:.2f} s")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Transient failures and hangs.** With `P_FAIL` and `P_HANG`, calls fail or hang (ten times their cost)
# at random, seeded by (seed, task, attempt). A hang runs into the call's timeout (four times the nominal
# cost, set by the planner), and the orchestrator retries with exponential backoff. The events show what
# happened, and the result is still the reference.

# %%
out, _ = orc.run_orchestration(plan, 4, ledger=ot.ToolLedger(), tool_faults=faults, max_attempts=8, network=net)
for t, what, task, rank in out["events"]:
    if what != "ok":
        print(f"  t = {t:6.2f} s  {what:>8}  {task:<20} on rank {rank}")
assert out["results"] == reference
print(f"makespan {out['makespan']:.2f} s with faults vs {traced['makespan']:.2f} s without; "
      f"tries {sum(out['tries'].values())}")

# %% [markdown]
# **A lost reply of a side effect.** With one worker, the calls run in the plan's order, so its reply for
# `charge` is its n-th message, n the position of `charge` in that order. `Faults(drop=...)` loses it on
# the link: the orchestrator's receive raises `MessageLostError`, so it cannot know whether the card was
# charged, and it retries. With the task's key the ledger charges once and returns the first record;
# with a key per *attempt* (a common bug) the customer pays twice.

# %%
n = plan.order.index("charge")
ledger = ot.ToolLedger()
out, _ = orc.run_orchestration(plan, 2, ledger=ledger, faults=cluster.Faults(drop={1: {n}}))
assert out["results"] == reference and ledger.calls["charge"] == 2 and ledger.duplicates == 1
print(f"charge called {ledger.calls['charge']} times, effects {sorted(ledger.effects)}, "
      f"duplicates answered {ledger.duplicates}")
per_attempt = ot.ToolLedger()
for attempt in (1, 2):
    per_attempt.apply(f"run/charge/try{attempt}", "charge_card", {"account": "acct-7", "amount_cents": 1250})
print(f"with a key per attempt: {len(per_attempt.effects)} charges of 12.50")
assert len(per_attempt.effects) == 2

# %% [markdown]
# **A worker that crashes after the effect.** The worker that runs `charge` crashes as it sends the reply:
# the charge went through, the answer never came. `PeerCrashedError` tells the orchestrator; it drops the
# worker and hands the call to another at once, with the same key.

# %%
clean, _ = orc.run_orchestration(plan, 4, network=free)
victim, start = clean["schedule"]["charge"][:2]
sent_before = sum(1 for r, s, _ in clean["schedule"].values() if r == victim and s < start)
ledger = ot.ToolLedger()
out, res = orc.run_orchestration(plan, 4, ledger=ledger, network=free,
                                 faults=cluster.Faults(crash={victim: sent_before}))
assert out["dead"] == [victim] and out["results"] == reference and ledger.duplicates == 1
print(f"rank {victim} crashed after charging; events for charge: "
      f"{[(e[1], e[3]) for e in out['events'] if e[2] == 'charge']}; one charge in the ledger")

# %% [markdown]
# **The orchestrator crashes half-way; resume from the checkpoint.** The orchestrator writes its state to a
# temporary file and renames it over the checkpoint after every completion (`os.replace` is atomic, so a
# crash mid-write leaves the old checkpoint). We crash rank 0 at its 7th dispatch, then start a new run
# with the same checkpoint and the same ledger (the ledger is the external service; it survives).

# %%
ck = Path(tempfile.mkdtemp()) / "request-42.json"
ledger = ot.ToolLedger()
first, res = orc.run_orchestration(plan, 4, ledger=ledger, faults=cluster.Faults(crash={0: 6}), checkpoint=str(ck))
assert first is None and isinstance(res.values[0], cluster.RankCrashed)
saved = json.loads(ck.read_text())["done"]
calls_before = dict(ledger.calls)
out, _ = orc.run_orchestration(plan, 4, ledger=ledger, checkpoint=str(ck))
assert out["results"] == reference and out["resumed"] == sorted(saved)
assert all(ledger.calls[i] == 1 for i in saved)
again = [i for i in plan.order if ledger.calls[i] > 1]
print(f"checkpoint held {len(saved)} of {len(plan)} results; resumed run called "
      f"{sum(ledger.calls.values()) - sum(calls_before.values())} "
      f"tools; re-executed (in flight at the crash, not yet checkpointed): {again}")

# %% [markdown]
# **Lossy links.** Every message is lost with chance `loss` (requests, replies, stops). A lost request
# comes back as "lost" and is resent without counting as a try; a lost reply is a timeout and a retry.
# Over `LOSS_SEEDS` seeds per rate, every run must end at the reference with one effect per key; the cost
# is extra tries and a longer makespan.

# %%
rows = []
for loss in LOSS_RATES:
    spans, extra = [], []
    for s in range(LOSS_SEEDS):
        ledger = ot.ToolLedger()
        f = cluster.Faults(loss=loss, seed=s) if loss else None
        out, _ = orc.run_orchestration(plan, 4, ledger=ledger, faults=f, network=net, max_attempts=12)
        assert out["results"] == reference and sorted(ledger.effects) == ["run/charge", "run/record"], (loss, s)
        spans.append(out["makespan"])
        extra.append(sum(ledger.calls.values()) - len(plan))
    rows.append((loss, np.mean(spans), np.mean(extra)))
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].plot([r[0] for r in rows], [r[1] for r in rows], "o-")
axes[0].set(xlabel="message loss rate", ylabel="mean makespan (s)", title="time lost to retries")
axes[1].plot([r[0] for r in rows], [r[2] for r in rows], "o-", color="C1")
axes[1].set(xlabel="message loss rate", ylabel="extra tool executions per run",
            title="re-executions (all deduplicated)")
plt.tight_layout()
plt.show()
for loss, m, e in rows:
    print(f"loss {loss:.2f}: makespan {m:.2f} s, {e:.2f} extra executions per run")

# %% [markdown]
# One fault is not survived: at shutdown, the orchestrator sends "stop" and waits for "bye". If the "stop"
# and the worker's "lost" notice are both lost, the orchestrator takes the silence for a lost "bye" and
# leaves; the worker waits forever (the simulator names it in a `DeadlockError`). No finite exchange of
# messages over a lossy link can make both sides sure (the two generals problem); real systems end with
# a timeout on the worker's side (a lease), which the communicator does not have.
#
# ## 7. Evaluation: speedup, efficiency, cost
#
# Random layered task graphs of `N_TASKS` calls with costs between 0.1 and 1 s, in layers of `WIDTHS`
# calls. A narrow graph has little parallelism $T_1/T_\infty$; a wide one has a lot. For each we sweep the
# number of workers and compare the makespan with the lower bound $\max(T_\infty, T_1/W)$ and Graham's
# upper bound $T_1/W + T_\infty$ for greedy list scheduling.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
price = capstone.lookup("aws-c7i.xlarge")
for ci, width in enumerate(WIDTHS):
    g = op.random_plan(N_TASKS, width=width, fan_in=2, seed=SEED)
    w1, sp = op.work(g, box.cost), op.span(g, box.cost)
    times, waves, msg_time = {}, {}, {}
    for K in SWEEP_KS:
        out, res = orc.run_orchestration(g, K, network=net)
        times[max(1, K - 1)] = out["makespan"]
        msg_time[max(1, K - 1)] = sum(s.messages_sent * net.alpha + s.bytes_sent * net.beta for s in res.stats)
        if K > 1:
            waves[K - 1] = orc.run_orchestration(g, K, network=net, schedule="waves")[0]["makespan"]
    W = np.array(sorted(times))
    axes[0].plot(W, [w1 / times[x] for x in W], "o-", color=f"C{ci}", label=f"width {width}: greedy")
    axes[0].plot(sorted(waves), [w1 / waves[x] for x in sorted(waves)], "x:", color=f"C{ci}",
                 label=f"width {width}: waves")
    axes[0].axhline(w1 / sp, color=f"C{ci}", ls="--", lw=0.8)
    axes[1].plot(W, [times[x] for x in W], "o-", color=f"C{ci}", label=f"width {width}")
    axes[1].fill_between(W, np.maximum(sp, w1 / W), w1 / W + sp, color=f"C{ci}", alpha=0.15)
    for x in W:
        assert max(sp, w1 / x) - 1e-9 <= times[x] <= w1 / x + sp + msg_time[x]  # Graham, plus every message's time
    table = perf.scaling_table(times)
    print(f"width {width}: T_1 = {w1:.1f} s, T_inf = {sp:.1f} s, parallelism {w1 / sp:.1f}")
    for row in table[1::2]:
        cost = perf.run_cost(price.price_per_hour, row["p"] + 1, row["time"])
        print(f"   W = {row['p']:>2}: makespan {row['time']:7.2f} s  S = {row['speedup']:5.2f}  "
              f"E = {row['efficiency']:.2f}"
              f"  waves {waves.get(row['p'], times[1]):7.2f} s  cost {1000 * cost:.3f} mUSD")
axes[0].plot(W, W, "k-", lw=0.5, label="ideal S = W")
axes[0].set(xscale="log", yscale="log", xlabel="workers W = K - 1", ylabel="speedup T_1 / T_K",
            title="speedup; dashed: the ceiling T_1 / T_inf")
axes[0].legend(fontsize=7)
axes[1].set(xscale="log", yscale="log", xlabel="workers W = K - 1", ylabel="makespan (s)",
            title="makespan within [max(T_inf, T_1/W), T_1/W + T_inf]")
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank, orchestrator included ({price.date})")

# %% [markdown]
# The speedup follows the ideal line while $W$ is small against the parallelism, then bends to the
# dashed ceiling $T_1/T_\infty$: past it, more workers sit idle and only add cost (efficiency falls as
# $1/W$). A narrow graph saturates with a handful of workers, whatever the budget. Waves (supersteps)
# lose against greedy dispatch whenever the calls of a layer have uneven costs, because every wave waits
# for its slowest call. For an agent the lesson is about the planner: a plan that exposes independent
# calls (a wide graph, a short critical path) is worth more than more workers.
#
# ## 8. Exercises
#
# 1. **Work stealing.** Replace the central orchestrator's dispatch by per-worker queues with stealing
#    (Blumofe and Leiserson). What changes in the number of messages, and what does the orchestrator
#    still have to do?
# 2. **Critical-path priority.** Dispatch the ready call with the longest remaining path to the end first
#    (HLFET) instead of plan order. Measure the makespan against greedy on the random graphs of Section 7.
# 3. **Hedged requests.** When a call has run for twice its expected cost, send a duplicate to another
#    worker and keep the first answer. Which calls may be hedged without idempotency keys? Measure the
#    tail of the makespan with `P_HANG = 0.2`.
# 4. **A saga.** Add a tool `refund` and make `write_record` fail permanently. Write the compensation: when
#    a call after `charge` fails for good, the orchestrator refunds under its own key. Prove it refunds once.
# 5. **A durable checkpointer.** Write a LangGraph checkpointer on top of `save_checkpoint` (a JSON file per
#    thread, written with temp file + rename) and show that a new process resumes a killed run.
# 6. **Replanning.** Let the planner see the search results and add a `fetch` call per document it finds
#    (a graph that grows while it runs). What must the checkpoint store now?
#
# ## 9. Research directions
#
# - **Planning for parallel tool use.** ReAct-style agents call one tool, read the answer, then decide the
#   next: a chain, the worst case for span. Planners that emit a task graph, execute it in parallel and
#   replan when a result changes the goal are recent; how to keep the span short without wasting calls
#   on branches that turn out useless is open.
#   - Yao, Zhao, Yu, Du, Shafran, Narasimhan and Cao, "ReAct: Synergizing Reasoning and Acting in Language
#     Models", ICLR, 2023. The interleaved reason-act loop most agents start from.
#   - Kim, Moon, Tabrizi, Lee, Mahoney, Keutzer and Gholami, "An LLM Compiler for Parallel Function
#     Calling", ICML, 2024. A planner that emits a DAG of function calls and an executor that runs them in parallel.
# - **Exactly-once effects across services.** Idempotency keys need the service's cooperation; many tools
#   do not offer it, and multi-step effects need compensation (sagas) or transactions across services.
#   Giving agents these guarantees without a coordinator in every call is open.
#   - Helland, "Idempotence Is Not a Medical Condition", ACM Queue, 2012. Why retries over unreliable
#     messaging demand idempotent operations, and how to design them.
#   - Garcia-Molina and Salem, "Sagas", SIGMOD, 1987. Long-lived transactions as sequences of steps with
#     compensating actions.
#   - Sreekanti, Wu, Chhatrapati, Gonzalez, Hellerstein and Faleiro, "A Fault-Tolerance Shim for Serverless
#     Computing", EuroSys, 2020. Atomic visibility of side effects under retries of serverless functions.
# - **Scheduling with unknown costs.** Our orchestrator knows each call's nominal cost; real tool and model
#   latencies are heavy-tailed and unknown in advance. Bounds for list scheduling and work stealing hold for
#   any costs, but serving systems that see the whole agent graph can do better than either.
#   - Graham, "Bounds on Multiprocessing Timing Anomalies", SIAM Journal on Applied Mathematics, 1969. The
#     T_1/W + T_inf bound for greedy list scheduling.
#   - Blumofe and Leiserson, "Scheduling Multithreaded Computations by Work Stealing", Journal of the ACM,
#     1999. Decentralised scheduling with the same bound in expectation.
#   - Lin, Han, Zhang, Shi, Li, Yang and Li, "Parrot: Efficient Serving of LLM-based Applications with
#     Semantic Variable", OSDI, 2024. Exposing the dependencies between an application's LLM calls to the
#     serving system.
# - **Durable execution of dynamic task graphs.** An agent's graph grows as it runs; recovering it needs
#   either checkpoints of the orchestrator (this chapter) or lineage that can replay the parts that were
#   lost. Doing this cheaply for millions of short calls is an active area.
#   - Moritz, Nishihara, Wang, Tumanov, Liaw, Liang, Elibol, Yang, Paul, Jordan and Stoica, "Ray: A
#     Distributed Framework for Emerging AI Applications", OSDI, 2018. Dynamic task graphs with
#     lineage-based fault tolerance.
#
# ## What's next
#
# Chapter 33 (Cluster scheduling) opens Part VII. The orchestrator here placed one request's tool calls on
# a few workers; a cluster scheduler places many users' jobs, each asking for CPUs, GPUs and memory, on
# thousands of machines, with priorities, fairness between tenants and preemption.
