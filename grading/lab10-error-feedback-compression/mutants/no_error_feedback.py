# mutant: plain scaled signSGD: the residual is neither added nor kept
# loses: allreduce, residual, correct_process, training
REPLACE = [("    p = grad + residual\n", "    p = grad + 0 * residual\n"),
           ("    return avg, (p - mine).astype(grad.dtype, copy=False)\n", "    return avg, np.zeros_like(grad)\n")]
