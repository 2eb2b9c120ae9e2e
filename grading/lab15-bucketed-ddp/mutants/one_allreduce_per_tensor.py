# mutant: closes a bucket after every tensor (size >= 0): one all-reduce per tensor instead of per bucket
# loses: messages
# says: one all-reduce per tensor instead of per bucket
REPLACE = [
    ('if size >= bucket_bytes:',
     'if size >= 0:'),
]
