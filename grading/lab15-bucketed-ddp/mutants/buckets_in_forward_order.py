# mutant: fills the buckets walking the tensors from first to last, not in backward order
# loses: messages
import numpy as np


def bucketed_allreduce(comm, grads, bucket_bytes):
    buckets, current, size = [], [], 0
    for name in list(grads):
        current.append(name)
        size += grads[name].nbytes
        if size >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    summed = {}
    for bucket in buckets:
        flat = ring_allreduce(comm, np.concatenate([grads[name].ravel() for name in bucket]))  # noqa: F821
        offset = 0
        for name in bucket:
            count = grads[name].size
            summed[name] = flat[offset:offset + count].reshape(grads[name].shape)
            offset += count
    return {name: summed[name] for name in grads}
