# mutant: simultaneous updates: both players update against the same policy, re-matched once per iteration
# loses: tables, converges, process, random, messages
REPLACE = [("            update_player(regret, strat, sigma, w, player, t)\n            sigma = rm_plus(regret)",
            "            update_player(regret, strat, sigma, w, player, t)\n        sigma = rm_plus(regret)")]
