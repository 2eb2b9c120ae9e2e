# mutant: returns its whole split plus what it received, not only the pairs it owns
# loses: complete, placement, correct_process, traffic
REPLACE = [("    mine = list(outgoing[r])\n", "    mine = list(pairs)\n")]
