# mutant: recursive doubling (partner r XOR 2^i) that skips partners >= K: right only when K is a power of two
# loses: sharded, loss, stable, communication
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    K, r = comm.size, comm.rank
    n = len(y_shard)
    loss, g = local_gradient(X_shard, y_shard, w)  # noqa: F821
    total = np.concatenate([g.astype(np.float64) * n, [loss * n, float(n)]])
    mask = 1
    while mask < K:
        partner = r ^ mask
        if partner < K:
            total = total + comm.sendrecv(total, partner, partner)
        mask <<= 1
    N = total[-1]
    if N == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    return float(total[-2] / N), (total[:-2] / N).astype(X_shard.dtype)
