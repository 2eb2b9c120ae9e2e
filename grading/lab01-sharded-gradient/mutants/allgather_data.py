# mutant: every rank sends its rows to every other rank and computes the full gradient itself: right numbers, data on the wire
# loses: communication
# says: send gradients, not rows of X
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    for dst in range(K):
        if dst != r:
            comm.send(np.column_stack([X_shard, y_shard]), dst)
    parts = [np.column_stack([X_shard, y_shard]) if src == r else comm.recv(src) for src in range(K)]
    Xy = np.concatenate(parts)
    return local_gradient(Xy[:, :-1].astype(X_shard.dtype), Xy[:, -1].astype(X_shard.dtype), w)  # noqa: F821
