# mutant: all-gathers the bits and the scale as two messages per hop: right values, a header too many
# loses: traffic
def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    bits, scale = sign_compress(p)
    every_bits = all_gather(comm, bits).reshape(comm.size, bits.size)
    scales = all_gather(comm, scale)
    total = np.zeros(p.size, dtype=p.dtype)
    for q in range(comm.size):
        total += sign_decompress(every_bits[q], scales[q:q + 1], p.size)
    return total / comm.size, p - sign_decompress(bits, scale, p.size)
