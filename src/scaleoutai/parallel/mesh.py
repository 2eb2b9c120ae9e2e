"""Chapter 19: foundation-model training: a (dp, tp, pp) device mesh, its memory and its traffic.

The mesh and its sub-communicators are the shared ``cluster.groups`` (``DeviceMesh``, ``SubComm``): every
Chapter 4 collective and Chapter 15-16 function runs on a mesh sub-group unchanged.

Composed step (``train_mesh``): the model is a stack of L pre-LN transformer blocks (``nn.block_*``).
Pipeline stage p owns ``pipeline.split_layers(L, pp)[p]``; within a stage every block is split
Megatron-style over the tp group (``tensor.tp_block_*``: 2 all-reduces forward, 2 backward); dp replica
d trains on ``np.array_split(X, dp)[d]`` cut into m micro-batches (GPipe or 1F1B order), and the
gradient shards are summed over the dp group by ``ddp.bucketed_ddp_step``.

Memory (bytes per device, Psi parameters, mixed-precision Adam: 2 Psi + 2 Psi + 12 Psi):
    params 2 Psi / (tp pp) [/ dp at ZeRO-3], grads 2 Psi / (tp pp) [/ dp at ZeRO >= 2],
    optimizer 12 Psi / (tp pp) [/ dp at ZeRO >= 1],
    activations per layer (Korthikanti et al. 2022, 16-bit, no recompute):
        s b h (34 + 5 a s / h) / tp                  with sequence parallelism
        s b h (10 + 24 / tp + 5 a s / (h tp))        without it;      2 s b h [/ tp] with full recompute;
    selective recomputation (or FlashAttention) drops the 5 a s / h term of the attention scores,
    times L / pp layers times the micro-batches in flight on stage 0 (1F1B: pp of them).
Traffic (bytes sent per device per step): DP ring all-reduce 2 (dp-1)/dp * 2 Psi / (tp pp); TP
4 all-reduces per layer per micro-batch of s b h * 2 bytes, each 2 (tp-1)/tp of it; PP one activation
forward and one gradient backward per micro-batch, s b h * 2 bytes each (an interior stage).
Scaling laws and MFU: ``perf.scaling``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import cluster, nn
from ..cluster import Comm
from ..cluster.groups import AXES, DeviceMesh, SubComm
from . import ddp
from .ddp import bucketed_ddp_step
from .pipeline import SCHEDULES, split_layers
from .tensor import gather_block, shard_block, tp_block_backward, tp_block_forward

MESH_SCHEDULES = ("gpipe", "1f1b")

__all__ = ["stack_init", "layer_params", "stack_mse", "reference_train",
           "train_mesh", "MeshResult", "run_mesh", "memory_per_device", "comm_per_step"]

# --- the model: a stack of transformer blocks in one Params dict ----------------------------------

def stack_init(n_layers: int, d_model: int, n_heads: int, d_ff: int, seed: int = 0, dtype: Any = np.float64
               ) -> nn.Params:
    """Keys "l.name" for layer l of L ``model.block_init`` blocks (seed + l)."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return {f"{l}.{k}": v for l in range(n_layers)
            for k, v in nn.block_init(d_model, n_heads, d_ff, seed + l, dtype).items()}


def layer_params(params: nn.Params, l: int) -> nn.Params:
    """The block parameters of layer l, keys without the "l." prefix."""
    pre = f"{l}."
    return {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}


def _n_stack(params: nn.Params) -> int:
    return 1 + max(int(k.split(".", 1)[0]) for k in params)


def stack_mse(params: nn.Params, x: np.ndarray, y: np.ndarray, n_heads: int) -> tuple[float, nn.Params]:
    """Single-device loss-and-gradient: MSE of the L chained ``block_forward`` calls."""
    L, h, caches = _n_stack(params), x, []
    for l in range(L):
        h, c = nn.block_forward(layer_params(params, l), h, n_heads)
        caches.append(c)
    loss, d = nn.mse_loss(h, y)
    grads = {}
    for l in reversed(range(L)):
        d, g = nn.block_backward(layer_params(params, l), caches[l], d, n_heads)
        grads.update({f"{l}.{k}": v for k, v in g.items()})
    return loss, grads


def reference_train(data: Sequence[tuple[np.ndarray, np.ndarray]], params0: nn.Params, steps: int, lr: float,
                    n_heads: int, optimizer: str = "sgd") -> tuple[nn.Params, list[float]]:
    """The single-device reference for ``train_mesh`` (``ddp.reference_train`` with ``stack_mse``)."""
    return ddp.reference_train(data, params0, steps, lr, optimizer, loss_grad=lambda p, x, y: stack_mse(p, x, y, n_heads))


# --- the composed DP x TP x PP training step -------------------------------------------------------

def _stage(comm: dict[str, SubComm], shards: dict[int, nn.Params], mb: list, B: int, n_heads: int,
           schedule: str, compute: tuple[float, float]) -> tuple[float, nn.Params]:
    tp, pp = comm["tp"], comm["pp"]
    s, P, m = pp.rank, pp.size, len(mb)
    layers = sorted(shards)
    stash: dict[int, Any] = {}
    loss, grads = 0.0, {}
    for kind, i in SCHEDULES[schedule](P, m, s):
        if kind == "F":
            h = mb[i][0] if s == 0 else pp.recv(s - 1)
            caches = []
            for l in layers:
                h, c = tp_block_forward(tp, shards[l], h, n_heads)
                caches.append(c)
                tp.compute(compute[0])
            dy = None
            if s == P - 1:
                li, dy = nn.mse_loss(h, mb[i][1])
                w = len(mb[i][0]) / B  # micro-batch mean -> global-batch mean
                loss, dy = loss + w * li, dy * w
            else:
                pp.send(h, s + 1)
            stash[i] = (caches, dy)
        else:
            caches, dy = stash.pop(i)
            if s < P - 1:
                dy = pp.recv(s + 1)
            for l, c in zip(reversed(layers), reversed(caches)):
                dy, g = tp_block_backward(tp, shards[l], c, dy)
                tp.compute(compute[1])
                for k, v in g.items():
                    key = f"{l}.{k}"
                    grads[key] = grads[key] + v if key in grads else v
            if s > 0:
                pp.send(dy, s - 1)
    return loss, grads


def train_mesh(comm: Comm, mesh: DeviceMesh, data: Sequence[tuple[np.ndarray, np.ndarray]], params0: nn.Params,
               steps: int, lr: float, n_heads: int, micro_batches: int = 1, schedule: str = "1f1b",
               optimizer: str = "sgd", bucket_bytes: int = 1 << 20, compute: tuple[float, float] = (0.0, 0.0)
               ) -> dict[str, Any]:
    """Rank ``comm.rank`` of a DP x TP x PP run of ``steps`` steps on global batches ``data[s % len(data)]``.

    Returns {"layers": {l: full block params (gathered over tp)}, "losses": loss shares (nonzero on the
    last stage), "bytes": {axis or "total": bytes sent during training}, "held": bytes of params/grads/optimizer}.
    """
    if comm.size != mesh.size:
        raise ValueError(f"{mesh!r} needs {mesh.size} ranks, the run has {comm.size}")
    if optimizer not in ("sgd", "adam") or schedule not in MESH_SCHEDULES:
        raise ValueError(f"optimizer must be 'sgd' or 'adam' and schedule one of {MESH_SCHEDULES} (the mesh "
                         f"runs one model chunk per stage), got {optimizer!r}, {schedule!r}")
    sub = {a: SubComm(comm, mesh.group(comm.rank, a)) for a in AXES}
    d, t, p = mesh.coords(comm.rank)
    mine = split_layers(_n_stack(params0), mesh.pp)[p]
    shards = {l: shard_block(layer_params(params0, l), n_heads, mesh.tp, t) for l in mine}
    flat = {f"{l}.{k}": v for l in mine for k, v in shards[l].items()}  # views into shards: updated in place
    state = nn.adam_init(flat) if optimizer == "adam" else None
    losses, grads = [], {}
    for s in range(steps):
        X, Y = data[s % len(data)]
        x, y = np.array_split(X, mesh.dp)[d], np.array_split(Y, mesh.dp)[d]
        if len(x) < micro_batches:
            raise ValueError(f"dp replica {d} has {len(x)} samples for {micro_batches} micro-batches: "
                             f"use a global batch >= dp * micro_batches")
        mb = list(zip(np.array_split(x, micro_batches), np.array_split(y, micro_batches)))
        loss, g = _stage(sub, shards, mb, len(X), n_heads, schedule, compute)
        grads = bucketed_ddp_step(sub["dp"], {k: g[k] for k in flat}, bucket_bytes)
        if state is None:
            nn.sgd_step(flat, grads, lr)
        else:
            nn.adam_step(flat, grads, state, lr)
        losses.append(loss)
    sent = {a: sub[a].stats.bytes_sent for a in AXES}
    sent["total"] = comm.stats.bytes_sent  # everything this rank sent so far, whichever group it was for
    held = {"params": sum(v.nbytes for v in flat.values()), "grads": sum(v.nbytes for v in grads.values()),
            "optimizer": 0 if state is None else sum(v.nbytes for k in "mv" for v in state[k].values())}
    return {"layers": {l: gather_block(sub["tp"], shards[l]) for l in mine}, "losses": losses, "bytes": sent,
            "held": held, "coords": (d, t, p)}


@dataclass
class MeshResult:
    """A finished mesh run: the full parameters, global losses per step and the per-rank outputs."""

    mesh: DeviceMesh
    params: nn.Params
    losses: list[float]
    values: list[dict[str, Any]]
    run: Any = field(default=None, repr=False)


def run_mesh(mesh: DeviceMesh, data: Sequence[tuple[np.ndarray, np.ndarray]], params0: nn.Params, steps: int,
             lr: float, n_heads: int, network: cluster.Network | None = None, timeout: float = 120.0,
             **kwargs: Any) -> MeshResult:
    """``cluster.run(train_mesh, mesh.size)`` on the simulator; merges the stages' layers and the dp losses."""
    res = cluster.run(train_mesh, mesh.size, args=(mesh, data, params0, steps, lr, n_heads), kwargs=kwargs,
                      network=network, timeout=timeout)
    params: nn.Params = {}
    for v in res.values:
        if v["coords"][:2] == (0, 0):
            params.update({f"{l}.{k}": a for l, blk in v["layers"].items() for k, a in blk.items()})
    last = [v["losses"] for v in res.values if v["coords"][1:] == (0, mesh.pp - 1)]
    return MeshResult(mesh, params, [float(v) for v in np.sum(last, axis=0)] if steps else [], res.values, res)


# --- models of memory and traffic per device -------------------------------------------------------

def memory_per_device(psi: float, layers: int, hidden: int, seq: int, batch: int, heads: int, dp: int = 1,
                      tp: int = 1, pp: int = 1, zero_stage: int = 0,
                      bytes_per: tuple[float, float, float] = (2, 2, 12), sequence_parallel: bool = True,
                      recompute: str = "none", in_flight: int | None = None) -> dict[str, float]:
    """Bytes on the busiest device (pipeline stage 0): params, grads, optimizer, activations, total.

    ``batch`` is the micro-batch size b; ``in_flight`` the micro-batches stage 0 stashes (default pp, 1F1B).
    ``recompute``: "none"; "selective" drops the 5 a s / h attention-score term (recomputed, or never
    stored by FlashAttention); "full" keeps only each layer's 2 s b h input.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    if min(dp, tp, pp, layers, hidden, seq, batch, heads) < 1 or psi < 0:
        raise ValueError("memory_per_device needs psi >= 0 and positive sizes and degrees")
    shard = psi / (tp * pp)
    p, g, o = bytes_per
    out = {"params": p * shard / (dp if zero_stage >= 3 else 1), "grads": g * shard / (dp if zero_stage >= 2 else 1),
           "optimizer": o * shard / (dp if zero_stage >= 1 else 1)}
    sbh = seq * batch * hidden
    scores = 0.0 if recompute == "selective" else 5 * heads * seq / hidden
    if recompute == "full":
        per_layer = 2 * sbh / (tp if sequence_parallel else 1)
    elif sequence_parallel:
        per_layer = sbh * (34 + scores) / tp
    else:
        per_layer = sbh * (10 + 24 / tp + scores / tp)
    out["activations"] = per_layer * (layers / pp) * (pp if in_flight is None else in_flight)
    out["total"] = sum(out.values())
    return out


def comm_per_step(psi: float, layers: int, hidden: int, seq: int, batch: int, micro_batches: int = 1,
                  dp: int = 1, tp: int = 1, pp: int = 1, grad_bytes: float = 2, act_bytes: float = 2
                  ) -> dict[str, float]:
    """Bytes one device sends per step along each axis (ring all-reduces; an interior pipeline stage)."""
    act = batch * seq * hidden * act_bytes
    out = {"dp": 2 * (dp - 1) / dp * grad_bytes * psi / (tp * pp),
           "tp": 4 * (layers / pp) * micro_batches * 2 * (tp - 1) / tp * act,
           "pp": 2 * micro_batches * act if pp > 1 else 0.0}
    out["total"] = sum(out.values())
    return out
