# mutant: a block is keyed by its own B tokens, not by the whole prefix up to its end (its K/V depend on every earlier token)
# loses: prefix_hits, lru_eviction
# says: whole prefix
REPLACE = [("        while end < len(prompt) and tuple(prompt[:end]) in self.block_for:  # never the last token's block\n            reused.append(self.block_for[tuple(prompt[:end])])\n",
            "        while end < len(prompt) and tuple(prompt[end - B:end]) in self.block_for:\n            reused.append(self.block_for[tuple(prompt[end - B:end])])\n"),
           ("        key = tuple(prefix)\n", "        key = tuple(prefix[-self.B:])\n")]
