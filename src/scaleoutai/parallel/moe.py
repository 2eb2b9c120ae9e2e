"""Chapter 17: expert parallelism (EP), the mixture-of-experts layer split over ranks, gradients by hand.

The layer itself (router, top-k gating, capacity C = ceil(C_f * k * T / E), GShard slot order, drops,
the Switch load-balancing loss) is ``moe_dense``, re-exported here.

Expert parallelism (EP): experts are split over K ranks in contiguous blocks (``np.array_split``, uneven
when K does not divide E); every rank holds a shard of the tokens and a replica of the router. Slot
positions are global (the token order is the concatenation of the shards by rank), so the EP layer
equals ``moe_forward_dense`` on the whole batch, drops included. Dispatch and combine are two
``collectives.all_to_all`` calls each way (token rows, then their (expert, slot) tags).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..collectives import all_gather, all_to_all, ring_allreduce
from ..nn import mlp_backward, mlp_forward
from .moe_dense import (_route, _router, _router_backward, _slots, _stats, capacity, expert_owners,  # noqa: F401
                        moe_backward_dense, moe_forward_dense, moe_init, shard_experts, softmax, tokens_dropped)
from ..cluster import Comm

__all__ = ["moe_init", "capacity", "expert_owners", "shard_experts", "softmax", "moe_forward_dense",
           "moe_backward_dense", "moe_forward_ep", "moe_backward_ep", "tokens_dropped"]


def moe_forward_ep(comm: Comm, shard: dict[str, Any], x: np.ndarray, E: int, k: int = 1,
                   capacity_factor: float = 1.25) -> tuple[np.ndarray, dict[str, Any]]:
    """Expert-parallel MoE on this rank's tokens x (T_r, d); ``shard`` from ``shard_experts``.

    All-gather the (k, E) routing counts (global slots and capacity), all-to-all the kept token rows to
    the experts' owners (dispatch), run local experts, all-to-all the outputs back (combine).
    """
    K = comm.size
    owner = expert_owners(E, K)
    P, top, counts = _router(shard, x, k)
    counts_all = all_gather(comm, counts.reshape(1, -1)).reshape(K, k, E)
    P_sum = np.sum(all_gather(comm, P.sum(axis=0, keepdims=True)), axis=0)
    r = _route(k, counts_all, comm.rank, capacity_factor, P_sum)
    pos = _slots(top, r["base"])
    keep = pos < r["capacity"]
    gate = np.take_along_axis(P, top, axis=1)
    # what this rank sends to rank j: its kept assignments whose expert lives on j, in (token, choice) order
    sel = [np.nonzero(keep & (owner[top] == j)) for j in range(K)]
    rows = all_to_all(comm, [x[t] for t, _ in sel])
    tags = all_to_all(comm, [np.stack([top[t, c], pos[t, c]], axis=1) for t, c in sel])
    caches, outs = {}, {}
    for e, params_e in shard["experts"].items():
        xe = np.empty((int(r["load"][e]), x.shape[1]), dtype=x.dtype)
        for rw, tg in zip(rows, tags):
            m = tg[:, 0] == e
            xe[tg[m, 1]] = rw[m]
        outs[e], caches[e] = mlp_forward(params_e, xe)
    back = all_to_all(comm, [_gather_rows(outs, tg, x) for tg in tags])
    y = np.zeros_like(x)
    for (t, c), out in zip(sel, back):
        np.add.at(y, t, gate[t, c][:, None] * out)  # with k > 1 a token may get two rows from one rank
    return y, {"x": x, "P": P, "top": top, "pos": pos, "keep": keep, "gate": gate, "route": r, "sel": sel,
               "tags": tags, "back": back, "caches": caches, "outs": outs, "stats": _stats(r)}


def _gather_rows(outs: dict[int, np.ndarray], tags: np.ndarray, like: np.ndarray) -> np.ndarray:
    res = np.empty((len(tags), like.shape[1]), dtype=like.dtype)
    for e in np.unique(tags[:, 0]):
        m = tags[:, 0] == e
        res[m] = outs[int(e)][tags[m, 1]]
    return res


def moe_backward_ep(comm: Comm, shard: dict[str, Any], cache: dict[str, Any], dy: np.ndarray,
                    aux_coef: float = 0.0, reduce_router: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """Backward of ``moe_forward_ep``: dy rows go to the owners, input gradients come back (all-to-all).

    Expert grads are complete on their owner ({e: Params}); router grads are this rank's share, summed
    over ranks with a ring all-reduce when ``reduce_router`` (the router is data-parallel).
    """
    c = cache
    gate = c["gate"]
    dgate = np.zeros_like(gate)
    for (t, ch), out in zip(c["sel"], c["back"]):
        dgate[t, ch] = np.sum(dy[t] * out, axis=1)
    drows = all_to_all(comm, [gate[t, ch][:, None] * dy[t] for t, ch in c["sel"]])
    expert_grads, dxe = {}, {}
    for e, params_e in shard["experts"].items():
        dye = np.empty_like(c["outs"][e])
        for dr, tg in zip(drows, c["tags"]):
            m = tg[:, 0] == e
            dye[tg[m, 1]] = dr[m]
        dxe[e], expert_grads[e] = mlp_backward(params_e, c["caches"][e], dye)
    dback = all_to_all(comm, [_gather_rows(dxe, tg, dy) for tg in c["tags"]])
    dx = np.zeros_like(c["x"])
    for (t, _), d in zip(c["sel"], dback):
        np.add.at(dx, t, d)  # with k > 1 a token may send two rows to one rank
    dxr, dWg, dbg = _router_backward(shard, c, dgate, aux_coef)
    if reduce_router:
        flat = ring_allreduce(comm, np.concatenate([dWg.ravel(), dbg]))
        dWg, dbg = flat[:dWg.size].reshape(dWg.shape), flat[dWg.size:]
    return dx + dxr, {"Wg": dWg, "bg": dbg, "experts": expert_grads}
