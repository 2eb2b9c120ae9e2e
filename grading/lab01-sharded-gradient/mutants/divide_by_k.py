# mutant: sums n_r L_r and n_r g_r but divides by K (the number of ranks) instead of N = sum n_r
# loses: sharded, loss, stable, communication
REPLACE = [
    ('    total_n = acc[-1]\n', '    total_n = float(size)\n'),
]
