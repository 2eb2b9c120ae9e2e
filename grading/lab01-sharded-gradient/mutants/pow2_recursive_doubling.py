# mutant: recursive doubling (partner r XOR 2^i) that skips partners >= K: right only when K is a power of two
# loses: sharded, communication
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    n = len(y_shard)
    total = np.append(local_gradient(X_shard, y_shard, w).astype(np.float64) * n, float(n))  # noqa: F821
    mask = 1
    while mask < K:
        partner = r ^ mask
        if partner < K:
            total = total + comm.sendrecv(total, partner, partner)
        mask <<= 1
    N = total[-1]
    return (total[:-1] / N if N else np.zeros_like(total[:-1])).astype(X_shard.dtype)
