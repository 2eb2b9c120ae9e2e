# mutant: the right sums by the wrong algorithm: everything to rank 0, which sums and sends back
# loses: bandwidth, send_recv_only
# says: 2(K-1)
import numpy as np


def ring_allreduce(comm, x):
    K, r = comm.size, comm.rank
    if K == 1:
        return x.copy()
    if r == 0:
        total = x.copy()
        for src in range(1, K):
            total = total + comm.recv(src)
        for dst in range(1, K):
            comm.send(total, dst)
        return total
    comm.send(x, 0)
    return comm.recv(0)
