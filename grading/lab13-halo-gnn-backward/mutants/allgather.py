# mutant: every rank sends its rows, in-edges and dOut to every other rank and computes the whole graph
# loses: halo_traffic
# says: no gather of the whole matrix
def _everything(comm, a):
    parts_ = [None] * comm.size
    parts_[comm.rank] = a
    for j in range(comm.size):
        if j != comm.rank:
            comm.send(np.ascontiguousarray(a), j)  # noqa: F821
    for j in range(comm.size):
        if j != comm.rank:
            parts_[j] = comm.recv(j)
    return np.concatenate(parts_)  # noqa: F821


def halo_forward(comm, X_own, edges_in, parts, W_l, b_l, W_r):
    parts = np.asarray(parts, dtype=np.int64)  # noqa: F821
    order = np.argsort(parts, kind="stable")  # noqa: F821
    X = np.empty((len(parts), X_own.shape[1]), X_own.dtype)  # noqa: F821
    X[order] = _everything(comm, X_own)
    e = _everything(comm, np.asarray(edges_in, dtype=np.int64).reshape(-1, 2))  # noqa: F821
    deg = np.bincount(e[:, 1], minlength=len(parts))  # noqa: F821
    agg = np.zeros_like(X)  # noqa: F821
    np.add.at(agg, e[:, 1], X[e[:, 0]])  # noqa: F821
    agg /= np.maximum(deg, 1)[:, None].astype(X.dtype)  # noqa: F821
    mine = parts == comm.rank
    return (agg @ W_l + b_l + X @ W_r)[mine], (X, agg, e, deg, order, mine, W_l, W_r)


def halo_backward(comm, ctx, dOut):
    X, agg, e, deg, order, mine, W_l, W_r = ctx
    G = np.empty((len(X), W_l.shape[1]), X.dtype)  # noqa: F821
    G[order] = _everything(comm, np.asarray(dOut, dtype=X.dtype).reshape(-1, W_l.shape[1]))  # noqa: F821
    S = G / np.maximum(deg, 1)[:, None].astype(X.dtype)  # noqa: F821
    dh = np.zeros((len(X), W_l.shape[1]), X.dtype)  # noqa: F821
    np.add.at(dh, e[:, 0], S[e[:, 1]])  # noqa: F821
    dX = (dh @ W_l.T + G @ W_r.T)[mine]
    return dX, agg[mine].T @ G[mine], G[mine].sum(0), X[mine].T @ G[mine]
