# mutant: numbers its own cards 0 .. b-1 instead of lo .. lo+b-1
# loses: tables, converges, process, random
REPLACE = [("    cards = np.arange(lo, lo + regret.shape[0])", "    cards = np.arange(regret.shape[0])")]
