# mutant: sorts |v| ascending (stable) and takes the last k: among equal |values| the higher index wins
# loses: topk, allreduce, residual
# says: lower index
REPLACE = [("    order = np.argsort(-np.abs(vec), kind=\"stable\")[:k]\n",
            "    order = np.argsort(np.abs(vec), kind=\"stable\")[::-1][:k]\n")]
