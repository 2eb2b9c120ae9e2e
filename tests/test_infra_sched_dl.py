"""Tiresias-style 2D-LAS with preemption, priorities, tenant fair share and GPU types (Chapter 33).

The event simulator ``sched_dl.simulate_dl`` is checked against hand-worked schedules, against the batch
simulator's FIFO, and against a brute-force reference written here that steps time by ``DT`` and
recomputes every decision from scratch (instances whose events all land on the DT grid, so both must
agree exactly).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.infra import sched_dl as dl
from scaleoutai.infra import sched_metrics as sm
from scaleoutai.infra import scheduling as sc

DT = 0.5


def reference_las(trace, pools, thresholds, weights=None, priority=None, promote_after=math.inf,
                  restart_cost=0.0):
    """Step time by DT; at every step redo completions, arrivals, promotions and the whole allocation."""
    n = len(trace)
    g = [int(x) for x in trace.size]
    ten = [int(u) for u in trace.user]
    prio = [0] * n if priority is None else list(priority)
    rem = [float(r) for r in trace.runtime]
    svc, ovh, pool = [0.0] * n, [0.0] * n, [-1] * n
    ran, promoted = [False] * n, [False] * n
    start, end, since = [math.nan] * n, [math.nan] * n, [math.nan] * n
    t = 0.0
    while any(math.isnan(e) for e in end):
        for j in range(n):
            if pool[j] >= 0 and rem[j] <= 1e-9:
                end[j], pool[j] = t, -1
        act = [j for j in range(n) if trace.submit[j] <= t and math.isnan(end[j])]
        for j in act:
            if math.isnan(since[j]):
                since[j] = t
            if pool[j] < 0 and not promoted[j] and t - since[j] >= promote_after:
                promoted[j], svc[j] = True, 0.0

        def rank(j):
            q = len([th for th in thresholds if svc[j] >= th])
            return (-prio[j], q, trace.submit[j], j)
        free = [p.gpus for p in pools]
        got, seen = {}, set()

        def place(j):
            seen.add(j)
            claim = [sum(g[i] for i in act if pool[i] == k and i not in seen) for k in range(len(pools))]
            fast = sorted(range(len(pools)), key=lambda k: (-pools[k].speed, k))
            opts = [pool[j]] if pool[j] >= 0 and free[pool[j]] >= g[j] else []
            opts += [k for k in fast if free[k] - claim[k] >= g[j]] + [k for k in fast if free[k] >= g[j]]
            if opts:
                free[opts[0]] -= g[j]
                got[j] = opts[0]
            return bool(opts)
        if weights is None:
            for j in sorted(act, key=rank):
                place(j)
        else:
            for c in sorted(set(prio[j] for j in act), reverse=True):
                todo = {u: sorted((j for j in act if prio[j] == c and ten[j] == u), key=rank) for u in set(ten)}
                while any(todo.values()):
                    held = {u: sum(g[j] for j in got if ten[j] == u) for u in todo}
                    u = min((u for u in todo if todo[u]), key=lambda u: (held[u] / weights[u], u))
                    place(todo[u].pop(0))
        for j in act:
            new = got.get(j, -1)
            if pool[j] >= 0 and new < 0:
                since[j], promoted[j] = t, False
            if new >= 0 and new != pool[j]:
                start[j] = t if math.isnan(start[j]) else start[j]
                ovh[j] = restart_cost if ran[j] else 0.0
                ran[j] = True
            pool[j] = new
        for j in act:                                   # run one step
            if pool[j] >= 0:
                used = min(ovh[j], DT)
                ovh[j] -= used
                rem[j] -= (DT - used) * pools[pool[j]].speed
                svc[j] += g[j] * DT
        t += DT
    return np.array(start), np.array(end)


def _jct(trace, s):
    return (s.end - trace.submit).tolist()


def test_hand_worked_las_lets_the_short_job_preempt_the_demoted_long_one():
    # 4 GPUs, threshold 40 GPU-s. A (4 GPUs, 100 s) reaches 40 at t = 10 and sinks to Q1; B (1 GPU, 10 s,
    # arrived at 2) preempts it and runs 10-20; A needs all 4 GPUs, resumes at 20 and ends at 110.
    tr = sc.make_trace([(0, 4, 100), (2, 1, 10)])
    las = dl.simulate_dl(tr, [dl.Pool("a", 4)], "las", thresholds=(40,))
    fifo = dl.simulate_dl(tr, [dl.Pool("a", 4)], "fifo")
    assert _jct(tr, las) == [110, 18] and _jct(tr, fifo) == [100, 108]
    assert las.extra["preemptions"].tolist() == [1, 0]


def test_hand_worked_restart_cost_and_gpu_types():
    # one fast pool (speed 2): A (2 GPUs, work 100) hits 20 GPU-s at t = 10 with 80 work left; B (work 20)
    # preempts, ends at 20; A restores for 5 s, then 80 / 2 = 40 s: ends at 65
    tr = sc.make_trace([(0, 2, 100), (10, 2, 20)])
    s = dl.simulate_dl(tr, [dl.Pool("fast", 2, 2.0)], "las", thresholds=(20,), restart_cost=5)
    assert s.start.tolist() == [0, 10] and s.end.tolist() == [65, 20]
    # add a slow pool: B goes there instead of preempting (work 20 at speed 1), A never stops
    s = dl.simulate_dl(tr, [dl.Pool("slow", 2, 1.0), dl.Pool("fast", 2, 2.0)], "las", thresholds=(20,),
                       restart_cost=5)
    assert s.end.tolist() == [50, 30] and s.extra["pool"].tolist() == [1, 0]
    assert s.extra["preemptions"].tolist() == [0, 0]


def test_higher_priority_class_preempts_whatever_its_queue():
    tr = sc.make_trace([(0, 2, 100), (5, 2, 10)])
    s = dl.simulate_dl(tr, [dl.Pool("a", 2)], "las", thresholds=(1e6,), priority=[0, 1])
    assert s.end.tolist() == [110, 15]


@pytest.mark.parametrize("capacity", [4, 16, 64])
def test_fifo_on_one_pool_is_the_batch_simulators_fifo(capacity):
    for seed in range(3):
        tr = datasets.job_trace(150, capacity=capacity, load=0.9, seed=seed)
        a, b = sc.simulate(tr, capacity, "fifo"), dl.simulate_dl(tr, [dl.Pool("a", capacity)], "fifo")
        assert np.array_equal(a.start, b.start) and np.allclose(a.end, b.end, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", range(12))
def test_event_simulator_matches_the_stepping_reference(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(3, 8))
    jobs = [(int(rng.integers(0, 12)), int(rng.choice([1, 2])), int(rng.integers(1, 16))) for _ in range(n)]
    jobs.sort(key=lambda r: r[0])
    tr = sc.make_trace(jobs, users=rng.integers(0, 2, n))
    pools = [dl.Pool("slow", 2, 1.0), dl.Pool("fast", 2, 2.0)] if case % 2 else [dl.Pool("a", 3, 1.0)]
    kw = {"thresholds": (4.0, 12.0), "restart_cost": float(case % 3 == 0), "promote_after": 6.0 if case % 4 == 1
          else math.inf, "weights": [1.0, 2.0] if case % 3 == 2 else None,
          "priority": rng.integers(0, 2, n).tolist() if case % 5 == 4 else None}
    s = dl.simulate_dl(tr, pools, "las", **kw)
    start, end = reference_las(tr, pools, **kw)
    np.testing.assert_allclose(s.start, start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(s.end, end, rtol=0, atol=1e-9)


def test_las_beats_fifo_on_mean_jct_for_heavy_tailed_jobs():
    # log-uniform runtimes from 10 s to a day: a few jobs hold most of the work
    for seed in range(3):
        tr = datasets.job_trace(250, capacity=16, load=0.8, seed=seed)
        pools = [dl.Pool("a", 16)]
        fifo = sm.metrics(tr, dl.simulate_dl(tr, pools, "fifo"))["mean_response"]
        las = sm.metrics(tr, dl.simulate_dl(tr, pools, "las", thresholds=(3600.0, 36000.0)))["mean_response"]
        assert las < fifo / 3, (seed, las, fifo)


def test_promotion_bounds_the_longest_wait_of_a_starved_job():
    # a 4-GPU job sinks to Q1 after 10 s; 4-GPU jobs of 5 s arrive every 5 s for 2000 s and keep Q0 full
    jobs = [(0, 4, 1000)] + [(1 + 5 * k, 4, 5) for k in range(400)]
    tr = sc.make_trace(jobs)
    pools = [dl.Pool("a", 4)]
    starved = dl.simulate_dl(tr, pools, "las", thresholds=(40.0,))
    assert starved.extra["max_spell"][0] > 1900               # waits for the whole stream
    for limit in (50.0, 100.0, 300.0):
        s = dl.simulate_dl(tr, pools, "las", thresholds=(40.0,), promote_after=limit)
        assert s.extra["max_spell"][0] == pytest.approx(limit)  # promoted to Q0, starts at once


@pytest.mark.parametrize("weights", [[1, 2, 3], [5, 1, 1], [1, 1, 1]])
def test_tenant_shares_follow_weights_under_saturation(weights):
    rng = np.random.default_rng(0)
    n = 450
    tr = sc.make_trace([(0, int(rng.choice([1, 2, 4])), float(rng.integers(100, 2000))) for _ in range(n)],
                       users=np.arange(n) % 3)
    pools = [dl.Pool("v100", 32, 1.0), dl.Pool("a100", 32, 2.0)]
    s = dl.simulate_dl(tr, pools, "las", thresholds=(2000.0,), weights=weights)
    busy_until = min(s.end[tr.user == u].max() for u in range(3))     # every tenant still has work queued
    share = dl.tenant_shares(s, 0.0, 0.8 * busy_until)
    # indivisible jobs: a tenant can be off its weight by at most one job's GPUs (4 of 64)
    np.testing.assert_allclose(share, np.array(weights) / sum(weights), rtol=0, atol=4 / 64)


def test_bad_inputs_are_refused():
    tr = sc.make_trace([(0, 8, 10)])
    with pytest.raises(ValueError, match="largest pool"):
        dl.simulate_dl(tr, [dl.Pool("a", 4), dl.Pool("b", 4)])
    with pytest.raises(ValueError, match="policy"):
        dl.simulate_dl(tr, [dl.Pool("a", 8)], "srtf")
    with pytest.raises(ValueError, match="weights"):
        dl.simulate_dl(tr, [dl.Pool("a", 8)], weights=[])


def test_las_beats_one_arrival_order_queue_on_median_jct():
    # the same work-conserving, preemptive walk with no thresholds: what LAS adds is the queue order
    for seed in range(3):
        tr = datasets.job_trace(250, capacity=16, load=0.8, seed=seed)
        pools = [dl.Pool("a", 16)]
        one = dl.simulate_dl(tr, pools, "las", thresholds=())
        las = dl.simulate_dl(tr, pools, "las", thresholds=(3600.0, 36000.0))
        assert np.median(las.end - tr.submit) < np.median(one.end - tr.submit) / 2, seed
        assert np.mean(las.end - tr.submit) < np.mean(one.end - tr.submit), seed


def test_weighted_fair_share_by_hand():
    # 4 GPUs, 1-GPU jobs of 100 s, tenants weighted 1 : 3 -> 1 and 3 GPUs while both have work queued
    tr = sc.make_trace([(0, 1, 100)] * 16, users=np.repeat([0, 1], 8))
    s = dl.simulate_dl(tr, [dl.Pool("a", 4)], "las", thresholds=(1e9,), weights=[1.0, 3.0])
    np.testing.assert_allclose(dl.tenant_shares(s, 0.0, 200.0), [0.25, 0.75], rtol=0, atol=1e-12)
    assert s.end[tr.user == 1].max() == 300 and s.start[tr.user == 0].tolist()[:2] == [0, 100]
