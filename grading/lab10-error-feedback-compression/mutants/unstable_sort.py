# mutant: np.argsort's default quicksort is not stable: ties land in any order once n > 16
# loses: topk, allreduce, residual
# says: lower index
REPLACE = [("    order = np.argsort(-np.abs(vec), kind=\"stable\")[:k]\n",
            "    order = np.argsort(-np.abs(vec))[:k]\n")]
