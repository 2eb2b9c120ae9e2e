# mutant: every rank sends its whole shard to rank 0, which searches everything itself
# loses: round1, threshold, round2
# says: two-round threshold protocol
def two_round_topk(comm, queries, shard, offset, k):
    if comm.rank != 0:
        comm.send(np.ascontiguousarray(shard), 0)  # noqa: F821
        comm.send(np.array([offset], dtype=np.int64), 0)  # noqa: F821
        return None
    rows = [[local_topk(queries, shard, offset, k)[i][q] for i in (0, 1)] for q in range(len(queries))]  # noqa: F821
    for src in range(1, comm.size):
        s, off = comm.recv(src), comm.recv(src)
        d, i = local_topk(queries, s, int(off[0]), k)  # noqa: F821
        rows = [r + [d[q], i[q]] for q, r in enumerate(rows)]
    pieces = [[(r[j], r[j + 1]) for j in range(0, len(r), 2)] for r in rows]
    return merge_rows(pieces, k, np.result_type(queries, shard))  # noqa: F821
