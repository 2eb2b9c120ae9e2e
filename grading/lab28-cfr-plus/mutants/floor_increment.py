# mutant: floors this iteration's regret instead of the cumulative one: R += max(r, 0), so regret never falls
# loses: tables, converges, process, random, messages
# says: floors the regrets at zero
REPLACE = [("                regret[:, hi, a] = np.maximum(regret[:, hi, a] + (kids[a] - node), 0)",
            "                regret[:, hi, a] = regret[:, hi, a] + np.maximum(kids[a] - node, 0)")]
