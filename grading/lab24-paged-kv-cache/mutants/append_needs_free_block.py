# mutant: append_slot raises OutOfBlocks whenever the free list is empty, even when the token fits in its own last block
# loses: out_of_blocks
# says: OutOfBlocks with 0 free blocks and 0 needed
REPLACE = [("        tbl, L = self.tables[seq], self.lengths[seq]\n        copy_from = None\n",
            "        tbl, L = self.tables[seq], self.lengths[seq]\n        copy_from = None\n"
            "        if not self.free_list:\n            raise OutOfBlocks(\"no free block\")\n")]
