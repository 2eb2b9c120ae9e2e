# mutant: the deal probability 1/N^2 instead of 1/(N(N-1)): from zero the policies are the same (regret matching
# ignores a common scale), but a checkpoint's regrets are mixed with wrongly scaled new ones
# loses: tables, process, random, messages
REPLACE = [("    return w / kind.type(n * (n - 1))", "    return w / kind.type(n * n)")]
