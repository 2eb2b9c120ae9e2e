# mutant: appends into a shared, partly filled last block instead of copying it first
# loses: copy_on_write
# says: sibling
REPLACE = [("        elif self.counts[tbl[-1]] > 1:\n", "        elif False:\n")]
