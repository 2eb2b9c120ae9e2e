# mutant: keeps k + 1 entries
# loses: topk, allreduce, residual, correct_process, traffic
REPLACE = [("    k = min(int(k), vec.size)\n", "    k = min(int(k) + 1, vec.size)\n")]
