# mutant: a cached block reused by admit stays in the eviction order although a sequence holds it again
# loses: tokens, no_leak, prefix_hits, lru_eviction
REPLACE = [("        for blk in reused:\n            self.evictable.pop(blk, None)\n            self.counts[blk] += 1\n",
            "        for blk in reused:\n            self.counts[blk] += 1\n")]
