"""Chapter 17: the mixture-of-experts layer on one machine (the reference), router and capacity.

Router: logits = x W_g + b_g, probabilities P = softmax(logits) over E experts; each token picks its top-k
experts (ties: lower index) with gate g = P[t, e]. Capacity per expert C = ceil(C_f * k * T / E); slots
are filled in a fixed priority, all first choices before all second choices and, within one choice,
in token order (GShard). An assignment beyond C is dropped: it contributes nothing to the output (a
residual around the MoE layer, outside this module, carries such a token). Output
y_t = sum over kept (t, e) of g[t, e] * Expert_e(x_t), each expert an MLP from ``model``.

Load-balancing loss (Switch): L_aux = E * sum_i f_i P_i, f_i = share of the T*k assignments routed to
expert i (before drops, not differentiated), P_i = mean router probability of expert i over the T tokens.
Expert parallelism over ranks is ``moe``; this module holds no communication, so a lab can let students
use it while the distributed layer stays theirs to write.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..nn import linear_backward, linear_forward, mlp_backward, mlp_forward, mlp_init

__all__ = ["moe_init", "capacity", "expert_owners", "shard_experts", "softmax", "moe_forward_dense",
           "moe_backward_dense", "tokens_dropped"]


def moe_init(d: int, hidden: int, E: int, seed: int = 0, dtype: Any = np.float64) -> dict[str, Any]:
    """Router W_g (d, E), b_g (E,) and E expert MLPs d -> hidden -> d (seeds seed+1 .. seed+E)."""
    if E < 1:
        raise ValueError(f"E (number of experts) must be >= 1, got {E}")
    rng = np.random.default_rng(seed)
    return {"Wg": (rng.standard_normal((d, E)) / np.sqrt(d)).astype(dtype), "bg": np.zeros(E, dtype=dtype),
            "experts": [mlp_init([d, hidden, d], seed=seed + 1 + e, dtype=dtype) for e in range(E)]}


def capacity(tokens: int, E: int, k: int, capacity_factor: float) -> int:
    """C = ceil(C_f * k * T / E) slots per expert."""
    if not capacity_factor > 0:
        raise ValueError(f"capacity_factor must be > 0, got {capacity_factor}")
    return int(math.ceil(capacity_factor * k * tokens / E))


def expert_owners(E: int, K: int) -> np.ndarray:
    """owner[e] = the rank that holds expert e: contiguous blocks of ``np.array_split(range(E), K)``."""
    owner = np.empty(E, dtype=np.int64)
    for r, block in enumerate(np.array_split(np.arange(E), K)):
        owner[block] = r
    return owner


def shard_experts(params: dict[str, Any], K: int, rank: int) -> dict[str, Any]:
    """The part of the MoE parameters rank ``rank`` of K holds: the router and its own experts {e: Params}."""
    owner = expert_owners(len(params["experts"]), K)
    return {"Wg": params["Wg"], "bg": params["bg"],
            "experts": {int(e): params["experts"][e] for e in np.flatnonzero(owner == rank)}}


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def _choices(P: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k experts per token (stable: ties go to the lower index) as (T, k) index array and one-hot counts."""
    E = P.shape[1]
    if not 1 <= k <= E:
        raise ValueError(f"k must be in 1..E={E}, got {k}")
    top = np.argsort(-P, axis=1, kind="stable")[:, :k]
    counts = np.stack([np.bincount(top[:, c], minlength=E) for c in range(k)])  # (k, E)
    return top, counts


def _slots(top: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Slot of each assignment: base[c, e] (slots taken before this shard's choice c) + rank in token order."""
    T, k = top.shape
    pos = np.empty((T, k), dtype=np.int64)
    for c in range(k):
        onehot = top[:, c][:, None] == np.arange(base.shape[1])
        before = np.cumsum(onehot, axis=0) - onehot + base[c]
        pos[:, c] = before[np.arange(T), top[:, c]]
    return pos


def _route(k: int, counts_all: np.ndarray, rank: int, capacity_factor: float, P_sum: np.ndarray
           ) -> dict[str, Any]:
    """Routing of this shard, given every shard's (k, E) counts (rank order) and the global sum of P."""
    E = counts_all.shape[2]
    totals = counts_all.sum(axis=0)  # (k, E)
    T = int(totals.sum()) // k
    base = np.cumsum(totals, axis=0) - totals + counts_all[:rank].sum(axis=0)
    cap = capacity(T, E, k, capacity_factor)
    f = totals.sum(axis=0) / (T * k)
    Pbar = P_sum / T
    load = np.minimum(totals.sum(axis=0), cap)
    return {"base": base, "capacity": cap, "T": T, "f": f, "aux_loss": float(E * np.sum(f * Pbar)),
            "load": load, "dropped": int(totals.sum() - load.sum())}


def _router(params: dict[str, Any], x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = softmax(linear_forward(params["Wg"], params["bg"], x))
    top, counts = _choices(P, k)
    return P, top, counts


def _stats(r: dict[str, Any]) -> dict[str, Any]:
    return {key: r[key] for key in ("capacity", "T", "f", "aux_loss", "load", "dropped")}


def moe_forward_dense(params: dict[str, Any], x: np.ndarray, k: int = 1, capacity_factor: float = 1.25
                      ) -> tuple[np.ndarray, dict[str, Any]]:
    """Single-process MoE on tokens x (T, d). cache["stats"]: capacity, f, aux_loss, load, dropped."""
    P, top, counts = _router(params, x, k)
    r = _route(k, counts[None], 0, capacity_factor, P.sum(axis=0))
    pos = _slots(top, r["base"])
    keep = pos < r["capacity"]
    gate = np.take_along_axis(P, top, axis=1)
    y = np.zeros_like(x)
    caches, outs = {}, {}
    for e in range(len(params["experts"])):
        t_idx, c_idx = np.nonzero((top == e) & keep)
        xe = np.empty((len(t_idx), x.shape[1]), dtype=x.dtype)
        xe[pos[t_idx, c_idx]] = x[t_idx]
        outs[e], caches[e] = mlp_forward(params["experts"][e], xe)
        y[t_idx] += gate[t_idx, c_idx][:, None] * outs[e][pos[t_idx, c_idx]]  # each t at most once per e
    return y, {"x": x, "P": P, "top": top, "pos": pos, "keep": keep, "gate": gate, "route": r,
               "caches": caches, "outs": outs, "stats": _stats(r)}


def _router_backward(params: dict[str, Any], c: dict[str, Any], dgate: np.ndarray, aux_coef: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gate and aux-loss gradients through softmax and the router linear: returns (dx, dW_g, db_g)."""
    P, top, keep, r = c["P"], c["top"], c["keep"], c["route"]
    dP = np.zeros_like(P)
    np.add.at(dP, (np.arange(len(P))[:, None].repeat(top.shape[1], 1), top), np.where(keep, dgate, 0))
    E = P.shape[1]
    dP += (aux_coef * E * r["f"] / r["T"]).astype(P.dtype)  # dL_aux/dP[t, i] = E f_i / T
    dlogits = P * (dP - (dP * P).sum(axis=1, keepdims=True))
    return linear_backward(params["Wg"], c["x"], dlogits)


def moe_backward_dense(params: dict[str, Any], cache: dict[str, Any], dy: np.ndarray, aux_coef: float = 0.0
                       ) -> tuple[np.ndarray, dict[str, Any]]:
    """Gradients of <dy, y> + aux_coef * L_aux: (dx, {"Wg", "bg", "experts": [Params per expert]})."""
    c = cache
    top, pos, keep, gate = c["top"], c["pos"], c["keep"], c["gate"]
    dx = np.zeros_like(c["x"])
    dgate = np.zeros_like(gate)
    expert_grads = []
    for e in range(len(params["experts"])):
        t_idx, c_idx = np.nonzero((top == e) & keep)
        slot = pos[t_idx, c_idx]
        dye = np.empty_like(c["outs"][e])
        dye[slot] = gate[t_idx, c_idx][:, None] * dy[t_idx]
        dgate[t_idx, c_idx] = np.sum(dy[t_idx] * c["outs"][e][slot], axis=1)
        dxe, g = mlp_backward(params["experts"][e], c["caches"][e], dye)
        dx[t_idx] += dxe[slot]
        expert_grads.append(g)
    dxr, dWg, dbg = _router_backward(params, c, dgate, aux_coef)
    return dx + dxr, {"Wg": dWg, "bg": dbg, "experts": expert_grads}


# --- expert parallelism ------------------------------------------------------------------------

def tokens_dropped(params: dict[str, Any], x: np.ndarray, k: int, capacity_factors: list[float]
                   ) -> dict[float, int]:
    """Dropped (token, expert) assignments of the dense MoE for each capacity factor C_f."""
    return {cf: moe_forward_dense(params, x, k, cf)[1]["stats"]["dropped"] for cf in capacity_factors}
