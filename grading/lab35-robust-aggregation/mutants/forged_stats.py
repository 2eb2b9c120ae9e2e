# mutant: every rank gathers every gradient and runs Weiszfeld itself, then patches comm.stats to look like the protocol
# loses: traffic
def robust_aggregate(comm, grad, count, f, nu, tol, max_iter):
    K, r = comm.size, comm.rank
    row = np.concatenate([np.asarray(grad, dtype=np.float64), [count]])  # noqa: F821
    for q in range(K):
        if q != r:
            comm.send(row, q)
    S = np.stack([row if q == r else comm.recv(q) for q in range(K)])  # noqa: F821
    comm.stats.messages_sent = (K - 1) * (max_iter + 1) if r == 0 else max_iter + 1
    comm.stats.bytes_sent = comm.stats.messages_sent * row.nbytes
    return geometric_median(S[:, :-1], S[:, -1], f, nu, tol, max_iter).astype(np.asarray(grad).dtype)  # noqa: F821
