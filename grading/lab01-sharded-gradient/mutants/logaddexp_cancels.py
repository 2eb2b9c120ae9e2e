# mutant: finite everywhere (np.logaddexp and scipy's expit) but loss = logaddexp(0, z) - y z and sigmoid(z) - y cancel on confident predictions
# loses: stable
# says: confident
import numpy as np
from scipy.special import expit


def local_gradient(X_shard, y_shard, w):
    n = len(y_shard)
    if n == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    z = X_shard @ w
    loss = float(np.mean(np.logaddexp(0, z) - y_shard * z))
    return loss, (X_shard.T @ (expit(z) - y_shard) / n).astype(X_shard.dtype)
