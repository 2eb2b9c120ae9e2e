# mutant: averages the shard gradients without weighting by shard size (wrong for uneven shards)
# loses: sharded
REPLACE = [
    ('packed = np.append(local_gradient(X_shard, y_shard, w).astype(np.float64) * n, float(n))',
     'packed = np.append(local_gradient(X_shard, y_shard, w).astype(np.float64), 1.0)'),
]
