# mutant: assumes every shard holds at least k vectors (a partition at k - 1 crashes on short shards)
# loses: small_shards
def local_topk(queries, shard, offset, k):
    queries, shard = np.atleast_2d(queries), np.asarray(shard)  # noqa: F821
    dists, ids = [], []
    for q in queries:
        d = ((shard - q) ** 2).sum(1)
        cut = np.partition(d, k - 1)[k - 1]  # noqa: F821
        gid = np.arange(offset, offset + len(shard), dtype=np.int64)  # noqa: F821
        keep = d <= cut
        order = np.lexsort((gid[keep], d[keep]))[:k]  # noqa: F821
        dists.append(d[keep][order])
        ids.append(gid[keep][order])
    return np.array(dists), np.array(ids, dtype=np.int64)  # noqa: F821
