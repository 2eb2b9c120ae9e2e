# mutant: every rank gathers everything itself (as in everyone_gathers) and patches comm.stats to look like the server pattern
# loses: traffic
def robust_aggregate(comm, grad, rule, f):
    K, r = comm.size, comm.rank
    grad = np.asarray(grad)  # noqa: F821
    for q in range(K):
        if q != r:
            comm.send(grad, q)
    stack = np.stack([grad if q == r else comm.recv(q) for q in range(K)])  # noqa: F821
    comm.stats.messages_sent = K - 1 if r == 0 else 1
    comm.stats.bytes_sent = comm.stats.messages_sent * grad.nbytes
    pick = {"median": lambda: coordinate_median(stack), "trimmed_mean": lambda: trimmed_mean(stack, f),  # noqa: F821
            "krum": lambda: krum(stack, f, 1), "multi_krum": lambda: krum(stack, f, K - f)}  # noqa: F821
    return pick[rule]()
