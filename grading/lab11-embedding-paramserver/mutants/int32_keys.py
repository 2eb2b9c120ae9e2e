# mutant: shard_of casts the keys to int32: right below 2**31, wrapped (and sent to the wrong server) beyond
# loses: shard_rule
# says: too narrow
REPLACE = [("keys = np.asarray(keys, dtype=np.int64)", "keys = np.asarray(keys, dtype=np.int32)")]
