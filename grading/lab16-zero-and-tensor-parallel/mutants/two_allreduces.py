# mutant: the Megatron MLP all-reduces the hidden activations and then the output: two all-reduces
# loses: tp_bytes
import numpy as np


def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    h = gelu(x @ W1_shard + b1_shard).astype(x.dtype, copy=False)  # noqa: F821
    ring_allreduce(comm, np.zeros_like(x))  # noqa: F821 - an extra, useless all-reduce
    return ring_allreduce(comm, (h @ W2_shard).astype(x.dtype, copy=False)) + b2  # noqa: F821
