# mutant: the course's flat bucketed DDP step (parallel.ddp.bucketed_ddp_step with make_buckets and
# collectives.ring_allreduce), copied by hand: one ring over all K ranks per bucket, G ignored
# loses: cross_node, messages
# says: the lab asks for a two-level all-reduce in which only node leaders cross nodes
# score-at-most: 50
import numpy as np


def _make_buckets(grads, bucket_bytes):
    buckets, cur, size = [], [], 0
    for k in reversed(list(grads)):
        cur.append(k)
        size += grads[k].nbytes
        if size >= bucket_bytes:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)
    return buckets


def _ring_allreduce(comm, x):
    K, r = comm.size, comm.rank
    edges = np.cumsum([0] + [len(x) // K + (j < len(x) % K) for j in range(K)])
    blk = [slice(int(edges[j]), int(edges[j + 1])) for j in range(K)]
    acc = np.empty_like(x)
    right, left = (r + 1) % K, (r - 1) % K
    for s in range(K - 1):
        i = (r - s - 2) % K
        got = comm.sendrecv((x if s == 0 else acc)[blk[(r - s - 1) % K]], right, left)
        acc[blk[i]] = got + x[blk[i]]
    if K == 1:
        acc[...] = x
    for s in range(K - 1):
        acc[blk[(r - s - 1) % K]] = comm.sendrecv(acc[blk[(r - s) % K]].copy(), right, left)
    return acc


def hierarchical_allreduce(comm, grads, G, bucket_bytes):
    out = {}
    for keys in _make_buckets(grads, bucket_bytes):
        flat = _ring_allreduce(comm, np.concatenate([grads[k].ravel() for k in keys]))
        off = 0
        for k in keys:
            n = grads[k].size
            out[k] = flat[off:off + n].reshape(grads[k].shape)
            off += n
    return {k: out[k] for k in grads}
