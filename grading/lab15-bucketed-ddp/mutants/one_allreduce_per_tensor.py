# mutant: closes a bucket after every tensor: one all-reduce per tensor instead of per bucket
# loses: messages
# says: one all-reduce per tensor instead of per bucket
import numpy as np


def bucketed_allreduce(comm, grads, bucket_bytes):
    summed = {}
    for name in reversed(list(grads)):
        summed[name] = ring_allreduce(comm, grads[name].ravel()).reshape(grads[name].shape)  # noqa: F821
    return {name: summed[name] for name in grads}
