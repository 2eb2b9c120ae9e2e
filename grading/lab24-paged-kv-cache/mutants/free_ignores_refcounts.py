# mutant: free returns every block of the sequence to the free list, shared or not
# loses: no_leak
REPLACE = [("        for b in self.tables.pop(seq):\n            self._release(b)\n",
            "        for b in self.tables.pop(seq):\n            self.counts[b] = 0\n            self.free_list.append(b)\n")]
