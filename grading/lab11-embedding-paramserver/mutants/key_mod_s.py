# mutant: hash-like sharding key % S instead of the lab's contiguous blocks
# loses: shard_rule, bsp_exact, exactly_once, pulls_current, staleness, schedule, owners, sparse
# says: not key % S
def shard_of(keys, n_rows, S):
    return np.asarray(keys, dtype=np.int64) % S  # noqa: F821
