# mutant: ships every shard's rows to rank 0, which computes loss and gradient there: right numbers, data on the wire
# loses: communication
# says: not rows of X
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    if r == 0:
        Xs, ys = [X_shard], [y_shard]
        for src in range(1, K):
            Xs.append(comm.recv(src))
            ys.append(comm.recv(src))
        loss, g = local_gradient(np.concatenate(Xs), np.concatenate(ys), w)  # noqa: F821
        for dst in range(1, K):
            comm.send(np.append(g.astype(np.float64), loss), dst)
        return loss, g
    comm.send(X_shard, 0)
    comm.send(y_shard, 0)
    got = comm.recv(0)
    return float(got[-1]), got[:-1].astype(X_shard.dtype)
