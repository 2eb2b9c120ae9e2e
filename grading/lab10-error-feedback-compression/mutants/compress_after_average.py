# mutant: averages the dense p with a ring all-reduce, then compresses the average (and keeps a global residual)
# loses: allreduce, residual, correct_process, traffic
from scaleoutai.collectives import ring_allreduce


def ef_topk_allreduce(comm, grad, k, residual):
    p = grad + residual
    avg = ring_allreduce(comm, p) / comm.size
    idx, vals = topk_compress(avg, k)
    out = np.zeros_like(p)
    out[idx] = vals
    return out, p - out
