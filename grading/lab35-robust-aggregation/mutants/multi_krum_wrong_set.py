# mutant: multi-Krum averages the Krum winner and its m - 1 nearest neighbours instead of the m best-scored vectors
# loses: multi_krum
REPLACE = [("    best = np.argsort(scores, kind=\"stable\")[:m]",
            "    winner = int(np.argsort(scores, kind=\"stable\")[0])\n"
            "    best = np.concatenate([[winner], np.argsort(dist[winner], kind=\"stable\")[:m - 1]])")]
