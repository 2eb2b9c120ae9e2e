# mutant: the rule checks only that the message is the sender's next one (FIFO order), not the causes on third ranks
# loses: rule, causal
REPLACE = [("    return bool(ahead.max() <= 0)", "    return True")]
