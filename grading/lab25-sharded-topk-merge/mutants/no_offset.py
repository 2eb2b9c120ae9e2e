# mutant: local ids are not offset: each shard reports its own row numbers
# loses: ids, small_shards, correct_process
# says: offset
REPLACE = [("    gid = np.arange(offset, offset + len(shard), dtype=np.int64)",
            "    gid = np.arange(0, len(shard), dtype=np.int64)")]
