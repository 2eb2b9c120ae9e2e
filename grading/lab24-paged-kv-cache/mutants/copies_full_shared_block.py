# mutant: a shared last block is copied even when it is full (the shared test comes before the block-boundary test)
# loses: copy_on_write
# says: full last block
REPLACE = [("        if L % self.B == 0:\n            if not self.free_list:\n                raise OutOfBlocks(\"no free block for a new block\")",
            "        if L % self.B == 0 and not (tbl and self.counts[tbl[-1]] > 1):\n            if not self.free_list:\n                raise OutOfBlocks(\"no free block for a new block\")")]
