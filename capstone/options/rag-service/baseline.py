"""Single-machine baseline of the RAG service: one process embeds every passage, builds one FAISS
index and serves every query batch (T_1).

    python baseline.py --countries 300 --distractors 4000 --queries 1500
Tracked in MLflow and tagged as the baseline; logs build and serve time, queries/s, hit@k and accuracy.
"""
from __future__ import annotations

import argparse
import time

import problem


def serve_single(args):
    """Build the whole index, then answer every batch: returns (D, I, build s, serve s, corpus)."""
    import numpy as np

    t0 = time.perf_counter()
    corpus = problem.questions_corpus(args)
    N = problem.n_passages(args, corpus)
    index = problem.build_index(problem.embed(problem.passages(args, corpus, 0, N), args.dim), args)
    t1 = time.perf_counter()
    texts = problem.question_texts(args, corpus)
    Ds, Is = [], []
    for s, e in problem.query_batches(len(texts), args.qbatch):
        D, I = problem.merge([problem.search(index, problem.embed(texts[s:e], args.dim), args.k, 0)], args.k)
        Ds.append(D)
        Is.append(I)
    return np.concatenate(Ds), np.concatenate(Is), t1 - t0, time.perf_counter() - t1, corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy and FAISS load

    import faiss

    from scaleoutai import capstone

    faiss.omp_set_num_threads(args.threads)
    problem.warm_up(args)  # imports and first calls, outside the timed region
    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem="rag-scatter-gather", baseline=True) as run:
        D, I, build, serve, corpus = serve_single(args)
        run.log_items(args.queries)
    q = problem.quality(corpus, I, args)
    run.log_metrics({"build_seconds": build, "serve_seconds": serve, "serve_qps": args.queries / serve, **q})
    print(f"baseline: {problem.n_passages(args, corpus)} passages, {args.queries} queries: build {build:.2f} s, "
          f"serve {args.queries / serve:.0f} queries/s, hit@{args.k} {q['hit_at_k']:.3f}, "
          f"answer accuracy {q['answer_accuracy']:.3f}")


if __name__ == "__main__":
    main()
