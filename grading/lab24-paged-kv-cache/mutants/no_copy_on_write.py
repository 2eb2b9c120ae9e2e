# mutant: appends into a shared, partly filled last block instead of copying it first
# loses: copy_on_write
# says: sibling
REPLACE = [("        cow = pos % B > 0 and self.counts[tbl[-1]] > 1  # a shared, partly filled last block\n",
            "        cow = False\n")]
