# mutant: reads k = 0 as "no compression" and keeps every entry (k or n)
# loses: topk, allreduce, residual, traffic
# says: k = 0 keeps none
REPLACE = [("    k = min(int(k), vec.size)\n", "    k = min(int(k), vec.size) or vec.size\n")]
