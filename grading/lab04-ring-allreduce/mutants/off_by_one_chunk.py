# mutant: the all-gather starts one chunk late, so every rank ends with one stale chunk
# loses: correct_sim, correct_process, bandwidth, send_recv_only
import numpy as np


def ring_allreduce(comm, x):
    K, r = comm.size, comm.rank
    chunks = [c.copy() for c in np.array_split(x, K)]
    if K == 1:
        return x.copy()
    right, left = (r + 1) % K, (r - 1) % K
    for s in range(K - 1):
        comm.send(chunks[(r - s) % K], right)
        i = (r - s - 1) % K
        chunks[i] = chunks[i] + comm.recv(left)
    for s in range(K - 1):
        comm.send(chunks[(r - s) % K], right)
        chunks[(r - s - 1) % K] = comm.recv(left)
    return np.concatenate(chunks)
