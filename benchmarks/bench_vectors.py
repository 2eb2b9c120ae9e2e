"""Vector search (Chapter 25): our IVF, HNSW and PQ beside FAISS's, recall@10 and queries/s in one run.

Data: a mixture of 64 overlapping Gaussians (``datasets.vector_data``), base and queries from the same
mixture. Ground truth: our exact search (checked equal to ``faiss.IndexFlatL2``). IVF: our k-means
centroids loaded into FAISS's quantizer, so both scan the same lists at each nprobe. HNSW: M = 16,
efConstruction = 40 on both sides, each with its own random levels (ours is pure Python, so it indexes
``--hnsw-base`` vectors, and FAISS indexes the same ones). PQ: m one-byte codes, each side trains its
own sub-centroids. Queries/s: best of ``--repeats`` runs over all queries, one thread for FAISS (our
code is single-threaded NumPy).
Usage: python benchmarks/bench_vectors.py [--base 20000] [--dim 64] [--queries 500] [--hnsw-base 20000] [--quick]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine
from scaleoutai import datasets
from scaleoutai.serving import hnsw as H, ivf, vectors as V


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--nlist", type=int, default=128)
    ap.add_argument("--hnsw-base", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="4000 vectors, d = 32, 100 queries: checks the script runs")
    a = ap.parse_args()
    if a.quick:
        a.base, a.dim, a.queries, a.nlist, a.hnsw_base, a.repeats = 4_000, 32, 100, 32, 2_000, 1
    import faiss

    faiss.omp_set_num_threads(1)
    k = 10
    base, queries = datasets.vector_data(a.base, a.queries, a.dim, clusters=64, seed=0)
    t0 = time.perf_counter()
    D, I = V.knn(queries, base, k)
    t_exact = time.perf_counter() - t0
    flat = faiss.IndexFlatL2(a.dim)
    flat.add(base)
    fqps_flat, (_, If) = V.queries_per_second(lambda q: flat.search(q, k), queries, a.repeats)
    assert np.array_equal(If, I)
    print(f"# vector search, n = {a.base}, d = {a.dim}, {a.queries} queries, recall@{k}; faiss {faiss.__version__} "
          f"(1 thread); {machine()}")
    print(f"{'index':>12s} {'param':>6s} {'ours recall':>11s} {'ours q/s':>9s} {'faiss recall':>12s} "
          f"{'faiss q/s':>10s} {'faiss/ours':>10s}")
    print(f"{'flat':>12s} {'-':>6s} {1.0:11.3f} {a.queries / t_exact:9.0f} {1.0:12.3f} {fqps_flat:10.0f} "
          f"{fqps_flat * t_exact / a.queries:10.0f}")

    t0 = time.perf_counter()
    index = ivf.ivf_build(base, a.nlist, iters=10, seed=0)
    t_ivf = time.perf_counter() - t0
    quantizer = faiss.IndexFlatL2(a.dim)
    quantizer.add(index.centroids)
    fivf = faiss.IndexIVFFlat(quantizer, a.dim, a.nlist)
    fivf.add(base)
    for nprobe in (1, 2, 4, 8, 16, 32):
        qps, (_, Io) = V.queries_per_second(lambda q: ivf.ivf_search(index, q, k, nprobe), queries, a.repeats)
        fivf.nprobe = nprobe
        fqps, (_, Ifa) = V.queries_per_second(lambda q: fivf.search(q, k), queries, a.repeats)
        ro, rf = V.recall_at_k(Io, I), V.recall_at_k(Ifa, I)
        print(f"{'IVF-flat':>12s} {nprobe:6d} {ro:11.3f} {qps:9.0f} {rf:12.3f} {fqps:10.0f} {fqps / qps:10.1f}")

    hb = base[: a.hnsw_base]
    Ih = V.knn(queries, hb, k)[1]
    t0 = time.perf_counter()
    g = H.hnsw_build(hb, M=16, ef_construction=40, seed=0)
    t_hnsw = time.perf_counter() - t0
    fh = faiss.IndexHNSWFlat(a.dim, 16)
    fh.hnsw.efConstruction = 40
    t0 = time.perf_counter()
    fh.add(hb)
    t_fhnsw = time.perf_counter() - t0
    for ef in (10, 16, 32, 64, 128):
        qps, (_, Io) = V.queries_per_second(lambda q: H.hnsw_search(g, q, k, ef), queries, 1)
        fh.hnsw.efSearch = ef
        fqps, (_, Ifa) = V.queries_per_second(lambda q: fh.search(q, k), queries, a.repeats)
        ro, rf = V.recall_at_k(Io, Ih), V.recall_at_k(Ifa, Ih)
        print(f"{'HNSW M=16':>12s} {ef:6d} {ro:11.3f} {qps:9.0f} {rf:12.3f} {fqps:10.0f} {fqps / qps:10.1f}")

    for m in [mm for mm in (4, 8, 16, 32) if a.dim % mm == 0]:
        pq = ivf.pq_train(base, m, nbits=8, iters=8, seed=0)
        codes = ivf.pq_encode(pq, base)
        qps, (_, Io) = V.queries_per_second(lambda q: ivf.pq_search(pq, codes, q, k), queries, 1)
        fpq = faiss.IndexPQ(a.dim, m, 8)
        fpq.pq.cp.min_points_per_centroid = 1
        fpq.train(base)
        fpq.add(base)
        fqps, (_, Ifa) = V.queries_per_second(lambda q: fpq.search(q, k), queries, a.repeats)
        ro, rf = V.recall_at_k(Io, I), V.recall_at_k(Ifa, I)
        print(f"{'PQ':>12s} {m:6d} {ro:11.3f} {qps:9.0f} {rf:12.3f} {fqps:10.0f} {fqps / qps:10.1f}")
    print(f"# build: ours IVF {t_ivf:.1f} s (k-means, 10 iterations), ours HNSW {t_hnsw:.1f} s over {a.hnsw_base} "
          f"vectors, faiss HNSW {t_fhnsw:.2f} s")


if __name__ == "__main__":
    main()
