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
# # Chapter 11. Parameter servers
#
# Chapter 10 kept a full copy of the model on every worker and averaged gradients with an all-reduce.
# That stops working when the model is mostly an embedding table: a recommender keeps one row per user
# and per item, billions of rows, far more than one machine holds, and a mini-batch touches a few
# thousand of them. A **parameter server** splits the table over server machines by key; each worker
# **pulls** only the rows its mini-batch needs and **pushes** their gradients back. The servers also
# decide *when* a worker may read: after every worker finished the previous step (bulk synchronous),
# never waiting (asynchronous), or in between, with a bounded staleness. This chapter builds that server
# on the communicator, checks it against one-machine training, measures staleness, traffic, load and a
# crash, and runs the same shards as Ray actors.
#
# **Prerequisites:** Chapter 4 (Communication primitives: the $\alpha$-$\beta$ cost and incast at one
# receiver) and Chapter 10 (Distributed optimization: synchronous and asynchronous SGD, staleness).
# Background: embeddings as lookup tables, and matrix factorisation for recommendation.

# %% tags=["parameters"]
N_USERS = 1_000  # smoke: 200
N_ITEMS = 10_000  # smoke: 1_000
N_RATINGS = 100_000  # smoke: 20_000
DIM = 16  # smoke: 8
BATCH = 256  # smoke: 128
STEPS = 100  # smoke: 60
LR = 20.0
SERVERS = 4
WORKERS = 8  # smoke: 4
BOUNDS = [0, 1, 2, 4, 8]  # smoke: [0, 1, 4]
COMPUTE_S = 2e-5  # simulated compute per rating
KS = [1, 2, 4, 8, 16]  # smoke: [1, 2, 4]
WIDE = 256  # smoke: 256
ALPHA = 1e-5
BETA = 1e-9
SEED = 0

# %% [markdown]
# `N_USERS` users rate `N_ITEMS` items `N_RATINGS` times (item popularity follows a power law);
# every user and item is a row of `DIM` numbers; `BATCH` ratings per step, `STEPS` steps, learning rate
# `LR`; `SERVERS` server ranks $M$ and `WORKERS` worker ranks $K$; `BOUNDS` are the staleness bounds $s$
# compared; `COMPUTE_S` is the simulated compute per rating; `KS` the worker counts and `WIDE` the row
# width of Section 7's scaling runs;
# `ALPHA` and `BETA` describe the simulated network.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling is memory. A row of 64 float32 numbers is 256 bytes; a billion users and items make a
# 256 GB table before the optimizer state (Adagrad keeps one more number per entry). Data parallelism
# would copy that table to every worker and all-reduce a gradient as large as the table at every step,
# although one step changes a few thousand rows.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.collectives import block_range
from scaleoutai.ml import paramserver as ps

for rows in (1e6, 1e8, 1e9):
    gb = rows * 64 * 4 / 1e9
    print(f"{rows:8.0e} rows x 64 float32: table {gb:7.1f} GB, with Adagrad state {2 * gb:7.1f} GB")

# %% [markdown]
# ## 2. Core concepts
#
# A **key** is a row id; a **shard** is the set of keys one server owns. **Range sharding** gives server
# $j$ a contiguous block of ids (`block_bounds`, the course's one split rule); **hash sharding** sends key
# $k$ to $h(k) \bmod M$ for a multiplicative hash $h$, so neighbouring ids land on different servers.
# `pull(keys)` returns rows; `push(keys, g)` applies an update on the server, plain SGD or Adagrad
# per row, so the optimizer state lives with the rows and is sharded too.
#
# The workload is matrix factorisation: rating $r_{ui} \approx u \cdot v$, with the user's row $u$ and
# the item's row $v$ in one table (users are keys $0..U-1$, items follow), and loss
# $L = \frac{1}{2B}\sum (u \cdot v - r)^2$ over a global batch of $B$ ratings, split over $K$ workers.
# The **reference** trains on one machine with the whole table and the same batches.

# %%
users, items, r = datasets.low_rank_ratings(N_USERS, N_ITEMS, N_RATINGS, seed=SEED)
n_rows = N_USERS + N_ITEMS
counts = np.bincount(items, minlength=N_ITEMS)
print(f"{n_rows} rows of {DIM}; the 1% most popular items get {np.sort(counts)[::-1][:N_ITEMS // 100].sum() / len(items):.0%} "
      f"of the ratings")
t0 = time.perf_counter()
ref_table, ref_loss = ps.reference_train(n_rows, DIM, users, items, r, N_USERS, BATCH, STEPS, LR, seed=SEED)
print(f"reference: loss {ref_loss[0]:.3f} -> {ref_loss[-5:].mean():.3f} in {time.perf_counter() - t0:.1f} s")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Ranks $0..M-1$ are servers, ranks $M..M+K-1$ workers. At clock $c$ a worker sends every server one
# request: the gradient rows of clock $c-1$ for the keys that server owns, and the keys of clock $c$ it
# must read. The server answers with the rows once its consistency rule allows. A worker therefore
# moves (rows touched) $\times d \times$ itemsize each way per step, not the table. Every worker talks to
# every server: with $M = 1$ all $K$ requests arrive at one link and queue there (incast), which more
# servers spread out. The timeline shows 2 servers (lanes 0, 1) and 4 workers.

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)
traced = cluster.run(ps._rank_main, 6, network=net, trace=True,
                     args=(ps.PSConfig(2, 4, n_rows, DIM, N_USERS, BATCH, 3, LR, compute_s=COMPUTE_S),
                           users, items, r))
cluster.plot_timeline(traced, title="3 clocks, M = 2 servers (ranks 0-1), K = 4 workers (ranks 2-5)")
plt.show()

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# The worker's loop: route its keys to their shards, one request per server carrying last clock's push
# and this clock's pull, gather the rows (asking a crashed server's backup), compute, repeat. The
# server's loop: hear from workers in the order a shared virtual timeline predicts (the communicator
# has no receive-from-anyone, so every server derives the same order from the requests and none can wait
# in a cycle), apply pushes, and answer every pull whose clock $c$ satisfies
# $c - \min_k(\text{clock}_k) \le s$. With $s = 0$ (BSP) the server sums a clock's pushes in worker order
# and applies them once, which is the reference's step.

# %%
from scaleoutai.ml import paramserver_server as pss
from scaleoutai.notebooks import show

show(ps.train_worker, pss.serve_shard)

# %% [markdown]
# The check: BSP equals the reference for several $M$ and $K$, both shardings, and more servers than
# a small table has rows.

# %%
for M, K, sharding in [(1, 1, "range"), (2, 3, "hash"), (3, 5, "range"), (4, 8, "hash")]:
    res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, M, K, BATCH, 10, LR, sharding=sharding)
    ref10, _ = ps.reference_train(n_rows, DIM, users, items, r, N_USERS, BATCH, 10, LR)
    err = np.abs(res.table - ref10).max()
    assert err < 1e-10, err
    print(f"M = {M}, K = {K}, {sharding:5}: max |ours - reference| = {err:.1e}, "
          f"largest worker holds {res.max_rows_held} of {n_rows} rows")
tiny = datasets.low_rank_ratings(2, 3, 30, seed=1)
res = ps.run_paramserver(*tiny, 2, 3, 2, servers=7, workers=4, batch=3, steps=4, lr=1.0)
assert np.allclose(res.table, ps.reference_train(5, 2, *tiny, 2, 3, 4, 1.0)[0])
print("7 servers for a 5-row table: equal to the reference as well")

# %% [markdown]
# The parameter server returns in Chapter 16: ZeRO shards the optimizer state, gradients and parameters
# of a dense model over the data-parallel ranks exactly as these servers shard rows and their Adagrad
# state, each rank owning a block and the others reading it when they need it.
#
# ## 5. The same task with a production library: Ray actors as shards
#
# Each shard becomes a Ray actor holding its rows; each worker step is a Ray task that pulls with
# `ray.get(shard.pull.remote(keys))`, computes the same gradient, and pushes to the owners; the driver
# waits for all tasks and tells every shard to apply the clock (BSP). The final table must be ours.

# %%
import logging

import ray  # noqa: E402

RAY_M, RAY_K, RAY_STEPS = 2, 3, 5


@ray.remote
class Shard:
    def __init__(self, j, n_rows, servers, dim, lr, seed):
        self.keys = pss.shard_keys(j, n_rows, servers, "hash")
        self.rows = ps.init_rows(self.keys, dim, seed)
        self.lr, self.inbox = lr, {}

    def pull(self, keys):
        return self.rows[np.searchsorted(self.keys, keys)]

    def push(self, worker, keys, g):
        self.inbox[worker] = (keys, g)

    def apply(self):
        parts = [self.inbox[k] for k in sorted(self.inbox)]
        self.inbox = {}
        uk, inv = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
        g = np.zeros((len(uk), self.rows.shape[1]))
        np.add.at(g, inv, np.concatenate([x for _, x in parts]))
        self.rows[np.searchsorted(self.keys, uk)] -= self.lr * g

    def dump(self):
        return self.keys, self.rows


@ray.remote
def worker_step(shards, k, c, users, items, r):
    lo, hi = block_range(BATCH, RAY_K, k)
    idx = ps.batch_indices(len(r), BATCH, c, SEED)[lo:hi]
    keys, inv = np.unique(np.concatenate([users[idx], N_USERS + items[idx]]), return_inverse=True)
    own = ps.owner_of(keys, n_rows, RAY_M, "hash")
    rows = np.empty((len(keys), DIM))
    for j in np.unique(own):
        rows[own == j] = ray.get(shards[j].pull.remote(keys[own == j]))
    u, v = rows[inv[:len(idx)]], rows[inv[len(idx):]]
    err = (u * v).sum(1) - r[idx]
    g = np.zeros_like(rows)
    np.add.at(g, inv[:len(idx)], (err / BATCH)[:, None] * v)
    np.add.at(g, inv[len(idx):], (err / BATCH)[:, None] * u)
    ray.get([shards[j].push.remote(k, keys[own == j], g[own == j]) for j in range(RAY_M)])


t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
try:
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = [ray.put(x) for x in (users, items, r)]  # in the object store once, not once per task
    shards = [Shard.remote(j, n_rows, RAY_M, DIM, LR, SEED) for j in range(RAY_M)]
    for c in range(RAY_STEPS):
        ray.get([worker_step.remote(shards, k, c, *data) for k in range(RAY_K)])
        ray.get([s.apply.remote() for s in shards])
    ray_table = np.empty((n_rows, DIM))
    for keys, rows in ray.get([s.dump.remote() for s in shards]):
        ray_table[keys] = rows
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
ours = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, RAY_M, RAY_K, BATCH, RAY_STEPS, LR,
                          sharding="hash").table
assert np.abs(ray_table - ours).max() < 1e-10
assert not np.allclose(ray_table, ps.init_rows(np.arange(n_rows), DIM, SEED))  # it trained
print(f"Ray actors (M = {RAY_M}) == ours: max difference {np.abs(ray_table - ours).max():.1e} "
      f"(Ray start-up {startup:.1f} s, {RAY_STEPS} steps {ray_seconds:.1f} s)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Stale reads.** With bound $s$ a worker at clock $c$ may read rows that miss the updates of the last
# $s$ clocks of slower workers. With one worker four times slower (`Faults(slow=...)`) the fast ones run
# ahead until the gap reaches $s$ and then wait; the server logs the gap $c - \min_k \text{clock}_k$ of
# every pull it answers, and it never exceeds $s$.

# %%
straggler = cluster.Faults(slow={SERVERS: 4.0})
fig, ax = plt.subplots(figsize=(7, 3.5))
for s in BOUNDS[1:] + [None]:
    res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, SERVERS, WORKERS, BATCH, 30, LR,
                             staleness=s, compute_s=COMPUTE_S, faults=straggler, network=net)
    gaps = res.gaps[:, 3].astype(int)
    if s is not None:
        assert gaps.max() == s  # reached, never exceeded
    ax.hist(gaps, bins=np.arange(gaps.max() + 2) - 0.5, histtype="step", label=f"s = {s}")
    print(f"s = {s}: largest gap observed {gaps.max()}")
ax.set(xlabel="clock gap of an answered pull", ylabel="pulls", title="worker 0 four times slower")
ax.legend()
plt.show()

# %% [markdown]
# **A hot shard.** Item ids are numbered by popularity here, as they often are (ids assigned in order of
# first appearance). Range sharding then puts the hottest items on one server, which answers most of the
# rows; hashing spreads them.

# %%
load = {}
for sharding in ("range", "hash"):
    res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, SERVERS, WORKERS, BATCH, 20, LR,
                             sharding=sharding, network=net)
    load[sharding] = res.rows_served
    print(f"{sharding:5}: rows served per server {res.rows_served.tolist()}, "
          f"max / mean = {res.rows_served.max() / res.rows_served.mean():.2f}")
assert load["range"].max() / load["range"].mean() > load["hash"].max() / load["hash"].mean()
fig, ax = plt.subplots(figsize=(6, 3))
xs = np.arange(SERVERS)
ax.bar(xs - 0.2, load["range"], 0.4, label="range")
ax.bar(xs + 0.2, load["hash"], 0.4, label="hash")
ax.set(xlabel="server", ylabel="rows served", title="server load under power-law popularity")
ax.legend()
plt.show()

# %% [markdown]
# **A server crash.** With replicas on, every push goes to the shard's primary and to its backup (the
# next server on a ring), so the backup holds every update the primary acknowledged. A crash is injected
# after some messages; a worker that finds the primary gone asks again, and the backup answers. With
# BSP the final table equals the run without a crash, bit for bit.

# %%
kw = dict(replicate=True, optimizer="adagrad", lr=0.1, compute_s=COMPUTE_S, network=net)
base = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 3, 4, BATCH, 20, **kw)
for server, after in [(0, 5), (1, 30), (2, 61)]:
    res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, 3, 4, BATCH, 20,
                             faults=cluster.Faults(crash={server: after}), **kw)
    assert res.dead == [server] and np.array_equal(res.table, base.table)
    print(f"server {server} crashed after {after} messages: served by server {ps.backup_of(server, 3)}, "
          f"table identical, {res.sim_time / base.sim_time:.2f}x the time")

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# First the consistency models: with transient stragglers (each step's compute stretched by a random
# factor, `jitter`) BSP waits for the slowest worker at every step, and a bound $s$ lets the others
# go on. Then the traffic of a sparse pull against a dense one, and the incast: $K$ workers against one
# server and against several.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
thr = {}
for s in BOUNDS + [None]:
    res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, SERVERS, WORKERS, BATCH, STEPS, LR,
                             staleness=s, compute_s=COMPUTE_S, jitter=1.0, network=net)
    thr[s] = STEPS * BATCH / res.sim_time
    axes[1].plot(res.losses, label=f"s = {s}", lw=1)
    print(f"s = {s}: {thr[s]:9.0f} ratings/s (simulated), final loss {res.losses[-10:].mean():.4f}")
assert thr[BOUNDS[-1]] > thr[0]
axes[0].plot([str(s) for s in thr], list(thr.values()), "o-")
axes[0].set(xlabel="staleness bound s", ylabel="ratings per simulated second", title="throughput")
axes[1].plot(ref_loss, "k--", lw=1, label="reference")
axes[1].set(xlabel="clock", ylabel="batch loss", title="loss", yscale="log")
axes[1].legend(fontsize=7)
plt.show()

# %% [markdown]
# Traffic per step: a worker moves the rows it touched (and their keys), the dense alternative the
# whole table both ways.

# %%
res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, DIM, SERVERS, WORKERS, BATCH, 20, LR,
                         dtype=np.float32, network=net)
sparse = res.bytes_per_worker.mean() / 20
dense = 2 * n_rows * DIM * 4
print(f"bytes per worker per step: sparse {sparse / 1e3:.1f} kB, dense {dense / 1e3:.1f} kB "
      f"({dense / sparse:.0f}x more)")
assert sparse < dense
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(["sparse pull + push", "dense table both ways"], [sparse, dense])
ax.set(ylabel="bytes per worker per step", yscale="log")
plt.show()

# %% [markdown]
# Scaling: $K$ workers share a fixed global batch, on $M = 1$ server and on $M = 4$, with wide rows
# (`WIDE` numbers) so that the bytes matter. The time of a single worker with one server is $T_1$;
# $S_K = T_1 / T_K$ and $E_K = S_K / K$. Every request of a step lands on the servers' links, so one
# server receives the $K$ requests of a step one after another (incast); four servers each take a
# quarter of the bytes.

# %%
price = capstone.lookup("aws-c7i.xlarge")
times = {1: {}, 4: {}}
for M in times:
    for K in KS:
        res = ps.run_paramserver(users, items, r, N_USERS, N_ITEMS, WIDE, M, K, BATCH, 20, LR,
                                 compute_s=COMPUTE_S / 2, network=net)
        times[M][K] = res.sim_time
print(f"{'M':>2} {'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'USD per 1e6 steps':>18}")
for M, tm in times.items():
    for row in perf.scaling_table(tm, baseline=times[1][1]):
        K = row["p"]
        cost = perf.run_cost(price.price_per_hour, K + M, 1e6 / 20 * row["time"])
        print(f"{M:>2} {K:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {cost:>18.2f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
assert times[4][KS[-1]] < times[1][KS[-1]]
fig, ax = plt.subplots(figsize=(6, 3.5))
for M, tm in times.items():
    ax.plot(list(tm), [times[1][1] / t for t in tm.values()], "o-", label=f"M = {M} servers")
ax.plot(KS, KS, "k:", label="ideal")
ax.set(xlabel="workers K", ylabel="speedup S_K", title="incast at the servers")
ax.legend()
plt.show()

# %% [markdown]
# The speedup flattens where the links, not the workers' compute, set the step time. Four servers
# divide the bytes of the queue but not its messages: every worker still sends every server one request
# per step, so the $K \alpha$ of latency per step stays, and the gain of more servers is only the
# bandwidth part.
#
# ## 8. Exercises
#
# 1. **Bound and accuracy.** Run Section 7's sweep with a larger learning rate. At which $s$ does the
#    final loss start to suffer, and does a smaller rate recover it? Relate the answer to the staleness
#    term in the SSP convergence bound.
# 2. **Hot-key replication.** Give the 10 hottest items a copy on every server (reads from any copy,
#    writes to all). Measure the load balance under range sharding and the extra push bytes.
# 3. **Chain replication.** Replace primary-backup by a chain of three servers (writes enter at the
#    head, reads come from the tail). What does a write now cost, and how many crashes survive?
# 4. **Worker-side cache.** Let a worker keep rows it pulled and reuse them while they are at most $s$
#    clocks old. How many bytes does that save for the hot items?
# 5. **Adagrad on the server.** Repeat the crash of Section 6 with plain SGD and with Adagrad. Why must
#    the optimizer state be replicated with the rows for the table to be identical?
# 6. **Lab 11** (`labs/lab11-embedding-paramserver`): an elastic parameter server. Rows are placed by
#    consistent hashing, a server joins mid-run and receives exactly the rows that move with their optimizer
#    state, and the server applies heavy-ball momentum to every row at every step, lazily, catching a row
#    up only when someone touches it. It must equal momentum SGD on one machine, and the grader reads every
#    message.
#
# ## 9. Research directions
#
# - **Consistency between BSP and ASP.** Bounded staleness gives a convergence bound that degrades with
#   $s$; choosing $s$ per layer or per key, or adapting it while training, has no settled answer.
#   - Ho, Cipar, Cui, Kim, Lee, Gibbons, Gibson, Ganger and Xing, "More Effective Distributed ML via a
#     Stale Synchronous Parallel Parameter Server", NeurIPS, 2013. The SSP model and its bound.
#   - Dean et al., "Large Scale Distributed Deep Networks", NeurIPS, 2012. DistBelief: asynchronous
#     SGD (Downpour) against sharded parameter servers.
#   - Tyurin, "Tight Time Complexities in Parallel Stochastic Optimization with Arbitrary Computation
#     Dynamics", arXiv preprint, 2024. Lower bounds on wall-clock time for synchronous and asynchronous SGD
#     when worker speeds vary arbitrarily, matched by Rennala SGD, which steps after a fixed number of
#     fresh gradients from whichever workers finish first instead of waiting for all $K$ or applying stale
#     ones.
# - **Parameter servers as systems.** Key ranges, vector clocks, replication and elastic membership at
#   the scale of thousands of machines; how much of that design survives when all-reduce is fast.
#   - Li, Andersen, Park, Smola, Ahmed, Josifovski, Long, Shekita and Su, "Scaling Distributed Machine
#     Learning with the Parameter Server", OSDI, 2014.
#   - Jiang, Zhu, Lan, Yi, Cui and Guo, "A Unified Architecture for Accelerating Distributed DNN
#     Training in Heterogeneous GPU/CPU Clusters", OSDI, 2020. BytePS: spare CPU servers as summation
#     nodes beside all-reduce.
# - **Embedding tables at recommender scale.** Terabyte tables, skewed access and the choice between
#   sharding by row, by column or by table across GPUs remain open engineering and research questions.
#   - Mudigere et al., "Software-Hardware Co-design for Fast and Scalable Training of Deep Learning
#     Recommendation Models", ISCA, 2022.
#   - Agarwal, Yan, Zhang and Venkataraman, "Bagpipe: Accelerating Deep Recommendation Model Training",
#     SOSP, 2023. Looks ahead at future batches to prefetch and cache the few hot embedding rows,
#     overlapping remote lookups with computation while keeping synchronous semantics.
#   - Luo et al., "Disaggregated Multi-Tower: Topology-aware Modeling Technique for Efficient Large Scale
#     Recommendation", MLSys, 2024. Splits the global embedding lookup into towers placed to match the
#     data-centre hierarchy, cutting cross-host all-to-all traffic without losing accuracy.
#
# ## What's next
#
# Chapter 12 (Distributed classical ML) turns to models whose training needs one or a few rounds of
# communication: linear regression from sufficient statistics, k-means, and the histograms behind
# gradient-boosted trees.
