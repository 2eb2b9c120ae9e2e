"""A tiny decoder-only language model in NumPy with a pluggable KV cache (Chapters 22 and 24).

The model is the shared pre-LN transformer block of ``scaleoutai.nn`` stacked ``n_layers`` times,
with token and learned position embeddings, a final layer norm and an untied output head; weights
are random from a seed (nothing is downloaded). Two ways to run it:

- ``decoder_forward(params, tokens)``: the whole sequence at once, no cache (the reference);
- ``decode_step(params, tokens, positions, cache)``: one new token for each of B sequences. Each
  layer writes the new token's key and value into ``cache`` and reads the sequence's keys and values
  back from it, so a contiguous cache (Ch22, ``ContiguousCache``) and a paged one (Ch24) are both a
  pair of methods. Projections and the MLP run batched over the B sequences; attention runs per
  sequence because the sequences have different lengths (the ragged part continuous batching adds).

Grouped-query attention (GQA, Ch22 Section 2): ``n_kv_heads`` key/value heads serve the ``n_heads``
query heads, query head h reading KV head h // (n_heads / n_kv_heads); Wk and Wv are (d, n_kv_heads *
d_h) and the cache stores n_kv_heads * d_h numbers per token per layer for K and for V. n_kv_heads =
n_heads is multi-head attention (the default, the course's decoder of every earlier chapter), 1 is
multi-query attention (MQA).

Invariants (tested): greedy decoding with any correct cache emits exactly the tokens that
``reference_generate`` emits by re-running the whole prefix every step; a GQA decoder equals the
multi-head decoder whose K/V heads are its own repeated (``repeat_kv_heads``).
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .. import nn

Params = dict[str, Any]


class KVCache(Protocol):
    """Where ``decode_step`` keeps keys and values: sequence ``seq``'s layer ``layer``, one row per token."""

    def write(self, layer: int, seq: int, pos: int, k: np.ndarray, v: np.ndarray) -> None: ...

    def read(self, layer: int, seq: int, length: int) -> tuple[np.ndarray, np.ndarray]: ...


def decoder_init(vocab: int = 64, d_model: int = 32, n_heads: int = 4, n_layers: int = 2, d_ff: int = 64,
                 max_len: int = 128, seed: int = 0, dtype: Any = np.float64, n_kv_heads: int | None = None
                 ) -> Params:
    """Random weights from ``seed``; ``params["config"]`` records the shape so nothing else must.
    ``n_kv_heads`` (default ``n_heads``: multi-head attention) must divide ``n_heads``; with fewer KV heads
    Wk and Wv keep the first n_kv_heads * d_h columns of the multi-head draw."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if min(vocab, d_model, n_heads, n_layers, d_ff, max_len, n_kv_heads) < 1:
        raise ValueError("every size of the decoder must be a positive integer")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} (each KV head serves a group)")
    rng = np.random.default_rng(seed)
    blocks = [nn.block_init(d_model, n_heads, d_ff, seed=seed + 1 + i, dtype=dtype) for i in range(n_layers)]
    kv = n_kv_heads * (d_model // n_heads)
    for b in blocks:
        b["Wk"], b["Wv"] = b["Wk"][:, :kv].copy(), b["Wv"][:, :kv].copy()
    return {"config": {"vocab": vocab, "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers,
                       "d_ff": d_ff, "max_len": max_len, "n_kv_heads": n_kv_heads},
            "tok": rng.standard_normal((vocab, d_model)).astype(dtype),
            "pos": (0.1 * rng.standard_normal((max_len, d_model))).astype(dtype),
            "blocks": blocks,
            "lnf_g": np.ones(d_model, dtype=dtype), "lnf_b": np.zeros(d_model, dtype=dtype),
            "head": (rng.standard_normal((d_model, vocab)) / np.sqrt(d_model)).astype(dtype)}


def kv_width(params_or_config: Any) -> int:
    """Numbers per token per layer in the K (and in the V) cache: n_kv_heads * d_model / n_heads."""
    cfg = params_or_config.get("config", params_or_config)
    return cfg.get("n_kv_heads", cfg["n_heads"]) * (cfg["d_model"] // cfg["n_heads"])


def repeat_kv_heads(params: Params) -> Params:
    """The multi-head decoder equal to a GQA one: every KV head's columns of Wk and Wv repeated for each
    query head of its group (weights shared, not copied, elsewhere)."""
    cfg = params["config"]
    H, G = cfg["n_heads"], cfg.get("n_kv_heads", cfg["n_heads"])
    dh = cfg["d_model"] // H

    def rep(W: np.ndarray) -> np.ndarray:
        return np.repeat(W.reshape(W.shape[0], G, dh), H // G, axis=1).reshape(W.shape[0], H * dh)

    blocks = [dict(b, Wk=rep(b["Wk"]), Wv=rep(b["Wv"])) for b in params["blocks"]]
    return dict(params, blocks=blocks, config=dict(cfg, n_kv_heads=H))


def _check_tokens(params: Params, tokens: np.ndarray, positions: np.ndarray) -> None:
    cfg = params["config"]
    if tokens.size and (tokens.min() < 0 or tokens.max() >= cfg["vocab"]):
        raise ValueError(f"token ids must lie in [0, {cfg['vocab']}): got {tokens.min()}..{tokens.max()}")
    if positions.size and positions.max() >= cfg["max_len"]:
        raise ValueError(f"position {positions.max()} is past max_len={cfg['max_len']}: "
                         "build the decoder with a larger max_len or generate fewer tokens")


def decoder_forward(params: Params, tokens: np.ndarray) -> np.ndarray:
    """Logits (B, T, vocab) for every position of tokens (B, T), causal, no cache: the reference."""
    tokens = np.atleast_2d(np.asarray(tokens))
    T = tokens.shape[1]
    _check_tokens(params, tokens, np.arange(T))
    cfg = params["config"]
    if cfg.get("n_kv_heads", cfg["n_heads"]) != cfg["n_heads"]:
        params = repeat_kv_heads(params)  # the reference: GQA is MHA with each K/V head repeated
    x = params["tok"][tokens] + params["pos"][:T]
    for bp in params["blocks"]:
        x, _ = nn.block_forward(bp, x, cfg["n_heads"])
    h, _ = nn.layer_norm_forward(x, params["lnf_g"], params["lnf_b"])
    return h @ params["head"]


def _attend(q: np.ndarray, K: np.ndarray, V: np.ndarray, n_heads: int) -> np.ndarray:
    """One query row against T cached rows: softmax(q K^T / sqrt(d_h)) V per head; no mask is needed
    because the cache holds only positions at or before the query's. K and V hold G = K.shape[1] / d_h
    KV heads; the n_heads / G query heads of a group attend to their KV head together (GQA)."""
    d = q.shape[-1]
    dh = d // n_heads
    G = K.shape[-1] // dh
    qh, Kh, Vh = q.reshape(G, n_heads // G, dh), K.reshape(-1, G, dh).transpose(1, 0, 2), \
        V.reshape(-1, G, dh).transpose(1, 0, 2)
    s = qh @ Kh.transpose(0, 2, 1) / float(np.sqrt(dh))
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ Vh).reshape(d)


def decode_step(params: Params, tokens: np.ndarray, positions: np.ndarray, cache: KVCache,
                seqs: np.ndarray | None = None) -> np.ndarray:
    """Logits (B, vocab) for one new token per sequence; token i sits at ``positions[i]`` of sequence
    ``seqs[i]`` (default ``i``), whose earlier keys and values are already in ``cache``."""
    tokens, positions = np.asarray(tokens).reshape(-1), np.asarray(positions).reshape(-1)
    if tokens.shape != positions.shape:
        raise ValueError(f"tokens {tokens.shape} and positions {positions.shape} must have the same length")
    _check_tokens(params, tokens, positions)
    seqs = np.arange(tokens.size) if seqs is None else np.asarray(seqs).reshape(-1)
    n_heads = params["config"]["n_heads"]
    x = params["tok"][tokens] + params["pos"][positions]
    for layer, p in enumerate(params["blocks"]):
        h1, _ = nn.layer_norm_forward(x, p["ln1_g"], p["ln1_b"])
        q, k, v = h1 @ p["Wq"], h1 @ p["Wk"], h1 @ p["Wv"]
        o = np.empty_like(q)
        for i, (s, pos) in enumerate(zip(seqs.tolist(), positions.tolist())):
            cache.write(layer, s, pos, k[i], v[i])
            K, V = cache.read(layer, s, pos + 1)
            o[i] = _attend(q[i], K, V, n_heads)
        x2 = x + o @ p["Wo"]
        h2, _ = nn.layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])
        x = x2 + nn.linear_forward(p["W2"], p["b2"], nn.gelu(nn.linear_forward(p["W1"], p["b1"], h2)))
    h, _ = nn.layer_norm_forward(x, params["lnf_g"], params["lnf_b"])
    return h @ params["head"]


class ContiguousCache:
    """The simple cache: a (layers, sequences, max_len, kv_width) array pair reserved up front, kv_width =
    n_kv_heads * d_h (d_model for multi-head attention).

    Memory is n_layers * sequences * max_len * 2 * kv_width * itemsize whatever the sequences' real
    lengths: the waste that paging (Ch24) removes.
    """

    def __init__(self, params: Params, sequences: int, max_len: int | None = None):
        cfg = params["config"]
        self.max_len = max_len or cfg["max_len"]
        shape = (cfg["n_layers"], sequences, self.max_len, kv_width(cfg))
        self.k = np.zeros(shape, dtype=params["tok"].dtype)
        self.v = np.zeros(shape, dtype=params["tok"].dtype)

    def write(self, layer: int, seq: int, pos: int, k: np.ndarray, v: np.ndarray) -> None:
        if pos >= self.max_len:
            raise ValueError(f"sequence {seq} reached position {pos}; this cache holds {self.max_len} per sequence")
        self.k[layer, seq, pos], self.v[layer, seq, pos] = k, v

    def read(self, layer: int, seq: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        return self.k[layer, seq, :length], self.v[layer, seq, :length]

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes


def generate(params: Params, prompts: list[np.ndarray], max_new: int, cache: KVCache | None = None
             ) -> list[list[int]]:
    """Greedy decoding of every prompt with a KV cache: prefill token by token, then ``max_new`` steps.

    The prompts advance together (static batching): step t feeds position t of each still-prefilling
    prompt, or its last generated token. Returns the generated ids per prompt.
    """
    cache = cache or ContiguousCache(params, len(prompts))
    lens = [len(p) for p in prompts]
    if min(lens, default=1) < 1:
        raise ValueError("every prompt needs at least one token")
    seqs = [list(map(int, p)) for p in prompts]
    out: list[list[int]] = [[] for _ in prompts]
    for t in range(max(lens) + max_new - 1):
        live = [i for i in range(len(prompts)) if t < lens[i] + max_new - 1]
        toks = np.array([seqs[i][t] for i in live])
        logits = decode_step(params, toks, np.full(len(live), t), cache, seqs=np.array(live))
        for j, i in enumerate(live):
            if t >= lens[i] - 1:
                nxt = int(np.argmax(logits[j]))
                seqs[i].append(nxt)
                out[i].append(nxt)
    return out


def reference_generate(params: Params, prompt: np.ndarray, max_new: int) -> list[int]:
    """Greedy decoding without a cache: the whole prefix through ``decoder_forward`` at every step."""
    seq = list(map(int, prompt))
    for _ in range(max_new):
        seq.append(int(np.argmax(decoder_forward(params, np.array([seq]))[0, -1])))
    return seq[len(prompt):]
