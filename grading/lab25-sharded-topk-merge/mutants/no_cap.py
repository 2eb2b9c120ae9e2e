# mutant: round 2 sends every candidate of the shard at or under tau, not at most k - m per query
# loses: round2
# says: k - m
REPLACE = [("    dists, ids = local_topk(queries, shard, offset, k)",
            "    dists, ids = local_topk(queries, shard, offset, max(k, len(np.asarray(shard))))"),
           ("    rest_d, rest_i = dists[:, m:k], ids[:, m:k]", "    rest_d, rest_i = dists[:, m:], ids[:, m:]")]
