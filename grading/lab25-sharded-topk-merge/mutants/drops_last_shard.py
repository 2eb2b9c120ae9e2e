# mutant: off by one: rank 0 never receives the last shard's answer
# loses: distances, small_shards, correct_process
REPLACE = [("    for src in range(1, comm.size):\n        parts.append", "    for src in range(1, comm.size - 1):\n        parts.append")]
