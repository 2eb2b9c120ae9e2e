# mutant: the workers send their raw gradient once; rank 0 runs Weiszfeld alone and sends the aggregate back (right values, not the protocol of weighted sums)
# loses: traffic
# says: never the raw gradient
def robust_aggregate(comm, grad, count, f, nu, tol, max_iter):
    K = comm.size
    g = np.asarray(grad)  # noqa: F821
    if comm.rank != 0:
        comm.send(np.concatenate([g.astype(np.float64), [count]]), 0)  # noqa: F821
        return np.asarray(comm.recv(0)).astype(g.dtype)  # noqa: F821
    rows = [np.concatenate([g.astype(np.float64), [count]])] + [comm.recv(q) for q in range(1, K)]  # noqa: F821
    S = np.stack(rows)  # noqa: F821
    out = geometric_median(S[:, :-1], S[:, -1], f, nu, tol, max_iter)  # noqa: F821
    for q in range(1, K):
        comm.send(out, q)
    return out.astype(g.dtype)
