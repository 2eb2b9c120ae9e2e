# mutant: the median over the wrong axis: one median per worker (shape (K,)) instead of one per coordinate
# loses: median, server
# says: shape
REPLACE = [("    return np.median(V.astype(np.float64), axis=0).astype(V.dtype)",
            "    return np.median(V.astype(np.float64), axis=1).astype(V.dtype)")]
