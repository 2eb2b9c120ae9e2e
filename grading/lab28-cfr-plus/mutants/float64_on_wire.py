# mutant: the reach blocks travel as float64 whatever the tables' dtype (twice the bytes on float32 tables)
# loses: messages
REPLACE = [("    parts[comm.rank] = np.ascontiguousarray(block)",
            "    parts[comm.rank] = np.ascontiguousarray(block, dtype=np.float64)")]
