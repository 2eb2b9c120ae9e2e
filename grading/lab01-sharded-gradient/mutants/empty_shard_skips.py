# mutant: a rank whose shard is empty returns (0, zeros) at once and never takes part in the exchange (K > N)
# loses: sharded, loss, communication
# says: deadlock
import numpy as np

_right = sharded_gradient  # noqa: F821 - the reference defined above


def sharded_gradient(comm, X_shard, y_shard, w):
    if len(y_shard) == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    return _right(comm, X_shard, y_shard, w)
