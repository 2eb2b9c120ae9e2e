# mutant: m = k // K (floor): K m < k, so rank 0 holds fewer than k round-1 candidates, tau is +inf and
# round 2 carries every candidate up to k
# loses: round1, threshold, round2
# says: ceil(k/K)
REPLACE = [("    nq, m = len(queries), -(-k // comm.size)", "    nq, m = len(queries), k // comm.size")]
