# mutant: local_topk casts everything to float32 (to save memory): exact on integer-valued vectors, wrong digits on float64 vectors far from 0
# loses: distances, small_shards
REPLACE = [("    queries, shard = np.atleast_2d(queries), np.asarray(shard)\n    m = min(k, len(shard))",
            "    queries, shard = np.atleast_2d(queries).astype(np.float32), np.asarray(shard, dtype=np.float32)\n    m = min(k, len(shard))")]
