# mutant: round 2 sends the rank's candidates at or under tau from its first one on (the round-1 pairs again),
# and rank 0 merges round 2 only: the right answer for twice the traffic
# loses: round2
# says: round-1 pairs again
REPLACE = [("    rest_d, rest_i = dists[:, m:k], ids[:, m:k]", "    rest_d, rest_i = dists[:, :k], ids[:, :k]"),
           ("            pieces += [(first[peer][0][q], first[peer][1][q]), second[peer][q]]",
            "            pieces.append(second[peer][q])")]
