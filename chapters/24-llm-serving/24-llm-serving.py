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
# # Chapter 24. LLM serving: continuous batching and the paged KV cache
#
# Chapter 23 treated a replica as a box that serves one request after another. A language-model
# replica is different inside: a request is not one forward pass but hundreds of decoding steps, each
# of which reads every weight of the model once, and it holds a growing key-value cache for its whole
# life. Two ideas make such a replica fast. **Continuous batching** schedules at the level of single
# decoding steps, so a finished request leaves the batch at once and a new one takes its place. The
# **paged KV cache** stores each request's keys and values in small fixed-size blocks, so memory is
# taken as tokens appear instead of reserved for the longest possible answer. This chapter builds
# both on the NumPy decoder, checks that every request still gets exactly its greedy tokens, measures
# the memory and throughput they win, and runs transformers' own continuous batching on the same weights.
# It then asks what a user feels: the time to the first token and between tokens, on the clock of a
# 7-billion-parameter model on a named GPU, and how splitting prompts into chunks under a token budget
# trades one against the other.
#
# **Prerequisites:** Chapter 22 (Per-node inference efficiency: the decoder, the KV cache, the decode
# roofline) and Chapter 23 (Distributed inference: arrivals, queues, p50 and p99). Background: virtual
# memory and page tables from an operating-systems course help but are not required.

# %% tags=["parameters"]
N_REQUESTS = 160  # smoke: 40
RATES = [0.1, 0.2, 0.3, 0.45, 0.6]  # smoke: [0.15, 0.45]
BLOCK_SIZE = 4
NUM_BLOCKS = 96  # smoke: 64
MAX_BATCH = 8
N_LONG = 48  # smoke: 8
BUDGETS = [None, 512, 256, 128, 64]  # smoke: [None, 128]
SEED = 0

# %% [markdown]
# `N_REQUESTS` requests arrive as a Poisson process at each rate in `RATES` (requests per decoding
# iteration); the KV pool has `NUM_BLOCKS` blocks of `BLOCK_SIZE` tokens; at most `MAX_BATCH`
# requests run together. Section 7 serves `N_LONG` requests with prompts of hundreds of tokens under
# each token budget in `BUDGETS` (None: every prompt prefilled whole).
#
# ## 1. Motivation: which ceiling binds
#
# Decoding one token of a 7-billion-parameter model in fp16 reads 14 GB of weights; on an NVIDIA A10G
# (24 GB at 600 GB/s, the GPU of the one-GPU cloud instance priced in Section 7) that is 23 ms whether
# the step serves one request or thirty. Chapter 22 called this memory-bound decode: throughput grows
# with the batch almost for free. Every GPU number of this chapter comes from one table,
# `perf.hardware`, which Chapter 22 reads too. The batch is limited by the **KV cache**: every token of
# every running request keeps a key and a value per layer. The cell below computes how many requests
# fit when each one reserves room for its longest possible answer.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, datasets
from scaleoutai.notebooks import show
from scaleoutai.perf import hardware
from scaleoutai.serving import llm
from scaleoutai.serving.decoder import decoder_init, generate, reference_generate
from scaleoutai.serving.paged_cache import BlockAllocator, OutOfBlocks, PagedCache

GPU = hardware.A10G
P, layers, d_model, fp16 = 7e9, 32, 4096, 2
kv_per_token = 2 * layers * d_model * fp16  # a key and a value per layer (32 KV heads of 128)
free_for_kv = GPU.memory_bytes - P * fp16  # the GPU's memory after the weights
max_len, mean_len = 2048, 350  # reserved per request vs what a chat request really uses
print(f"{GPU.name}: reading {P * fp16 / 1e9:.0f} GB of weights at {GPU.hbm_bandwidth / 1e9:.0f} GB/s takes "
      f"{P * fp16 / GPU.hbm_bandwidth * 1e3:.1f} ms per decoding step")
print(f"KV cache: {kv_per_token / 2**10:.0f} KiB per token; {free_for_kv / kv_per_token:,.0f} tokens fit")
print(f"reserving max_len = {max_len}: {int(free_for_kv // (kv_per_token * max_len))} requests at once; "
      f"paying only for {mean_len} real tokens: {int(free_for_kv // (kv_per_token * mean_len))}")

# %% [markdown]
# Reservation to the maximum length wastes most of the cache, and with it most of the batch. That is
# the ceiling that binds: **KV memory decides the batch size, and the batch size decides throughput**.
# (Models with grouped-query attention keep fewer K/V heads than query heads: Llama-3-8B's 8 KV heads
# of 128 need 128 KiB per token, a quarter of this; Chapter 22, Section 2. The arithmetic is the same.)
#
# ## 2. Core concepts
#
# - **Block**: B consecutive token slots of K and V for every layer. A pool holds N blocks.
# - **Block table**: per sequence, the list of physical blocks holding its logical blocks 0, 1, 2, ...;
#   token at position p lives in block `table[p // B]`, slot `p % B`. Only the last block of a
#   sequence can be partly empty, so the waste is below B slots per sequence.
# - **Reference count**: how many tables point at a block. Two samples of one prompt (a **fork**), or
#   two requests with the same system prompt (**prefix sharing**), share blocks.
# - **Copy-on-write**: before writing into a block whose count is above 1, the writer takes a private
#   copy; the other sequences never see the write.
# - **Iteration-level scheduling**: after every decoding step the server retires finished requests
#   and admits new ones; **static batching** admits a new batch only when the last one is finished.
# - **Preemption**: when a step needs a block and none is free, a request gives its blocks back, by
#   **recompute** (drop them, prefill again later) or **swap** (copy them to host memory and back).
# - **Prefill and decode**: a new request's prompt is fed once (prefill, many tokens in one step,
#   compute-bound when long); then one token per step (decode, memory-bound). Engines prefill a prompt
#   whole by default. **Chunked prefill** under a **token budget** T (Sarathi-Serve; vLLM's
#   `max_num_batched_tokens`) caps each step at T tokens: decode tokens first, then pieces of prompts.
# - **TTFT and TPOT**: time to first token (arrival to the first output token: queueing plus prefill)
#   and time per output token after it (the pace of the stream). An **SLO** bounds both; **goodput** is
#   the number of requests per second that meet both bounds (DistServe), not merely finish.
# - **Prefix caching** (vLLM's automatic prefix caching, SGLang's RadixAttention): a block whose tokens
#   are full is keyed by the hash of its whole prefix; a later request with the same prefix reuses the
#   block (its reference count rises) instead of prefilling it, and freed blocks stay cached until space
#   is needed, least recently used first. This chapter shares prefixes only among running requests
#   (`prefix_sharing`); keeping freed ones is Exercise 2 and Lab 24.
#
# A fork and a copy-on-write on a pool of 6 blocks of 4 tokens:

# %%
alloc = BlockAllocator(num_blocks=6, block_size=4)
alloc.allocate("parent", 6)  # one full block and one half-full block
alloc.fork("parent", "child")
print("after fork:   parent", alloc.table("parent"), "child", alloc.table("child"),
      "refcounts", alloc.refcount.tolist())
block, slot, copied_from = alloc.append_slot("child")
print(f"child writes token 6 into block {block} slot {slot} (a copy of block {copied_from})")
print("after write:  parent", alloc.table("parent"), "child", alloc.table("child"),
      "refcounts", alloc.refcount.tolist(), "free", alloc.num_free)
alloc.check()
assert alloc.table("parent")[0] == alloc.table("child")[0] and copied_from == alloc.table("parent")[1]

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# One replica, many requests: what is distributed here is the replica's memory and its decoding steps
# among the requests. Each iteration gathers one token from every decoding request (and the prompts
# of the newly admitted ones, whole or in chunks) into a single `decode_step`; the K and V of each request are gathered through its block
# table. The timelines below show which requests run in each iteration under static and continuous
# batching on the same arrivals: under static batching a batch's short requests finish and leave their
# place empty until the longest one ends.

# %%
params = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=128, seed=SEED)
small = datasets.request_trace(16, 0.5, (2, 8), (2, 24), vocab=64, seed=SEED)
runs = {pol: llm.serve(params, small, NUM_BLOCKS, BLOCK_SIZE, max_batch=4, policy=pol)
        for pol in ("static", "continuous")}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
for ax, (pol, res) in zip(axes, runs.items()):
    for t, ids in enumerate(res.timeline):
        ax.scatter([t] * len(ids), ids, s=6, c="tab:blue" if pol == "static" else "tab:green")
    ax.set(title=f"{pol}: {res.iterations} iterations", xlabel="iteration")
axes[0].set_ylabel("request id")
plt.tight_layout()
plt.show()
assert runs["static"].outputs == runs["continuous"].outputs
assert runs["continuous"].iterations < runs["static"].iterations

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# The allocator is bookkeeping only: a free list, block tables, lengths and reference counts. Read
# `append_slots`: it is all-or-nothing (it raises `OutOfBlocks` before changing anything, which is
# what lets the scheduler preempt and retry), and it copies a shared, partly filled last block first.

# %%
show(BlockAllocator.append_slots, BlockAllocator._append_one, BlockAllocator.fork, BlockAllocator.free)

# %% [markdown]
# `PagedCache` holds the storage, K and V of shape (layers, N, B, d), and gives the decoder the two
# methods it needs: `write` through the table and `read` by gathering the blocks in table order.
# Decoding through it must give the reference tokens for any block size:

# %%
show(PagedCache.write, PagedCache.read)
rng = np.random.default_rng(SEED)
prompts = [rng.integers(0, 64, size=n) for n in (1, 6, 11, 3)]
want = [reference_generate(params, p, 9) for p in prompts]
for B in (1, 2, 3, 5, 8, 16):
    cache = PagedCache(params, num_blocks=-(-30 // B) * 4, block_size=B)
    assert generate(params, prompts, 9, cache=cache) == want
    cache.alloc.check()
print("paged decoding equals the reference for block sizes 1, 2, 3, 5, 8, 16")

# %% [markdown]
# The scheduler: every iteration admits waiting requests while their prompts fit, reserves one slot
# per token it will feed (preempting the youngest request when the pool is full), runs one
# `decode_step` over all of them, and retires the finished ones at once. What each request feeds is
# `plan_iteration`'s decision: by default all its tokens not yet cached (a new prompt whole, as every
# engine does), or, under a `token_budget` of T tokens, the decode tokens first and then prompt chunks
# in admission order until T is spent, so a decoding request never waits behind a long prompt.

# %%
show(llm.plan_iteration, llm.serve)

# %% [markdown]
# Every request of a trace must get exactly the tokens it would get alone, here with a pool so small
# that requests are preempted, with prefix sharing and with both preemption kinds. The memory map
# shows, for one iteration, which request owns each physical block (shared blocks in black).

# %%
trace = datasets.request_trace(N_REQUESTS // 4, 0.3, (2, 12), (2, 30), vocab=64, shared_prefix=8, seed=SEED)
reference = llm.reference_outputs(params, trace)
checks = {}
for preempt in ("recompute", "swap"):
    for sharing in (False, True):
        res = llm.serve(params, trace, num_blocks=24, block_size=BLOCK_SIZE, preempt=preempt, prefix_sharing=sharing)
        assert res.outputs == reference
        checks[(preempt, sharing)] = res
        print(f"preempt by {preempt:<9} prefix sharing {sharing!s:<5}: tokens == reference, "
              f"{res.preemptions} preemptions, {res.shared_tokens} prompt tokens shared, {res.iterations} iterations")
no_preemption = sum(len(r.prompt) + r.max_new - 1 for r in trace)  # every token fed once
for budget in (1, 3, 8, max(len(r.prompt) for r in trace) + 1):
    res = llm.serve(params, trace, num_blocks=24, block_size=BLOCK_SIZE, token_budget=budget)
    roomy = llm.serve(params, trace, num_blocks=400, block_size=BLOCK_SIZE, token_budget=budget)
    assert res.outputs == roomy.outputs == reference and max(res.tokens) <= budget
    assert roomy.preemptions == 0 and sum(roomy.tokens) == no_preemption
    print(f"token budget {budget:>2}: tokens == reference, at most {max(res.tokens)} tokens per iteration, "
          f"{res.iterations} iterations ({roomy.iterations} without preemption)")

class RecordingCache(PagedCache):
    """Keeps a copy of the block tables at the iteration with the most blocks in use."""

    fullest: dict = {}

    def reserve(self, seq, n=1):
        super().reserve(seq, n)
        if self.alloc.num_blocks - self.alloc.num_free > len({b for t in self.fullest.values() for b in t}):
            self.fullest = {s: list(t) for s, t in self.alloc.tables.items()}


recorder = RecordingCache(params, 48, BLOCK_SIZE)
assert llm.serve(params, trace[:10], 48, BLOCK_SIZE, prefix_sharing=True, cache=recorder).outputs == \
    {r.id: reference[r.id] for r in trace[:10]}
owner = np.full(48, np.nan)
for s, tbl in recorder.fullest.items():
    for b in tbl:
        owner[b] = s if np.isnan(owner[b]) else -1  # -1: shared by several requests
plt.figure(figsize=(10, 1.6))
plt.imshow(np.where(owner < 0, np.nan, owner)[None, :], cmap="tab20", aspect="auto")
for b in np.flatnonzero(owner < 0):
    plt.gca().add_patch(plt.Rectangle((b - 0.5, -0.5), 1, 1, color="black"))
plt.yticks([])
plt.xlabel("physical block (white: free, black: shared prefix, colour: request id)")
plt.title("memory map of the KV pool at its fullest iteration")
plt.show()
assert (owner < 0).any()

# %% [markdown]
# ## 5. The same task with a production library: transformers continuous batching
#
# transformers ships a continuous-batching engine, `ContinuousBatchingManager`, with its own paged KV
# cache (`PagedAttentionCache`) and scheduler, running on CPU. Our decoder is GPT-2's architecture
# (pre-LN, tanh GELU, learned positions, final layer norm), so `llm.to_hf_gpt2` copies our weights
# into a transformers GPT-2 (attention biases zero, head untied). The requests go through the manager,
# each with its own length, and every one must come back with our tokens.

# %%
os.environ["HF_HUB_OFFLINE"] = "1"
import torch  # noqa: E402
from transformers import GenerationConfig  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
hf_model = llm.to_hf_gpt2(params, "float64")
hf_requests = trace[:8]
config = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=0,
                          max_new_tokens=max(r.max_new for r in hf_requests))
t0 = time.perf_counter()
with hf_model.continuous_batching_context_manager(generation_config=config, warmup=False, timeout=30) as manager:
    for r in hf_requests:
        manager.add_request(list(map(int, r.prompt)), request_id=f"req{r.id}", max_new_tokens=r.max_new)
    hf_out = {}
    while len(hf_out) < len(hf_requests):
        result = manager.get_result(timeout=60)
        assert result is not None, "the transformers manager stopped answering"
        if result.is_finished():
            hf_out[result.request_id] = list(result.generated_tokens)
    blocks = manager.batch_processor.cache.num_blocks if hasattr(manager, "batch_processor") else "?"
hf_seconds = time.perf_counter() - t0
assert sorted(hf_out) == sorted(f"req{r.id}" for r in hf_requests)  # it answered every request
for r in hf_requests:
    assert hf_out[f"req{r.id}"] == reference[r.id]
print(f"transformers continuous batching: {len(hf_out)} requests, every token equal to ours, "
      f"{hf_seconds:.1f} s, attention '{hf_model.config._attn_implementation}', paged cache blocks: {blocks}")

# %% [markdown]
# vLLM, the engine that introduced PagedAttention, runs only on a GPU. Where one is present the cell
# serves the same GPT-2 weights with vLLM; elsewhere it says what it would run.

# %%
try:
    import vllm  # noqa: F401
    have_vllm = torch.cuda.is_available()
except ImportError:
    have_vllm = False
if have_vllm:
    import tempfile

    from vllm import LLM, SamplingParams
    folder = tempfile.mkdtemp()
    llm.to_hf_gpt2(params, "float32", attn_implementation="").save_pretrained(folder)
    engine = LLM(model=folder, skip_tokenizer_init=True, dtype="float32", gpu_memory_utilization=0.3)
    outs = engine.generate([{"prompt_token_ids": list(map(int, r.prompt))} for r in hf_requests],
                           [SamplingParams(temperature=0, max_tokens=r.max_new) for r in hf_requests])
    same = sum(list(o.outputs[0].token_ids) == reference[r.id] for o, r in zip(outs, hf_requests))
    print(f"vLLM: {same} of {len(hf_requests)} requests give our tokens (float32 on a GPU)")
    assert same >= len(hf_requests) - 1  # float32 kernels may flip one near-tie
else:
    print("skipped: vLLM needs a CUDA GPU and the vllm package; it would serve these 8 requests from "
          "our GPT-2 weights with PagedAttention and compare its tokens with ours")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Out of blocks.** With a small pool the scheduler preempts. Recompute feeds the preempted tokens
# again (more work); swap copies them out and back (more memory traffic). Both give the same tokens:

# %%
rec, swp = checks[("recompute", False)], checks[("swap", False)]
print(f"recompute: {rec.preemptions} preemptions, {sum(rec.tokens)} tokens fed; "
      f"swap: {swp.preemptions} preemptions, {sum(swp.tokens)} tokens fed")
assert rec.outputs == swp.outputs == reference and sum(rec.tokens) >= sum(swp.tokens)

# %% [markdown]
# **A copy-on-write bug.** An allocator that forgets to copy a shared last block lets a fork write
# into its parent's block. `PagedCache.write` refuses to write into a block whose count is above 1,
# so the bug is caught at the first write, before any token is wrong:

# %%
class NoCopyOnWrite(BlockAllocator):
    def _append_one(self, seq):
        tbl, L = self.tables[seq], self.lengths[seq]
        if L % self.block_size == 0:
            tbl.append(self._take())
        self.lengths[seq] = L + 1
        return tbl[-1], L % self.block_size, None


buggy = PagedCache(params, 16, 4, allocator=NoCopyOnWrite(16, 4))
generate(params, [np.array([3, 1, 4, 1, 5])], 1, cache=buggy)  # 5 tokens cached: block 1 holds one
buggy.alloc.fork(0, 1)
try:
    buggy.write(0, 1, 5, np.zeros(32), np.zeros(32))  # the fork's first own token
    raise AssertionError("the shared write went unnoticed")
except ValueError as err:
    assert "would change a sibling's tokens" in str(err)
    print("caught:", err)

# %% [markdown]
# **A long prompt stalls the others.** A prompt prefilled whole costs its tokens' FLOPs in one
# iteration, and every decoding request in that iteration waits for it. `llm.StepCost` turns an
# iteration into seconds for a named model on a named GPU: the roofline of Chapter 3,
# `perf.hardware.decode_step_seconds`, over the bytes it moves (every weight once, and the cached K and
# V of every sequence in it) and the FLOPs it computes (2 P per token, plus attention's pairs) at `mfu`
# of the peak (the share the matmuls reach; 1 here, the roofline's bound), plus a fixed `overhead` per
# iteration (0 here). `COST(tokens, context, pairs)` applies it to every step `serve`
# recorded. It is the one cost model of Part V: Chapter 23's fleet of Llama-3-8B replicas runs on it too.

# %%
COST = llm.StepCost.for_model(P, layers, d_model, kv_dim=d_model, gpu=GPU)
show(llm.StepCost.step_seconds, hardware.decode_step_seconds)
ridge_tokens = GPU.ridge * COST.weight_bytes / COST.flops_per_token  # 2 P n / peak = P b / bandwidth
print(f"7B on the {GPU.name}: an empty step {COST.idle * 1e3:.1f} ms; a step turns compute-bound above "
      f"{ridge_tokens:.0f} tokens (the ridge, {GPU.ridge:.0f} FLOP/byte)")

# %% [markdown]
# Our decoder is tiny, but the schedule (which tokens run in which iteration) is the same for any
# model, so the 7B clock applies to it. A decoder whose positions reach 1,024 takes prompts of hundreds
# of tokens; one 700-token prompt arrives while eight short requests decode:

# %%
params_long = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=1024, seed=SEED)
long_trace = datasets.request_trace(8, 0.5, (4, 16), (20, 40), vocab=64, seed=SEED + 1)
long_trace.append(datasets.Request(99, 6, np.arange(700) % 64, 2))
stall = {}
for budget in (None, 128):
    res = llm.serve(params_long, long_trace, 256, 16, token_budget=budget)
    assert res.outputs == llm.reference_outputs(params_long, long_trace)
    stall[budget] = COST(res.tokens, res.context, res.pairs)
    print(f"token_budget={budget!s:<4}: slowest iteration {stall[budget].max() * 1e3:5.1f} ms, "
          f"p99 TPOT {np.percentile(res.tpot_seconds(COST), 99) * 1e3:5.1f} ms")
assert stall[None].max() > 3 * stall[128].max()

# %% [markdown]
# ## 7. Evaluation: memory waste, throughput and tail latency
#
# One trace per arrival rate, served by continuous and static batching on the same pool. For each we
# measure the share of reserved KV slots that hold no token (paged vs a contiguous cache reserving
# `max_len` per request), output tokens per iteration, and throughput and p99 latency in modelled
# seconds: a step costs `COST` of it (the 7B model on the A10G, weights and KV reads against FLOPs), an
# idle tick an empty step. "our CPU tok/s" is what this NumPy decoder measured.

# %%
rows = []
for rate in RATES:
    tr = datasets.request_trace(N_REQUESTS, rate, (2, 16), (2, 48), vocab=64, seed=SEED + 7)
    ref_rate = None
    for pol in ("continuous", "static"):
        res = llm.serve(params, tr, NUM_BLOCKS, BLOCK_SIZE, max_batch=MAX_BATCH, policy=pol, timer=time.perf_counter)
        ref_rate = ref_rate or res.outputs
        assert res.outputs == ref_rate
        lat = res.latency_seconds(cost=COST)
        paged, contiguous = res.waste()
        rows.append(dict(rate=rate, policy=pol, per_iter=np.mean(res.generated),
                         tok_s=sum(res.generated) / res.clock_seconds(cost=COST)[-1], p99=np.percentile(lat, 99), paged=paged, contiguous=contiguous,
                         cpu_tok_s=sum(res.generated) / sum(res.wall)))
print(f"{'rate':>5} {'policy':>10} {'tok/iter':>8} {'tok/s':>7} {'p99 s':>6} {'waste paged':>11} "
      f"{'contiguous':>10} {'our CPU tok/s':>13}")
for r in rows:
    print(f"{r['rate']:>5} {r['policy']:>10} {r['per_iter']:>8.2f} {r['tok_s']:>7.0f} {r['p99']:>6.2f} "
          f"{r['paged']:>11.1%} {r['contiguous']:>10.1%} {r['cpu_tok_s']:>13.0f}")

fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
for pol, c in (("continuous", "tab:green"), ("static", "tab:blue")):
    sel = [r for r in rows if r["policy"] == pol]
    axes[0].plot(RATES, [r["tok_s"] for r in sel], "o-", c=c, label=pol)
    axes[1].plot(RATES, [r["p99"] for r in sel], "o-", c=c, label=pol)
axes[0].set(xlabel="arrival rate (requests/iteration)", ylabel="output tokens/s (modelled)", title="throughput")
axes[1].set(xlabel="arrival rate (requests/iteration)", ylabel="p99 latency (s, modelled)", title="tail latency")
cont = [r for r in rows if r["policy"] == "continuous"]
axes[2].bar(["paged", "contiguous"], [np.mean([r["paged"] for r in cont]), np.mean([r["contiguous"] for r in cont])])
axes[2].set(ylabel="reserved KV slots holding no token", title=f"memory waste (B = {BLOCK_SIZE})")
axes[0].legend()
plt.tight_layout()
plt.show()
top = [r for r in rows if r["rate"] == RATES[-1]]
assert top[0]["tok_s"] > top[1]["tok_s"] and top[0]["p99"] < top[1]["p99"]
assert all(r["paged"] < 0.5 * r["contiguous"] for r in rows)

# %% [markdown]
# The waste columns do not move with the rate or the policy: without preemption each request passes
# through every length from 1 to its final length exactly once, one step each, so the time-averaged
# waste depends only on the length distribution and the block size, not on the schedule.
#
# At the highest rate continuous batching produces more tokens per second and a shorter p99 than
# static batching on the same pool, and paging leaves a small fraction of the slots empty where
# contiguous reservation leaves most of them empty. Cost per million output tokens follows from
# tokens per second and the hourly price: the modelled GPU on its one-GPU instance (an A10G, the row
# `COST` reads), and our NumPy decoder on this laptop (a tiny model: the comparison is of the
# scheduler, not of the hardware).

# %%
gpu, laptop = capstone.lookup("aws-g5.xlarge"), capstone.lookup("local-laptop")
for r in top:
    usd = gpu.price_per_hour / (r["tok_s"] * 3600) * 1e6
    usd_cpu = laptop.price_per_hour / (r["cpu_tok_s"] * 3600) * 1e6
    print(f"{r['policy']:>10}: {usd:6.3f} USD per million tokens on {gpu.instance_type} "
          f"({gpu.price_per_hour} USD/h, {gpu.date}, modelled); our decoder {usd_cpu:.4f} USD on the laptop")
speedup = top[0]["tok_s"] / top[1]["tok_s"]
print(f"continuous over static at rate {RATES[-1]}: {speedup:.2f}x the tokens per second, "
      f"{1 / speedup:.2f}x the cost per token")

# %% [markdown]
# ### Prefill scheduling: time to first token, time per output token and goodput
#
# Throughput is what the operator pays for; a user feels two other numbers. **TTFT** is the wait for
# the first token: queueing plus the prefill. **TPOT** is the gap between later tokens: the pace of
# the stream, which a long prompt prefilled in the same iteration stretches. An SLO bounds both, and
# **goodput** counts only the requests that met both bounds, per second (Zhong et al., DistServe,
# define it as the highest request rate served with, say, 90% of requests within the SLO; at one
# rate, as here, it is the requests per second that meet it).
#
# The trace now has chat-like lengths: prompts of 32 to 768 tokens, answers of 16 to 160, arriving at
# 0.15 requests per iteration (a few per second on the 7B clock), on a KV pool the size of the A10G's memory after
# the weights (blocks of 16 tokens), at most 32 requests per batch. Each budget in `BUDGETS` serves the
# same trace; None prefills every prompt whole.

# %%
SLO_TTFT, SLO_TPOT = 1.0, 0.040  # seconds: the first token within 1 s, then at least 25 tokens/s
chat = datasets.request_trace(N_LONG, 0.15, (32, 768), (16, 160), vocab=64, seed=SEED + 3)
pool = int(free_for_kv / kv_per_token) // 16  # the A10G's KV memory, in blocks of 16 tokens
sched = {}
for budget in BUDGETS:
    res = llm.serve(params_long, chat, pool, 16, max_batch=32, token_budget=budget)
    assert res.outputs == (sched[BUDGETS[0]].outputs if sched else res.outputs)  # the budget changes no token
    assert budget is None or max(res.tokens) <= budget
    sched[budget] = res
for r in sorted(chat, key=lambda r: len(r.prompt) + r.max_new)[:2]:  # each request's greedy tokens alone
    assert sched[None].outputs[r.id] == generate(params_long, [r.prompt], r.max_new)[0]

steps = COST(sched[None].tokens, sched[None].context, sched[None].pairs)
kv_share = np.mean(np.array(sched[None].context) * COST.kv_bytes_per_token) / COST.weight_bytes
print(f"whole-prompt prefill: {np.mean([len(t) for t in sched[None].timeline]):.1f} requests per iteration; "
      f"the KV cache adds {kv_share:.0%} to the bytes of a mean step; steps from {steps.min() * 1e3:.0f} "
      f"to {steps.max() * 1e3:.0f} ms")
print(f"SLO: TTFT <= {SLO_TTFT:g} s and TPOT <= {SLO_TPOT * 1e3:g} ms")
print(f"{'budget':>7} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'TPOT p99':>9} {'max step':>9} "
      f"{'in SLO':>7} {'goodput':>8}")
table = {}
for budget, res in sched.items():
    ttft, tpot = res.ttft_seconds(COST), res.tpot_seconds(COST)
    table[budget] = dict(ttft50=np.median(ttft), ttft99=np.percentile(ttft, 99), tpot50=np.median(tpot),
                         tpot99=np.percentile(tpot, 99), step=COST(res.tokens, res.context, res.pairs).max(),
                         met=res.slo_met(COST, SLO_TTFT, SLO_TPOT).mean(), good=res.goodput(COST, SLO_TTFT, SLO_TPOT))
    r = table[budget]
    print(f"{budget or 'whole':>7} {r['ttft50']:>8.3f}s {r['ttft99']:>8.3f}s {r['tpot50'] * 1e3:>7.1f}ms "
          f"{r['tpot99'] * 1e3:>7.1f}ms {r['step'] * 1e3:>7.0f}ms {r['met']:>7.0%} {r['good']:>6.2f}/s")

labels = [str(b or "whole") for b in BUDGETS]
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
axes[0].plot(labels, [table[b]["ttft50"] for b in BUDGETS], "o-", label="p50")
axes[0].plot(labels, [table[b]["ttft99"] for b in BUDGETS], "s--", label="p99")
axes[0].axhline(SLO_TTFT, c="gray", lw=1, ls=":", label="SLO")
axes[0].set(xlabel="token budget per iteration", ylabel="seconds", title="time to first token")
axes[1].plot(labels, [table[b]["tpot50"] * 1e3 for b in BUDGETS], "o-", label="p50")
axes[1].plot(labels, [table[b]["tpot99"] * 1e3 for b in BUDGETS], "s--", label="p99")
axes[1].axhline(SLO_TPOT * 1e3, c="gray", lw=1, ls=":", label="SLO")
axes[1].set(xlabel="token budget per iteration", ylabel="ms", title="time per output token")
axes[2].bar(labels, [table[b]["good"] for b in BUDGETS], color="tab:green")
axes[2].set(xlabel="token budget per iteration", ylabel="requests/s within the SLO", title="goodput")
axes[0].legend()
axes[1].legend()
plt.tight_layout()
plt.show()
smallest = min(b for b in BUDGETS if b is not None)
assert table[smallest]["step"] < table[None]["step"] and table[smallest]["tpot99"] < table[None]["tpot99"]

# %% [markdown]
# Read the table from the bottom of the roofline up. **Whole-prompt prefill** gives a prompt its first
# token in the iteration that admits it, so its TTFT is the shortest; but that iteration is
# compute-bound and lasts several empty steps (the `max step` column), and every request decoding in
# it waits: the worst TPOT. A **budget near the ridge** (`ridge_tokens`, about 117 tokens for a 7B
# model on the A10G) keeps every iteration close to the cost of an empty step: the decode step is
# memory-bound and has room for that many tokens of compute, so the prompt chunks ride in it almost
# for free (Sarathi-Serve's piggybacking), TPOT falls to little more than an empty step, and the run
# even ends sooner. A prompt now takes several iterations, so TTFT rises a little. **Below the
# ridge** the budget wastes the GPU: every iteration reads all 14 GB of weights for a few tokens,
# prompts take many iterations, and once the server's capacity falls below the arrival rate the
# queue grows without bound: TTFT leaves its SLO and goodput collapses (the full-size run's smallest
# budget). The budget is a roofline decision, which is why it belongs to the hardware table and not
# to the trace.

# %%
best = max(BUDGETS, key=lambda b: table[b]["good"])
print(f"goodput peaks at budget {best or 'whole'} ({table[best]['good']:.2f} requests/s within the SLO, "
      f"{table[best]['met']:.0%} of them) against {table[None]['good']:.2f}/s for whole-prompt prefill; "
      f"the ridge of the 7B model on the {GPU.name} is {ridge_tokens:.0f} tokens")
assert best is not None and table[best]["good"] > table[None]["good"]

# %% [markdown]
# ## 8. Exercises
#
# 1. **Prefill first.** `plan_iteration` serves decode tokens first. Write the opposite order under
#    the same budget T: prompt chunks first (oldest request first), decode tokens with what is left,
#    as schedulers that favour new requests do. Serve the chat trace of Section 7 both ways for a few
#    T and compare TTFT p50 and TPOT p99: which SLO does each order favour, and why does the difference
#    vanish when T is large?
# 2. **Keep freed prefixes.** Freed blocks are forgotten by `share_prefix`. Keep them on an LRU list
#    and reuse them when a later request has the same prefix; measure the prefill tokens saved on a
#    trace with a system prompt and low arrival rate.
# 3. **Watermark.** Admission here waits only for the prompt's blocks, so the pool fills and the
#    scheduler thrashes. Keep w blocks in reserve and plot preemptions and throughput against w.
# 4. **Beam search.** Implement beam search with `fork`; count the blocks a beam of width 4 holds with
#    and without sharing.
# 5. **Swap or recompute?** Give swap a cost per block (PCIe bandwidth) and recompute its prefill
#    tokens; for which prompt lengths is each cheaper?
# 6. **Lab 24** (`labs/lab24-paged-kv-cache`) takes Exercise 2 all the way: a paged KV cache with
#    automatic prefix caching, where a freed sequence's full blocks stay cached under their whole-prefix
#    key, are reused by a later prompt and are evicted least recently used first, with copy-on-write and
#    all-or-nothing admission; graded on random traces against the grader's own storage and on the decoder.
#
# ## 9. Research directions
#
# - **Memory management for the KV cache.** Paging removed most of the waste; what to evict, how to
#   share across requests and how to compress the cache are open.
#   - Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
#     SOSP, 2023 (arXiv:2309.06180). Block tables, copy-on-write and the vLLM engine; the allocator of
#     Section 4 follows it.
#   - Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs", NeurIPS, 2024.
#     RadixAttention: a radix tree of cached prefixes shared across requests with LRU eviction.
# - **Scheduling the iteration.** Which requests to run each step, and how to mix prefill and decode,
#   trade throughput against time per output token.
#   - Yu et al., "Orca: A Distributed Serving System for Transformer-Based Generative Models", OSDI,
#     2022. Iteration-level scheduling and selective batching.
#   - Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI,
#     2024 (arXiv:2403.02310). Chunked prefill and stall-free batches under a token budget, the budget
#     chosen from the GPU's compute: `plan_iteration` and the budget sweep of Section 7. Open: choosing
#     the budget per iteration from the SLOs and the queue rather than once.
# - **Disaggregated serving.** Prefill is compute-bound and decode memory-bound; running them on
#   different GPUs and moving the KV cache between them removes their interference.
#   - Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large
#     Language Model Serving", OSDI, 2024. Goodput under TTFT and TPOT SLOs, the metric of Section 7;
#     separate prefill and decode GPUs, each sized to its own SLO, with the KV cache sent between them.
# - **Fair and predictable service.** With preemption and variable lengths, guaranteeing each tenant
#   its share of tokens and a latency SLO is still an open scheduling problem.
#
# ## What's next
#
# Chapter 25 (Distributed retrieval and vector search) serves a different kind of model: instead of
# generating tokens it finds the nearest vectors among millions, and distributes the index over
# shards whose partial top-k lists merge into the global answer.
