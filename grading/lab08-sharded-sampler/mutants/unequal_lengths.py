# mutant: takes order[r::K] of the unpadded order: every sample once, but ranks read different counts
# loses: exactly_once, spec, resume
# says: equal counts
import numpy as np


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)
    if drop_last:
        order = order[:K * (n // K)]
    return order[rank::K][start:].copy()


def rank_epochs(comm, n, seed, epochs, drop_last=False):
    return np.array([shard_indices(n, comm.size, comm.rank, int(e), seed, drop_last) for e in epochs], dtype=np.int64)
