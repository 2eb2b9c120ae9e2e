# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 4. Communication primitives
#
# Every distributed training step, every sharded lookup and every expert-parallel layer in this book
# ends in the same handful of group operations: broadcast, scatter, gather, reduce, all-reduce,
# reduce-scatter, all-gather and all-to-all. This chapter builds all of them from two calls,
# `comm.send(array, dst)` and `comm.recv(src)`, checks each against a one-machine NumPy answer, and
# prices each with the $\alpha$-$\beta$ model: a message of $m$ bytes takes $\alpha + \beta m$ seconds.
# Then it runs the same operations through `torch.distributed` on real processes, fits $\alpha$ and
# $\beta$ on this machine, and breaks the collectives on purpose.
#
# **Prerequisites:** Chapter 1 (Why scale out: the communicator and the sharded gradient), Chapter 2
# (Distributed-systems concepts: messages, ordering and failures) and Chapter 3 (Performance models:
# the $\alpha$-$\beta$ cost of a message). Background: NumPy slicing and `np.array_split`, logarithms.

# %% tags=["parameters"]
K = 8  # smoke: 4
P = 1_048_576  # smoke: 4_096
KS = [2, 3, 4, 5, 8, 12, 16]  # smoke: [2, 3, 5, 8]
SIZES = [256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216]  # smoke: [256, 1024, 4096, 16384, 65536, 262144]
PROC_SIZES = [256, 4096, 65536, 262144, 1048576, 4194304]  # smoke: [256, 4096, 65536, 262144, 1048576]
REPEATS = 15  # smoke: 5
ALPHA = 1e-5
BETA = 1e-9

# %% [markdown]
# `K` is the number of workers, `P` the number of float32 values each worker holds (think: the
# parameters of a model, the payload of a gradient all-reduce), so each rank's vector is
# $n = 4P$ bytes. `KS` and `SIZES` (bytes) are the sweeps; `PROC_SIZES` the message sizes timed on
# real processes. `ALPHA` (s per message) and `BETA` (s per byte) describe the simulated network:
# 10 µs latency and 1 GB/s.
#
# ## 1. Motivation: which ceiling binds
#
# Data-parallel training (Chapters 1 and 15) computes a gradient of $P$ numbers on each of $K$
# workers and must leave the *sum* on every worker before the next step. Compute per worker falls as
# $1/K$; the communication does not, and which algorithm moves the bytes decides whether it grows with
# $K$ or stays flat. The binding ceiling here is the **network**: per-message latency $\alpha$ and
# per-byte cost $\beta$. A back-of-envelope with the closed forms in `perf.collective_time`, for a
# 1-billion-parameter float32 gradient (4 GB) on a 100 Gb/s network:

# %%
import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, perf
from scaleoutai import collectives

grad_bytes, a_dc, b_dc = 4e9, 10e-6, 1 / 12.5e9  # 4 GB gradient, 10 us, 12.5 GB/s
print(f"{'K':>5} {'naive (root) s':>15} {'ring s':>8}")
for k in (8, 64, 512):
    naive = perf.collective_time("naive_allreduce", grad_bytes, k, a_dc, b_dc)
    ring = perf.collective_time("ring_allreduce", grad_bytes, k, a_dc, b_dc)
    print(f"{k:>5} {naive:>15.1f} {ring:>8.2f}")

# %% [markdown]
# Sending every gradient to one root costs time linear in $K$; the ring's cost tends to
# $2n\beta \approx 0.64$ s whatever $K$ is. The rest of the chapter explains where the two formulas
# come from and checks them message by message.
#
# ## 2. Core concepts
#
# **The point-to-point contract.** A worker is a function `fn(comm, ...)` run on every rank.
# `comm.rank` is its id in $0..K-1$, `comm.size` is $K$. `comm.send(x, dst)` hands a NumPy array to rank
# `dst` and returns at once (sends are buffered, "eager"); `comm.recv(src)` blocks until the next
# message from `src` arrives and returns a fresh array of the sender's shape and dtype. Messages
# between one pair of ranks arrive in the order they were sent. Nothing else is needed.
#
# **Eager and rendezvous.** Real message layers move a message in one of two ways. *Eager*: the sender
# pushes the bytes at once and the receiver buffers them until the program asks, which costs a copy
# and buffer space but never makes the sender wait. *Rendezvous*: the sender first announces the size,
# the receiver answers once it has a buffer, and only then do the bytes flow, straight into the
# destination, at the price of a round trip. Our `send` is eager. On real processes every message
# carries a header (dtype and shape) followed by the payload, and gloo moves bytes only into a receive
# that has been *posted*, so by default the payload's receive can be posted only once the header has
# landed. A rank that already knows what is coming can do better with a **posted receive**,
# `comm.recv(src, out=buf)` (MPI's `irecv` into a named buffer): the payload's receive goes into `buf`
# before the header arrives, the bytes land in place, and the header only confirms the size. A message
# that does not fit `buf` exactly is a `ValueError`. The ring's reduce-scatter and all-gather steps use
# it, since both ends know every block's size.
#
# **The cost model.** The simulator gives every rank one *single-port, full-duplex* link, the model of
# the MPI cost literature: a rank sends one message and receives one message at a time, in both
# directions at once. A send of $m$ bytes started at the sender's clock $t$ keeps the sender's outgoing
# port busy until $t + \alpha + \beta m$; the message then needs the receiver's incoming port for
# $\alpha + \beta m$ as well, in the first free interval that starts no earlier than $t$. So $k$
# messages that converge on one rank at once take $k(\alpha + \beta m)$ there: **incast**. A receive
# moves the receiver's clock to the later of its own clock and the end of that interval. A collective's
# time is the latest clock at the end.
# Every collective below costs $a(K)\,\alpha + b(K)\, n\beta$: $a$ counts message rounds on the
# critical path (the latency term), $b\,n$ the bytes on it (the bandwidth term).

# %%
def ping_pong(comm, x):
    """Rank 0 sends x to rank 1 and waits for it to come back."""
    if comm.rank == 0:
        comm.send(x, 1)
        return comm.recv(1)
    y = comm.recv(0)
    comm.send(y, 0)
    return y


net = cluster.Network(alpha=ALPHA, beta=BETA)
x = np.arange(1000, dtype=np.float32)  # 4000 bytes
res = cluster.run(ping_pong, 2, args=(x,), network=net)
assert all(np.array_equal(v, x) and v.dtype == x.dtype for v in res.values)
assert res.stats[0].bytes_sent == res.stats[1].bytes_sent == x.nbytes
assert np.isclose(res.sim_time, 2 * (ALPHA + BETA * x.nbytes), rtol=1e-12)
print(f"round trip of {x.nbytes} B: {res.sim_time * 1e6:.1f} us simulated = 2 (alpha + 4000 beta)")
print("rank 0 stats:", res.stats[0].as_dict())

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# | collective | before (rank r holds) | after | pattern used here |
# |---|---|---|---|
# | broadcast | root: x | every rank: x | binomial tree, $\lceil\log_2 K\rceil$ rounds |
# | scatter | root: x | rank r: block r of x | root sends K-1 blocks |
# | gather | block $x_r$ | root: concat of all blocks | every rank sends to root |
# | reduce | $x_r$ | root: $\sum_r x_r$ | binomial tree |
# | all-reduce | $x_r$ | every rank: $\sum_r x_r$ | naive, tree, ring, recursive doubling |
# | reduce-scatter | $x_r$ | rank r: block r of $\sum_r x_r$ | ring, K-1 steps |
# | all-gather | block $x_r$ | every rank: concat of all blocks | ring, K-1 steps |
# | all-to-all | K blocks $x_{r\to j}$ | rank r: $[x_{j \to r}]_j$ | K-1 pairwise rounds |
#
# "Block r" always means `np.array_split(x, K)[r]`, so lengths that K does not divide work, and when
# the vector is shorter than K some ranks hold an empty block. The all-reduce has four algorithms with
# four cost profiles (in the $\alpha$-$\beta$ model, $n$ bytes per rank):
#
# * **naive**: everyone sends to rank 0, rank 0 sums and sends the result back to each rank:
#   $2(K-1)(\alpha + n\beta)$, because rank 0's single port takes the $K-1$ vectors one after another
#   and then sends $K-1$ copies back; its link carries $(K-1)n$ bytes each way.
# * **tree**: a binomial-tree reduce followed by a binomial-tree broadcast:
#   $2\lceil\log_2 K\rceil(\alpha + n\beta)$. Few rounds, but every round carries the whole vector.
# * **recursive doubling**: in round $k$, rank $r$ swaps its partial sum with rank $r \oplus 2^k$:
#   $\log_2 K\,(\alpha + n\beta)$, two extra rounds when $K$ is not a power of two.
# * **ring**: a **reduce-scatter** (each rank ends up owning the full sum of one block) followed by an
#   **all-gather** (the finished blocks travel round once more): $2(K-1)(\alpha + \frac{n}{K}\beta)$.
#   Each rank sends $2\frac{K-1}{K}n$ bytes, and no all-reduce can do with less: every rank must send
#   at least the $\frac{K-1}{K}n$ bytes the others need of its data and receive as much of theirs,
#   in both halves. The ring is **bandwidth-optimal**; it pays for it with $2(K-1)$ latencies.
#
# ## 4. From scratch in NumPy
#
# Before importing the library, here is one collective written out in full: a *ring pass*. Every rank
# forwards whatever it last received to its right neighbour and adds it to a running total; after
# $K-1$ steps each rank has seen every other rank's vector exactly once.

# %% tags=["slide-code"]
def ring_pass_allreduce(comm, x):
    """All-reduce by passing whole vectors round the ring: K-1 steps of n bytes each."""
    K, r = comm.size, comm.rank
    total, travelling = x.copy(), x
    for _ in range(K - 1):
        comm.send(travelling, (r + 1) % K)
        travelling = comm.recv((r - 1) % K)
        total = total + travelling
    return total


def make_inputs(k, length, dtype, seed=0):
    """One array per rank: integers in [-100, 100) or standard normals, in the given dtype."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-100, 100, size=length).astype(dtype) for _ in range(k)]
    return [rng.standard_normal(length).astype(dtype) for _ in range(k)]


TOL = {np.dtype(np.float64): dict(rtol=1e-12, atol=1e-12), np.dtype(np.float32): dict(rtol=1e-5, atol=1e-5)}


def assert_matches(got, want):
    """Same dtype and shape, and equal: exactly for integers, within TOL for floats."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, **TOL[want.dtype])


for k in (1, 2, 3, 5, 8):
    xs = make_inputs(k, 11, np.float64, seed=k)
    res = cluster.run(lambda comm: ring_pass_allreduce(comm, xs[comm.rank]), k, network=net)
    for v in res.values:
        assert_matches(v, np.sum(xs, axis=0))
    assert all(s.bytes_sent == (k - 1) * xs[0].nbytes for s in res.stats)
print("ring pass: correct for K = 1, 2, 3, 5, 8; each rank sends (K-1) n bytes")

# %% [markdown]
# It is correct, but each rank sends $(K-1)n$ bytes: as many as the naive root, spread evenly. The
# ring all-reduce of the library cuts every vector into $K$ blocks and sends each rank only
# $2\frac{K-1}{K}n$ bytes, in $2(K-1)$ steps; Lab 4 asks for the algorithm that keeps these bytes in
# $2\log_2 K$ steps. The ring is imported here from `scaleoutai.collectives` together with the others. Read it: `ring_allreduce` is a reduce-scatter and
# an all-gather sharing one output buffer; in `reduce_scatter` note which block each step sends and
# which it folds, and that every receive is a posted receive into the block it lands in. For contrast,
# read `recursive_doubling_allreduce`, the latency-optimal choice: $\log_2 K$ exchanges of the whole
# vector with partner $r \oplus 2^k$ when $K$ is a power of two, plus a fold-in and a hand-back step
# for the ranks beyond the largest power of two otherwise. Both partners add in the same order, so
# every rank ends with identical bits.

# %%
from scaleoutai.notebooks import show

show(collectives.ring_allreduce, collectives.reduce_scatter, collectives.all_gather,
     collectives.recursive_doubling_allreduce)

# %% [markdown]
#
# **Checking every collective against one machine.** The reference for each collective is a line of
# NumPy over the stacked inputs: `np.sum(xs, axis=0)` for the reductions, `np.array_split` for the
# blocks, `np.concatenate` for the gathers. The checks run for $K = 1, 2, 3, 5, 8, 12$ (5 and 12 are not
# powers of two), a vector of 7 elements (so $K = 8, 12$ exceed the vector length and some blocks are
# empty) and one of 1001 (uneven blocks), in float64, float32 and int64. Float tolerances: relative and
# absolute $10^{-12}$ for float64, $10^{-5}$ for float32, since the algorithms add in different orders.

# %% tags=["slide"]
def reference_and_worker(name, xs, k):
    """(worker fn, expected value per rank) for collective `name` on inputs xs[r]."""
    total = np.sum(xs, axis=0).astype(xs[0].dtype)
    blocks = [np.array_split(x, k)[r] for r, x in enumerate(xs)]  # rank r contributes its block r
    root = k - 1  # a root other than 0 exercises the relative-rank arithmetic
    if name == "broadcast":
        return (lambda comm: collectives.broadcast(comm, xs[root] if comm.rank == root else None, root),
                [xs[root]] * k)
    if name == "scatter":
        return (lambda comm: collectives.scatter(comm, xs[root] if comm.rank == root else None, root),
                np.array_split(xs[root], k))
    if name == "gather":
        return (lambda comm: collectives.gather(comm, blocks[comm.rank], root),
                [np.concatenate(blocks) if r == root else None for r in range(k)])
    if name == "reduce":
        return (lambda comm: collectives.reduce(comm, xs[comm.rank], root), [total if r == root else None for r in range(k)])
    if name in collectives.ALLREDUCES:
        return (lambda comm: collectives.ALLREDUCES[name](comm, xs[comm.rank]), [total] * k)
    if name == "reduce_scatter":
        return (lambda comm: collectives.reduce_scatter(comm, xs[comm.rank]), np.array_split(total, k))
    if name == "all_gather":
        return (lambda comm: collectives.all_gather(comm, blocks[comm.rank]), [np.concatenate(blocks)] * k)
    if name == "rs+ag":
        return (lambda comm: collectives.all_gather(comm, collectives.reduce_scatter(comm, xs[comm.rank])), [total] * k)
    if name == "all_to_all":  # rank r sends block j of its vector to rank j
        parts = [np.array_split(x, k) for x in xs]
        return (lambda comm: collectives.all_to_all(comm, parts[comm.rank]),
                [[parts[j][r] for j in range(k)] for r in range(k)])
    raise ValueError(name)


NAMES = ["broadcast", "scatter", "gather", "reduce", *collectives.ALLREDUCES, "reduce_scatter", "all_gather", "rs+ag",
         "all_to_all"]
runs = 0
for name in NAMES:
    for k in (1, 2, 3, 5, 8, 12):
        for length in (7, 1001):
            for dtype in (np.float64, np.float32, np.int64):
                xs = make_inputs(k, length, dtype, seed=100 * k + length)
                fn, want = reference_and_worker(name, xs, k)
                got = cluster.run(fn, k, network=net, timeout=60).values
                for g, w in zip(got, want):
                    if w is None:
                        assert g is None
                    elif isinstance(w, list):
                        assert len(g) == len(w) and all(assert_matches(a, b) is None for a, b in zip(g, w))
                    else:
                        assert_matches(g, w)
                runs += 1
print(f"{len(NAMES)} collectives x 6 world sizes x 2 lengths x 3 dtypes = {runs} runs, all equal to NumPy")

# %% [markdown]
# The line `rs+ag` is the identity behind the ring: **reduce-scatter followed by all-gather is an
# all-reduce**. Sharded training (ZeRO and FSDP, Chapter 16) uses the two halves separately: it keeps
# only its reduced block of the gradient, updates that shard of the parameters, and all-gathers the
# parameters when it needs them. The reductions also take `op="max"` and `op="min"`:

# %%
xs = make_inputs(5, 9, np.float64, seed=3)
for op, ref in (("max", np.max), ("min", np.min)):
    for name, fn in collectives.ALLREDUCES.items():
        got = cluster.run(lambda comm: fn(comm, xs[comm.rank], op=op), 5, network=net).values
        for g in got:
            np.testing.assert_array_equal(g, ref(xs, axis=0))
print("max and min all-reduce agree with np.max / np.min for all four algorithms")

# %% [markdown]
# ### Timelines: naive against ring
#
# With `trace=True` the simulator records every send (blue) and receive (orange) with its simulated
# start and end; the arrows join a send to its receive. Same 4 ranks, same vector, same network:

# %%
x4 = np.ones(P, np.float32)
fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
traced = {}
for ax, name in zip(axes, ("naive", "ring")):
    traced[name] = cluster.run(lambda comm: collectives.ALLREDUCES[name](comm, x4), 4, network=net, trace=True)
    cluster.plot_timeline(traced[name], ax=ax, title=f"{name} all-reduce, K = 4, n = {x4.nbytes} B: "
                                                      f"{traced[name].sim_time * 1e3:.3f} ms")
fig.tight_layout()
for name, r in traced.items():
    print(f"{name:>6}: messages sent per rank {[s.messages_sent for s in r.stats]}, "
          f"bytes sent per rank {[s.bytes_sent for s in r.stats]}")

# %% [markdown]
# In the naive timeline rank 0 does all the work: its one incoming port takes the three full vectors
# one after another, then it sends three full vectors back, while ranks 1 to 3 sit idle. In the ring
# every rank is busy at every step, each message is a quarter of the vector, and the six steps finish
# sooner.
#
# ### Incast: many senders, one receiver
#
# Gather sends $K-1$ blocks of $n/K$ bytes to one root at the same moment. On a single-port link they
# queue at the root: $(K-1)(\alpha + \frac{n}{K}\beta)$, as long as a ring all-gather, which delivers
# the same blocks to *every* rank. A model that lets a rank receive any number of messages at once
# (`Network(ingress="free")`) charges the gather a single $\alpha + \frac{n}{K}\beta$ and teaches the
# wrong lesson: that funnelling data into one rank is cheap. Parameter servers (Chapter 11) and the
# replicas of a serving system (Chapter 23) hit exactly this queue.

# %%
free_net = cluster.Network(alpha=ALPHA, beta=BETA, ingress="free")
incast = []
for k in KS:
    elems = max(k, P // k * k)
    block = np.ones(elems // k, np.float32)
    t_gather = cluster.run(lambda comm: collectives.gather(comm, block), k, network=net).sim_time
    t_free = cluster.run(lambda comm: collectives.gather(comm, block), k, network=free_net).sim_time
    t_allgather = cluster.run(lambda comm: collectives.all_gather(comm, block), k, network=net).sim_time
    n_bytes = elems * 4
    assert np.isclose(t_gather, perf.collective_time("gather", n_bytes, k, ALPHA, BETA), rtol=1e-9)
    assert np.isclose(t_gather, (k - 1) * (ALPHA + block.nbytes * BETA), rtol=1e-9)  # queued at the root
    assert np.isclose(t_free, ALPHA + block.nbytes * BETA, rtol=1e-9)  # the free-ingress illusion
    assert np.isclose(t_allgather, t_gather, rtol=1e-9)  # everyone gets the blocks for the same time
    incast.append((k, t_gather, t_free, t_allgather))
print(f"{'K':>3} {'gather (single port)':>22} {'gather (free ingress)':>22} {'ring all-gather':>16}")
for k, tg, tf, ta in incast:
    print(f"{k:>3} {tg * 1e3:>19.3f} ms {tf * 1e3:>19.3f} ms {ta * 1e3:>13.3f} ms")
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(KS, [tg for _, tg, _, _ in incast], "o-", label="gather to one root (single port)")
ax.plot(KS, [ta for _, _, _, ta in incast], "x--", label="ring all-gather (every rank gets it)")
ax.plot(KS, [tf for _, _, tf, _ in incast], "s:", label="gather, free ingress (wrong)")
ax.set(xlabel="workers K", ylabel="simulated time (s)", title=f"incast: {4 * P} bytes gathered")
ax.legend()
plt.show()
#
# ### Bytes and time against the $\alpha$-$\beta$ model
#
# Now sweep the world size at a fixed vector of $n = 4P$ bytes, and the message size at fixed $K$.
# The lines are `perf.collective_time`; the markers are the simulator's makespan `res.sim_time`.

# %%
def sim_allreduce(name, k, nbytes):
    """Run all-reduce `name` on k ranks with a float32 vector of about nbytes (rounded to k blocks)."""
    elems = max(k, round(nbytes / 4 / k) * k)
    x = np.ones(elems, np.float32)
    return x.nbytes, cluster.run(lambda comm: collectives.ALLREDUCES[name](comm, x), k, network=net, timeout=120)


model_name = {name: f"{name}_allreduce" for name in collectives.ALLREDUCES}
sweep_k = {}
for name in collectives.ALLREDUCES:
    for k in KS:
        nb, r = sim_allreduce(name, k, 4 * P)
        sweep_k[name, k] = (nb, r.sim_time, max(s.bytes_sent for s in r.stats), max(s.messages_sent for s in r.stats))

for (name, k), (nb, t, b, m) in sweep_k.items():
    # the busiest rank sends exactly the modelled bytes when K divides the vector
    assert b == perf.collective_bytes_per_rank(model_name[name], nb, k), (name, k, b)
    # on a single-port link the closed form is exact for every K, powers of two or not
    model = perf.collective_time(model_name[name], nb, k, ALPHA, BETA)
    assert np.isclose(t, model, rtol=1e-9), (name, k, t, model)
    if name == "ring":
        assert b == 2 * (k - 1) * nb // k and m == 2 * (k - 1)
        assert np.isclose(t, 2 * (k - 1) * (ALPHA + nb / k * BETA), rtol=1e-9)
print("ring: bytes per rank == 2(K-1)/K n and sim time == 2(K-1)(alpha + n/K beta) for K in", KS)

sweep_n = {}
for name in collectives.ALLREDUCES:
    for nbytes in SIZES:
        nb, r = sim_allreduce(name, K, nbytes)
        sweep_n[name, nb] = r.sim_time

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
colors = dict(zip(collectives.ALLREDUCES, ("tab:red", "tab:green", "tab:blue", "tab:purple")))
ks_fine = np.arange(min(KS), max(KS) + 1)
for name in collectives.ALLREDUCES:
    nb = sweep_k[name, KS[0]][0]
    ax1.plot(ks_fine, [perf.collective_time(model_name[name], 4 * P, k, ALPHA, BETA) for k in ks_fine],
             color=colors[name], label=f"{name} (model)")
    ax1.plot(KS, [sweep_k[name, k][1] for k in KS], "o", color=colors[name])
    sizes = sorted(nb for (nm, nb) in sweep_n if nm == name)
    ax2.loglog(sizes, [perf.collective_time(model_name[name], s, K, ALPHA, BETA) for s in sizes],
               color=colors[name], label=f"{name} (model)")
    ax2.loglog(sizes, [sweep_n[name, s] for s in sizes], "o", color=colors[name])
ax1.set(xlabel="workers K", ylabel="all-reduce time (simulated s)", title=f"n = {4 * P} B per rank")
ax2.set(xlabel="bytes per rank n", ylabel="all-reduce time (simulated s)", title=f"K = {K}")
ax1.legend()
ax2.legend()
fig.tight_layout()

# %% [markdown]
# For large vectors (left) the naive time climbs linearly in $K$, tree and recursive doubling grow
# like $\log_2 K$ (with steps where $K$ passes a power of two), and the ring flattens towards
# $2n\beta$. For small messages (right, lower left corner) the order flips: the ring's $2(K-1)$
# latencies cost more than the tree's $2\log_2 K$.
#
# **The crossover.** A single message spends as long on latency as on bandwidth when $n^* = \alpha/\beta$
# (`perf.crossover_bytes`). Tree and ring cross where
# $2\log_2 K(\alpha + n\beta) = 2(K-1)(\alpha + \tfrac{n}{K}\beta)$, i.e. at
# $n = \frac{\alpha}{\beta}\cdot\frac{K-1-\log_2 K}{\log_2 K - (K-1)/K}$: a $K$-dependent multiple of
# $\alpha/\beta$. Below it use the tree, above it the ring; NCCL and MPI libraries switch algorithm by
# message size for exactly this reason.

# %%
n_star = perf.crossover_bytes(ALPHA, BETA)
lg = np.log2(K)
n_cross = n_star * (K - 1 - lg) / (lg - (K - 1) / K)
sizes = np.logspace(np.log10(min(SIZES)), np.log10(max(SIZES)), 200)
tree_t = perf.collective_time("tree_allreduce", sizes, K, ALPHA, BETA)
ring_t = perf.collective_time("ring_allreduce", sizes, K, ALPHA, BETA)
fig, ax = plt.subplots(figsize=(7, 4.5))
ax.loglog(sizes, tree_t, color=colors["tree"], label="tree (model)")
ax.loglog(sizes, ring_t, color=colors["ring"], label="ring (model)")
measured = sorted((nb, sweep_n["tree", nb]) for (nm, nb) in sweep_n if nm == "tree")
ax.loglog(*zip(*measured), "o", color=colors["tree"], label="tree (simulated)")
measured = sorted((nb, sweep_n["ring", nb]) for (nm, nb) in sweep_n if nm == "ring")
ax.loglog(*zip(*measured), "s", color=colors["ring"], label="ring (simulated)")
ax.axvline(n_star, color="gray", ls=":", label=r"$n^* = \alpha/\beta$")
ax.axvline(n_cross, color="black", ls="--", label="tree = ring")
ax.set(xlabel="bytes per rank n", ylabel="simulated time (s)", title=f"tree vs ring all-reduce, K = {K}")
ax.legend()

# the simulator agrees: the first simulated size at which the ring wins lies just above the crossover
ring_wins = [nb for nb, _ in measured if sweep_n["ring", nb] < sweep_n["tree", nb]]
tree_wins = [nb for nb, _ in measured if sweep_n["tree", nb] < sweep_n["ring", nb]]
assert tree_wins and ring_wins and max(tree_wins) < n_cross < min(ring_wins)
print(f"alpha/beta = {n_star:.0f} B; tree beats ring below {n_cross:.0f} B at K = {K}; "
      f"simulated: tree wins up to {max(tree_wins)} B, ring from {min(ring_wins)} B")

# %% [markdown]
# ## 5. The same task with a production library
#
# `torch.distributed` ships the same collectives, implemented in C++ by a backend: **gloo** on CPUs,
# **NCCL** on NVIDIA GPUs. `cluster.run(..., backend="process")` starts one real OS process per rank and
# initialises the default gloo process group inside each, so a worker can call our from-scratch
# collectives (over `comm.send` / `comm.recv`, which travel as torch point-to-point messages) and
# torch's built-in ones side by side on the same data. One run on 2 processes does two things:
#
# 1. **Agreement.** `ring_allreduce` against `dist.all_reduce`, `all_gather` against `dist.all_gather`,
#    `reduce_scatter` against `dist.reduce_scatter`, all against the single-machine NumPy sum (each rank
#    can regenerate every rank's input from its seed).
# 2. **Timing.** A ping-pong (half the round trip is one message, $\alpha + \beta m$), our ring, and
#    torch's all-reduce at each size in `PROC_SIZES`, with `perf.measure` (warm-up, then `REPEATS`
#    timed calls, median).

# %% tags=["slide"]
def production_check(comm, sizes, repeats):
    import numpy as np
    import torch
    import torch.distributed as dist

    from scaleoutai import collectives
    from scaleoutai import perf

    k, r = comm.size, comm.rank
    checked = []
    for length in (1, 6, 1002):  # 1 < K: one rank's block is empty
        for dtype in (np.float64, np.float32, np.int64):
            rng = [np.random.default_rng(1000 * length + q) for q in range(k)]
            xs = [g.standard_normal(length).astype(dtype) if dtype != np.int64 else
                  g.integers(-100, 100, length).astype(dtype) for g in rng]
            total = np.sum(xs, axis=0).astype(dtype)
            tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
            ours = collectives.ring_allreduce(comm, xs[r])
            theirs = torch.from_numpy(xs[r].copy())
            dist.all_reduce(theirs)
            np.testing.assert_allclose(ours, total, **tol)
            np.testing.assert_allclose(theirs.numpy(), total, **tol)
            gathered = [torch.empty(length, dtype=theirs.dtype) for _ in range(k)]
            dist.all_gather(gathered, torch.from_numpy(xs[r].copy()))
            np.testing.assert_array_equal(collectives.all_gather(comm, xs[r]), torch.cat(gathered).numpy())
            np.testing.assert_array_equal(collectives.all_gather(comm, xs[r]), np.concatenate(xs))
            checked.append(f"all_reduce+all_gather {np.dtype(dtype).name}[{length}]")
            if length % k == 0:  # torch's reduce_scatter needs equal blocks
                mine = collectives.reduce_scatter(comm, xs[r])
                out = torch.empty(length // k, dtype=theirs.dtype)
                dist.reduce_scatter(out, list(torch.from_numpy(xs[r].copy()).chunk(k)))
                np.testing.assert_allclose(out.numpy(), np.array_split(total, k)[r], **tol)
                np.testing.assert_allclose(mine, np.array_split(total, k)[r], **tol)
                checked.append(f"reduce_scatter {np.dtype(dtype).name}[{length}]")

    # a posted receive: both ranks know the size, so the payload's receive is posted before the header
    buf = np.empty(300_000)
    comm.send(np.arange(300_000, dtype=np.float64) * (r + 1), 1 - r)
    assert comm.recv(1 - r, out=buf) is buf and np.array_equal(buf, np.arange(300_000) * (2 - r))
    checked.append("posted receive float64[300000]")

    def ping_pong(x):
        if r == 0:
            comm.send(x, 1)
            comm.recv(1)
        elif r == 1:
            comm.send(comm.recv(0), 0)

    times = {"ping-pong / 2": [], "our ring": [], "torch all_reduce": []}
    for nbytes in sizes:
        x = np.ones(nbytes // 4, np.float32)
        t = torch.from_numpy(x.copy())
        for label, fn in (("ping-pong / 2", lambda: ping_pong(x)), ("our ring", lambda: collectives.ring_allreduce(comm, x)),
                          ("torch all_reduce", lambda: dist.all_reduce(t))):
            dist.barrier()
            timing = perf.measure(fn, warmup=2, repeats=repeats)
            times[label].append(timing.median / (2 if label == "ping-pong / 2" else 1))
    return {"checked": checked, "times": times}


prod = cluster.run(production_check, 2, backend="process", args=(PROC_SIZES, REPEATS), timeout=180, quiet=True)
out0 = prod.values[0]
print(f"2 processes agree with torch.distributed (gloo) and NumPy on {len(out0['checked'])} checks, e.g.:")
print("  " + "\n  ".join(out0["checked"][:4]))
assert all(v["checked"] == out0["checked"] for v in prod.values) and len(out0["checked"]) == 16
print(f"process run took {prod.wall_time:.1f} s of wall time")

# %% [markdown]
# Fitting $t = \alpha + \beta m$ to the measured medians (`perf.fit_alpha_beta`, least squares) gives
# this machine's loopback network. For the ping-pong, the fit *is* $\alpha$ and $\beta$ of one message.
# For a ring all-reduce on $K = 2$ the model is $2(\alpha + \frac{m}{2}\beta) = 2\alpha + m\beta$, so the
# intercept counts two latencies. Torch's all-reduce is fitted the same way as an *effective* cost.
#
# One trap: the sizes span four decades, and an unweighted fit minimises *absolute* errors, so the
# largest messages decide it. Their noise (a few percent of milliseconds) is larger than the whole
# latency, and the fitted $\alpha$ can even come out negative. So fit twice: all sizes for the slope
# $\beta$, and only the small sizes (at most 64 kB, where latency is a visible share of the time) for
# the intercept $\alpha$.

# %%
small = [i for i, m in enumerate(PROC_SIZES) if m <= 65536]
fits, alphas = {}, {}
for label, t in out0["times"].items():
    fits[label] = perf.fit_alpha_beta(PROC_SIZES, t)
    alphas[label] = perf.fit_alpha_beta([PROC_SIZES[i] for i in small], [t[i] for i in small]).alpha
    print(f"{label:>17}: all sizes {fits[label]}; small sizes only: intercept = {alphas[label] * 1e6:.0f} us")
alpha_hat, beta_hat = alphas["ping-pong / 2"], fits["ping-pong / 2"].beta
if beta_hat > 0:
    print(f"\none message on this machine (rank 0 medians): latency alpha = {alpha_hat * 1e6:.0f} us, "
          f"bandwidth 1/beta = {1 / beta_hat / 1e9:.2f} GB/s, "
          f"alpha/beta = {perf.crossover_bytes(max(alpha_hat, 0.0), beta_hat) / 1e3:.0f} kB")
else:  # small messages on a busy machine: the noise hides the per-byte term, as it can at smoke size
    print(f"\none message on this machine: latency alpha = {alpha_hat * 1e6:.0f} us; the fit found no per-byte "
          f"term at these sizes (timings too noisy): run at full size to measure the bandwidth")
ratio = np.asarray(out0["times"]["our ring"]) / np.asarray(out0["times"]["torch all_reduce"])
print("our ring / torch all_reduce, by size:", ", ".join(f"{m} B: {q:.1f}x" for m, q in zip(PROC_SIZES, ratio)))

fig, ax = plt.subplots(figsize=(7, 4.5))
m_fine = np.logspace(np.log10(min(PROC_SIZES)), np.log10(max(PROC_SIZES)), 100)
for (label, t), c in zip(out0["times"].items(), ("tab:gray", "tab:blue", "tab:orange")):
    ax.loglog(PROC_SIZES, t, "o", color=c, label=f"{label} (measured)")
    ax.loglog(m_fine, max(alphas[label], 0.0) + max(fits[label].beta, 0.0) * m_fine, "-", color=c, lw=1)
ax.set(xlabel="bytes per rank m", ylabel="median wall time (s)",
       title="2 local processes over gloo (lines: two-part alpha-beta fit)")
ax.legend()

# %% [markdown]
# Read the two fits side by side. Torch's gloo all-reduce is C++ end to end and reduces each segment
# while the next one arrives; ours pays, at every one of its $2(K-1)$ steps, for Python on both ends of
# every message, a header per message, and a NumPy reduction after the transfer. Its steps are
# `sendrecv`s with posted receives, which save two copies and a wait: a plain `send` copies the payload
# (so the caller may change its array the moment `send` returns), a plain `recv` returns a new array
# that would then be copied into place, and without `out` the payload's receive could be posted only
# after its header had landed (`benchmarks/bench_process_allreduce.py` measures what that costs).
# Messages of at most 256 bytes ride inside their header, so the
# ping-pong's intercept is one gloo message. Whether an overhead lands in the intercept ($\alpha$) or the
# slope ($\beta$) tells you what to optimise first. $R^2$ says how well a straight line explains the medians:
# on a busy shared machine the small sizes are noisy, and Chapter 5 shows how to report such numbers
# with repeats and confidence intervals rather than as single values.
#
# **On GPUs** the same worker code runs under NCCL: `cluster.init()` picks `nccl` when the process sees a
# CUDA device, and `examples/allreduce_check.py` checks our ring against `torch.distributed.all_reduce`
# at any scale (Appendix B).

# %%
import shutil

import torch

if torch.cuda.is_available():
    gpus = torch.cuda.device_count()
    print(f"{gpus} CUDA GPU(s) visible: the NCCL version of this section runs with")
    print(f"  torchrun --standalone --nproc-per-node={gpus} examples/allreduce_check.py")
    print("  (cluster.init() selects the nccl backend; tensors live on cuda:LOCAL_RANK)")
    if shutil.which("torchrun") is None:
        print("  torchrun is not on PATH here: use `python -m torch.distributed.run` instead")
else:
    print("skip: no CUDA GPU visible, so no NCCL run here. On a GPU machine run "
          "`torchrun --standalone --nproc-per-node=<gpus> examples/allreduce_check.py`.")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# Collectives are all-or-nothing: every rank must call the same collective with matching arguments,
# and each rank's result depends on every other rank's data. Three ways that goes wrong:
#
# **Deadlock.** If every rank receives before it sends, nobody ever sends. The simulator notices that
# every live rank is blocked with nothing in flight and raises `DeadlockError`, naming who waits for
# whom. (On real processes the same bug shows up as a hang until the timeout: another reason every run
# here has one.)

# %% tags=["slide-code"]
def receive_first(comm, x):
    K, r = comm.size, comm.rank
    got = comm.recv((r - 1) % K)  # everyone waits for the left neighbour...
    comm.send(x, (r + 1) % K)  # ...who is waiting for its own left neighbour
    return got + x


try:
    cluster.run(receive_first, 4, args=(np.ones(3),), network=net, timeout=30)
    raise AssertionError("expected a deadlock")
except cluster.DeadlockError as err:
    assert sorted(err.waiting) == [0, 1, 2, 3]
    print(f"DeadlockError: {err}")

# %% [markdown]
# The fix is to break the symmetry (even ranks send first) or, as here, to use buffered sends:
# `comm.send` returns before the message is received, so send-then-receive rings cannot deadlock.
#
# A step that both sends and receives has its own call, as in MPI (`MPI_Sendrecv`):
# `comm.sendrecv(x, dst, src, out=None)`. It costs and counts exactly one send and one receive, and on
# the simulator it *is* send-then-receive, so every formula above still holds. On real processes it is
# the cheaper form: our bytes leave without a defensive copy, and with `out` the incoming bytes land
# straight in place. The library's ring, recursive doubling and all-to-all are written with it; the
# cell below checks that it changes nothing the model can see.

# %%
def ring_step_split(comm, x):
    comm.send(x, (comm.rank + 1) % comm.size)
    return comm.recv((comm.rank - 1) % comm.size)


def ring_step_fused(comm, x):
    out = np.empty_like(x)
    return comm.sendrecv(x, (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size, out=out)


xs = make_inputs(5, 1000, np.float32)
split = cluster.run(lambda comm: ring_step_split(comm, xs[comm.rank]), 5, network=net)
fused = cluster.run(lambda comm: ring_step_fused(comm, xs[comm.rank]), 5, network=net)
for r in range(5):
    assert_matches(fused.values[r], xs[(r - 1) % 5])
    assert (fused.stats[r].bytes_sent, fused.stats[r].sim_time) == (split.stats[r].bytes_sent, split.stats[r].sim_time)
print(f"sendrecv: same values, bytes and simulated time as send + recv ({fused.sim_time * 1e6:.1f} us)")

# %% [markdown]
# **A crashed rank.** `Faults(crash={2: 1})` stops rank 2 when it tries to send its second message:
# fail-stop, halfway through the ring's reduce-scatter. Rank 3 waits for rank 2's block, learns that
# rank 2 is gone (`PeerCrashedError`), and the run fails with a `RankError` that names rank 3 and
# carries its traceback.

# %%
xs = make_inputs(4, 16, np.float64)
try:
    cluster.run(lambda comm: collectives.ring_allreduce(comm, xs[comm.rank]), 4, network=net,
                faults=cluster.Faults(crash={2: 1}), timeout=30)
    raise AssertionError("expected the crash to fail the all-reduce")
except cluster.RankError as err:
    assert "PeerCrashedError" in err.summary
    print(f"RankError from rank {err.rank}: {err.summary}")

# %% [markdown]
# No all-reduce algorithm can tolerate this on its own: the answer *is* the sum of every rank's vector,
# and the crashed rank's vector (and, in the ring, the partial sums it was carrying) exist nowhere else.
# There is nothing to compute a correct result from, so production libraries fail the whole group: NCCL
# and gloo raise on every rank, and the job must be restarted. Fault tolerance therefore lives one level
# up: checkpoint the model and restart from it, re-forming the group with the survivors (elastic training,
# Chapter 18), or drop the synchronous requirement altogether (asynchronous SGD, parameter servers and
# gossip, Chapters 10, 11 and 14).
#
# **A straggler.** A slow rank does not fail; it delays everyone. Each rank computes for 1 ms (simulated,
# `comm.compute`), then all-reduces; `Faults(slow={1: 3.0})` makes rank 1's compute take three times as
# long.

# %%
def step(comm, x):
    comm.compute(1e-3)  # the local gradient computation
    return collectives.ring_allreduce(comm, x)


xs = make_inputs(4, P, np.float32)
even = cluster.run(lambda comm: step(comm, xs[comm.rank]), 4, network=net)
slow = cluster.run(lambda comm: step(comm, xs[comm.rank]), 4, network=net, faults=cluster.Faults(slow={1: 3.0}))
for r in (even, slow):
    for v in r.values:
        assert_matches(v, np.sum(xs, axis=0))
print("per-rank finish time (ms), no straggler:", [round(s.sim_time * 1e3, 3) for s in even.stats])
print("per-rank finish time (ms), rank 1 x3:   ", [round(s.sim_time * 1e3, 3) for s in slow.stats])
assert all(s.sim_time >= 3e-3 for s in slow.stats)  # every rank waits for the slowest
assert slow.sim_time - even.sim_time >= 2e-3 * (1 - 1e-9)

# %% [markdown]
# Every rank, not just rank 1, finishes at least 2 ms later: the synchronous step runs at the speed of
# the slowest worker. With $K$ workers each slow with some probability, the chance that *some* worker is
# slow grows with $K$ (the straggler model of Chapter 3), which is why large synchronous jobs spend effort
# on balancing load, backup workers and asynchronous alternatives.
#
# ## 7. Evaluation: messages, bytes, time
#
# The scorecard for a collective is how close it gets to the hardware's limits. For an all-reduce of
# $n$ bytes the bandwidth floor is $2\frac{K-1}{K}n$ bytes sent per rank; the *bus bandwidth efficiency*
# $E = 2\frac{K-1}{K}n\beta \,/\, T$ is the fraction of link time spent moving bytes that had to move
# (NCCL's tests report the same idea as "busbw"). Speedup here is the naive time over each algorithm's.

# %% tags=["slide"]
nbytes = 4 * P
print(f"K = {K}, n = {nbytes} B per rank, alpha = {ALPHA:g} s, beta = {BETA:g} s/B")
print(f"{'algorithm':>20} {'msgs/rank':>10} {'bytes/rank':>12} {'/ floor':>8} {'sim ms':>9} "
      f"{'model ms':>9} {'speedup':>8} {'E_bus':>6}")
floor = 2 * (K - 1) / K * nbytes
eval_rows = {}
for name in collectives.ALLREDUCES:
    nb, r = sim_allreduce(name, K, nbytes)
    eval_rows[name] = (max(s.messages_sent for s in r.stats), max(s.bytes_sent for s in r.stats), r.sim_time,
                       perf.collective_time(model_name[name], nb, K, ALPHA, BETA))
t_naive = eval_rows["naive"][2]
for name, (m, b, t, model) in eval_rows.items():
    print(f"{name:>20} {m:>10} {b:>12} {b / floor:>8.2f} {t * 1e3:>9.3f} {model * 1e3:>9.3f} "
          f"{t_naive / t:>8.2f} {floor * BETA / t:>6.2f}")
assert eval_rows["ring"][1] == floor and min(b for _, b, _, _ in eval_rows.values()) == floor

# %% [markdown]
# Only the ring sends exactly the floor; every other algorithm sends a multiple of it that grows with $K$
# (naive: $(K-1)n$ from the root) or $\log_2 K$ (tree, recursive doubling). At large $n$ the ring's bus
# efficiency approaches 1: it is **bandwidth-optimal**, and its remaining gap is the $2(K-1)\alpha$ of
# latency. That latency term is why, at small messages or very large $K$, libraries switch to trees
# (or to hierarchical schemes: a ring inside each node, a tree across nodes). In a data-parallel job
# the all-reduce time is pure overhead on top of compute, so the efficiency $E_p$ of the whole job
# (Chapter 3) is bounded by compute / (compute + all-reduce), unless the two overlap (Chapter 15).
#
# ## 8. Exercises
#
# 1. **Lab 4** (`labs/lab04-ring-allreduce`): the ring is bandwidth-optimal but pays $2(K-1)$ latencies.
#    Write `halving_doubling_allreduce` from `comm.send` and `comm.recv`: Rabenseifner's recursive
#    halving-doubling (a reduce-scatter by recursive halving, an all-gather by recursive doubling) for
#    *every* $K$, folding the ranks beyond the largest power of two $P$ in and out. The grader checks the
#    sum for $K = 1, 2, 3, 5, 6, 7, 8$, lengths shorter than $K$, uneven lengths, three dtypes, on the
#    simulator and on 2 real processes, and, from its own counts, clock and trace, the ring's bytes in
#    $2\log_2 P$ steps (+2 for the fold), each message to the partner and with the blocks the schedule names.
# 2. Derive the tree/ring crossover formula of Section 4 and check it against the simulator for
#    $K = 4, 16, 64$. How does the crossover move as $K$ grows, and why?
# 3. Recursive halving-doubling (Rabenseifner): a reduce-scatter by recursive halving followed by an
#    all-gather by recursive doubling. Write it for powers of two, show it sends the bandwidth floor in
#    only $2\log_2 K$ rounds, and compare its simulated time with the ring's (Lab 4 then asks for it
#    for every $K$, graded).
# 4. Make `naive_allreduce` fail gracefully: rewrite the worker so that when a rank crashes
#    (`Faults(crash=...)`) the survivors catch `cluster.PeerCrashedError` and return the sum over the
#    ranks that are still alive. What exactly does the result now mean for a gradient step?
# 5. Fit $\alpha$ and $\beta$ on your own machine with the ping-pong of Section 5, put them into
#    `cluster.Network`, and predict the time of our ring on 2 processes. How close is the prediction?
# 6. Use `all_to_all` to transpose a matrix whose rows are split across $K$ ranks so that each rank ends
#    up with a block of columns (the shuffle of Chapter 6 and the expert dispatch of Chapter 17).
# 7. **Incast in numbers.** Write a gather in which the root posts its receives in reverse rank order,
#    and one in which rank $r$ first computes for $r \cdot 10\,\mu s$. Predict each simulated time on the
#    single-port link before running it, then compare with `Network(ingress="free")`.
#
# ## 9. Research directions
#
# - **Collectives that know the topology.** The ring and the tree assume every pair of ranks is equally
#   close. Real clusters have fast links inside a node, slower ones between nodes and oversubscribed
#   switches above them; finding the schedule that is optimal for a given topology and message size,
#   automatically and quickly, is an active research area.
#   - Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH",
#     International Journal of High Performance Computing Applications, 2005. The cost analysis of the
#     classic algorithms on a single-port link, and the size-based switching MPI libraries still use.
#   - Cai, Liu, Maleki, Musuvathi, Mytkowicz, Nelson and Saarikivi, "Synthesizing Optimal Collective
#     Algorithms", PPoPP, 2021. Generates latency- and bandwidth-optimal collective schedules for a given
#     topology with an SMT solver.
#   - Shah et al., "TACCL: Guiding Collective Algorithm Synthesis using Communication Sketches", NSDI,
#     2023. A designer sketches the logical topology and an integer program fills in routing and ordering,
#     which scales synthesis beyond one node and beats the fixed rings and trees of NCCL on multi-node
#     clusters.
# - **Bandwidth-optimal all-reduce with fewer rounds.** The ring sends the minimum number of bytes but
#   pays $2(K-1)$ latencies; trees and recursive doubling pay few latencies but move more. Algorithms
#   that are close to optimal in both terms for every $K$, including non-powers of two, are still being
#   found.
#   - Patarasuk and Yuan, "Bandwidth Optimal All-reduce Algorithms for Clusters of Workstations", Journal
#     of Parallel and Distributed Computing, 2009. Proves the bandwidth lower bound that the ring meets.
#   - Sanders, Speck and Traff, "Two-Tree Algorithms for Full Bandwidth Broadcast, Reduction and Scan",
#     Parallel Computing, 2009. Two complementary trees that reach full bandwidth with logarithmic depth.
#   - De Sensi, Bonato, Saam and Hoefler, "Swing: Short-cutting Rings for Higher Bandwidth Allreduce",
#     NSDI, 2024. An all-reduce for torus networks that alternates directions so that partners stay few
#     hops apart, keeping a logarithmic number of steps without wasting link bandwidth.
# - **Sending fewer bytes.** When the network is the ceiling, compressing what the collectives carry
#   (quantized or sparsified gradients) cuts time but changes the arithmetic: compressed values do not
#   always sum, and error feedback is needed for convergence. Making compression compose with
#   all-reduce, not only with a parameter server, is open.
#   - Alistarh, Grubic, Li, Tomioka and Vojnovic, "QSGD: Communication-Efficient SGD via Gradient
#     Quantization and Encoding", NeurIPS, 2017. Quantized gradients with convergence guarantees.
#   - Vogels, Karimireddy and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
#     Optimization", NeurIPS, 2019. A low-rank compression that stays compatible with all-reduce.
#   - Li, Ben Basat, Vargaftik, Lao, Xu, Mitzenmacher and Yu, "THC: Accelerating Distributed Deep Learning
#     Using Tensor Homomorphic Compression", arXiv preprint, 2023. A quantizer whose compressed values can
#     be summed as they are, so the aggregator, even a programmable switch, adds gradients without
#     decompressing them.
#
# ## What's next
#
# Chapter 5 (Evaluation discipline) turns the timings of Section 5 into numbers you can defend:
# warm-up, repeats, medians and confidence intervals, and baselines that are not straw men. The
# collectives built here return in every Part: the all-to-all as the shuffle of Chapter 6
# (MapReduce) and the expert dispatch of Chapter 17 (Expert parallelism), and the ring all-reduce in
# Chapter 15 (Data parallelism), which overlaps it with the backward pass.
