# mutant: each shard sends only k - 1 candidates per query
# loses: distances, ids, correct_process
REPLACE = [("    m = min(k, len(shard))", "    m = min(k - 1, len(shard))")]
