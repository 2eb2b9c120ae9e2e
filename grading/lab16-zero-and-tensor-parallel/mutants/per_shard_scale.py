# mutant: one scale for the whole shard (max|shard|/127, repeated per block): small parameters lose their digits
# loses: weights_sim, weights_process, int8_wire
# says: scale max|block|/127
REPLACE = [("        top = np.abs(part).max()\n", "        top = np.abs(x).max()\n")]
