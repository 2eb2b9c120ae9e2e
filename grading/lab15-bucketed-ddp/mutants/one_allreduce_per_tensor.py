# mutant: closes a bucket after every tensor (fresh = True): one two-level all-reduce per tensor, not per bucket
# loses: messages
# says: one message per tensor, not per bucket
REPLACE = [
    ('fresh = sum(grads[n].nbytes for n in groups[-1]) >= bucket_bytes', 'fresh = True'),
]
