# mutant: fills the buckets walking the tensors from first to last, not in backward order
# loses: messages
# says: tensors from last to first
REPLACE = [
    ('for name in names[::-1]:', 'for name in names:'),
]
