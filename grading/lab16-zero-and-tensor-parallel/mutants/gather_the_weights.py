# mutant: all-gathers the weight shards (one message per step) and runs the dense MLP: weights move, not activations
# loses: tp_bytes
# says: move activations, not weights
import numpy as np


def megatron_mlp_forward(comm, x, W1_shard, b1_shard, W2_shard, b2):
    d = x.shape[-1]
    mine = np.concatenate([W1_shard.T, b1_shard[:, None], W2_shard], axis=1)  # one row per column of W1
    table = all_gather(comm, mine.ravel()).reshape(-1, 2 * d + 1)  # noqa: F821
    W1, b1, W2 = table[:, :d].T, table[:, d], table[:, d + 1:]
    return (gelu(x @ W1 + b1) @ W2 + b2).astype(x.dtype)  # noqa: F821
