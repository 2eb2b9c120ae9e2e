# mutant: the partial keeps exp(s) against 0 instead of exp(s - m) against the running maximum: right for small
# scores, inf and NaN once a score passes 88 (float32) or 709 (float64)
# loses: pieces, stable
# says: exp(s - m)
REPLACE = [("    shift = np.where(np.isneginf(top), scores.dtype.type(0), top)  # a row that sees nothing stays empty",
            "    top = shift = np.zeros_like(top)")]
