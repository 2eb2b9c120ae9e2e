# mutant: the rule asks the third-rank entries to be strictly below the counters (<), so most messages wait forever
# loses: rule, delivery, causal, process, timestamps
REPLACE = [("    ahead[sender] = 0\n    return bool(ahead.max() <= 0)", "    ahead[sender] = -1\n    return bool(ahead.max() < 0)")]
