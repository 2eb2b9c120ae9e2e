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
# # Chapter 13. Distributed graph ML
#
# The data of Chapters 10-12 were rows: any row could go to any worker, and workers met only in an
# all-reduce. A graph is different. Its records are edges, a vertex's computation needs its neighbours,
# and the neighbours of a vertex on rank 0 live, in general, on every other rank. How the graph is cut
# decides how many messages cross the network each step and which rank waits for which. This chapter
# partitions generated graphs three ways and measures the cut, runs PageRank and connected components as
# Pregel-style supersteps on the communicator (checked against the power iteration, networkx and scipy),
# samples neighbourhoods for a GNN mini-batch as GraphSAGE does, and runs the same layers in PyTorch
# Geometric.
#
# **Prerequisites:** Chapter 4 (Communication primitives: all-to-all and its $\alpha$-$\beta$ cost),
# Chapter 6 (MapReduce: the shuffle that a superstep repeats every iteration) and Chapter 12 (Distributed
# classical ML: iterative algorithms as rounds of local work plus one collective). Background: adjacency
# lists, the random-surfer picture of PageRank, and what a graph convolution averages.

# %% tags=["parameters"]
N_VERTICES = 4_000  # smoke: 600
N_EDGES = 40_000  # smoke: 5_000
N_COMMUNITY = 1_200  # smoke: 400
KS = [1, 2, 4, 8, 16]  # smoke: [1, 2, 3, 5, 8]
ITERS = 40  # smoke: 20
SECONDS_PER_EDGE = 2e-7  # simulated work of one edge in a superstep
ALPHA = 1e-5
BETA = 1e-9
SEED = 0

# %% [markdown]
# `N_VERTICES` and `N_EDGES` size the directed power-law graph of the PageRank sections (heavy-tailed
# degrees, as in web and social graphs); `N_COMMUNITY` vertices make the community graph with features
# and labels of the GNN sections; `KS` are the world sizes; `ITERS` the PageRank supersteps;
# `SECONDS_PER_EDGE` the simulated cost of one edge's message; `ALPHA` and `BETA` the simulated network.
#
# ## 1. Motivation: which ceiling binds
#
# Memory binds first. An edge list of 64-bit ids costs 16 bytes per edge before any feature, and the
# graphs people rank, recommend from or train on have billions to trillions of edges. Below, the bytes of
# the bare edge list and of 128 float32 features per vertex (a small GNN input) for a few graph sizes.

# %%
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.ml import graph as G
from scaleoutai.ml import graph_gas as GG
from scaleoutai.ml import graph_partition as GP
from scaleoutai.ml import graph_sampling as S

for name, n, m in (("citation graph", 2e5, 1e6), ("social network", 1e9, 1e11), ("web crawl", 3.5e9, 1.3e11)):
    print(f"{name:>15}: {n:.2g} vertices, {m:.2g} edges -> edge list {16 * m / 2**30:9.1f} GiB, "
          f"features {n * 128 * 4 / 2**30:9.1f} GiB")

# %% [markdown]
# Beyond a few hundred gigabytes the graph must be split over machines, and then every neighbour on
# another machine is a message. Compute is cheap per edge (a multiply and an add for PageRank), so the
# cost of a superstep is set by the cut and by the most loaded rank, not by the arithmetic.
#
# ## 2. Core concepts
#
# A graph has $n$ vertices and a list of directed edges (src, dst). Real graphs are **heavy-tailed**: most
# vertices have a handful of edges and a few hubs have thousands. `datasets.power_law_graph` draws such a
# graph (Chung-Lu model); on a log-log plot its degree distribution is close to a straight line.

# %%
edges = datasets.power_law_graph(N_VERTICES, N_EDGES, seed=SEED)
n = N_VERTICES
outdeg, indeg = np.bincount(edges[:, 0], minlength=n), np.bincount(edges[:, 1], minlength=n)
deg = outdeg + indeg
fig, ax = plt.subplots(figsize=(5.5, 3.8))
values, counts = np.unique(deg[deg > 0], return_counts=True)
ax.loglog(values, counts, "o", ms=3)
ax.set(xlabel="degree (in + out)", ylabel="number of vertices", title=f"power-law graph: {n} vertices, {len(edges)} edges")
plt.show()
print(f"max degree {deg.max()} vs mean {deg.mean():.1f}; {np.count_nonzero(outdeg == 0)} dangling vertices (no out-edge)")

# %% [markdown]
# There are two ways to cut a graph over $K$ ranks.
#
# - **Edge-cut**: every vertex gets one owner; an edge whose endpoints have different owners is *cut*
#   and carries a message every superstep. Measured: the cut fraction, and the balance of vertices and of
#   out-edges (the work) per rank. Partitioners: **hash** (no locality, perfect balance in expectation),
#   **range** (contiguous ids: good when ids follow locality, terrible when hubs share a range) and
#   **LDG**, a one-pass streaming greedy that puts a vertex where most of its already-placed neighbours
#   are, penalised by how full that part is.
# - **Vertex-cut**: every edge gets one owner, and a vertex is copied on every rank that holds one of
#   its edges. Measured: the **replication factor** (mean copies per vertex) and the edge balance.
#   Partitioners: **random** edges, and **HDRF**, a streaming greedy that prefers to replicate the
#   higher-degree endpoint of an edge.
#
# The library's metrics are checked in the tests against definitions computed edge by edge. Here is how
# they move with $K$:

# %%
edge_cut = {"hash": lambda K: GP.hash_partition(n, K), "range": lambda K: GP.range_partition(n, K),
            "LDG": lambda K: GP.ldg_partition(edges, n, K)}
vertex_cut = {"random": lambda K: GP.random_vertex_cut(edges, n, K, seed=SEED),
              "HDRF": lambda K: GP.hdrf_vertex_cut(edges, n, K)}
t0 = time.perf_counter()
ec_metrics = {name: {K: GP.edge_cut_metrics(edges, f(K), K) for K in KS} for name, f in edge_cut.items()}
vc_parts = {name: {K: f(K) for K in KS} for name, f in vertex_cut.items()}
vc_metrics = {name: {K: GP.vertex_cut_metrics(edges, vc_parts[name][K], n, K) for K in KS} for name in vertex_cut}
print(f"partitioned {len(KS)} world sizes five ways in {time.perf_counter() - t0:.1f} s")
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
for name, by_k in ec_metrics.items():
    axes[0].plot(KS, [by_k[K]["cut_fraction"] for K in KS], "o-", label=name)
    axes[1].plot(KS, [by_k[K]["edge_balance"] for K in KS], "o-", label=f"{name} (edge-cut)")
for name, by_k in vc_metrics.items():
    axes[2].plot(KS, [by_k[K]["replication_factor"] for K in KS], "o-", label=name)
    axes[1].plot(KS, [by_k[K]["edge_balance"] for K in KS], "s--", label=f"{name} (vertex-cut)")
axes[0].plot(KS, [1 - 1 / K for K in KS], "k:", label="random: 1 - 1/K")
axes[0].set(xlabel="K", ylabel="fraction of edges cut", title="edge-cut: cut edges")
axes[1].set(xlabel="K", ylabel="max / mean edges per rank", title="work balance")
axes[2].set(xlabel="K", ylabel="mean copies per vertex", title="vertex-cut: replication factor")
for ax in axes:
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
K = max(KS)
assert ec_metrics["LDG"][K]["cut_fraction"] < ec_metrics["hash"][K]["cut_fraction"]
assert vc_metrics["HDRF"][K]["replication_factor"] < vc_metrics["random"][K]["replication_factor"]

# %% [markdown]
# Hashing cuts close to the random-assignment share $1 - 1/K$ of the edges. Range partitioning cuts
# fewer here, because the generator gives hubs the small ids, but it loads the rank that owns them with
# most of the edges: the balance panel is the one that matters for time. LDG cuts less than hashing;
# HDRF keeps the replication factor well below random edge placement at the same edge balance.
#
# ## 3. The distribution and communication pattern
#
# **Pregel** runs a graph algorithm as a sequence of *supersteps*. In each, every vertex reads the
# messages sent to it in the previous superstep, updates its value, and sends messages along its
# out-edges; a barrier separates supersteps. On the communicator rank $r$ owns the vertices of part $r$
# and their out-edges. Messages to vertices on the same rank stay local; the rest are batched per
# destination rank and sent in one `all_to_all`. A **combiner** adds the messages for one destination
# vertex before they leave the sender, so a rank sends at most one value per (destination rank,
# destination vertex) pair rather than one per cut edge. PageRank also needs two global sums per
# superstep (the rank mass sitting on dangling vertices and the change since the last superstep), one
# small all-reduce.
#
# Every vertex is active in every PageRank superstep and the graph does not change, so the ids of each
# batch are exchanged once at set-up and a superstep sends only values, in the agreed order: $8$ bytes per
# combined message in float64. The timeline shows two supersteps on 4 simulated ranks.

# %%
net = cluster.Network(alpha=ALPHA, beta=BETA)
traced = cluster.run(G.pagerank, 4, args=(edges, n), kwargs=dict(iters=2, parts=GP.hash_partition(n, 4),
                     seconds_per_edge=SECONDS_PER_EDGE), network=net, trace=True)
cluster.plot_timeline(traced, title="PageRank, K = 4: set-up exchange of ids, then per superstep all-to-all + all-reduce")
plt.show()

# %% [markdown]
# The messages a superstep sends follow from the partition: with no combiner, exactly one value per cut
# edge; with the combiner, one per distinct (destination rank, vertex) pair.

# %%
print(f"{'K':>3} {'cut edges':>10} {'values sent, no combiner':>25} {'with combiner':>14} {'bytes / superstep':>18}")
for K in KS[1:]:
    parts = GP.hash_partition(n, K)
    cut = GP.edge_cut_metrics(edges, parts, K)["cut_edges"]
    sent = {}
    for combine in (False, True):
        res = cluster.run(G.pagerank, K, args=(edges, n), kwargs=dict(iters=1, parts=parts, combine=combine))
        sent[combine] = sum(v[2]["values_sent"][0] for v in res.values)
        nbytes = sum(v[2]["bytes_sent"][0] for v in res.values)
    assert sent[False] == cut and sent[True] <= cut and nbytes == 8 * sent[True]
    print(f"{K:>3} {cut:>10} {sent[False]:>25} {sent[True]:>14} {nbytes:>18}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `G._Routes` builds, once, what rank $r$ needs to push along its out-edges: which edges stay local,
# which slot of which destination batch each remote edge adds into, and (through one `all_to_all` of
# ids) where each received value lands. `pagerank` is then a loop of supersteps: messages
# $x(u)/\mathrm{outdeg}(u)$ per edge, `push`, the update rule, one all-reduce of the residual and the
# dangling mass. The rule is networkx's default: dangling mass is spread uniformly, so the ranks always
# sum to one.

# %%
from scaleoutai.notebooks import show

show(G._Routes, G.pagerank)

# %% [markdown]
# The check: for every $K$ in `KS`, with range and hashed (uneven) ownership, with and without the
# combiner, and for more ranks than vertices, the distributed ranks equal the single-machine power
# iteration to $10^{-12}$ in float64.

# %%
ref, ref_res = G.reference_pagerank(edges, n, iters=ITERS)
residuals = {}
for K in KS:
    for parts in (None, GP.hash_partition(n, K)):
        for combine in (True, False):
            res = cluster.run(G.pagerank, K, args=(edges, n), kwargs=dict(iters=ITERS, parts=parts, combine=combine))
            assert np.abs(G.assemble(res.values, n) - ref).max() < 1e-12, (K, combine)
    residuals[K] = res.values[0][2]["residuals"]
tiny = np.array([[0, 1], [1, 2], [2, 0], [3, 4]])
res = cluster.run(G.pagerank, 8, args=(tiny, 6), kwargs=dict(iters=30))
assert np.abs(G.assemble(res.values, 6) - G.reference_pagerank(tiny, 6, iters=30)[0]).max() < 1e-15
print(f"PageRank equals the power iteration for K in {KS} (range and hash owners, with and without combiner) "
      f"and for K = 8 > 6 vertices; ranks sum to {ref.sum():.12f}")
fig, ax = plt.subplots(figsize=(5.5, 3.6))
ax.semilogy(range(1, ITERS + 1), ref_res, "k-", lw=3, alpha=0.3, label="power iteration")
for K in (KS[1], KS[-1]):
    ax.semilogy(range(1, ITERS + 1), residuals[K], "--", label=f"supersteps, K = {K}")
ax.set(xlabel="superstep", ylabel="L1 change of the ranks", title="PageRank converges at rate d = 0.85")
ax.legend()
plt.show()

# %% [markdown]
# **Connected components** show the other half of Pregel: *vote to halt*. Every vertex starts with its own
# id as label; a vertex whose label fell sends it to its neighbours (in both directions: weak
# connectivity) and then halts, and a smaller label arriving wakes it up. The run ends in the first
# superstep in which no rank sent anything. Here the messages carry (vertex id, label) pairs, because
# only the active vertices speak.

# %%
show(G.connected_components)

# %%
import scipy.sparse as sp  # noqa: E402
from scipy.sparse.csgraph import connected_components as scipy_components  # noqa: E402

sparse_edges = datasets.power_law_graph(n, n, seed=SEED + 1)  # about one edge per vertex: many components
adj = sp.coo_matrix((np.ones(len(sparse_edges)), (sparse_edges[:, 0], sparse_edges[:, 1])), shape=(n, n))
n_comp, scipy_lab = scipy_components(adj, directed=True, connection="weak")
want = G.reference_components(sparse_edges, n)
assert len(np.unique(want)) == n_comp and np.array_equal(np.unique(scipy_lab[want], return_counts=True)[1],
                                                         np.unique(scipy_lab, return_counts=True)[1])
for K in KS:
    res = cluster.run(G.connected_components, K, args=(sparse_edges, n), kwargs=dict(parts=GP.hash_partition(n, K)))
    assert np.array_equal(G.assemble(res.values, n), want), K
cc_info = res.values[0][2]
msgs = np.sum([v[2]["messages"] for v in res.values], axis=0)
print(f"{n_comp} weak components, equal to scipy's for K in {KS}; K = {KS[-1]} halted after {len(msgs)} supersteps; "
      f"messages sent per superstep: {msgs.tolist()}")

# %% [markdown]
# **Neighbour sampling for GNNs.** A graph convolution layer replaces a vertex's features by an
# aggregate (mean or sum) of its in-neighbours' features, transformed. Two layers need the neighbours of
# the neighbours, and on a heavy-tailed graph a mini-batch of $b$ vertices quickly touches most of the
# graph. GraphSAGE samples at most a fixed number of in-neighbours per vertex per hop (the *fan-out*), so
# the sampled subgraph has at most $b(1 + s_1 + s_1 s_2)$ vertices for fan-outs $s_1, s_2$.

# %%
show(S.sample_subgraph, S.gcn_aggregate)

# %% [markdown]
# When the fan-out covers every neighbour, the layers computed on the sampled subgraph give, for the
# batch vertices, exactly the full-graph result (same neighbours, added in the same order); with a
# smaller fan-out the mean over the sample is an unbiased estimate of the neighbour mean.

# %%
c_edges, c_X, c_y = datasets.community_graph(N_COMMUNITY, 4, d=16, seed=SEED, dtype=np.float64)
n_c = N_COMMUNITY
indptr, indices = S.in_csr(c_edges, n_c)
rng = np.random.default_rng(SEED)
batch = rng.choice(n_c, size=16, replace=False)
layers = [(rng.standard_normal((16, 8)), rng.standard_normal(8), rng.standard_normal((16, 8))),
          (rng.standard_normal((8, 4)), rng.standard_normal(4), rng.standard_normal((8, 4)))]
full_out = S.sage_forward(c_X, c_edges.T, layers)[batch]
sub = S.sample_subgraph(indptr, indices, batch, [-1, -1])
assert np.array_equal(S.sage_forward(c_X[sub.nodes], sub.edge_index, layers)[:len(batch)], full_out)
exact = S.gcn_aggregate(c_X, c_edges.T, n_c)[batch]
est = np.mean([S.gcn_aggregate(c_X[s.nodes], s.edge_index, len(s.nodes))[:len(batch)]
               for s in (S.sample_subgraph(indptr, indices, batch, [3], seed=i) for i in range(400))], axis=0)
one = S.sample_subgraph(indptr, indices, batch, [3], seed=0)
one_err = np.abs(S.gcn_aggregate(c_X[one.nodes], one.edge_index, len(one.nodes))[:len(batch)] - exact).max()
assert np.abs(est - exact).max() < one_err  # averaging samples approaches the exact mean: no bias
print(f"full fan-out: 2-layer output on {len(sub.nodes)} sampled vertices == full graph for the batch; "
      f"fan-out 3: one sample is off the exact neighbour mean by up to {one_err:.3f}, "
      f"the mean of 400 samples by {np.abs(est - exact).max():.3f}")

fig, ax = plt.subplots(figsize=(5.5, 3.6))
fans = [1, 2, 3, 5, 8, 12]
sizes = [len(S.sample_subgraph(indptr, indices, batch, [f, f], seed=SEED).nodes) for f in fans]
ax.plot(fans, sizes, "o-", label="sampled vertices (2 hops)")
ax.plot(fans, [len(batch) * (1 + f + f * f) for f in fans], "k:", label="bound b (1 + s + s^2)")
ax.axhline(len(sub.nodes), color="C3", ls="--", label="full 2-hop neighbourhood")
ax.set(xlabel="fan-out per hop", ylabel="vertices in the mini-batch", yscale="log", title=f"b = {len(batch)} seeds")
ax.legend(fontsize=8)
plt.show()
assert all(s <= len(batch) * (1 + f + f * f) for f, s in zip(fans, sizes))

# %% [markdown]
# **Distributed mini-batch training.** In a distributed GNN the features are partitioned with the
# vertices. A rank draws its batch from its own vertices, samples, and must fetch the feature rows of
# every sampled vertex it does not own: two `all_to_all`s (ids, then rows), $d$ times the item size per
# remote vertex. This is the traffic that a partitioner keeping neighbours together removes.

# %%
show(S.fetch_features)

# %%
K_TRAIN = 4
fetched = {}
for name, parts in (("hash", GP.hash_partition(n_c, K_TRAIN)), ("LDG", GP.ldg_partition(c_edges, n_c, K_TRAIN))):
    res = cluster.run(S.train_sage_minibatch, K_TRAIN, args=(c_edges, c_X, c_y, parts, 4),
                      kwargs=dict(batch=16, fanout=5, steps=30, seed=SEED))
    W, info = res.values[0]
    agg = S.gcn_aggregate(c_X, c_edges.T, n_c)
    acc = ((agg @ W[0] + W[1] + c_X @ W[2]).argmax(1) == c_y).mean()
    remote = sum(sum(v[1]["remote_nodes"]) for v in res.values)
    fetched[name] = sum(sum(v[1]["feature_bytes"]) for v in res.values)
    assert fetched[name] == remote * c_X.shape[1] * c_X.itemsize
    print(f"{name:>5} partition: accuracy {acc:.3f}, loss {info['loss'][0]:.2f} -> {info['loss'][-1]:.2f}, "
          f"remote feature rows {remote}, {fetched[name] / 1e3:.0f} kB fetched")
    assert acc > 0.8
assert fetched["LDG"] < fetched["hash"]

# %% [markdown]
# ## 5. The same task with production libraries: networkx, pymetis, PyTorch Geometric
#
# **networkx** is the reference for PageRank: `nx.pagerank` with the same damping spreads dangling mass
# uniformly by default, so its result must equal ours to its own tolerance.

# %%
import networkx as nx  # noqa: E402

g = nx.DiGraph()
g.add_nodes_from(range(n))
g.add_edges_from(map(tuple, edges.tolist()))
t0 = time.perf_counter()
nx_pr = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=500)
nx_seconds = time.perf_counter() - t0
ours, _ = G.reference_pagerank(edges, n, tol=1e-15)
gap = np.abs(ours - np.array([nx_pr[v] for v in range(n)])).max()
assert len(nx_pr) == n and gap < 1e-10
print(f"networkx PageRank ({nx_seconds:.2f} s) equals ours: max difference {gap:.1e}")

# %% [markdown]
# **pymetis** (METIS) is the production multilevel partitioner: it coarsens the graph, partitions the
# small graph, and refines the cut on the way back. It sees the whole graph, which a streaming
# partitioner does not.

# %%
import pymetis  # noqa: E402

und = c_edges[c_edges[:, 0] < c_edges[:, 1]]
xadj, adjncy = GP.undirected_csr(und, n_c)
print(f"{'K':>3} {'hash':>7} {'LDG':>7} {'METIS':>7}   (fraction of edges cut, community graph)")
for K in KS[1:]:
    n_cut, membership = pymetis.part_graph(K, adjacency=pymetis.CSRAdjacency(xadj, adjncy))
    metis = GP.edge_cut_metrics(c_edges, np.asarray(membership), K)
    assert metis["cut_edges"] == 2 * n_cut  # METIS counts each undirected edge once
    hashed = GP.edge_cut_metrics(c_edges, GP.hash_partition(n_c, K), K)
    ldg = GP.edge_cut_metrics(c_edges, GP.ldg_partition(c_edges, n_c, K), K)
    assert metis["cut_fraction"] < hashed["cut_fraction"]
    print(f"{K:>3} {hashed['cut_fraction']:>7.3f} {ldg['cut_fraction']:>7.3f} {metis['cut_fraction']:>7.3f}")

# %% [markdown]
# **PyTorch Geometric** runs the GNN layers. Without pyg-lib or torch-sparse, its own samplers are not
# available, which suits us: we feed `SAGEConv(aggr="mean")` our sampled subgraph as a plain `edge_index`,
# and compare with the same layers on the full graph, and with our NumPy layers holding PyG's weights.

# %%
import torch  # noqa: E402
from torch_geometric.nn import SAGEConv  # noqa: E402

torch.manual_seed(SEED)
convs = [SAGEConv(16, 8, aggr="mean"), SAGEConv(8, 4, aggr="mean")]


def pyg_forward(x, edge_index):
    with torch.no_grad():
        h = torch.relu(convs[0](torch.from_numpy(x), torch.from_numpy(edge_index)))
        return convs[1](h, torch.from_numpy(edge_index)).numpy()


X32 = c_X.astype(np.float32)
pyg_full = pyg_forward(X32, np.ascontiguousarray(c_edges.T))
pyg_mini = pyg_forward(X32[sub.nodes], sub.edge_index)[:len(batch)]
weights = [(c.lin_l.weight.detach().numpy().T, c.lin_l.bias.detach().numpy(), c.lin_r.weight.detach().numpy().T)
           for c in convs]
ours32 = S.sage_forward(X32, c_edges.T, weights)
assert pyg_full.shape == (n_c, 4)
assert np.allclose(pyg_mini, pyg_full[batch], atol=1e-5, rtol=1e-5)
assert np.allclose(ours32, pyg_full, atol=1e-5, rtol=1e-5)
print(f"PyG SAGEConv on our sampled batch ({len(sub.nodes)} vertices) == on the full graph ({n_c}) for the batch; "
      f"our NumPy layers == PyG to {np.abs(ours32 - pyg_full).max():.1e}")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A hub makes a straggler under edge-cut.** The owner of a hub owns all its edges. In a push
# superstep its work grows with the hub's degree, and every other rank waits for it at the exchange. A
# vertex-cut spreads the hub's edges over all ranks: each rank does a share of the hub's work and the
# hub's partial sums are combined at its master (gather, apply, scatter, as in PowerGraph).

# %%
show(GG._Replicas.gather, GG.pagerank_vertex_cut)

# %%
K = max(KS)
straggle = {}
for name, fn, kw in (("edge-cut, range", G.pagerank, {"parts": GP.range_partition(n, K)}),
                     ("edge-cut, hash", G.pagerank, {"parts": GP.hash_partition(n, K)}),
                     ("vertex-cut, HDRF", GG.pagerank_vertex_cut, {"edge_parts": vc_parts["HDRF"][K]})):
    res = cluster.run(fn, K, args=(edges, n), kwargs=dict(iters=ITERS, seconds_per_edge=SECONDS_PER_EDGE, **kw),
                      network=net)
    assert np.abs(G.assemble(res.values, n) - ref).max() < 1e-12
    work = np.array([v[2]["local_edges"] for v in res.values])
    straggle[name] = res.sim_time
    print(f"{name:>17}: edges per rank max {work.max()} / mean {work.mean():.0f} = {work.max() / work.mean():.2f}; "
          f"simulated {res.sim_time * 1e3:.2f} ms")
assert straggle["vertex-cut, HDRF"] < straggle["edge-cut, range"]
print(f"largest degree {deg.max()} vs the fair share of edges per rank E/K = {len(edges) / K:.0f}")

# %% [markdown]
# Range ownership puts the hubs (the generator gives them small ids) on rank 0 and makes it the
# straggler. Hashing scatters the hubs, which helps as long as no single vertex holds a large share of a
# rank's fair share $E/K$ of the edges; the vertex-cut balances the edges whatever the degrees, at the
# price of a second exchange per superstep (gather and scatter), so on a mildly skewed graph hashing can
# still come out ahead. The test suite's star graph, where one vertex holds half of the edges, is the case
# where only the vertex-cut balances.

# %% [markdown]
# **A rank crashes mid-superstep.** Pregel's answer is a checkpoint every few supersteps: every rank
# saves its values (atomically: write, then rename), and after a failure all ranks roll back to the last
# superstep that every rank saved and run again from there. PageRank is deterministic, so the restarted
# run ends exactly where the run without a crash ends.

# %%
with tempfile.TemporaryDirectory() as folder:
    kw = dict(iters=ITERS, parts=GP.hash_partition(n, 4), checkpoint=folder, every=5)
    try:
        cluster.run(G.pagerank, 4, args=(edges, n), kwargs=kw, faults=cluster.Faults(crash={2: 40}))
        raise AssertionError("the crash was not reported")
    except cluster.RankError as err:
        assert "crash" in str(err), err
        print("the run ended:", str(err).splitlines()[0])
    saved = G.latest_checkpoint(folder, 4)
    res = cluster.run(G.pagerank, 4, args=(edges, n), kwargs=kw)
    assert 0 < saved < ITERS and res.values[0][2]["start"] == saved
    assert np.abs(G.assemble(res.values, n) - ref).max() < 1e-12
    print(f"restarted from superstep {saved} (files: {len(os.listdir(folder))}); result equals the run without a crash")

# %% [markdown]
# **Dangling vertices leak rank mass.** A vertex with no out-edge has nowhere to send its rank. Dropping
# that mass is an easy bug: the ranks no longer sum to one, and the ordering of vertices shifts towards
# those that feed dangling ones.

# %%
mass = {}
for rule in G.DANGLING:
    mass[rule] = [G.reference_pagerank(edges, n, iters=t, dangling=rule)[0].sum() for t in range(0, ITERS + 1, 2)]
fig, ax = plt.subplots(figsize=(5.5, 3.4))
for rule, m in mass.items():
    ax.plot(range(0, ITERS + 1, 2), m, "o-", label=f"dangling = {rule!r}")
ax.set(xlabel="superstep", ylabel="sum of ranks", title="dropping dangling mass leaks it")
ax.legend()
plt.show()
assert abs(mass["uniform"][-1] - 1) < 1e-12 and mass["drop"][-1] < 0.99

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# On the simulator each edge costs `SECONDS_PER_EDGE` per superstep and each message pays $\alpha$ and
# $\beta$. Below, $S_K$ and $E_K$ of `ITERS` supersteps for the hash edge-cut and the HDRF vertex-cut, and
# the bytes one superstep moves, priced with the capstone's price list.

# %%
times = {"edge-cut, hash": {}, "vertex-cut, HDRF": {}}
moved = {name: {} for name in times}
for K in KS:
    for name, fn, kw in (("edge-cut, hash", G.pagerank, {"parts": GP.hash_partition(n, K)}),
                         ("vertex-cut, HDRF", GG.pagerank_vertex_cut, {"edge_parts": vc_parts["HDRF"][K]})):
        res = cluster.run(fn, K, args=(edges, n), kwargs=dict(iters=ITERS, seconds_per_edge=SECONDS_PER_EDGE, **kw),
                          network=net)
        times[name][K] = res.sim_time
        moved[name][K] = sum(v[2]["bytes_sent"][-1] for v in res.values)
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'partition':>17} {'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'bytes/superstep':>16} {'USD per 1000 runs':>18}")
for name, by_k in times.items():
    for row in perf.scaling_table(by_k):
        K = row["p"]
        cost = perf.run_cost(price.price_per_hour, K, 1000 * row["time"])
        print(f"{name:>17} {K:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} "
              f"{moved[name][K]:>16} {cost:>18.6f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for name, by_k in times.items():
    axes[0].plot(KS, [by_k[1] / by_k[K] for K in KS], "o-", label=name)
    axes[1].plot(KS[1:], [moved[name][K] / 1e3 for K in KS[1:]], "o-", label=name)
axes[0].plot(KS, KS, "k:", label="ideal")
axes[0].set(xlabel="K", ylabel="speedup S_K", title="PageRank on the simulator")
axes[1].set(xlabel="K", ylabel="kB per superstep (all ranks)", title="bytes per superstep")
for ax in axes:
    ax.legend(fontsize=8)
plt.show()
assert times["vertex-cut, HDRF"][max(KS)] < times["vertex-cut, HDRF"][1]

# %% [markdown]
# Both curves bend for the same two reasons: the bytes per superstep grow with $K$ (more edges cut, more
# copies), and each superstep pays $K-1$ latencies in the all-to-all plus $\log_2 K$ in the all-reduce,
# while the work per rank shrinks as $1/K$. The vertex-cut's advantage is balance; its cost is two values
# per mirror per superstep. The same code runs on real processes; `benchmarks/bench_pagerank.py` times
# $K = 1, 2$ on a $10^5$-edge graph. Here one process run confirms the result:

# %%
t0 = time.perf_counter()
res = cluster.run(G.pagerank, 2, args=(edges, n), kwargs=dict(iters=ITERS, parts=GP.hash_partition(n, 2)),
                  backend="process", timeout=120)
assert np.abs(G.assemble(res.values, n) - ref).max() < 1e-12
print(f"2 processes: equal to the power iteration ({time.perf_counter() - t0:.1f} s including process start-up)")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Order matters to a streaming partitioner.** Run LDG with the vertices in id order, in random
#    order and in breadth-first order from vertex 0 on the community graph. Which cuts least, and why?
# 2. **HDRF's balance knob.** Feed `hdrf_vertex_cut` a star graph with the hub's edges first, at
#    `lam` = 1, 1.1, 2 and 4. Plot replication factor against edge balance and explain the trade.
# 3. **Sparse supersteps.** Change `pagerank` so that a vertex whose value changed by less than a
#    threshold stops sending (delta PageRank). Measure messages per superstep and the error it costs.
# 4. **Label propagation, faster.** Connected components needs about as many supersteps as the graph's
#    diameter. Add pointer jumping (each vertex adopts its label's label) and count supersteps on a path.
# 5. **A fan-out budget.** For a fixed number of sampled vertices, compare fan-outs (10, 2) and (2, 10)
#    on the community graph: which gives the lower variance of the 2-layer output for the batch?
# 6. **Feature caching.** Keep the features of the 10 % highest-degree remote vertices cached on every
#    rank and measure how much of the fetched traffic of Section 4 disappears.
# 7. **Lab 13 (`labs/lab13-halo-gnn-backward`): full-graph training needs gradients through the halo.**
#    Section 4 trained on sampled batches, where features are inputs and only weight gradients travel.
#    Without sampling, a layer's input is the previous layer's output and needs a gradient too. Over an
#    edge-cut where each rank holds its own rows and the in-edges of its own vertices, write one
#    mean-aggregation SAGE layer's forward and backward: fetch each distinct ghost row once, and send the
#    gradient of every ghost row back to the rank that owns it. The grader compares every output with one
#    computation of the whole graph and counts the bytes between every pair of ranks.
#
# ## 9. Research directions
#
# - **Partitioning power-law graphs.** Edge-cuts cannot balance hubs and vertex-cuts replicate them;
#   which cut is best depends on the algorithm's communication, and streaming partitioners see the graph
#   once, in an order they do not choose. Partitioning that adapts while the graph and the workload change
#   is open.
#   - Gonzalez, Low, Gu, Bickson and Guestrin, "PowerGraph: Distributed Graph-Parallel Computation on
#     Natural Graphs", OSDI, 2012. Vertex-cuts and gather-apply-scatter for power-law graphs.
#   - Petroni, Querzoni, Daudjee, Kamali and Iacoboni, "HDRF: Stream-Based Partitioning for Power-Law
#     Graphs", CIKM, 2015. Replicate the high-degree endpoint first; the vertex-cut of this chapter.
#   - Stanton and Kliot, "Streaming Graph Partitioning for Large Distributed Graphs", KDD, 2012. LDG and
#     other one-pass heuristics for edge-cuts.
# - **Synchronous versus asynchronous supersteps.** The barrier makes every superstep as slow as its
#   slowest rank. Asynchronous engines converge in fewer messages for some algorithms and diverge or
#   lose determinism for others; when asynchrony pays is still argued case by case.
#   - Malewicz et al., "Pregel: A System for Large-Scale Graph Processing", SIGMOD, 2010. Supersteps,
#     combiners, vote to halt and checkpoint-based recovery.
#   - Shao et al., "Distributed Graph Neural Network Training: A Survey", ACM Computing Surveys, 2024.
#     Classifies distributed GNN systems by partitioning, batch generation, execution model and synchronous
#     or asynchronous communication protocol.
# - **Scaling GNN training.** Neighbour explosion forces sampling, and sampling over a partitioned graph
#   turns every mini-batch into remote feature fetches. Bounding the variance of sampled estimators while
#   cutting that traffic (caching, partition-aware sampling, historical embeddings) is an active area.
#   - Hamilton, Ying and Leskovec, "Inductive Representation Learning on Large Graphs", NeurIPS, 2017.
#     GraphSAGE: fixed fan-out sampling and aggregators.
#   - Zheng et al., "DistDGL: Distributed Graph Neural Network Training for Billion-Scale Graphs",
#     IA3 workshop at SC, 2020. METIS partitions, distributed samplers and a feature store.
#   - Liu et al., "BGL: GPU-Efficient GNN Training by Optimizing Graph Data I/O and Preprocessing", NSDI,
#     2023. Caches hot features on the GPU, orders sampling to raise the hit rate, and partitions the graph
#     to cut cross-partition sampling traffic.
# - **Full-graph training without sampling.** Some systems skip sampling and pipeline the exchange of
#   boundary-vertex embeddings between partitions; how stale those embeddings may be without hurting
#   accuracy is an open question, much like the staleness of Chapter 10.
#   - Wan, Li, Wolfe, Kyrillidis, Kim and Lin, "PipeGCN: Efficient Full-Graph Training of Graph
#     Convolutional Networks with Pipelined Feature Communication", ICLR, 2022. Stale boundary features
#     hide the exchange behind compute, with a convergence bound.
#   - Wan, Zhao and Wu, "Adaptive Message Quantization and Parallelization for Distributed Full-graph GNN
#     Training", MLSys, 2023. AdaQP quantizes boundary embeddings and their gradients to a bit width chosen
#     per message, and overlaps their exchange with the computation on interior vertices.
#
# ## What's next
#
# Chapter 14 (Federated and decentralized learning) keeps a graph but changes what lives on it: the
# vertices are clients holding private data, the edges are who may talk to whom, and gossip averaging
# over that graph converges at a rate set by its spectral gap.
