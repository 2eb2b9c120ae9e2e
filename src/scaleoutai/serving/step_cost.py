"""One engine iteration's modelled time, the cost model of Part V: Chapter 24's continuous batching
(Section 7: TTFT, TPOT, goodput) and Chapter 23's fleet (the router's replicas, disaggregation, the
benchmark) read the same one, and Chapter 22's ``efficiency.decode_tokens_per_s`` is its throughput
for one uniform decode batch, without attention's FLOPs.

An iteration (one forward pass of continuous batching) feeds n tokens (prompt tokens and one token per
decoding sequence), touches the K and V of c tokens in the cache (each decoding sequence reads its
context, each prompt reads its cached prefix and writes its new tokens) and computes attention for a
(query, key) pairs. On a GPU of ``perf.hardware`` it takes the roofline of Chapter 3:

    t = max((W + kv c) / bandwidth, (f n + f_attn a) / (peak * mfu)) + overhead

    W      = P * bytes per weight                       (every weight read once per iteration)
    kv     = 2 * layers * n_kv_heads * head_dim * bytes  (K and V per token; GQA: n_kv_heads < n_heads)
    f      = 2 P                                         (a multiply-add per weight per token)
    f_attn = 4 * layers * n_heads * head_dim             (QK^T and AV, 2 d FLOPs each per layer; GQA
                                                          shares K and V, not the query heads' FLOPs)

``mfu`` is the share of the peak FLOP/s the matmuls reach (1.0: the roofline's lower bound; the memory
side runs at full bandwidth) and ``overhead`` the seconds every iteration adds (launches, scheduling).
A prompt of n new tokens after h cached ones has n h + n (n + 1) / 2 pairs (``attention_pairs``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..perf.hardware import Accelerator, accelerator, decode_step_seconds


def attention_pairs(new: int, cached: int = 0) -> int:
    """(query, key) pairs of prefilling ``new`` tokens after ``cached`` ones, causal: the query at position
    p sees p + 1 keys, so sum_{p=h}^{h+n-1} (p + 1) = n h + n (n + 1) / 2."""
    return new * cached + new * (new + 1) // 2


@dataclass(frozen=True)
class StepCost:
    """Modelled seconds of one engine iteration of a model on a GPU (see the module docstring):
    t = max((weight_bytes + kv_bytes_per_token * c) / bandwidth,
            (flops_per_token * n + attn_flops_per_pair * a) / (peak * mfu)) + overhead.
    Build it with ``for_model`` (a shape) or ``for_open_model`` (a row of ``efficiency.OPEN_MODELS``)."""

    weight_bytes: float
    kv_bytes_per_token: float    # 2 * layers * n_kv_heads * head_dim * bytes per value
    flops_per_token: float       # 2 P
    gpu: Accelerator
    attn_flops_per_pair: float = 0.0   # 4 * layers * n_heads * head_dim
    mfu: float = 1.0             # share of the peak FLOP/s reached (1.0: the roofline's bound)
    overhead: float = 0.0        # seconds added to every iteration

    def __post_init__(self):
        if not 0.0 < self.mfu <= 1.0 or self.overhead < 0.0:
            raise ValueError(f"mfu must be in (0, 1] and overhead >= 0, got mfu={self.mfu}, overhead={self.overhead}")

    @classmethod
    def for_model(cls, P: float, layers: int, d_model: int, kv_dim: int, gpu: str | Accelerator,
                  bytes_per_value: int = 2, mfu: float = 1.0, overhead: float = 0.0) -> StepCost:
        """A decoder of P parameters, ``layers`` layers of width d_model whose K (and V) hold kv_dim numbers
        per token per layer (d_model for multi-head attention, n_kv_heads * d_head with GQA), stored in
        ``bytes_per_value`` (2: fp16/bf16): weights P b bytes, KV 2 layers kv_dim b bytes per token,
        2 P FLOPs per token, 4 layers d_model FLOPs per attention pair."""
        return cls(P * bytes_per_value, 2 * layers * kv_dim * bytes_per_value, 2 * P, accelerator(gpu),
                   4 * layers * d_model, mfu, overhead)

    @classmethod
    def for_open_model(cls, name: str, gpu: str | Accelerator, itemsize: int = 2, mfu: float = 1.0,
                       overhead: float = 0.0) -> StepCost:
        """A model of ``efficiency.OPEN_MODELS`` (its config.json: layers, query and KV heads, head size)
        with ``itemsize`` bytes per weight and per cached K or V element, on a GPU of ``perf.hardware``."""
        from .efficiency import OPEN_MODELS

        if name not in OPEN_MODELS:
            raise KeyError(f"unknown model {name!r}; known: {sorted(OPEN_MODELS)}")
        m = OPEN_MODELS[name]
        return cls(m.params * itemsize, m.kv_bytes_per_token(itemsize), 2 * m.params, accelerator(gpu),
                   4 * m.n_layers * m.n_heads * m.head_dim, mfu, overhead)

    def step_seconds(self, tokens: float, kv_tokens: float, pairs: float) -> float:
        """One iteration that feeds ``tokens``, touches the K and V of ``kv_tokens`` cached tokens and
        computes ``pairs`` attention pairs: the roofline of ``perf.hardware``, plus the overhead."""
        flops = (self.flops_per_token * tokens + self.attn_flops_per_pair * pairs) / self.mfu
        kv = self.kv_bytes_per_token * kv_tokens
        return decode_step_seconds(self.weight_bytes, kv, flops, self.gpu) + self.overhead

    @property
    def idle(self) -> float:
        """An iteration that feeds nothing: the weights read once, plus the overhead (the idle tick of
        ``llm.ServeResult``'s clock)."""
        return self.step_seconds(0.0, 0.0, 0.0)

    def __call__(self, tokens, context, pairs=None) -> np.ndarray:
        """Seconds of each iteration from its tokens fed, the cached tokens it touches (read or written)
        and its attention pairs (None: none counted), as ``llm.serve`` records them per step."""
        tokens, context = np.asarray(tokens, dtype=np.float64), np.asarray(context, dtype=np.float64)
        pairs = np.zeros_like(tokens) if pairs is None else np.asarray(pairs, dtype=np.float64)
        return np.array([self.step_seconds(n, c, a) for n, c, a in zip(tokens, context, pairs)])

    def seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: int | None = None,
                prefix_tokens: int = 0) -> float:
        """One iteration of the router's replica: ``prefill_tokens`` new prompt tokens (written to the
        cache, ``prefill_pairs`` pairs; None: one prompt with nothing cached, p (p + 1) / 2) whose prompts
        read ``prefix_tokens`` cached ones, and ``decode_seqs`` decoding sequences holding
        ``context_tokens`` in all (each reads its context, its query attends to all of it)."""
        pairs = attention_pairs(prefill_tokens) if prefill_pairs is None else prefill_pairs
        return self.step_seconds(prefill_tokens + decode_seqs, context_tokens + prefix_tokens + prefill_tokens,
                                 context_tokens + pairs)

    def decode_seconds(self, decode_seqs: int, context_tokens: np.ndarray) -> np.ndarray:
        """``seconds(0, decode_seqs, t)`` for every t in ``context_tokens`` at once (the same roofline,
        vectorised for the router's runs of decode-only iterations)."""
        ctx = np.asarray(context_tokens, dtype=np.float64)
        mem = (self.weight_bytes + self.kv_bytes_per_token * ctx) / self.gpu.hbm_bandwidth
        flops = (self.flops_per_token * decode_seqs + self.attn_flops_per_pair * ctx) / self.mfu
        return np.maximum(mem, flops / self.gpu.bf16_flops) + self.overhead
