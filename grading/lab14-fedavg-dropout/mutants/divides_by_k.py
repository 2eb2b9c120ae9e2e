# mutant: sums n_k w_k over the reporters but divides by K instead of the reported total sum n_k
# loses: no_drop, dropout, all_drop, correct_process
REPLACE = [
    ("            w = sum(n * m for n, m in zip(counts, models)) / total\n",
     "            w = sum(n * m for n, m in zip(counts, models)) / K\n"),
]
