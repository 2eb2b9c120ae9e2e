# mutant: every rank returns the whole epoch's order: each sample is read K times
# loses: exactly_once, spec, resume, no_messages
import numpy as np


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    return np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)[start:]


def rank_epochs(comm, n, seed, epochs, drop_last=False):
    return np.array([shard_indices(n, comm.size, comm.rank, int(e), seed, drop_last) for e in epochs], dtype=np.int64)
