# mutant: only the upper limit of f is checked: f = -1 is accepted (trimmed_mean keeps a wrapped slice, Krum scores over K - 1 neighbours)
# loses: limits
# says: raising ValueError
REPLACE = [("    if f < 0 or not 2 * f < K:", "    if not 2 * f < K:"),
           ("    if f < 0 or not K > 2 * f + 2:", "    if not K > 2 * f + 2:")]
