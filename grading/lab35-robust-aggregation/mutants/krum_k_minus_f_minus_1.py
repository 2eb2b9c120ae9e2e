# mutant: Krum scores each vector over its K - f - 1 nearest neighbours instead of K - f - 2
# loses: krum, multi_krum, server
REPLACE = [("    scores = np.sort(dist, axis=1)[:, :K - f - 2].sum(axis=1)",
            "    scores = np.sort(dist, axis=1)[:, :K - f - 1].sum(axis=1)")]
