# mutant: off by one: the exchange loop stops one step early, so one source's pairs never arrive
# loses: complete, correct_process, traffic
# says: on no rank
REPLACE = [("    for s in range(1, K):  # pairwise exchange", "    for s in range(1, K - 1):  # pairwise exchange")]
