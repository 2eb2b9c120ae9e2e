# mutant: packs p > 0, so a zero coordinate is sent as -scale
# loses: bits, compressor, allreduce, residual
# says: sign(0)
REPLACE = [("    nonneg = np.greater_equal(p, 0)", "    nonneg = np.greater(p, 0)")]
