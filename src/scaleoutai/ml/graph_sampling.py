"""Chapter 13, Sections 4-5: neighbour sampling for GNN mini-batches, and the features it must fetch.

Message passing follows edge (src -> dst): a vertex aggregates its in-neighbours, PyTorch Geometric's
``edge_index`` convention (row 0 sources, row 1 targets). A GraphSAGE-style sampler keeps at most
``fanouts[l]`` in-neighbours of each vertex reached at hop l (all of them when the fan-out covers the
degree), so a mini-batch of b vertices touches at most b (1 + f_1 + f_1 f_2 + ...) vertices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import nn
from ..cluster import Comm
from ..collectives import all_to_all, ring_allreduce
from .graph_partition import check_edges


def in_csr(edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices): the in-neighbours of v are indices[indptr[v]:indptr[v+1]], in source order."""
    e = check_edges(edges, n)
    e = e[np.lexsort((e[:, 0], e[:, 1]))]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(e[:, 1], minlength=n), out=indptr[1:])
    return indptr, e[:, 0].copy()


@dataclass
class Subgraph:
    """A sampled mini-batch. ``nodes``: global ids, the batch first, then each hop's new vertices;
    ``hops[l]``: the global ids first reached at hop l (hops[0] is the batch); ``edge_index``: (2, E)
    local ids into ``nodes``, the sampled in-edges of every expanded vertex, in CSR order."""

    nodes: np.ndarray
    hops: list[np.ndarray]
    edge_index: np.ndarray
    edges_per_hop: list[int] = field(default_factory=list)


def sample_subgraph(indptr: np.ndarray, indices: np.ndarray, batch: Sequence[int], fanouts: Sequence[int],
                    seed: int = 0) -> Subgraph:
    """Sample ``len(fanouts)`` hops around ``batch``: each vertex first reached at hop l keeps
    min(fanouts[l], in-degree) in-neighbours drawn uniformly without replacement (fan-out -1: all)."""
    batch = np.asarray(batch, dtype=np.int64)
    n = len(indptr) - 1
    if batch.ndim != 1 or len(np.unique(batch)) != len(batch) or (len(batch) and (batch.min() < 0 or batch.max() >= n)):
        raise ValueError(f"batch must be distinct vertex ids in 0..{n - 1}")
    if any(int(f) != f or (f < 1 and f != -1) for f in fanouts):
        raise ValueError(f"fanouts must be counts >= 1 (or -1 for all neighbours), got {list(fanouts)}")
    rng = np.random.default_rng(seed)
    local = {int(v): i for i, v in enumerate(batch)}
    hops, frontier, src, dst, per_hop = [batch], batch, [], [], []
    for f in fanouts:
        new: list[int] = []
        count = 0
        for v in frontier:
            nb = indices[indptr[v]:indptr[v + 1]]
            if f != -1 and f < len(nb):
                nb = nb[np.sort(rng.choice(len(nb), size=int(f), replace=False))]  # keep CSR order
            for u in nb:
                u = int(u)
                if u not in local:
                    local[u] = len(local)
                    new.append(u)
                src.append(local[u])
                dst.append(local[int(v)])
            count += len(nb)
        frontier = np.array(new, dtype=np.int64)
        hops.append(frontier)
        per_hop.append(count)
    nodes = np.array(list(local), dtype=np.int64)
    return Subgraph(nodes, hops, np.array([src, dst], dtype=np.int64).reshape(2, -1), per_hop)


def gcn_aggregate(h: np.ndarray, edge_index: np.ndarray, num_nodes: int, mode: str = "mean") -> np.ndarray:
    """out[i] = sum (or mean) of h[j] over edges j -> i, added in edge order; no in-edge gives 0."""
    if mode not in ("mean", "sum"):
        raise ValueError(f"mode={mode!r}: choose 'mean' or 'sum'")
    ei = np.asarray(edge_index, dtype=np.int64)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E) (row 0 sources, row 1 targets), got {ei.shape}")
    out = np.zeros((num_nodes,) + h.shape[1:], dtype=h.dtype)
    np.add.at(out, ei[1], h[ei[0]])
    if mode == "mean":
        deg = np.bincount(ei[1], minlength=num_nodes).astype(h.dtype)
        out /= np.maximum(deg, 1).reshape((-1,) + (1,) * (h.ndim - 1))
    return out


def sage_layer(h: np.ndarray, edge_index: np.ndarray, W_l: np.ndarray, b_l: np.ndarray, W_r: np.ndarray
               ) -> np.ndarray:
    """GraphSAGE with mean aggregation, as PyG's ``SAGEConv(aggr="mean")``: mean_j h_j W_l + b_l + h_i W_r."""
    return gcn_aggregate(h, edge_index, len(h)) @ W_l + b_l + h @ W_r


def sage_forward(X: np.ndarray, edge_index: np.ndarray, layers: list[tuple[np.ndarray, ...]]) -> np.ndarray:
    """Stacked ``sage_layer``s with ReLU between them, on every vertex of the graph given."""
    h = X
    for i, (W_l, b_l, W_r) in enumerate(layers):
        h = sage_layer(h, edge_index, W_l, b_l, W_r)
        if i < len(layers) - 1:
            h = nn.relu(h)
    return h


def fetch_features(comm: Comm, X_owned: np.ndarray, parts: np.ndarray, needed: np.ndarray
                   ) -> tuple[np.ndarray, dict[str, int]]:
    """Rows of X for the global ids ``needed``; this rank holds the rows of ``parts == rank`` in id order.

    Two ``all_to_all``s: the ids each owner must send, then the rows. Feature bytes received = remote
    rows * d * itemsize: the traffic a partitioner that keeps neighbours together reduces.
    """
    K, r = comm.size, comm.rank
    needed = np.asarray(needed, dtype=np.int64)
    owner = parts[needed]
    rank_of = np.cumsum(parts == r) - 1  # position of an owned id among this rank's rows
    asks = all_to_all(comm, [needed[owner == j] if j != r else np.empty(0, np.int64) for j in range(K)])
    before = comm.stats.bytes_received
    replies = all_to_all(comm, [X_owned[rank_of[ids]] for ids in asks])
    out = np.empty((len(needed),) + X_owned.shape[1:], dtype=X_owned.dtype)
    for j in range(K):
        sel = owner == j
        out[sel] = X_owned[rank_of[needed[sel]]] if j == r else replies[j]
    remote = int(np.count_nonzero(owner != r))
    return out, {"remote_nodes": remote, "feature_bytes": comm.stats.bytes_received - before}


def train_sage_minibatch(comm: Comm, edges: np.ndarray, X: np.ndarray, y: np.ndarray, parts: np.ndarray,
                         classes: int, batch: int = 32, fanout: int = 5, steps: int = 50, lr: float = 0.5,
                         seed: int = 0) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Data-parallel mini-batch training of one SAGE layer + softmax on this rank (a sketch).

    The structure is replicated, the features partitioned: the rank keeps X[parts == rank] only, draws
    its batch from its own vertices, samples 1 hop, fetches the remote rows, and all-reduces the summed
    gradient with the example count, so the step equals one on the union of the K batches.
    """
    n, d = X.shape
    indptr, indices = in_csr(edges, n)
    mine = np.flatnonzero(parts == comm.rank)
    X_owned = np.ascontiguousarray(X[mine])
    rng = np.random.default_rng([seed, comm.rank])
    W = [np.zeros((d, classes), X.dtype), np.zeros(classes, X.dtype), np.zeros((d, classes), X.dtype)]
    info: dict[str, Any] = {"loss": [], "remote_nodes": [], "feature_bytes": [], "sampled_nodes": []}
    for t in range(steps):
        pick = rng.choice(mine, size=min(batch, len(mine)), replace=False) if len(mine) else mine
        sub = sample_subgraph(indptr, indices, pick, [fanout], seed=int(rng.integers(2**31)))
        h, got = fetch_features(comm, X_owned, parts, sub.nodes)
        agg = gcn_aggregate(h, sub.edge_index, len(h))[:len(pick)]
        logits = agg @ W[0] + W[1] + h[:len(pick)] @ W[2]
        loss, dlogits = nn.softmax_cross_entropy(logits, y[pick]) if len(pick) else (0.0, logits)
        dlogits = dlogits * len(pick)  # per-example sum: the all-reduce divides by the global count
        flat = np.concatenate([(agg.T @ dlogits).ravel(), dlogits.sum(0), (h[:len(pick)].T @ dlogits).ravel(),
                               [len(pick), loss * len(pick)]])
        total = ring_allreduce(comm, flat.astype(np.float64))
        count = max(total[-2], 1.0)
        grads = np.split(total[:-2] / count, [d * classes, d * classes + classes])
        for w, g in zip(W, grads):
            w -= (lr * g.reshape(w.shape)).astype(w.dtype)
        info["loss"].append(float(total[-1] / count))
        info["remote_nodes"].append(got["remote_nodes"])
        info["feature_bytes"].append(got["feature_bytes"])
        info["sampled_nodes"].append(len(sub.nodes))
    return W, info
