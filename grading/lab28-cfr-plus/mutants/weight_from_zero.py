# mutant: the linear weight counted from 0 (t - 1) instead of the iteration number t
# loses: tables, process, random, messages
REPLACE = [("            update_player(regret, strat, sigma, w, player, t)",
            "            update_player(regret, strat, sigma, w, player, t - 1)")]
