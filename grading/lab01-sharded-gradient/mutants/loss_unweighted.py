# mutant: the gradient is weighted by n_r but the loss is the plain mean of the shard losses
# loses: loss
REPLACE = [
    ('[part_loss * n, float(n)]', '[part_loss, float(n), float(n > 0)]'),
    ('    total_n = acc[-1]\n', '    total_n = acc[-2]\n'),
    ('    return float(acc[-2] / total_n), (acc[:-2] / total_n).astype(X_shard.dtype)',
     '    return float(acc[-3] / acc[-1]), (acc[:-3] / total_n).astype(X_shard.dtype)'),
]
