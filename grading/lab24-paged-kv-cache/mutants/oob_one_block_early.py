# mutant: admit raises OutOfBlocks when the fresh blocks it needs are exactly those left (>= instead of >)
# loses: out_of_blocks
REPLACE = [("        if fresh > len(self.unused) + len(self.evictable) - idle:\n", "        if fresh and fresh >= len(self.unused) + len(self.evictable) - idle:\n")]
