# mutant: fork gives the child fresh blocks (a copy) instead of sharing: no memory saved
# loses: sharing, tokens, copy_on_write, refcounts, no_leak, out_of_blocks
REPLACE = [("        for b in self.tables[parent]:\n            self.counts[b] += 1\n        self.tables[child] = list(self.tables[parent])\n",
            "        self.tables[child] = [self._take() for _ in self.tables[parent]]\n")]
