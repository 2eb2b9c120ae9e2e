# mutant: among equal Krum scores the higher index wins (argsort of the reversed scores)
# loses: krum, multi_krum, server
# says: lower index
REPLACE = [("    best = np.argsort(scores, kind=\"stable\")[:m]",
            "    best = K - 1 - np.argsort(scores[::-1], kind=\"stable\")[:m]")]
