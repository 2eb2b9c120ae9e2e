"""Shared NumPy models (Chapters 15-21 and every later part): an MLP and a pre-LN transformer block, backward by hand.

Everything is functional: parameters are a ``Params`` dict of arrays, ``*_forward`` returns
``(output, cache)`` and ``*_backward(params, cache, dy)`` returns ``(dx, grads)`` with the same keys as
``params``. This is the single-device reference every parallel scheme (DDP, ZeRO, tensor, pipeline, expert
parallelism, and the parts after Part IV) must reproduce. Shapes: the MLP takes ``x`` of shape (..., sizes[0]); the block takes
(B, T, d_model) or (T, d_model).

``flatten`` orders tensors by sorted key; ``unflatten`` inverts it. Optimizers update in place.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

Params = dict[str, np.ndarray]
Cache = Any

__all__ = ["Params", "Cache", "linear_forward", "linear_backward", "relu", "relu_backward", "gelu",
           "gelu_backward", "layer_norm_forward", "layer_norm_backward", "causal_attention_forward",
           "causal_attention_backward", "mlp_init", "mlp_forward", "mlp_backward", "mse_loss",
           "softmax_cross_entropy", "block_init", "block_forward", "block_backward", "flatten", "unflatten",
           "numerical_gradient", "sgd_step", "adam_init", "adam_update", "adam_step"]


# --- layers --------------------------------------------------------------------------------------

def linear_forward(W: np.ndarray, b: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """y = x W + b, for x of shape (..., d_in) and W of shape (d_in, d_out)."""
    y = x @ W
    return y if b is None else y + b


def linear_backward(W: np.ndarray, x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx = dy W^T, dW = x^T dy, db = sum of dy over all leading axes."""
    d_in, d_out = W.shape
    n = int(np.prod(x.shape[:-1]))  # explicit: reshape(-1, 0) is ambiguous for empty shards (Ch16 TP)
    x2, dy2 = x.reshape(n, d_in), dy.reshape(n, d_out)
    return dy @ W.T, x2.T @ dy2, dy2.sum(axis=0)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def relu_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dy * 1[x > 0], with x the input of the ReLU (pre-activation)."""
    return dy * (x > 0)


_C = float(np.sqrt(2.0 / np.pi))  # a Python float, so float32 inputs stay float32


def gelu(x: np.ndarray) -> np.ndarray:
    """Tanh approximation: 0.5 x (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi)."""
    return 0.5 * x * (1.0 + np.tanh(_C * (x + 0.044715 * x ** 3)))


def gelu_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    t = np.tanh(_C * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _C * (1.0 + 3 * 0.044715 * x * x))


def layer_norm_forward(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5
                       ) -> tuple[np.ndarray, tuple]:
    """y = g * (x - mean) / sqrt(var + eps) + b over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    xhat = (x - mu) * inv
    return g * xhat + b, (xhat, inv)


def layer_norm_backward(g: np.ndarray, cache: tuple, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx = inv (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g; returns (dx, dg, db)."""
    xhat, inv = cache
    dxhat = dy * g
    dx = inv * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    axes = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)


def _heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    B, T, d = x.shape
    return x.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def _merge(x: np.ndarray) -> np.ndarray:
    B, A, T, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, A * dh)


def causal_attention_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, n_heads: int
                             ) -> tuple[np.ndarray, tuple]:
    """softmax(q k^T / sqrt(d_h) + causal mask) v per head; q, k, v are (B, T, n_heads * d_h).

    Heads are independent, so a rank holding heads [h0, h1) calls this on its column slice (Ch16 TP).
    """
    qh, kh, vh = _heads(q, n_heads), _heads(k, n_heads), _heads(v, n_heads)
    T = q.shape[1]
    s = qh @ kh.transpose(0, 1, 3, 2) / float(np.sqrt(qh.shape[-1]))  # a Python float keeps float32
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return _merge(p @ vh), (qh, kh, vh, p)


def causal_attention_backward(cache: tuple, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns (dq, dk, dv); softmax backward: ds = p (dp - sum(dp p))."""
    qh, kh, vh, p = cache
    do = _heads(dout, qh.shape[1])
    dp = do @ vh.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ do
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) / float(np.sqrt(qh.shape[-1]))
    return _merge(ds @ kh), _merge(ds.transpose(0, 1, 3, 2) @ qh), _merge(dv)


# --- MLP -----------------------------------------------------------------------------------------

def _n_layers(params: Params) -> int:
    n = 0
    while f"W{n}" in params:
        n += 1
    return n


def mlp_init(sizes: list[int], seed: int = 0, dtype: Any = np.float64) -> Params:
    """He-initialised weights W_i of shape (sizes[i], sizes[i+1]) and small random biases b_i."""
    if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
        raise ValueError(f"sizes must list >= 2 positive layer widths, got {sizes!r}")
    rng = np.random.default_rng(seed)
    p: Params = {}
    for i in range(len(sizes) - 1):
        p[f"W{i}"] = (rng.standard_normal((sizes[i], sizes[i + 1])) * np.sqrt(2.0 / sizes[i])).astype(dtype)
        p[f"b{i}"] = (0.1 * rng.standard_normal(sizes[i + 1])).astype(dtype)
    return p


def mlp_forward(params: Params, x: np.ndarray) -> tuple[np.ndarray, Cache]:
    """h_{i+1} = relu(h_i W_i + b_i), linear last layer. Cache: the input and pre-activation per layer."""
    n = _n_layers(params)
    cache = []
    h = x
    for i in range(n):
        z = linear_forward(params[f"W{i}"], params[f"b{i}"], h)
        cache.append((h, z))
        h = relu(z) if i < n - 1 else z
    return h, cache


def mlp_backward(params: Params, cache: Cache, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """Backpropagation through ``mlp_forward``; returns dL/dx and dL/dparams (same keys)."""
    n = len(cache)
    grads: Params = {}
    d = dy
    for i in reversed(range(n)):
        h, z = cache[i]
        if i < n - 1:
            d = relu_backward(z, d)
        d, grads[f"W{i}"], grads[f"b{i}"] = linear_backward(params[f"W{i}"], h, d)
    return d, grads


# --- losses --------------------------------------------------------------------------------------

def mse_loss(y: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """L = mean((y - t)^2) over all elements; dL/dy = 2 (y - t) / y.size."""
    diff = y - t
    return float(np.mean(diff * diff)), (2.0 / diff.size) * diff


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """L = mean over positions of -log softmax(logits)[label]; dL/dlogits = (softmax - onehot) / N."""
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    flat, lab = logp.reshape(-1, logp.shape[-1]), np.asarray(labels).reshape(-1)
    N = lab.size
    loss = -float(flat[np.arange(N), lab].mean())
    d = np.exp(flat)
    d[np.arange(N), lab] -= 1.0
    return loss, (d / N).reshape(logits.shape).astype(logits.dtype, copy=False)


# --- transformer block ---------------------------------------------------------------------------

def block_init(d_model: int, n_heads: int, d_ff: int, seed: int = 0, dtype: Any = np.float64) -> Params:
    """Pre-LN block parameters: ln1_g/ln1_b, Wq/Wk/Wv/Wo (d, d), ln2_g/ln2_b, W1 (d, d_ff), b1, W2 (d_ff, d), b2."""
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    rng = np.random.default_rng(seed)

    def w(a: int, b: int) -> np.ndarray:
        return rng.standard_normal((a, b)) / np.sqrt(a)

    p = {"ln1_g": 1.0 + 0.1 * rng.standard_normal(d_model), "ln1_b": 0.1 * rng.standard_normal(d_model),
         "Wq": w(d_model, d_model), "Wk": w(d_model, d_model), "Wv": w(d_model, d_model),
         "Wo": w(d_model, d_model),
         "ln2_g": 1.0 + 0.1 * rng.standard_normal(d_model), "ln2_b": 0.1 * rng.standard_normal(d_model),
         "W1": w(d_model, d_ff), "b1": 0.1 * rng.standard_normal(d_ff),
         "W2": w(d_ff, d_model), "b2": 0.1 * rng.standard_normal(d_model)}
    return {k: v.astype(dtype) for k, v in p.items()}


def block_forward(params: Params, x: np.ndarray, n_heads: int) -> tuple[np.ndarray, Cache]:
    """y = x2 + MLP(LN2(x2)), x2 = x + Attn(LN1(x)); causal multi-head attention, GELU MLP."""
    squeeze = x.ndim == 2
    x = x[None] if squeeze else x
    p = params
    h1, ln1 = layer_norm_forward(x, p["ln1_g"], p["ln1_b"])
    q, k, v = h1 @ p["Wq"], h1 @ p["Wk"], h1 @ p["Wv"]
    o, att = causal_attention_forward(q, k, v, n_heads)
    x2 = x + o @ p["Wo"]
    h2, ln2 = layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])
    z = linear_forward(p["W1"], p["b1"], h2)
    f = gelu(z)
    y = x2 + linear_forward(p["W2"], p["b2"], f)
    return (y[0] if squeeze else y), (squeeze, ln1, h1, att, o, ln2, h2, z, f)


def block_backward(params: Params, cache: Cache, dy: np.ndarray, n_heads: int) -> tuple[np.ndarray, Params]:
    """Backpropagation through ``block_forward``; residuals add the upstream gradient back in."""
    squeeze, ln1, h1, att, o, ln2, h2, z, f = cache
    p, g = params, {}
    dy = dy[None] if squeeze else dy
    df, g["W2"], g["b2"] = linear_backward(p["W2"], f, dy)
    dh2, g["W1"], g["b1"] = linear_backward(p["W1"], h2, gelu_backward(z, df))
    dx2, g["ln2_g"], g["ln2_b"] = layer_norm_backward(p["ln2_g"], ln2, dh2)
    dx2 = dx2 + dy
    do, g["Wo"], _ = linear_backward(p["Wo"], o, dx2)
    dq, dk, dv = causal_attention_backward(att, do)
    dh1 = dq @ p["Wq"].T + dk @ p["Wk"].T + dv @ p["Wv"].T
    d_in = p["Wq"].shape[0]
    h1f = h1.reshape(-1, d_in)
    g["Wq"], g["Wk"], g["Wv"] = (h1f.T @ d.reshape(-1, d.shape[-1]) for d in (dq, dk, dv))
    dx, g["ln1_g"], g["ln1_b"] = layer_norm_backward(p["ln1_g"], ln1, dh1)
    dx = dx + dx2
    return (dx[0] if squeeze else dx), g


# --- flat vectors and finite differences ---------------------------------------------------------

def flatten(params: Params, dtype: Any = None) -> np.ndarray:
    """Concatenate ``params[k].ravel()`` for k in sorted(params): the order every flat vector uses."""
    keys = sorted(params)
    if not keys:
        return np.zeros(0, dtype=dtype or np.float64)
    return np.concatenate([np.asarray(params[k]).ravel() for k in keys]).astype(
        dtype or np.result_type(*[params[k] for k in keys]), copy=False)


def unflatten(vector: np.ndarray, like: Params) -> Params:
    """Inverse of ``flatten``: new arrays shaped like ``like`` (sorted keys), in the vector's dtype."""
    total = sum(int(np.size(like[k])) for k in like)
    if vector.ndim != 1 or vector.size != total:
        raise ValueError(f"vector has shape {vector.shape}, expected ({total},) to match the parameters")
    out, off = {}, 0
    for k in sorted(like):
        n = int(np.size(like[k]))
        out[k] = vector[off:off + n].reshape(np.shape(like[k])).copy()
        off += n
    return out


def numerical_gradient(f: Callable[[Params], float], params: Params, eps: float = 1e-6) -> Params:
    """Central differences (f(p + eps e_i) - f(p - eps e_i)) / 2 eps for every element; restores params."""
    grads: Params = {}
    for k in sorted(params):
        a = params[k]
        g = np.zeros_like(a, dtype=np.float64)
        for i in np.ndindex(a.shape):
            old = a[i]
            a[i] = old + eps
            fp = f(params)
            a[i] = old - eps
            fm = f(params)
            a[i] = old
            g[i] = (fp - fm) / (2 * eps)
        grads[k] = g
    return grads


# --- optimizers (in place) -----------------------------------------------------------------------

def sgd_step(params: Params, grads: Params, lr: float) -> None:
    """p <- p - lr g for every key in ``grads`` (keys absent from grads, e.g. frozen ones, stay)."""
    for k, g in grads.items():
        params[k] -= (lr * g).astype(params[k].dtype, copy=False)


def adam_init(params: Params) -> dict[str, Any]:
    """Adam state: first and second moments (zeros like each parameter) and the step count t = 0."""
    return {"m": {k: np.zeros_like(v) for k, v in params.items()},
            "v": {k: np.zeros_like(v) for k, v in params.items()}, "t": 0}


def adam_update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, t: int, lr: float,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """One Adam update of arrays in place, step t >= 1 (ZeRO calls this on its shard of the flat vector).

    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
    """
    b1, b2 = betas
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    step = lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    p -= step.astype(p.dtype, copy=False)


def adam_step(params: Params, grads: Params, state: dict[str, Any], lr: float = 1e-3,
              betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """Adam on every key in ``grads`` (in place); ``state['t']`` counts steps."""
    state["t"] += 1
    for k, g in grads.items():
        adam_update(params[k], g, state["m"][k], state["v"][k], state["t"], lr, betas, eps)
