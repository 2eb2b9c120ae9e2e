# mutant: allocate takes blocks one by one and raises OutOfBlocks halfway, keeping what it took
# loses: out_of_blocks
REPLACE = [("        if need > len(self.free_list):\n            raise OutOfBlocks(f\"{need} blocks needed, {len(self.free_list)} free\")\n        self.tables[seq] = [self._take() for _ in range(need)]\n",
            "        got = []\n        for _ in range(need):\n            if not self.free_list:\n                raise OutOfBlocks(\"pool exhausted\")\n            got.append(self._take())\n        self.tables[seq] = got\n")]
