# mutant: sharded_gradient returns the gradient in float64 whatever the input dtype
# loses: sharded, stable
import numpy as np

_right = sharded_gradient  # noqa: F821 - the reference defined above


def sharded_gradient(comm, X_shard, y_shard, w):
    loss, g = _right(comm, X_shard, y_shard, w)
    return loss, g.astype(np.float64)
