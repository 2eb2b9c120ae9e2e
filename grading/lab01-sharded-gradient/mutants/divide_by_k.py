# mutant: sums n_r g_r but divides by K (the number of ranks) instead of N = sum n_r
# loses: sharded
REPLACE = [
    ('    N = total[-1]\n', '    N = float(K)\n'),
]
