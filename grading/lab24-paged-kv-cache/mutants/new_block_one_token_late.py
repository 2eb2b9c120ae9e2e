# mutant: takes a new block one token late (the first token of every new block overwrites slot 0 of the last)
# loses: tokens, copy_on_write, decoder, out_of_blocks
REPLACE = [("        if L % self.B == 0:\n            if not self.free_list:",
            "        if L % self.B == 0 and (not tbl or L > len(tbl) * self.B):\n            if not self.free_list:")]
