# mutant: sends the signs of p = grad + residual but the scale of the gradient alone
# loses: allreduce, residual, correct_process, training
def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    d, nbytes = p.size, -(-p.size // 8)
    bits, _ = sign_compress(p)
    _, scale = sign_compress(grad)
    frame = np.concatenate([bits, scale.view(np.uint8)])
    every = all_gather(comm, frame).reshape(comm.size, frame.size)
    total = np.zeros(d, dtype=p.dtype)
    for q in range(comm.size):
        total += sign_decompress(every[q, :nbytes], every[q, nbytes:].copy().view(p.dtype), d)
    return total / comm.size, p - sign_decompress(bits, scale, d)
