# mutant: the course's ring all-reduce (chapter 4, collectives.reduce_scatter + all_gather) adapted by hand:
# right sums, but 2(K-1) steps and 2(K-1) messages per rank, each to the right neighbour
# loses: bandwidth, latency, schedule
# says: a ring takes 2(K-1) steps
# score-at-most: 50
import numpy as np


def halving_doubling_allreduce(comm, x):
    K, r = comm.size, comm.rank
    bounds = np.concatenate([[0], np.cumsum([len(b) for b in np.array_split(np.empty(len(x)), K)])])
    blk = [slice(int(bounds[i]), int(bounds[i + 1])) for i in range(K)]
    acc = np.empty_like(x)
    right, left = (r + 1) % K, (r - 1) % K
    for s in range(K - 1):  # reduce-scatter
        i = (r - s - 2) % K
        comm.send((x if s == 0 else acc)[blk[(r - s - 1) % K]].copy(), right)
        acc[blk[i]] = comm.recv(left) + x[blk[i]]
    if K == 1:
        acc[...] = x
    for s in range(K - 1):  # all-gather
        comm.send(acc[blk[(r - s) % K]].copy(), right)
        acc[blk[(r - s - 1) % K]] = comm.recv(left)
    return acc
