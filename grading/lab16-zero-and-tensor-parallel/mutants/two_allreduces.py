# mutant: the Megatron MLP first all-reduces (averages) the input x "so every rank has the same x", then the output: two all-reduces
# loses: tp_bytes
# says: one ring all-reduce
import numpy as np


def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    x = (ring_allreduce(comm, x) / comm.size).astype(x.dtype, copy=False)  # noqa: F821 - x is already the same
    h = gelu(x @ W1_shard + b1_shard).astype(x.dtype, copy=False)  # noqa: F821
    return ring_allreduce(comm, (h @ W2_shard).astype(x.dtype, copy=False)) + b2  # noqa: F821
