# %% [markdown]
# # Lab 1: the sharded loss and gradient of logistic regression, without overflow
#
# Chapter 1 proves that data parallelism is exact for least squares: every worker computes the gradient
# on its own shard, the shard gradients are added with the weights n_r / N, and the result is the
# single-machine gradient. Its Exercise 2 claims the proof never used the form of the loss. This lab
# takes that step for **binary logistic regression**, the model behind every classifier you will train,
# and adds what a real training job needs and the chapter's least-squares code never meets:
#
# 1. **the loss as well as the gradient.** Training logs the full-batch loss, so every rank must return
#    it too, and it is weighted by shard size exactly like the gradient.
# 2. **numbers that do not overflow.** With labels y_i in {0, 1} and the score z_i = x_i . w, the loss is
#
#        L(w) = (1/N) sum_i [ log(1 + e^{z_i}) - y_i z_i ],   grad L(w) = (1/N) X^T (sigmoid(z) - y).
#
#    `log(1 + e^z)` is a log-sum-exp, log(e^0 + e^z). Written as it reads, it overflows to `inf` once
#    z passes about 709 in float64 and about 88 in float32, which a badly scaled feature or a large step
#    reaches within a few iterations. And when the model is **confidently right** (a large margin
#    m_i = (2 y_i - 1) z_i), both the loss term and sigmoid(z_i) - y_i are tiny numbers, about e^{-m_i}:
#    `log(1 + e^z) - z` and `1 - sigmoid(z)` then subtract two nearly equal numbers and return 0 or
#    rounding noise. Write both so that they are accurate to a few units of rounding **relative to their
#    own size**, for every z, in float32 and float64 (hint: compute everything from the margin m and
#    from e^{-|m|}, which is always in (0, 1]).
# 3. **each rank holds only its own shard**, as on a real cluster: no rank knows N or any other rank's
#    rows, shards are uneven (`np.array_split` when K does not divide N, or any split at all), and a
#    shard may be empty (K > N). The weights n_r / N therefore travel too: send n_r L_r, n_r g_r and n_r
#    (d + 2 numbers per rank), add them up over the ranks, divide by N. An empty shard contributes
#    nothing and must not produce a NaN; when every shard is empty the loss is 0 and the gradient zeros.
#
# The rule the grader checks: on every rank, the loss and the gradient equal the single-machine values
# computed in high precision from the same stored data, for K = 1, 2, 3, a non-power of two and K > N,
# uneven and empty shards, float32 (relative tolerance about 1e-4) and float64 (about 1e-9), on the
# simulator and on 2 real processes; scores past exp's overflow must give finite, right answers, and on
# confidently classified data the loss and gradient must be right relative to their own (tiny) size.
# The gradient comes back in the dtype of `X_shard`. The cost it must meet: each rank sends at most
# (K - 1) messages' worth of d + 2 numbers (it may split them over up to three messages per peer), never
# rows of X, and every rank's result must have heard, through some chain of messages, from every rank.
# The grader counts and records every message itself.
#
# The course's sharded gradient (`scaleoutai.foundations.sharding`), its collectives
# (`scaleoutai.collectives`), `scaleoutai.parallel` and `scaleoutai.ml` are unimportable in the grader:
# write the exchange with `comm.send` / `comm.recv` (or `comm.sendrecv`). NumPy and SciPy are available.

# %% tags=["parameters"]
K = 4  # smoke: 3
N = 10_000  # smoke: 100
D = 8  # smoke: 4

# %%
import numpy as np

from scaleoutai import cluster


# %%
def local_gradient(X_shard, y_shard, w):
    """(mean loss, mean gradient) of logistic regression on one shard; (0.0, zeros) for an empty shard.

    Labels are 0 or 1. The gradient has the dtype of ``X_shard``; both stay accurate for any score z.
    """
    ### BEGIN SOLUTION
    n = len(y_shard)
    dt = X_shard.dtype
    if not n:
        return 0.0, np.zeros(len(w), dtype=dt)
    sign = (2 * y_shard - 1).astype(dt)  # +1 for label 1, -1 for label 0
    margin = sign * (X_shard @ w.astype(dt))  # positive when the prediction is right
    tail = np.exp(-np.abs(margin))  # e^{-|m|} is in (0, 1]: it never overflows
    # loss term log(1 + e^{-m}): the larger of 0 and -m, plus a log1p that is accurate for tiny tails
    terms = np.maximum(-margin, 0) + np.log1p(tail)
    # sigmoid(-m), the probability of the wrong label, from the tail alone: no 1 - p cancellation
    wrong = np.where(margin >= 0, tail / (1 + tail), 1 / (1 + tail))
    residual = -sign * wrong  # equals sigmoid(z) - y, to relative rounding
    loss = float(np.sum(terms, dtype=np.float64)) / n
    grad = (X_shard.T.astype(np.float64) @ residual.astype(np.float64)) / n
    return loss, grad.astype(dt)
    ### END SOLUTION


# %%
def sharded_gradient(comm, X_shard, y_shard, w):
    """(loss, gradient) of the full batch over all ranks' rows, the same on every rank.

    Each rank holds only its shard. Send n_r L_r, n_r g_r and n_r (d + 2 values), add them up over the
    ranks, divide by N = sum n_r. The gradient comes back in the dtype of ``X_shard``.
    """
    ### BEGIN SOLUTION
    size, me = comm.size, comm.rank
    n = len(y_shard)
    part_loss, part_grad = local_gradient(X_shard, y_shard, w)
    mine = np.concatenate([np.asarray(part_grad, dtype=np.float64) * n, [part_loss * n, float(n)]])
    # a binomial tree over the ranks: rank me's parent is me minus its lowest set bit
    acc, bit = mine, 1
    while bit < size and not me & bit:  # collect the partial sums of my children, smallest subtree first
        if me + bit < size:
            acc = acc + comm.recv(me + bit)
        bit <<= 1
    if bit < size:  # not the root: hand my subtree's sum to my parent, the total comes back on that edge
        comm.send(acc, me - bit)
        acc = comm.recv(me - bit)
    while bit > 1:  # pass the total down to my children, largest subtree first
        bit >>= 1
        if me + bit < size:
            comm.send(acc, me + bit)
    total_n = acc[-1]
    if total_n == 0:
        return 0.0, np.zeros(len(w), dtype=X_shard.dtype)
    return float(acc[-2] / total_n), (acc[:-2] / total_n).astype(X_shard.dtype)
    ### END SOLUTION


# %% [markdown]
# The grader calls your functions through these two cells (leave them as they are): each packs the loss,
# the itemsize of the gradient's dtype (or -1 if it is not a float array) and the gradient into one
# float64 vector.

# %%
def _pack(result):
    loss, grad = result
    grad = np.asarray(grad)
    size = grad.dtype.itemsize if grad.dtype.kind == "f" and grad.ndim == 1 else -1
    return np.concatenate([[float(loss), size], grad.astype(np.float64).ravel()])


def grader_local(X_shard, y_shard, w):
    return _pack(local_gradient(X_shard, y_shard, w))


def grader_sharded(comm, X_shard, y_shard, w):
    return _pack(sharded_gradient(comm, X_shard, y_shard, w))


# %% [markdown]
# Compare with one machine (`local_gradient(X, y, w)` on all rows), first on ordinary data, then with
# scores far past exp's overflow: the loss must stay finite and the two must still agree.

# %% tags=["demo"]
rng = np.random.default_rng(1)
X = rng.standard_normal((N, D))
y = (rng.random(N) < 1 / (1 + np.exp(-X @ rng.standard_normal(D)))).astype(np.float64)
rows = np.array_split(np.arange(N), K)  # rank r's shard: rows[r]

for scale in (0.5, 500.0):  # 500: |z| in the thousands
    w = scale * rng.standard_normal(D)

    def worker(comm):
        mine = rows[comm.rank]
        return sharded_gradient(comm, X[mine], y[mine], w)

    try:
        res = cluster.run(worker, K, backend="sim")
        loss1, grad1 = local_gradient(X, y, w)
        assert np.isfinite(loss1) and all(np.isfinite(v[0]) for v in res.values)
        gap = max(float(np.abs(v[1] - grad1).max()) for v in res.values)
        print(f"|w| scale {scale}: loss {loss1:.6g}, max gradient difference from one machine {gap:.2e}, "
              f"bytes sent per rank {[s.bytes_sent for s in res.stats]}")
        np.testing.assert_allclose([v[0] for v in res.values], loss1, rtol=1e-9)
    except (NotImplementedError, cluster.RankError) as err:
        print("not finished yet:", getattr(err, "summary", err))

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
