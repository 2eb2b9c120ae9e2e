# mutant: right sums by the wrong algorithm: every bucket goes to rank 0, which sums and sends it back
# loses: messages
# says: gather
REPLACE = [
    ('flat = ring_allreduce(comm, np.concatenate([grads[name].ravel() for name in bucket]))',
     'flat = _via_root(comm, np.concatenate([grads[name].ravel() for name in bucket]))'),
]


def _via_root(comm, x):
    if comm.rank == 0:
        total = x.copy()
        for src in range(1, comm.size):
            total += comm.recv(src)
        for dst in range(1, comm.size):
            comm.send(total, dst)
        return total
    comm.send(x, 0)
    return comm.recv(0)
