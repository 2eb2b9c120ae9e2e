# mutant: the gradient is summed over the ranks but each rank returns its own shard's loss
# loses: loss, stable
REPLACE = [
    ('    return float(acc[-2] / total_n), (acc[:-2] / total_n).astype(X_shard.dtype)',
     '    return part_loss, (acc[:-2] / total_n).astype(X_shard.dtype)'),
]
