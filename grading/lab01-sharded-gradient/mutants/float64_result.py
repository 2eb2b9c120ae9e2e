# mutant: returns the gradient in float64 whatever the input dtype
# loses: sharded
import numpy as np

_right = sharded_gradient  # noqa: F821 - the reference defined above


def sharded_gradient(comm, X_shard, y_shard, w):
    return _right(comm, X_shard, y_shard, w).astype(np.float64)
