# mutant: free releases a sequence's blocks first to last, so its head (the most shared part) is evicted before its tail
# loses: lru_eviction
# says: least recently used
REPLACE = [("        for blk in reversed(self.tables.pop(seq)):\n", "        for blk in self.tables.pop(seq):\n")]
