# mutant: fills the buckets walking the tensors from first to last, not in backward order
# loses: messages
REPLACE = [
    ('    for name in reversed(list(grads)):\n        current.append(name)',
     '    for name in list(grads):\n        current.append(name)'),
]
