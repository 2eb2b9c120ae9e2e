# mutant: averages the shard gradients with weight 1/K instead of n_r/B (wrong for uneven shards)
# loses: train_sim, train_process, frozen
REPLACE = [
    ('weight = len(x_mine) / len(X)',
     'weight = 1 / size'),
]
