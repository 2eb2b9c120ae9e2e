# mutant: copy-on-write of every partly filled last block, shared or not (refcount >= 1 instead of > 1)
# loses: copy_on_write
# says: no other sequence holds it
REPLACE = [("        elif self.counts[tbl[-1]] > 1:\n", "        elif self.counts[tbl[-1]] >= 1:\n")]
