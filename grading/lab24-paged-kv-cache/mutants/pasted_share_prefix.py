# mutant: the chapter's share_prefix/publish: prefixes are shared only while a sequence holds them; a freed block forgets its prefix and goes back to the free list
# loses: prefix_hits, lru_eviction, decoder
# says: keep a freed sequence's full blocks cached
# score-at-most: 50
REPLACE = [("        if blk in self.prefix_of:\n            self.evictable[blk] = None  # the most recently used end\n        else:\n            self.unused.append(blk)\n",
            "        if blk in self.prefix_of:\n            del self.block_for[self.prefix_of.pop(blk)]\n        self.unused.append(blk)\n")]
