# mutant: adds up the sums with the course's ring all-reduce, imported through a path a grep does not see
# loses: sharded, loss, stable, communication
import importlib

import numpy as np


def sharded_gradient(comm, X_shard, y_shard, w):
    ring = importlib.import_module("scaleoutai." + "collect" + "ives").ring_allreduce
    n = len(y_shard)
    loss, g = local_gradient(X_shard, y_shard, w)  # noqa: F821 - the reference defined above
    total = ring(comm, np.concatenate([g.astype(np.float64) * n, [loss * n, float(n)]]))
    N = total[-1]
    if N == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    return float(total[-2] / N), (total[:-2] / N).astype(X_shard.dtype)
