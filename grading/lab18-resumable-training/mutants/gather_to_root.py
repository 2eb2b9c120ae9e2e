# mutant: the gradients are gathered to rank 0, summed there and sent back: right numbers, other traffic
# loses: resume, intact
def allreduce_sum(comm, x):
    x = np.asarray(x)  # noqa: F821
    if comm.rank == 0:
        total = x.copy()
        for r in range(1, comm.size):
            total = total + comm.recv(r)
        for r in range(1, comm.size):
            comm.send(total, r)
        return total
    comm.send(x, 0)
    return comm.recv(0)
