# mutant: for even K the median takes the lower of the two middle values instead of their mean
# loses: median, server
REPLACE = [("    return np.median(V.astype(np.float64), axis=0).astype(V.dtype)",
            "    return np.sort(V, axis=0)[(len(V) - 1) // 2]")]
