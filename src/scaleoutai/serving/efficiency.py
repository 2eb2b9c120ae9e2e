"""One node serving the tiny decoder: KV-cache memory, static batching, the prefill/decode roofline
(Chapter 22, Sections 2, 4, 6 and 7). Quantization lives in ``serving.quantize``.

Counts for the decoder of ``serving.decoder`` with L layers, width d, MLP width d_ff, vocabulary V,
n_kv KV heads of size d_h (kv = n_kv d_h; kv = d for multi-head attention):

- matrix weights P = L (2 d^2 + 2 d kv + 2 d d_ff) + d V (the head); each weight is one multiply-add
  per token, so a token costs 2 P FLOPs in the matrices plus 4 L t d in attention at context t;
- KV cache: 2 (K and V) * L * n_kv * d_h * itemsize bytes per token, times T tokens per sequence;
- prefill of T tokens: 2 P T + 2 L T^2 d FLOPs, weights read once -> intensity ~ T;
- decode of one token for each of B sequences: B (2 P + 4 L t d) FLOPs, but every weight is read every
  step, and so is every sequence's cache -> intensity ~ B (for short contexts): decode is memory-bound
  unless B is large, and at long contexts the KV reads, not the weights, dominate (``decode_tokens_per_s``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import perf
from ..perf import hardware
from .decoder import ContiguousCache, Params, decode_step, kv_width, repeat_kv_heads


def _config(params_or_config: Any) -> dict[str, int]:
    cfg = params_or_config.get("config", params_or_config) if isinstance(params_or_config, dict) else None
    need = ("vocab", "d_model", "n_layers", "d_ff")
    if not isinstance(cfg, dict) or any(k not in cfg for k in need):
        raise TypeError("pass the decoder's params (from decoder_init) or its params['config'] dict")
    return cfg


def matrix_params(params_or_config: Any) -> int:
    """P = L (2 d^2 + 2 d kv + 2 d d_ff) + d V: the weights every token multiplies (biases and norms
    excluded); kv = n_kv_heads * d_h is d for multi-head attention, so P = L (4 d^2 + 2 d d_ff) + d V."""
    c = _config(params_or_config)
    d = c["d_model"]
    return c["n_layers"] * (2 * d * d + 2 * d * kv_width(c) + 2 * d * c["d_ff"]) + d * c["vocab"]


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, head_dim: int, itemsize: int = 2) -> int:
    """2 * n_layers * n_kv_heads * head_dim * itemsize: a K and a V vector per KV head per layer per token
    (Llama-3-8B, 32 layers, 8 KV heads of 128, bf16: 131072 bytes = 128 KiB)."""
    if min(n_layers, n_kv_heads, head_dim, itemsize) < 1:
        raise ValueError("layers, KV heads, head size and itemsize must be positive")
    return 2 * n_layers * n_kv_heads * head_dim * itemsize


def kv_cache_bytes(params_or_config: Any, tokens: int, sequences: int = 1, itemsize: int = 8) -> int:
    """kv_bytes_per_token * tokens * sequences for our decoder: 2 * n_layers * tokens * n_kv_heads * d_h
    * itemsize per sequence (n_kv_heads * d_h = d_model for multi-head attention)."""
    if tokens < 0 or sequences < 0:
        raise ValueError(f"tokens and sequences must be >= 0, got {tokens} and {sequences}")
    c = _config(params_or_config)
    dh = c["d_model"] // c["n_heads"]
    return kv_bytes_per_token(c["n_layers"], kv_width(c) // dh, dh, itemsize) * tokens * sequences


@dataclass(frozen=True)
class ModelShape:
    """What a model's config.json says about its KV cache and weights: layers, query and KV heads, head
    size, and the parameter count (for the weight bytes)."""

    name: str
    params: float
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, itemsize: int = 2) -> int:
        return kv_bytes_per_token(self.n_layers, self.n_kv_heads, self.head_dim, itemsize)


# from each model's public config.json (num_hidden_layers, num_attention_heads, num_key_value_heads,
# hidden_size / num_attention_heads); parameters as the model cards state them
OPEN_MODELS: dict[str, ModelShape] = {m.name: m for m in (
    ModelShape("Llama-2-7B (MHA)", 6.74e9, 32, 32, 32, 128),
    ModelShape("Llama-3-8B", 8.03e9, 32, 32, 8, 128),
    ModelShape("Llama-3-70B", 70.6e9, 80, 64, 8, 128),
    ModelShape("Mistral-7B", 7.24e9, 32, 32, 8, 128),
    ModelShape("Qwen2.5-7B", 7.62e9, 28, 28, 4, 128),
    ModelShape("SmolLM2-135M", 0.135e9, 30, 9, 3, 64))}


def max_batch(model: ModelShape, context: int, memory_bytes: float, itemsize: int = 2,
              reserve: float = 0.0) -> int:
    """Sequences of ``context`` tokens whose KV caches fit beside the weights: floor((memory - reserve -
    P itemsize) / (context * kv_bytes_per_token)); 0 when the weights alone do not fit."""
    free = memory_bytes - reserve - model.params * itemsize
    return max(0, int(free // (context * model.kv_bytes_per_token(itemsize)))) if context > 0 else 0


def decode_tokens_per_s(model: ModelShape, batch: int, context: int, gpu: Any, itemsize: int = 2,
                        kv: bool = True, weight_itemsize: float | None = None, tokens_per_seq: int = 1) -> float:
    """Modelled decode throughput: B n / t_step, t_step = max((P w + B t kv_per_token) / bandwidth,
    2 P B n / peak) from ``perf.hardware`` (w = ``weight_itemsize``, default ``itemsize``: int8 weights
    with a bf16 cache are w = 1, itemsize = 2; n = ``tokens_per_seq`` tokens scored per sequence per
    step, k + 1 for a speculative verify pass). ``kv=False`` drops the cache reads (weights only)."""
    from .step_cost import StepCost  # Part V's one iteration-cost model; attention's FLOPs left out here

    w = itemsize if weight_itemsize is None else weight_itemsize
    cost = StepCost(model.params * w, model.kv_bytes_per_token(itemsize) if kv else 0.0, 2 * model.params,
                    hardware.accelerator(gpu))
    return batch * tokens_per_seq / cost.step_seconds(batch * tokens_per_seq, batch * context, 0.0)


@dataclass(frozen=True)
class CallCost:
    """FLOPs and bytes moved by one model call; ``intensity`` = flops / bytes (FLOP per byte). Its
    seconds on a GPU are ``step_cost.StepCost``'s business, the one iteration-cost model of Part V."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def prefill_cost(params_or_config: Any, T: int, batch: int = 1, itemsize: int = 8) -> CallCost:
    """Prefill T tokens of ``batch`` prompts in one call: B (2 P T + 2 L T^2 d) FLOPs; bytes = the weights
    once + the KV cache written (B * 2 L T kv) + the activations in and out (2 B T d), times itemsize."""
    if T < 1 or batch < 1:
        raise ValueError(f"T and batch must be >= 1, got T={T}, batch={batch}")
    c = _config(params_or_config)
    P, L, d, kv = matrix_params(c), c["n_layers"], c["d_model"], kv_width(c)
    flops = batch * (2 * P * T + 2 * L * T * T * d)
    nbytes = itemsize * (P + batch * 2 * L * T * kv + 2 * batch * T * d)
    return CallCost(float(flops), float(nbytes))


def decode_cost(params_or_config: Any, context: int, batch: int = 1, itemsize: int = 8) -> CallCost:
    """One decode step for ``batch`` sequences at ``context`` cached tokens: B (2 P + 4 L t d) FLOPs;
    bytes = every weight once + each sequence's cache read (2 L t kv) + its activations (2 d)."""
    if context < 0 or batch < 1:
        raise ValueError(f"context must be >= 0 and batch >= 1, got context={context}, batch={batch}")
    c = _config(params_or_config)
    P, L, d, kv = matrix_params(c), c["n_layers"], c["d_model"], kv_width(c)
    flops = batch * (2 * P + 4 * L * context * d)
    nbytes = itemsize * (P + batch * (2 * L * context * kv + 2 * d))
    return CallCost(float(flops), float(nbytes))


def measure_roofline(matmul_n: int = 1024, copy_bytes: int = 256 * 2**20, repeats: int = 5
                     ) -> tuple[float, float]:
    """(peak FLOP/s, memory bandwidth in bytes/s) MEASURED here: the median time of an n x n float64
    matrix product (2 n^3 FLOPs) and of copying a ``copy_bytes`` float64 array (read + write = 2x
    bytes). The copy must exceed the last-level cache or it measures the cache, not DRAM."""
    if matmul_n < 16 or copy_bytes < 2**20:
        raise ValueError("use matmul_n >= 16 and copy_bytes >= 1 MiB (a measurement of nothing is noise)")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((matmul_n, matmul_n)), rng.standard_normal((matmul_n, matmul_n))
    t_mm = perf.measure(np.matmul, A, B, warmup=1, repeats=repeats).median
    src = np.ones(copy_bytes // 8)
    dst = np.empty_like(src)
    t_cp = perf.measure(np.copyto, dst, src, warmup=1, repeats=repeats).median
    return 2.0 * matmul_n ** 3 / t_mm, 2.0 * src.nbytes / t_cp


def decode_throughput(params: Params, batch: int, context: int = 16, steps: int = 8, repeats: int = 3
                      ) -> float:
    """Tokens per second of ``steps`` decode steps for ``batch`` sequences after ``context`` cached tokens
    (the median of ``repeats`` runs; the prefill is not timed)."""
    if batch < 1 or steps < 1 or context < 1:
        raise ValueError(f"batch, steps and context must be >= 1, got {batch}, {steps}, {context}")
    if context + steps > params["config"]["max_len"]:
        raise ValueError(f"context + steps = {context + steps} exceeds max_len={params['config']['max_len']}")
    vocab = params["config"]["vocab"]
    toks = np.random.default_rng(batch).integers(0, vocab, size=(batch, context + steps))
    times = []
    for _ in range(repeats):
        cache = ContiguousCache(params, batch, context + steps)
        for t in range(context):
            decode_step(params, toks[:, t], np.full(batch, t), cache)
        t0 = time.perf_counter()
        for t in range(context, context + steps):
            decode_step(params, toks[:, t], np.full(batch, t), cache)
        times.append(time.perf_counter() - t0)
    return batch * steps / float(np.median(times))


@dataclass(frozen=True)
class BatchStats:
    """Slots a static batch computed (rows x steps) against the rows that carried a real token."""

    computed: int
    useful: int

    @property
    def waste(self) -> float:
        return 1.0 - self.useful / self.computed if self.computed else 0.0


def static_generate(params: Params, prompts: Sequence[np.ndarray], max_new: int | Sequence[int],
                    batch_size: int) -> tuple[list[list[int]], BatchStats]:
    """Greedy decoding in static batches of ``batch_size`` prompts, in order: every row of a batch is
    computed at every step until the batch's longest request ends (prompt_i + new_i - 1 steps), so a row
    whose request has finished keeps decoding a pad token: the waste continuous batching (Ch24) removes.
    Returns the real tokens (equal to ``generate``'s) and the slots computed vs useful."""
    n = len(prompts)
    new = [int(max_new)] * n if np.isscalar(max_new) else [int(m) for m in max_new]
    if len(new) != n or batch_size < 1 or min(new, default=1) < 1:
        raise ValueError("need one max_new >= 1 per prompt and batch_size >= 1")
    if min((len(p) for p in prompts), default=1) < 1:
        raise ValueError("every prompt needs at least one token")
    out: list[list[int]] = []
    computed = useful = 0
    for b0 in range(0, n, batch_size):
        idx = list(range(b0, min(n, b0 + batch_size)))
        seqs = [list(map(int, prompts[i])) for i in idx]
        lens, ends = [len(s) for s in seqs], [len(seqs[j]) + new[i] - 1 for j, i in enumerate(idx)]
        steps = max(ends)
        cache = ContiguousCache(params, len(idx), steps)
        gen: list[list[int]] = [[] for _ in idx]
        for t in range(steps):
            toks = np.array([s[t] if t < len(s) else 0 for s in seqs])  # 0 pads a finished row
            logits = decode_step(params, toks, np.full(len(idx), t), cache)
            computed, useful = computed + len(idx), useful + sum(t < e for e in ends)
            for j in range(len(idx)):
                if lens[j] - 1 <= t < ends[j]:
                    seqs[j].append(int(np.argmax(logits[j])))
                    gen[j].append(seqs[j][-1])
        out.extend(gen)
    return out, BatchStats(computed, useful)


def padding_waste(prompt_lens: Sequence[int], new_lens: Sequence[int], batch_size: int) -> BatchStats:
    """The slot count of ``static_generate`` from the lengths alone: a batch computes its size times its
    longest prompt_i + new_i - 1 steps, of which sum(prompt_i + new_i - 1) carry a real token."""
    if len(prompt_lens) != len(new_lens) or batch_size < 1:
        raise ValueError("need one new length per prompt length and batch_size >= 1")
    work = np.asarray(prompt_lens) + np.asarray(new_lens) - 1
    computed = sum(len(work[i:i + batch_size]) * int(work[i:i + batch_size].max())
                   for i in range(0, len(work), batch_size))
    return BatchStats(int(computed), int(work.sum()))


def to_gpt2(params: Params) -> Any:
    """A ``transformers`` GPT2LMHeadModel (float64, eval mode) holding our decoder's weights (Section 5).

    Same architecture: pre-LN blocks, tanh GELU ("gelu_new"), learned positions, final LN (eps 1e-5),
    untied head; a GQA decoder goes in as its multi-head equivalent (``repeat_kv_heads``). GPT-2's Conv1D
    stores (in, out) like our x @ W, so Wq|Wk|Wv concatenate into c_attn; our attention has no biases, so
    c_attn's and c_proj's are zero. Needs torch and transformers (imported here, not at module import);
    nothing is downloaded.
    """
    import torch

    from .hf import quiet
    quiet()
    from transformers import GPT2Config, GPT2LMHeadModel

    params = repeat_kv_heads(params)  # GPT-2 has one K/V head per query head: GQA as its MHA equivalent
    c = _config(params)
    cfg = GPT2Config(vocab_size=c["vocab"], n_embd=c["d_model"], n_layer=c["n_layers"], n_head=c["n_heads"],
                     n_positions=c["max_len"], n_inner=c["d_ff"], activation_function="gelu_new",
                     layer_norm_epsilon=1e-5, tie_word_embeddings=False, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    model = GPT2LMHeadModel(cfg).to(torch.float64).eval()

    def put(dst: Any, a: np.ndarray) -> None:
        dst.copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)))

    tr = model.transformer
    with torch.no_grad():
        put(tr.wte.weight, params["tok"])
        put(tr.wpe.weight, params["pos"])
        for blk, bp in zip(tr.h, params["blocks"]):
            put(blk.ln_1.weight, bp["ln1_g"]), put(blk.ln_1.bias, bp["ln1_b"])
            put(blk.attn.c_attn.weight, np.concatenate([bp["Wq"], bp["Wk"], bp["Wv"]], axis=1))
            put(blk.attn.c_proj.weight, bp["Wo"])
            blk.attn.c_attn.bias.zero_(), blk.attn.c_proj.bias.zero_()
            put(blk.ln_2.weight, bp["ln2_g"]), put(blk.ln_2.bias, bp["ln2_b"])
            put(blk.mlp.c_fc.weight, bp["W1"]), put(blk.mlp.c_fc.bias, bp["b1"])
            put(blk.mlp.c_proj.weight, bp["W2"]), put(blk.mlp.c_proj.bias, bp["b2"])
        put(tr.ln_f.weight, params["lnf_g"]), put(tr.ln_f.bias, params["lnf_b"])
        put(model.lm_head.weight, params["head"].T)  # nn.Linear stores (out, in)
    return model
