# mutant: the right sums by the wrong algorithm: everything to rank 0, which sums and sends back
# loses: bandwidth, latency, schedule
# says: recursive halving-doubling sends
import numpy as np


def halving_doubling_allreduce(comm, x):
    K, r = comm.size, comm.rank
    if K == 1:
        return x.copy()
    if r == 0:
        total = x.copy()
        for s in range(1, K):
            total = total + comm.recv(s)
        for d in range(1, K):
            comm.send(total, d)
        return total
    comm.send(x, 0)
    return comm.recv(0)
