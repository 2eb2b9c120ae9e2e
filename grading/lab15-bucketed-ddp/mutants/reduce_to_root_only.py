# mutant: a reduce, not an all-reduce: rank 0 gets the sums, every other rank keeps its own gradients
# loses: allreduce, train_sim, train_process, messages, frozen, own_code
# says: rank 1
REPLACE = [
    ('flat = ring_allreduce(comm, np.concatenate([grads[name].ravel() for name in bucket]))',
     'flat = _reduce_to_root(comm, np.concatenate([grads[name].ravel() for name in bucket]))'),
]


def _reduce_to_root(comm, x):
    if comm.rank == 0:
        total = x.copy()
        for src in range(1, comm.size):
            total += comm.recv(src)
        return total
    comm.send(x, 0)
    return x.copy()
