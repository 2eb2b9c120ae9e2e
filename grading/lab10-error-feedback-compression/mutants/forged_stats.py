# mutant: sends dense vectors and patches comm.stats to look like ceil(d/8) bytes per hop
# loses: traffic
def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    every = all_gather(comm, p).reshape(comm.size, p.size)
    total = np.zeros_like(p)
    for q in range(comm.size):
        total += sign_decompress(*sign_compress(every[q]), p.size)
    comm.stats.bytes_sent = (comm.size - 1) * (-(-p.size // 8) + p.itemsize)
    return total / comm.size, p - sign_decompress(*sign_compress(p), p.size)
