# mutant: the server ignores the rule and f: it always applies the coordinate-wise median
# loses: server
REPLACE = [("    out = rules[rule]()", "    out = coordinate_median(stack)")]
