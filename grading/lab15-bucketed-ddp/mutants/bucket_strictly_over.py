# mutant: off by one at the bucket boundary: a bucket closes only when it holds MORE than bucket_bytes
# loses: messages
# says: buckets closed too late
REPLACE = [
    ('for n in groups[-1]) >= bucket_bytes', 'for n in groups[-1]) > bucket_bytes'),
]
