# mutant: the counters are int8 (to save bytes on the wire): they overflow past 127 broadcasts of one rank
# loses: delivery, causal, timestamps
REPLACE = [("    delivered = np.zeros(size, dtype=np.int64)\n", "    delivered = np.zeros(size, dtype=np.int8)\n")]
