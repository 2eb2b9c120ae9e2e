"""Chapter 33: the scheduler simulator (FIFO, EASY, conservative, gang), DRF, metrics, gang launch,
a real Slurm with sched/backfill, and Ray placement groups on a 3-node ray.cluster_utils.Cluster."""
from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.infra import sched_metrics as sm
from scaleoutai.infra import sched_policies as sp
from scaleoutai.infra import scheduling as sc
from scaleoutai.infra import slurm_compare as sl

SEEDS = range(25)


def _small(seed: int, capacity: int) -> datasets.JobTrace:
    return datasets.job_trace(30, capacity=capacity, load=1.3, seed=seed, min_runtime=1, max_runtime=30,
                             estimate_unit=1)


# ---- hand-worked examples (8 nodes; Section 4 works them on paper) ----

def test_hand_worked_example_gives_the_known_start_times_for_fifo_easy_and_conservative():
    tr = sl.slurm_job_set()
    # FIFO: job 1 (4) waits for job 0 (6) to end at 6; jobs 3, 4 wait for job 1 to end at 10
    assert sc.simulate(tr, 8, "fifo").start.tolist() == [0, 6, 6, 10, 10]
    # EASY: head 1 reserved at 120 with 4 spare nodes; job 3 (2 nodes, limit 180) uses spare ones -> t=0
    easy = sc.simulate(tr, 8, "easy")
    assert easy.start.tolist() == [0, 6, 9, 0, 6] and easy.reserved[1] == 120
    # conservative: job 2 is reserved beside job 1 at 120, so job 3 may not start; job 4 (limit 60) can
    cons = sc.simulate(tr, 8, "conservative")
    assert cons.start.tolist() == [0, 6, 6, 10, 0] and cons.reserved.tolist() == [0, 120, 120, 180, 0]


def test_gang_time_slicing_lets_a_short_job_finish_early_at_the_price_of_the_long_one():
    tr = sc.make_trace([(0, 4, 10), (0, 4, 1)])
    fifo = sc.simulate(tr, 4, "fifo")
    gang = sc.simulate(tr, 4, "gang", mpl=2)
    assert fifo.end.tolist() == [10, 11]
    assert gang.start.tolist() == [0, 0] and np.allclose(gang.end, [11, 2])  # both rows at half speed until 2
    slow = sc.simulate(tr, 4, "gang", mpl=2, switch_cost=0.5)                 # rate (1 - 0.5) / 2 = 1/4
    assert np.allclose(slow.end, [4 + 9, 4])


def test_gang_with_mpl_one_is_fifo():
    for seed in range(5):
        tr = _small(seed, 8)
        assert np.allclose(sc.simulate(tr, 8, "gang", mpl=1).start, sc.simulate(tr, 8, "fifo").start)


# ---- invariants on many seeded traces, and the stepping reference ----

@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 16])
def test_event_simulator_matches_the_time_stepping_reference_for_fifo_and_easy(capacity):
    for seed in range(12):
        tr = _small(seed, capacity)
        for policy in ("fifo", "easy"):
            start, end = sm.reference_simulate(tr, capacity, policy)
            s = sc.simulate(tr, capacity, policy)
            np.testing.assert_array_equal(s.start, start, err_msg=f"{policy} seed {seed}")
            np.testing.assert_array_equal(s.end, end)


@pytest.mark.parametrize("policy", ["fifo", "easy", "conservative", "gang"])
def test_no_oversubscription_each_job_runs_once_and_reservations_never_move_later(policy):
    for seed in SEEDS:
        cap = (4, 7, 16, 32)[seed % 4]
        tr = datasets.job_trace(60, capacity=cap, load=1.1, seed=seed, min_runtime=1, max_runtime=500,
                               estimate_unit=7)
        s = sc.simulate(tr, cap, policy)
        assert sm.violations(tr, s) == [], (policy, seed)
        if policy in ("easy", "conservative"):
            assert s.reservation_increases == 0
            has = ~np.isnan(s.reserved)
            assert np.all(s.start[has] <= s.reserved[has] + 1e-9)


def test_fifo_starts_in_arrival_order_and_backfill_never_does_worse_on_the_mean_wait_here():
    tr = datasets.job_trace(2000, capacity=64, load=0.9, seed=3)
    f, e, c = (sc.simulate(tr, 64, p) for p in ("fifo", "easy", "conservative"))
    assert np.all(np.diff(f.start) >= 0)
    mf, me, mc = (sm.metrics(tr, s) for s in (f, e, c))
    assert me["mean_wait"] < mf["mean_wait"] and mc["mean_wait"] < mf["mean_wait"]
    assert me["utilisation"] > mf["utilisation"] and mf["fragmentation"] > me["fragmentation"]


def test_violations_catches_a_broken_schedule():
    tr = sc.make_trace([(0, 3, 5), (0, 3, 5)])
    bad = sc.Schedule("fifo", 4, np.array([0.0, 1.0]), np.array([5.0, 6.0]), np.full(2, np.nan))
    assert "more nodes in use than the machine has" in sm.violations(tr, bad)


@pytest.mark.serial  # a time ratio: another test running beside it would skew it
def test_simulator_processes_tens_of_thousands_of_jobs_per_second_for_fifo_and_easy():
    tr = datasets.job_trace(10_000, capacity=128, load=0.9, seed=1)
    for policy in ("fifo", "easy"):
        t = time.perf_counter()
        s = sc.simulate(tr, 128, policy)
        rate = len(tr) / (time.perf_counter() - t)
        assert sm.violations(tr, s) == [] and rate > 10_000, (policy, rate)


def test_trace_generation_is_a_pure_function_of_the_seed_and_estimates_cover_runtimes():
    a, b, c = (datasets.job_trace(500, seed=s) for s in (7, 7, 8))
    assert all(np.array_equal(x, y) for x, y in zip(a.__dict__.values(), b.__dict__.values()))
    assert not np.array_equal(a.runtime, c.runtime)
    assert np.all(a.estimate >= a.runtime) and np.all(np.diff(a.submit) >= 0) and a.size.max() <= 128


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="estimate must be >= the runtime"):
        sc.make_trace([(0, 1, 10, 5)])
    with pytest.raises(ValueError, match="raise capacity"):
        sc.simulate(sc.make_trace([(0, 9, 1)]), 8)
    with pytest.raises(ValueError, match="unknown policy"):
        sc.simulate(sc.make_trace([(0, 1, 1)]), 8, "lottery")


# ---- metrics ----

def test_metrics_on_a_hand_worked_fragmentation_example():
    tr = sc.make_trace([(0, 2, 10), (0, 4, 4)])            # the 4-node job waits while 2 nodes idle
    m = sm.metrics(tr, sc.simulate(tr, 4, "fifo"))
    assert m["makespan"] == 14 and m["mean_wait"] == 5
    assert m["fragmentation"] == pytest.approx(2 * 10 / (4 * 14))
    assert m["utilisation"] == pytest.approx((20 + 16) / (4 * 14))
    assert m["mean_bsld"] == pytest.approx((1 + 14 / 10) / 2)


def test_jain_index_is_one_for_equal_shares_and_one_over_n_for_one_winner():
    assert sm.jain_index([3, 3, 3]) == pytest.approx(1.0)
    assert sm.jain_index([5, 0, 0, 0]) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        sm.jain_index([])


# ---- dominant resource fairness ----

def test_drf_gives_the_papers_example_three_and_two_tasks_by_progressive_filling_and_by_lp():
    cap, dem = [9, 18], [[1, 4], [3, 1]]
    assert sp.drf_allocate(cap, dem).tolist() == [3, 2]
    np.testing.assert_allclose(sp.reference_drf_lp(cap, dem), [3, 2], atol=1e-6)
    np.testing.assert_allclose(sp.dominant_shares(cap, dem, [3, 2]), [2 / 3, 2 / 3])


def test_drf_is_pareto_efficient_and_within_one_task_of_the_lp_water_filling():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n, r = int(rng.integers(2, 6)), 3                    # CPUs, GPUs, memory
        cap = rng.integers(20, 60, r).astype(float)
        dem = rng.integers(0, 6, (n, r)).astype(float)
        dem[:, 0] += 1
        tasks = sp.drf_allocate(cap, dem)
        used = tasks @ dem
        assert np.all(used <= cap + 1e-9)
        assert all(np.any(used + dem[i] > cap + 1e-9) for i in range(n))   # nobody can add a task
        lp = sp.reference_drf_lp(cap, dem)
        dom = (dem / cap).max(1)
        # discrete filling is within one task of the fluid one in dominant share, for the users the LP limits
        assert np.all(tasks * dom <= lp * dom + dom.max() + 1e-9)


# ---- gang placement and the all-or-nothing gang launch ----

def test_place_bundles_strategies_on_three_two_cpu_nodes():
    nodes = [{"CPU": 2}] * 3
    one = [{"CPU": 1}]
    assert sp.place_bundles(one * 2, nodes, "PACK") == [0, 0]
    assert sp.place_bundles(one * 3, nodes, "PACK") == [0, 0, 1]
    assert sp.place_bundles(one * 5, nodes, "SPREAD") == [0, 1, 2, 0, 1]
    assert sp.place_bundles(one * 3, nodes, "STRICT_PACK") is None
    assert sorted(sp.place_bundles(one * 3, nodes, "STRICT_SPREAD")) == [0, 1, 2]
    assert sp.place_bundles(one * 4, nodes, "STRICT_SPREAD") is None


@pytest.mark.parametrize("K", [2, 3, 5, 9])
def test_gang_launch_runs_on_every_node_in_runtime_plus_message_latency(K):
    net = cluster.Network(alpha=0.01, beta=0.0)
    res = sp.run_gang_launch(K, 2.0, network=net)
    assert res.values[0]["status"] == "ran" and all(v["status"] == "ran" for v in res.values[1:])
    # reserve/ack in turn (2 alpha per node), GO pipelined, the last DONE one alpha after its compute
    assert res.values[0]["t"] == pytest.approx(2.0 + 2 * 0.01 * (K - 1) + 0.01 * (K - 1) + 0.01, abs=0.011)


@pytest.mark.parametrize("faults", [dict(crash={1: 0}), dict(crash={3: 0}), dict(drop={2: {0}}),
                                    dict(drop={4: {0}}), dict(drop={1: {0}}, slow={2: 3.0})])
def test_a_failure_before_go_aborts_the_gang_and_no_node_runs_a_piece_of_it(faults):
    res = sp.run_gang_launch(5, 2.0, faults=cluster.Faults(**faults))
    head = res.values[0]
    failed = next(iter(faults.get("crash", faults.get("drop"))))
    assert head["status"] == "aborted" and head["failed"] == failed and head["t"] < 2.0
    nodes = [v for v in res.values[1:] if isinstance(v, dict)]
    assert len(nodes) == 4 - ("crash" in faults) and all(v["status"] == "released" for v in nodes)


@pytest.mark.parametrize("faults", [dict(crash={3: 1}), dict(drop={3: {1}})])
def test_a_node_lost_after_go_fails_the_whole_gang(faults):
    res = sp.run_gang_launch(5, 2.0, faults=cluster.Faults(**faults))
    assert res.values[0]["status"] == "failed" and res.values[0]["failed"] == 3


# ---- the real Slurm (sched/backfill) ----

@pytest.fixture(scope="module")
def slurm():
    why = sl.unavailable_reason()
    if why:
        pytest.skip(why)
    with sl.BackfillSlurm(cpus=8, timeout=90) as s:
        yield s


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_real_slurm_backfill_starts_jobs_in_the_conservative_order_not_easys(slurm):
    tr = sl.slurm_job_set()
    run = sl.run_on_slurm(tr, slurm, timeout=60)
    order = sl.start_order(run.start)
    assert order == sl.start_order(sc.simulate(tr, 8, "conservative").start) == [0, 4, 1, 2, 3]
    easy = sl.start_order(sc.simulate(tr, 8, "easy").start)
    assert easy == [0, 3, 1, 4, 2]                 # the one difference: EASY backfills job 3 at t = 0
    assert np.all(run.end - run.start >= tr.runtime - 1)
    # Slurm reacts to each completion within a couple of seconds of the simulator
    assert np.all(np.abs(run.start - sc.simulate(tr, 8, "conservative").start) <= 3)


# ---- Ray placement groups on a 3-node cluster ----

@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"n0": 1},
                                                       "include_dashboard": False})
    try:
        for i in (1, 2):
            c.add_node(num_cpus=2, resources={f"n{i}": 1})
        ray.init(address=c.address, log_to_driver=False, logging_level=logging.ERROR)
        c.wait_for_nodes()
        yield ray
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ray_placement_groups_land_as_our_gang_placement_predicts(ray_cluster):
    ray = ray_cluster
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    index = {n["NodeID"]: int(k[1:]) for n in ray.nodes() if n["Alive"] for k in n["Resources"]
             if k in ("n0", "n1", "n2")}
    nodes = [{"CPU": 2}] * 3
    for strategy, k in [("PACK", 2), ("PACK", 3), ("SPREAD", 3), ("SPREAD", 5), ("STRICT_PACK", 2),
                        ("STRICT_PACK", 3), ("STRICT_SPREAD", 3), ("STRICT_SPREAD", 4)]:
        bundles = [{"CPU": 1}] * k
        ours = sp.place_bundles(bundles, nodes, strategy)
        pg = placement_group(bundles, strategy=strategy)
        ready = pg.wait(timeout_seconds=10 if ours is not None else 2)
        table = placement_group_table(pg)
        remove_placement_group(pg)
        assert ready == (ours is not None), (strategy, k, table["state"])
        if ours is None:
            assert table["state"] == "PENDING"
            continue
        got = [index[table["bundles_to_node_id"][b]] for b in range(k)]
        # node names are Ray's choice: compare how many bundles share a node (the shape of the gang)
        assert sorted(np.bincount(got, minlength=3)) == sorted(np.bincount(ours, minlength=3)), (strategy, got)
        time.sleep(0.2)
