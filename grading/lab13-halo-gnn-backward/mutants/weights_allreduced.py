# mutant: every rank all-reduces the weight gradients and returns the sum (the grader adds the K shares itself)
# loses: weight_grads, small, process, random, halo_traffic
# says: own rows only
_reference_backward = halo_backward  # noqa: F821


def halo_backward(comm, ctx, dOut):
    dX, *shares = _reference_backward(comm, ctx, dOut)
    flat = np.concatenate([s.ravel() for s in shares])  # noqa: F821
    total = flat.copy()
    for j in range(comm.size):
        if j != comm.rank:
            comm.send(flat, j)
    for j in range(comm.size):
        if j != comm.rank:
            total = total + comm.recv(j)
    a, b = shares[0].size, shares[0].size + shares[1].size
    return dX, total[:a].reshape(shares[0].shape), total[a:b], total[b:].reshape(shares[2].shape)
