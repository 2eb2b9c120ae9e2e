# mutant: Chapter 35's rules adapted by hand: rank 0 gathers the raw gradients and applies the coordinate-wise median (check_f's limit on f), no Weiszfeld steps, no weights
# loses: geometric_median, weighted, limits, server, traffic, correct_process
# says: the lab asks for the geometric median
# score-at-most: 50
def geometric_median(vectors, counts, f, nu, tol, max_iter):
    V = np.asarray(vectors)  # noqa: F821
    K = len(V)
    if f < 0 or not 2 * f < K:
        raise ValueError(f"median tolerates f < K/2 attackers; got f={f} of K={K}")
    V64 = V.astype(np.float64)  # noqa: F821
    V64 = np.where(np.isfinite(V64), V64, np.inf)  # noqa: F821
    return np.median(V64, axis=0).astype(V.dtype)  # noqa: F821


def robust_aggregate(comm, grad, count, f, nu, tol, max_iter):
    K = comm.size
    if comm.rank != 0:
        comm.send(np.asarray(grad), 0)  # noqa: F821
        return comm.recv(0)
    stack = np.stack([np.asarray(grad)] + [comm.recv(q) for q in range(1, K)])  # noqa: F821
    out = geometric_median(stack, None, f, nu, tol, max_iter)
    for q in range(1, K):
        comm.send(out, q)
    return out
