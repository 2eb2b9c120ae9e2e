# mutant: global ids held in int32: right below 2^31, wrapped to negative numbers beyond
# loses: ids
# says: int64
REPLACE = [("    gid = np.arange(offset, offset + len(shard), dtype=np.int64)",
            "    gid = (offset + np.arange(len(shard))).astype(np.int32)"),
           ("    ids = np.empty((len(queries), m), dtype=np.int64)", "    ids = np.empty((len(queries), m), dtype=np.int32)")]
