# mutant: scales the signs by ||p||_2 / d instead of ||p||_1 / d
# loses: compressor, contraction, allreduce, residual, correct_process
# says: delta-approximate
REPLACE = [("    total = np.abs(p).sum(dtype=p.dtype)\n", "    total = np.sqrt(np.sum(p * p, dtype=p.dtype))\n")]
