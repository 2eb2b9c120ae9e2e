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
# # Appendix D. Datasets and benchmarks
#
# No chapter of this course downloads anything when it runs. Its text, graphs, ratings, vectors,
# event streams and job traces come from generators in one package, `scaleoutai.datasets`, and each
# generator is a pure function of its arguments: the same seed gives the same bytes on a laptop, on
# the simulator's 64 ranks and on a cluster node. The few things that cannot be generated (the
# weights of a sentence encoder, the rules of a poker game) ship inside pinned packages. This
# appendix is the inventory. It renders the catalogue from `scaleoutai/datasets/catalogue.py`
# (never typed here), draws each dataset at its smoke size, checks that the catalogue and the
# chapters agree, shows that a shard regenerated on rank $r$ equals the slice of the whole, and
# ends with the benchmark scripts and how to run them.
#
# **Prerequisites:** Chapter 1's vocabulary (workers, shards) and Chapter 4's communicator for the
# sharding section; nothing else. Read it as a reference: come here when a chapter says
# "generated from a seed" and you want to know what exactly, how large, and who else uses it.
# Background: NumPy's `default_rng`, and reading a log-log plot.

# %% tags=["parameters"]
SEED = 0
MEASURE_FULL = True  # smoke: False
SHARD_N = 20_000  # smoke: 2_000
SHARD_KS = [1, 2, 3, 5, 8, 16, 64]  # smoke: [1, 2, 3, 5, 8]
TIMING_REPEATS = 3  # smoke: 1

# %% [markdown]
# `MEASURE_FULL` also calls every loader at each chapter's full size to count its bytes (the smoke
# sizes are always measured); `SHARD_N` is the number of rows in the sharding experiment of Section 3
# and `SHARD_KS` the world sizes $K$ it runs at (5 is not a power of two, 64 leaves some ranks small);
# `TIMING_REPEATS` is how often Section 7 times each loader (the median is kept).
#
# ## 1. Motivation: why every dataset is a function of a seed
#
# A downloaded dataset ties a course to a URL that may move, to a network that a cluster's compute
# nodes often lack, and to one size. A generator avoids all three, and it gives distributed
# computing something more: rank $r$ of $K$ can make its own shard without anyone sending it. The
# price is realism, so every generator in this course keeps the one property its chapter studies:
# Zipf word frequencies make reducers skewed (Chapter 6), a power-law degree distribution makes
# graph partitions unbalanced (Chapter 13), heavy-tailed service times make tail latency (Chapter 23),
# jobs that overestimate their runtime make backfilling worthwhile (Chapter 33).
#
# The first cell loads the catalogue and counts what the course uses.

# %%
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from scaleoutai import cluster, collectives, datasets
from scaleoutai.datasets import audit, catalogue
from scaleoutai.notebooks import find_repo_root
from scaleoutai.notebooks.sources import is_notebook_source

ROOT = find_repo_root()
SOURCES = [p for p in sorted(ROOT.glob("chapters/*/*.py")) if is_notebook_source(p, ROOT)]
CAT = catalogue.CATALOGUE
chapters_using = sorted({u.chapter for d in CAT for u in d.uses}, key=lambda c: (isinstance(c, str), c))
print(f"{len(CAT)} datasets, {len(catalogue.INSTANCES)} problem instances, {len(catalogue.SHIPPED)} shipped "
      f"assets, {len(catalogue.BENCHMARKS)} benchmark scripts; {len(chapters_using)} chapters load generated data")
assert {d.loader for d in CAT} | catalogue.HELPERS == set(datasets.__all__)

# %% [markdown]
# ## 2. Core concepts: the catalogue (D.1)
#
# A **loader** is a function of `scaleoutai.datasets` that returns data; its **seed** argument picks
# one of NumPy's PCG64 streams (`np.random.default_rng(seed)`), and nothing else in it is random. A
# **use** is one chapter's call: the arguments at its smoke size (what CI runs) and at its full size
# (what the chapter teaches with). **Rows x columns** describe the first thing the loader returns: an
# array's first axis by the rest, a record of aligned columns by its field count, a list by its widest
# item (words per line, tokens per record, neighbours per node). Bytes are counted by
# `catalogue.measure` on the real output, never written down. A loader reached "via" a part
# function is one the chapter calls indirectly (the gossip topologies of Chapter 14).
#
# The table below is rendered from `CATALOGUE`.

# %%
def fmt_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000


def args(kw):
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())


rows = ["| loader | what | seed | chapter | smoke: rows x cols, bytes | full: rows x cols, bytes | smoke arguments |",
        "|---|---|---|---|---|---|---|"]
SMOKE_BYTES, FULL_BYTES = {}, {}
for d in CAT:
    for u in d.uses or [None]:
        if u is None:
            rows.append(f"| `{d.loader}` | {d.what} | `{d.seed}` | none (tests, part helpers) | | | |")
            continue
        r, c, b = catalogue.measure(catalogue.LOADERS[d.loader](**u.smoke))
        assert (r, c) == u.smoke_shape, (d.loader, u.chapter)
        SMOKE_BYTES[d.loader, u.chapter] = b
        full = f"{u.full_shape[0]:,} x {u.full_shape[1]:,}"
        if MEASURE_FULL:
            rf, cf, FULL_BYTES[d.loader, u.chapter] = catalogue.measure(catalogue.LOADERS[d.loader](**u.full))
            assert (rf, cf) == u.full_shape
            full += f", {fmt_bytes(FULL_BYTES[d.loader, u.chapter])}"
        via = f" via `{u.via.rsplit('.', 2)[-2]}.{u.via.rsplit('.', 1)[-1]}`" if u.via else ""
        rows.append(f"| `{d.loader}` | {d.what} | `{d.seed}` | {u.chapter}{via} | {r:,} x {c:,}, {fmt_bytes(b)} | "
                    f"{full} | {args(u.smoke)} |")
display(Markdown("\n".join(rows)))
print(f"smoke sizes: {fmt_bytes(sum(SMOKE_BYTES.values()))} over {len(SMOKE_BYTES)} uses"
      + (f"; full sizes: {fmt_bytes(sum(FULL_BYTES.values()))}" if MEASURE_FULL else ""))

# %% [markdown]
# Games, markets, puzzles, flocks and plans are not datasets: they are the *problem* a chapter
# solves, built by the part that solves it, and most are seeded too (D.2). Three assets cannot be
# generated and come inside packages pinned in `environments/constraints.txt` (D.3); the course
# never fetches them at run time.

# %%
inst = ["| constructor | what | seeded | chapters |", "|---|---|---|---|"]
inst += [f"| `{i.constructor.replace('scaleoutai.', '')}` | {i.what} | {'yes' if i.seeded else 'no'} | "
         f"{', '.join(map(str, i.chapters))} |" for i in catalogue.INSTANCES]
ship = ["| asset | package (pinned) | imported as | what | chapters |", "|---|---|---|---|---|"]
ship += [f"| {s.name} | `{s.package}=={s.version}` | `{s.module}` | {s.what} | {', '.join(map(str, s.chapters))} |"
         for s in catalogue.SHIPPED]
display(Markdown("**D.2 Problem instances**\n\n" + "\n".join(inst)))
display(Markdown("**D.3 Shipped assets**\n\n" + "\n".join(ship)))

# %% [markdown]
# ## 3. The distribution pattern: regenerate the shard, or scatter it
#
# There are two ways to give rank $r$ of $K$ its rows. **Scatter:** rank 0 generates all $n$ rows and
# sends block $r$ (`collectives.scatter`); the network carries $n (K-1)/K$ rows. **Regenerate:** every
# rank calls the loader with the same seed and keeps block $r$ (`collectives.block_range`); nothing is
# sent, and every rank spends the time of the whole generation. Both must give the same bytes, and
# the cell checks it on the simulator for every $K$ in `SHARD_KS`: the shards gathered back in rank
# order equal the whole, byte for byte, and equal what scatter delivers. Purity is what makes the
# second way correct; Section 6 shows the usual way it breaks.

# %%
def shard_by_regenerating(comm, n, seed):
    X, y = datasets.classification(n, 8, classes=3, seed=seed)
    lo, hi = collectives.block_range(n, comm.size, comm.rank)
    return collectives.gather(comm, np.column_stack([X[lo:hi], y[lo:hi]]), root=0)


def shard_by_scatter(comm, n, seed):
    whole = np.column_stack(datasets.classification(n, 8, classes=3, seed=seed)) if comm.rank == 0 else None
    return collectives.gather(comm, collectives.scatter(comm, whole, root=0), root=0)


whole = np.column_stack(datasets.classification(SHARD_N, 8, classes=3, seed=SEED))
sent = {}
for K in SHARD_KS:
    regen = cluster.run(shard_by_regenerating, K, args=(SHARD_N, SEED), timeout=120)
    scat = cluster.run(shard_by_scatter, K, args=(SHARD_N, SEED), timeout=120)
    assert catalogue.digest(regen.values[0]) == catalogue.digest(whole) == catalogue.digest(scat.values[0])
    sent[K] = (sum(s.bytes_sent for s in regen.stats), sum(s.bytes_sent for s in scat.stats))
    print(f"K = {K:2d}: regenerated shards == scattered shards == the whole ({SHARD_N:,} rows); bytes sent "
          f"(gather included) regenerate {sent[K][0]:,}, scatter {sent[K][1]:,}")

# %% [markdown]
# ### Each dataset at its smoke size
#
# Numbers in a table hide the property each generator exists for, so here they are drawn, each from
# `catalogue.load(loader)` at the first chapter's smoke size. Top row: the power-law graph's in-degrees
# have a heavy tail (most vertices below ten, a few hubs in the hundreds: the imbalance of Chapter 13);
# word counts of the Zipf text fall as rank^(-1.1) (Chapter 6); the queries come from the same
# overlapping mixture as the base vectors, so no cluster is trivially separable (Chapter 25, first two
# of the coordinates). Bottom row: job arrivals of the scheduling trace
# (Chapter 33) and of the LLM request trace (Chapter 24); event time against arrival order in the
# stream of Chapter 9, where the points below the diagonal band are the late events.

# %%
edges = catalogue.load("power_law_graph")
deg = np.bincount(edges[:, 1], minlength=int(edges.max()) + 1)
values, counts = np.unique(deg[deg > 0], return_counts=True)
lines = catalogue.load("zipf_lines")
_, freq = np.unique(" ".join(lines).split(), return_counts=True)
freq = np.sort(freq)[::-1]
base, queries = catalogue.load("vector_data")
jobs = catalogue.load("job_trace")
requests = catalogue.load("request_trace")
events = catalogue.load("generate_events")

fig, ax = plt.subplots(2, 3, figsize=(14, 7.5))
ax[0, 0].loglog(values, counts, "o", ms=3)
ax[0, 0].set(xlabel="in-degree", ylabel="vertices", title=f"power_law_graph: {len(edges):,} edges")
ax[0, 1].loglog(np.arange(1, freq.size + 1), freq, ".", ms=3, label="measured")
ax[0, 1].loglog(np.arange(1, freq.size + 1), freq[0] * np.arange(1, freq.size + 1) ** -1.1, "--", label="rank^-1.1")
ax[0, 1].set(xlabel="word rank", ylabel="count", title=f"zipf_lines: {len(lines):,} lines")
ax[0, 1].legend()
ax[0, 2].scatter(base[:, 0], base[:, 1], s=2, alpha=0.3, label="base")
ax[0, 2].scatter(queries[:, 0], queries[:, 1], s=12, c="red", label="queries")
ax[0, 2].set(xlabel="x0", ylabel="x1", title=f"vector_data: {base.shape[0]:,} x {base.shape[1]}")
ax[0, 2].legend()
ax[1, 0].plot(jobs.submit / 3600, np.arange(len(jobs)), lw=1)
ax[1, 0].set(xlabel="submit time (h)", ylabel="jobs arrived", title=f"job_trace: {len(jobs):,} jobs")
ax[1, 1].step([r.arrival for r in requests], np.arange(1, len(requests) + 1), where="post")
ax[1, 1].set(xlabel="iteration", ylabel="requests arrived", title=f"request_trace: {len(requests)} requests")
ax[1, 2].plot(np.arange(len(events)), events.time / 1000, ",", alpha=0.5)
ax[1, 2].set(xlabel="arrival order", ylabel="event time (s)", title=f"generate_events: {len(events):,} events")
plt.tight_layout()
plt.show()
head = np.polyfit(np.log(np.arange(1, 51)), np.log(freq[:50]), 1)[0]
assert -1.4 < head < -0.8 and deg.max() > 20 * max(1.0, np.median(deg[deg > 0]))
print(f"Zipf head slope {head:.2f} (generator exponent 1.1); largest in-degree {deg.max()} vs median "
      f"{np.median(deg[deg > 0]):.0f}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation: the catalogue checker
#
# A catalogue rots the moment a chapter starts calling a loader it does not list, or stops calling one
# it does. So the catalogue is checked against the chapters in both directions, statically, without
# running them. `references` walks a chapter's syntax tree, binds every imported name to a dotted
# path, and resolves every `name.attr.attr` chain through those bindings: `sc.graph` in Chapter 31
# becomes `scaleoutai.agents.swarm_consensus.graph`. `check_chapter` then asks three questions of the
# resolved paths: (a) is any of them a data-loading API outside this package (`sklearn.datasets`,
# Hugging Face `datasets`, `urllib`, `fetch_*`, a reader given a URL)? (b) is every loader it calls
# catalogued for this chapter? (c) does it still call a generator through the part it moved out of?
# `check_catalogue` adds the reverse direction.

# %%
from scaleoutai.notebooks import show

show(audit.references)
show(audit.check_chapter)

# %% [markdown]
# On the course the checker finds nothing: every chapter, the case studies of Part VIII included (their
# loaders live in `datasets.text`, `clinical`, `recsys` and `arenas`), loads its data through the
# catalogued loaders, and `tests/test_datasets_catalogue.py` holds every chapter to it with no
# exception. The dotted paths it resolves are the ones we expect: Chapter 13 reaches
# `power_law_graph` and `community_graph`, Chapter 31 reaches the communication graphs only through
# `swarm_consensus.graph`.

# %%
problems = audit.check_catalogue(SOURCES)
assert problems == [], problems
by_id = {audit.chapter_id(p): p for p in SOURCES}
assert audit.uses_of(by_id[13])[0] == {"power_law_graph", "community_graph"}
assert "scaleoutai.agents.swarm_consensus.graph" in audit.uses_of(by_id[31])[1]
assert audit.uses_of(by_id[31])[0] == set()
print(f"{len(SOURCES)} chapter sources checked: no problems")

# %% [markdown]
# ## 5. The same task with production libraries: NetworkX, SciPy and Parquet
#
# Three libraries confirm what the generators claim. **NetworkX** builds the textbook graphs; our
# neighbour lists must be exactly its cycle, periodic grid and complete graph, and our random graphs
# must be connected and regular where they say so. **SciPy** tests the distributions: the gaps of
# `poisson_arrivals` are exponential (Kolmogorov-Smirnov), lognormal service times have the stated
# mean, and the drifting regression's true weights keep their norm as they rotate. **Apache Arrow**
# writes a dataset to Parquet and reads it back; the bytes agree, which is what a course that shipped
# files would rely on instead of a seed.

# %%
import tempfile

import networkx as nx
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats


def as_nx(nb):
    g = nx.Graph()
    g.add_nodes_from(range(len(nb)))
    g.add_edges_from((i, j) for i, row in enumerate(nb) for j in row)
    return g


for n in (3, 5, 16):
    assert nx.utils.graphs_equal(as_nx(datasets.ring_graph(n)), nx.cycle_graph(n))
    assert nx.utils.graphs_equal(as_nx(datasets.complete_graph(n)), nx.complete_graph(n))
grid = nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 6, periodic=True), ordering="sorted")
assert nx.utils.graphs_equal(as_nx(datasets.grid_graph(4, 6)), grid)
reg = as_nx(datasets.random_regular_graph(30, 3, seed=SEED))
assert nx.is_connected(reg) and set(dict(reg.degree).values()) == {3}
assert nx.is_connected(as_nx(catalogue.load("random_geometric_graph")))

arrivals = catalogue.load("poisson_arrivals")
rate = catalogue.entry("poisson_arrivals").uses[0].smoke["rate"]
ks = stats.kstest(np.diff(arrivals), "expon", args=(0, 1 / rate))
heavy = datasets.service_times(200_000, 1.0, dist="lognormal", sigma=1.5, seed=SEED)
X_d, y_d, W_d = catalogue.load("drifting_regression")
assert ks.pvalue > 1e-3 and abs(heavy.mean() - 1.0) < 0.05
assert np.allclose(np.linalg.norm(W_d, axis=1), np.linalg.norm(W_d[0]))
print(f"NetworkX: ring, complete and torus equal; KS p-value of the arrival gaps {ks.pvalue:.3f}; "
      f"lognormal mean {heavy.mean():.3f} (stated 1.0), p99 / mean {np.quantile(heavy, 0.99) / heavy.mean():.1f}")

jt = catalogue.load("job_trace")
table = pa.table({f: getattr(jt, f) for f in ("submit", "size", "runtime", "estimate", "user", "gpus")})
with tempfile.TemporaryDirectory() as tmp:
    pq.write_table(table, Path(tmp) / "jobs.parquet")
    back = pq.read_table(Path(tmp) / "jobs.parquet")
    on_disk = (Path(tmp) / "jobs.parquet").stat().st_size
again = datasets.JobTrace(*(back[f].to_numpy() for f in table.column_names))
assert catalogue.digest(again) == catalogue.digest(jt)
print(f"Parquet round trip of job_trace: equal; {on_disk:,} bytes on disk for {catalogue.measure(jt)[2]:,} in memory")

# %% [markdown]
# ## 6. Failure modes: hidden state, per-rank seeds, and a crash
#
# **Hidden state.** A generator that draws from NumPy's global generator (`np.random.rand`) returns
# different data on every call, so two ranks that "regenerate" disagree; the digest catches it at
# once. **Per-rank seeds.** Seeding rank $r$ with `seed + r` is the commonest sharding bug: each rank
# gets valid-looking rows, but together they are not the dataset; the gathered shards differ from
# the whole. **A crash.** Regeneration needs no checkpoint of the data: below, rank 1 crashes on its
# first send (`cluster.Faults`), the run fails loudly, and the rerun regenerates exactly the shards of
# a clean run. **A planted chapter** that imports `sklearn.datasets`, calls a moved generator through
# its old part, and reads a CSV from a URL is reported line by line.

# %%
def impure(n):
    return np.random.rand(n, 3)  # the global generator: state outside the arguments


assert catalogue.digest(impure(5)) != catalogue.digest(impure(5))


def shard_with_rank_seed(comm, n, seed):
    X, y = datasets.classification(n, 8, classes=3, seed=seed + comm.rank)  # the bug
    lo, hi = collectives.block_range(n, comm.size, comm.rank)
    return collectives.gather(comm, np.column_stack([X[lo:hi], y[lo:hi]]), root=0)


wrong = cluster.run(shard_with_rank_seed, 4, args=(SHARD_N, SEED), timeout=120).values[0]
assert wrong.shape == whole.shape and not np.array_equal(wrong, whole)
print(f"seed + rank: {np.mean(np.any(wrong != whole, axis=1)):.0%} of the rows differ from the dataset")

try:
    cluster.run(shard_by_regenerating, 4, args=(SHARD_N, SEED), faults=cluster.Faults(crash={1: 0}), timeout=120)
    raise AssertionError("the crash went unnoticed")
except cluster.RankError as err:
    print("crashed run:", str(err).splitlines()[0][:110])
rerun = cluster.run(shard_by_regenerating, 4, args=(SHARD_N, SEED), timeout=120).values[0]
assert catalogue.digest(rerun) == catalogue.digest(whole)
print("rerun after the crash: the same bytes as a clean run, with no data checkpoint")

with tempfile.TemporaryDirectory() as tmp:
    bad = Path(tmp) / "chapters" / "99-planted" / "99-planted.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("# %%\nimport pandas as pd\nfrom sklearn.datasets import make_blobs\n"
                   "from scaleoutai.serving import llm\nT = llm.make_trace(4, 0.5)\n"
                   "df = pd.read_csv('https://example.org/x.csv')\n")
    found = audit.check_chapter(bad)
for line in found:
    print("  ", line[:130])
assert len(found) == 3 and "sklearn.datasets" in found[0] and "request_trace" in found[1] and "URL" in found[2]

# %% [markdown]
# ## 7. Evaluation: what generating costs, and the benchmarks (D.4)
#
# Regenerating trades network bytes for compute, so it is worth knowing what the compute is. The
# cell times every loader at its first chapter's full size (smoke size in CI) and reports megabytes
# per second. The vectorised ones produce tens to hundreds of MB/s, far above the rate at which the
# chapters consume data; those with a Python loop per row (the corpus, text and request builders, the
# community graph's coin flips, the Markov link) manage one to a few MB/s, and still finish in well
# under a second at the course's sizes.

# %%
size = "full" if MEASURE_FULL else "smoke"
rate_mb = {}
for d in CAT:
    if not d.uses:
        continue
    times = []
    for _ in range(TIMING_REPEATS):
        t0 = time.perf_counter()
        out = catalogue.load(d.loader, size)
        times.append(time.perf_counter() - t0)
    rate_mb[d.loader] = catalogue.measure(out)[2] / max(np.median(times), 1e-9) / 1e6
order = sorted(rate_mb, key=rate_mb.get)
plt.figure(figsize=(9, 6))
plt.barh(order, [rate_mb[k] for k in order])
plt.xscale("log")
plt.xlabel(f"MB generated per second ({size} size, median of {TIMING_REPEATS}, 1 core)")
plt.title("Cost of regenerating each dataset")
plt.tight_layout()
plt.show()
assert all(v > 0 for v in rate_mb.values())
print("slowest:", ", ".join(f"{k} {rate_mb[k]:.1f} MB/s" for k in order[:3]))

# %% [markdown]
# The benchmark scripts in `benchmarks/` measure the figures of the README's Performance table. The
# table is rendered from `BENCHMARKS`; the datasets column is what the checker of Section 4 finds in
# each script, so it cannot drift either. Run one with `python benchmarks/<script>`, add `--quick`
# where the table says so for a short run, or run them all with `make bench`; each prints a
# `machine()` line first, so a figure always carries the machine it was measured on.

# %%
scripts = audit.benchmark_scripts(ROOT)
assert set(scripts) == {b.script for b in catalogue.BENCHMARKS}
bench = ["| script | measures | chapters | datasets it generates | run |", "|---|---|---|---|---|"]
for b in catalogue.BENCHMARKS:
    used = sorted(audit.uses_of(scripts[b.script])[0] - catalogue.HELPERS)
    run = f"`python benchmarks/{b.script}" + (" --quick`" if b.quick else "`")
    bench.append(f"| `{b.script}` | {b.measures} | {', '.join(map(str, b.chapters)) or 'grading'} | "
                 f"{', '.join(used) or '-'} | {run} |")
display(Markdown("\n".join(bench)))

# %% [markdown]
# ## 8. Exercises
#
# 1. Add a loader for a dataset your project needs (say, sessions of clicks with a heavy-tailed
#    length). Write it as a pure function of a seed in a new `datasets` module, add its `Dataset`
#    entry, call it from a chapter, and watch `tests/test_datasets_catalogue.py` fail until the entry
#    lists that chapter with the right shapes.
# 2. Section 3 regenerates the whole dataset on every rank. Rewrite `low_rank_ratings` so rank $r$
#    can generate only its rows (hint: derive one generator per block of 1,024 rows from
#    `default_rng([seed, block])`, as `paramserver.init_rows` does). What must stay global?
# 3. Measure, on the simulator with `cluster.Network(alpha=1e-5, beta=1e-9)`, when scatter beats
#    regeneration: at what rows per second of generation does sending become cheaper?
# 4. The Zipf exponent of `zipf_lines` is 1.1. Fit the exponent of the power-law graph's in-degree
#    with a maximum-likelihood estimator and compare it with the `exponent` argument. Why is the
#    least-squares slope of a log-log histogram biased?
# 5. NumPy promises that `default_rng(seed)` gives the same stream across versions only for some
#    methods. Which of our loaders use a method without that promise, and how would you pin them?
#
# ## 9. Research directions
#
# - **Synthetic data that keeps what matters.** Which statistics of a real dataset must a generator
#   keep for a systems result to transfer (skew, degree tails, burstiness), and how to test that it
#   did, is open.
#   - Jordon, Szpruch, Houssiau, Bottarelli, Cherubin, Maple, Cohen and Weller, "Synthetic Data:
#     what, why and how?", Royal Society report, 2022. Uses, limits and evaluation of synthetic data.
#   - Chung and Lu, "Connected Components in Random Graphs with Given Expected Degree Sequences",
#     Annals of Combinatorics, 2002. The model behind `power_law_graph`.
#   - Shumailov, Shumaylov, Zhao, Papernot, Anderson and Gal, "AI models collapse when trained on
#     recursively generated data", Nature, 2024. Models trained on earlier models' output lose the tails
#     of the original distribution first, a warning for any generator fitted to generated data.
# - **Realistic graph and workload generators at scale.** Generators that match many properties at
#   once and run distributed, each rank producing its own part.
#   - Leskovec, Chakrabarti, Kleinberg, Faloutsos and Ghahramani, "Kronecker Graphs: An Approach to
#     Modeling Networks", Journal of Machine Learning Research, 2010. Recursive generators that fit
#     real networks.
#   - Lublin and Feitelson, "The Workload on Parallel Supercomputers: Modeling the Characteristics of
#     Rigid Jobs", Journal of Parallel and Distributed Computing, 2003. The model behind `job_trace`.
#   - Hu et al., "Characterization of Large Language Model Development in the Datacenter", NSDI, 2024. A
#     six-month GPU-cluster trace of LLM development whose job mix and failures a modern `job_trace`
#     would have to reproduce.
# - **Random numbers that shard.** Counter-based generators make element $i$ of a stream computable
#   without its predecessors, so any rank can make any rows; combining that with arbitrary data
#   layouts is still engineering-heavy.
#   - Salmon, Moraes, Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC, 2011. Philox
#     and Threefry, the counter-based generators NumPy and JAX use.
# - **Benchmarks that stay honest.** Fixed rules, reference implementations and reported hardware
#   make results comparable; keeping them so as systems change is an open practice.
#   - Mattson et al., "MLPerf Training Benchmark", MLSys, 2020. Time-to-quality rules for training.
#   - Gebru, Morgenstern, Vecchione, Wortman Vaughan, Wallach, Daume III and Crawford, "Datasheets for
#     Datasets", Communications of the ACM, 2021. What a dataset's documentation should state.
#   - Liang et al., "Holistic Evaluation of Language Models", TMLR, 2023. Many scenarios and several
#     metrics beyond accuracy, run for all models under the same conditions, with every prompt released.
#   - Sainz, Campos, García-Ferrero, Etxaniz, Lopez de Lacalle and Agirre, "NLP Evaluation in trouble: On
#     the Need to Measure LLM Data Contamination for each Benchmark", Findings of EMNLP, 2023. When test
#     sets leak into training data, scores overstate ability; benchmarks need contamination checks.
#
# ## What's next
#
# Every chapter from Chapter 6 on cites its loader by name; this appendix is where to look one up.
# The Chapter 41 capstone asks you to name your data the same way (loader, seed, size) in your
# report. Appendix C holds the notation, and Appendix A the mathematics behind the distributions
# drawn here.
