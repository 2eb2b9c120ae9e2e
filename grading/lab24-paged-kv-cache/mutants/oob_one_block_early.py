# mutant: allocate raises OutOfBlocks when the blocks it needs are exactly the free ones (>= instead of >)
# loses: out_of_blocks
REPLACE = [("        if need > len(self.free_list):\n", "        if need >= len(self.free_list) and need:\n")]
