# mutant: right lists, but rank 0 draws every epoch's order and sends it to the other ranks
# loses: no_messages
# says: needs no message
import numpy as np


def rank_epochs(comm, n, seed, epochs, drop_last=False):
    K, r = comm.size, comm.rank
    if r == 0:
        table = np.array([[shard_indices(n, K, q, int(e), seed, drop_last)  # noqa: F821 - the reference above
                            for e in epochs] for q in range(K)], dtype=np.int64)
        for q in range(1, K):
            comm.send(table[q], q)
        return table[0]
    return comm.recv(0)
