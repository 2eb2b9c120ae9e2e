# mutant: a round where nobody reports returns a zero model instead of keeping w_t
# loses: all_drop
REPLACE = [
    ("        if total > 0:\n            w = sum(n * m for n, m in zip(counts, models)) / total\n",
     "        w = sum(n * m for n, m in zip(counts, models)) / total if total > 0 else np.zeros_like(w)\n"),
]
