# mutant: free forgets the first block of the sequence (it never returns to the free list or the cache)
# loses: no_leak, prefix_hits, lru_eviction
REPLACE = [("        for blk in reversed(self.tables.pop(seq)):\n", "        for blk in reversed(self.tables.pop(seq)[1:]):\n")]
