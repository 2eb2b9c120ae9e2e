# mutant: no check of f, nu, tol, max_iter or the counts: geometric_median returns something for any arguments
# loses: limits
# says: raising ValueError
REPLACE = [("    if f < 0 or not 2 * f < K:\n        raise ValueError(f\"the geometric median tolerates f < K/2 attackers; got f={f} of K={K}\")\n", ""),
           ("    if not nu > 0 or not tol >= 0 or max_iter < 1:\n", "    if False:\n"),
           ("    if len(c) != K or (c < 0).any() or not c.sum() > 0:\n", "    if False:\n")]
