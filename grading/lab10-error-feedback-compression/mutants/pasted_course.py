# mutant: the course's top-k all-reduce with error feedback (topk_compress, topk_decompress and the TopK
#   branch of compressed_allreduce in scaleoutai.ml.compression) copied and adapted by hand to the lab's
#   signatures, with k = d/8 so that it sends about as many values as the lab sends bytes
# loses: bits, compressor, contraction, allreduce, residual, correct_process, traffic
# says: 1-bit scaled sign
# score-at-most: 50
def _k(d):
    return max(1, d // 8) if d else 0


def sign_compress(p):
    k = min(_k(p.size), p.size)
    idx = np.sort(np.argsort(-np.abs(p), kind="stable")[:k]).astype(np.int32)
    return idx, p[idx].copy()


def sign_decompress(idx, vals, d):
    out = np.zeros(d, dtype=vals.dtype)
    np.add.at(out, idx, vals)
    return out


def ef_sign_allreduce(comm, grad, residual):
    p = grad + residual
    idx, vals = sign_compress(p)
    all_idx, all_vals = all_gather(comm, idx), all_gather(comm, vals)
    avg = sign_decompress(all_idx, all_vals, p.size) / comm.size
    mine = sign_decompress(idx, vals, p.size)
    return avg.astype(grad.dtype, copy=False), p - mine
