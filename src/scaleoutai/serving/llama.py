"""A Llama decoder from scratch in NumPy that runs a real model's weights (Chapters 22, 24, 36).

The weights are SmolLM2-135M-Instruct's, read from its GGUF file (``model_files``) and dequantized to
float32: 30 layers, d = 576, 9 query heads and 3 key/value heads of d_h = 64, an MLP of 1536, a vocabulary
of 49152 and tied embeddings (the output head is the embedding matrix). One layer, for the rows x of the
tokens (Chapter 22, Section 2; Chapter 24, Section 4):

    RMSNorm:   n(x) = x / sqrt(mean(x^2) + eps) * g                       (no mean subtracted, no bias)
    attention: q = n(x) Wq^T, k = n(x) Wk^T, v = n(x) Wv^T, RoPE on q and k; query head h reads KV head
               h // (H / H_kv) (grouped-query attention); softmax(q k^T / sqrt(d_h) + causal mask) v Wo^T
    RoPE:      the pair (a, b) = (x_2i, x_2i+1) of a head at position p turns by the angle p * theta^(-2i/d_h):
               (a cos - b sin, a sin + b cos); theta is the file's ``rope.freq_base`` (100000 here)
    SwiGLU:    MLP(y) = (silu(y Wg^T) * (y Wu^T)) Wd^T,  silu(z) = z / (1 + e^-z)
    residuals: x += attention(n1(x)); x += MLP(n2(x)); after the last layer logits = n(x) E^T

The pairs are adjacent because llama.cpp's converter permutes the rows of Wq and Wk of every head; Hugging
Face's layout rotates (x_i, x_i+d_h/2) instead, the same model after ``unpermute_qk`` (the reference does
that). ``KVCache`` holds each layer's rotated keys and values, H_kv * d_h numbers each per token (3 * 64
here, a third of multi-head attention's 9 * 64), so a decode step runs one token through the layers and
attends over the cached prefix: equal to re-running the whole sequence (tested), at 1/T of the cost.
``reference_model`` is transformers' ``LlamaForCausalLM`` with the same weights; ``generate`` and
``reference_generate`` produce the same greedy tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .model_files import GGUFModel


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes a GGUF file's metadata states (``llama.*`` keys)."""

    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    rope_theta: float
    eps: float
    context: int
    tied: bool
    bos_id: int
    eos_id: int

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def kv_bytes_per_token(self, bytes_per_number: int = 4) -> int:
        """KV-cache bytes per token: 2 (K and V) * n_layers * n_kv_heads * d_head * bytes (Chapter 22)."""
        return 2 * self.n_layers * self.n_kv_heads * self.d_head * bytes_per_number


@dataclass
class LlamaWeights:
    """float32 weights, matrices as (out, in): ``embed`` (V, d), ``head`` (V, d; ``embed`` itself when
    tied), ``norm`` (d,), and per layer ``attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down``."""

    config: LlamaConfig
    embed: np.ndarray
    head: np.ndarray
    norm: np.ndarray
    layers: list[dict[str, np.ndarray]]


_LAYER_KEYS = {"attn_norm": "attn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v", "wo": "attn_output",
               "ffn_norm": "ffn_norm", "w_gate": "ffn_gate", "w_up": "ffn_up", "w_down": "ffn_down"}


def config_from_gguf(metadata: dict[str, Any]) -> LlamaConfig:
    """The decoder's sizes from a GGUF file's metadata (architecture ``llama``)."""
    arch = metadata["general.architecture"]
    if arch != "llama":
        raise ValueError(f"this decoder runs the llama architecture, the file is {arch!r}")
    m = {k[len(arch) + 1:]: v for k, v in metadata.items() if k.startswith(arch + ".")}
    return LlamaConfig(vocab=int(m["vocab_size"]), d_model=int(m["embedding_length"]), n_layers=int(m["block_count"]),
                       n_heads=int(m["attention.head_count"]), n_kv_heads=int(m["attention.head_count_kv"]),
                       d_ff=int(m["feed_forward_length"]), rope_theta=float(m["rope.freq_base"]),
                       eps=float(m["attention.layer_norm_rms_epsilon"]), context=int(m["context_length"]),
                       tied=True, bos_id=int(metadata["tokenizer.ggml.bos_token_id"]),
                       eos_id=int(metadata["tokenizer.ggml.eos_token_id"]))


def llama_weights(model: GGUFModel) -> LlamaWeights:
    """Our weights from a read GGUF file: GGUF tensor names to the decoder's, the head tied if the file
    has no ``output.weight``."""
    t = model.tensors
    tied = "output.weight" not in t
    cfg = config_from_gguf(model.metadata)
    cfg = LlamaConfig(**{**cfg.__dict__, "tied": tied})
    layers = [{ours: t[f"blk.{i}.{theirs}.weight"] for ours, theirs in _LAYER_KEYS.items()}
              for i in range(cfg.n_layers)]
    embed = t["token_embd.weight"]
    return LlamaWeights(cfg, embed, embed if tied else t["output.weight"], t["output_norm.weight"], layers)


def rms_norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2, last axis) + eps) * g."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_angles(positions: np.ndarray, d_head: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of p * theta^(-2i/d_head) for each position p and pair i: two (T, d_head/2) arrays."""
    inv_freq = theta ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate the adjacent pairs (x_2i, x_2i+1) of x (T, heads, d_head) by the angles of ``rope_angles``."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def gqa_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, start: int) -> np.ndarray:
    """Causal grouped-query attention. q (T, H, d_h) for positions start..start+T-1; k, v (S, H_kv, d_h)
    for positions 0..S-1 (S = start + T). Query head h reads KV head h // (H / H_kv). Returns (T, H * d_h)."""
    T, H, dh = q.shape
    S, Hkv, _ = k.shape
    if H % Hkv:
        raise ValueError(f"{Hkv} KV heads must divide {H} query heads")
    g = H // Hkv
    qg = q.reshape(T, Hkv, g, dh).transpose(1, 2, 0, 3)                        # (Hkv, g, T, dh)
    scores = qg @ k.transpose(1, 2, 0)[:, None] / np.float32(np.sqrt(dh))     # (Hkv, g, T, S)
    visible = np.arange(S)[None, :] <= (start + np.arange(T))[:, None]        # key s visible to query t
    scores = np.where(visible, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    out = p @ v.transpose(1, 0, 2)[:, None]                                    # (Hkv, g, T, dh)
    return out.transpose(2, 0, 1, 3).reshape(T, H * dh)


def swiglu(y: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """(silu(y Wg^T) * (y Wu^T)) Wd^T with silu(z) = z / (1 + e^-z)."""
    gate = y @ w_gate.T
    return (gate / (1.0 + np.exp(-gate)) * (y @ w_up.T)) @ w_down.T


class KVCache:
    """Rotated keys and values of one sequence: per layer a (max_len, H_kv, d_h) array for K and for V;
    ``length`` tokens are filled."""

    def __init__(self, config: LlamaConfig, max_len: int):
        shape = (config.n_layers, max_len, config.n_kv_heads, config.d_head)
        self.k = np.zeros(shape, np.float32)
        self.v = np.zeros(shape, np.float32)
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes the filled part holds: length * config.kv_bytes_per_token()."""
        return int(self.length * 2 * self.k[0, 0].nbytes * self.k.shape[0])


def forward(w: LlamaWeights, tokens: Sequence[int], cache: KVCache | None = None, last_only: bool = False
            ) -> np.ndarray:
    """Logits (T, V) of ``tokens`` at positions cache.length.. (0.. without a cache); with a cache the
    tokens' keys and values are appended to it. ``last_only`` returns the last row only, (1, V)."""
    c = w.config
    tokens = np.asarray(tokens, dtype=np.int64)
    T, start = len(tokens), (cache.length if cache is not None else 0)
    if cache is not None and start + T > cache.k.shape[1]:
        raise ValueError(f"the cache holds {cache.k.shape[1]} tokens, {start + T} asked")
    cos, sin = rope_angles(np.arange(start, start + T), c.d_head, c.rope_theta)
    x = w.embed[tokens]
    for i, L in enumerate(w.layers):
        y = rms_norm(x, L["attn_norm"], c.eps)
        q = apply_rope((y @ L["wq"].T).reshape(T, c.n_heads, c.d_head), cos, sin)
        k = apply_rope((y @ L["wk"].T).reshape(T, c.n_kv_heads, c.d_head), cos, sin)
        v = (y @ L["wv"].T).reshape(T, c.n_kv_heads, c.d_head)
        if cache is not None:
            cache.k[i, start:start + T], cache.v[i, start:start + T] = k, v
            k, v = cache.k[i, :start + T], cache.v[i, :start + T]
        x = x + gqa_attention(q, k, v, start) @ L["wo"].T
        x = x + swiglu(rms_norm(x, L["ffn_norm"], c.eps), L["w_gate"], L["w_up"], L["w_down"])
    if cache is not None:
        cache.length = start + T
    if last_only:
        x = x[-1:]
    return rms_norm(x, w.norm, c.eps) @ w.head.T


def generate(w: LlamaWeights, prompt: Sequence[int], max_new_tokens: int, eos_id: int | None = None) -> list[int]:
    """Greedy decoding with the KV cache: prefill the prompt in one pass, then one token per step (the
    argmax of the last logits) until ``max_new_tokens`` or ``eos_id`` (kept, as transformers does)."""
    eos_id = w.config.eos_id if eos_id is None else eos_id
    cache = KVCache(w.config, len(prompt) + max_new_tokens)
    logits = forward(w, prompt, cache, last_only=True)
    out: list[int] = []
    while len(out) < max_new_tokens:
        out.append(int(np.argmax(logits[-1])))
        if out[-1] == eos_id or len(out) == max_new_tokens:
            break
        logits = forward(w, out[-1:], cache)
    return out


def chat_ids(tokenizer: Any, messages: str | list[dict[str, str]]) -> list[int]:
    """Token ids of the file's chat template for ``messages`` (a string is one user message), ending in
    the assistant's turn (``<|im_start|>assistant``) so the model answers."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def unpermute_qk(wt: np.ndarray, n_heads: int) -> np.ndarray:
    """Rows of a GGUF Wq or Wk (n_heads * d_h, d) in Hugging Face's order: within each head the pair
    rows (2i, 2i+1) go to (i, i + d_h/2), so HF's rotate-half RoPE equals ours on adjacent pairs."""
    rows, cols = wt.shape
    return wt.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def reference_model(w: LlamaWeights) -> Any:
    """transformers' ``LlamaForCausalLM`` (float32, eager attention) holding the same weights."""
    from .hf import quiet

    quiet()
    import torch
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM
    from transformers.initialization import no_init_weights

    c = w.config
    hf = HFConfig(vocab_size=c.vocab, hidden_size=c.d_model, intermediate_size=c.d_ff,
                  num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
                  max_position_embeddings=c.context, rms_norm_eps=c.eps, rope_theta=c.rope_theta,
                  tie_word_embeddings=c.tied, bos_token_id=c.bos_id, eos_token_id=c.eos_id, pad_token_id=c.eos_id,
                  attn_implementation="eager")
    with no_init_weights():  # transformers' own switch: skip the random initialisation the file's weights replace
        model = LlamaForCausalLM(hf)
    sd = {"model.embed_tokens.weight": w.embed, "model.norm.weight": w.norm}
    if not c.tied:
        sd["lm_head.weight"] = w.head
    for i, L in enumerate(w.layers):
        p = f"model.layers.{i}."
        sd |= {p + "self_attn.q_proj.weight": unpermute_qk(L["wq"], c.n_heads),
               p + "self_attn.k_proj.weight": unpermute_qk(L["wk"], c.n_kv_heads),
               p + "self_attn.v_proj.weight": L["wv"], p + "self_attn.o_proj.weight": L["wo"],
               p + "mlp.gate_proj.weight": L["w_gate"], p + "mlp.up_proj.weight": L["w_up"],
               p + "mlp.down_proj.weight": L["w_down"], p + "input_layernorm.weight": L["attn_norm"],
               p + "post_attention_layernorm.weight": L["ffn_norm"]}
    model.load_state_dict({k: torch.tensor(v) for k, v in sd.items()},
                          strict=not c.tied)
    if c.tied:
        model.tie_weights()
    return model.eval()


def reference_logits(model: Any, tokens: Sequence[int]) -> np.ndarray:
    """transformers' logits (T, V) for ``tokens``, float32."""
    import torch

    with torch.no_grad():
        return model(torch.tensor([list(tokens)])).logits[0].float().numpy()


def reference_generate(model: Any, prompt: Sequence[int], max_new_tokens: int, eos_id: int) -> list[int]:
    """transformers' greedy ``generate`` (do_sample=False) from ``prompt``: the new tokens only."""
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([list(prompt)]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos_id,
                             pad_token_id=eos_id)
    return out[0, len(prompt):].tolist()
