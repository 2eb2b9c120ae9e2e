# mutant: packs ~np.signbit(p): right for every number except -0.0, which is sent as -scale
# loses: bits, compressor
# says: negative zero
REPLACE = [("    nonneg = np.greater_equal(p, 0)", "    nonneg = ~np.signbit(p)")]
