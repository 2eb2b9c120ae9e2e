# mutant: all-gathers every rank's dense p and compresses on arrival: right answer, dense traffic
# loses: traffic
def ef_topk_allreduce(comm, grad, k, residual):
    p = grad + residual
    every = all_gather(comm, p).reshape(comm.size, p.size)
    total = np.zeros_like(p)
    for q in range(comm.size):
        idx, vals = topk_compress(every[q], k)
        total[idx] += vals
    idx, vals = topk_compress(p, k)
    mine = np.zeros_like(p)
    mine[idx] = vals
    return total / comm.size, p - mine
