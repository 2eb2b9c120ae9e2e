# mutant: everything goes to rank 0 and back (the wrong algorithm), and comm.stats is patched to halving-doubling's
# counts
# loses: bandwidth, latency, schedule
import numpy as np


def halving_doubling_allreduce(comm, x):
    K, r = comm.size, comm.rank
    if r:
        comm.send(x, 0)
        total = comm.recv(0)
    else:
        total = x + sum(comm.recv(s) for s in range(1, K)) if K > 1 else x.copy()
        [comm.send(total, d) for d in range(1, K)]
    comm.stats.messages_sent = comm.stats.messages_received = 2 * (K.bit_length() - 1)
    comm.stats.bytes_sent = 0
    return np.asarray(total, dtype=x.dtype)
