# mutant: copy-on-write puts the old block on the free list although other sequences still hold it
# loses: no_leak
REPLACE = [("            tbl[-1] = self._take()\n            self._release(copy_from)\n",
            "            tbl[-1] = self._take()\n            self.counts[copy_from] -= 1\n            self.free_list.append(copy_from)\n")]
