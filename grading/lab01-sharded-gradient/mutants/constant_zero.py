# mutant: sharded_gradient returns zeros of the right shape and dtype without communicating
# loses: sharded, communication
import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    return np.zeros(len(w), dtype=X_shard.dtype)
