# mutant: local ids are not offset: each shard reports its own row numbers
# loses: ids, small_shards, correct_process, round1, threshold, round2
# says: offset
REPLACE = [("    rows = np.arange(len(shard), dtype=np.int64) + np.int64(offset)",
            "    rows = np.arange(len(shard), dtype=np.int64)")]
