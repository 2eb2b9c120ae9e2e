# mutant: rank_epochs stacks the lists into uint16 to save memory: right below n = 65536, wrapped above
# loses: exactly_once
# says: too narrow
REPLACE = [("return np.array(rows, dtype=np.int64).reshape(len(rows), width)",
            "return np.array(rows, dtype=np.int64).astype(np.uint16).reshape(len(rows), width)")]
