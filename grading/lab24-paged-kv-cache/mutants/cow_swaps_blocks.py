# mutant: copy-on-write returns the fresh block as copy_from and writes into the old, shared one
# loses: copy_on_write
# says: copy_from
REPLACE = [("        self.lengths[seq] = L + 1\n        return tbl[-1], L % self.B, copy_from\n",
            "        self.lengths[seq] = L + 1\n        if copy_from is not None:\n"
            "            return copy_from, L % self.B, tbl[-1]\n        return tbl[-1], L % self.B, copy_from\n")]
