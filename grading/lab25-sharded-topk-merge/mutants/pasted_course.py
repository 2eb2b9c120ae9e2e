# mutant: the chapter's scatter-gather pasted and adapted by hand (vectors.search_shard with merge="root",
# merge_topk, select_topk, local_topk): exact answers, but every rank sends its k pairs per query in one round
# loses: round1, threshold, round2
# says: two-round threshold protocol
# score-at-most: 50
def _select(dist, ids, k):
    D, I = np.full(k, np.inf, dtype=dist.dtype), np.full(k, -1, dtype=np.int64)  # noqa: F821
    if dist.size == 0:
        return D, I
    if dist.size > k:  # keep every candidate tied with the k-th: the id decides among them
        cut = np.partition(dist, k - 1)[k - 1]  # noqa: F821
        keep = dist <= cut
        dist, ids = dist[keep], ids[keep]
    order = np.lexsort((ids, dist))[:k]  # noqa: F821
    D[:order.size], I[:order.size] = dist[order], ids[order]
    return D, I


def _knn(q, b, k):
    D = np.full((len(q), k), np.inf, dtype=np.result_type(q, b))  # noqa: F821
    I = np.full((len(q), k), -1, dtype=np.int64)  # noqa: F821
    ids = np.arange(len(b), dtype=np.int64)  # noqa: F821
    diff = q[:, None, :] - b[None, :, :]
    dist = np.sum(diff * diff, axis=-1)  # noqa: F821
    for r in range(dist.shape[0]):
        D[r], I[r] = _select(dist[r], ids, k)
    return D, I


def _merge_topk(parts, k):
    D = np.concatenate([p[0] for p in parts], axis=1)  # noqa: F821
    I = np.concatenate([p[1] for p in parts], axis=1)  # noqa: F821
    outD = np.full((D.shape[0], k), np.inf, dtype=D.dtype)  # noqa: F821
    outI = np.full((D.shape[0], k), -1, dtype=np.int64)  # noqa: F821
    for r in range(D.shape[0]):
        real = I[r] >= 0
        outD[r], outI[r] = _select(D[r][real], I[r][real], k)
    return outD, outI


def two_round_topk(comm, queries, shard, offset, k):
    q = np.atleast_2d(np.asarray(queries))  # noqa: F821
    b = np.asarray(shard).reshape(-1, q.shape[1])  # noqa: F821
    m = min(k, len(b))
    if m:
        D, I = _knn(q, b, m)
    else:
        D, I = np.empty((len(q), 0), dtype=np.result_type(q, b)), np.empty((len(q), 0), dtype=np.int64)  # noqa: F821
    I = (I + offset).astype(np.int64)  # noqa: F821
    if comm.rank:
        comm.send(D, 0)
        comm.send(I, 0)
        return None
    parts = [(D, I)] + [(comm.recv(src), comm.recv(src)) for src in range(1, comm.size)]
    return _merge_topk(parts, k)
