# %% [markdown]
# # Lab 1: the sharded gradient of a linear model
#
# Data parallelism in one sentence: every worker computes the gradient on its own shard of the data,
# and the workers average. Here you write both halves for mean-squared-error linear regression and
# check that K workers agree with one machine.
#
# For a shard (X_r, y_r) of n_r rows, the loss is L_r(w) = (1/n_r) ||X_r w - y_r||^2 and its gradient
#
#     g_r = (2 / n_r) X_r^T (X_r w - y_r)        (g_r = 0 for an empty shard).
#
# The full-batch gradient over N = sum n_r rows is the **shard-size-weighted** average
#
#     g = sum_r (n_r / N) g_r,
#
# which equals the plain mean of the g_r only when every shard has the same size. `np.array_split`
# gives shards that differ by one row when K does not divide N, and empty shards when K > N: the
# grader tries both, and shards of very different sizes (large ones too), with K from 1 to 8, in
# float32 and float64.
#
# **Each rank holds only its own shard**, as on a real cluster: no rank knows N or any other rank's
# rows. So the weights n_r / N have to travel too: send n_r g_r together with n_r (d + 1 numbers),
# add them up, and divide the first d by the last. The grader hands each rank process its shard and
# nothing else, and counts every message itself.

# %% tags=["parameters"]
K = 4  # smoke: 2
N = 10_000  # smoke: 100
D = 8  # smoke: 4

# %%
import numpy as np

from scaleoutai import cluster


# %%
def local_gradient(X_shard, y_shard, w):
    """Gradient of the mean squared error on one shard: (2/n) X^T (X w - y); zeros for n = 0."""
    ### BEGIN SOLUTION
    n = len(y_shard)
    if n == 0:
        return np.zeros_like(w, dtype=X_shard.dtype)
    residual = X_shard @ w - y_shard
    return (2.0 / n) * (X_shard.T @ residual)
    ### END SOLUTION


# %%
def sharded_gradient(comm, X_shard, y_shard, w):
    """Every rank returns the full-batch gradient over all ranks' rows, in the dtype of ``X_shard``.

    Send n_r g_r and n_r (d + 1 values), add them up over the ranks, divide by N = sum n_r.
    """
    ### BEGIN SOLUTION
    K, r = comm.size, comm.rank
    n = len(y_shard)
    packed = np.append(local_gradient(X_shard, y_shard, w).astype(np.float64) * n, float(n))
    if r == 0:
        total = packed
        for src in range(1, K):
            total = total + comm.recv(src)
        for dst in range(1, K):
            comm.send(total, dst)
    else:
        comm.send(packed, 0)
        total = comm.recv(0)
    N = total[-1]
    return (total[:-1] / N if N else np.zeros_like(total[:-1])).astype(X_shard.dtype)
    ### END SOLUTION


# %% [markdown]
# Compare with one machine: the single-machine gradient is `local_gradient(X, y, w)` on all rows.

# %%
rng = np.random.default_rng(1)
X = rng.standard_normal((N, D))
y = X @ rng.standard_normal(D) + 0.1 * rng.standard_normal(N)
w = np.zeros(D)
rows = np.array_split(np.arange(N), K)  # rank r's shard: rows[r]


def worker(comm):
    mine = rows[comm.rank]
    return sharded_gradient(comm, X[mine], y[mine], w)


try:
    res = cluster.run(worker, K, backend="sim")
    full = local_gradient(X, y, w)
    print("max difference from one machine:", max(float(np.abs(v - full).max()) for v in res.values))
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats])
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(local_gradient, sharded_gradient)
