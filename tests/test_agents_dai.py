"""Chapter 27: the contract net, asynchronous backtracking, distributed breakout and the blackboard,
each on the communicator against a single-machine reference, with crashes from cluster.Faults."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import dai
from scaleoutai.agents import dai_blackboard as bb
from scaleoutai.agents import dai_csp as cs
from scaleoutai.agents import dai_rounds as dr

# --- contract net --------------------------------------------------------------------------------


@pytest.mark.parametrize("T,C", [(7, 1), (7, 2), (9, 4), (3, 8)])  # K = C + 1 = 2, 3, 5 and more contractors than tasks
@pytest.mark.parametrize("capacity,load", [(None, 0.0), (3, 0.0), (None, 0.7), (2, 0.4)])
def test_contract_net_equals_the_greedy_auction_and_counts_its_messages(T, C, capacity, load):
    tasks, contractors = dai.make_market(T, C, seed=T + C)
    if capacity is not None and capacity * C < T:
        capacity = -(-T // C)
    out, res = dai.run_contract_net(tasks, contractors, capacity, load)
    ref = dai.reference_contract_net(tasks, contractors, capacity, load)
    assert out["done_by"] == ref["done_by"] and out["awards"] == ref["awards"] and out["phases"] == ref["phases"] == 1
    assert sorted(out["done_by"]) == list(range(T))  # every task exactly once
    assert all(out["values"][t] == dai.task_value(tasks[t]) for t in range(T))
    if capacity is not None:
        assert max(np.bincount(list(out["done_by"].values()), minlength=C)) <= capacity
    # manager: T C announcements, T awards, C go, C stop; contractors: T C bids, T results
    assert res.stats[0].messages_sent == T * C + T + 2 * C
    assert sum(s.messages_sent for s in res.stats[1:]) == T * C + T


@pytest.mark.parametrize("seed", range(6))
def test_greedy_award_is_optimal_without_capacity_and_never_beats_the_optimum_with_it(seed):
    tasks, contractors = dai.make_market(12, 4, seed=seed)
    costs = dai.cost_matrix(tasks, contractors)
    free = dai.reference_contract_net(tasks, contractors)
    plan, best = dai.optimal_assignment(costs)
    assert free["done_by"] == plan and free["total_cost"] == pytest.approx(best, rel=1e-12)
    tight = dai.reference_contract_net(tasks, contractors, capacity=3)
    _, best3 = dai.optimal_assignment(costs, capacity=3)
    assert tight["total_cost"] >= best3 - 1e-12
    assert tight["total_cost"] <= 2.0 * best3  # greedy is not far off on these markets


@pytest.mark.parametrize("load", [0.0, 0.5])
@pytest.mark.parametrize("victim", [0, 2])
def test_a_crash_anywhere_re_announces_the_lost_tasks_and_every_task_completes_once(victim, load):
    tasks, contractors = dai.make_market(9, 3, seed=5)
    seen_crash_kinds = set()
    for n in range(0, 9 + 9):  # every send of the victim: bids, then results
        out, res = dai.run_contract_net(tasks, contractors, capacity=4, load=load,
                                        faults=cluster.Faults(crash={victim + 1: n}))
        ref = dai.reference_contract_net(tasks, contractors, capacity=4, load=load, crash={victim: n})
        assert out["done_by"] == ref["done_by"] and out["awards"] == ref["awards"], n
        assert sorted(out["done_by"]) == list(range(9)), n
        if isinstance(res.values[victim + 1], cluster.RankCrashed):
            assert victim not in out["alive"]
            seen_crash_kinds.add("bid" if n < 9 else "result")
            assert all(out["done_by"][t] != victim for t in out["reannounced"])
    assert seen_crash_kinds == {"bid", "result"}


def test_crash_mid_task_loses_the_work_done_but_not_reported():
    tasks, contractors = dai.make_market(10, 3, seed=1)
    won = [t for p, t, c, _ in dai.reference_contract_net(tasks, contractors, 4)["awards"] if c == 1]
    out, res = dai.run_contract_net(tasks, contractors, 4, faults=dai.crash_mid_task(tasks, contractors, 1, 1, 4))
    assert out["reannounced"] == sorted(won[1:]) and out["phases"] == 2
    assert out["done_by"][won[0]] == 1 and all(out["done_by"][t] != 1 for t in won[1:])
    assert isinstance(res.values[2], cluster.RankCrashed)
    with pytest.raises(ValueError, match="choose 0 <= done"):
        dai.crash_mid_task(tasks, contractors, 1, len(won), 4)


def test_when_every_contractor_crashes_the_manager_stops_with_the_tasks_it_has():
    tasks, contractors = dai.make_market(6, 2, seed=0)
    out, _ = dai.run_contract_net(tasks, contractors, faults=cluster.Faults(crash={1: 6, 2: 6}), timeout=10)
    assert out["alive"] == [] and out["done_by"] == {}


def test_contractors_work_in_parallel_on_the_simulated_clock():
    tasks, contractors = dai.make_market(12, 4, seed=3)
    out, res = dai.run_contract_net(tasks, contractors, capacity=3, seconds_per_cost=1.0,
                                    network=cluster.Network(alpha=0.0, beta=0.0))
    costs = dai.cost_matrix(tasks, contractors)
    per = np.zeros(4)
    for t, c in out["done_by"].items():
        per[c] += costs[t, c]
    assert res.sim_time == pytest.approx(per.max(), rel=1e-12)  # the makespan, not the sum


def test_contract_net_refuses_bad_input():
    tasks, contractors = dai.make_market(3, 2)
    with pytest.raises(ValueError, match="K >= 2"):
        dai.run_contract_net(tasks, contractors[:0])
    with pytest.raises(ValueError, match="capacity"):
        dai.run_contract_net(tasks, contractors, capacity=0)
    with pytest.raises(ValueError, match="load"):
        dai.reference_contract_net(tasks, contractors, load=-1.0)
    with pytest.raises(ValueError, match="do not fit"):
        dai.optimal_assignment(dai.cost_matrix(tasks, contractors), capacity=1)


# --- distributed constraint satisfaction ---------------------------------------------------------

@pytest.mark.parametrize("n,seed", [(13, 0), (23, 1), (31, 2)])
def test_abt_and_dba_runs_equal_their_one_machine_rounds_for_every_placement(n, seed):
    nb = cs.planted_graph(n, 3, 4.0, seed=seed)
    want = {"abt": dr.reference_abt(nb, 3), "dba": dr.reference_dba(nb, 3, seed=seed)}
    for K in (1, 2, 3, 5, n + 4):  # uneven blocks, and ranks with no variable
        for algo, run in (("abt", dr.run_abt), ("dba", dr.run_dba)):
            got, res = run(nb, 3, K) if algo == "abt" else run(nb, 3, K, seed=seed)
            ref = want[algo]
            assert got["status"] == ref["status"] == "solved", (algo, K)
            assert got["rounds"] == ref["rounds"] and got["by_kind"] == ref["by_kind"], (algo, K)
            np.testing.assert_array_equal(got["colours"], ref["colours"])
            assert cs.is_proper(nb, got["colours"], 3)
            if K == 1:
                assert res.stats[0].messages_sent == 0  # every agent on one rank: nothing on the network


@pytest.mark.parametrize("seed", range(8))
def test_abt_colours_exactly_the_graphs_the_reference_solver_colours(seed):
    rng = np.random.default_rng(seed)
    n, degree = int(rng.integers(8, 16)), float(rng.uniform(3.0, 6.5))
    nb = cs.planted_graph(n, 4, degree, seed=seed)  # 4-colourable; with 3 colours it may or may not be
    for k in (3, 4):
        want = cs.solve_colouring(nb, k)
        got, _ = dr.run_abt(nb, k, 3)
        assert got["status"] == ("solved" if want is not None else "unsatisfiable"), (seed, k)
        if want is not None:
            assert cs.is_proper(nb, got["colours"], k) and cs.is_proper(nb, want, k)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 14])
def test_abt_proves_unsatisfiable_instances_and_dba_never_claims_them(K):
    groetzsch = cs.mycielski([[1, 4], [0, 2], [1, 3], [2, 4], [0, 3]])
    assert len(groetzsch) == 11 and sum(map(len, groetzsch)) == 40  # 20 edges
    assert all(not set(groetzsch[a]) & set(groetzsch[b]) for a in range(11) for b in groetzsch[a])  # no triangle
    for nb, k in ((cs.complete_graph(4), 3), (groetzsch, 3)):
        assert cs.solve_colouring(nb, k) is None and cs.solve_colouring(nb, k + 1) is not None
        got, _ = dr.run_abt(nb, k, K)
        assert got["status"] == "unsatisfiable" and got["colours"] is None
        assert got["rounds"] == dr.reference_abt(nb, k)["rounds"]
        dba_run, _ = dr.run_dba(nb, k, K, max_rounds=60)
        assert dba_run["status"] == "max_rounds" and dba_run["colours"] is None  # incomplete: it cannot tell


def test_message_counts_follow_each_protocol():
    nb = cs.planted_graph(40, 3, 4.0, seed=3)
    edges = sum(map(len, nb)) // 2
    d, res = dr.run_dba(nb, 3, 4, seed=3)
    assert d["messages"] == d["rounds"] * 2 * edges  # every agent tells every neighbour, every round
    assert d["by_kind"]["ok"] + d["by_kind"]["improve"] == d["messages"]
    a, res = dr.run_abt(nb, 3, 4)
    assert a["by_kind"]["improve"] == 0 and a["by_kind"]["ok"] >= sum(1 for i in range(40) for j in nb[i] if j > i)
    # on the network: one array per peer rank per round, plus the detector's all-reduce (K = 4: 2 x 4 per round)
    peers = sum(len(p["peers"]) for p in res.values)
    assert sum(s.messages_sent for s in res.stats) == a["rounds"] * peers + a["detector_messages"]
    assert a["detector_messages"] == (a["rounds"] + 1) * 8


def test_induced_graph_holds_the_graph_and_closes_parents_into_cliques():
    nb = cs.planted_graph(25, 3, 3.0, seed=4)
    ind = cs.induced_graph(nb)
    assert all(set(nb[i]) <= set(ind[i]) for i in range(25))
    for v in range(25):
        parents = [u for u in ind[v] if u < v]
        assert all(b in ind[a] for a in parents for b in parents if a != b)


def test_a_crashed_agent_rank_stops_the_search_with_a_named_error():
    nb = cs.planted_graph(12, 3, 4.0, seed=0)
    with pytest.raises(cluster.RankError, match="PeerCrashedError|crashed"):
        dr.run_dba(nb, 3, 3, faults=cluster.Faults(crash={1: 3}), timeout=20)


def test_graphs_messages_and_errors():
    msgs = [(3, 1, cs.OK, (2,)), (0, 4, cs.NOGOOD, (0, 1, 2, 2, 4, 0)), (5, 2, cs.ADDLINK, ())]
    assert dr.decode(dr.encode(msgs)) == msgs and dr.decode(dr.encode([])) == []
    nb = cs.planted_graph(30, 3, 4.0, seed=1)
    assert sum(map(len, nb)) == 2 * 60 and cs.is_proper(nb, cs.solve_colouring(nb, 3), 3)
    assert not cs.is_proper(nb, np.zeros(30, dtype=int), 3)
    with pytest.raises(ValueError, match="undirected"):
        dr.run_abt([[1], []], 3, 2)
    with pytest.raises(ValueError, match="k >= 1"):
        dr.reference_dba(nb, 0)


# --- blackboard ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blackboard_solves_the_puzzle_like_the_direct_solver_for_every_K(seed):
    puzzle, solution = bb.make_sudoku(seed)
    direct, count = bb.solve_sudoku(puzzle)
    assert count == 1 and np.array_equal(direct, solution)
    ref = bb.reference_blackboard(puzzle)
    assert ref["solved"] and np.array_equal(ref["grid"], solution)
    for K in (1, 2, 3, 5, 8):  # 8: more ranks than knowledge sources, some idle
        out, res = bb.run_blackboard(puzzle, K)
        assert np.array_equal(out["grid"], solution) and out["chosen"] == ref["chosen"], K
        live = min(K - 1, len(bb.SOURCES))
        cycles = len(out["chosen"])
        assert res.stats[0].messages_sent == cycles * (live + (K > 1)) + live  # boards, ACTs, STOPs


def test_every_knowledge_source_contribution_agrees_with_the_solution():
    puzzle, solution = bb.make_sudoku(7)
    board = puzzle.ravel().copy()
    rng = np.random.default_rng(7)
    for _ in range(6):  # partial boards along the way, with some solution cells revealed at random
        for name in bb.SOURCES:
            for cell, d in bb.knowledge_source(name, board):
                assert solution.ravel()[cell] == d
        hide = rng.choice(np.flatnonzero(board == 0), size=8, replace=False)
        board[hide] = solution.ravel()[hide]


def test_the_controller_rejects_contributions_that_contradict_the_board():
    puzzle, solution = bb.make_sudoku(3)
    board = puzzle.ravel().copy()
    empty = np.flatnonzero(board == 0)
    filled = np.flatnonzero(board)[0]
    wrong = [d for d in range(1, 10) if d in board[bb.PEERS[empty[0]]]][0]
    bad = np.array([[filled, board[filled] % 9 + 1], [empty[0], wrong], [empty[1], 0], [99, 1]])
    assert bb.accept(board, bad) == 0 and np.array_equal(board, puzzle.ravel())
    good = np.array([[empty[0], solution.ravel()[empty[0]]]])
    assert bb.accept(board, good) == 1


def test_a_crashed_knowledge_source_is_covered_by_its_replica():
    puzzle, solution = bb.make_sudoku(0)
    for victim in (1, 2, 3):
        out, _ = bb.run_blackboard(puzzle, 5, replicas=2, faults=cluster.Faults(crash={victim: 2}))
        assert out["crashed"] == [victim] and out["solved"] and np.array_equal(out["grid"], solution)
        alone, _ = bb.run_blackboard(puzzle, 5, replicas=1, faults=cluster.Faults(crash={victim: 2}))
        g = alone["grid"].ravel()
        assert np.all((g == 0) | (g == solution.ravel()))  # with a KS gone it may stall, but never errs


def test_blackboard_refuses_bad_input():
    puzzle, _ = bb.make_sudoku(0)
    with pytest.raises(ValueError, match="81"):
        bb.run_blackboard(puzzle[:3], 2)
    with pytest.raises(ValueError, match="policy"):
        bb.reference_blackboard(puzzle, policy="random")
    with pytest.raises(ValueError, match="replicas"):
        bb.hosts(3, replicas=3)
    with pytest.raises(ValueError, match="unknown knowledge source"):
        bb.knowledge_source("x-wing", puzzle)


# --- production: Ray actors ----------------------------------------------------------------------

def test_ray_actor_contract_net_with_a_killed_actor_equals_ours(ray_local):
    from scaleoutai.agents.dai_ray import ray_contract_net

    tasks, contractors = dai.make_market(10, 3, seed=2)
    out = ray_contract_net(tasks, contractors, capacity=5, load=0.3, kill=(1, 1))
    assert list(out["died"]) == [1] and out["phases"] == 2 and out["reannounced"]
    done = out["died"][1]  # results it reported before the kill landed (1 unless the next task beat it)
    ours, res = dai.run_contract_net(tasks, contractors, 5, 0.3,
                                     faults=dai.crash_mid_task(tasks, contractors, 1, done, 5, 0.3))
    assert out["done_by"] == ours["done_by"] and out["awards"] == ours["awards"]
    assert out["reannounced"] == ours["reannounced"] and sorted(out["done_by"]) == list(range(10))
    assert out["values"] == ours["values"]
