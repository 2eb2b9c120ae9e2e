# mutant: the row count travels as its own int16 message to save bytes: it wraps once a shard passes 32767 rows
# loses: sharded
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    n = len(y_shard)
    g = local_gradient(X_shard, y_shard, w).astype(np.float64) * n  # noqa: F821
    count = np.array([n]).astype(np.int16)
    if r == 0:
        for src in range(1, K):
            g = g + comm.recv(src)
            count = count + comm.recv(src)
        for dst in range(1, K):
            comm.send(g, dst)
            comm.send(count, dst)
    else:
        comm.send(g, 0)
        comm.send(count, 0)
        g, count = comm.recv(0), comm.recv(0)
    N = float(count[0])
    return (g / N if N else np.zeros_like(g)).astype(X_shard.dtype)
