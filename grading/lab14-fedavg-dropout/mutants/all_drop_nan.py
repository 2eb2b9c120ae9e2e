# mutant: divides by the reported total even when it is 0: NaN once nobody (or only empty clients) reports
# loses: all_drop
REPLACE = [
    ("        if total > 0:\n            w = sum(n * m for n, m in zip(counts, models)) / total\n",
     "        with np.errstate(all='ignore'):\n"
     "            w = sum((n * m for n, m in zip(counts, models)), np.zeros_like(w)) / total\n"),
]
