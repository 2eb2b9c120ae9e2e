# %% [markdown]
# # Lab 4: recursive halving-doubling all-reduce (Rabenseifner), for any number of ranks
#
# Chapter 4 builds the ring all-reduce and shows it is *bandwidth-optimal*: each rank sends about
# 2(K-1)/K · n values, the least any all-reduce can. It also shows the ring's price: 2(K-1) steps, each
# paying the latency alpha, so at small messages or large K the ring loses to a tree or to recursive
# doubling, which take log2 K steps but send the whole vector in every one. The chapter's exercises and
# research notes ask for the algorithm that has both: **recursive halving-doubling** (Rabenseifner; Thakur,
# Rabenseifner and Gropp, 2005), which MPI libraries use for medium and large all-reduces. It sends the
# ring's bytes in only 2 log2 K steps. Here you build it from `comm.send` and `comm.recv`, for every K,
# not only powers of two.
#
# **The task.** Every one of the K ranks holds a 1-D array `x` of the same length n and dtype.
# `halving_doubling_allreduce(comm, x)` returns, on every rank, the element-wise sum over all ranks, with
# the same shape and dtype as `x` (integer sums exact: add in the input's dtype).
#
# **The algorithm.** Let P be the largest power of two with P <= K, R = K - P and q = log2 P.
#
# 1. *Fold* (only when K is not a power of two). Of the first 2R ranks, each even rank r hands its whole
#    vector to r + 1 and sits out; r + 1 adds it to its own. The P ranks still in get *virtual ranks*
#    v = 0..P-1: rank r < 2R (odd) is v = r // 2, rank r >= 2R is v = r - R.
# 2. *Reduce-scatter by recursive halving*. Cut the vector into P blocks with `np.array_split(x, P)`.
#    Each virtual rank starts responsible for all blocks [0, P). In step k = 1..q its partner is the
#    virtual rank v XOR 2^(q-k) (distance P/2, then P/4, ..., 1): split the block range in two halves
#    (the lower half gets the first (lo + hi) // 2 - lo blocks); the rank whose bit is 0 keeps the lower
#    half and sends the upper one, its partner the reverse; each adds what it receives into the half it
#    keeps. After q steps virtual rank v holds the full sum of block v, having sent half, a quarter, ...,
#    1/P of the vector.
# 3. *All-gather by recursive doubling*: the same partners in the reverse order (distance 1, 2, ...,
#    P/2). Each step a rank sends the blocks it has finished and receives its partner's, which sit right
#    beside its own, so the finished range doubles.
# 4. *Unfold*: each odd rank r < 2R sends the finished vector back to r - 1.
#
# (Running the distances the other way, 1, 2, ..., P/2 while halving, as MPICH does, is accepted too:
# virtual rank v then ends holding block bitreverse(v).) A step both sends and receives; sends are eager,
# so send-then-receive cannot deadlock.
#
# **The cost.** With K = P a rank sends 2q messages and 2(P-1)/P · n values: the ring's bytes in
# 2 log2 K steps instead of 2(K-1), so T = 2 log2 K · alpha + 2 (K-1)/K · n · beta. Otherwise the fold and
# the unfold add two steps of n values: T = (2 log2 P + 2) alpha + (2 (P-1)/P + 2) n beta.
#
# **What is graded.** The sum on every rank for K = 1, 2, 3, 5, 6, 7, 8, K larger than n (empty blocks),
# uneven n, float32, float64 and int64 (exact beyond 2**53), seeded random cases, on the simulator and on 2
# real processes; and, from the grader's own counts, clock and trace (never your `comm.stats`): at most
# 2 log2 P messages per rank (+1 for an odd folding rank) and the bytes above; the simulated time within
# 2 log2 P (+2) latencies; and every message going to the partner the schedule names, carrying exactly
# the blocks it names. The course's `scaleoutai.collectives` and `scaleoutai.parallel` cannot be imported
# in the grader (its ring and recursive doubling are not this algorithm anyway).

# %% tags=["parameters"]
K = 6  # smoke: 3
N = 1_000  # smoke: 13

# %%
import numpy as np

from scaleoutai import cluster


# %% [markdown]
# First the bookkeeping of the fold: which ranks are in, under which virtual rank, and back.

# %%
def fold_layout(K):
    """(P, R): the largest power of two P <= K, and R = K - P ranks to fold in."""
    ### BEGIN SOLUTION
    P = 1
    while P * 2 <= K:
        P *= 2
    return P, K - P
    ### END SOLUTION


def to_virtual(r, K):
    """The virtual rank of real rank r, or None for an even rank r < 2R that sits out."""
    ### BEGIN SOLUTION
    P, R = fold_layout(K)
    if r >= 2 * R:
        return r - R
    return r // 2 if r % 2 else None
    ### END SOLUTION


def to_real(v, K):
    """The real rank that plays virtual rank v."""
    ### BEGIN SOLUTION
    P, R = fold_layout(K)
    return 2 * v + 1 if v < R else v + R
    ### END SOLUTION


# %% [markdown]
# Now the all-reduce. Keep the block range you are responsible for as two block indices `[lo, hi)` and
# turn them into element offsets with the cumulative sizes of `np.array_split`.

# %%
def halving_doubling_allreduce(comm, x):
    """Sum of ``x`` over all ranks, on every rank: fold, recursive halving, recursive doubling, unfold."""
    ### BEGIN SOLUTION
    size, me = comm.size, comm.rank
    buf = np.array(x, copy=True)
    if size == 1:
        return buf
    P, R = fold_layout(size)
    v = to_virtual(me, size)
    folded = me < 2 * R  # one of the fold pairs
    if v is None:  # the even rank of a pair: hand everything over, get the answer back at the end
        comm.send(buf, me + 1)
        return comm.recv(me + 1)
    if folded:
        buf += comm.recv(me - 1)  # same dtype on both sides: int64 stays exact
    edges = np.zeros(P + 1, dtype=np.int64)
    edges[1:] = np.cumsum([len(b) for b in np.array_split(np.empty(len(buf)), P)])
    lo, hi = 0, P
    partners = []  # (partner, distance) of each halving step, replayed backwards by the doubling
    dist = P // 2
    while dist >= 1:
        peer = to_real(v ^ dist, size)
        cut = lo + (hi - lo) // 2
        give, (lo, hi) = ((lo, cut), (cut, hi)) if v & dist else ((cut, hi), (lo, cut))
        comm.send(buf[edges[give[0]]:edges[give[1]]], peer)
        incoming = comm.recv(peer)
        buf[edges[lo]:edges[hi]] += incoming
        partners.append((peer, dist))
        dist //= 2
    for peer, dist in reversed(partners):
        width = hi - lo
        comm.send(buf[edges[lo]:edges[hi]], peer)
        lo, hi = (lo - width, hi) if v & dist else (lo, hi + width)  # the partner's blocks sit beside mine
        at = lo if v & dist else hi - width
        buf[edges[at]:edges[at + width]] = comm.recv(peer)
    if folded:
        comm.send(buf, me - 1)  # unfold
    return buf
    ### END SOLUTION


# %% [markdown]
# Try it on the simulator: every rank's answer must equal the single-machine sum, and the grader's counts
# must show 2 log2 P messages (+1 on an odd folding rank, 1 on an even one) and about 2(P-1)/P · n values.

# %% tags=["demo"]
def worker(comm, data):
    return halving_doubling_allreduce(comm, data[comm.rank])


try:
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(N) for _ in range(K)]
    res = cluster.run(worker, K, backend="sim", args=(data,))
    expected = np.sum(data, axis=0)
    for r in range(K):
        np.testing.assert_allclose(res.values[r], expected, rtol=1e-12, atol=1e-12)
    P_, R_ = fold_layout(K)
    q = P_.bit_length() - 1
    print("messages sent per rank:", [s.messages_sent for s in res.stats], f"(2 log2 P = {2 * q}; fold ranks 1 or "
          f"{2 * q + 1})")
    print("bytes sent per rank:   ", [s.bytes_sent for s in res.stats],
          f"(2(P-1)/P * n * 8 = {2 * (P_ - 1) / P_ * N * 8:.0f}, plus n * 8 for a folding rank)")
    print(f"simulated time {res.sim_time * 1e6:.1f} us; a ring would take {2 * (K - 1)} steps, this {2 * q + 2 * (R_ > 0)}")
except cluster.RankError as err:
    print("halving_doubling_allreduce failed:", err.summary)

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(halving_doubling_allreduce)
