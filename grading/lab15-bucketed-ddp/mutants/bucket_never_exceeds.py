# mutant: a bucket never exceeds bucket_bytes: it closes before the tensor that would overflow it, not after
# loses: messages
# says: close a bucket as soon as it holds >= bucket_bytes
REPLACE = [
    ('    for name in reversed(list(grads)):\n        current.append(name)\n        size += grads[name].nbytes\n'
     '        if size >= bucket_bytes:\n            buckets.append(current)\n            current, size = [], 0\n',
     '    for name in reversed(list(grads)):\n        if current and size + grads[name].nbytes > bucket_bytes:\n'
     '            buckets.append(current)\n            current, size = [], 0\n'
     '        current.append(name)\n        size += grads[name].nbytes\n'),
]
