# mutant: plain top-k: the residual is neither added nor kept
# loses: allreduce, residual, correct_process, training
REPLACE = [("    p = grad + residual\n", "    p = grad + 0 * residual\n"), ("    return total / comm.size, p - mine\n", "    return total / comm.size, np.zeros_like(p)\n")]
