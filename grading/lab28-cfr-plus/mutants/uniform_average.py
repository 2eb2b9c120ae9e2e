# mutant: regret matching+ with the chapter's uniform average: the strategy sum grows by pi * sigma, not t * pi * sigma
# loses: tables, converges, process, random, messages
# says: by the iteration t
REPLACE = [("        strat[:, hi, :] += (kind.type(t) * np.asarray(pi, dtype=kind))[..., None] * sigma[:, hi, :]",
            "        strat[:, hi, :] += np.asarray(pi, dtype=kind)[..., None] * sigma[:, hi, :]")]
