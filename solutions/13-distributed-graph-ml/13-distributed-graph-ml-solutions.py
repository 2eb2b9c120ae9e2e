# %% [markdown]
# # Chapter 13 solutions: Distributed graph ML
#
# Worked solutions to the exercises of `chapters/13-distributed-graph-ml` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.

# %%
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads only contend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.sparse.csgraph import breadth_first_order  # noqa: E402

from scaleoutai import cluster, datasets  # noqa: E402
from scaleoutai.collectives import all_to_all, recursive_doubling_allreduce  # noqa: E402
from scaleoutai.ml import graph as G  # noqa: E402
from scaleoutai.ml import graph_partition as GP  # noqa: E402
from scaleoutai.ml import graph_sampling as S  # noqa: E402

SEED = 0
N_C = 1_200
c_edges, c_X, c_y = datasets.community_graph(N_C, 4, d=16, seed=SEED, dtype=np.float64)

# %% [markdown]
# ## Exercise 1 (analysis): the arrival order of a streaming partitioner
#
# **Measured** (community graph of the chapter: 1 200 vertices in 4 communities whose ids are
# contiguous, $K = 4$; hashing would cut $1 - 1/K = 75\%$): LDG cuts about half the edges in every order,
# and id order cuts the most, a few points above random and BFS order.
#
# **Why.** LDG places $v$ where most of its *already placed* neighbours are, discounted by
# $1 - |\text{part}|/C$. Two things decide the quality: how many neighbours are known on arrival
# (with none, the vertex goes to the lightest part, an uninformed choice), and whether the capacity
# penalty pushes a cluster apart while it is being placed. In **id order** the communities arrive one
# after another: community 0 arrives alone, and as its part fills, the penalty makes an empty part more
# attractive than a nearly full one holding several neighbours, so the community spills across parts and
# the later communities find their "own" parts already half taken. In **random order** every community
# seeds every part early and the greedy then collects each community where it is strongest. **BFS order**
# guarantees that every vertex but the first has a placed neighbour (fully informed choices), and the
# frontier moves into a new community through its boundary, so communities are placed contiguously
# without being presented in one block. On this graph random and BFS come out close; the robust lesson
# is that an order that presents one dense region at a time (ids assigned by a crawl or by community)
# is the adversarial case for a one-pass partitioner with a balance penalty.

# %%
K = 4
adj = sp.coo_matrix((np.ones(len(c_edges)), (c_edges[:, 0], c_edges[:, 1])), shape=(N_C, N_C))
bfs = breadth_first_order(adj, 0, directed=False, return_predecessors=False)
bfs = np.concatenate([bfs, np.setdiff1d(np.arange(N_C), bfs)])  # unreachable vertices last (none here)
cut = lambda order: GP.edge_cut_metrics(c_edges, GP.ldg_partition(c_edges, N_C, K, order=order), K)["cut_fraction"]  # noqa: E731
indptr_u, indices_u = GP.undirected_csr(c_edges, N_C)


def informed(order):
    """Share of vertices that have at least one already-placed neighbour when they arrive."""
    seen = np.zeros(N_C, bool)
    hits = 0
    for v in order:
        hits += bool(seen[indices_u[indptr_u[v]:indptr_u[v + 1]]].any())
        seen[v] = True
    return hits / N_C


results = {"id": (cut(None), informed(np.arange(N_C))), "BFS": (cut(bfs), informed(bfs))}
randoms = [np.random.default_rng(s).permutation(N_C) for s in range(3)]
results["random (3 seeds)"] = (np.mean([cut(o) for o in randoms]), np.mean([informed(o) for o in randoms]))
for name, (c, inf) in results.items():
    print(f"{name:>16}: cut fraction {c:.3f}, informed arrivals {inf:.1%}")
assert results["BFS"][1] == (N_C - 1) / N_C  # every vertex but the first sees a placed neighbour
assert results["id"][0] > results["BFS"][0] and results["id"][0] > results["random (3 seeds)"][0]
assert max(c for c, _ in results.values()) < 1 - 1 / K  # all beat hashing

# %% [markdown]
# ## Exercise 2 (analysis): HDRF's balance weight on a star
#
# **Setup.** A star of $m = 400$ edges $(0, i)$, hub first, $K = 4$.
#
# **Derivation.** For edge $(0, i)$ the hub has partial degree $i$ and the leaf 1, so
# $\theta_{hub} = i/(i+1)$. A part holding the hub scores $C_{rep} = 2 - \theta_{hub} = 1 + 1/(i+1) > 1$
# (the leaf is new everywhere). The balance term is $\lambda(\max - |p|)/(\epsilon + \max - \min)$,
# which is $0$ on the fullest part and below $\lambda$ everywhere.
#
# - $\lambda = 1$: any other part scores less than 1 and the hub's part more than 1, so **every edge
#   lands on part 0**: replication factor exactly 1 (no mirror), edge balance exactly $K = 4$. All the
#   work on one rank.
# - $\lambda > 1$: once the load gap $\Delta$ satisfies $\lambda\Delta/(1+\Delta) > 1 + 1/(i+1)$ an edge
#   moves to an empty part, which creates a mirror of the hub there. After the hub has a copy on every
#   part, $C_{rep}$ is equal everywhere and the balance term alone decides: **perfect balance**, with
#   exactly $K - 1 = 3$ mirrors, replication factor $(m + K)/(m + 1) = 1.0075$. $\lambda = 1.1, 2, 4$ all
#   end there; a smaller $\lambda$ only lets the gap grow larger (up to about $1/(\lambda - 1)$ edges) before
#   the first move.
#
# **The trade.** $\lambda$ weighs balance against replication. On a star replication is nearly free
# (one hub, $K-1$ copies) and balance is everything, so any $\lambda > 1$ is right; on graphs with many
# medium-degree vertices a large $\lambda$ scatters their edges and raises the replication factor.

# %%
m = 400
star = np.array([[0, i] for i in range(1, m + 1)])
points = {}
for lam in (1.0, 1.1, 2.0, 4.0):
    met = GP.vertex_cut_metrics(star, GP.hdrf_vertex_cut(star, m + 1, K, lam=lam), m + 1, K)
    points[lam] = (met["replication_factor"], met["edge_balance"])
    print(f"lam={lam}: replication factor {points[lam][0]:.4f}, edge balance {points[lam][1]:.2f}")
assert points[1.0] == (1.0, float(K))
for lam in (1.1, 2.0, 4.0):
    assert abs(points[lam][0] - (m + K) / (m + 1)) < 1e-12 and points[lam][1] == 1.0
fig, ax = plt.subplots(figsize=(4.5, 3))
ax.plot([p[1] for p in points.values()], [p[0] for p in points.values()], "o")
for lam, p in points.items():
    ax.annotate(f"lam={lam}", (p[1], p[0]))
ax.set(xlabel="edge balance (max / mean)", ylabel="replication factor")
plt.close(fig)

# %% [markdown]
# ## Exercise 3 (coding): sparse supersteps, delta (push) PageRank
#
# **Algorithm.** Keep a value $x(v)$ and a residual $r(v)$, the change $v$ has not yet passed on. Start
# at $x = 1/n$ (the chapter's start) with $r = (1-d)/n - x + dMx$ (one dense superstep computes $dMx$,
# $M$ the transition matrix with dangling mass spread uniformly). In every superstep each vertex with
# $|r(v)| > \theta$ pushes: $x(v) \mathrel{+}= r(v)$, each out-neighbour $w$ receives
# $d\,r(v)/\text{outdeg}(v)$ into $r(w)$ (a dangling vertex spreads $d\,r(v)$ uniformly, through one
# all-reduce), and $r(v) = 0$. Vertices below the threshold stay silent and keep accumulating. Messages
# are (vertex, value) pairs summed per destination (the combiner). The run stops when no residual
# exceeds $\theta$.
#
# **Error.** Every push keeps the invariant $\pi = x + (I - dM)^{-1} r$, and $\lVert (I - dM)^{-1} r
# \rVert_1 \le \lVert r \rVert_1/(1-d)$ (each application of $dM$ shrinks the L1 norm by $d$). So at the
# end the L1 error is at most $\lVert r\rVert_1/(1-d) \le n\theta/(1-d)$: the threshold controls the
# error, checked on every run below.
#
# **Messages.** Per superstep they fall from every cut edge to a trickle (the last superstep sends a few
# percent of the first). But at **equal error** the total is not smaller than the chapter's dense
# PageRank on this graph, about the same or somewhat more. The reason: the generated power-law graph
# mixes fast (the dense iteration's error falls about 4 times per superstep), and on such a graph every
# vertex's residual decays at about the same rate, so nearly all vertices stay above $\theta$ until
# shortly before the end. Sparse supersteps pay when convergence is *uneven*: a few slow regions (long
# chains, weakly linked communities, a graph that changed locally) keep working while the rest is silent,
# and in asynchronous engines that push the largest residuals first. The exercise's "error it costs" is
# exactly the bound above; the saving must be measured per graph, and here it is none.
#
# > Note for the instructor: students expect delta PageRank to save messages; on the chapter's graph it
# > does not at equal accuracy, which makes a good discussion of when adaptive supersteps help.

# %%
def delta_pagerank(comm, edges, n, parts, theta, d=0.85, max_steps=500):
    """Push PageRank with a threshold, started at x = 1/n: (owned ids, x, residual, messages per superstep)."""
    K, me = comm.size, comm.rank
    owned = np.flatnonzero(parts == me)
    g2l = np.full(n, -1, np.int64)
    g2l[owned] = np.arange(len(owned))
    out_edges = edges[parts[edges[:, 0]] == me]
    outdeg = np.bincount(edges[:, 0], minlength=n)[owned]
    src_l, dst, dst_owner = g2l[out_edges[:, 0]], out_edges[:, 1], parts[out_edges[:, 1]]
    sent_per_step = []

    def spread(amount, r):
        """Add d * M @ amount to the residuals r (messages to the owners, dangling mass uniformly)."""
        share = d * amount[src_l] / np.maximum(outdeg[src_l], 1)
        go = amount[src_l] != 0
        blocks = []
        for j in range(K):
            sel = go & (dst_owner == j)
            ids, inv = np.unique(dst[sel], return_inverse=True)
            vals = np.zeros(len(ids))
            np.add.at(vals, inv.reshape(-1), share[sel])  # the combiner
            blocks.append(np.stack([ids.astype(np.float64), vals], axis=1))
        sent_per_step.append(sum(len(b) for j, b in enumerate(blocks) if j != me))
        for block in all_to_all(comm, blocks):
            np.add.at(r, g2l[block[:, 0].astype(np.int64)], block[:, 1])
        return r + recursive_doubling_allreduce(comm, np.array([d * amount[outdeg == 0].sum()]))[0] / n

    x = np.full(len(owned), 1.0 / n)
    r = spread(x, np.full(len(owned), (1 - d) / n) - x)  # r0 = (1-d)/n - x0 + d M x0: one dense superstep
    for _ in range(max_steps):
        active = np.abs(r) > theta
        if recursive_doubling_allreduce(comm, np.array([active.sum()], dtype=np.int64))[0] == 0:
            break
        amount = np.where(active, r, 0.0)
        x += amount
        r = spread(amount, np.where(active, 0.0, r))
    return owned, x, r, sent_per_step


edges = datasets.power_law_graph(2_000, 20_000, seed=SEED)
n = 2_000
exact, _ = G.reference_pagerank(edges, n, tol=1e-15)
parts = GP.hash_partition(n, K)
dense_per_step = sum(v[2]["values_sent"][0] for v in
                     cluster.run(G.pagerank, K, args=(edges, n), kwargs=dict(iters=1, parts=parts)).values)
for theta in (1e-6, 1e-7, 1e-8):
    res = cluster.run(delta_pagerank, K, args=(edges, n, parts, theta), timeout=120)
    x = np.zeros(n)
    resid = 0.0
    for owned, xv, rv, _ in res.values:
        x[owned] = xv
        resid += np.abs(rv).sum()
    err = np.abs(x - exact).sum()
    assert err <= resid / (1 - 0.85) * (1 + 1e-9) + 1e-15  # pi = x + R r and ||R r|| <= ||r|| / (1 - d)
    assert resid <= n * theta
    per_step = np.sum([v[3] for v in res.values], axis=0)
    # the chapter's dense PageRank: supersteps needed for the same L1 error, each sending every cut value
    steps = next(t for t in range(1, 400) if np.abs(G.reference_pagerank(edges, n, iters=t)[0] - exact).sum() <= err)
    print(f"theta={theta:g}: {len(per_step)} supersteps, L1 error {err:.2e}; messages {per_step.sum()} "
          f"(first {per_step[0]}, last {per_step[-1]}) vs dense {steps} x {dense_per_step} = {steps * dense_per_step}")
    assert per_step[0] == dense_per_step  # the first superstep is dense
    assert per_step[-1] < 0.1 * per_step[0]  # the tail is sparse
    assert per_step.sum() > 0.8 * steps * dense_per_step  # fast, even mixing: no saving at equal error

# %% [markdown]
# ## Exercise 4 (coding): pointer jumping for connected components
#
# **Rule.** After the propagation step (every vertex takes the smallest label among itself and its
# neighbours), each vertex also adopts its label's label: $\ell(v) \leftarrow \min(\ell(v), \ell(\ell(v)))$.
# It is safe: labels only decrease from a vertex's own id and stay inside its component, so
# $\ell(\ell(v)) \le \ell(v)$ is a label of the same component. Distributed, it costs one more exchange
# per superstep: ask the owner of $\ell(v)$ for its label, get the answer (two `all_to_all`s).
#
# **Supersteps on a path** $0 - 1 - \dots - (n-1)$. Plain propagation moves label 0 one hop per superstep:
# after $t$ supersteps $\ell(v) = \max(0, v - t)$, so $n - 1$ supersteps that change something plus one
# that changes nothing: $n$. The chapter's `connected_components` needs $n + 1$, because with vote to halt
# the last change is announced in one more superstep, and only the superstep after it is silent. With
# jumping the distance a label has travelled roughly doubles each superstep ($\ell(v) = v - t$ becomes
# $\ell(v - t) = v - 2t$), so about $\log_2 n$ supersteps. Measured for $n = 256$: 256 (257 for the
# chapter's function) against 9 $= \log_2 256 + 1$.

# %%
def cc_jumping(comm, edges, n, parts, jump=True, limit=10_000):
    """Min-label propagation (all vertices every superstep) plus optional pointer jumping."""
    K, me = comm.size, comm.rank
    both = np.concatenate([edges, edges[:, ::-1]])
    mine = both[parts[both[:, 0]] == me]
    owned = np.flatnonzero(parts == me)
    g2l = np.full(n, -1, np.int64)
    g2l[owned] = np.arange(len(owned))
    label = owned.copy()
    for step in range(1, limit + 1):
        before = label.copy()
        msgs = [np.stack([mine[parts[mine[:, 1]] == j, 1], label[g2l[mine[parts[mine[:, 1]] == j, 0]]]], axis=1)
                for j in range(K)]
        for block in all_to_all(comm, msgs):
            np.minimum.at(label, g2l[block[:, 0]], block[:, 1])
        if jump:
            pos = [np.flatnonzero(parts[label] == j) for j in range(K)]  # whose label rank j owns
            wanted = all_to_all(comm, [label[p] for p in pos])  # ask for the labels of those labels
            answers = all_to_all(comm, [label[g2l[w]] for w in wanted])
            for j in range(K):
                label[pos[j]] = np.minimum(label[pos[j]], answers[j])
        changed = recursive_doubling_allreduce(comm, np.array([(label != before).sum()], dtype=np.int64))[0]
        if changed == 0:
            return owned, label, step
    raise RuntimeError("no convergence")


n_path = 256
path = np.stack([np.arange(n_path - 1), np.arange(1, n_path)], axis=1)
want = G.reference_components(path, n_path)
steps = {}
for jump in (False, True):
    res = cluster.run(cc_jumping, 4, args=(path, n_path, GP.range_partition(n_path, 4), jump), timeout=120)
    assert np.array_equal(G.assemble([(o, lab, None) for o, lab, _ in res.values], n_path), want)
    steps[jump] = res.values[0][2]
chapter = cluster.run(G.connected_components, 4, args=(path, n_path), timeout=120)
chapter_steps = len(chapter.values[0][2]["messages"])
print(f"path of {n_path}: chapter's label propagation {chapter_steps} supersteps, ours without jumping "
      f"{steps[False]}, with pointer jumping {steps[True]}")
assert steps[False] == n_path and chapter_steps == n_path + 1
assert steps[True] <= np.ceil(np.log2(n_path)) + 2
# a graph with many components and hashed owners: still the reference's labels
sparse_edges = datasets.power_law_graph(600, 600, seed=SEED + 1)
res = cluster.run(cc_jumping, 3, args=(sparse_edges, 600, GP.hash_partition(600, 3)), timeout=120)
assert np.array_equal(G.assemble([(o, lab, None) for o, lab, _ in res.values], 600),
                      G.reference_components(sparse_edges, 600))

# %% [markdown]
# ## Exercise 5 (analysis): fan-outs (10, 2) against (2, 10)
#
# **Budget.** Both sample $s_1 s_2 = 20$ second-hop vertices per seed; the first hop differs (10 against
# 2), so the subgraphs hold at most $b(1 + 10 + 20) = 31b$ and $b(1 + 2 + 20) = 23b$ vertices: close, and
# the difference is in favour of (2, 10), which makes the comparison fair to it.
#
# **Variance.** The output of a batch vertex averages $s_1$ first-hop hidden states; each of those
# averages $s_2$ of its own neighbours. To first order the variance is
# $\frac{\sigma_1^2}{s_1} + \frac{\sigma_2^2}{s_1 s_2}$: the second term is the same for both (the
# product is 20), the first is 5 times smaller for $s_1 = 10$. **(10, 2) has the lower variance**: spend
# the fan-out near the seeds, where each sample carries more weight (GraphSAGE's own defaults, e.g.
# (25, 10), decrease with depth for that reason). Measured below with the chapter's two-layer weights
# over 150 samples per configuration.

# %%
indptr, indices = S.in_csr(c_edges, N_C)
rng = np.random.default_rng(SEED)
batch = rng.choice(N_C, size=16, replace=False)

def random_layer(d_in, d_out):
    """(W_l, b_l, W_r) drawn in the order the chapter draws them, so the weights are the chapter's."""
    return rng.standard_normal((d_in, d_out)), rng.standard_normal(d_out), rng.standard_normal((d_in, d_out))


layers = [random_layer(16, 8), random_layer(8, 4)]
variance, sizes = {}, {}
for fan in ((10, 2), (2, 10)):
    outs, counts = [], []
    for s in range(150):
        sub = S.sample_subgraph(indptr, indices, batch, list(fan), seed=s)
        outs.append(S.sage_forward(c_X[sub.nodes], sub.edge_index, layers)[:len(batch)])
        counts.append(len(sub.nodes))
    variance[fan] = float(np.var(np.array(outs), axis=0).mean())
    sizes[fan] = np.mean(counts)
    assert max(counts) <= len(batch) * (1 + fan[0] + fan[0] * fan[1])
    print(f"fan-out {fan}: mean sampled vertices {sizes[fan]:.0f}, output variance {variance[fan]:.3f}")
assert variance[(10, 2)] < variance[(2, 10)]

# %% [markdown]
# ## Exercise 6 (analysis): caching the features of high-degree vertices
#
# **Scheme.** Every rank keeps, besides its own rows, the features of the 10 % of vertices with the
# highest degree. A sampled vertex is fetched only if it is remote **and** not cached.
#
# **Why it works.** A neighbour sample reaches a vertex with probability roughly proportional to its
# degree (it is sampled once per in-edge that is followed), so the top 10 % by degree account for more
# than their 10 % share of the sampled remote vertices; the traffic removed is that share. Measured on the
# community graph: 15 % of the feature bytes under hash ownership and 18 % under LDG. Its degrees are
# only mildly skewed; on a power-law graph the hubs take a much larger share of the samples and the same
# cache removes correspondingly more. The cost is memory:
# $0.1\,n\,d$ extra numbers per rank, and updates to cached features (if features change) must be
# broadcast. The replay below draws exactly the batches and samples of `train_sage_minibatch` (same
# seeds) and is checked against its `remote_nodes` counts before the cache is applied.

# %%
def remote_rows(parts, K, cached, steps=30, batch_size=16, fanout=5, seed=SEED):
    """Remote rows fetched per rank over the run, with the given cached vertex set."""
    out = []
    for rank in range(K):
        mine = np.flatnonzero(parts == rank)
        g = np.random.default_rng([seed, rank])
        total = 0
        for _ in range(steps):
            pick = g.choice(mine, size=min(batch_size, len(mine)), replace=False)
            sub = S.sample_subgraph(indptr, indices, pick, [fanout], seed=int(g.integers(2**31)))
            total += int(np.count_nonzero((parts[sub.nodes] != rank) & ~cached[sub.nodes]))
        out.append(total)
    return np.array(out)


degree = np.bincount(c_edges.ravel(), minlength=N_C)
top = np.zeros(N_C, bool)
top[np.argsort(degree)[::-1][: N_C // 10]] = True
for name, parts_c in (("hash", GP.hash_partition(N_C, K)), ("LDG", GP.ldg_partition(c_edges, N_C, K))):
    lib = cluster.run(S.train_sage_minibatch, K, args=(c_edges, c_X, c_y, parts_c, 4),
                      kwargs=dict(batch=16, fanout=5, steps=30, seed=SEED), timeout=120)
    without = remote_rows(parts_c, K, np.zeros(N_C, bool))
    assert np.array_equal(without, [sum(v[1]["remote_nodes"]) for v in lib.values])  # the replay is the run
    with_cache = remote_rows(parts_c, K, top)
    saved = 1 - with_cache.sum() / without.sum()
    print(f"{name:>4}: remote rows {without.sum()} -> {with_cache.sum()} with the top-10% cache "
          f"({saved:.0%} of the feature traffic gone, {without.sum() * 16 * 8 / 1e3:.0f} kB -> "
          f"{with_cache.sum() * 16 * 8 / 1e3:.0f} kB)")
    assert saved > 0.10  # more than the cached share of vertices: sampling favours high degree


# %% [markdown]
# ## Exercise 7 (lab): Lab 13, a full-graph GNN layer with the backward pass through the halo
#
# The lab is `labs/lab13-halo-gnn-backward`; its answer is the solution blocks of
# `labs/lab13-halo-gnn-backward/lab13-halo-gnn-backward.py`, and its hidden tests, rubric and mutants are
# in `grading/lab13-halo-gnn-backward/` (`tests.py`, `rubric.yaml`, `mutants/`). The chapter's
# `fetch_features` is the forward half only; the lab grades what full-graph training adds to it.
#
# **Key ideas of the answer.** A rank lists the distinct remote sources of its in-edges per owner (its
# ghosts) and sends each owner that list once, as int64 ids; from then on both sides know the order, so
# the forward sends only values: each owner ships the requested rows, the rank appends them after its own
# rows and aggregates with an unbuffered scatter-add (a repeated edge counts twice, a vertex without
# in-edges gets zero). The backward scales dOut by 1/deg at the destination, scatters it along every local
# edge to the source's local row, multiplies by the transposed W_l, and ships the rows that belong to
# ghosts back in the order they came; the owner adds them (several ranks may hold the same ghost) to its
# own share and to dOut times the transposed W_r. The weight gradients are sums over owned rows, so each
# rank returns its share and the all-reduce of Section 4 is left out. Each distinct ghost crosses once
# each way, which is why the per-pair byte bound holds and why an all-gather of X or one row per cut edge
# fails it. The hidden tests cover K = 1, 2, 3, 5 and K > n, uneven, reversed and random owners, ranks that
# own nothing, self-loops, repeated edges, a hub, float32 and float64, 2 real processes, and the bytes of
# every ordered pair of ranks; the chapter's forward fetch with the features treated as inputs (the
# `pasted_course` mutant) keeps about a third of the points.
