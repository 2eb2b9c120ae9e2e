# mutant: dequantizes the gathered codes in blocks of qblock over the whole vector, not inside each shard:
# right only when every shard is a multiple of qblock
# loses: weights_sim, weights_process
# says: quantize each shard in blocks of qblock
REPLACE = [("    weights = np.empty(n, dtype=master.dtype)\n",
            "    return dequantize_blocks(all_codes, all_scales, qblock)\n    weights = np.empty(n, dtype=master.dtype)\n")]
