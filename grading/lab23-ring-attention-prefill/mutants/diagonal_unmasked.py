# mutant: the rank's own block is attended without the causal mask (a query sees the later positions of its chunk)
# loses: pieces, forward, tiny, stable, correct_process, random
REPLACE = [("    if causal:\n        seen =", "    if False:\n        seen =")]
