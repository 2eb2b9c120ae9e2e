# %% [markdown]
# # Lab 13: a full-graph GNN layer, forward and backward, over an edge-cut with halo exchange
#
# Chapter 13 trained GraphSAGE on **sampled mini-batches**: each rank draws a batch from its own
# vertices, fetches the remote feature rows the sample touches (`fetch_features`), and all-reduces the
# weight gradients. The features never need a gradient there, because they are inputs. Its research
# directions name the alternative that systems such as ROC, CAGNET and PipeGCN take: **full-graph
# training**, where every vertex is computed at every layer. Then a layer's input is the previous
# layer's output, it needs a gradient, and the backward pass has to send gradients the other way.
# This lab builds that step: one mean-aggregation SAGE layer, forward **and** backward, over an
# edge-cut partition.
#
# **The layer** (the chapter's `sage_layer`, message passing along src -> dst):
#
#     agg[i] = (1 / deg(i)) * sum over edges (s, i) of h[s]        (deg(i) = in-edges of i; 0 if none)
#     out[i] = agg[i] @ W_l + b_l + h[i] @ W_r
#
# A multi-edge counts as many times as it appears (in the sum and in deg), a self-loop (i, i) is an
# ordinary in-edge, and a vertex without in-edges has agg = 0.
#
# **The partition.** `parts[v]` is the rank that owns vertex v. Rank r is handed only:
# `X_own`, the rows of its owned vertices in increasing id order (shape (n_r, d_in), possibly n_r = 0);
# `edges_in`, the edges (src, dst) whose **dst** it owns, in the global edge order (so every in-edge of
# an owned vertex is local, but a source may be owned elsewhere); the owner map `parts`; the weights.
# A source owned by another rank is a **ghost**: its row must be fetched (the *halo*).
#
# **The backward pass.** Given dOut = dL/dout for the owned rows, with S[i] = dOut[i] / deg(i):
#
#     dW_l = agg^T dOut,  db_l = sum_i dOut[i],  dW_r = h^T dOut
#     dh[s] = dOut[s] @ W_r^T + sum over edges (s, i) of S[i] @ W_l^T
#
# The second sum runs over the **out**-edges of s, which live on the ranks that own their destinations:
# the rank that holds a ghost s computes its share of dh[s] and must send it **back to s's owner**,
# which adds up the shares from every rank. That reverse halo is what a sampled mini-batch never
# needs and what this lab asks for. The weight gradients are **this rank's share** (the sum over its
# owned rows): their all-reduce is the chapter's (`train_sage_minibatch`) and the grader adds the K
# shares itself, so no weight traffic belongs here.
#
# **The cost the grader checks** (on its own trace; the bytes of a message include its header). With
# g_rj = the number of **distinct** ghosts rank r needs from rank j, r may send j at most
# 8 g_rj bytes of int64 ids (to tell j what it needs), the rows j needs from r (g_jr of them) and the
# gradient rows r owes j (g_rj of them), each row at most max(d_in, d_out) values of the data's dtype,
# plus at most four message headers. So a ghost crosses once each way whatever the number of its
# edges into r; no rank gathers the whole feature matrix or sends a row per cut edge; and the rows
# travel in the data's dtype (a float32 layer sends float32). Nothing crosses between ranks that share
# no ghost except empty messages. (Sending h[s] @ W_l instead of h[s], or the summed S instead of its
# product with W_l^T, is allowed: a row is at most max(d_in, d_out) wide.)
#
# **What the grader checks.** Every rank's out and dX and the sum of the K weight-gradient shares
# against one sparse computation of the whole graph (scipy), for K = 1, 2, 3, 5 and K larger than the
# number of vertices, uneven and random partitions, ranks that own nothing, isolated vertices,
# self-loops and multi-edges, float32 (rtol 1e-4) and float64 (rtol 1e-9), on the simulator and on 2
# real processes; and the traffic bound above on every ordered pair of ranks, graded on cases whose
# values are right. The outputs keep the input's dtype. `scaleoutai.ml` (the chapter's
# `fetch_features`, `gcn_aggregate` and `sage_layer`) cannot be imported in the grader.

# %% tags=["parameters"]
K = 4  # smoke: 3
N = 2_000  # smoke: 300
D_IN = 16  # smoke: 6
D_OUT = 8  # smoke: 4

# %%
import numpy as np

from scaleoutai import cluster


# %%
def ghost_lists(edges_in, parts, rank, K):
    """The distinct ghosts of this rank, grouped by owner: a list of K sorted int64 arrays, entry j
    holding the sources of `edges_in` owned by rank j != rank (entry `rank` is empty)."""
    ### BEGIN SOLUTION
    sources = np.unique(np.asarray(edges_in, dtype=np.int64).reshape(-1, 2)[:, 0])
    owner_of = np.asarray(parts, dtype=np.int64)[sources]
    return [sources[owner_of == j] if j != rank else np.zeros(0, np.int64) for j in range(K)]
    ### END SOLUTION


# %%
def exchange(comm, blocks, skip=None):
    """blocks[j] goes to rank j (j != comm.rank); returns what every rank sent here (own entry: a copy
    of blocks[rank]). `skip[j]` True: neither side sends (both know the message would be empty)."""
    ### BEGIN SOLUTION
    me = comm.rank
    peers = [j for j in range(comm.size) if j != me and (skip is None or not skip[j])]
    for j in peers:  # sends are eager: post them all, then collect
        comm.send(np.ascontiguousarray(blocks[j]), j)
    arrived = {j: comm.recv(j) for j in peers}
    arrived[me] = np.array(blocks[me], copy=True)
    return [arrived.get(j) for j in range(comm.size)]
    ### END SOLUTION


# %%
def halo_forward(comm, X_own, edges_in, parts, W_l, b_l, W_r):
    """The layer's forward on this rank: returns (out (n_r, d_out), ctx) where ctx is whatever
    halo_backward needs. One set-up message of ids per rank pair, then the ghost rows."""
    ### BEGIN SOLUTION
    me, size, parts = comm.rank, comm.size, np.asarray(parts, dtype=np.int64)
    mine = np.flatnonzero(parts == me)
    n_own = len(mine)
    e = np.asarray(edges_in, dtype=np.int64).reshape(-1, 2)
    ghosts = ghost_lists(e, parts, me, size)
    wanted = exchange(comm, ghosts)  # wanted[j]: my vertices that rank j holds as ghosts
    wanted[me] = np.zeros(0, np.int64)
    # local ids: my vertices first, then the ghosts of rank 0, 1, ... each group in id order
    local = np.full(len(parts), -1, dtype=np.int64)
    local[mine] = np.arange(n_own)
    ghost_ids = np.concatenate(ghosts) if size else np.zeros(0, np.int64)
    local[ghost_ids] = n_own + np.arange(len(ghost_ids))
    quiet_in = [len(g) == 0 for g in ghosts]
    quiet_out = [len(w) == 0 for w in wanted]
    quiet = [a and b for a, b in zip(quiet_in, quiet_out)]
    rows = exchange(comm, [X_own[local[w]] for w in wanted], skip=quiet)
    halo = [rows[j] if len(ghosts[j]) else np.zeros((0, X_own.shape[1]), X_own.dtype) for j in range(size)]
    h = np.concatenate([X_own] + [halo[j] for j in range(size) if j != me]).astype(X_own.dtype, copy=False)
    src, dst = local[e].T
    deg = np.bincount(dst, minlength=n_own)
    inv = (1 / np.maximum(deg, 1)).astype(X_own.dtype)  # a vertex without in-edges has agg = 0 anyway
    agg = np.zeros((n_own, X_own.shape[1]), dtype=X_own.dtype)
    np.add.at(agg, dst, h[src])  # add.at: a vertex with several in-edges gets every one
    agg *= inv[:, None]
    out = agg @ W_l + b_l + X_own @ W_r
    ctx = (h, agg, inv, (src, dst), (ghosts, wanted, quiet), local, (W_l, W_r))
    return out.astype(X_own.dtype, copy=False), ctx
    ### END SOLUTION


# %%
def halo_backward(comm, ctx, dOut):
    """The layer's backward on this rank: (dX (n_r, d_in), dW_l, db_l, dW_r), the weight gradients
    being this rank's share. The gradient of every ghost row goes back to its owner and is added there."""
    ### BEGIN SOLUTION
    h, agg, inv, (src, dst), (ghosts, wanted, quiet), local, (W_l, W_r) = ctx
    n_own, me, dtype = len(agg), comm.rank, h.dtype
    dOut = np.asarray(dOut, dtype=dtype).reshape(n_own, W_l.shape[1])
    per_edge = (dOut * inv[:, None])[dst]
    pulled = np.zeros((h.shape[0], dOut.shape[-1]), dtype)
    np.add.at(pulled, src, per_edge)  # every out-edge of a row that lands here
    dh = pulled @ W_l.T
    dX = dh[:n_own] + dOut @ W_r.T
    owed = [dh[local[g]] for g in ghosts]  # the shares of dh I hold for rank j's rows
    owed[me] = np.zeros((0, h.shape[1]), dtype)
    back = exchange(comm, owed, skip=quiet)
    for j, rows in enumerate(back):
        if j != me and len(wanted[j]):
            np.add.at(dX, local[wanted[j]], rows)  # several ranks may hold the same row
    dW_l = agg.T @ dOut
    db_l = dOut.sum(axis=0)
    dW_r = h[:n_own].T @ dOut
    return tuple(a.astype(dtype, copy=False) for a in (dX, dW_l, db_l, dW_r))
    ### END SOLUTION


# %%
def run_layer(comm, X_own, edges_in, parts, W_l, b_l, W_r, dOut):
    """What the grader calls on every rank: out, dX, dW_l, db_l and dW_r flattened into one array."""
    out, ctx = halo_forward(comm, X_own, edges_in, parts, W_l, b_l, W_r)
    grads = halo_backward(comm, ctx, dOut)
    return np.concatenate([np.ravel(a) for a in (out,) + tuple(grads)])


# %% [markdown]
# Try it on the simulator: a ring lattice (vertex v links to v +- 1, v +- 2 and a few random far
# vertices) split into contiguous ranges, so each rank's halo is a few boundary vertices. The check
# compares every output with one computation of the whole graph, and prints the bytes each rank sent
# beside what gathering the whole feature matrix would cost.

# %% tags=["demo"]
def reference(X, edges, W_l, b_l, W_r, dOut):
    """The layer on one machine, dense (small graphs only): (out, dX, dW_l, db_l, dW_r)."""
    n = len(X)
    M = np.zeros((n, n))
    np.add.at(M, (edges[:, 1], edges[:, 0]), 1.0)
    M /= np.maximum(M.sum(axis=1, keepdims=True), 1)
    agg = M @ X
    return agg @ W_l + b_l + X @ W_r, M.T @ dOut @ W_l.T + dOut @ W_r.T, agg.T @ dOut, dOut.sum(0), X.T @ dOut


def split_worker(comm, X, edges, parts, W_l, b_l, W_r, dOut):
    mine = parts == comm.rank
    return run_layer(comm, X[mine], edges[mine[edges[:, 1]]], parts, W_l, b_l, W_r, dOut[mine])


try:
    rng = np.random.default_rng(0)
    n = min(N, 160)  # the dense reference is n x n
    v = np.arange(n)
    ring = [np.stack([v, (v + s) % n], 1) for s in (-2, -1, 1, 2)]
    edges = np.concatenate(ring + [rng.integers(0, n, size=(n // 20, 2))])
    parts = np.repeat(np.arange(K), -(-n // K))[:n]
    X, dOut = rng.standard_normal((n, D_IN)), rng.standard_normal((n, D_OUT))
    W_l, W_r, b_l = rng.standard_normal((D_IN, D_OUT)), rng.standard_normal((D_IN, D_OUT)), rng.standard_normal(D_OUT)
    res = cluster.run(split_worker, K, args=(X, edges, parts, W_l, b_l, W_r, dOut))
    want = reference(X, edges, W_l, b_l, W_r, dOut)
    sizes = [(parts == r).sum() for r in range(K)]
    for r, flat in enumerate(res.values):
        m = sizes[r]
        assert np.allclose(flat[:m * D_OUT].reshape(m, D_OUT), want[0][parts == r]), f"rank {r}: out differs"
        assert np.allclose(flat[m * D_OUT:m * (D_OUT + D_IN)].reshape(m, D_IN), want[1][parts == r]), \
            f"rank {r}: dX differs (does every ghost's gradient go back to its owner?)"
    shares = sum(flat[sizes[r] * (D_OUT + D_IN):] for r, flat in enumerate(res.values))
    assert np.allclose(shares, np.concatenate([want[2].ravel(), want[3], want[4].ravel()]))
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats],
          f"| an all-gather of X alone would be about {(K - 1) * (n // K) * D_IN * 8} per rank")
except cluster.RankError as err:
    print("the layer failed:", err.summary)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
