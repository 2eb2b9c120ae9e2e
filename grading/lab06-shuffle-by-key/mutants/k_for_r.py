# mutant: partitions into K (the ranks) instead of R (the partitions): right only when R == K
# loses: placement, correct_process
# says: wrong rank
REPLACE = [("        outgoing[partition(key, R) % K].append((key, value))\n",
            "        outgoing[partition(key, K)].append((key, value))\n")]
