# %% [markdown]
# # Lab 35: robust aggregation under f attackers
#
# K workers each compute a gradient of d numbers and a server averages them. Up to f of the workers are
# **Byzantine**: they send whatever hurts most, they know the honest gradients, and they collude. One of
# them is enough to move the plain mean anywhere. In Chapter 35 you met three rules that bound what f
# attackers can do; here you write them, and the server that applies them over the communicator.
#
# **The rules.** `vectors` is a (K, d) array, one row per worker, float32 or float64. Each rule returns
# one vector of shape (d,) **in the dtype of `vectors`** (compute in float64 if you like, then cast).
#
# - `coordinate_median(vectors)`: per coordinate, the median of the K values; for even K, the mean of the
#   two middle values. It tolerates f < K/2 attackers and needs no f.
# - `trimmed_mean(vectors, f)`: per coordinate, sort the K values, drop the f smallest **and** the f largest,
#   and average the K - 2f that remain. Raise `ValueError` unless 0 <= f and 2f < K.
# - `krum(vectors, f, m)`: the score of vector i is the sum of the squared distances ||v_i - v_j||^2 to its
#   K - f - 2 nearest **other** vectors (j != i). Return the average of the m vectors of smallest score
#   (m = 1 is Krum, Blanchard et al. 2017; m > 1 is multi-Krum); among equal scores the lower index comes
#   first. Raise `ValueError` unless 0 <= f, K > 2f + 2 and 1 <= m <= K.
#
# **The server.** `robust_aggregate(comm, grad, rule, f)` runs on every rank; `grad` is this rank's vector
# (d numbers) and `rule` one of `"median"`, `"trimmed_mean"`, `"krum"` (m = 1) and `"multi_krum"`
# (m = K - f). Rank 0 is the trusted server and a worker too: every other rank sends its gradient to rank 0
# (one message of d numbers); rank 0 stacks the K gradients **in rank order** (its own first), applies the
# rule, and sends the aggregate back to every rank (one message each). Every rank returns the aggregate.
#
# The grader plays the attackers: it hands the Byzantine ranks the vectors of an attack (sign flip, large
# noise, "a little is enough", inner-product manipulation) as their `grad`, counts every message and
# byte itself, and checks that your aggregate stays as close to the honest gradients as the rule promises.
# `scaleoutai.infra` (the course's answer) cannot be imported in the grader.

# %% tags=["parameters"]
K = 7  # smoke: 5
D = 6
F = 2  # smoke: 1

# %%
import numpy as np

from scaleoutai import cluster


# %%
def coordinate_median(vectors):
    """Per coordinate, the median of the K values (the mean of the two middle ones for even K)."""
    ### BEGIN SOLUTION
    V = np.asarray(vectors)
    return np.median(V.astype(np.float64), axis=0).astype(V.dtype)
    ### END SOLUTION


# %%
def trimmed_mean(vectors, f):
    """Per coordinate: drop the f smallest and the f largest of the K values, average the rest."""
    ### BEGIN SOLUTION
    V = np.asarray(vectors)
    K = len(V)
    if f < 0 or not 2 * f < K:
        raise ValueError(f"trimmed_mean needs 0 <= f < K/2, got f={f} for K={K}")
    kept = np.sort(V.astype(np.float64), axis=0)[f:K - f]
    return kept.mean(axis=0).astype(V.dtype)
    ### END SOLUTION


# %%
def krum(vectors, f, m=1):
    """The average of the m vectors of smallest Krum score (ties to the lower index)."""
    ### BEGIN SOLUTION
    V = np.asarray(vectors)
    K = len(V)
    if f < 0 or not K > 2 * f + 2:
        raise ValueError(f"Krum needs K > 2f + 2, got K={K}, f={f}")
    if not 1 <= m <= K:
        raise ValueError(f"multi-Krum needs 1 <= m <= K, got m={m} for K={K}")
    V64 = V.astype(np.float64)
    dist = ((V64[:, None, :] - V64[None, :, :]) ** 2).sum(axis=-1)
    np.fill_diagonal(dist, np.inf)  # a vector is not its own neighbour
    scores = np.sort(dist, axis=1)[:, :K - f - 2].sum(axis=1)
    best = np.argsort(scores, kind="stable")[:m]
    return V64[np.sort(best)].mean(axis=0).astype(V.dtype)
    ### END SOLUTION


# %%
def robust_aggregate(comm, grad, rule, f):
    """Every rank sends its grad to rank 0, which applies the rule and sends the aggregate back to all."""
    ### BEGIN SOLUTION
    K = comm.size
    if comm.rank != 0:
        comm.send(np.asarray(grad), 0)
        return comm.recv(0)
    stack = np.stack([np.asarray(grad)] + [comm.recv(q) for q in range(1, K)])
    rules = {"median": lambda: coordinate_median(stack), "trimmed_mean": lambda: trimmed_mean(stack, f),
             "krum": lambda: krum(stack, f, 1), "multi_krum": lambda: krum(stack, f, K - f)}
    if rule not in rules:
        raise ValueError(f"unknown rule {rule!r}")
    out = rules[rule]()
    for q in range(1, K):
        comm.send(out, q)
    return out
    ### END SOLUTION


# %%
def grader_call(vectors, rule, f, m):
    """Given: what the grader calls for one rule on one stack; a ValueError comes back as an empty array."""
    try:
        if rule == "median":
            return np.asarray(coordinate_median(vectors))
        if rule == "trimmed_mean":
            return np.asarray(trimmed_mean(vectors, int(f)))
        return np.asarray(krum(vectors, int(f), int(m)))
    except ValueError:
        return np.zeros(0)


# %% [markdown]
# Try it on the simulator: K - F honest workers send noisy copies of one gradient, and the last F ranks
# send that gradient flipped and amplified. Compare each rule's distance to the honest mean with the
# plain mean's.

# %%
rng = np.random.default_rng(0)
g_true = rng.standard_normal(D)
grads = [g_true + 0.3 * rng.standard_normal(D) for _ in range(K - F)] + [-10 * g_true] * F
honest_mean = np.mean(grads[:K - F], axis=0)
print(f"plain mean: distance to the honest mean {np.linalg.norm(np.mean(grads, axis=0) - honest_mean):.3f}")
for rule in ("median", "trimmed_mean", "krum", "multi_krum"):
    try:
        res = cluster.run(lambda comm: robust_aggregate(comm, grads[comm.rank], rule, F), K, timeout=30)
        print(f"{rule:>12}: distance to the honest mean {np.linalg.norm(res.values[0] - honest_mean):.3f}, "
              f"messages sent per rank {[s.messages_sent for s in res.stats]}")
    except (NotImplementedError, cluster.RankError) as err:
        print(f"{rule:>12}: not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(coordinate_median, trimmed_mean, krum, robust_aggregate)
