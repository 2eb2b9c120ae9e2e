# mutant: every rule returns float64, whatever the input's dtype (float32 gradients come back twice as large)
# loses: median, trimmed_mean, krum, multi_krum, server
# says: dtype
REPLACE = [("    return np.median(V.astype(np.float64), axis=0).astype(V.dtype)",
            "    return np.median(V.astype(np.float64), axis=0)"),
           ("    return kept.mean(axis=0).astype(V.dtype)", "    return kept.mean(axis=0)"),
           ("    return V64[np.sort(best)].mean(axis=0).astype(V.dtype)", "    return V64[np.sort(best)].mean(axis=0)")]
