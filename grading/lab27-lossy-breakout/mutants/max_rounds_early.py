# mutant: the round budget stops one round early (r == max_rounds - 1)
# loses: unsolvable
REPLACE = [("            elif r == max_rounds:", "            elif r == max_rounds - 1:")]
