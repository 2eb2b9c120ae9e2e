"""Symmetric int8 weight quantization, per channel and per tensor (Chapter 22, Sections 2 and 4).

A weight W is stored as int8 codes q and one float scale s per channel c:

    s_c = max |W[c]| / Q,   q = clip(round(W / s), -Q, Q),   deq(q) = q * s

with Q = 127 ("restricted" levels, symmetric around 0, the textbook form) or, as torchao does,
s_c = max |W[c]| / 127.5 and q in [-128, 127] ("full" levels). Either way rounding moves a weight by at
most half a step, |W - deq(q)| <= s / 2 elementwise, so for y = x W with per-output-column scales

    |x W - x deq(W)|_j <= sum_i |x_i| * s_j / 2.

Per channel each output column gets its own step; per tensor (``naive_quantize_int8``) one outlier
channel sets the step of every column, which is what ruins per-tensor int8 (Section 6).
``int8_linear`` is weight-only int8 (float activations, scale applied after the product, as torchao's
``Int8WeightOnlyConfig``); ``int8_linear_dynamic`` also quantizes activations per row and accumulates
in int32 (torchao's ``Int8DynamicActivationInt8WeightConfig``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .decoder import Params, decoder_forward

_LEVELS = {"restricted": (127.0, -127, 127), "full": (127.5, -128, 127)}
# the matrices of the decoder that feed a matrix product; embeddings are gathers and stay float
_BLOCK_MATRICES = ("Wq", "Wk", "Wv", "Wo", "W1", "W2")


def _float_array(name: str, a: Any) -> np.ndarray:
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{name} must be a float array (float32 or float64), got dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D weight matrix, got shape {a.shape}")
    return a


def _levels(levels: str) -> tuple[float, int, int]:
    if levels not in _LEVELS:
        raise ValueError(f"levels must be 'restricted' ([-127, 127]) or 'full' ([-128, 127]), got {levels!r}")
    return _LEVELS[levels]


def _quantize(W: np.ndarray, amax: np.ndarray, levels: str) -> tuple[np.ndarray, np.ndarray]:
    return _codes(W, amax, *_levels(levels))


def _codes(W: np.ndarray, amax: np.ndarray, half_range: float, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric codes clip(round(W / s), lo, hi) with s = amax / half_range (amax broadcasts over W)."""
    # an all-zero channel gets step 1: its codes are 0 and dequantize exactly, and nothing divides by 0
    scale = np.where(amax > 0, amax / W.dtype.type(half_range), W.dtype.type(1)).astype(W.dtype)
    # multiply by the reciprocal (one division per channel), rounding half to even: torchao's arithmetic,
    # so ties at +-127.5 land on the same code
    q = np.clip(np.round(W * (W.dtype.type(1) / scale)), lo, hi).astype(np.int8)
    return q, scale


def quantize_int8(W: np.ndarray, axis: int = -1, levels: str = "restricted") -> tuple[np.ndarray, np.ndarray]:
    """Per-channel codes q (int8, W's shape) and scales (one per index of ``axis``, W's float dtype).

    ``axis`` is the channel axis: -1 for our (d_in, d_out) weights used as x @ W, 0 for torch's
    (out, in) ``nn.Linear.weight``. Guarantees |W - dequantize(q, scale, axis)| <= scale / 2.
    """
    W = _float_array("W", W)
    if axis not in (0, 1, -1, -2):
        raise ValueError(f"axis must name one of the two axes of W (0, 1, -1 or -2), got {axis}")
    other = 1 - (axis % 2)
    amax = np.abs(W).max(axis=other, keepdims=True)
    q, scale = _quantize(W, amax, levels)
    return q, scale.reshape(-1)


def naive_quantize_int8(W: np.ndarray, levels: str = "restricted") -> tuple[np.ndarray, np.ndarray]:
    """Per-tensor codes and a single scale max|W| / 127: the simple form one outlier spoils."""
    W = _float_array("W", W)
    q, scale = _quantize(W, np.abs(W).max(keepdims=True), levels)
    return q, scale.reshape(1)


def dequantize(q: np.ndarray, scale: np.ndarray, axis: int = -1) -> np.ndarray:
    """deq = q * scale, the scale broadcast along the channel ``axis`` (a single scale: per tensor)."""
    q, scale = np.asarray(q), np.asarray(scale)
    if q.dtype != np.int8:
        raise TypeError(f"q must hold int8 codes, got dtype {q.dtype}; quantize with quantize_int8 first")
    if scale.size == 1:
        return q.astype(scale.dtype) * scale.reshape(())
    shape = [1, 1]
    shape[axis] = scale.size
    if q.shape[axis] != scale.size:
        raise ValueError(f"{scale.size} scales do not match {q.shape[axis]} channels along axis {axis} of q")
    return q.astype(scale.dtype) * scale.reshape(shape)


def int8_linear(x: np.ndarray, q: np.ndarray, scale: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Weight-only int8: y = (x @ q) * scale + b, q (d_in, d_out) int8, one scale per output column.

    The scale leaves the sum because it is constant along it: x @ (q * s) = (x @ q) * s, so the weight
    moves through memory as int8 and is widened to x's dtype on the way into the product.
    """
    q, scale = np.asarray(q), np.asarray(scale)
    if q.ndim != 2 or np.asarray(x).shape[-1] != q.shape[0]:
        raise ValueError(f"x (..., {np.asarray(x).shape[-1]}) cannot multiply q of shape {q.shape}: "
                         "need x's last axis equal to q's first (q is (d_in, d_out))")
    if scale.size not in (1, q.shape[1]):
        raise ValueError(f"need 1 or {q.shape[1]} scales for q of shape {q.shape}, got {scale.size}")
    y = (x @ q.astype(x.dtype)) * scale.astype(x.dtype)
    return y if b is None else y + b


def int8_linear_dynamic(x: np.ndarray, q: np.ndarray, scale: np.ndarray, levels: str = "restricted"
                        ) -> np.ndarray:
    """Dynamic int8: each row of x is quantized per row (with ``levels``), the product of int8 codes is
    accumulated in int32 (exact: |sum| <= d_in * 128^2 < 2^31 for d_in < 131,000), and rescaled:
    y = (qx @ q)_int32 * sx * s."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != q.shape[0]:
        raise ValueError(f"x must be (rows, {q.shape[0]}) for q of shape {q.shape}, got {x.shape}")
    qx, sx = quantize_int8(x, axis=0, levels=levels)
    acc = qx.astype(np.int32) @ q.astype(np.int32)
    return acc.astype(x.dtype) * sx.astype(x.dtype)[:, None] * np.asarray(scale, dtype=x.dtype)[None, :]


def matmul_error_bound(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """|x W - x deq(W)| <= sum_i |x_i| * s_j / 2: the bound per row of x and output column j."""
    return np.abs(x).sum(axis=-1, keepdims=True) * np.asarray(scale) / 2


@dataclass
class QuantizedDecoder:
    """The decoder with int8 matrices: ``codes`` maps (layer or "head", name) to (q, scale); ``params``
    is the same model with every quantized matrix replaced by deq(q), runnable by ``decoder_forward``
    and ``decode_step``; ``nbytes`` / ``float_nbytes`` are the bytes of those matrices stored as int8
    plus scales / in the float dtype."""

    params: Params
    codes: dict[tuple[Any, str], tuple[np.ndarray, np.ndarray]]
    nbytes: int
    float_nbytes: int


def quantize_decoder(params: Params, per_channel: bool = True, levels: str = "restricted") -> QuantizedDecoder:
    """Quantize Wq, Wk, Wv, Wo, W1, W2 of every block and the output head to int8 (embeddings, biases
    and layer norms stay float, as in most int8 LLM deployments)."""
    quant = (lambda W: quantize_int8(W, -1, levels)) if per_channel else (lambda W: naive_quantize_int8(W, levels))
    codes: dict[tuple[Any, str], tuple[np.ndarray, np.ndarray]] = {}
    blocks = []
    nbytes = float_nbytes = 0
    for layer, bp in enumerate(params["blocks"]):
        nb = dict(bp)
        for name in _BLOCK_MATRICES:
            q, s = codes[(layer, name)] = quant(bp[name])
            nb[name] = dequantize(q, s)
            nbytes, float_nbytes = nbytes + q.nbytes + s.nbytes, float_nbytes + bp[name].nbytes
        blocks.append(nb)
    q, s = codes[("head", "head")] = quant(params["head"])
    nbytes, float_nbytes = nbytes + q.nbytes + s.nbytes, float_nbytes + params["head"].nbytes
    new = {**params, "blocks": blocks, "head": dequantize(q, s)}
    return QuantizedDecoder(new, codes, nbytes, float_nbytes)


def quantization_report(params: Params, qparams: Params, tokens: np.ndarray) -> dict[str, float]:
    """Logits error and greedy-token agreement of the quantized model on ``tokens`` (B, T): max |dlogit|,
    its size relative to the float logits' spread (std), and the share of positions where argmax agrees."""
    ref, got = decoder_forward(params, tokens), decoder_forward(qparams, tokens)
    err = np.abs(ref - got)
    return {"max_abs_error": float(err.max()), "relative_error": float(err.max() / ref.std()),
            "top1_agreement": float((ref.argmax(-1) == got.argmax(-1)).mean())}


# ---- 4-bit group-wise weights and the real model (Chapter 22, Section 5) ----------------------------------

_INT4_Q = 7  # symmetric 4-bit codes in [-7, 7] (15 of the 16 levels, as the int8 default keeps +-127)


def quantize_int4(W: np.ndarray, group: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Group-wise symmetric 4-bit codes: each run of ``group`` consecutive weights along the last axis
    (the input features of an (out, in) matrix: GGUF's Q4_0 blocks, AWQ's and GPTQ's groups) gets its own
    scale s = max |W_group| / 7 and codes q = clip(round(W / s), -7, 7). Returns q (int8 holding 4-bit
    values, W's shape) and scales (rows, cols / group). Guarantees |W - dequantize_int4(q, s)| <= s / 2
    (to a few ulps where W / s falls on a tie: W is multiplied by the reciprocal of s, as in int8).
    Stored packed, two codes per byte: ``int4_nbytes``."""
    W = _float_array("W", W)
    rows, cols = W.shape
    if group < 1 or cols % group:
        raise ValueError(f"group={group} must divide the {cols} columns of W (the input features)")
    Wg = W.reshape(rows, cols // group, group)
    q, scale = _codes(Wg, np.abs(Wg).max(axis=-1, keepdims=True), _INT4_Q, -_INT4_Q, _INT4_Q)
    return q.reshape(rows, cols), scale.reshape(rows, cols // group)


def dequantize_int4(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """deq = q * s, each scale broadcast over its group of q.shape[1] / scale.shape[1] columns."""
    q, scale = np.asarray(q), np.asarray(scale)
    rows, cols = q.shape
    if scale.shape[0] != rows or cols % scale.shape[1]:
        raise ValueError(f"scales of shape {scale.shape} do not tile codes of shape {q.shape}")
    group = cols // scale.shape[1]
    return (q.reshape(rows, -1, group).astype(scale.dtype) * scale[..., None]).reshape(rows, cols)


def int4_nbytes(q: np.ndarray, scale: np.ndarray) -> int:
    """Bytes stored: two 4-bit codes per byte (ceil(size / 2)) plus the scales."""
    return int((np.asarray(q).size + 1) // 2 + np.asarray(scale).nbytes)


@dataclass
class QuantizedLlama:
    """A ``llama.LlamaWeights`` whose matrices (the 7 per layer and the tied embedding/head) are replaced
    by their dequantized codes, runnable by ``llama.forward`` and ``llama.generate`` unchanged; the norms
    stay float. ``nbytes``: the bytes stored (codes, packed for 4 bits, plus scales, plus the float
    norms); ``float_nbytes``: the same weights in float32; ``rel_error``: ||W - deq(W)||_F / ||W||_F per
    matrix, keyed (layer, name) or ("embed", "embed")."""

    weights: Any
    nbytes: int
    float_nbytes: int
    rel_error: dict[tuple[Any, str], float]


_LLAMA_MATRICES = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")


def quantize_llama(w: Any, bits: int = 8, group: int = 32) -> QuantizedLlama:
    """Weight-only quantization of a Llama (Chapter 22, Section 5): bits=8 is ``quantize_int8`` with one
    scale per output row (axis 0 of an (out, in) matrix), bits=4 is ``quantize_int4`` with one scale per
    ``group`` inputs of a row. The returned weights are the dequantized matrices ("fake quantization"):
    the numbers a weight-only kernel multiplies, with the bytes it would store counted in ``nbytes``."""
    from .llama import LlamaWeights

    if bits not in (4, 8):
        raise ValueError(f"bits must be 8 (per-channel int8) or 4 (group-wise int4), got {bits}")
    nbytes = float_nbytes = 0
    rel: dict[tuple[Any, str], float] = {}

    def quant(key: tuple[Any, str], W: np.ndarray) -> np.ndarray:
        nonlocal nbytes, float_nbytes
        if bits == 8:
            q, s = quantize_int8(W, axis=0)
            deq, stored = dequantize(q, s, axis=0), q.nbytes + s.nbytes
        else:
            q, s = quantize_int4(W, group)
            deq, stored = dequantize_int4(q, s), int4_nbytes(q, s)
        nbytes, float_nbytes = nbytes + stored, float_nbytes + W.size * 4
        rel[key] = float(np.linalg.norm(W - deq) / np.linalg.norm(W))
        return deq.astype(np.float32, copy=False)

    def keep(v: np.ndarray) -> np.ndarray:
        nonlocal nbytes, float_nbytes
        nbytes, float_nbytes = nbytes + v.size * 4, float_nbytes + v.size * 4
        return v

    embed = quant(("embed", "embed"), w.embed)
    head = embed if w.head is w.embed else quant(("head", "head"), w.head)
    layers = [{k: (quant((i, k), v) if k in _LLAMA_MATRICES else keep(v)) for k, v in L.items()}
              for i, L in enumerate(w.layers)]
    norm = keep(w.norm)
    return QuantizedLlama(LlamaWeights(w.config, embed, head, norm, layers), nbytes, float_nbytes, rel)
