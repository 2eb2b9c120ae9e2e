"""Chapter 16: tensor parallelism (Megatron-LM style) for the pre-LN block of ``model``, K ranks per layer.

Column-parallel linear: W = [W_0 | ... | W_{K-1}] split by output columns; the input x is replicated,
    y_r = x W_r + b_r needs no communication; backward dx = sum_r dy_r W_r^T needs an all-reduce.
Row-parallel linear: W split by input rows, the input arrives split by columns (x_r);
    y = sum_r x_r W_r + b needs an all-reduce; backward dx_r = dy W_r^T needs none.
Megatron MLP = column (W1, b1) -> GELU (elementwise, so it stays local) -> row (W2): one all-reduce of
B*T*d activations in forward and one in backward. Attention splits by heads the same way: Wq, Wk, Wv
by columns (rank r keeps heads ``np.array_split(range(A), K)[r]``), Wo by rows. A rank may own no heads
or no MLP columns (K > A or K > d_ff): its partial sums are zero.

The naive alternative keeps the same shards but all-gathers the full weights before every forward
(moving all 4 d^2 + 2 d d_ff weights instead of activations) and computes the dense block locally.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..collectives import all_gather, block_range, ring_allreduce
from .. import nn
from ..cluster import Comm

Params = nn.Params
COL = ("Wq", "Wk", "Wv", "W1", "b1")  # split along the last axis
ROW = ("Wo", "W2")                     # split along the first axis

__all__ = ["column_parallel_forward", "column_parallel_backward", "row_parallel_forward",
           "row_parallel_backward", "megatron_mlp_forward", "megatron_mlp_backward", "tp_attention_forward",
           "tp_attention_backward", "shard_block", "gather_block", "tp_block_forward", "tp_block_backward",
           "naive_tp_block_forward", "naive_tp_block_backward", "block_mse", "train_tp"]


def column_parallel_forward(W_c: np.ndarray, b_c: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """y_r = x W_r + b_r on replicated x: this rank's output columns, no communication."""
    return nn.linear_forward(W_c, b_c, x)


def column_parallel_backward(comm: Comm, W_c: np.ndarray, x: np.ndarray, dy_c: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx = all-reduce_r(dy_r W_r^T); dW_r, db_r stay local."""
    dx, dW, db = nn.linear_backward(W_c, x, dy_c)
    return ring_allreduce(comm, dx), dW, db


def row_parallel_forward(comm: Comm, W_r: np.ndarray, b: np.ndarray | None, x_r: np.ndarray) -> np.ndarray:
    """y = all-reduce_r(x_r W_r) + b (b replicated, added once after the sum)."""
    y = ring_allreduce(comm, x_r @ W_r)
    return y if b is None else y + b


def row_parallel_backward(W_r: np.ndarray, x_r: np.ndarray, dy: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dx_r = dy W_r^T, dW_r = x_r^T dy, db = sum dy (identical on every rank): no communication."""
    return nn.linear_backward(W_r, x_r, dy)


def megatron_mlp_forward(comm: Comm, p: Params, x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """y = all-reduce_r(GELU(x W1_r + b1_r) W2_r) + b2: exactly one all-reduce."""
    z = column_parallel_forward(p["W1"], p["b1"], x)
    f = nn.gelu(z)
    return row_parallel_forward(comm, p["W2"], p["b2"], f), (x, z, f)


def megatron_mlp_backward(comm: Comm, p: Params, cache: tuple, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """Backward of ``megatron_mlp_forward``: exactly one all-reduce (of dx)."""
    x, z, f = cache
    g: Params = {}
    df, g["W2"], g["b2"] = row_parallel_backward(p["W2"], f, dy)
    dx, g["W1"], g["b1"] = column_parallel_backward(comm, p["W1"], x, nn.gelu_backward(z, df))
    return dx, g


def tp_attention_forward(comm: Comm, p: Params, x: np.ndarray, n_local_heads: int) -> tuple[np.ndarray, tuple]:
    """Causal attention over this rank's heads, then all-reduce_r(o_r Wo_r): one all-reduce."""
    q, k, v = x @ p["Wq"], x @ p["Wk"], x @ p["Wv"]
    if n_local_heads == 0:  # more ranks than heads: contribute zeros to the sum
        o, att = q, None
    else:
        o, att = nn.causal_attention_forward(q, k, v, n_local_heads)
    return ring_allreduce(comm, o @ p["Wo"]), (x, o, att)


def tp_attention_backward(comm: Comm, p: Params, cache: tuple, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """Local head gradients, then all-reduce of dx (the column-parallel Wq/Wk/Wv input gradient)."""
    x, o, att = cache
    g: Params = {}
    do, g["Wo"], _ = nn.linear_backward(p["Wo"], o, dy)
    dq, dk, dv = (do, do, do) if att is None else nn.causal_attention_backward(att, do)
    dx = np.zeros_like(x)
    for name, d in (("Wq", dq), ("Wk", dk), ("Wv", dv)):
        ddx, g[name], _ = nn.linear_backward(p[name], x, d)
        dx += ddx
    return ring_allreduce(comm, dx), g


def _slices(n_heads: int, d_model: int, d_ff: int, K: int, r: int) -> tuple[slice, slice, int]:
    h0, h1 = block_range(n_heads, K, r)
    dh = d_model // n_heads
    return slice(h0 * dh, h1 * dh), slice(*block_range(d_ff, K, r)), h1 - h0


def shard_block(params: Params, n_heads: int, K: int, r: int) -> Params:
    """Rank r's tensor-parallel shard of ``block_init`` parameters; layer norms and b2 are replicated."""
    d_model, d_ff = params["W1"].shape
    heads, ff, _ = _slices(n_heads, d_model, d_ff, K, r)
    out = {}
    for k, v in params.items():
        s = ff if k in ("W1", "b1", "W2") else heads
        out[k] = (v[..., s] if k in COL else v[s] if k in ROW else v).copy()
    return out


def gather_block(comm: Comm, shard: Params) -> Params:
    """All-gather every sharded tensor back into the full block parameters (replicated ones as they are)."""
    out = dict(shard)
    for k in COL:
        out[k] = all_gather(comm, shard[k].T).T.copy()
    for k in ROW:
        out[k] = all_gather(comm, shard[k])
    return out


def tp_block_forward(comm: Comm, shard: Params, x: np.ndarray, n_heads: int) -> tuple[np.ndarray, tuple]:
    """The pre-LN block with Megatron attention and MLP: two all-reduces in forward."""
    _, _, n_local = _slices(n_heads, x.shape[-1], 1, comm.size, comm.rank)
    p = shard
    h1, ln1 = nn.layer_norm_forward(x, p["ln1_g"], p["ln1_b"])
    a, att = tp_attention_forward(comm, p, h1, n_local)
    x2 = x + a
    h2, ln2 = nn.layer_norm_forward(x2, p["ln2_g"], p["ln2_b"])
    m, mlp = megatron_mlp_forward(comm, p, h2)
    return x2 + m, (ln1, att, ln2, mlp)


def tp_block_backward(comm: Comm, shard: Params, cache: tuple, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """Backward of ``tp_block_forward``: two all-reduces; grads have the shard's shapes."""
    ln1, att, ln2, mlp = cache
    p = shard
    dh2, g = megatron_mlp_backward(comm, p, mlp, dy)
    dx2, g["ln2_g"], g["ln2_b"] = nn.layer_norm_backward(p["ln2_g"], ln2, dh2)
    dx2 = dx2 + dy
    dh1, ga = tp_attention_backward(comm, p, att, dx2)
    g.update(ga)
    dx, g["ln1_g"], g["ln1_b"] = nn.layer_norm_backward(p["ln1_g"], ln1, dh1)
    return dx + dx2, g


def naive_tp_block_forward(comm: Comm, shard: Params, x: np.ndarray, n_heads: int) -> tuple[np.ndarray, tuple]:
    """All-gather the full weights, then the dense block: weights move instead of activations."""
    full = gather_block(comm, shard)
    y, cache = nn.block_forward(full, x, n_heads)
    return y, (full, cache)


def naive_tp_block_backward(comm: Comm, shard: Params, cache: tuple, dy: np.ndarray, n_heads: int
                            ) -> tuple[np.ndarray, Params]:
    """Dense backward with the gathered weights; each rank keeps its shard of the gradients."""
    full, c = cache
    dx, g = nn.block_backward(full, c, dy, n_heads)
    return dx, shard_block(g, n_heads, comm.size, comm.rank)


def block_mse(params: Params, x: np.ndarray, y: np.ndarray, n_heads: int) -> tuple[float, Params]:
    """Single-device reference loss-and-gradient: MSE of ``block_forward`` (use with ddp.reference_train)."""
    out, cache = nn.block_forward(params, x, n_heads)
    loss, dy = nn.mse_loss(out, y)
    return loss, nn.block_backward(params, cache, dy, n_heads)[1]


def train_tp(comm: Comm, data: Sequence[tuple[np.ndarray, np.ndarray]], params0: Params, steps: int, lr: float,
             n_heads: int, optimizer: str = "sgd", naive: bool = False) -> tuple[Params, list[float]]:
    """Tensor-parallel training of one block on replicated batches; returns (gathered params, losses)."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer={optimizer!r} is not supported: choose 'sgd' or 'adam'")
    shard = shard_block(params0, n_heads, comm.size, comm.rank)
    state = nn.adam_init(shard) if optimizer == "adam" else None
    fwd = functools.partial(naive_tp_block_forward, n_heads=n_heads) if naive else \
        functools.partial(tp_block_forward, n_heads=n_heads)
    losses = []
    for s in range(steps):
        X, Y = data[s % len(data)]
        out, cache = fwd(comm, shard, X)
        loss, dy = nn.mse_loss(out, Y)
        _, g = (naive_tp_block_backward(comm, shard, cache, dy, n_heads) if naive
                else tp_block_backward(comm, shard, cache, dy))
        if state is None:
            nn.sgd_step(shard, g, lr)
        else:
            nn.adam_step(shard, g, state, lr)
        losses.append(loss)
    return gather_block(comm, shard), losses
