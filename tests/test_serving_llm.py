"""Continuous batching over the paged cache: every request's tokens equal its greedy reference under
any schedule; continuous beats static batching; paging wastes less than contiguous reservation; and
transformers' own continuous batching (paged cache) emits the same tokens on CPU. A token budget per
iteration (chunked prefill) changes no token and bounds every iteration; TTFT, TPOT and goodput follow
from the iterations on the roofline clock of a named model and GPU (perf.hardware)."""
import os

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import llm
from scaleoutai.serving.step_cost import attention_pairs
from scaleoutai.serving.decoder import decoder_forward, decoder_init

PARAMS = {dt: decoder_init(vocab=48, d_model=24, n_heads=3, n_layers=2, d_ff=48, max_len=64, seed=7, dtype=dt)
          for dt in (np.float32, np.float64)}
TRACE = datasets.request_trace(10, 0.6, (2, 14), (1, 12), vocab=48, shared_prefix=6, seed=3)
REF = {dt: llm.reference_outputs(p, TRACE) for dt, p in PARAMS.items()}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("policy,preempt,chunk,sharing", [
    ("continuous", "recompute", 1, False), ("continuous", "swap", 3, True), ("static", "recompute", None, True),
    ("static", "swap", 1, False), ("continuous", "recompute", None, True)])
def test_every_schedule_emits_each_requests_greedy_reference_tokens(dtype, block_size, policy, preempt, chunk, sharing):
    tight = -(-30 // block_size) + 1  # room for about one and a half requests: preemption is certain
    res = llm.serve(PARAMS[dtype], TRACE, num_blocks=tight, block_size=block_size, max_batch=4, policy=policy,
                    preempt=preempt, prefill_chunk=chunk, prefix_sharing=sharing)
    assert res.outputs == REF[dtype]
    assert res.preemptions > 0
    assert sum(res.generated) == sum(r.max_new for r in TRACE)


def test_recompute_and_swap_preempt_differently_but_give_the_same_tokens():
    p = PARAMS[np.float64]
    rec = llm.serve(p, TRACE, num_blocks=9, block_size=4, preempt="recompute")
    swp = llm.serve(p, TRACE, num_blocks=9, block_size=4, preempt="swap")
    assert rec.outputs == swp.outputs == REF[np.float64]
    assert rec.preemptions > 0 and swp.preemptions > 0
    assert sum(rec.tokens) > sum(swp.tokens)  # recompute feeds the preempted tokens again, swap does not


def test_any_arrival_order_gives_the_same_tokens():
    p = PARAMS[np.float64]
    rng = np.random.default_rng(0)
    for _ in range(3):
        arrivals = rng.permutation([r.arrival for r in TRACE])
        shuffled = [datasets.Request(r.id, int(a), r.prompt, r.max_new) for r, a in zip(TRACE, arrivals)]
        assert llm.serve(p, shuffled, num_blocks=12, block_size=4).outputs == REF[np.float64]


def test_more_blocks_than_needed_and_more_requests_than_the_batch():
    p = PARAMS[np.float64]
    res = llm.serve(p, TRACE, num_blocks=200, block_size=16, max_batch=2)
    assert res.outputs == REF[np.float64] and res.preemptions == 0
    assert max(len(ids) for ids in res.timeline) <= 2


def test_continuous_batching_needs_fewer_iterations_and_has_a_lower_tail_than_static():
    p = PARAMS[np.float64]
    trace = datasets.request_trace(40, 1.0, (2, 8), (1, 30), vocab=48, seed=11)
    cont = llm.serve(p, trace, num_blocks=200, block_size=4, max_batch=8)
    stat = llm.serve(p, trace, num_blocks=200, block_size=4, max_batch=8, policy="static")
    assert cont.outputs == stat.outputs
    assert cont.iterations < 0.8 * stat.iterations
    assert np.mean(cont.generated) > 1.2 * np.mean(stat.generated)
    assert np.percentile(cont.latency(), 99) < np.percentile(stat.latency(), 99)
    assert np.percentile(cont.ttft(), 50) < np.percentile(stat.ttft(), 50)
    # static: no request joins a running batch, so the set of running requests only shrinks
    for a, b in zip(stat.timeline, stat.timeline[1:]):
        assert set(b) <= set(a) or not set(b) & set(a)


def test_paged_memory_waste_is_below_one_block_per_request_and_far_below_contiguous():
    p = PARAMS[np.float64]
    B = 4
    res = llm.serve(p, TRACE, num_blocks=200, block_size=B, max_batch=8)
    paged, contiguous = res.waste()
    assert paged < 0.25 < 0.5 < contiguous
    for (allocated, filled, _), ids in zip(res.slots, res.timeline):
        assert 0 <= allocated - filled < B * len(ids) + B  # at most one partly filled block per sequence


def test_prefix_sharing_saves_blocks_and_prefill_work():
    p = PARAMS[np.float64]
    trace = datasets.request_trace(12, 0.5, (2, 6), (2, 6), vocab=48, shared_prefix=16, seed=5)
    plain = llm.serve(p, trace, num_blocks=200, block_size=4, max_batch=12, prefill_chunk=4)
    shared = llm.serve(p, trace, num_blocks=200, block_size=4, max_batch=12, prefill_chunk=4, prefix_sharing=True)
    assert shared.outputs == plain.outputs == llm.reference_outputs(p, trace)
    assert shared.shared_tokens >= 16 * 8  # a request sharing the system prompt skips its 16 tokens
    assert max(a for a, _, _ in shared.slots) < 0.6 * max(a for a, _, _ in plain.slots)
    assert sum(shared.tokens) == sum(plain.tokens) - shared.shared_tokens


def test_whole_prompt_prefill_makes_iterations_uneven_and_chunking_bounds_them():
    p = PARAMS[np.float64]
    trace = datasets.request_trace(8, 0.5, (2, 4), (8, 12), vocab=48, seed=2)
    trace.append(datasets.Request(99, 3, np.arange(40) % 48, 4))  # one long prompt arrives while others decode
    ref = llm.reference_outputs(p, trace)
    whole = llm.serve(p, trace, num_blocks=100, block_size=4, prefill_chunk=None)
    chunked = llm.serve(p, trace, num_blocks=100, block_size=4, prefill_chunk=4)
    assert whole.outputs == chunked.outputs == ref
    assert max(whole.tokens) >= 40 > 3 * max(chunked.tokens) - 30
    assert max(llm.iteration_seconds(whole.tokens)) > max(llm.iteration_seconds(chunked.tokens))


def test_bad_arguments_are_one_clear_error():
    p = PARAMS[np.float64]
    with pytest.raises(ValueError, match="policy must be"):
        llm.serve(p, TRACE, 10, 4, policy="fifo")
    with pytest.raises(ValueError, match="add blocks or shorten"):
        llm.serve(p, TRACE, 2, 4)
    with pytest.raises(ValueError, match="prefill_chunk"):
        llm.serve(p, TRACE, 10, 4, prefill_chunk=0)
    with pytest.raises(ValueError, match="token_budget"):
        llm.serve(p, TRACE, 10, 4, token_budget=0)
    with pytest.raises(KeyError, match="no accelerator"):
        llm.StepCost.for_model(7e9, 32, 4096, 4096, gpu="V100")
    with pytest.raises(ValueError, match="rate > 0"):
        datasets.request_trace(3, 0.0)


# -- the production library: transformers' continuous batching with its paged cache -------------

def _hf_continuous(model, prompts, max_new):
    """Requests through transformers' ContinuousBatchingManager (paged KV cache), one max_new each."""
    from transformers import GenerationConfig
    cfg = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0, max_new_tokens=max(max_new))
    with model.continuous_batching_context_manager(generation_config=cfg, warmup=False, timeout=30) as manager:
        ids = [manager.add_request(list(map(int, p)), request_id=f"r{i}", max_new_tokens=n)
               for i, (p, n) in enumerate(zip(prompts, max_new))]
        out = {}
        for _ in range(600):
            r = manager.get_result(timeout=1)
            if r is not None and r.is_finished():
                out[r.request_id] = list(r.generated_tokens)
            if len(out) == len(ids):
                break
    return [out[i] for i in ids]


@pytest.fixture(scope="module")
def hf():
    os.environ["HF_HUB_OFFLINE"] = "1"
    pytest.importorskip("transformers")
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    import torch
    torch.manual_seed(0)
    return torch


@pytest.mark.slow
def test_transformers_continuous_batching_of_our_decoder_as_gpt2_emits_our_tokens(hf):
    torch = hf
    p = PARAMS[np.float64]
    model = llm.to_hf_gpt2(p, "float64")
    toks = np.random.default_rng(1).integers(0, 48, size=(2, 11))
    with torch.no_grad():
        np.testing.assert_allclose(model(torch.tensor(toks)).logits.numpy(), decoder_forward(p, toks),
                                   rtol=1e-10, atol=1e-10)
    trace = TRACE[:6]
    got = _hf_continuous(model, [r.prompt for r in trace], [r.max_new for r in trace])
    assert got == [REF[np.float64][r.id] for r in trace]
    assert model.config._attn_implementation in ("sdpa", "paged|eager")


@pytest.mark.slow
def test_transformers_continuous_batching_equals_its_own_generate_on_a_tiny_llama(hf):
    torch = hf
    from transformers import AutoModelForCausalLM, LlamaConfig
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, bos_token_id=None, eos_token_id=None)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()
    rng = np.random.default_rng(2)
    prompts = [rng.integers(0, 64, size=n) for n in (3, 9, 1, 17, 6)]
    max_new = [5, 2, 8, 4, 6]
    got = _hf_continuous(model, prompts, max_new)
    for g, p, n in zip(got, prompts, max_new):
        with torch.no_grad():
            want = model.generate(torch.tensor(p[None]), max_new_tokens=n, do_sample=False, pad_token_id=0)
        assert g == want[0, len(p):].tolist()


# -- chunked prefill under a token budget (Sarathi-Serve), TTFT / TPOT / goodput on a GPU's clock ---

LONG = datasets.request_trace(8, 0.5, (2, 6), (6, 14), vocab=48, seed=4) + [
    datasets.Request(90, 2, np.arange(37) % 48, 5), datasets.Request(91, 9, (np.arange(29) * 7) % 48, 3)]


@pytest.mark.parametrize("budget,dtype", [(1, np.float64), (3, np.float64), (3, np.float32), (64, np.float64),
                                          (None, np.float32)])  # 64 > every prompt; None: whole-prompt prefill
@pytest.mark.parametrize("num_blocks,preempt,sharing", [(200, "recompute", False), (12, "recompute", False),
                                                        (12, "swap", True)])
def test_any_token_budget_emits_each_requests_greedy_reference_tokens(dtype, budget, num_blocks, preempt, sharing):
    p = PARAMS[dtype]
    trace = TRACE + LONG[-2:]
    ref = {**REF[dtype], **llm.reference_outputs(p, LONG[-2:])}
    res = llm.serve(p, trace, num_blocks=num_blocks, block_size=4, max_batch=4, token_budget=budget,
                    preempt=preempt, prefix_sharing=sharing)
    assert res.outputs == ref
    if budget is not None:
        assert max(res.tokens) <= budget
    assert sum(res.generated) == sum(r.max_new for r in trace)


@pytest.mark.parametrize("budget", [1, 3, 7, 40, None])
def test_token_budget_accounting_without_preemption(budget):
    p = PARAMS[np.float64]
    res = llm.serve(p, LONG, num_blocks=200, block_size=4, max_batch=16, token_budget=budget)
    assert res.preemptions == 0 and res.outputs == llm.reference_outputs(p, LONG)
    # every prompt token and every output token but the last is fed exactly once
    assert sum(res.tokens) == sum(len(r.prompt) + r.max_new - 1 for r in LONG)
    assert len(res.tokens) == len(res.timeline) == len(res.at) == len(res.context) == len(res.pairs)
    if budget == 1:
        assert res.iterations == sum(res.tokens)  # one token per iteration, never an empty one
    if budget is None:  # whole-prompt prefill: a request admitted at once emits its first token at arrival
        assert all(res.first_token[r.id] == r.arrival for r in LONG)
        assert max(res.tokens) >= 37
    # attention pairs: a request's positions 0..L-1 each attend to p + 1 keys, recompute-free
    assert sum(res.pairs) == sum(L * (L + 1) // 2 for L in (len(r.prompt) + r.max_new - 1 for r in LONG))


@pytest.mark.parametrize("p_len,new,budget", [(1, 4, 1), (10, 3, 1), (10, 3, 3), (10, 3, 4), (17, 5, 64), (17, 5, 17)])
def test_one_request_takes_ceil_p_over_T_prefill_iterations_then_one_per_token(p_len, new, budget):
    p = PARAMS[np.float64]
    req = [datasets.Request(0, 0, np.arange(p_len) % 48, new)]
    res = llm.serve(p, req, num_blocks=64, block_size=4, token_budget=budget)
    assert res.outputs == llm.reference_outputs(p, req)
    assert res.first_token[0] == -(-p_len // budget) - 1
    assert res.iterations == -(-p_len // budget) + new - 1


def test_plan_iteration_serves_decode_tokens_first_then_prompt_chunks_in_admission_order():
    todo = [(5, 12), (6, 1), (7, 30), (8, 1)]
    assert llm.plan_iteration(todo) == {6: 1, 8: 1, 5: 12, 7: 30}  # no budget: whole prompts
    assert llm.plan_iteration(todo, token_budget=16) == {6: 1, 8: 1, 5: 12, 7: 2}
    assert llm.plan_iteration(todo, token_budget=16, prefill_chunk=4) == {6: 1, 8: 1, 5: 4, 7: 4}
    assert llm.plan_iteration(todo, token_budget=1) == {6: 1}  # a budget below the decodes: oldest first
    assert llm.plan_iteration(todo, token_budget=2) == {6: 1, 8: 1}
    rng = np.random.default_rng(0)
    for _ in range(200):
        todo = [(i, int(n)) for i, n in enumerate(rng.integers(1, 20, size=rng.integers(1, 8)))]
        T = int(rng.integers(1, 40))
        plan = llm.plan_iteration(todo, token_budget=T)
        assert sum(plan.values()) == min(T, sum(n for _, n in todo))  # work-conserving under the budget
        assert all(0 < plan[i] <= n for i, n in todo if i in plan)
        decodes = [i for i, n in todo if n == 1]
        if any(n > 1 and i in plan for i, n in todo):  # a prompt chunk runs only when no decode waits
            assert all(i in plan for i in decodes)


SEVEN_B = llm.StepCost.for_model(7e9, layers=32, d_model=4096, kv_dim=4096, gpu="A10G")


def test_step_cost_of_a_7b_model_reads_weights_and_kv_cache_on_the_table_gpu():
    from scaleoutai.perf import hardware as hw
    assert SEVEN_B.weight_bytes == 14e9 and SEVEN_B.kv_bytes_per_token == 512 * 2**10 and SEVEN_B.gpu is hw.A10G
    assert SEVEN_B.idle == pytest.approx(14e9 / 600e9, rel=1e-12)
    # batch 8 decoding at 1,340 cached tokens each: the KV reads add ~40% to the step
    t = SEVEN_B([8], [8 * 1340], [8 * 1340])[0]
    assert t == pytest.approx((14e9 + 8 * 1340 * 512 * 2**10) / 600e9, rel=1e-12)
    assert 1.38 < t / SEVEN_B.idle < 1.42
    # a 512-token prefill is compute-bound: 2 P FLOPs per token plus attention, at 70 TFLOP/s
    t = SEVEN_B([512], [512], [512 * 513 // 2])[0]
    assert t == pytest.approx((512 * 14e9 + 4 * 32 * 4096 * 512 * 513 // 2) / 70e12, rel=1e-12)
    gqa = llm.StepCost.for_model(8e9, layers=32, d_model=4096, kv_dim=8 * 128, gpu="H100 SXM")
    assert gqa.kv_bytes_per_token == 128 * 2**10  # Llama-3-8B: 8 KV heads of 128


def test_seconds_are_iterations_times_a_constant_step_when_the_kv_is_free():
    p = PARAMS[np.float64]
    flat = llm.StepCost(weight_bytes=6e9, kv_bytes_per_token=0.0, flops_per_token=1.0, gpu=SEVEN_B.gpu)
    res = llm.serve(p, LONG, num_blocks=200, block_size=4, token_budget=8)
    c = flat.idle
    np.testing.assert_allclose(res.ttft_seconds(flat), res.ttft() * c, rtol=1e-12)
    np.testing.assert_allclose(res.tpot_seconds(flat), res.tpot() * c, rtol=1e-12)
    np.testing.assert_allclose(res.latency_seconds(cost=flat), res.latency() * c, rtol=1e-12)
    assert res.clock_seconds(cost=flat)[-1] == pytest.approx((max(res.at) + 1) * c, rel=1e-12)


def test_goodput_counts_requests_meeting_both_slos_per_second():
    p = PARAMS[np.float64]
    res = llm.serve(p, LONG, num_blocks=200, block_size=4, token_budget=8)
    total = res.clock_seconds(cost=SEVEN_B)[-1]
    assert res.goodput(SEVEN_B, np.inf, np.inf) == pytest.approx(len(LONG) / total, rel=1e-12)
    assert res.goodput(SEVEN_B, 0.0, np.inf) == 0.0
    ttft, tpot = res.ttft_seconds(SEVEN_B), res.tpot_seconds(SEVEN_B)
    a, b = np.median(ttft), np.median(tpot)
    met = res.slo_met(SEVEN_B, a, b)
    multi = np.array([len(res.outputs[i]) > 1 for i in sorted(res.outputs)])
    tp = np.zeros(len(LONG))
    tp[multi] = tpot
    assert (met == ((ttft <= a) & (tp <= b))).all() and 0 < met.sum() < len(LONG)
    assert res.goodput(SEVEN_B, a, b) == pytest.approx(met.sum() / total, rel=1e-12)


def test_a_token_budget_bounds_the_decode_stall_of_long_prompts_and_delays_their_first_token():
    p = PARAMS[np.float64]
    whole = llm.serve(p, LONG, num_blocks=200, block_size=4)
    chunked = llm.serve(p, LONG, num_blocks=200, block_size=4, token_budget=8)
    assert whole.outputs == chunked.outputs
    # toy prompts of 29 and 37 tokens: a step whose roofline bends at 10 tokens (2 ms of weights, 0.2 ms
    # of FLOPs per token), as a 7B model's bends at ~117 on an A10G for prompts of hundreds of tokens
    cost = llm.StepCost(weight_bytes=1.2e9, kv_bytes_per_token=0.0, flops_per_token=14e9, gpu=SEVEN_B.gpu)
    assert cost([8], [0])[0] == cost.idle < cost([12], [0])[0]
    # the slowest iteration and the worst time per output token fall; the long prompts wait longer
    assert cost(chunked.tokens, chunked.context).max() < 0.5 * cost(whole.tokens, whole.context).max()
    assert chunked.tpot_seconds(cost).max() < whole.tpot_seconds(cost).max()
    ids = sorted(whole.outputs)
    for rid in (90, 91):
        k = ids.index(rid)
        assert chunked.ttft_seconds(cost)[k] > whole.ttft_seconds(cost)[k]


# -- one iteration-cost model for Part V: StepCost (serving.step_cost), the router's and Chapter 24's --------

H100_BW, H100_PEAK = 3.35e12, 989e12  # perf.hardware's H100 SXM row
L3_P, L3_KV, L3_ATTN = 8.03e9, 2 * 32 * 8 * 128 * 2, 4 * 32 * 32 * 128  # Llama-3-8B: params, KV bytes/token, FLOPs/pair


def old_iteration_model_seconds(p, d, c, mfu=0.5, overhead=0.0):
    """The router's former IterationModel, written out: weights and the KV of context + prefill against
    2 P FLOPs per token fed, at mfu of the peak; no attention FLOPs."""
    return max((2 * L3_P + L3_KV * (c + p)) / H100_BW, 2 * L3_P * (p + d) / (mfu * H100_PEAK)) + overhead


@pytest.mark.parametrize("p, d, c", [(2048, 0, 0), (64, 0, 0), (0, 1, 2048), (0, 64, 64 * 2048), (512, 32, 32 * 900)])
def test_for_open_model_is_the_old_router_model_plus_attention_flops(p, d, c):
    from dataclasses import replace

    from scaleoutai.perf import hardware as hw
    step = llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)
    assert (step.weight_bytes, step.kv_bytes_per_token, step.flops_per_token, step.attn_flops_per_pair) == \
        (2 * L3_P, L3_KV, 2 * L3_P, L3_ATTN) and step.gpu is hw.H100_SXM
    # without attention FLOPs it is the old formula exactly
    no_attn = replace(step, attn_flops_per_pair=0.0)
    assert no_attn.seconds(p, d, c) == pytest.approx(old_iteration_model_seconds(p, d, c), rel=1e-12)
    # with them: the decoding queries attend to their c cached keys, a fresh prompt's p queries to p (p + 1) / 2
    flops = 2 * L3_P * (p + d) + L3_ATTN * (c + p * (p + 1) // 2)
    want = max((2 * L3_P + L3_KV * (c + p)) / H100_BW, flops / (0.5 * H100_PEAK))
    assert step.seconds(p, d, c) == pytest.approx(want, rel=1e-12)
    assert step.seconds(p, d, c) >= old_iteration_model_seconds(p, d, c)


def test_a_prompt_after_a_cached_prefix_reads_it_and_attends_to_it():
    step = llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)
    n, h = 40, 1000
    pairs = sum(q + 1 for q in range(h, h + n))  # causal: the query at position q sees q + 1 keys
    assert attention_pairs(n, h) == pairs == n * h + n * (n + 1) // 2
    want = max((2 * L3_P + L3_KV * (h + n)) / H100_BW, (2 * L3_P * n + L3_ATTN * pairs) / (0.5 * H100_PEAK))
    assert step.seconds(n, 0, 0, attention_pairs(n, h), h) == pytest.approx(want, rel=1e-12)
    # and the router's call is llm.serve's record of the same step: tokens fed, KV touched, pairs
    assert step.seconds(n, 3, 900, pairs, h) == pytest.approx(step([n + 3], [900 + h + n], [900 + pairs])[0], rel=1e-12)


def test_mfu_slows_only_the_compute_roof_and_overhead_adds_to_every_iteration():
    base = llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM")
    assert base.mfu == 1.0 and base.overhead == 0.0  # the defaults: the roofline's lower bound
    half = llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)
    prefill, decode = (4096, 0, 0), (0, 1, 2048)  # compute-bound and memory-bound
    assert half.seconds(*prefill) == pytest.approx(2 * base.seconds(*prefill), rel=1e-12)
    weights_and_kv = (2 * L3_P + L3_KV * 2048) / H100_BW
    assert half.seconds(*decode) == base.seconds(*decode) == pytest.approx(weights_and_kv, rel=1e-12)
    assert half.idle == base.idle == pytest.approx(2 * L3_P / H100_BW, rel=1e-12)
    # the bend moves: a prefill turns compute-bound at about half the prompt length (~W peak mfu / (bw 2 P))
    def ridge(c):
        return next(n for n in range(1, 2000) if c.seconds(n, 0, 0) > (2 * L3_P + L3_KV * n) / H100_BW * (1 + 1e-9))
    assert 280 < ridge(base) < 300 and 140 < ridge(half) < 150
    o = 2.5e-3
    slow = llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5, overhead=o)
    for args in (prefill, decode, (0, 0, 0), (100, 7, 5000)):
        assert slow.seconds(*args) == pytest.approx(half.seconds(*args) + o, rel=1e-12)
    assert slow.idle == pytest.approx(half.idle + o, rel=1e-12)
    ctx = [10, 10**5]
    np.testing.assert_allclose(slow.decode_seconds(8, ctx), half.decode_seconds(8, ctx) + o, rtol=1e-12)
    steps = ([1, 300], [50, 400], [50, 300])  # tokens, context, pairs of two iterations
    np.testing.assert_allclose(slow(*steps), half(*steps) + o, rtol=1e-12)
    for bad in ({"mfu": 0.0}, {"mfu": 1.5}, {"overhead": -1.0}):
        with pytest.raises(ValueError, match="mfu must be"):
            llm.StepCost.for_open_model("Llama-3-8B", "H100 SXM", **bad)
    with pytest.raises(KeyError, match="unknown model"):
        llm.StepCost.for_open_model("GPT-5", "H100 SXM")


@pytest.mark.parametrize("n_kv_heads", [32, 16, 8, 4, 1])
def test_gqa_scales_the_kv_term_by_the_head_ratio_and_leaves_the_flops(n_kv_heads):
    mha = llm.StepCost.for_model(7e9, layers=32, d_model=4096, kv_dim=4096, gpu="A10G")
    gqa = llm.StepCost.for_model(7e9, layers=32, d_model=4096, kv_dim=n_kv_heads * 128, gpu="A10G")
    ratio = n_kv_heads / 32  # 32 query heads of 128: 16 KV heads halve the cache, 8 quarter it
    assert gqa.kv_bytes_per_token == ratio * mha.kv_bytes_per_token == ratio * 512 * 2**10
    assert (gqa.weight_bytes, gqa.flops_per_token, gqa.attn_flops_per_pair) == \
        (mha.weight_bytes, mha.flops_per_token, mha.attn_flops_per_pair)
    # the memory-bound decode step: the weights term stays, the KV term scales by the ratio
    B, t = 16, 2000
    kv_mha, kv_gqa = (c.decode_seconds(B, [B * t])[0] - c.idle for c in (mha, gqa))
    assert kv_mha == pytest.approx(B * t * 512 * 2**10 / 600e9, rel=1e-9)
    assert kv_gqa == pytest.approx(ratio * kv_mha, rel=1e-9)


def test_open_models_kv_term_follows_their_kv_heads():
    from scaleoutai.serving.efficiency import OPEN_MODELS
    l2, l3 = (llm.StepCost.for_open_model(m, "H100 SXM") for m in ("Llama-2-7B (MHA)", "Llama-3-8B"))
    assert l2.kv_bytes_per_token == 512 * 2**10 and l3.kv_bytes_per_token == 128 * 2**10  # 32 vs 8 KV heads
    assert l2.attn_flops_per_pair == l3.attn_flops_per_pair == L3_ATTN  # both have 32 query heads of 128
    for name, m in OPEN_MODELS.items():
        c = llm.StepCost.for_open_model(name, "A10G", itemsize=1)
        assert c.kv_bytes_per_token == 2 * m.n_layers * m.n_kv_heads * m.head_dim and c.weight_bytes == m.params
