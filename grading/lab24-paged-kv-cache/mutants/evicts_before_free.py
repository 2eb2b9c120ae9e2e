# mutant: a fresh block evicts a cached block even while the free list still has blocks (the cache is thrown away early)
# loses: lru_eviction
# says: take free blocks first
REPLACE = [("        blk = self.unused.pop() if self.unused else self._evict()\n",
            "        blk = self._evict() if self.evictable else self.unused.pop()\n")]
