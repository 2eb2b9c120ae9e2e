"""Continuous batching over the paged KV cache (Chapter 24, Sections 3-7).

Iteration-level scheduling (Yu et al., OSDI 2022, Orca): the server runs one ``decode_step`` at a
time over every running sequence; between two steps it retires finished requests and admits waiting
ones while the block pool can hold their prompts. Static batching, the baseline, admits a new batch
only when the whole previous batch has finished.

What one iteration feeds (``plan_iteration``): by default every running request feeds all its tokens not
yet cached, so a new prompt is prefilled whole in one iteration, as engines do. With a **token budget**
T (Sarathi-Serve, Agrawal et al. OSDI 2024; vLLM's chunked prefill) an iteration feeds at most T tokens:
the decode tokens first (one per decoding request: they never stall behind a prefill), then chunks of
the prompts in admission order until T is spent. ``prefill_chunk`` further caps one request's chunk.
When a step needs a block and none is free, the most recently admitted running request is
**preempted**: by recompute (its blocks are freed; later it re-prefills prompt + the tokens it already
generated) or by swap (its blocks are copied to host memory and back).

Invariant (tested): every request's tokens equal ``reference_generate`` of its prompt, greedy, under
preemption of either kind, prefix sharing, any budget or chunk, static or continuous batching and any
arrivals. Time is counted in iterations; ``StepCost`` (``serving.step_cost``, the one iteration-cost
model of Part V, also the router's) turns an iteration into seconds with the roofline of a named model
on a named GPU (``perf.hardware``: weights AND the KV cache read, or the FLOPs,
whichever takes longer), from which TTFT, TPOT and goodput under an SLO follow (DistServe, Zhong et al.
OSDI 2024). ``iteration_seconds`` is the older linear model t_fixed + n t_token (kept for Chapter 40).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..datasets import Request
from .decoder import Params, decode_step
from .paged_cache import OutOfBlocks, PagedCache
from .step_cost import StepCost  # Part V's one iteration-cost model, re-exported as llm.StepCost


@dataclass
class ServeResult:
    outputs: dict[int, list[int]]
    first_token: dict[int, int]  # iteration that produced the request's first token
    finish: dict[int, int]  # iteration that produced its last token
    arrival: dict[int, int]
    timeline: list[list[int]] = field(default_factory=list)  # request ids that ran in each iteration
    tokens: list[int] = field(default_factory=list)  # tokens fed to decode_step per iteration
    generated: list[int] = field(default_factory=list)  # output tokens produced per iteration
    slots: list[tuple[int, int, int]] = field(default_factory=list)  # (paged allocated, filled, contiguous)
    preemptions: int = 0
    shared_tokens: int = 0  # prompt tokens whose K/V came from another request's blocks
    wall: list[float] = field(default_factory=list)  # measured seconds of each decode_step
    at: list[int] = field(default_factory=list)  # the clock (in iterations) of each step; idle ticks are skipped
    context: list[int] = field(default_factory=list)  # per step: cached tokens the step's sequences read (KV reads)
    pairs: list[int] = field(default_factory=list)  # per step: (query, key) pairs attention computes

    @property
    def iterations(self) -> int:
        return len(self.timeline)

    def ttft(self) -> np.ndarray:
        """Time to first token, in iterations: from arrival to the step that emits it (inclusive)."""
        return np.array([self.first_token[i] - self.arrival[i] + 1 for i in sorted(self.outputs)])

    def tpot(self) -> np.ndarray:
        """Time per output token after the first, in iterations."""
        ids = [i for i in sorted(self.outputs) if len(self.outputs[i]) > 1]
        return np.array([(self.finish[i] - self.first_token[i]) / (len(self.outputs[i]) - 1) for i in ids])

    def latency(self) -> np.ndarray:
        return np.array([self.finish[i] - self.arrival[i] + 1 for i in sorted(self.outputs)])

    def clock_seconds(self, t_fixed: float = 0.02, t_token: float = 2e-4, cost: StepCost | None = None) -> np.ndarray:
        """Modelled seconds at the start of every tick 0..T: a step costs ``cost`` of it (or, without a
        cost, ``iteration_seconds`` of its tokens), an idle tick an empty step (arrivals are counted in ticks)."""
        if cost is None:
            busy, idle = iteration_seconds(self.tokens, t_fixed, t_token), t_fixed
        else:
            busy, idle = cost(self.tokens, self.context, self.pairs), cost.idle
        ticks = np.full(max(self.at, default=-1) + 1, idle)
        ticks[self.at] = busy
        return np.concatenate([[0.0], np.cumsum(ticks)])

    def latency_seconds(self, t_fixed: float = 0.02, t_token: float = 2e-4, cost: StepCost | None = None) -> np.ndarray:
        clock = self.clock_seconds(t_fixed, t_token, cost)
        return np.array([clock[self.finish[i] + 1] - clock[self.arrival[i]] for i in sorted(self.outputs)])

    def ttft_seconds(self, cost: StepCost) -> np.ndarray:
        """Time to first token per request (sorted ids): arrival to the end of the step that emits it."""
        clock = self.clock_seconds(cost=cost)
        return np.array([clock[self.first_token[i] + 1] - clock[self.arrival[i]] for i in sorted(self.outputs)])

    def tpot_seconds(self, cost: StepCost) -> np.ndarray:
        """Time per output token after the first, per request with at least two (sorted ids):
        (finish - first token) / (n - 1), the mean gap a streaming reader sees."""
        clock = self.clock_seconds(cost=cost)
        return np.array([(clock[self.finish[i] + 1] - clock[self.first_token[i] + 1]) / (len(self.outputs[i]) - 1)
                         for i in sorted(self.outputs) if len(self.outputs[i]) > 1])

    def slo_met(self, cost: StepCost, ttft_slo: float, tpot_slo: float) -> np.ndarray:
        """Per request (sorted ids): TTFT <= ttft_slo and TPOT <= tpot_slo (a one-token answer has no TPOT)."""
        clock = self.clock_seconds(cost=cost)
        met = []
        for i in sorted(self.outputs):
            first, n = clock[self.first_token[i] + 1], len(self.outputs[i])
            tpot = (clock[self.finish[i] + 1] - first) / (n - 1) if n > 1 else 0.0
            met.append(first - clock[self.arrival[i]] <= ttft_slo and tpot <= tpot_slo)
        return np.array(met, dtype=bool)

    def goodput(self, cost: StepCost, ttft_slo: float, tpot_slo: float) -> float:
        """Requests per second that met both SLOs (DistServe's goodput, at this trace's rate): the
        number of requests with TTFT <= ttft_slo and TPOT <= tpot_slo over the seconds the run took."""
        return float(self.slo_met(cost, ttft_slo, tpot_slo).sum() / self.clock_seconds(cost=cost)[-1])

    def waste(self) -> tuple[float, float]:
        """Mean share of reserved KV slots holding no token: (paged, contiguous to max_len)."""
        s = np.array(self.slots, dtype=np.float64).reshape(-1, 3)
        busy = s[:, 2] > 0
        s = s[busy]
        return float(1 - s[:, 1].sum() / s[:, 0].sum()), float(1 - s[:, 1].sum() / s[:, 2].sum())


def iteration_seconds(tokens: np.ndarray | list[int], t_fixed: float = 0.02, t_token: float = 2e-4) -> np.ndarray:
    """The linear iteration model: t_fixed (reading the weights once) + n * t_token, for n tokens fed.
    Round numbers for a 7B model in fp16 on an A10G (``perf.hardware``: 14 GB / 600 GB/s = 23 ms;
    14 GFLOP per token / 70 TFLOP/s = 0.2 ms). It ignores the KV cache reads and the roofline's max;
    ``StepCost`` has both (Chapter 24, Section 7). Chapter 40 uses this one."""
    return t_fixed + t_token * np.asarray(tokens, dtype=np.float64)


def plan_iteration(todo: list[tuple[int, int]], token_budget: int | None = None,
                   prefill_chunk: int | None = None) -> dict[int, int]:
    """Tokens each running request feeds this iteration: Sarathi-Serve's stall-free batch.

    ``todo``: (request, tokens not yet cached) in admission order; one token left means the request is
    decoding. Decode tokens go first, then prompt chunks in admission order, each at most
    ``prefill_chunk``, until ``token_budget`` tokens are planned (None: no budget, every prompt whole).
    Invariant: sum of the plan <= token_budget, and no decode token waits while a prompt token runs."""
    left = math.inf if token_budget is None else token_budget
    cap = math.inf if prefill_chunk is None else prefill_chunk
    plan: dict[int, int] = {}
    for rid, n in todo:  # decode tokens first: they never stall behind a prefill
        if n == 1 and left >= 1:
            plan[rid], left = 1, left - 1
    for rid, n in todo:  # then prompt chunks, oldest request first
        if n > 1 and left >= 1:
            plan[rid] = int(min(n, left, cap))
            left -= plan[rid]
    return plan


def serve(params: Params, requests: list[Request], num_blocks: int, block_size: int, max_batch: int = 8,
          policy: str = "continuous", preempt: str = "recompute", prefill_chunk: int | None = None,
          token_budget: int | None = None, prefix_sharing: bool = False, contiguous_len: int | None = None, cache: PagedCache | None = None,
          timer=None) -> ServeResult:
    """Run the requests through one server with a paged KV cache; greedy tokens per request.

    policy: "continuous" (admit between iterations) or "static" (admit a batch when the last is done).
    preempt: "recompute" or "swap". token_budget: at most this many tokens per iteration, decode tokens
    first (``plan_iteration``); None: whole-prompt prefill. prefill_chunk: at most this many prompt tokens
    of one request per iteration (None: no cap). contiguous_len: the per-request reservation a contiguous
    cache would make (default the model's max_len), for the waste comparison.
    """
    if policy not in ("continuous", "static") or preempt not in ("recompute", "swap"):
        raise ValueError(f"policy must be 'continuous' or 'static' and preempt 'recompute' or 'swap', "
                         f"got {policy!r} and {preempt!r}")
    if prefill_chunk is not None and prefill_chunk < 1:
        raise ValueError(f"prefill_chunk must be None (whole prompt) or >= 1, got {prefill_chunk}")
    if token_budget is not None and token_budget < 1:
        raise ValueError(f"token_budget must be None (no budget) or >= 1 token per iteration, got {token_budget}")
    cache = cache or PagedCache(params, num_blocks, block_size)
    alloc, cap = cache.alloc, cache.alloc.num_blocks * cache.block_size
    contiguous_len = contiguous_len or params["config"]["max_len"]
    for r in requests:
        if len(r.prompt) + r.max_new > min(cap, params["config"]["max_len"]):
            raise ValueError(f"request {r.id} needs {len(r.prompt) + r.max_new} tokens of KV; the pool holds {cap} "
                             f"and the model {params['config']['max_len']}: add blocks or shorten the request")
        if r.max_new < 1 or len(r.prompt) < 1:
            raise ValueError(f"request {r.id} needs at least one prompt token and max_new >= 1")
    pending = sorted(requests, key=lambda r: (r.arrival, r.id))
    ctx = {r.id: [int(t) for t in r.prompt] for r in requests}
    plen = {r.id: len(r.prompt) for r in requests}
    want = {r.id: r.max_new for r in requests}
    res = ServeResult({r.id: [] for r in requests}, {}, {}, {r.id: r.arrival for r in requests})
    fed: dict[int, int] = {}  # tokens of ctx whose K/V are in the cache
    waiting: list[int] = []  # preempted requests go back to the front
    running: list[int] = []
    swapped: set[int] = set()
    t = 0
    while pending or waiting or running:
        while pending and pending[0].arrival <= t:
            waiting.append(pending.pop(0).id)
        if policy == "continuous" or not running:
            while waiting and len(running) < max_batch and _admit(waiting[0], cache, ctx, fed, swapped,
                                                                   prefix_sharing, res):
                running.append(waiting.pop(0))
        if not running:
            t = pending[0].arrival if pending else t  # idle until the next arrival
            continue
        step: list[tuple[int, int]] = []  # (request, position) in decode_step order
        while running and not step:  # an empty pass preempted every planned request: plan again without them
            todo = [(rid, len(ctx[rid]) - fed[rid]) for rid in running]
            plan = plan_iteration(todo, token_budget, prefill_chunk)
            for rid in list(running):
                if rid not in running or rid not in plan:  # preempted, or nothing to feed this iteration
                    continue
                n = plan[rid]
                while rid in running:
                    try:
                        cache.reserve(rid, n)
                        step += [(rid, p) for p in range(fed[rid], fed[rid] + n)]
                        fed[rid] += n
                        break
                    except OutOfBlocks:
                        # the youngest request goes; it comes after rid in admission order (or is rid),
                        # so it has nothing in this step yet
                        victim = running.pop()
                        _preempt(victim, cache, preempt, fed, swapped, res)
                        waiting.insert(0, victim)
        if not step:
            continue
        toks = np.array([ctx[q][p] for q, p in step])
        pos = np.array([p for _, p in step])
        clock = timer() if timer else 0.0
        logits = decode_step(params, toks, pos, cache, seqs=np.array([q for q, _ in step]))
        res.wall.append((timer() - clock) if timer else 0.0)
        res.timeline.append(sorted({q for q, _ in step}))
        res.tokens.append(len(step))
        res.at.append(t)
        res.context.append(sum(fed[q] for q in res.timeline[-1]))
        res.pairs.append(int(pos.sum() + len(pos)))
        done: list[int] = []
        made = 0
        for i, (q, p) in enumerate(step):
            if p == len(ctx[q]) - 1 and fed[q] == len(ctx[q]):  # the newest known token: its logits are new
                nxt = int(np.argmax(logits[i]))
                res.outputs[q].append(nxt)
                res.first_token.setdefault(q, t)
                ctx[q].append(nxt)
                made += 1
                if len(res.outputs[q]) == want[q]:
                    done.append(q)
        res.generated.append(made)
        if prefix_sharing:
            for q in res.timeline[-1]:
                alloc.publish(q, ctx[q])
        allocated, filled = alloc.slot_usage()  # before retiring: the finished ones held their slots this step
        res.slots.append((allocated, filled, contiguous_len * len(running)))
        for q in done:
            res.finish[q] = t
            cache.free(q)
            running.remove(q)
        t += 1
    return res


def _admit(rid: int, cache: PagedCache, ctx: dict, fed: dict, swapped: set, prefix_sharing: bool,
           res: ServeResult) -> bool:
    """Give a waiting request its blocks if the whole of what it must hold now fits; False if not."""
    alloc, B = cache.alloc, cache.block_size
    if rid in swapped:
        if -(-fed[rid] // B) > alloc.num_free:
            return False
        cache.swap_in(rid)
        swapped.discard(rid)
        return True
    if -(-len(ctx[rid]) // B) > alloc.num_free:
        return False
    shared = alloc.share_prefix(rid, ctx[rid]) if prefix_sharing else 0  # registers rid, maybe on no blocks
    if not prefix_sharing:
        alloc.allocate(rid, 0)
    fed[rid] = shared
    res.shared_tokens += shared
    return True


def _preempt(rid: int, cache: PagedCache, how: str, fed: dict, swapped: set, res: ServeResult) -> None:
    res.preemptions += 1
    if how == "swap":
        cache.swap_out(rid)
        swapped.add(rid)
    else:
        cache.free(rid)
        fed[rid] = 0  # recompute: prompt and generated tokens are prefilled again


def reference_outputs(params: Params, requests: list[Request]) -> dict[int, list[int]]:
    """Each request alone, greedy, without a cache: what serve() must return."""
    from .decoder import reference_generate
    return {r.id: reference_generate(params, r.prompt, r.max_new) for r in requests}


def to_hf_gpt2(params: Params, dtype: str = "float32", attn_implementation: str = "sdpa"):
    """Our decoder as a transformers GPT-2 model with the same weights (imports torch and transformers).

    The block is GPT-2's: pre-LN, tanh GELU ("gelu_new"), learned positions, a final LN; attention and
    projection biases are zero and the head is untied. Used to check transformers' continuous batching
    against our tokens (Section 5)."""
    import torch

    from .hf import quiet
    quiet()
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = params["config"]
    hf = GPT2Config(vocab_size=cfg["vocab"], n_embd=cfg["d_model"], n_layer=cfg["n_layers"], n_head=cfg["n_heads"],
                    n_inner=cfg["d_ff"], n_positions=cfg["max_len"], activation_function="gelu_new",
                    layer_norm_epsilon=1e-5, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(hf).to(getattr(torch, dtype))
    if attn_implementation:
        model.set_attn_implementation(attn_implementation)
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=getattr(torch, dtype))  # noqa: E731
    with torch.no_grad():
        tr = model.transformer
        tr.wte.weight.copy_(t(params["tok"]))
        tr.wpe.weight.copy_(t(params["pos"]))
        for blk, p in zip(tr.h, params["blocks"]):
            blk.ln_1.weight.copy_(t(p["ln1_g"]))
            blk.ln_1.bias.copy_(t(p["ln1_b"]))
            blk.attn.c_attn.weight.copy_(t(np.concatenate([p["Wq"], p["Wk"], p["Wv"]], axis=1)))
            blk.attn.c_attn.bias.zero_()
            blk.attn.c_proj.weight.copy_(t(p["Wo"]))
            blk.attn.c_proj.bias.zero_()
            blk.ln_2.weight.copy_(t(p["ln2_g"]))
            blk.ln_2.bias.copy_(t(p["ln2_b"]))
            blk.mlp.c_fc.weight.copy_(t(p["W1"]))
            blk.mlp.c_fc.bias.copy_(t(p["b1"]))
            blk.mlp.c_proj.weight.copy_(t(p["W2"]))
            blk.mlp.c_proj.bias.copy_(t(p["b2"]))
        tr.ln_f.weight.copy_(t(params["lnf_g"]))
        tr.ln_f.bias.copy_(t(params["lnf_b"]))
        model.lm_head.weight.copy_(t(params["head"].T))
    return model.eval()
