# mutant: drops only the f largest values per coordinate (one side), so attackers sending small values stay in
# loses: trimmed_mean, server, correct_process
REPLACE = [("    kept = np.sort(V.astype(np.float64), axis=0)[f:K - f]",
            "    kept = np.sort(V.astype(np.float64), axis=0)[:K - f]")]
