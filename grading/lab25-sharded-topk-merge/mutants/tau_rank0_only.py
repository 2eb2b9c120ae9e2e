# mutant: tau is the m-th distance of rank 0's own list: not an upper bound on the true k-th distance, so
# round 2 leaves out candidates that win
# loses: distances, ids, small_shards, threshold, round2
REPLACE = [("    tau = threshold(np.hstack([dists[:, :m]] + [first[p][0] for p in sorted(first)]), k)",
            "    tau = threshold(dists[:, :m], m)")]
