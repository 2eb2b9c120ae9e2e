# mutant: no check of f or m: trimmed_mean and krum return something for any f instead of raising ValueError
# loses: limits
# says: raising ValueError
REPLACE = [("    if f < 0 or not 2 * f < K:\n        raise ValueError(f\"trimmed_mean needs 0 <= f < K/2, got f={f} for K={K}\")\n", ""),
           ("    if f < 0 or not K > 2 * f + 2:\n        raise ValueError(f\"Krum needs K > 2f + 2, got K={K}, f={f}\")\n", ""),
           ("    if not 1 <= m <= K:\n        raise ValueError(f\"multi-Krum needs 1 <= m <= K, got m={m} for K={K}\")\n", "")]
