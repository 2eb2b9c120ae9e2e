# mutant: keeps p - sign(p) as the residual, forgetting that C(p) is the scaled sign
# loses: allreduce, residual, correct_process, training
REPLACE = [("    return avg, (p - mine).astype(grad.dtype, copy=False)\n",
            "    return avg, (p - np.where(p >= 0, 1, -1)).astype(grad.dtype, copy=False)\n")]
