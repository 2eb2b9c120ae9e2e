# mutant: topk_compress returns uint16 indices: right while n <= 65536, wrapped beyond
# loses: topk, allreduce, residual
# says: too narrow
REPLACE = [("    idx = np.sort(order).astype(np.int32)\n", "    idx = np.sort(order).astype(np.uint16)\n")]
