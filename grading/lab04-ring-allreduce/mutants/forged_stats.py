# mutant: the gather-to-root algorithm that patches comm.stats to report a ring's traffic
# loses: bandwidth, send_recv_only
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
    else:
        comm.send(x, 0)
        total = comm.recv(0)
    comm.stats.messages_sent = 2 * (K - 1)
    comm.stats.bytes_sent = 0
    comm.stats.messages_received = 2 * (K - 1)
    return total
