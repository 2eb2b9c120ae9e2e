# mutant: sends each sign as an int8 (+1 or -1) and the scale as 8 bytes: right values, 8x the bits
# loses: traffic
def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    bits, scale = sign_compress(p)
    signs = np.where(p >= 0, 1, -1).astype(np.int8)
    frame = np.concatenate([signs.view(np.uint8), scale.astype(np.float64).view(np.uint8)])
    every = all_gather(comm, frame).reshape(comm.size, frame.size)
    total = np.zeros(p.size, dtype=p.dtype)
    for q in range(comm.size):
        s = every[q, p.size:].copy().view(np.float64)[0]
        total += (every[q, :p.size].view(np.int8) * s).astype(p.dtype)
    return total / comm.size, p - sign_decompress(bits, scale, p.size)
