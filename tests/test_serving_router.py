"""The fleet router (Chapter 23): every request served once, a batch-1 replica is the FIFO server of
``replicas.simulate``, the prefix cache equals a brute-force longest common prefix, cache-aware routing
finds at least round robin's hits, and the policies coincide where they must."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.serving import replicas as rp
from scaleoutai.serving import fleet_workload as fw
from scaleoutai.serving import router as rt
from scaleoutai.serving.step_cost import StepCost, attention_pairs

STEP = StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)


def small_workload(n=120, rate=20.0, shared=True, seed=0):
    return rt.prepare(fw.prefix_workload(n, rate, n_system=3, system_len=(64, 160), user_len=(8, 40),
                                         output_len=(4, 24), think=0.5, shared=shared, seed=seed), 16)


@pytest.mark.parametrize("policy", rt.POLICIES)
@pytest.mark.parametrize("c", [1, 3])
def test_every_request_is_served_exactly_once_with_all_its_tokens(policy, c):
    reqs = small_workload()
    fleet = [rt.Replica(STEP, max_batch=8, kv_tokens=4096, cache_blocks=64) for _ in range(c)]
    where = rt.drive(reqs, fleet, rt.Router(c, policy, cache_blocks=64))
    served = [set(rep.finish) for rep in fleet]
    assert sum(len(s) for s in served) == len(reqs) and set().union(*served) == {r.id for r in reqs}
    for r, j in zip(reqs, where):
        rep = fleet[j]
        assert r.id in rep.finish and rep.first[r.id] > r.arrival
        assert rep.finish[r.id] >= rep.first[r.id] if r.max_new > 1 else rep.finish[r.id] == rep.first[r.id]
        assert 0 <= rep.cached[r.id] < len(r.prompt)
    assert all(not rep.running and not rep.waiting and rep.reserved == 0 for rep in fleet)


@pytest.mark.parametrize("c", [1, 3])
def test_a_batch_one_replica_is_the_fifo_server_of_replicas_simulate(c):
    reqs = small_workload(80, rate=40.0, shared=False, seed=3)
    res = rt.simulate_fleet(reqs, c, "round_robin", STEP, max_batch=1, cache_blocks=0)
    # the service of a request alone: its prefill iteration, then one decode step per later token
    svc = np.array([STEP.seconds(len(r.prompt), 0, 0)
                    + sum(STEP.seconds(0, 1, len(r.prompt) + k) for k in range(1, r.max_new)) for r in reqs])
    arr = np.array([r.arrival for r in reqs])
    ref = rp.simulate(arr, svc, c, "round_robin")
    np.testing.assert_allclose(res.finish - res.arrival, ref.latency, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_the_prefix_cache_matches_a_brute_force_longest_common_prefix(block_size):
    rng = np.random.default_rng(block_size)
    roots = [rng.integers(0, 5, size=60) for _ in range(3)]
    prompts = [np.concatenate([roots[rng.integers(3)][:rng.integers(0, 60)], rng.integers(0, 5, size=rng.integers(1, 30))])
               for _ in range(40)]
    cache = rt.PrefixCache(10**6)
    for i, p in enumerate(prompts):
        h = rt.block_hashes(p, block_size)
        assert cache.match(h) == fw.reference_prefix_blocks(prompts[:i], p, block_size)
        cache.insert(h)


def test_lru_evicts_the_leaves_before_the_prefix_they_extend():
    a = np.arange(64)
    cache = rt.PrefixCache(5)
    cache.insert(rt.block_hashes(a[:48], 16))                                   # blocks A0 A1 A2
    cache.insert(rt.block_hashes(np.concatenate([a[:16], 100 + a[:48]]), 16))  # A0 B1 B2 B3: one too many
    assert cache.match(rt.block_hashes(a[:48], 16)) == 2  # the leaf A2 went first; A0 and A1 stayed
    assert len(cache.blocks) == 5


def test_fast_forward_equals_stepping_one_iteration_at_a_time(monkeypatch):
    reqs = small_workload(60, rate=30.0)
    fast = rt.simulate_fleet(reqs, 2, "cache_aware", STEP, max_batch=6, kv_tokens=2048, cache_blocks=40)
    monkeypatch.setattr(rt.Replica, "fast", False)
    slow = rt.simulate_fleet(reqs, 2, "cache_aware", STEP, max_batch=6, kv_tokens=2048, cache_blocks=40)
    np.testing.assert_array_equal(fast.replica, slow.replica)
    np.testing.assert_allclose(fast.finish, slow.finish, rtol=1e-12)
    np.testing.assert_allclose(fast.first, slow.first, rtol=1e-12)


@pytest.mark.parametrize("step", [STEP, StepCost.for_open_model("Qwen2.5-7B", "A10G", mfu=0.3, overhead=1e-3)])
def test_decode_seconds_is_seconds_for_every_context(step):
    ctx = np.array([0, 1, 1000, 10**6, 10**8])
    for b in (1, 8, 256, 4096):
        np.testing.assert_allclose(step.decode_seconds(b, ctx), [step.seconds(0, b, int(t)) for t in ctx], rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cache_aware_finds_at_least_the_hits_of_round_robin_on_shared_prefixes(seed):
    reqs = small_workload(200, seed=seed)
    res = {p: rt.simulate_fleet(reqs, 4, p, STEP, max_batch=16, cache_blocks=24) for p in rt.POLICIES}
    assert res["cache_aware"].hit_rate >= res["round_robin"].hit_rate
    assert res["cache_aware"].hit_rate > 0.2


def test_without_shared_prefixes_cache_aware_is_least_loaded_and_nothing_hits():
    reqs = small_workload(150, shared=False)
    res = {p: rt.simulate_fleet(reqs, 3, p, STEP, max_batch=8, cache_blocks=64) for p in rt.POLICIES}
    np.testing.assert_array_equal(res["cache_aware"].replica, res["least_loaded"].replica)
    np.testing.assert_array_equal(res["cache_aware"].finish, res["least_loaded"].finish)
    assert all(r.hit_rate == 0 for r in res.values())
    one = {p: rt.simulate_fleet(reqs, 1, p, STEP, max_batch=8, cache_blocks=64).finish for p in rt.POLICIES}
    assert all(np.array_equal(one["round_robin"], f) for f in one.values())  # one replica: no choice to make


def test_a_cached_prefix_shortens_the_prefill():
    sys_prompt = np.arange(1024)
    reqs = rt.prepare([rt.FleetRequest(i, 10.0 * i, np.concatenate([sys_prompt, [5000 + i] * 8]), np.arange(2))
                       for i in range(2)], 16)
    with_cache = rt.simulate_fleet(reqs, 1, "round_robin", STEP, cache_blocks=1000)
    no_cache = rt.simulate_fleet(reqs, 1, "round_robin", STEP, cache_blocks=0)
    assert with_cache.cached.tolist() == [0, 1024] and no_cache.cached.tolist() == [0, 0]
    # 8 new tokens attend to the 1,024 cached ones too, and read their K and V
    assert with_cache.ttft()[1] == pytest.approx(STEP.seconds(8, 0, 0, attention_pairs(8, 1024), 1024), rel=1e-12)
    assert no_cache.ttft()[1] == pytest.approx(STEP.seconds(1032, 0, 0), rel=1e-12)
    assert STEP.seconds(8, 0, 0) < with_cache.ttft()[1] < no_cache.ttft()[1]


def test_unknown_policy_and_oversized_request_are_refused():
    with pytest.raises(ValueError, match="policy"):
        rt.Router(2, "random")
    with pytest.raises(ValueError, match="KV tokens"):
        rt.Replica(STEP, kv_tokens=10).submit(small_workload(1)[0])
