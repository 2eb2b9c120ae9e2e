# mutant: the Megatron MLP computes in float64 for accuracy and returns float64 for float32 input
# loses: tp_sim
# says: dtype
import numpy as np


def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    partial = gelu(x.astype(np.float64) @ W1_shard + b1_shard) @ W2_shard  # noqa: F821
    return ring_allreduce(comm, partial) + b2  # noqa: F821
