# mutant: admit takes its reused blocks before it checks that the fresh ones fit, and keeps them when it raises
# loses: out_of_blocks
# says: changed the cache first
REPLACE = [("        fresh = -(-len(prompt) // B) - len(reused)\n",
            "        fresh = -(-len(prompt) // B) - len(reused)\n        for blk in reused:\n            self.evictable.pop(blk, None)\n            self.counts[blk] += 1\n"),
           ("        idle = sum(1 for blk in reused if self.counts[blk] == 0)  # cached now, no longer available\n", "        idle = 0\n"),
           ("        for blk in reused:\n            self.evictable.pop(blk, None)\n            self.counts[blk] += 1\n        tbl =",
            "        tbl =")]
