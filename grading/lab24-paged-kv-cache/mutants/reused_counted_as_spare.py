# mutant: admit counts the cached blocks it reuses as available for its fresh blocks too
# loses: out_of_blocks
# says: where the pool is too small
REPLACE = [("        idle = sum(1 for blk in reused if self.counts[blk] == 0)  # cached now, no longer available\n",
            "        idle = 0\n")]
