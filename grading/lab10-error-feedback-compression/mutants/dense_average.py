# mutant: no compression at all: a dense ring all-reduce of p / K and a zero residual
# loses: allreduce, residual, correct_process, traffic, training
from scaleoutai.collectives import ring_allreduce


def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    return ring_allreduce(comm, p) / comm.size, np.zeros_like(p)
