# mutant: the loss written as it reads, log(1 + exp(z)) - y z, and sigmoid as 1 / (1 + exp(-z)): right on ordinary data, inf past exp's overflow
# loses: stable
# says: overflow
import numpy as np


def local_gradient(X_shard, y_shard, w):
    n = len(y_shard)
    if n == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    z = X_shard @ w
    with np.errstate(over="ignore"):
        loss = float(np.mean(np.log(1 + np.exp(z)) - y_shard * z))
        p = 1 / (1 + np.exp(-z))
    return loss, (X_shard.T @ (p - y_shard) / n).astype(X_shard.dtype)
