# mutant: applies GeLU after the all-reduce of the first layer's partial sums (wrong: GeLU is not linear)
# loses: tp_sim, tp_process, tp_bytes
import numpy as np


def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    partial = ((x @ W1_shard + b1_shard) @ W2_shard).astype(x.dtype, copy=False)
    return gelu(ring_allreduce(comm, partial)) + b2  # noqa: F821
