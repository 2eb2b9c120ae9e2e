# mutant: round 2 keeps distance < tau: a candidate exactly at tau, which may win on its smaller id, is lost
# loses: ids, small_shards, round2
# says: at tau
REPLACE = [("    keep = rest_d <= np.asarray(tau, dtype=dists.dtype)[:, None]",
            "    keep = rest_d < np.asarray(tau, dtype=dists.dtype)[:, None]")]
