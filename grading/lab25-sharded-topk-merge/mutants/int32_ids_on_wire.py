# mutant: the ids travel as int32 to save bytes: right below 2^31, wrapped to negative numbers beyond
# loses: ids, small_shards, round1, round2
# says: int64
REPLACE = [("        comm.send(np.ascontiguousarray(ids[:, :m]), 0)",
            "        comm.send(np.ascontiguousarray(ids[:, :m], dtype=np.int32), 0)"),
           ("    flat_i = np.ascontiguousarray(rest_i[keep], dtype=np.int64)",
            "    flat_i = np.ascontiguousarray(rest_i[keep], dtype=np.int32)")]
