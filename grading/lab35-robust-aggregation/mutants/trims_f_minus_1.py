# mutant: trims f - 1 values from each end instead of f: one attacker too many survives the trim
# loses: trimmed_mean, server, correct_process
REPLACE = [("    kept = np.sort(V.astype(np.float64), axis=0)[f:K - f]",
            "    kept = np.sort(V.astype(np.float64), axis=0)[max(f - 1, 0):K - max(f - 1, 0)]")]
