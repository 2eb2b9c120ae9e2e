# mutant: sends its whole shard and patches comm.stats to look like k pairs per query
# loses: traffic
def sharded_topk(comm, queries, shard, offset, k):
    if comm.rank != 0:
        comm.send(np.ascontiguousarray(shard), 0)  # noqa: F821
        comm.send(np.array([offset], dtype=np.int64), 0)  # noqa: F821
        comm.stats.bytes_sent = len(queries) * k * 12
        return None
    parts = [local_topk(queries, shard, offset, k)]  # noqa: F821
    for src in range(1, comm.size):
        s, off = comm.recv(src), comm.recv(src)
        parts.append(local_topk(queries, s, int(off[0]), k))  # noqa: F821
    return merge(parts, k)  # noqa: F821
