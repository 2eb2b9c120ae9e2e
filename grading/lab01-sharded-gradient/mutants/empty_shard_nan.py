# mutant: local_gradient divides by n even for an empty shard (NaN when K > N)
# loses: local, sharded
import numpy as np


def local_gradient(X_shard, y_shard, w):
    n = len(y_shard)
    with np.errstate(all="ignore"):
        return ((2.0 / n if n else np.nan) * (X_shard.T @ (X_shard @ w - y_shard))).astype(X_shard.dtype)
