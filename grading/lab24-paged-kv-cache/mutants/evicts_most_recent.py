# mutant: evicts the most recently cached block instead of the least recently used one
# loses: lru_eviction
# says: least recently used
REPLACE = [("        blk, _ = self.evictable.popitem(last=False)\n", "        blk, _ = self.evictable.popitem(last=True)\n")]
