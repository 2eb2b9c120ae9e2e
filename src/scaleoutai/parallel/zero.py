"""Chapter 16: ZeRO (stages 1-3) with Adam over reduce-scatter and all-gather of the flat parameter vector.

All trainable parameters form one flat vector of Psi elements (``model.flatten``, sorted keys; tied arrays
once, frozen ones outside). Rank r owns block r of ``np.array_split(range(Psi), K)``, the block
``collectives.reduce_scatter`` hands it. Per step:

    stage 0  plain DDP: all-reduce gradients, every rank runs Adam on all Psi elements
    stage 1  all-reduce gradients, Adam only on my block (optimizer state sharded), all-gather parameters
    stage 2  reduce-scatter gradients (gradients sharded too), Adam on my block, all-gather parameters
    stage 3  parameters sharded too: all-gather them before forward/backward and free them after;
             reduce-scatter gradients, Adam on my block, keep only my block

Memory per rank under mixed-precision Adam (``mixed=True``): fp16 parameters 2 Psi, fp16 gradients
2 Psi, fp32 master copy + m + v 12 Psi bytes, each divided by K once its stage shards it. Here fp16 is
``np.float16`` (bf16 has the same 2 bytes). With ``mixed=False`` the parameters are the master copy and
bytes are (s, s, 2s) for itemsize s. ``held_bytes`` counts the arrays a rank's state keeps between
steps; transient buffers (the gathered stage-3 vector, the local gradient before reduce-scatter, which a
bucketed implementation frees bucket by bucket) and activations are outside the model.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..collectives import all_gather, block_range, reduce_scatter, ring_allreduce
from .. import nn
from .ddp import LossGrad, combine_tied, copy_params, local_gradient, mlp_mse, param_groups
from ..cluster import Comm

__all__ = ["memory_model", "held_bytes", "zero_init", "zero_step", "zero_full_params",
           "train_zero"]

Params = nn.Params
MIXED_BYTES = (2, 2, 12)


def memory_model(psi: int, K: int, stage: int, bytes_per: tuple[float, float, float] = MIXED_BYTES,
                 rank: int | None = None) -> dict[str, float]:
    """Bytes per rank for (params, grads, optimizer): (2 Psi, 2 Psi, 12 Psi), sharded over K by stage.

    stage 1 divides the optimizer term by K, stage 2 also the gradients, stage 3 also the parameters.
    With ``rank`` the shard is that rank's exact ``np.array_split`` block instead of Psi / K.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if K < 1 or psi < 0:
        raise ValueError(f"need K >= 1 and psi >= 0, got K={K}, psi={psi}")
    if rank is None:
        shard = psi / K
    else:
        lo, hi = block_range(psi, K, rank)
        shard = float(hi - lo)
    p, g, o = bytes_per
    out = {"params": p * (shard if stage >= 3 else psi), "grads": g * (shard if stage >= 2 else psi),
           "optimizer": o * (shard if stage >= 1 else psi)}
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


def held_bytes(state: dict[str, Any]) -> dict[str, int]:
    """Bytes of the arrays a rank's ZeRO state holds: params, grads, optimizer (master + m + v)."""
    out = {"params": state["params"].nbytes, "grads": state["grads"].nbytes,
           "optimizer": sum(state[k].nbytes for k in ("master", "m", "v") if k in state)}
    out["total"] = out["params"] + out["grads"] + out["optimizer"]
    return out


def zero_init(comm: Comm, params0: Params, stage: int, mixed: bool = False, frozen: Iterable[str] = ()
              ) -> dict[str, Any]:
    """Every rank builds the same flat vector and keeps what its stage says it owns."""
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    params0 = copy_params(params0)
    groups = param_groups(params0, frozen)
    like = {k: params0[k] for k in groups}
    vec = nn.flatten(like)
    lo, hi = block_range(vec.size, comm.size, comm.rank) if stage >= 1 else (0, vec.size)
    owned = vec[lo:hi].copy()
    pdtype = np.float16 if mixed else vec.dtype
    st = {"stage": stage, "mixed": mixed, "groups": groups, "like": like, "lo": lo, "hi": hi, "t": 0,
          "frozen": {k: v.astype(pdtype) for k, v in params0.items() if not any(k in g for g in groups.values())},
          "params": (owned if stage == 3 else vec).astype(pdtype), "grads": np.zeros(0, pdtype),
          "m": np.zeros(owned.shape, np.float32 if mixed else vec.dtype)}
    st["v"] = np.zeros_like(st["m"])
    if mixed:
        st["master"] = owned.astype(np.float32)
    return st


def _full_vector(comm: Comm, st: dict[str, Any]) -> np.ndarray:
    return all_gather(comm, st["params"]) if st["stage"] == 3 else st["params"]


def _as_params(st: dict[str, Any], vec: np.ndarray) -> Params:
    params = nn.unflatten(vec, st["like"])
    for k, keys in st["groups"].items():
        for other in keys[1:]:
            params[other] = params[k]
    params.update(st["frozen"])
    return params


def zero_step(comm: Comm, st: dict[str, Any], x: np.ndarray, y: np.ndarray, B: int, lr: float,
              betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, accum: int = 1,
              loss_grad: LossGrad = mlp_mse) -> float:
    """One ZeRO Adam step on this rank's shard (x, y) of a global batch of B samples; returns its loss share."""
    stage, lo, hi = st["stage"], st["lo"], st["hi"]
    full = _full_vector(comm, st)  # stage 3: gathered here, dropped when this function returns
    loss, g = local_gradient(_as_params(st, full), x, y, B, accum, loss_grad)
    gflat = nn.flatten(combine_tied(g, st["groups"]))  # sorted canonical keys: the vector's order
    del full, g
    if stage <= 1:
        st["grads"] = ring_allreduce(comm, gflat)
        mine = st["grads"][lo:hi]
    else:
        st["grads"] = mine = reduce_scatter(comm, gflat)
    st["t"] += 1
    if st["mixed"]:
        nn.adam_update(st["master"], mine.astype(np.float32), st["m"], st["v"], st["t"], lr, betas, eps)
        new = st["master"].astype(np.float16)
    else:
        new = st["params"][lo:hi] if stage <= 2 else st["params"]
        nn.adam_update(new, mine, st["m"], st["v"], st["t"], lr, betas, eps)  # in place (a view for 0-2)
    if stage == 0:
        st["params"] = new
    elif stage in (1, 2):
        st["params"] = all_gather(comm, new)
    else:
        st["params"] = new
    return loss


def zero_full_params(comm: Comm, st: dict[str, Any]) -> Params:
    """All-gather the (master) parameters into a full ``Params`` dict, ties and frozen keys restored."""
    if st["mixed"]:
        mine = st["master"]
    else:
        mine = st["params"] if st["stage"] == 3 else st["params"][st["lo"]:st["hi"]]
    vec = mine if st["stage"] == 0 else all_gather(comm, mine)
    return _as_params(st, vec)


def train_zero(comm: Comm, data: Sequence[tuple[np.ndarray, np.ndarray]], params0: Params, steps: int,
               lr: float, stage: int, mixed: bool = False, accum: int = 1,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, frozen: Iterable[str] = (),
               loss_grad: LossGrad = mlp_mse) -> dict[str, Any]:
    """ZeRO-``stage`` Adam for ``steps`` steps on global batches ``data[s % len(data)]``.

    Returns {"params": full parameters, "losses": this rank's loss shares, "held": held_bytes, "psi": Psi}.
    """
    st = zero_init(comm, params0, stage, mixed, frozen)
    losses = []
    for s in range(steps):
        X, Y = data[s % len(data)]
        x, y = np.array_split(X, comm.size)[comm.rank], np.array_split(Y, comm.size)[comm.rank]
        losses.append(zero_step(comm, st, x, y, len(X), lr, betas, eps, accum, loss_grad))
    held = held_bytes(st)
    return {"params": zero_full_params(comm, st), "losses": losses, "held": held,
            "psi": sum(v.size for v in st["like"].values())}

