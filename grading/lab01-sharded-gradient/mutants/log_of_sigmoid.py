# mutant: cross-entropy as -y log p - (1 - y) log(1 - p) with p = sigmoid(z): log(0) once p rounds to 0 or 1
# loses: stable
import numpy as np
from scipy.special import expit


def local_gradient(X_shard, y_shard, w):
    n = len(y_shard)
    if n == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    p = expit(X_shard @ w)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = float(np.mean(-y_shard * np.log(p) - (1 - y_shard) * np.log(1 - p)))
    return loss, (X_shard.T @ (p - y_shard) / n).astype(X_shard.dtype)
