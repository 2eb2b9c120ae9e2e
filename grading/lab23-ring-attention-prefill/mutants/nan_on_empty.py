# mutant: merge_partials rescales by exp(m - max) even when both sides are empty: -inf - -inf is NaN
# loses: pieces
# says: empty piece
REPLACE = [("    ref = np.where(np.isneginf(best), best.dtype.type(0), best)  # both empty: no -inf - -inf",
            "    ref = best")]
