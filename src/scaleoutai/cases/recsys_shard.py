"""Embedding tables sharded by rows over K ranks, the lookup and its backward as all-to-alls (Chapter 38).

A ``Placement`` maps every row id to (owner rank, local row): ``mod`` (id % K), ``range`` (contiguous
blocks, ``block_bounds``: uneven when K does not divide V), or ``hash`` (a multiplicative hash mod K).
Rows listed in ``replicated`` live on every rank instead (owner -1): the fix for hot ids under skew.

Lookup of a batch of bags on rank r (DLRM-style model parallelism, row-wise with partial pooling):
  1. split each bag by owner: entry (bag b, id x) owned by j becomes (local row, segment) where a
     segment is one (bag, owner) pair;  all-to-all of these int64 pairs (and of the weights, if any);
  2. owner j pools each segment it received: partial_s = sum_x w_x T_j[local_x]; all-to-all back;
  3. rank r adds the partials of each bag (and its replicated rows, locally); mode mean divides by |bag|.
Backward: the pooled gradient of bag b is sent back as the gradient of each of its segments (the reverse
all-to-all), and owner j scatters w_x g_s into the gradient of row local_x. Replicated rows get a ring
all-reduce of their gradient instead (in training, fused with the MLPs' all-reduce: bytes, no latency).
Bytes per lookup from r to j: 16 n_rj (+ 8 n_rj weights) for ids and 2 d s_rj itemsize for the
partials and their gradients, with n_rj entries and s_rj segments; the table size V never appears,
unlike data parallelism, which all-reduces a V x d gradient every step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, block_bounds, ring_allreduce

__all__ = ["SCHEMES", "Placement", "place_rows", "hot_ids", "shard_table", "gather_table", "owner_load",
           "sharded_bag_forward", "sharded_bag_backward", "lookup_volume"]

SCHEMES = ("mod", "range", "hash")


@dataclass(frozen=True)
class Placement:
    """owner[x] in 0..K-1 (or -1: replicated), local[x] its row in that rank's shard (or in the replica block)."""

    owner: np.ndarray
    local: np.ndarray
    K: int
    replicated: np.ndarray  # the replicated ids, in replica-block order

    @property
    def V(self) -> int:
        return len(self.owner)

    def ids_of(self, rank: int) -> np.ndarray:
        """The global ids rank ``rank`` owns, in local-row order."""
        mine = np.flatnonzero(self.owner == rank)
        return mine[np.argsort(self.local[mine], kind="stable")]

    def rows_per_rank(self) -> np.ndarray:
        return np.bincount(self.owner[self.owner >= 0], minlength=self.K)


def place_rows(V: int, K: int, scheme: str = "mod", replicated: Any = (), seed: int = 0) -> Placement:
    """Row placement of a V-row table over K ranks; ``replicated`` ids go on every rank."""
    if int(V) != V or V < 1 or int(K) != K or K < 1:
        raise ValueError(f"place_rows needs V >= 1 rows and K >= 1 ranks, got V={V!r}, K={K!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}: choose one of {SCHEMES}")
    rep = np.unique(np.asarray(replicated, dtype=np.int64))
    if len(rep) and (rep[0] < 0 or rep[-1] >= V):
        raise ValueError(f"replicated ids must be in 0..{V - 1}")
    ids = np.arange(V, dtype=np.int64)
    rest = np.setdiff1d(ids, rep)
    owner = np.full(V, -1, dtype=np.int64)
    if scheme == "mod":
        owner[rest] = rest % K
    elif scheme == "range":  # contiguous blocks of the sharded ids, the first ones one row longer
        for j, (lo, hi) in enumerate(block_bounds(len(rest), int(K))):
            owner[rest[lo:hi]] = j
    else:  # Fibonacci hashing: the top bits of x * 2^64 / phi, then mod K
        h = (rest.astype(np.uint64) + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
        owner[rest] = ((h >> np.uint64(32)) % np.uint64(K)).astype(np.int64)
    local = np.empty(V, dtype=np.int64)
    local[rep] = np.arange(len(rep))
    for j in range(int(K)):  # local rows in increasing id order
        mine = np.flatnonzero(owner == j)
        local[mine] = np.arange(len(mine))
    return Placement(owner, local, int(K), rep)


def hot_ids(ids: np.ndarray, V: int, h: int) -> np.ndarray:
    """The h most frequent ids of a sample of lookups (ties: the smaller id), to replicate."""
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=V)
    return np.sort(np.lexsort((np.arange(V), -counts))[:int(h)])


def shard_table(table: np.ndarray, p: Placement, rank: int) -> dict[str, np.ndarray]:
    """Rank ``rank``'s rows {"ids", "rows"} and the replica block {"rep_ids", "replica"} (copies)."""
    ids = p.ids_of(rank)
    return {"ids": ids, "rows": table[ids].copy(), "rep_ids": p.replicated.copy(),
            "replica": table[p.replicated].copy()}


def gather_table(shards: list[dict[str, np.ndarray]], V: int) -> np.ndarray:
    """The full V x d table from the shards of every rank (replicated rows taken from rank 0)."""
    full = np.zeros((V, shards[0]["rows"].shape[1]), dtype=shards[0]["rows"].dtype)
    for s in shards:
        full[s["ids"]] = s["rows"]
    full[shards[0]["rep_ids"]] = shards[0]["replica"]
    return full


def owner_load(p: Placement, ids: np.ndarray) -> np.ndarray:
    """Lookups each rank serves for ``ids`` (replicated rows are served locally, spread over the ranks)."""
    own = p.owner[np.asarray(ids, dtype=np.int64)]
    return np.bincount(own[own >= 0], minlength=p.K) + (own < 0).sum() / p.K


def _segments(p: Placement, ids: np.ndarray, offsets: np.ndarray) -> dict[str, Any]:
    """Split the bags by owner: per rank j the entries it serves and the (bag) of each of its segments."""
    lengths = np.diff(np.append(offsets, len(ids))).astype(np.int64)
    bag = np.repeat(np.arange(len(offsets)), lengths)
    own = p.owner[ids]
    per = []
    for j in range(p.K):
        e = np.flatnonzero(own == j)
        seg_bags, seg = np.unique(bag[e], return_inverse=True)  # segment = a (bag, owner j) pair
        per.append((e, seg_bags, seg.astype(np.int64).reshape(-1)))
    return {"bag": bag, "lengths": lengths, "per": per, "rep": np.flatnonzero(own < 0)}


def sharded_bag_forward(comm: Comm, p: Placement, shard: dict[str, np.ndarray], ids: np.ndarray,
                        offsets: np.ndarray, weights: np.ndarray | None = None, mode: str = "sum",
                        flop_time: float = 0.0) -> tuple[np.ndarray, dict[str, Any]]:
    """EmbeddingBag over a row-sharded table: pooled (n_bags, d) on this rank, and the backward's context."""
    if mode not in ("sum", "mean") or (weights is not None and mode != "sum"):
        raise ValueError(f"mode={mode!r} with weights={weights is not None}: use 'sum' (weights allowed) or 'mean'")
    ids = np.asarray(ids, dtype=np.int64)
    sg = _segments(p, ids, np.asarray(offsets, dtype=np.int64))
    dt = shard["rows"].dtype
    w = np.ones(len(ids), dtype=dt) if weights is None else np.asarray(weights, dtype=dt)
    asks = all_to_all(comm, [np.stack([p.local[ids[e]], seg], axis=1) for e, _, seg in sg["per"]])
    wts = all_to_all(comm, [w[e] for e, _, _ in sg["per"]]) if weights is not None else None
    d = shard["rows"].shape[1]
    partials = []
    for s, ask in enumerate(asks):  # serve: pool each segment a peer asked for
        part = np.zeros((int(ask[:, 1].max()) + 1 if len(ask) else 0, d), dtype=shard["rows"].dtype)
        rows = shard["rows"][ask[:, 0]]
        np.add.at(part, ask[:, 1], rows if wts is None else wts[s][:, None] * rows)
        partials.append(part)
    # the owner's pooling work, and this rank's reads of its replicas (simulated)
    comm.compute(flop_time * 2 * d * (sum(len(a) for a in asks) + len(sg["rep"])))
    back = all_to_all(comm, partials)
    pooled = np.zeros((len(offsets), d), dtype=shard["rows"].dtype)
    for (_, seg_bags, _), part in zip(sg["per"], back):
        pooled[seg_bags] += part
    r = sg["rep"]
    if len(r):
        np.add.at(pooled, sg["bag"][r], w[r][:, None] * shard["replica"][p.local[ids[r]]])
    if mode == "mean":
        pooled /= np.maximum(sg["lengths"], 1)[:, None]
    return pooled, {"sg": sg, "asks": asks, "wts": wts, "w": w, "ids": ids, "mode": mode}


def sharded_bag_backward(comm: Comm, p: Placement, shard: dict[str, np.ndarray], ctx: dict[str, Any],
                         grad: np.ndarray, flop_time: float = 0.0,
                         reduce_replica: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(dRows, dReplica): the gradient of this rank's rows and of the replica block, from dL/dpooled.

    Segment gradients go back to the owners (the reverse all-to-all); the replica gradient is summed
    over ranks (ring all-reduce) so every replica takes the same step. ``reduce_replica=False`` returns
    this rank's share instead, for a caller that fuses it into an all-reduce it runs anyway."""
    sg = ctx["sg"]
    g = grad / np.maximum(sg["lengths"], 1)[:, None] if ctx["mode"] == "mean" else grad
    got = all_to_all(comm, [np.ascontiguousarray(g[seg_bags]) for _, seg_bags, _ in sg["per"]])
    d_rows = np.zeros_like(shard["rows"])
    for s, (ask, gs) in enumerate(zip(ctx["asks"], got)):
        contrib = gs[ask[:, 1]]
        np.add.at(d_rows, ask[:, 0], contrib if ctx["wts"] is None else ctx["wts"][s][:, None] * contrib)
    comm.compute(flop_time * 2 * d_rows.shape[1] * (sum(len(a) for a in ctx["asks"]) + len(sg["rep"])))
    d_rep = np.zeros_like(shard["replica"])
    r = sg["rep"]
    if len(r):
        np.add.at(d_rep, p.local[ctx["ids"][r]], ctx["w"][r][:, None] * g[sg["bag"][r]])
    if reduce_replica and len(d_rep) and comm.size > 1:
        d_rep = ring_allreduce(comm, d_rep)
    return d_rows, d_rep


def lookup_volume(p: Placement, ids: np.ndarray, offsets: np.ndarray,
                  bounds: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """entries[r, j] and segments[r, j] of a global batch of bags cut into rank blocks ``bounds``.

    Rank r sends entries[r, j] (local row, segment) int64 pairs to j and gets segments[r, j] partial
    vectors back; the bytes of one lookup follow (module docstring)."""
    ids, offsets = np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
    ends = np.append(offsets, len(ids))
    E = np.zeros((p.K, p.K), dtype=np.int64)
    S = np.zeros((p.K, p.K), dtype=np.int64)
    for r, (lo, hi) in enumerate(bounds):
        sub = ids[ends[lo]:ends[hi]]
        sg = _segments(p, sub, offsets[lo:hi] - ends[lo])
        for j, (e, seg_bags, _) in enumerate(sg["per"]):
            E[r, j], S[r, j] = len(e), len(seg_bags)
    return {"entries": E, "segments": S}
