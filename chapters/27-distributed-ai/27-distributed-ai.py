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
# # Chapter 27. Distributed AI
#
# Part VI turns from distributing one model to distributing *intelligence*: many agents, each with
# its own knowledge, its own part of the problem and its own authority to act, cooperate by messages.
# This chapter builds the three classic architectures of distributed problem solving on the
# communicator, one agent per rank, so that every message, byte and simulated second is counted like
# a collective's: the **contract net**, where a manager allocates tasks by auction and re-announces
# the tasks of a contractor that crashed; **distributed constraint satisfaction**, where agents that
# each own a variable colour a graph by asynchronous backtracking (complete: it also proves that no
# colouring exists) or by the distributed breakout algorithm (local search with learned weights);
# and the **blackboard**, where specialist knowledge sources take turns writing partial solutions on
# a shared board under a controller. The contract net then runs again on Ray actors, with an actor
# killed mid-task.
#
# **Prerequisites:** Chapter 2 (Distributed-systems concepts: failure models, crash-stop processes,
# message passing) and Chapter 4 (Communication primitives: the communicator, send and recv, the
# alpha-beta cost of a message). Background: depth-first search with backtracking, and graph colouring.

# %% tags=["parameters"]
TASKS = 24  # smoke: 12
CONTRACTORS = 6  # smoke: 4
CAPACITY = 5  # smoke: 4
LOAD = 0.3
KS = [1, 2, 3, 5, 8]  # smoke: [1, 2, 3, 5]
N_NODES = 30  # smoke: 20
DEGREE = 4.0
SIZES = [10, 20, 30, 40, 60]  # smoke: [10, 20, 30]
SEEDS = 9  # smoke: 3
PUZZLES = 3  # smoke: 1
SEED = 0

# %% [markdown]
# `TASKS` tasks are auctioned among `CONTRACTORS` contractors, each taking at most `CAPACITY` tasks per
# phase, with bids that rise by `LOAD` per unit of work already won. `KS` are the world sizes $K$ of
# the checks. The constraint problems colour `N_NODES`-node graphs with 3 colours at average degree
# `DEGREE`; Section 7 sweeps the graph sizes `SIZES` over `SEEDS` seeds. `PUZZLES` Sudoku puzzles
# test the blackboard.
#
# ## 1. Motivation: which ceiling binds
#
# In the earlier parts the ceiling was compute, memory or bandwidth, and one operator owned all of
# the data. Here it is **knowledge and authority**. A delivery robot knows where it is and how fast it
# drives; the dispatcher does not. A meeting-scheduling agent knows its owner's constraints and may
# not reveal all of them. A sensor knows its own frequency conflicts. No single place holds the whole
# problem, and gathering it there may be forbidden, slow, or a single point of failure. The agents must
# solve it by exchanging only what the protocol needs. The cell shows the gap in the contract net: the
# manager holds only the tasks, while the prices live with the contractors.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import dai
from scaleoutai.agents import dai_blackboard as bb
from scaleoutai.agents import dai_csp as cs
from scaleoutai.agents import dai_rounds as dr

tasks, contractors = dai.make_market(TASKS, CONTRACTORS, seed=SEED)
costs = dai.cost_matrix(tasks, contractors)
print(f"the manager knows {tasks.size} numbers (task positions and work); the contractors know their own "
      f"{contractors.size} (position, speed)")
print(f"the prices exist only after the contractors compute them: {costs.size} costs, e.g. task 0 costs "
      + ", ".join(f"{c:.2f}" for c in costs[0]) + " at contractors 0..")

# %% [markdown]
# ## 2. Core concepts
#
# **Agents and protocols.** An agent is a process with local state, local knowledge and a policy for
# answering messages. A protocol fixes which messages exist and what an agent may conclude from them.
# Throughout, an agent is a rank; the communicator has no receive-from-any, so each protocol is
# designed so that every agent always knows whom it waits for.
#
# **The contract net** (Smith 1980). A manager *announces* a task; contractors that can do it *bid*;
# the manager *awards* it to the best bid; the contractor executes it and *reports* the result.
# Contractor $c$ prices task $t$ as $\mathrm{cost}(t, c) = \lVert p_c - q_t\rVert + w_t / s_c$ (travel,
# then work $w_t$ at speed $s_c$), adds $\lambda$ times the work it has already won (the `LOAD`, which
# spreads tasks) and refuses once it holds its capacity. Tasks are auctioned one after another, so the
# allocation is greedy; its total cost can be compared with the optimal assignment.
#
# **Distributed constraint satisfaction** (DisCSP; Yokoo et al. 1998). Each agent owns a variable
# with a domain; constraints link variables of different agents. Here: graph colouring, one agent per
# node, $k$ colours, and an edge forbids equal colours. A **nogood** is a set of assignments that
# cannot all hold (an edge's ends with one colour are a nogood; resolving nogoods yields new ones).
# Asynchronous backtracking (ABT) orders the agents by priority (index), sends `ok?` with a value to
# lower-priority neighbours, and a `nogood` to the lowest-priority variable in it when an agent has no
# value left; the empty nogood proves that no solution exists. The distributed breakout algorithm
# (DBA; Yokoo and Hirayama 1996) is local search: every cycle each agent computes how much it could
# reduce its weighted conflicts, only a local winner moves, and when nobody can improve but conflicts
# remain (a quasi-local minimum) the weights of the violated constraints grow.
#
# **The blackboard** (Erman et al. 1980; Nii 1986). A shared data structure holds the partial
# solution; *knowledge sources* (KS), each an expert in one kind of inference, watch it and offer
# contributions; a *controller* decides which KS acts next. Our board is a Sudoku grid: one KS fills
# cells with a single candidate left ("naked single"), three fill a digit that has a single possible
# cell left in a row, a column or a box ("hidden single").
#
# A small instance: an 8-node graph coloured by ABT on 3 ranks. Colours are the solution; the count of
# each message kind is what the agents had to say.

# %%
small = cs.planted_graph(8, 3, 3.5, seed=SEED + 2)
rec, _ = dr.run_abt(small, 3, 3)
assert rec["status"] == "solved" and cs.is_proper(small, rec["colours"], 3)
angle = 2 * np.pi * np.arange(8) / 8
xy = np.column_stack([np.cos(angle), np.sin(angle)])
fig, ax = plt.subplots(figsize=(4, 4))
for i, row in enumerate(small):
    for j in row:
        if i < j:
            ax.plot(*xy[[i, j]].T, color="0.6", zorder=1)
ax.scatter(*xy.T, s=500, c=[f"C{c}" for c in rec["colours"]], zorder=2)
for i, (x, y) in enumerate(xy):
    ax.text(x, y, str(i), ha="center", va="center", color="white", weight="bold")
ax.set(title="ABT's 3-colouring (agent i = node i)", aspect="equal")
ax.axis("off")
plt.show()
print(f"{rec['rounds']} rounds, messages by kind: {rec['by_kind']}")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# **Contract net: a star in phases.** Rank 0 is the manager, contractor $c$ runs on rank $c + 1$. Per
# task: an announcement to each of the $C$ live contractors, one bid back from each, one award. Then
# one `GO` per contractor, the contractors execute in parallel (`comm.compute`), and one result per
# task comes back. With $M$ tasks a phase costs $2MC + M + C$ messages plus $C$ final stops. The
# manager reads the contractors one at a time, in rank order; a contractor only ever waits on the
# manager. The timeline shows a phase with 3 contractors and 6 tasks: the auction is a burst of small
# messages, then the contractors work side by side.

# %%
few_tasks, few_contractors = dai.make_market(6, 3, seed=SEED)
traced = cluster.run(dai.contract_net, 4, args=(few_tasks, few_contractors), kwargs=dict(seconds_per_cost=2e-3),
                     trace=True, network=cluster.Network(alpha=1e-4, beta=1e-8))
cluster.plot_timeline(traced, title="contract net: auction, then parallel execution (rank 0 = manager)")
plt.show()
sent = [s.messages_sent for s in traced.stats]
print(f"messages sent per rank: {sent}; total {sum(sent)} = 2*6*3 + 6 + 2*3 (auction, awards, GO, stop) + 6 results")
assert sum(sent) == 2 * 6 * 3 + 6 + 2 * 3 + 6

# %% [markdown]
# **Constraint satisfaction: synchronous rounds.** ABT is defined for asynchronous messages, but with no
# receive-from-any a rank cannot wait for "whoever writes next". So the agents run in **synchronous
# rounds**: in round $r$ every agent reads what was sent to it in round $r - 1$ (in the order of the
# sender's index) and sends. The variables are spread over $K$ ranks in blocks; every round, a rank sends
# exactly one array to each peer rank (the packed messages for its agents, *an empty array when there
# are none*) and receives one from each. A round's all-reduce of [messages sent, empty nogood found,
# violated constraints] detects the end: ABT stops when a round sends nothing (quiescence), DBA when
# nothing is violated. Messages between agents on one rank never touch the network, but they are
# counted, so the protocol's message and round counts do not depend on $K$. ABT's peers come from the
# *induced graph* (each node's earlier neighbours joined into a clique), which bounds every link ABT
# may add at run time.

# %%
nb = cs.planted_graph(N_NODES, 3, DEGREE, seed=SEED)
ind = cs.induced_graph(nb)
edges, induced_edges = sum(map(len, nb)) // 2, sum(map(len, ind)) // 2
rec, res = dr.run_abt(nb, 3, 4)
print(f"{N_NODES} nodes, {edges} edges; the induced graph has {induced_edges} edges")
print(f"K = 4: peer ranks per rank {[len(v['peers']) for v in res.values]}; {rec['rounds']} rounds, "
      f"{rec['messages']} agent messages, {sum(s.messages_sent for s in res.stats) - rec['detector_messages']} "
      f"arrays between ranks, {rec['detector_messages']} for the detector's all-reduce")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# **The contract net.** `contract_net` is the whole protocol per rank. The manager's loop: announce,
# collect bids in rank order (a `PeerCrashedError` marks a contractor dead and puts back what it held),
# award the lowest bid (ties: the lower rank), then `GO` and the results. A contractor answers
# announcements with `make_bid`, remembers its awards, and on `GO` works and reports task by task.

# %%
from scaleoutai.notebooks import show

show(dai.contract_net, dai._contractor, dai.make_bid)

# %% [markdown]
# The checks, for every $K$ in `KS` (from 2: a manager needs a contractor) and for more contractors than
# tasks: the allocation equals the greedy auction on one machine; with unlimited capacity and no load
# term, greedy awarding is the optimal assignment (each task goes to its cheapest contractor), so it
# must equal `linear_sum_assignment`; with a capacity, greedy can only cost more than the optimum.

# %%
for K in [k for k in KS if k > 1] + [TASKS + 3]:
    C = K - 1
    market = dai.make_market(TASKS, C, seed=SEED + K)
    got, _ = dai.run_contract_net(*market)
    want = dai.reference_contract_net(*market)
    plan, best = dai.optimal_assignment(dai.cost_matrix(*market))
    assert got["done_by"] == want["done_by"] == plan and abs(want["total_cost"] - best) < 1e-9, K
    assert got["values"] == {t: dai.task_value(market[0][t]) for t in range(TASKS)}
got, res = dai.run_contract_net(tasks, contractors, CAPACITY, LOAD)
want = dai.reference_contract_net(tasks, contractors, CAPACITY, LOAD)
assert got["done_by"] == want["done_by"] and got["awards"] == want["awards"]
_, best = dai.optimal_assignment(costs, CAPACITY)
print(f"greedy = optimal without capacity for K in {[k for k in KS if k > 1] + [TASKS + 3]}")
print(f"capacity {CAPACITY}, load {LOAD}: contract net total cost {want['total_cost']:.3f}, optimum {best:.3f} "
      f"({want['total_cost'] / best:.3f}x); {sum(s.messages_sent for s in res.stats)} messages")
assert want["total_cost"] >= best - 1e-9

# %% [markdown]
# **Asynchronous backtracking.** The agent is a small state machine: `receive` handles one message
# (`ok?` updates the view; a `nogood` that still matches the agent's value and view eliminates that
# value, after asking for links to variables it did not know; `add-link` adds a child), and
# `_check_view` picks the first value that no stored nogood forbids and no higher neighbour holds, or
# backtracks: it resolves the reasons of all its eliminated values into one nogood and sends it to the
# lowest-priority variable in it.

# %%
show(cs.ABTAgent.receive, cs.ABTAgent._check_view, cs.ABTAgent._backtrack)

# %% [markdown]
# **Distributed breakout**: odd rounds read the neighbours' values and announce the possible improvement;
# even rounds move only a local winner, or raise the weights in a quasi-local minimum. And the round
# engine that carries both over the communicator:

# %%
show(cs.DBAAgent.round, dr._rounds)

# %% [markdown]
# The checks: for every $K$ in `KS` and for more ranks than nodes, both runs equal their one-machine
# rounds exactly (status, rounds, message counts by kind, colours), and the colourings are proper.
# ABT's completeness: on $K_4$ with 3 colours and on the Groetzsch graph (11 nodes, no triangle, yet not
# 3-colourable) it reports that no colouring exists, as the reference depth-first solver does;
# DBA cannot tell and runs out of rounds.

# %%
want = {"abt": dr.reference_abt(nb, 3), "dba": dr.reference_dba(nb, 3, seed=SEED)}
for K in KS + [N_NODES + 3]:
    for name, got in (("abt", dr.run_abt(nb, 3, K)[0]), ("dba", dr.run_dba(nb, 3, K, seed=SEED)[0])):
        assert got["rounds"] == want[name]["rounds"] and got["by_kind"] == want[name]["by_kind"], (name, K)
        assert np.array_equal(got["colours"], want[name]["colours"]) and cs.is_proper(nb, got["colours"], 3)
groetzsch = cs.mycielski([[1, 4], [0, 2], [1, 3], [2, 4], [0, 3]])
for name, graph in (("K4", cs.complete_graph(4)), ("Groetzsch", groetzsch)):
    assert cs.solve_colouring(graph, 3) is None
    a, _ = dr.run_abt(graph, 3, 3)
    d, _ = dr.run_dba(graph, 3, 3, max_rounds=200)
    assert a["status"] == "unsatisfiable" and d["status"] == "max_rounds"
    print(f"{name}: ABT proves 'no 3-colouring' in {a['rounds']} rounds ({a['by_kind']['nogood']} nogoods); "
          f"DBA still searching after {d['rounds']} rounds")
print(f"n = {N_NODES}: ABT {want['abt']['rounds']} rounds / {want['abt']['messages']} messages, "
      f"DBA {want['dba']['rounds']} rounds / {want['dba']['messages']} messages, "
      f"identical for K in {KS + [N_NODES + 3]}")

# %% [markdown]
# **The blackboard.** Per cycle the controller posts the board to each KS rank, each rates its KSs
# (how many cells each could fill now), the controller picks the best, that rank acts, and the
# controller checks every contribution before writing it: the cell must be empty and the digit still
# possible there.

# %%
show(bb.blackboard, bb.accept)

# %% [markdown]
# The check: for every $K$ (with $K = 1$ the controller hosts every KS; with more ranks than KSs some
# ranks idle), the blackboard fills the puzzle exactly as the direct depth-first solver does, choosing
# the same KS in every cycle as the one-machine controller. The `fixed` policy (always the first able
# KS) needs more cycles than `best` (the highest rating): control matters.

# %%
for p in range(PUZZLES):
    puzzle, solution = bb.make_sudoku(SEED + p)
    direct, count = bb.solve_sudoku(puzzle)
    assert count == 1 and np.array_equal(direct, solution)
    ref = bb.reference_blackboard(puzzle)
    for K in KS + [len(bb.SOURCES) + 3]:
        out, _ = bb.run_blackboard(puzzle, K)
        assert np.array_equal(out["grid"], solution) and out["chosen"] == ref["chosen"], (p, K)
    fixed = bb.reference_blackboard(puzzle, policy="fixed")
    uses = ", ".join(f"{s} x{ref['chosen'].count(s)}" for s in bb.SOURCES)
    print(f"puzzle {p}: {int((puzzle > 0).sum())} givens; policy best: {len(ref['chosen'])} cycles ({uses}); "
          f"fixed: {len(fixed['chosen'])} cycles")

# %% [markdown]
# ## 5. The same task with a production library: Ray actors
#
# In production, agents are long-lived services with their own state: Ray actors. Each contractor is an
# actor that keeps its position and speed private and answers `bid`, `award` and `execute` calls; the
# driver is the manager. Ray runs the calls of one caller to one actor in order, so a bid always sees
# the awards before it. Mid-way through the execution phase the driver kills one actor with `ray.kill`
# (as a lost machine would); its pending calls raise `RayActorError`, and its unreported tasks are
# re-announced to the survivors. The whole record (every award with its bid, who completed each task,
# the results) must equal our contract net on the simulator with that contractor crashing at the same
# point.

# %%
import logging
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
logging.getLogger("ray").setLevel(logging.ERROR)
import ray  # noqa: E402

from scaleoutai.agents.dai_ray import ray_contract_net  # noqa: E402

show(ray_contract_net)

# %%
ray_tasks, ray_contractors = dai.make_market(10, 3, seed=SEED + 2)
VICTIM = 1
t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
try:
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = ray_contract_net(ray_tasks, ray_contractors, capacity=5, load=LOAD, kill=(VICTIM, 1))
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
assert list(out["died"]) == [VICTIM] and out["phases"] == 2
done = out["died"][VICTIM]  # results it reported before the kill landed
ours, _ = dai.run_contract_net(ray_tasks, ray_contractors, 5, LOAD,
                               faults=dai.crash_mid_task(ray_tasks, ray_contractors, VICTIM, done, 5, LOAD))
assert out["done_by"] == ours["done_by"] and out["awards"] == ours["awards"] and out["values"] == ours["values"]
assert sorted(out["done_by"]) == list(range(10)) and out["reannounced"] == ours["reannounced"]
print(f"Ray: actor {VICTIM} killed after {done} result(s); tasks {out['reannounced']} re-announced and done by "
      f"{[out['done_by'][t] for t in out['reannounced']]}; allocation == ours "
      f"(Ray start-up {startup:.1f} s, run {ray_seconds:.1f} s)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A contractor that crashes.** `Faults(crash={rank: n})` stops a contractor at its $(n+1)$-th send:
# while bidding, or mid-task, after the work and before the report. The sweep crashes contractor 1 at
# every point; every time, every task completes exactly once, the lost tasks are re-announced in a
# second phase, and the cost is a few extra messages and simulated time.

# %%
base, base_res = dai.run_contract_net(tasks[:10], contractors[:3], capacity=5, seconds_per_cost=1e-3)
rows = []
for n in range(0, 10 + 5):
    out, res = dai.run_contract_net(tasks[:10], contractors[:3], capacity=5, seconds_per_cost=1e-3,
                                    faults=cluster.Faults(crash={2: n}))
    assert sorted(out["done_by"]) == list(range(10))  # exactly once: one record per task
    ref = dai.reference_contract_net(tasks[:10], contractors[:3], capacity=5, crash={1: n})
    assert out["done_by"] == ref["done_by"]
    rows.append((n, out["phases"], len(out["reannounced"]), sum(s.messages_sent for s in res.stats), res.sim_time))
print(f"no crash: 1 phase, {sum(s.messages_sent for s in base_res.stats)} messages, {base_res.sim_time * 1e3:.2f} ms")
print(f"{'crash at send':>13} {'phases':>6} {'re-announced':>12} {'messages':>8} {'sim ms':>7}")
for n, ph, lost, msgs, t in rows:
    print(f"{n:>13} {ph:>6} {lost:>12} {msgs:>8} {t * 1e3:>7.2f}")

# %% [markdown]
# **A lost message.** This contract net tolerates crashes, not lost messages: the manager waits for one
# bid from each contractor, so a bid lost on the link (`Faults(drop=...)`) surfaces as a
# `MessageLostError` and the run fails loudly, naming the rank. Tolerating loss needs timeouts,
# acknowledgements and retries, and then a contractor can be unsure whether its award or its report got
# through (the two generals' problem); Exercise 2 builds it with idempotent task ids.

# %%
failure = None
try:
    dai.run_contract_net(tasks[:6], contractors[:3], faults=cluster.Faults(drop={2: {1}}), timeout=20)
except cluster.RankError as err:
    failure = err
assert failure is not None and "MessageLost" in str(failure)
print("lost bid ->", str(failure).splitlines()[0][:150])

# %% [markdown]
# **A crashed constraint agent.** In DisCSP the variable *is* the agent: when an agent's rank crashes,
# its neighbours learn it (`PeerCrashedError`) and there is no one left to choose that variable's
# colour. The search cannot continue without a replica of the agent's state, so it fails loudly.

# %%
failure = None
try:
    dr.run_dba(nb, 3, 3, faults=cluster.Faults(crash={1: 5}), timeout=20)
except cluster.RankError as err:
    failure = err
assert failure is not None and "PeerCrashedError" in str(failure)
print("crashed agent rank ->", str(failure).splitlines()[0][:150])

# %% [markdown]
# **A crashed knowledge source.** The controller drops a KS rank that crashes and asks the others.
# With one copy of each KS, losing one may leave the board stuck (what was written is still correct,
# since the controller checks every write); with two replicas, the other copy covers and the puzzle is
# solved.

# %%
puzzle, solution = bb.make_sudoku(SEED)
for replicas in (1, 2):
    for victim in (1, 2, 3, 4):
        out, _ = bb.run_blackboard(puzzle, 5, replicas=replicas, faults=cluster.Faults(crash={victim: 2}))
        g = out["grid"].ravel()
        assert np.all((g == 0) | (g == solution.ravel()))
        if replicas == 2:
            assert out["solved"]
        hosted = ", ".join(bb.SOURCES[s] for s in bb.hosts(5, replicas)[victim])
        state = "solved" if out["solved"] else f"stuck with {int((g == 0).sum())} empty cells"
        print(f"replicas {replicas}, KS rank {victim} ({hosted}) crashed: {state}")

# %% [markdown]
# ## 7. Evaluation: messages, rounds, cost and time
#
# **ABT against DBA as the problem grows.** For each size in `SIZES`, `SEEDS` planted 3-colourable
# graphs at average degree `DEGREE`: the median messages and rounds to a proper colouring (the
# benchmark `benchmarks/bench_dcsp.py` runs larger sizes). DBA sends a fixed $2|E|$ messages per round,
# every agent to every neighbour; ABT talks only when a value changes, but its backtracking can grow
# fast as the graphs get harder.

# %%
t0 = time.perf_counter()
med, worst = {"abt": [], "dba": []}, {"abt": [], "dba": []}
for n in SIZES:
    runs = {"abt": [], "dba": []}
    for s in range(SEEDS):
        g = cs.planted_graph(n, 3, DEGREE, seed=s)
        for name, r in (("abt", dr.reference_abt(g, 3)), ("dba", dr.reference_dba(g, 3, seed=s))):
            assert r["status"] == "solved" and cs.is_proper(g, r["colours"], 3)
            runs[name].append((r["messages"], r["rounds"]))
    for name in med:
        med[name].append(np.median(np.array(runs[name]), axis=0))
        worst[name].append(max(m for m, _ in runs[name]))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for name in med:
    m = np.array(med[name])
    axes[0].semilogy(SIZES, m[:, 0], "o-", label=name.upper())
    axes[1].semilogy(SIZES, m[:, 1], "o-", label=name.upper())
axes[0].set(xlabel="nodes n", ylabel="messages to solution (median)", title=f"3-colouring, degree {DEGREE}")
axes[1].set(xlabel="nodes n", ylabel="rounds to solution (median)", title=f"{SEEDS} seeds per size")
axes[0].legend()
plt.tight_layout()
plt.show()
print(f"{'n':>4} {'ABT msgs':>9} {'ABT rounds':>10} {'DBA msgs':>9} {'DBA rounds':>10} {'worst/median ABT':>16} "
      f"{'DBA':>5}   ({time.perf_counter() - t0:.1f} s)")
for i, n in enumerate(SIZES):
    print(f"{n:>4} {med['abt'][i][0]:>9.0f} {med['abt'][i][1]:>10.0f} {med['dba'][i][0]:>9.0f} "
          f"{med['dba'][i][1]:>10.0f} "
          f"{worst['abt'][i] / med['abt'][i][0]:>16.1f} {worst['dba'][i] / med['dba'][i][0]:>5.1f}")

# %% [markdown]
# The medians hide the tails; the last two columns give the worst seed's messages over the median.
# ABT's cost depends on how early a bad choice of a high-priority variable is discovered, so one
# unlucky graph can cost far more than the typical one; DBA's cost is rounds times $2|E|$, and its
# rounds vary less. Near average degree 4.7, where random 3-colouring is hardest, both grow fast
# (`python benchmarks/bench_dcsp.py --degree 4.6`).
#
# **What the network carries.** The agent messages do not depend on $K$, but the arrays between ranks
# do: with more ranks, more neighbours live elsewhere, and every round costs one array per peer rank
# plus the detector's all-reduce. With one rank nothing crosses the network.

# %%
net_msgs, net_bytes, sim = [], [], []
Ks = sorted(set(KS + [N_NODES]))
for K in Ks:
    rec, res = dr.run_dba(nb, 3, K, seed=SEED, network=cluster.Network(alpha=1e-5, beta=1e-9))
    net_msgs.append(sum(s.messages_sent for s in res.stats) - rec["detector_messages"])
    net_bytes.append(sum(s.bytes_sent for s in res.stats))
    sim.append(res.sim_time)
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot(Ks, net_msgs, "o-", label="arrays between ranks")
ax.axhline(want["dba"]["messages"], color="k", ls="--", label="agent messages (any K)")
ax.set(xlabel="ranks K", ylabel="messages", title=f"DBA on {N_NODES} nodes: the protocol vs the network")
ax.legend()
plt.show()
print("K:", Ks, "\nbytes on the network:", net_bytes, "\nsimulated ms:", [round(t * 1e3, 2) for t in sim])
assert net_msgs[0] == 0

# %% [markdown]
# **The contract net's trade-off.** The load term makes a busy contractor bid higher: tasks spread out,
# so the makespan (the simulated time of the execution phase, the contractors working in parallel)
# falls, while the total cost rises above the optimum that `linear_sum_assignment` finds. A manager
# picks $\lambda$ for what it is paid for.

# %%
loads = [0.0, 0.1, 0.3, 0.6, 1.0, 2.0]
ratio, makespan = [], []
_, best = dai.optimal_assignment(costs, CAPACITY)
for lam in loads:
    out, res = dai.run_contract_net(tasks, contractors, CAPACITY, lam, seconds_per_cost=1.0,
                                    network=cluster.Network(alpha=0.0, beta=0.0))
    total = sum(costs[t, c] for t, c in out["done_by"].items())
    ratio.append(total / best)
    makespan.append(res.sim_time)
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot(ratio, makespan, "o-")
for lam, x, y in zip(loads, ratio, makespan):
    ax.annotate(f"load {lam:g}", (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
ax.set(xlabel="total cost / optimal total cost", ylabel="makespan (cost units)",
       title=f"{TASKS} tasks, {CONTRACTORS} contractors, capacity {CAPACITY}")
plt.show()
assert min(ratio) >= 1 - 1e-9 and makespan[-1] <= makespan[0]

# %% [markdown]
# ## 8. Exercises
#
# 1. **Batch awards.** Let the manager announce all pending tasks at once, collect a vector of bids from
#    each contractor and award by `linear_sum_assignment`. Compare the total cost and the messages with
#    the sequential auction for capacities 1 to 5.
# 2. **Lost messages.** Make the contract net survive `Faults(loss=0.05)`: every manager message gets a
#    reply or a timeout, awards are acknowledged, results carry the task id, and the manager records a
#    task once however many reports arrive. Show that some runs execute a task twice but none records
#    it twice.
# 3. **Variable order.** ABT's priority is the node index. Order by decreasing degree instead (relabel
#    the graph) and repeat Section 7's sweep. What happens to the median and to the worst seed?
# 4. **DBA's own termination.** Replace the all-reduce detector by DBA's termination counter (each
#    agent counts the rounds its neighbourhood has been consistent and stops at the graph's diameter).
#    Count the extra rounds it needs.
# 5. **A richer blackboard.** Add a KS for "pointing pairs" (a digit confined to one row of a box is
#    removed from the rest of that row), so the board holds candidates too. Generate harder puzzles and
#    count cycles per policy.
# 6. **Lab 27: distributed breakout over a lossy channel** (`labs/lab27-lossy-breakout`). Section 6 let
#    the first lost message end the run. Keep the chapter's DBA agents and rebuild the layer under them so
#    that, over a link that loses 20-40% of the messages, the run ends exactly as on one machine (same
#    round, same colours) for any $K$, reports an instance with no colouring as unsolved after the round
#    budget without handing back an assignment, and has no all-reduce to lean on. The grader counts the
#    messages on every link from its own trace: nothing is resent beyond what the loss forces, and the
#    last messages of the run must still reach a peer that needs them.
#
# ## 9. Research directions
#
# - **Complete search that scales.** ABT is complete but its messages grow exponentially on hard
#   instances, and its nogoods may reveal private constraints. Variants that avoid adding links,
#   reorder agents dynamically or bound the stored nogoods trade completeness, memory and messages in
#   ways still being mapped.
#   - Yokoo, Durfee, Ishida and Kuwabara, "The Distributed Constraint Satisfaction Problem:
#     Formalization and Algorithms", IEEE Transactions on Knowledge and Data Engineering, 1998. ABT and
#     the formal model of DisCSP.
#   - Bessiere, Maestre, Brito and Meseguer, "Asynchronous backtracking without adding links: a new
#     member in the ABT family", Artificial Intelligence, 2005. The unified ABT family this chapter's
#     agent follows.
# - **From satisfaction to optimisation.** Most real problems (sensor networks, meeting scheduling,
#   power grids) have costs, not just constraints. Distributed constraint optimisation has complete
#   algorithms with exponential messages or memory and local search without guarantees; good anytime
#   algorithms with bounds are open.
#   - Yokoo and Hirayama, "Distributed Breakout Algorithm for Solving Distributed Constraint
#     Satisfaction Problems", ICMAS, 1996. Breakout's weights, made distributed.
#   - Modi, Shen, Tambe and Yokoo, "ADOPT: Asynchronous Distributed Constraint Optimization with
#     Quality Guarantees", Artificial Intelligence, 2005. The first asynchronous complete DCOP algorithm.
#   - Fioretto, Pontelli and Yeoh, "Distributed Constraint Optimization Problems and Applications: A
#     Survey", Journal of Artificial Intelligence Research, 2018. The map of the field.
# - **Task allocation under failures and self-interest.** The contract net assumes honest bids and a
#   reliable manager. Robust allocation with lossy links and failing agents, and mechanisms that keep
#   agents truthful when bids are strategic, remain active (Chapter 29 takes up auctions).
#   - Smith, "The Contract Net Protocol: High-Level Communication and Control in a Distributed Problem
#     Solver", IEEE Transactions on Computers, 1980. The original protocol.
#   - Gerkey and Mataric, "A Formal Analysis and Taxonomy of Task Allocation in Multi-Robot Systems",
#     The International Journal of Robotics Research, 2004. Where greedy auctions stand against optimal
#     assignment.
#   - Choi, Brunet and How, "Consensus-Based Decentralized Auctions for Robust Task Allocation", IEEE
#     Transactions on Robotics, 2009. Auctions without a manager, with convergence guarantees.
# - **Blackboards for language-model agents.** Teams of LLM agents again share a common workspace and
#   need a controller deciding who speaks next; how to schedule them, check their contributions, and
#   bound the cost of the conversation are open questions that the blackboard literature framed first.
#   - Erman, Hayes-Roth, Lesser and Reddy, "The Hearsay-II Speech-Understanding System: Integrating
#     Knowledge to Resolve Uncertainty", ACM Computing Surveys, 1980. The first blackboard system.
#   - Nii, "Blackboard Systems", AI Magazine, 1986. The architecture and its control problem.
#   - Hong et al., "MetaGPT: Meta Programming for a Multi-Agent Collaborative Framework", ICLR, 2024.
#     LLM agents that coordinate through a shared message pool.
#   - Li, Hammoud, Itani, Khizbullin and Ghanem, "CAMEL: Communicative Agents for 'Mind' Exploration of
#     Large Language Model Society", NeurIPS, 2023. Two role-playing LLM agents carry a task forward with
#     little human steering, and the paper catalogues how such conversations drift or stall.
#   - Du, Li, Torralba, Tenenbaum and Mordatch, "Improving Factuality and Reasoning in Language Models
#     through Multiagent Debate", ICML, 2024. Several model instances answer, read each other's answers and
#     revise over rounds; the consensus is more often correct than any single answer.
#   - Wu et al., "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation", arXiv
#     preprint, 2023. A framework in which LLM, tool and human agents exchange messages under programmable
#     turn-taking rules, the controller question of the blackboard in modern form.
#
# ## What's next
#
# Chapter 28 (Game theory) drops the assumption that the agents cooperate: each has its own payoff,
# and the question becomes which outcomes self-interested agents reach (Nash equilibria) and how
# learning dynamics such as fictitious play and regret matching find them.
