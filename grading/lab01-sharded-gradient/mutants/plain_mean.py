# mutant: averages the shard gradients without weighting by shard size (wrong for uneven shards)
# loses: sharded, communication
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    g = local_gradient(X_shard, y_shard, w).astype(np.float64)  # noqa: F821
    if r == 0:
        total = g
        for src in range(1, K):
            total = total + comm.recv(src)
        for dst in range(1, K):
            comm.send(total, dst)
    else:
        comm.send(g, 0)
        total = comm.recv(0)
    return (total / K).astype(X_shard.dtype)
