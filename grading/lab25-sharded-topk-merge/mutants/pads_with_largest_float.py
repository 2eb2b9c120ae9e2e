# mutant: the answer is padded with the largest finite float instead of +inf
# loses: small_shards
REPLACE = [("    outD = np.full((D.shape[0], k), np.inf, dtype=D.dtype)", "    outD = np.full((D.shape[0], k), np.finfo(D.dtype).max, dtype=D.dtype)")]
