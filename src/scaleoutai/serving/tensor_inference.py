"""Tensor-parallel inference of the tiny decoder over the communicator (Chapter 23, Section 4).

Megatron's split, forward only: rank r of K holds the key/value heads in ``block_range(n_kv_heads, K, r)``
with the query heads of their groups (their columns of Wq, Wk, Wv and rows of Wo; with multi-head
attention n_kv_heads = n_heads and this is one head per slot) and the hidden units in
``block_range(d_ff, K, r)`` (columns of W1 and b1, rows of W2). A GQA group never straddles two ranks,
so a rank needs no other rank's K or V; with K > n_kv_heads the extra ranks hold no attention heads
(Megatron would replicate KV heads there instead). Attention heads are independent and the MLP's GELU is elementwise,
so each rank computes its part of the layer's output, and one all-reduce per sub-layer sums the parts:

    attn(x) = sum_r softmax(q_r k_r^T) v_r Wo[r rows],   mlp(x) = sum_r gelu(x W1[:, r]) W2[r rows] + b2

Everything else (embeddings, layer norms, the head) is replicated. Each rank holds about 1/K of the
block weights; the result equals ``decoder_forward`` to rounding for any K, including K larger than the
number of heads (ranks with no heads contribute zeros to the attention sum).
"""
from __future__ import annotations

import numpy as np

from .. import nn
from ..cluster import Comm
from ..collectives import block_range, ring_allreduce
from .decoder import Params, _check_tokens

_REPLICATED = ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "b2")


def shard_decoder(params: Params, K: int, r: int) -> Params:
    """Rank r's part of every block (heads and hidden units by ``block_range``); the rest is copied."""
    cfg = params["config"]
    H = cfg["n_heads"]
    G = cfg.get("n_kv_heads", H)
    dh, group = cfg["d_model"] // H, H // G
    g0, g1 = block_range(G, K, r)  # this rank's KV heads; their groups' query heads come with them
    q_cols, kv_cols = slice(g0 * group * dh, g1 * group * dh), slice(g0 * dh, g1 * dh)
    f0, f1 = block_range(cfg["d_ff"], K, r)
    blocks = []
    for p in params["blocks"]:
        b = {k: p[k] for k in _REPLICATED}
        b.update(Wq=p["Wq"][:, q_cols].copy(), Wk=p["Wk"][:, kv_cols].copy(), Wv=p["Wv"][:, kv_cols].copy(),
                 Wo=p["Wo"][q_cols, :].copy(), W1=p["W1"][:, f0:f1].copy(), b1=p["b1"][f0:f1].copy(),
                 W2=p["W2"][f0:f1, :].copy(), heads=(g1 - g0) * group, group=group, dh=dh)
        blocks.append(b)
    return {**{k: v for k, v in params.items() if k != "blocks"}, "blocks": blocks}


def _per_query_head(kv: np.ndarray, group: int, dh: int) -> np.ndarray:
    """(B, T, g d_h) keys or values of g KV heads, each repeated for the ``group`` query heads it serves."""
    if group == 1:
        return kv
    B, T, width = kv.shape
    return np.repeat(kv.reshape(B, T, width // dh, dh), group, axis=2).reshape(B, T, width * group)


def block_bytes(shard: Params) -> int:
    """Bytes of block weights a rank holds (the part tensor parallelism divides)."""
    return sum(v.nbytes for b in shard["blocks"] for v in b.values() if isinstance(v, np.ndarray))


def tp_decoder_forward(comm: Comm, shard: Params, tokens: np.ndarray) -> np.ndarray:
    """Logits (B, T, vocab), equal on every rank to ``decoder_forward`` of the unsharded model."""
    tokens = np.atleast_2d(np.asarray(tokens))
    T = tokens.shape[1]
    _check_tokens(shard, tokens, np.arange(T))
    x = shard["tok"][tokens] + shard["pos"][:T]
    for p in shard["blocks"]:
        h1, _ = nn.layer_norm_forward(x, p["ln1_g"], p["ln1_b"])
        if p["heads"]:
            k, v = (_per_query_head(h1 @ p[w], p["group"], p["dh"]) for w in ("Wk", "Wv"))
            o, _ = nn.causal_attention_forward(h1 @ p["Wq"], k, v, p["heads"])
            part = o @ p["Wo"]
        else:
            part = np.zeros_like(x)
        x2 = x + ring_allreduce(comm, part)
        h2, _ = nn.layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])
        part = nn.gelu(h2 @ p["W1"] + p["b1"]) @ p["W2"]
        x = x2 + ring_allreduce(comm, part) + p["b2"]
    h, _ = nn.layer_norm_forward(x, shard["lnf_g"], shard["lnf_b"])
    return h @ shard["head"]


def run_tp_forward(comm: Comm, params: Params, tokens: np.ndarray) -> tuple[np.ndarray, int]:
    """Per-rank driver: cut this rank's shard, run the forward; returns (logits, block bytes held)."""
    shard = shard_decoder(params, comm.size, comm.rank)
    return tp_decoder_forward(comm, shard, tokens), block_bytes(shard)
