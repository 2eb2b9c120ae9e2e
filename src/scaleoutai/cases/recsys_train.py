"""Training the two-tower model with sharded tables and data-parallel MLPs; checkpoints, re-sharding (Ch 38).

Per step on rank r of K, with its block [lo, hi) = ``block_range(B, K, r)`` of the global batch:
  1. sharded lookups (``recsys_shard``) of its users' bags and its items: pooled e_u, e_v;
  2. towers u = MLP_u(e_u), v = MLP_v(e_v) on its rows (torch autograd; MLPs replicated);
  3. all-gather v into the B x o matrix of in-batch negatives; loss share sum_{i in block} CE_i / B;
  4. backward: the gradient of the gathered matrix is reduce-scattered, so r gets dL/dv of its rows,
     then flows through MLP_v;
  5. the pooled gradients go back to the rows' owners (reverse all-to-all); the MLP gradients and the
     replicated rows' are summed by one ring all-reduce (data parallelism); every rank takes its step.
The result equals ``recsys.reference_train`` (the dense torch model on the whole batch) for every K, to
rounding. ``save_checkpoint`` writes each rank's rows (atomically); ``load_checkpoint`` assembles the full
tables of the latest complete step, which a run with another K re-shards with its own placement.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import all_gather, block_range, reduce_scatter, ring_allreduce
from .recsys import ADAGRAD_EPS, MLP_KEYS, OPTIMIZERS, _in_batch_loss, _tower, batch_rows, make_batch
from .recsys_shard import (Placement, gather_table, hot_ids, lookup_volume, place_rows, shard_table,
                           sharded_bag_backward, sharded_bag_forward)

__all__ = ["Trained", "placements", "apply_update", "sharded_step", "train_sharded", "run_sharded", "save_checkpoint",
           "load_checkpoint",            "step_bytes", "replicated_step_bytes", "memory_per_rank"]


@dataclass
class Trained:
    """What ``run_sharded`` returns: the full params, the loss per step, the Adagrad state (or None), the run."""

    params: dict[str, np.ndarray]
    losses: list[float]
    state: dict[str, np.ndarray] | None
    result: cluster.RunResult


def placements(data: Any, K: int, scheme: str = "mod",
               replicate: tuple[int, int] = (0, 0)) -> tuple[Placement, Placement]:
    """(user-feature table, item table) placements; the ``replicate`` hottest ids of each on every rank."""
    pu = place_rows(data.n_features, K, scheme, hot_ids(data.bag_ids, data.n_features, replicate[0]))
    pi = place_rows(data.n_items, K, scheme, hot_ids(data.train_items, data.n_items, replicate[1]))
    return pu, pi


def apply_update(p: np.ndarray, g: np.ndarray, acc: np.ndarray | None, lr: float) -> None:
    """In place: SGD p -= lr g (acc None), or Adagrad acc += g^2, p -= lr g / (sqrt(acc) + eps) (torch's rule)."""
    if acc is None:
        p -= lr * g
    else:
        acc += g * g
        p -= lr * g / (np.sqrt(acc) + ADAGRAD_EPS)


def sharded_step(comm: Comm, shards: dict[str, dict], mlp: dict[str, Any], batch: dict[str, Any], pu: Placement,
                 pi: Placement, B: int, lo: int, lr: float, mode: str = "sum", tau: float = 1.0,
                 log_q: np.ndarray | None = None, flop_time: float = 0.0, mlp_acc: dict | None = None) -> float:
    """One optimizer step on this rank's block of the batch; returns its share of the loss (they sum to L)."""
    import torch

    items = batch["items"]
    b = len(items)
    eu, cu = sharded_bag_forward(comm, pu, shards["user"], batch["ids"], batch["offsets"], batch["weights"], mode,
                                 flop_time)
    ev, ci = sharded_bag_forward(comm, pi, shards["item"], items, np.arange(b), None, "sum", flop_time)
    eu_t, ev_t = torch.tensor(eu, requires_grad=True), torch.tensor(ev, requires_grad=True)
    u = _tower(torch, eu_t, *(mlp[k] for k in MLP_KEYS[:4]))
    v = _tower(torch, ev_t, *(mlp[k] for k in MLP_KEYS[4:]))  # W0, b0, W1: no output bias
    v_all = torch.tensor(all_gather(comm, v.detach().numpy()).reshape(-1, v.shape[1]), requires_grad=True)
    lq = None if log_q is None else torch.as_tensor(log_q.astype(eu.dtype))
    loss = _in_batch_loss(torch, u, v_all, torch.arange(lo, lo + b), B, tau, lq)
    loss.backward()
    dv = reduce_scatter(comm, v_all.grad.numpy())  # dL/dv of my rows, summed over every rank's users
    torch.autograd.backward(v, torch.tensor(dv))
    h, o = mlp["u.W0"].shape[1], mlp["u.W1"].shape[1]
    comm.compute(flop_time * 6 * b * (2 * (eu.shape[1] * h + h * o) + B * o))  # towers and logits, fwd + bwd
    du_rows, du_rep = sharded_bag_backward(comm, pu, shards["user"], cu, eu_t.grad.numpy() if eu_t.grad is not None
                                           else np.zeros_like(eu), flop_time, reduce_replica=False)
    dv_rows, dv_rep = sharded_bag_backward(comm, pi, shards["item"], ci, ev_t.grad.numpy() if ev_t.grad is not None
                                           else np.zeros_like(ev), flop_time, reduce_replica=False)
    # one ring all-reduce for the MLP gradients and the replicated rows' (fusion: one latency, not three)
    grads = [mlp[k].grad if mlp[k].grad is not None else torch.zeros_like(mlp[k]) for k in MLP_KEYS]
    flat = np.concatenate([g.numpy().reshape(-1) for g in grads] + [du_rep.reshape(-1), dv_rep.reshape(-1)])
    flat = ring_allreduce(comm, flat)
    n_mlp = len(flat) - du_rep.size - dv_rep.size
    du_rep, dv_rep = (flat[n_mlp:n_mlp + du_rep.size].reshape(du_rep.shape),
                      flat[n_mlp + du_rep.size:].reshape(dv_rep.shape))
    at = 0
    for k in MLP_KEYS:  # the numpy view shares the tensor's memory: the update lands in the replica
        n = mlp[k].numel()
        apply_update(mlp[k].detach().numpy(), flat[at:at + n].reshape(tuple(mlp[k].shape)),
                     None if mlp_acc is None else mlp_acc[k], lr)
        mlp[k].grad = None
        at += n
    for name, d_rows, d_rep in (("user", du_rows, du_rep), ("item", dv_rows, dv_rep)):
        sh = shards[name]  # an owner keeps the optimizer state of its own rows: it shards with them
        apply_update(sh["rows"], d_rows, sh.get("acc"), lr)
        apply_update(sh["replica"], d_rep, sh.get("rep_acc"), lr)
    return float(loss.detach())


def train_sharded(comm: Comm, data: Any, params: dict[str, np.ndarray], pu: Placement, pi: Placement, steps: int,
                  B: int, lr: float, mode: str = "sum", weighted: bool = False, tau: float = 1.0,
                  log_q: np.ndarray | None = None, seed: int = 0, start_step: int = 0, ckpt_dir: str | None = None,
                  ckpt_every: int = 0, flop_time: float = 0.0, optimizer: str = "sgd",
                  state: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Per rank: take my shards of ``params``' tables (and of the Adagrad ``state``, same keys, zeros when
    None), run ``steps`` steps from ``start_step``, checkpoint every ``ckpt_every`` steps."""
    import torch

    if comm.size != pu.K or comm.size != pi.K:
        raise ValueError(f"placements are for K={pu.K} and {pi.K} ranks, but the run has {comm.size}: re-place them")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r}: choose one of {OPTIMIZERS}")
    lo, hi = block_range(B, comm.size, comm.rank)
    shards = {"user": shard_table(params["user_table"], pu, comm.rank),
              "item": shard_table(params["item_table"], pi, comm.rank)}
    mlp = {k: torch.tensor(params[k], requires_grad=True) for k in MLP_KEYS}
    mlp_acc = None
    if optimizer == "adagrad":
        state = state or {k: np.zeros_like(v) for k, v in params.items()}
        mlp_acc = {k: state[k].copy() for k in MLP_KEYS}
        for t, p in (("user", pu), ("item", pi)):
            acc = shard_table(state[f"{t}_table"], p, comm.rank)
            shards[t].update(acc=acc["rows"], rep_acc=acc["replica"])
    losses = []
    for step in range(start_step, start_step + steps):
        rows = batch_rows(len(data.train_items), B, step, seed)
        batch = make_batch(data, rows[lo:hi], weighted)
        lq = None if log_q is None else log_q[data.train_items[rows]]
        try:
            losses.append(sharded_step(comm, shards, mlp, batch, pu, pi, B, lo, lr, mode, tau, lq, flop_time, mlp_acc))
        except cluster.PeerCrashedError as exc:  # its rows are gone: name the shard and the way back
            raise cluster.ClusterError(f"step {step + 1}: the embedding shard on rank {exc.peer} is lost (rank "
                                       f"crashed); resume from the last checkpoint on the surviving ranks") from exc
        if ckpt_dir and ckpt_every and (step + 1) % ckpt_every == 0:
            save_checkpoint(ckpt_dir, step + 1, comm, shards, mlp, mlp_acc)
    return {"user": shards["user"], "item": shards["item"], "losses": losses,
            "mlp": {k: v.detach().numpy() for k, v in mlp.items()} if comm.rank == 0 else None,
            "mlp_acc": mlp_acc if comm.rank == 0 else None}


def run_sharded(data: Any, params: dict[str, np.ndarray], K: int, steps: int, B: int, lr: float,
                scheme: str = "mod", replicate: tuple[int, int] = (0, 0), backend: str = "sim",
                network: cluster.Network | None = None, faults: cluster.Faults | None = None, timeout: float = 300.0,
                trace: bool = False, **kw: Any) -> Trained:
    """Start K ranks of ``train_sharded`` (keyword options pass through); gather what they trained."""
    pu, pi = placements(data, K, scheme, replicate)
    res = cluster.run(train_sharded, K, backend=backend, args=(data, params, pu, pi, steps, B, lr), kwargs=kw,
                      network=network, faults=faults, timeout=timeout, trace=trace)

    def full(t: str, key: str, rep: str) -> np.ndarray:
        return gather_table([{"ids": v[t]["ids"], "rows": v[t][key], "rep_ids": v[t]["rep_ids"], "replica": v[t][rep]}
                             for v in res.values], params[f"{t}_table"].shape[0])

    out = {"user_table": full("user", "rows", "replica"), "item_table": full("item", "rows", "replica"),
           **res.values[0]["mlp"]}
    state = None
    if res.values[0]["mlp_acc"] is not None:
        state = {"user_table": full("user", "acc", "rep_acc"), "item_table": full("item", "acc", "rep_acc"),
                 **res.values[0]["mlp_acc"]}
    return Trained(out, [float(x) for x in np.sum([v["losses"] for v in res.values], axis=0)], state, res)


def save_checkpoint(path: str | os.PathLike, step: int, comm: Comm, shards: dict[str, dict], mlp: dict[str, Any],
                    mlp_acc: dict[str, np.ndarray] | None = None) -> Path:
    """Write this rank's rows and their optimizer state (rank 0: also the replicas and the MLPs) as
    step{step}-rank{r}-of{K}.npz."""
    out = Path(path) / f"step{step:06d}-rank{comm.rank}-of{comm.size}.npz"
    arrays = {f"{t}.{k}": v for t, s in shards.items() for k, v in s.items()
              if comm.rank == 0 or k in ("ids", "rows", "acc")}
    if comm.rank == 0:
        arrays.update({k: v.detach().numpy() for k, v in mlp.items()})
        arrays.update({f"acc.{k}": v for k, v in (mlp_acc or {}).items()})
    tmp = out.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, out)  # atomic: a crash never leaves a half-written shard that looks complete
    return out


def load_checkpoint(path: str | os.PathLike, V_user: int,
                    V_item: int) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    """(step, full params, full Adagrad state or None) of the latest step whose K shard files all exist."""
    found: dict[tuple[int, int], set[int]] = {}
    for f in Path(path).glob("step*-rank*-of*.npz"):
        s, r, K = (int(x) for x in f.stem.replace("step", "").replace("-rank", " ").replace("-of", " ").split())
        found.setdefault((s, K), set()).add(r)
    done = [(s, K) for (s, K), ranks in found.items() if ranks == set(range(K))]
    if not done:
        raise ValueError(f"no complete checkpoint in {path}: start from step 0 instead")
    step, K = max(done)
    files = [np.load(Path(path) / f"step{step:06d}-rank{r}-of{K}.npz") for r in range(K)]
    params = {k: files[0][k] for k in MLP_KEYS}
    adagrad = "user.acc" in files[0]
    state = {k: files[0][f"acc.{k}"] for k in MLP_KEYS} if adagrad else None
    for t, V in (("user", V_user), ("item", V_item)):
        for out, rows, rep in ((params, "rows", "replica"), (state, "acc", "rep_acc")):
            if out is not None:
                shards = [{"ids": f[f"{t}.ids"], "rows": f[f"{t}.{rows}"]} for f in files]
                shards[0].update(rep_ids=files[0][f"{t}.rep_ids"], replica=files[0][f"{t}.{rep}"])
                out[f"{t}_table"] = gather_table(shards, V)
    return step, params, state


def step_bytes(data: Any, pu: Placement, pi: Placement, rows: np.ndarray, d: int, o: int, n_mlp: int,
               itemsize: int = 8, weighted: bool = False) -> dict[str, int]:
    """Bytes all ranks send in one ``sharded_step`` on global batch ``rows``, by phase (the alpha-beta count)."""
    K, B = pu.K, len(rows)
    bounds = [block_range(B, K, r) for r in range(K)]
    ids, offsets, _ = data.bags(data.train_users[rows])
    out = {}
    for t, vol in (("user", lookup_volume(pu, ids, offsets, bounds)),
                   ("item", lookup_volume(pi, data.train_items[rows], np.arange(B), bounds))):
        off = ~np.eye(K, dtype=bool)
        out[f"{t} ids"] = 16 * int(vol["entries"][off].sum())
        out[f"{t} weights"] = itemsize * int(vol["entries"][off].sum()) if weighted and t == "user" else 0
        out[f"{t} vectors"] = 2 * d * itemsize * int(vol["segments"][off].sum())  # pooled out, gradient back
        n_rep = len((pu if t == "user" else pi).replicated)
        out[f"{t} replicas (fused all-reduce)"] = 2 * (K - 1) * n_rep * d * itemsize
    out["negatives (all-gather + reduce-scatter)"] = 2 * (K - 1) * B * o * itemsize
    out["MLP all-reduce"] = 2 * (K - 1) * n_mlp * itemsize
    return out


def replicated_step_bytes(V_user: int, V_item: int, d: int, n_mlp: int, K: int, B: int, o: int,
                          itemsize: int = 8) -> int:
    """The data-parallel alternative: every rank holds both tables and ring-all-reduces their full gradient."""
    return 2 * (K - 1) * ((V_user + V_item) * d + n_mlp) * itemsize + 2 * (K - 1) * B * o * itemsize


def memory_per_rank(pu: Placement, pi: Placement, d: int, n_mlp: int, itemsize: int = 8,
                    optimizer: str = "sgd") -> np.ndarray:
    """Bytes of parameters (and Adagrad state: twice as much) on each rank: its rows of both tables, the
    replicas and a copy of the MLPs."""
    rows = pu.rows_per_rank() + pi.rows_per_rank() + len(pu.replicated) + len(pi.replicated)
    return (rows * d + n_mlp) * itemsize * (2 if optimizer == "adagrad" else 1)
