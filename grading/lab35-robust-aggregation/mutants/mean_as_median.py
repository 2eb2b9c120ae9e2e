# mutant: the coordinate-wise mean posing as the median: one attacker moves it anywhere
# loses: median, server
# says: left the range of the honest gradients
REPLACE = [("    return np.median(V.astype(np.float64), axis=0).astype(V.dtype)",
            "    return V.astype(np.float64).mean(axis=0).astype(V.dtype)")]
