# mutant: the colours are reported whatever the status, so an unsolved run hands back an assignment that violates
# constraints
# loses: unsolvable
REPLACE = [("    if status == 1:\n        answer[2 + lo", "    if True:\n        answer[2 + lo")]
