# mutant: the chapter's sharded least-squares gradient (linear_mse_gradient, weights N_k/N, sum and send back), adapted by hand to shard-only ranks and a (loss, gradient) return
# loses: local, sharded, loss, stable, communication
# says: the lab asks for the logistic-regression loss
# score-at-most: 50
import numpy as np


def local_gradient(X_shard, y_shard, w):
    N = X_shard.shape[0]
    dtype = np.result_type(X_shard, y_shard, w)
    if N == 0:
        return 0.0, np.zeros(X_shard.shape[1], dtype=dtype)
    r = X_shard @ w - y_shard
    return float(np.mean(r ** 2)), ((2.0 / N) * (X_shard.T @ r)).astype(dtype, copy=False)


def sharded_gradient(comm, X_shard, y_shard, w):
    n = len(y_shard)
    loss, g = local_gradient(X_shard, y_shard, w)
    packed = np.concatenate([g.astype(np.float64) * n, [loss * n, float(n)]])
    if comm.rank == 0:
        for src in range(1, comm.size):
            packed = packed + comm.recv(src)
        for dst in range(1, comm.size):
            comm.send(packed, dst)
    else:
        comm.send(packed, 0)
        packed = comm.recv(0)
    N = packed[-1]
    if N == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    return float(packed[-2] / N), (packed[:-2] / N).astype(X_shard.dtype)
