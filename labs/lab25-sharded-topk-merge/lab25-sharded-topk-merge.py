# %% [markdown]
# # Lab 25: an exact sharded top-k that sends fewer than k candidates per shard
#
# Chapter 25 split a vector base over K shards and answered a query by **scatter-gather**: every shard
# sends its own k nearest (distance, id) pairs to rank 0, which merges the K lists. Rank 0 receives
# (K - 1) k pairs per query and keeps k of them: most of the traffic carries candidates that cannot
# win. Exercise 3 of the chapter ("early termination") asks for the fix, and this lab builds it: a
# **two-round threshold protocol** that is still exact. It is the idea of the threshold algorithms for
# distributed top-k queries (Cao and Wang's TPUT, "Efficient Top-K Query Calculation in Distributed
# Networks", PODC 2004, where an object's score is summed over nodes and three rounds are needed); here
# each vector lives on one shard, so two rounds suffice.
#
# **The protocol** (K ranks, k neighbours, m = ceil(k / K)):
#
# 1. **Round 1.** Every rank computes its local candidates in order; every rank r > 0 sends its best
#    m pairs per query to rank 0 (a shard with fewer than m vectors sends what it has).
# 2. **The threshold.** Rank 0 puts, per query, its own best m beside the K - 1 lists it received and
#    takes **tau = the k-th smallest** of those distances (+inf when there are fewer than k). Since
#    K * m >= k real candidates stand at or under tau, the true k-th distance is at most tau: a vector
#    farther than tau cannot be in the answer. Rank 0 sends tau, **one number per query in the data's
#    dtype**, to every other rank.
# 3. **Round 2.** Every rank r > 0 sends only its *remaining* candidates (those after its first m)
#    with distance **<= tau** (equal distances included: among equal distances the smaller id wins,
#    so a vector exactly at tau may belong to the answer), and never more than **k - m** per query (a
#    shard holds at most k of the answer and has sent m already).
# 4. **The merge.** Rank 0 merges its own local top-k with everything it received into the exact
#    global top-k.
#
# **Distances and the order rule.** The distance is the squared Euclidean distance
# sum_j (q_j - x_j)^2, computed in the dtype of the input (float32 or float64). Results are ordered
# **smaller distance first, and among equal distances the smaller global id first**; a row with fewer
# than k candidates in total is padded with distance +inf and id -1. Rank r holds rows
# `offset, ..., offset + len(shard) - 1` of the whole base: the id of a vector is its row in the whole
# base, an int64 (bases of billions of rows exist).
#
# **The cost.** A rank r > 0 sends nq * m pairs in round 1 and, in round 2, its candidates at or under
# tau (at most k - m per query) plus nq counts: when a query's neighbours are spread over the shards,
# tau is tight and a rank far from the query sends about m pairs instead of k. The price is a second
# round trip (2 alpha more latency) and one tau per query. With itemsize b (4 or 8), a pair costs
# b + 8 bytes, tau b bytes, a count 8 bytes, and every message one small header.
#
# **The functions.** `local_topk`, `threshold`, `pack_round2`, `unpack_round2` and `merge_rows` are
# the pieces; `two_round_topk(comm, queries, shard, offset, k)` runs the protocol on every rank (each
# rank gets all the queries but only its own shard and offset). The grader calls `two_round_topk`
# through `run_topk`; the public tests also call `local_topk`, `threshold` and `pack_round2`.
#
# **The messages** (the grader counts them on its own side of the network, so the format is fixed):
#
# | when | who | what |
# |---|---|---|
# | round 1 | rank r > 0 to 0 | distances `(nq, m)` in the data's dtype, then ids `(nq, m)` int64 |
# | threshold | rank 0 to each r > 0 | tau `(nq,)` in the data's dtype |
# | round 2 | rank r > 0 to 0 | `counts (nq,)` int64, then the flat distances `(sum(counts),)`, then the flat ids `(sum(counts),)` int64, query 0's candidates first |
#
# **What the grader checks.** Rank 0's answer equals one exact search of the whole base (K = 1, 2, 3,
# 5, 8, uneven and empty shards, k larger than a shard, float32 and float64, integer-valued vectors so
# ties are everywhere, ids past 2^32); and, from its own trace: before a rank hears tau it sends
# exactly its best m pairs per query; rank 0 sends one number per query to each rank, equal to the
# grader's own tau; after tau a rank sends exactly its candidates at or under the grader's tau, capped
# at k - m, plus the counts and headers. The bases are made of small clusters shuffled over the
# shards, so a rank that sends k pairs per query, as the chapter's scatter-gather does, sends several
# times more and fails those checks.
# `scaleoutai.serving` (the chapter's search and merge) and `faiss` cannot be imported in the grader.

# %% tags=["parameters"]
K = 4  # smoke: 3
N = 2_000  # smoke: 300
NQ = 20  # smoke: 6
TOPK = 10  # smoke: 6

# %%
import numpy as np

from scaleoutai import cluster


# %%
def local_topk(queries, shard, offset, k):
    """This shard's best min(k, len(shard)) candidates per query, sorted by (distance, global id):
    (dists, ids) of shape (nq, min(k, len(shard))), dists in the data's dtype, ids int64."""
    ### BEGIN SOLUTION
    queries = np.atleast_2d(queries)
    shard = np.asarray(shard).reshape(-1, queries.shape[1])
    kind, width = np.result_type(queries, shard), min(k, len(shard))
    if width == 0:  # an empty shard: no candidates, but the right shapes and dtypes
        return np.zeros((len(queries), 0), kind), np.zeros((len(queries), 0), np.int64)
    rows = np.arange(len(shard), dtype=np.int64) + np.int64(offset)
    near_d, near_i = [], []
    for q in queries:
        gap = shard - q
        dist = (gap * gap).sum(axis=1)
        pick = np.lexsort((rows, dist))[:width]
        near_d.append(dist[pick])
        near_i.append(rows[pick])
    return np.stack(near_d).astype(kind, copy=False), np.stack(near_i)
    ### END SOLUTION


# %%
def threshold(first_round, k):
    """tau per query: the k-th smallest of the round-1 distances of all ranks, laid side by side in
    `first_round` (nq, total); +inf for a query with fewer than k of them."""
    ### BEGIN SOLUTION
    first_round = np.atleast_2d(first_round)
    tau = np.full(first_round.shape[0], np.inf, dtype=first_round.dtype)
    if first_round.shape[1] >= k:
        tau[:] = np.partition(first_round, k - 1, axis=1)[:, k - 1]
    return tau
    ### END SOLUTION


# %%
def pack_round2(dists, ids, tau, m, k):
    """A rank's round-2 payload from its sorted local lists: per query, the candidates after the first
    m whose distance is <= tau, at most k - m of them. Returns (counts, flat_dists, flat_ids)."""
    ### BEGIN SOLUTION
    rest_d, rest_i = dists[:, m:k], ids[:, m:k]
    keep = rest_d <= np.asarray(tau, dtype=dists.dtype)[:, None]
    counts = keep.sum(axis=1, dtype=np.int64)
    flat_d = np.ascontiguousarray(rest_d[keep])  # row-major: query 0's candidates first
    flat_i = np.ascontiguousarray(rest_i[keep], dtype=np.int64)
    return counts, flat_d, flat_i
    ### END SOLUTION


# %%
def unpack_round2(counts, flat_dists, flat_ids):
    """The inverse of pack_round2: one (dists, ids) pair of 1-D arrays per query."""
    ### BEGIN SOLUTION
    counts = np.asarray(counts, dtype=np.int64)
    if counts.sum() != len(flat_dists) or len(flat_dists) != len(flat_ids):
        raise ValueError(f"counts add up to {counts.sum()} but {len(flat_dists)} distances and "
                         f"{len(flat_ids)} ids arrived")
    ends = np.cumsum(counts)
    return [(flat_dists[e - c:e], flat_ids[e - c:e]) for c, e in zip(counts, ends)]
    ### END SOLUTION


# %%
def merge_rows(rows, k, dtype):
    """rows[q]: a list of (dists, ids) pieces of query q. The best k by (distance, id), padded with
    (+inf, -1): (dists (nq, k) of `dtype`, ids (nq, k) int64)."""
    ### BEGIN SOLUTION
    picked_d, picked_i = [], []
    for pieces in rows:
        d = np.hstack([np.zeros(0, dtype)] + [np.ravel(np.asarray(piece[0], dtype=dtype)) for piece in pieces])
        i = np.hstack([np.zeros(0, np.int64)] + [np.ravel(np.asarray(piece[1], np.int64)) for piece in pieces])
        order = np.lexsort((i, d))[:k]
        short = k - len(order)  # fewer than k candidates in all: pad with (+inf, -1)
        picked_d.append(np.concatenate([d[order], np.full(short, np.inf, dtype=dtype)]))
        picked_i.append(np.concatenate([i[order], np.full(short, -1, dtype=np.int64)]))
    if not picked_d:  # no queries at all
        return np.zeros((0, k), dtype), np.zeros((0, k), np.int64)
    return np.stack(picked_d), np.stack(picked_i)
    ### END SOLUTION


# %%
def two_round_topk(comm, queries, shard, offset, k):
    """The two-round threshold protocol on every rank; rank 0 returns (dists, ids) of shape (nq, k),
    the other ranks return None."""
    ### BEGIN SOLUTION
    queries = np.atleast_2d(queries)
    nq, m = len(queries), -(-k // comm.size)  # m = ceil(k / K): K * m >= k candidates in round 1
    dists, ids = local_topk(queries, shard, offset, k)
    if comm.rank != 0:
        comm.send(np.ascontiguousarray(dists[:, :m]), 0)
        comm.send(np.ascontiguousarray(ids[:, :m]), 0)
        tau = comm.recv(0)
        for part in pack_round2(dists, ids, tau, m, k):
            comm.send(part, 0)
        return None
    first = {}  # rank -> its round-1 (distances, ids)
    for peer in range(1, comm.size):
        d1 = comm.recv(peer)
        first[peer] = (d1, comm.recv(peer))
    tau = threshold(np.hstack([dists[:, :m]] + [first[p][0] for p in sorted(first)]), k)
    for peer in first:
        comm.send(tau, peer)
    second = {peer: unpack_round2(comm.recv(peer), comm.recv(peer), comm.recv(peer)) for peer in first}
    rows = []
    for q in range(nq):
        pieces = [(dists[q], ids[q])]  # rank 0's own list: all of its top-k
        for peer in first:
            pieces += [(first[peer][0][q], first[peer][1][q]), second[peer][q]]
        rows.append(pieces)
    return merge_rows(rows, k, dists.dtype)
    ### END SOLUTION


# %%
def run_topk(comm, queries, shard, offset, k):
    """What the grader calls on every rank: rank 0 returns [dists, ids] as one float64 array (2, nq, k)."""
    out = two_round_topk(comm, queries, shard, int(np.asarray(offset).reshape(-1)[0]), int(k))
    if comm.rank > 0:  # only rank 0 holds the answer
        return np.zeros(0)
    dists, ids = out
    return np.stack([np.asarray(dists, dtype=np.float64), np.asarray(ids, dtype=np.float64)])


# %% [markdown]
# Try it on the simulator. The base is made of small clusters of integer-valued vectors (so ties are
# common) whose rows are shuffled, so each shard holds a few vectors of every cluster: a query's
# neighbours are spread over the shards, tau is tight, and round 2 carries few pairs. The check
# compares with one sort of the whole base and prints the bytes each rank sent beside what k pairs per
# query would cost. (Put whole clusters on shards instead and the saving shrinks: the shards far from
# the query pull tau up. Try it.)

# %% tags=["demo"]
def split_worker(comm, queries, base, k):
    lo = len(base) * comm.rank // comm.size
    hi = len(base) * (comm.rank + 1) // comm.size
    return two_round_topk(comm, queries, base[lo:hi], lo, k)


try:
    rng = np.random.default_rng(0)
    centres = rng.integers(-60, 61, size=(N // TOPK + 1, 4))  # clusters of about TOPK vectors
    base = np.repeat(centres, TOPK, axis=0)[:N] + rng.integers(-1, 2, size=(N, 4))
    base = base[rng.permutation(N)].astype(np.float32)  # random rows: every shard holds a few of each cluster
    queries = (centres[rng.integers(0, len(centres), NQ)] + rng.integers(-1, 2, size=(NQ, 4))).astype(np.float32)
    full = ((queries[:, None, :] - base[None]) ** 2).sum(-1)
    want = np.array([np.lexsort((np.arange(N), row))[:TOPK] for row in full])
    res = cluster.run(split_worker, K, args=(queries, base, TOPK))
    dists, ids = res.values[0]
    assert np.array_equal(ids, want), "the merged ids differ from one sort of the whole base"
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats],
          f"| k pairs per query would be {TOPK * 12 * NQ} per rank")
except cluster.RankError as err:
    print("two_round_topk failed:", err.summary)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
