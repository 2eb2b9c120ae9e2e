# mutant: accepts 2f = K (f = K/2 attackers), where the attackers can hold half the weight and no rule can tell them apart
# loses: limits
# says: 2f < K
REPLACE = [("    if f < 0 or not 2 * f < K:\n        raise ValueError(f\"the geometric median",
            "    if f < 0 or not 2 * f <= K:\n        raise ValueError(f\"the geometric median")]
