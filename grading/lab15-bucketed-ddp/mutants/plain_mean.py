# mutant: averages the shard gradients with weight 1/K instead of n_r/B (wrong for uneven shards)
# loses: train_sim, train_process, frozen
REPLACE = [
    ('share = X[mine], Y[mine], len(mine) / len(X)',
     'share = X[mine], Y[mine], 1 / world'),
]
