# %% [markdown]
# # Lab 35: the geometric median as a distributed protocol (robust aggregation under f attackers)
#
# K workers each compute a gradient of d numbers and a server averages them. Up to f of the workers are
# **Byzantine**: they send whatever hurts most, they know the honest gradients, and they collude. In
# Chapter 35 the server gathers the K raw gradients and applies a coordinate-wise rule (median, trimmed
# mean) or Krum. Here you build the next step: the **geometric median**
#
# $$z^\star = \arg\min_z \sum_i c_i \, \lVert z - g_i \rVert,$$
#
# the point that minimises the (weighted) sum of *distances*, not of squared distances. It needs no f to
# compute, it does not look at coordinates one by one (so it is invariant under rotations), and as long as
# the attackers hold less than half of the weight it stays within a bounded distance of the honest
# gradients:
#
# $$\lVert z^\star - \bar g_H \rVert \le \frac{2 W_H}{W_H - W_B}\, r,$$
#
# with $W_H$, $W_B$ the honest and Byzantine weights, $\bar g_H$ the weighted honest mean and $r$ the
# largest distance of an honest gradient from it (prove it: compare the objective at $z^\star$ and at
# $\bar g_H$ with the triangle inequality).
#
# **Weiszfeld's iteration, smoothed** (Weiszfeld 1937; Pillutla, Kakade and Harchaoui, "Robust Aggregation
# for Federated Learning", 2022). Start from the weighted mean and repeat
#
# $$\beta_i = \frac{c_i}{\max(\nu, \lVert g_i - z \rVert)}, \qquad z \leftarrow \frac{\sum_i \beta_i g_i}{\sum_i \beta_i}.$$
#
# The floor $\nu > 0$ keeps a weight finite when $z$ sits on a gradient. The server never needs a raw
# gradient, only the two sums $\sum_i \beta_i g_i$ and $\sum_i \beta_i$: each worker can compute its own
# $\beta_i$ from the current $z$, so the iteration runs under secure aggregation (Chapter 14), which a
# server that gathers raw gradients (Chapter 35's rules) cannot.
#
# **Exercise 1.** `geometric_median(vectors, counts, f, nu, tol, max_iter)` on one machine. `vectors` is a
# (K, d) array (float32 or float64, row i from worker i), `counts` the K sample counts $c_i \ge 0$ (the
# weights, vouched for by the server; a worker with an empty shard has $c_i = 0$ and weighs nothing).
# Compute in float64:
#
# 1. $z_0 = \sum_i c_i g_i / \sum_i c_i$ (the weighted mean);
# 2. for t = 1, 2, ..., max_iter: one Weiszfeld step $z_{t-1} \to z_t$; **stop** as soon as
#    $\lVert z_t - z_{t-1} \rVert \le \text{tol} \cdot \max(1, \lVert z_t \rVert)$ (or after max_iter steps);
# 3. return the last $z_t$, shape (d,), **in the dtype of `vectors`**.
#
# Raise `ValueError` unless 0 <= f and 2f < K (the breakdown point: beyond it no rule can tell the honest
# gradients apart), nu > 0, tol >= 0, max_iter >= 1, len(counts) == K, every count >= 0 and their sum > 0.
#
# **Exercise 2.** `robust_aggregate(comm, grad, count, f, nu, tol, max_iter)` runs on every rank; `grad` is
# this rank's gradient (d numbers) and `count` its sample count. Rank 0 is the trusted server and a worker
# too. Every message is a **float64 vector of d + 1 numbers**:
#
# - round 0: every worker sends $[c_i g_i, c_i]$ to rank 0 (the weighted mean's two sums);
# - rank 0 adds the contributions **in rank order** (its own first) and gets $z_0$; then, for each step,
#   it sends $[z, 0]$ to every worker, each worker answers $[\beta_i g_i, \beta_i]$ computed at that $z$,
#   and rank 0 forms the next $z$ and applies the stopping rule of Exercise 1;
# - when it stops, rank 0 sends $[z, 1]$ (the flag 1 says "this is the aggregate") to every worker.
#
# Every rank returns the aggregate in its `grad`'s dtype, the same value `geometric_median` gives. After R
# Weiszfeld steps each worker has sent R + 1 messages and received R + 1; nothing else crosses the
# network, and workers never talk to each other. Validate the arguments as in Exercise 1 (`count` >= 0 for
# this rank).
#
# The grader plays the attackers: it hands the Byzantine ranks the vectors of an attack (sign flip, large
# noise, "a little is enough", inner-product manipulation) as their `grad`, counts every message and byte
# itself (the number of rounds included), compares your aggregate with its own Weiszfeld iteration, and
# checks the bound above. `scaleoutai.infra` (the course's rules, whose median, trimmed mean and Krum are
# not this lab's answer) cannot be imported in the grader.

# %% tags=["parameters"]
K = 7  # smoke: 5
D = 6
F = 2  # smoke: 1

# %%
import numpy as np

from scaleoutai import cluster


# %%
def geometric_median(vectors, counts, f, nu, tol, max_iter):
    """The weighted geometric median of the K rows by smoothed Weiszfeld steps from the weighted mean."""
    ### BEGIN SOLUTION
    rows = np.asarray(vectors)
    K = rows.shape[0]
    if f < 0 or not 2 * f < K:
        raise ValueError(f"the geometric median tolerates f < K/2 attackers; got f={f} of K={K}")
    if not nu > 0 or not tol >= 0 or max_iter < 1:
        raise ValueError(f"need nu > 0, tol >= 0 and max_iter >= 1; got nu={nu}, tol={tol}, max_iter={max_iter}")
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    if len(c) != K or (c < 0).any() or not c.sum() > 0:
        raise ValueError(f"need K={K} counts >= 0 with a positive sum, got {c}")
    G = rows.astype(np.float64)
    z = (c[:, None] * G).sum(axis=0) / c.sum()
    steps, moving = 0, True
    while moving and steps < max_iter:
        beta = c / np.maximum(nu, np.linalg.norm(G - z, axis=1))
        z_new = (beta[:, None] * G).sum(axis=0) / beta.sum()
        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))
        z, steps = z_new, steps + 1
    return z.astype(rows.dtype)
    ### END SOLUTION


# %%
def robust_aggregate(comm, grad, count, f, nu, tol, max_iter):
    """Rank 0 runs smoothed Weiszfeld over the workers' weighted sums; every rank returns the aggregate."""
    ### BEGIN SOLUTION
    K, rank = comm.size, comm.rank
    if f < 0 or not 2 * f < K or not nu > 0 or not tol >= 0 or max_iter < 1 or count < 0:
        raise ValueError(f"rank {rank}: need 0 <= f < K/2, nu > 0, tol >= 0, max_iter >= 1 and count >= 0")
    g = np.asarray(grad)
    g64 = g.astype(np.float64)

    def contribution(z):
        beta = float(count) if z is None else count / max(nu, float(np.linalg.norm(g64 - z)))
        return np.concatenate([beta * g64, [beta]])

    if rank != 0:
        comm.send(contribution(None), 0)
        msg = np.asarray(comm.recv(0), dtype=np.float64)
        while msg[-1] != 1:  # [z, 0]: answer at z; [z, 1]: the aggregate
            comm.send(contribution(msg[:-1]), 0)
            msg = np.asarray(comm.recv(0), dtype=np.float64)
        return msg[:-1].astype(g.dtype)

    def gather(z):
        total = contribution(z)
        for q in range(1, K):
            total = total + np.asarray(comm.recv(q), dtype=np.float64)
        if not total[-1] > 0:
            raise ValueError("the sample counts sum to 0: nothing to aggregate")
        return total[:-1] / total[-1]

    z, steps, moving = gather(None), 0, True
    while moving and steps < max_iter:
        for q in range(1, K):
            comm.send(np.concatenate([z, [0.0]]), q)
        z_new = gather(z)
        moving = np.linalg.norm(z_new - z) > tol * max(1.0, np.linalg.norm(z_new))
        z, steps = z_new, steps + 1
    for q in range(1, K):
        comm.send(np.concatenate([z, [1.0]]), q)
    return z.astype(g.dtype)
    ### END SOLUTION


# %%
def grader_call(vectors, counts, f, nu, tol, max_iter):
    """Given: what the grader calls on one stack; a ValueError comes back as an empty array."""
    try:
        return np.asarray(geometric_median(vectors, counts, int(f), float(nu), float(tol), int(max_iter)))
    except ValueError:
        return np.zeros(0)


# %% [markdown]
# Try it on the simulator: K - F honest workers send noisy copies of one gradient, and the last F ranks
# send that gradient flipped and amplified. Compare the geometric median's distance to the honest mean with
# the plain mean's and with the bound, and count the rounds.

# %% tags=["demo"]
rng = np.random.default_rng(0)
g_true = rng.standard_normal(D)
grads = [g_true + 0.3 * rng.standard_normal(D) for _ in range(K - F)] + [-10 * g_true] * F
counts = [int(c) for c in rng.integers(1, 5, K)]
W_h, W_b = sum(counts[:K - F]), sum(counts[K - F:])
honest_mean = np.average(grads[:K - F], axis=0, weights=counts[:K - F])
r = max(np.linalg.norm(g - honest_mean) for g in grads[:K - F])
print(f"plain mean: distance to the honest mean {np.linalg.norm(np.average(grads, axis=0, weights=counts) - honest_mean):.3f}")
try:
    res = cluster.run(lambda comm: robust_aggregate(comm, grads[comm.rank], counts[comm.rank], F, 1e-4, 1e-8, 100),
                      K, backend="sim", timeout=30)
    gap = np.linalg.norm(res.values[0] - honest_mean)
    print(f"geometric median: distance {gap:.3f}, bound {2 * W_h * r / (W_h - W_b):.3f}, "
          f"rounds {res.stats[1].messages_sent - 1}, messages sent per rank {[s.messages_sent for s in res.stats]}")
    assert gap <= 2 * W_h * r / (W_h - W_b)
    np.testing.assert_allclose(res.values[0], geometric_median(np.array(grads), counts, F, 1e-4, 1e-8, 100))
except (NotImplementedError, cluster.RankError) as err:
    print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
