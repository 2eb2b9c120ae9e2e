# mutant: averages the shard means without weighting by shard size (wrong for uneven shards)
# loses: sharded, loss
REPLACE = [
    ('mine = np.concatenate([np.asarray(part_grad, dtype=np.float64) * n, [part_loss * n, float(n)]])',
     'mine = np.concatenate([np.asarray(part_grad, dtype=np.float64), [part_loss, 1.0]])'),
]
