# mutant: keeps k random entries instead of the k largest by magnitude
# loses: topk, allreduce, residual, correct_process, training
REPLACE = [("    order = np.argsort(-np.abs(vec), kind=\"stable\")[:k]\n", "    order = np.random.default_rng(0).permutation(vec.size)[:k]\n")]
