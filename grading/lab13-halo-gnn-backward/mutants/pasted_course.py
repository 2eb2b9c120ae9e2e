# mutant: the chapter's code adapted by hand: fetch_features (ids, then rows, by a pairwise all_to_all) and
# gcn_aggregate for the forward, train_sage_minibatch's weight gradients, and the features treated as inputs
# as in the chapter, so dX keeps only the rank's own edges: no gradient ever goes back through the halo
# loses: input_grads, small, process, random, halo_traffic
# says: back to its owner
# score-at-most: 50
def _all_to_all(comm, blocks):
    K, r = comm.size, comm.rank
    out = [None] * K
    out[r] = np.array(blocks[r], copy=True)  # noqa: F821
    for s in range(1, K):
        dst, src = (r + s) % K, (r - s) % K
        out[src] = comm.sendrecv(np.ascontiguousarray(blocks[dst]), dst, src)  # noqa: F821
    return out


def _fetch_features(comm, X_owned, parts, needed):
    K, r = comm.size, comm.rank
    owner = parts[needed]
    rank_of = np.cumsum(parts == r) - 1  # noqa: F821
    asks = _all_to_all(comm, [needed[owner == j] if j != r else np.empty(0, np.int64) for j in range(K)])  # noqa: F821
    replies = _all_to_all(comm, [X_owned[rank_of[ids]] for ids in asks])
    out = np.empty((len(needed),) + X_owned.shape[1:], dtype=X_owned.dtype)  # noqa: F821
    for j in range(K):
        sel = owner == j
        out[sel] = X_owned[rank_of[needed[sel]]] if j == r else replies[j]
    return out


def _gcn_aggregate(h, edge_index, num_nodes):
    out = np.zeros((num_nodes,) + h.shape[1:], dtype=h.dtype)  # noqa: F821
    np.add.at(out, edge_index[1], h[edge_index[0]])  # noqa: F821
    deg = np.bincount(edge_index[1], minlength=num_nodes).astype(h.dtype)  # noqa: F821
    out /= np.maximum(deg, 1).reshape((-1,) + (1,) * (h.ndim - 1))  # noqa: F821
    return out


def halo_forward(comm, X_own, edges_in, parts, W_l, b_l, W_r):
    parts = np.asarray(parts, dtype=np.int64)  # noqa: F821
    e = np.asarray(edges_in, dtype=np.int64).reshape(-1, 2)  # noqa: F821
    mine = np.flatnonzero(parts == comm.rank)  # noqa: F821
    nodes = np.concatenate([mine, np.setdiff1d(np.unique(e[:, 0]), mine)])  # noqa: F821
    h = _fetch_features(comm, X_own, parts, nodes)
    local = np.full(len(parts), -1, dtype=np.int64)  # noqa: F821
    local[nodes] = np.arange(len(nodes))  # noqa: F821
    edge_index = np.stack([local[e[:, 0]], local[e[:, 1]]])  # noqa: F821
    agg = _gcn_aggregate(h, edge_index, len(h))[:len(mine)]
    return agg @ W_l + b_l + h[:len(mine)] @ W_r, (h, agg, edge_index, len(mine), W_l, W_r)


def halo_backward(comm, ctx, dOut):
    h, agg, edge_index, m, W_l, W_r = ctx
    dlogits = np.asarray(dOut, dtype=h.dtype).reshape(m, W_l.shape[1])  # noqa: F821
    deg = np.maximum(np.bincount(edge_index[1], minlength=m), 1).astype(h.dtype)  # noqa: F821
    dh = np.zeros((len(h), W_l.shape[1]), dtype=h.dtype)  # noqa: F821
    np.add.at(dh, edge_index[0], dlogits[edge_index[1]] / deg[edge_index[1], None])  # noqa: F821
    dX = dh[:m] @ W_l.T + dlogits @ W_r.T  # the ghosts' rows of dh stay here
    return dX, agg.T @ dlogits, dlogits.sum(0), h[:m].T @ dlogits
