# mutant: reference counts in a uint8 array: the 256th sharer wraps the count to 0
# loses: refcounts
REPLACE = [("        self.counts = [0] * int(num_blocks)\n", "        self.counts = np.zeros(int(num_blocks), dtype=np.uint8)\n")]
