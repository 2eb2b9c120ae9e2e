# mutant: starts from zero tables and iteration 1 instead of the checkpoint it is handed
# loses: tables, process, random, messages
REPLACE = [("    regret, strat = np.array(regret, copy=True), np.array(strat, copy=True)",
            "    regret, strat, t0 = np.zeros_like(regret), np.zeros_like(strat), 0")]
