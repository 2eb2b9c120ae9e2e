# mutant: free forgets the last block of the sequence (it never returns to the free list)
# loses: no_leak
REPLACE = [("        for b in self.tables.pop(seq):\n", "        for b in self.tables.pop(seq)[:-1]:\n")]
