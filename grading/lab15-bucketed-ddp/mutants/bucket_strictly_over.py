# mutant: off by one at the bucket boundary: a bucket closes only when it holds MORE than bucket_bytes
# loses: messages
# says: buckets closed too late
REPLACE = [
    ('if size >= bucket_bytes:',
     'if size > bucket_bytes:'),
]
