# mutant: counts 8 bytes per value whatever the dtype: right for float64, too many buckets for float32
# loses: messages
# says: bucketed_allreduce, K=6, layers [5, 8, 6, 2], bucket_bytes=40, float32
REPLACE = [
    ('        size += grads[name].nbytes\n', '        size += 8 * grads[name].size\n'),
]
