# mutant: table() returns the blocks sorted by number instead of in logical order
# loses: tokens, decoder
REPLACE = [("        return list(self.tables[seq])\n", "        return sorted(self.tables[seq])\n")]
