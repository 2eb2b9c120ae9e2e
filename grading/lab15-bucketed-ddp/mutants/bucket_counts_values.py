# mutant: fills the buckets by number of values instead of bytes (buckets close too late)
# loses: messages
# says: buckets closed too late
REPLACE = [
    ('        size += grads[name].nbytes\n', '        size += grads[name].size\n'),
]
