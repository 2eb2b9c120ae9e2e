# mutant: the plain mean of the reported models (weights 1/|reported| instead of n_k / sum n_k)
# loses: no_drop, dropout, all_drop, correct_process
REPLACE = [
    ("            w = sum(n * m for n, m in zip(counts, models)) / total\n",
     "            w = sum(models) / len(models)\n"),
]
