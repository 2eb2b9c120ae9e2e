"""Continuous batching over the paged KV cache (Chapter 24, Sections 3-7).

Iteration-level scheduling (Yu et al., OSDI 2022, Orca): the server runs one ``decode_step`` at a
time over every running sequence; between two steps it retires finished requests and admits waiting
ones while the block pool can hold their prompts. Static batching, the baseline, admits a new batch
only when the whole previous batch has finished.

Prefill is chunked: a sequence feeds at most ``prefill_chunk`` of its not yet cached tokens per
iteration (1 = token by token, None = the whole prompt in one iteration), in the same ``decode_step``
as the other sequences' decode tokens. When a step needs a block and none is free, the most recently
admitted running request is **preempted**: by recompute (its blocks are freed; later it re-prefills
prompt + the tokens it already generated) or by swap (its blocks are copied to host memory and back).

Invariant (tested): every request's tokens equal ``reference_generate`` of its prompt, greedy, under
preemption of either kind, prefix sharing, chunking, static or continuous batching and any arrivals.
Time is counted in iterations; ``iteration_seconds`` turns a step's token count into seconds with
the decode roofline of Chapter 22 (a fixed weight-read cost plus a per-token cost).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datasets import Request
from .decoder import Params, decode_step
from .paged_cache import OutOfBlocks, PagedCache


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

    def clock_seconds(self, t_fixed: float = 0.02, t_token: float = 2e-4) -> np.ndarray:
        """Modelled seconds at the start of every tick 0..T: a step costs ``iteration_seconds`` of its
        tokens, an idle tick t_fixed (arrivals are counted in ticks)."""
        cost = np.full(max(self.at, default=-1) + 1, t_fixed)
        cost[self.at] = iteration_seconds(self.tokens, t_fixed, t_token)
        return np.concatenate([[0.0], np.cumsum(cost)])

    def latency_seconds(self, t_fixed: float = 0.02, t_token: float = 2e-4) -> np.ndarray:
        clock = self.clock_seconds(t_fixed, t_token)
        return np.array([clock[self.finish[i] + 1] - clock[self.arrival[i]] for i in sorted(self.outputs)])

    def waste(self) -> tuple[float, float]:
        """Mean share of reserved KV slots holding no token: (paged, contiguous to max_len)."""
        s = np.array(self.slots, dtype=np.float64).reshape(-1, 3)
        busy = s[:, 2] > 0
        s = s[busy]
        return float(1 - s[:, 1].sum() / s[:, 0].sum()), float(1 - s[:, 1].sum() / s[:, 2].sum())


def iteration_seconds(tokens: np.ndarray | list[int], t_fixed: float = 0.02, t_token: float = 2e-4) -> np.ndarray:
    """Modelled time of an iteration that feeds n tokens: t_fixed (reading the weights once, memory
    bound) + n * t_token (the per-token compute and KV reads). Defaults: a 7B model in fp16 on one 24 GB
    GPU (14 GB of weights at ~700 GB/s; 14 GFLOP per token at ~70 TFLOP/s)."""
    return t_fixed + t_token * np.asarray(tokens, dtype=np.float64)


def serve(params: Params, requests: list[Request], num_blocks: int, block_size: int, max_batch: int = 8,
          policy: str = "continuous", preempt: str = "recompute", prefill_chunk: int | None = 1,
          prefix_sharing: bool = False, contiguous_len: int | None = None, cache: PagedCache | None = None,
          timer=None) -> ServeResult:
    """Run the requests through one server with a paged KV cache; greedy tokens per request.

    policy: "continuous" (admit between iterations) or "static" (admit a batch when the last is done).
    preempt: "recompute" or "swap". contiguous_len: the per-request reservation a contiguous cache would
    make (default the model's max_len), for the waste comparison.
    """
    if policy not in ("continuous", "static") or preempt not in ("recompute", "swap"):
        raise ValueError(f"policy must be 'continuous' or 'static' and preempt 'recompute' or 'swap', "
                         f"got {policy!r} and {preempt!r}")
    if prefill_chunk is not None and prefill_chunk < 1:
        raise ValueError(f"prefill_chunk must be None (whole prompt) or >= 1, got {prefill_chunk}")
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
        for rid in list(running):
            if rid not in running:  # preempted while making room for an earlier request
                continue
            n = len(ctx[rid]) - fed[rid]
            n = n if prefill_chunk is None else min(n, prefill_chunk)
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
        toks = np.array([ctx[q][p] for q, p in step])
        pos = np.array([p for _, p in step])
        clock = timer() if timer else 0.0
        logits = decode_step(params, toks, pos, cache, seqs=np.array([q for q, _ in step]))
        res.wall.append((timer() - clock) if timer else 0.0)
        res.timeline.append(sorted({q for q, _ in step}))
        res.tokens.append(len(step))
        res.at.append(t)
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
