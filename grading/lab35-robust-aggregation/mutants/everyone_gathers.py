# mutant: no server: every rank sends its gradient to every other rank and aggregates itself (right values, K - 1 messages per rank)
# loses: traffic
# says: to rank 0 once
def robust_aggregate(comm, grad, rule, f):
    K, r = comm.size, comm.rank
    grad = np.asarray(grad)  # noqa: F821
    for q in range(K):
        if q != r:
            comm.send(grad, q)
    stack = np.stack([grad if q == r else comm.recv(q) for q in range(K)])  # noqa: F821
    pick = {"median": lambda: coordinate_median(stack), "trimmed_mean": lambda: trimmed_mean(stack, f),  # noqa: F821
            "krum": lambda: krum(stack, f, 1), "multi_krum": lambda: krum(stack, f, K - f)}  # noqa: F821
    return pick[rule]()
