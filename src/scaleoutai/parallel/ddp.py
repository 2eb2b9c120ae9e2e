"""Chapter 15: data parallelism (DDP) from scratch: every rank holds the whole model and a shard of the batch.

Global batch B = K * b * accum: K ranks, b samples per micro-batch, ``accum`` micro-batches per step.
Each rank splits its ``np.array_split`` shard of the global batch into ``accum`` micro-batches and adds
(n_m / B) * grad(mean loss on micro-batch m); summing these over ranks gives exactly the full-batch
gradient of a mean loss, also for uneven shards and empty ones (K > B).

Two ways to sum gradients over ranks (ring all-reduce, ``collectives.ring_allreduce``):
    naive_ddp_step     one all-reduce per tensor: T tensors cost T * 2(K-1) alpha in latency
    bucketed_ddp_step  tensors packed into ~bucket_bytes buckets in reverse registration order (the order
                       backward produces them, so a real DDP overlaps bucket i with the rest of backward)
Frozen parameters are neither communicated nor updated; tied weights (two keys holding the same array)
have their gradients summed once locally and are communicated and updated once.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..collectives import ring_allreduce
from .. import nn
from ..cluster import Comm

Params = nn.Params
LossGrad = Callable[[Params, np.ndarray, np.ndarray], tuple[float, Params]]

__all__ = ["mlp_mse", "param_groups", "combine_tied", "copy_params", "local_gradient", "make_buckets",
           "naive_ddp_step", "bucketed_ddp_step", "train_ddp", "reference_train"]


def mlp_mse(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
    """Default loss-and-gradient: MSE of the MLP in ``model``."""
    out, cache = nn.mlp_forward(params, x)
    loss, dy = nn.mse_loss(out, y)
    return loss, nn.mlp_backward(params, cache, dy)[1]


def param_groups(params: Params, frozen: Iterable[str] = ()) -> dict[str, list[str]]:
    """Trainable arrays: {canonical key (first in insertion order): all keys holding that same array}."""
    frozen = set(frozen)
    unknown = frozen - set(params)
    if unknown:
        raise ValueError(f"frozen names {sorted(unknown)} are not parameters: choose from {sorted(params)}")
    by_id: dict[int, list[str]] = {}
    for k, v in params.items():
        by_id.setdefault(id(v), []).append(k)
    groups = {}
    for keys in by_id.values():
        fz = [k for k in keys if k in frozen]
        if fz and len(fz) != len(keys):
            raise ValueError(f"tied parameters {keys} must be frozen together, got frozen={fz}")
        if not fz:
            groups[keys[0]] = keys
    return groups


def combine_tied(grads: Params, groups: dict[str, list[str]]) -> Params:
    """One gradient per trainable array: the sum over the keys tying it (frozen keys dropped)."""
    out = {}
    for k, keys in groups.items():
        g = grads[keys[0]].copy()
        for other in keys[1:]:
            g += grads[other]
        out[k] = g
    return out


def copy_params(params: Params) -> Params:
    """Deep copy that keeps ties: keys sharing one array share one copy."""
    memo: dict[int, np.ndarray] = {}
    return {k: memo.setdefault(id(v), v.copy()) for k, v in params.items()}


def local_gradient(params: Params, x: np.ndarray, y: np.ndarray, B: int, accum: int = 1,
                   loss_grad: LossGrad = mlp_mse) -> tuple[float, Params]:
    """sum over micro-batches m of (n_m / B) * (loss_m, grad_m); zeros when this shard is empty."""
    loss, acc = 0.0, {k: np.zeros_like(v) for k, v in params.items()}
    for xm, ym in zip(np.array_split(x, accum), np.array_split(y, accum)):
        if len(xm) == 0:
            continue
        lm, gm = loss_grad(params, xm, ym)
        w = len(xm) / B
        loss += w * lm
        for k in acc:
            acc[k] += (w * gm[k]).astype(acc[k].dtype, copy=False)
    return loss, acc


def make_buckets(grads: Params, bucket_bytes: int) -> list[list[str]]:
    """Keys in reverse order, packed greedily: a bucket closes once it holds >= bucket_bytes."""
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    buckets, cur, size = [], [], 0
    for k in reversed(list(grads)):
        cur.append(k)
        size += grads[k].nbytes
        if size >= bucket_bytes:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)
    return buckets


def naive_ddp_step(comm: Comm, grads: Params) -> Params:
    """Sum every gradient tensor over ranks with its own ring all-reduce (one collective per tensor)."""
    return {k: ring_allreduce(comm, g) for k, g in grads.items()}


def bucketed_ddp_step(comm: Comm, grads: Params, bucket_bytes: int) -> Params:
    """Sum gradients over ranks with one ring all-reduce per bucket of flattened tensors."""
    out = {}
    for keys in make_buckets(grads, bucket_bytes):
        flat = ring_allreduce(comm, np.concatenate([grads[k].ravel() for k in keys]))
        off = 0
        for k in keys:
            n = grads[k].size
            out[k] = flat[off:off + n].reshape(grads[k].shape)
            off += n
    return {k: out[k] for k in grads}


def _apply(params: Params, grads: Params, optimizer: str, state: Any, lr: float) -> None:
    if optimizer == "sgd":
        nn.sgd_step(params, grads, lr)
    else:
        nn.adam_step(params, grads, state, lr)


def _check(optimizer: str, steps: int, accum: int) -> None:
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer={optimizer!r} is not supported: choose 'sgd' or 'adam'")
    if steps < 0 or accum < 1:
        raise ValueError(f"need steps >= 0 and accum >= 1, got steps={steps}, accum={accum}")


def train_ddp(comm: Comm, data: Sequence[tuple[np.ndarray, np.ndarray]], params0: Params, steps: int,
              lr: float, bucket_bytes: int | None = None, accum: int = 1, optimizer: str = "sgd",
              frozen: Iterable[str] = (), loss_grad: LossGrad = mlp_mse) -> tuple[Params, list[float]]:
    """Run ``steps`` DDP steps; step s uses global batch ``data[s % len(data)]`` = (X, Y).

    ``bucket_bytes=None`` uses the naive per-tensor all-reduce. Returns (params, losses) where losses[s] is
    this rank's share of the step-s loss: summed over ranks it is the global-batch loss.
    """
    _check(optimizer, steps, accum)
    params = copy_params(params0)
    groups = param_groups(params, frozen)
    state = nn.adam_init({k: params[k] for k in groups}) if optimizer == "adam" else None
    losses = []
    for s in range(steps):
        X, Y = data[s % len(data)]
        B = len(X)
        x, y = np.array_split(X, comm.size)[comm.rank], np.array_split(Y, comm.size)[comm.rank]
        loss, g = local_gradient(params, x, y, B, accum, loss_grad)
        g = combine_tied(g, groups)
        g = naive_ddp_step(comm, g) if bucket_bytes is None else bucketed_ddp_step(comm, g, bucket_bytes)
        _apply(params, g, optimizer, state, lr)
        losses.append(loss)
    return params, losses


def reference_train(data: Sequence[tuple[np.ndarray, np.ndarray]], params0: Params, steps: int, lr: float,
                    optimizer: str = "sgd", frozen: Iterable[str] = (), loss_grad: LossGrad = mlp_mse
                    ) -> tuple[Params, list[float]]:
    """Single-device reference: full-batch gradient, tied gradients summed, frozen keys left alone."""
    _check(optimizer, steps, 1)
    params = copy_params(params0)
    groups = param_groups(params, frozen)
    state = nn.adam_init({k: params[k] for k in groups}) if optimizer == "adam" else None
    losses = []
    for s in range(steps):
        X, Y = data[s % len(data)]
        loss, g = loss_grad(params, X, Y)
        _apply(params, combine_tied(g, groups), optimizer, state, lr)
        losses.append(loss)
    return params, losses
