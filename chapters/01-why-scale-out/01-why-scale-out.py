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
# # Chapter 1. Why scale out: the six axes of distribution
#
# One machine runs out of something: memory for the data, memory for the model, requests per second,
# or room for the agents that must act at once. This chapter starts with the most reassuring fact of
# the whole course: for training by gradient descent, splitting the data over $K$ workers is **exact**.
# Each worker sees only its shard, and yet the weighted sum of their gradients is, to the last
# rounding error, the gradient one machine would have computed. We prove it on paper, check it on the
# simulated cluster and on real processes, redo it with `torch.distributed`, and then take a quick
# tour of the six axes along which an AI system can be distributed.
#
# **Prerequisites:** none among the chapters: this is where the course begins. Background: Python and
# NumPy arrays, the gradient of a least-squares loss, and a little probability (means and variances).

# %% tags=["parameters"]
N = 100_000  # smoke: 2_000
D = 32  # smoke: 8
K = 8  # smoke: 4
K_CHECK = [1, 2, 3, 5, 8, 16]  # smoke: [1, 2, 3, 5]
K_SWEEP = [1, 2, 4, 8, 16, 32, 64]  # smoke: [1, 2, 4, 8, 16]
N_EVAL = 1_000_000
P_EVAL = 1_000_000  # smoke: 100_000
PROCESS_K = 2
SEED = 0

# %%
import numpy as np
import matplotlib.pyplot as plt

from scaleoutai import cluster
from scaleoutai import collectives
from scaleoutai.perf import collective_time, efficiency, run_cost, speedup, plot_scaling
from scaleoutai.foundations.sharding import (linear_mse_gradient, local_weighted_gradient, naive_sharded_gradient,
                                 shard, sharded_gradient)

rng = np.random.default_rng(SEED)
X = rng.standard_normal((N, D))
w_true = rng.standard_normal(D)
y = X @ w_true + 0.1 * rng.standard_normal(N)
w = np.zeros(D)
print(f"dataset: N={N:,} examples of d={D} features, {X.nbytes / 1e6:.1f} MB")

# %% [markdown]
# ## 1. Motivation: which ceiling binds?
#
# Distribution is forced, not chosen. Before splitting anything, name the resource that ran out. Three
# quick back-of-the-envelope checks, with round numbers you should replace by your own hardware:
#
# * **Data**: a corpus of $N$ examples of $d$ float32 features needs $4Nd$ bytes just to sit in memory.
# * **Model**: training with Adam in mixed precision keeps about 16 bytes per parameter (fp16 weights
#   and gradients, fp32 master weights and two moments), so $P$ parameters need $\approx 16P$ bytes.
# * **Throughput**: a service that must answer $R$ requests per second, each taking $t$ seconds of one
#   server, needs at least $Rt$ servers, however fast each one is.

# %%
NODE_RAM, GPU_MEM = 512e9, 80e9  # bytes: one large server, one accelerator
checks = {
    "data: 10^10 examples x 1,000 float32 features": (4 * 1e10 * 1_000, NODE_RAM),
    "model: 70e9 parameters trained with Adam": (16 * 70e9, GPU_MEM),
    "model: 1e9 parameters trained with Adam": (16 * 1e9, GPU_MEM),
}
for what, (need, have) in checks.items():
    verdict = f"needs at least {int(np.ceil(need / have))} machines" if need > have else "fits on one"
    print(f"{what:48s} {need / 1e9:10,.0f} GB vs {have / 1e9:4.0f} GB -> {verdict}")
R, t_req = 5_000, 0.040  # requests/s, seconds per request on one server
print(f"{'throughput: 5,000 req/s at 40 ms each':48s} -> at least {int(np.ceil(R * t_req))} servers")

# %% [markdown]
# The 1e9-parameter model fits on one accelerator: no ceiling binds, and distributing it would only add
# a communication tax. Recognising that case is as important as recognising the others.
#
# ## 2. Core concepts: the gradient decomposes over shards
#
# Write the training loss as the average of per-example losses $\ell(w; x_i, y_i)$ and cut the $N$
# examples into $K$ disjoint **shards** $S_1, \dots, S_K$ of sizes $N_k$, $\sum_k N_k = N$. With
# $L_k(w) = \frac{1}{N_k} \sum_{i \in S_k} \ell(w; x_i, y_i)$ the average loss on shard $k$,
#
# $$ L(w) = \frac{1}{N}\sum_{i=1}^{N} \ell(w; x_i, y_i) = \sum_{k=1}^{K} \frac{N_k}{N} L_k(w)
# \quad\Longrightarrow\quad \nabla L(w) = \sum_{k=1}^{K} \frac{N_k}{N} \nabla L_k(w). $$
#
# Differentiation is linear, so nothing is approximated. When the shards are equal, $N_k/N = 1/K$ and the
# weighted sum is the plain average of the workers' gradients; when they are not (here $N$ need not be
# divisible by $K$, and with $K > N$ some shards are empty) the weights $N_k/N$ keep it exact. A
# **worker** computes on its shard; a **replica** is its full copy of $w$. With a per-worker batch of
# $b$ examples the global batch is $B = K \cdot b$.
#
# Our running model is least squares, $L(w) = \frac1N \lVert Xw - y\rVert^2$, whose gradient is
# $\nabla L(w) = \frac{2}{N} X^\top (Xw - y)$ (`linear_mse_gradient`). The shards follow
# `np.array_split`: sizes differ by at most one.

# %%
for n_, k_ in [(10, 3), (10, 4), (3, 5)]:
    print(f"N={n_:2d}, K={k_}: shard sizes {[b - a for a, b in collectives.block_bounds(n_, k_)]}")

reference = linear_mse_gradient(X, y, w)
for k_ in K_CHECK:
    total = sum(local_weighted_gradient(X, y, w, k_, r) for r in range(k_))
    np.testing.assert_allclose(total, reference, rtol=1e-10, atol=1e-12)
tiny_X, tiny_y = X[:5], y[:5]  # K = 8 > N = 5: three workers get empty shards
total = sum(local_weighted_gradient(tiny_X, tiny_y, w, 8, r) for r in range(8))
np.testing.assert_allclose(total, linear_mse_gradient(tiny_X, tiny_y, w), rtol=1e-10, atol=1e-12)
print(f"sum_k (N_k/N) grad L_k == grad L for K in {K_CHECK}, and for K=8 > N=5")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Each worker $k$ holds its shard and a replica of $w$, computes $g_k = \frac{N_k}{N}\nabla L_k(w)$, and
# the group computes $\sum_k g_k$ so that every worker holds the same gradient and takes the same step.
# That "sum one vector per worker and give everyone the result" is an **all-reduce** (Chapter 4). Two
# ways to do it:
#
# * **naive**: every worker sends $g_k$ to rank 0, which adds them and sends the sum back. Rank 0's link
#   carries $(K-1)$ gradients in and $(K-1)$ out: it is a hotspot that grows with $K$.
# * **ring**: reduce-scatter then all-gather around a ring. Every worker sends $2(K-1)/K$ of one
#   gradient in total, independent of $K$: bandwidth-optimal.
#
# ### The six axes of distribution
#
# Data parallelism is one pattern: it distributes one thing along one axis. The book names six axes, and a full AI system
# may use several at once. Each gets a few lines here, on the simulator, with the single-machine answer
# asserted; the later parts of the book develop each one.
#
# **1. Distribute the data** (Part II). Count words in a corpus split over $K$ workers: each counts its
# shard into a vector over the vocabulary, and an all-reduce adds the counts.

# %%
vocab = ["gradient", "shard", "ring", "worker", "model"]
docs = rng.choice(vocab, size=(40, 12))

def count_words(comm, docs):
    mine = shard(docs, comm.size, comm.rank)
    counts = np.array([(mine == v).sum() for v in vocab], dtype=np.int64)
    return collectives.ring_allreduce(comm, counts)

res = cluster.run(count_words, K, args=(docs,))
assert all((v == [(docs == t).sum() for t in vocab]).all() for v in res.values)
print(dict(zip(vocab, res.values[0].tolist())))

# %% [markdown]
# **2. Distribute the training** (Part III). One full gradient-descent step taken by $K$ workers lands on
# exactly the weights one machine reaches (`sharded_gradient` is the data-parallel pattern above; Section 4
# takes it apart).

# %% tags=["slide-code"]
eta = 0.1
def gd_step(comm, X, y, w):
    return w - eta * sharded_gradient(comm, X, y, w)

res = cluster.run(gd_step, K, args=(X, y, w))
np.testing.assert_allclose(res.values[K - 1], w - eta * reference, rtol=1e-10, atol=1e-12)
print("one distributed GD step == one single-machine GD step")

# %% [markdown]
# **3. Distribute the model** (Part IV). A layer $h = W x$ too large for one device: rank $k$ holds a
# block of rows of $W$, computes its slice of $h$, and an all-gather assembles the full output
# (tensor parallelism, Chapter 16).

# %%
W = rng.standard_normal((4 * D, D))
x = rng.standard_normal(D)

def tensor_parallel(comm, W, x):
    return collectives.all_gather(comm, shard(W, comm.size, comm.rank) @ x)

res = cluster.run(tensor_parallel, K, args=(W, x))
np.testing.assert_allclose(res.values[0], W @ x, rtol=1e-12, atol=1e-12)
print(f"W ({W.shape[0]}x{W.shape[1]}) split by rows over {K} ranks: all-gathered output == W @ x")

# %% [markdown]
# **4. Distribute the inference** (Part V). Replicas of the trained model each answer a share of the
# incoming requests: scatter the batch, predict locally, gather the answers.

# %%
requests = rng.standard_normal((37, D))  # 37 requests: uneven over K replicas

def serve(comm, w, requests):
    mine = collectives.scatter(comm, requests if comm.rank == 0 else None, root=0)
    return collectives.gather(comm, mine @ w, root=0)

res = cluster.run(serve, K, args=(w_true, requests))
np.testing.assert_allclose(res.values[0], requests @ w_true, rtol=1e-12, atol=1e-12)
print(f"{len(requests)} requests over {K} replicas: gathered predictions == single-replica predictions")

# %% [markdown]
# **5. Coordinate the cluster** (Parts I and VII). Someone must decide: which worker writes the
# checkpoint, which one schedules. Chapter 2's bully election makes every rank agree on one leader,
# even when the rank that would have won has crashed.

# %%
from scaleoutai.foundations.consensus import bully_election

res = cluster.run(bully_election, K, faults=cluster.Faults(crash={K - 1: 0}))
leaders = {v for v in res.values if not isinstance(v, cluster.RankCrashed)}
assert leaders == {K - 2}
print(f"rank {K - 1} crashed; the {K - 1} survivors agree that rank {leaders.pop()} leads")

# %% [markdown]
# **6. Distribute the intelligence** (Part VI). Agents with no coordinator, each with a private estimate,
# talk only to their two ring neighbours and average. Repeated local averaging converges to the global
# mean that nobody computed (gossip, Chapters 14 and 31).

# %%
def gossip(comm, rounds):
    est = np.array([float(comm.rank) ** 2])
    left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
    for _ in range(rounds):
        if comm.size > 1:
            comm.send(est, left)
            comm.send(est, right)
            est = (est + comm.recv(left) + comm.recv(right)) / 3
    return est[0]

res = cluster.run(gossip, K, args=(200,))
target = np.mean(np.arange(K) ** 2)
np.testing.assert_allclose(res.values, target, rtol=1e-6)
print(f"after 200 rounds every agent holds {res.values[0]:.6f}; the global mean is {target:.6f}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation
#
# `sharded_gradient(comm, X, y, w)` runs on every rank of the communicator: it slices its own shard,
# weights its gradient by $N_k/N$ and calls the from-scratch `ring_allreduce`. `naive_sharded_gradient`
# is the same with the gather-to-rank-0 pattern. Both must equal the single-machine reference on every
# rank, for every $K$, including uneven shards and $K > N$ (on a tiny slice of the data).
#
# Here is the code. In `local_weighted_gradient` read how the shard is cut (`shard`, the course's one
# split rule, so uneven shards differ by one row) and the weight $N_k/N$ that makes the sum exact; in
# `sharded_gradient`, the single collective call that turns $K$ partial gradients into the full one.

# %%
from scaleoutai.notebooks import show

show(local_weighted_gradient, sharded_gradient, naive_sharded_gradient)

# %% [markdown]
# Now the check, on every rank and for every $K$:

# %% tags=["slide-code"]
for k_ in K_CHECK:  # K = 8 > N = 5 below: three ranks hold nothing and still take part
    for fn in (sharded_gradient, naive_sharded_gradient):
        res = cluster.run(fn, k_, args=(X, y, w), timeout=60)
        for g in res.values:
            np.testing.assert_allclose(g, reference, rtol=1e-10, atol=1e-12)
res = cluster.run(sharded_gradient, 8, args=(tiny_X, tiny_y, w), timeout=60)
for g in res.values:
    np.testing.assert_allclose(g, linear_mse_gradient(tiny_X, tiny_y, w), rtol=1e-10, atol=1e-12)
print(f"ring and naive sharded gradients equal the reference on every rank for K in {K_CHECK}, and for K=8 > N=5")

# %% [markdown]
# The answers agree; the traffic does not. Here are the bytes each rank sends and receives for one
# gradient step with $K$ workers: the naive pattern piles everything onto rank 0, the ring spreads it
# evenly.

# %%
ring = cluster.run(sharded_gradient, K, args=(X, y, w), timeout=60)
naive = cluster.run(naive_sharded_gradient, K, args=(X, y, w), timeout=60)
fig, ax = plt.subplots(figsize=(8, 3.2))
ranks = np.arange(K)
for off, (name, r_) in zip((-0.2, 0.2), (("naive (gather to rank 0)", naive), ("ring all-reduce", ring))):
    ax.bar(ranks + off, [s.bytes_sent + s.bytes_received for s in r_.stats], width=0.4, label=name)
ax.set_xlabel("rank")
ax.set_ylabel("bytes sent + received")
ax.set_title(f"one gradient step, K={K}, d={D} float64 parameters")
ax.legend()
assert naive.stats[0].bytes_sent == (K - 1) * D * 8
assert max(s.bytes_sent for s in ring.stats) <= 2 * (K - 1) * D * 8 // K + 2 * (K - 1) * 8

# %% [markdown]
# ### The same code on real processes
#
# The communicator is the same whether ranks are simulated threads or real operating-system processes
# talking over `torch.distributed` (gloo on CPU). With `backend="process"` the worker below runs in
# `PROCESS_K` separate Python processes. It computes the gradient twice: once with our from-scratch
# ring, and once the **production way**.
#
# ## 5. The same task with a production library: `torch.distributed.all_reduce`
#
# In practice nobody writes the ring by hand: `torch.distributed.all_reduce` does it (gloo on CPU, NCCL
# on GPUs), and DDP (Chapter 15) calls it for you on every backward pass. Inside a process-backend
# worker the torch process group is already initialised, so the production version is three lines.

# %% tags=["slide-code"]
def both_ways(comm, X, y, w):
    import torch
    import torch.distributed as dist

    ours = sharded_gradient(comm, X, y, w)
    g = torch.from_numpy(local_weighted_gradient(X, y, w, comm.size, comm.rank))
    dist.all_reduce(g, op=dist.ReduceOp.SUM)  # the production shortcut
    return ours, g.numpy()


res = cluster.run(both_ways, PROCESS_K, backend="process", args=(X, y, w), timeout=120, quiet=True)
for r, (ours, theirs) in enumerate(res.values):
    np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(theirs, ours, rtol=1e-12, atol=1e-12)
print(f"{PROCESS_K} real processes: from-scratch ring == torch all_reduce == single machine "
      f"(max |diff| {np.abs(res.values[0][1] - reference).max():.1e}); wall time {res.wall_time:.1f} s")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# A synchronous all-reduce needs every worker. Two things go wrong in practice:
#
# * **A worker crashes.** Its neighbours in the ring wait for a message that never comes. The simulator
#   has a perfect failure detector: the waiting rank gets `PeerCrashedError`, the run fails fast, and
#   the error names the rank. Without a timeout a real job would hang; Chapter 18 restarts from a
#   checkpoint instead.
# * **A worker is slow** (a straggler). Nothing fails, but every step waits for the slowest worker.

# %%
try:
    cluster.run(sharded_gradient, K, args=(X, y, w), faults=cluster.Faults(crash={1: 0}), timeout=60)
    raise AssertionError("a crashed ring member must fail the step")
except cluster.RankError as err:
    print(err.summary)

def timed_step(comm, seconds_per_example, n, p):
    lo, hi = collectives.block_bounds(n, comm.size)[comm.rank]
    comm.compute(seconds_per_example * (hi - lo))          # local gradient work
    collectives.ring_allreduce(comm, np.zeros(p))                    # gradient sync
    return comm.clock

SEC_PER_EXAMPLE = 1e-6                                     # forward + backward of one example
net = cluster.Network(alpha=5e-5, beta=1e-9)               # 50 us latency, 1 GB/s
even = cluster.run(timed_step, K, args=(SEC_PER_EXAMPLE, N_EVAL, P_EVAL), network=net)
slow = cluster.run(timed_step, K, args=(SEC_PER_EXAMPLE, N_EVAL, P_EVAL), network=net,
                   faults=cluster.Faults(slow={0: 3.0}))
assert slow.sim_time > even.sim_time
print(f"step time: {even.sim_time * 1e3:.2f} ms with equal workers, {slow.sim_time * 1e3:.2f} ms "
      f"when one of {K} is 3x slower: the whole group waits for it")

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# Strong scaling: fixed $N$, more workers. The timing model is a larger job than the toy data above,
# simulated rather than computed: $N = 10^6$ examples at 1 µs each, and a model of $P$ float64
# parameters. With compute time $T_\text{comp} \propto N/K$ per step and a ring all-reduce costing
# $2(K-1)(\alpha + \frac{8P}{K}\beta)$, the step time falls until the all-reduce dominates. We run the step on the simulator for each $K$, check its
# makespan against the alpha-beta formula from `scaleoutai.perf`, and report $S_K = T_1/T_K$,
# $E_K = S_K/K$ and the cost at an assumed price of \$1 per worker-hour.

# %%
times = {}
for k_ in K_SWEEP:
    r_ = cluster.run(timed_step, k_, args=(SEC_PER_EXAMPLE, N_EVAL, P_EVAL), network=net)
    times[k_] = r_.sim_time
    comp = SEC_PER_EXAMPLE * collectives.block_bounds(N_EVAL, k_)[0][1]  # the largest shard
    model = comp + collective_time("ring_allreduce", 8 * P_EVAL, k_, net.alpha, net.beta)
    assert abs(times[k_] - model) <= 0.02 * model, (k_, times[k_], model)
print(f"{'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'cost per 1e6 steps ($)':>23}")
for k_, t in times.items():
    print(f"{k_:3d} {t * 1e3:9.3f} {speedup(times[1], t):6.2f} {efficiency(times[1], t, k_):5.2f} "
          f"{run_cost(1.0, k_, t * 1e6):23.2f}")
plot_scaling(times, title=f"simulated strong scaling: N={N_EVAL:,}, P={P_EVAL:,} parameters");

# %% [markdown]
# The speedup bends away from the ideal line as soon as the all-reduce is a sizeable part of the step,
# and the cost of a million steps grows with $K$ once efficiency falls: faster is not cheaper. Chapter 3
# turns this into Amdahl's and Gustafson's laws; Chapter 5 measures real runs the same way.
#
# ## 8. Exercises
#
# 1. **Weights matter.** Replace the weights $N_k/N$ by $1/K$ in `local_weighted_gradient` and measure
#    the error for $N = 10$, $K = 3$. For which $(N, K)$ is the plain average still exact?
# 2. **A non-linear model.** Write `logistic_gradient(X, y, w)` and check that the same decomposition
#    holds. Which property of the loss made the proof work, and which losses would break it (hint: a
#    loss that is not an average over examples, such as a batch-norm statistic)?
# 3. **Float32.** Repeat the check of Section 4 in float32. How does the maximum error grow with $K$,
#    and why does the summation order of the ring change the last bits?
# 4. **Traffic.** From the bar chart, write the bytes rank 0 moves in the naive and ring patterns as
#    functions of $K$ and $d$. At what $K$ does rank 0's link in the naive pattern carry 10x the ring's?
# 5. **Which axis?** For a recommendation system with a 2 TB embedding table serving 50,000 requests per
#    second, name the ceilings that bind and the axes you would distribute along.
# 6. **Lab 1** (`labs/lab01-sharded-gradient`, graded): take Exercise 2 to the end: the sharded loss and
#    gradient of logistic regression, each rank holding only its shard, stable past exp's overflow and
#    on confidently classified data, equal to one machine for $K = 1, 2, 3, 5, 8$ and $K > N$, float32
#    and float64.
#
# ## 9. Research directions
#
# - **When is a distributed gradient still exact?** The decomposition of Section 2 holds for losses that
#   are averages over examples. Batch normalization, contrastive losses with in-batch negatives and
#   other losses that couple examples across shards break it, and how to distribute them without
#   changing what is learned is still studied model by model.
#   - Ioffe and Szegedy, "Batch Normalization: Accelerating Deep Network Training by Reducing Internal
#     Covariate Shift", ICML, 2015. The per-batch statistics it introduced are the textbook example of a
#     loss term that does not decompose over shards.
#   - Chen, Kornblith, Norouzi and Hinton, "A Simple Framework for Contrastive Learning of Visual
#     Representations", ICML, 2020. Its in-batch negatives make the loss depend on the global batch, so
#     data-parallel training has to gather embeddings across workers.
#   - Zhai, Mustafa, Kolesnikov and Beyer, "Sigmoid Loss for Language Image Pre-Training", ICCV, 2023.
#     Replaces the softmax over the whole batch by an independent sigmoid term per image-text pair, which
#     decouples the loss from the global batch $B$ and lets workers compute it in chunks instead of
#     gathering every embedding.
# - **Which ceiling binds next?** Compute per accelerator has grown faster than memory capacity and far
#   faster than interconnect bandwidth, so the binding ceiling keeps moving from compute to memory and
#   communication. Predicting which one binds for a given model and cluster, before buying either, is an
#   open modelling problem.
#   - Gholami, Yao, Kim, Hooper, Mahoney and Keutzer, "AI and Memory Wall", IEEE Micro, 2024. Measures how
#     slowly memory and interconnect bandwidth have grown against peak compute, and what that means
#     for training and serving large models.
#   - Sevilla, Heim, Ho, Besiroglu, Hobbhahn and Villalobos, "Compute Trends Across Three Eras of Machine
#     Learning", IJCNN, 2022. Documents how fast training compute has grown, the pressure that forces
#     every axis of distribution.
#   - Erdil and Schneider-Joseph, "Data movement limits to frontier model training", arXiv preprint, 2024.
#     Models a training run as arithmetic plus data movement within and between chips, and estimates the
#     scale at which moving bytes, not computing, starts to cap hardware utilisation.
# - **Distribution without a central coordinator.** The ring and the gossip average of Section 3 need no
#   server, but they assume every worker is honest, reachable and about as fast as the rest.
#   Decentralized training that tolerates slow, absent or faulty peers while matching centralized
#   accuracy is an active research area.
#   - Lian, Zhang, Zhang, Hsieh, Zhang and Liu, "Can Decentralized Algorithms Outperform Centralized
#     Algorithms? A Case Study for Decentralized Parallel Stochastic Gradient Descent", NeurIPS, 2017.
#     Shows gossip-style SGD converging at the centralized rate while avoiding the central bottleneck.
#   - Dean, Corrado, Monga, Chen, Devin, Le, Mao, Ranzato, Senior, Tucker, Yang and Ng, "Large Scale
#     Distributed Deep Networks", NeurIPS, 2012. The parameter-server design whose bottlenecks the
#     collective-based methods of this course were invented to avoid.
#   - Ryabinin, Dettmers, Diskin and Borzunov, "SWARM Parallelism: Training Large Models Can Be
#     Surprisingly Communication-Efficient", ICML, 2023. Trains a large transformer on preemptible, poorly
#     connected GPUs by sending work through randomized pipelines that rebalance when peers slow down or
#     disappear.
#
# ## What's next
#
# Chapter 2 (Distributed systems concepts) asks what can go wrong once the workers are separate
# machines: messages that arrive late or never, clocks that disagree, and how a group agrees on a leader
# or a value anyway. Chapter 3 (Performance models) then turns the speedup curve of Section 7 into
# Amdahl's and Gustafson's laws and the $\alpha$-$\beta$ cost of a message.
