# mutant: the chapter's sharded_bag_forward and sharded_bag_backward (recsys_shard) pasted and adapted by hand,
# with a right row-wise Adagrad on the owner: exact values, but (local row, segment) pairs per entry, the weights,
# and one partial sum (and its gradient) per (bag, owner) segment cross the network
# loses: requests, replies, gradients
# says: deduplicated traffic
# score-at-most: 50
def _a2a(comm, blocks):
    K, r = comm.size, comm.rank
    out = [None] * K
    out[r] = blocks[r].copy()
    for s in range(1, K):
        dst, src = (r + s) % K, (r - s) % K
        out[src] = comm.sendrecv(np.ascontiguousarray(blocks[dst]), dst, src)  # noqa: F821
    return out


def sparse_bag_step(comm, owner, my_rows, my_acc, ids, offsets, weights, mode, grad, lr, optimizer="sgd"):
    K = comm.size
    owner = np.asarray(owner, dtype=np.int64)  # noqa: F821
    local = np.zeros(len(owner), dtype=np.int64)  # noqa: F821
    for j in range(K):
        m = np.flatnonzero(owner == j)  # noqa: F821
        local[m] = np.arange(len(m))  # noqa: F821
    ids = np.asarray(ids, dtype=np.int64)  # noqa: F821
    offsets = np.asarray(offsets, dtype=np.int64)  # noqa: F821
    lengths = np.diff(np.append(offsets, len(ids))).astype(np.int64)  # noqa: F821
    bag = np.repeat(np.arange(len(offsets)), lengths)  # noqa: F821
    own = owner[ids]
    per = []
    for j in range(K):
        e = np.flatnonzero(own == j)  # noqa: F821
        seg_bags, seg = np.unique(bag[e], return_inverse=True)  # noqa: F821
        per.append((e, seg_bags, seg.astype(np.int64).reshape(-1)))
    dt = my_rows.dtype
    w = np.ones(len(ids), dtype=dt) if weights is None else np.asarray(weights, dtype=dt)  # noqa: F821
    asks = _a2a(comm, [np.stack([local[ids[e]], seg], axis=1) for e, _, seg in per])  # noqa: F821
    wts = _a2a(comm, [w[e] for e, _, _ in per]) if weights is not None else None
    d = my_rows.shape[1]
    partials = []
    for s, ask in enumerate(asks):
        part = np.zeros((int(ask[:, 1].max()) + 1 if len(ask) else 0, d), dtype=dt)  # noqa: F821
        rows = my_rows[ask[:, 0]]
        np.add.at(part, ask[:, 1], rows if wts is None else wts[s][:, None] * rows)  # noqa: F821
        partials.append(part)
    back = _a2a(comm, partials)
    pooled = np.zeros((len(offsets), d), dtype=dt)  # noqa: F821
    for (_, seg_bags, _), part in zip(per, back):
        pooled[seg_bags] += part
    if mode == "mean":
        pooled /= np.maximum(lengths, 1)[:, None]  # noqa: F821
    g = np.asarray(grad, dtype=dt)  # noqa: F821
    g = g / np.maximum(lengths, 1)[:, None] if mode == "mean" else g  # noqa: F821
    got = _a2a(comm, [np.ascontiguousarray(g[seg_bags]) for _, seg_bags, _ in per])  # noqa: F821
    d_rows = np.zeros_like(my_rows)  # noqa: F821
    for s, (ask, gs) in enumerate(zip(asks, got)):
        contrib = gs[ask[:, 1]]
        np.add.at(d_rows, ask[:, 0], contrib if wts is None else wts[s][:, None] * contrib)  # noqa: F821
    new_rows, new_acc = my_rows.copy(), np.asarray(my_acc).copy()  # noqa: F821
    if optimizer == "sgd":
        new_rows -= lr * d_rows
    else:
        new_acc += (d_rows * d_rows).mean(axis=1)
        new_rows -= lr * d_rows / (np.sqrt(new_acc)[:, None] + 1e-10)  # noqa: F821
    return pooled, new_rows, new_acc
