"""IVF-PQ: an inverted file whose lists hold product-quantized residuals, exact re-ranking and
filtered search (Chapter 25, Sections 4-5 and 7).

- Build: k-means with ``nlist`` centroids (``ivf.kmeans``) files each vector x in the list c of its
  nearest centroid mu_c; PQ (``ivf.pq_train``: m sub-quantizers of 2^nbits centroids) is trained on
  the residuals r = x - mu_c, and each vector is stored as the m codes of its residual. A residual is
  much smaller than the vector, so the same m bytes quantize it more finely (Jegou et al. 2011, as in
  FAISS's ``IndexIVFPQ`` with ``by_residual``).
- Search by asymmetric distance computation (ADC): for a query q and a probed list c, the table
  T_c[j, b] = ||(q - mu_c)_j - C_j[b]||^2 (m x 2^nbits entries) gives every code of the list its
  distance ||q - (mu_c + r_hat)||^2 = sum_j T_c[j, code_j] with m look-ups; ``naive_ivfpq_search``
  decodes mu_c + r_hat and measures it directly (the same numbers up to rounding, tested).
- ``rerank``: the ADC top-k' candidates re-scored with their full float32 vectors (exact distances),
  keeping the best k; recall rises towards IVF's own recall at the same nprobe.
- Filtered search with a metadata predicate given as a boolean mask over ids: **pre-filter** skips
  the ids that fail the predicate while scanning (always k answers when enough pass); **post-filter**
  searches unfiltered for k' answers and drops those that fail, so with a selective predicate
  (a share f passes) about f * k' survive and recall falls. ``reference_filtered_knn`` is the exact
  answer: brute force over the ids that pass.

Metric: squared L2, order rule of ``vectors`` (smaller distance, then smaller id; short rows padded
with id -1 and +inf).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ivf import ProductQuantizer, ivf_build, pq_decode, pq_encode, pq_train
from .vectors import _check, distances, knn, select_topk


@dataclass
class IVFPQIndex:
    """Coarse centroids (nlist, d), the residual PQ, and per list the ids and (n_c, m) uint8 codes."""

    centroids: np.ndarray
    pq: ProductQuantizer
    list_ids: list[np.ndarray]
    list_codes: list[np.ndarray]

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    def list_sizes(self) -> np.ndarray:
        return np.array([len(i) for i in self.list_ids])

    def nbytes(self, id_bytes: int = 8) -> int:
        """Memory of the index: codes and ids of every vector, plus the centroids and codebooks."""
        n = int(self.list_sizes().sum())
        return n * (self.pq.bytes_per_vector() + id_bytes) + self.centroids.nbytes + self.pq.codebooks.nbytes


def ivfpq_build(base: np.ndarray, nlist: int, m: int, nbits: int = 8, iters: int = 10, pq_iters: int = 10,
                seed: int = 0, centroids: np.ndarray | None = None,
                pq: ProductQuantizer | None = None) -> IVFPQIndex:
    """Coarse k-means (or the given ``centroids``), PQ trained on the residuals x - mu_c (or the given
    ``pq``), and every vector filed in its list as the codes of its residual."""
    base = np.asarray(base)
    coarse = ivf_build(base, nlist, iters, seed, centroids=centroids)
    assign = np.empty(len(base), dtype=np.int64)
    for c, ids in enumerate(coarse.list_ids):
        assign[ids] = c
    resid = base - coarse.centroids[assign]
    if pq is None:
        pq = pq_train(resid, m, nbits, pq_iters, seed)
    elif pq.m != m or pq.codebooks.shape[1] != 2 ** nbits:
        raise ValueError(f"the given pq has m={pq.m}, {pq.codebooks.shape[1]} centroids; asked m={m}, nbits={nbits}")
    codes = pq_encode(pq, resid)
    return IVFPQIndex(coarse.centroids, pq, coarse.list_ids, [codes[ids] for ids in coarse.list_ids])


def _probe(index: IVFPQIndex, q: np.ndarray, nprobe: int) -> np.ndarray:
    if not 1 <= nprobe <= index.nlist:
        raise ValueError(f"nprobe must lie in 1..nlist={index.nlist}, got {nprobe}")
    lists = np.arange(index.nlist, dtype=np.int64)
    return np.stack([select_topk(row, lists, nprobe)[1] for row in distances(q, index.centroids)])


def adc_tables(pq: ProductQuantizer, residual_queries: np.ndarray) -> np.ndarray:
    """T[l, j, b] = ||r_l,j - C_j[b]||^2 for each residual query r_l = q - mu_c: shape (L, m, 2^nbits)."""
    r = residual_queries.reshape(len(residual_queries), pq.m, 1, pq.dsub)
    diff = r - pq.codebooks[None]
    return np.sum(diff * diff, axis=-1)


def ivfpq_search(index: IVFPQIndex, queries: np.ndarray, k: int, nprobe: int = 1,
                 allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ADC over the ``nprobe`` nearest lists: one table per (query, probed list), m look-ups per code.
    ``allowed`` (bool mask over ids) pre-filters: ids outside it are never candidates."""
    q, _, k = _check(queries, index.centroids, k, "l2")
    probes = _probe(index, q, nprobe)
    mm = np.arange(index.pq.m)
    D = np.full((len(q), k), np.inf, dtype=np.result_type(q, index.pq.codebooks))
    I = np.full((len(q), k), -1, dtype=np.int64)
    for r in range(len(q)):
        tables = adc_tables(index.pq, q[r] - index.centroids[probes[r]])
        dist, ids = [], []
        for t, c in zip(tables, probes[r]):
            codes, cid = index.list_codes[c], index.list_ids[c]
            if allowed is not None:
                keep = allowed[cid]
                codes, cid = codes[keep], cid[keep]
            dist.append(t[mm, codes].sum(axis=1))  # m look-ups per code
            ids.append(cid)
        D[r], I[r] = select_topk(np.concatenate(dist), np.concatenate(ids), k)
    return D, I


def naive_ivfpq_search(index: IVFPQIndex, queries: np.ndarray, k: int,
                       nprobe: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The definition ADC computes: decode mu_c + r_hat of every probed vector, exact distance to q."""
    q, _, k = _check(queries, index.centroids, k, "l2")
    probes = _probe(index, q, nprobe)
    D = np.full((len(q), k), np.inf, dtype=np.result_type(q, index.pq.codebooks))
    I = np.full((len(q), k), -1, dtype=np.int64)
    for r in range(len(q)):
        recon = np.concatenate([index.centroids[c] + pq_decode(index.pq, index.list_codes[c]) for c in probes[r]])
        ids = np.concatenate([index.list_ids[c] for c in probes[r]])
        D[r], I[r] = select_topk(distances(q[r:r + 1], recon)[0], ids, k)
    return D, I


def rerank(base: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact re-ranking: the candidates' full vectors (rows of ``base``; id -1 skipped) re-scored with
    the exact distance, best k kept. Reads k' * 4d bytes per query (k' = candidates per query)."""
    q, b, k = _check(queries, base, k, "l2")
    D = np.full((len(q), k), np.inf, dtype=np.result_type(q, b))
    I = np.full((len(q), k), -1, dtype=np.int64)
    for r, cand in enumerate(np.atleast_2d(candidates)):
        cand = np.unique(cand[cand >= 0])
        D[r], I[r] = select_topk(distances(q[r:r + 1], b[cand])[0], cand, k)
    return D, I


def post_filter(D: np.ndarray, I: np.ndarray, allowed: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep, in order, the answers whose id passes the predicate; at most k, padded with -1 / +inf."""
    outD = np.full((len(I), k), np.inf, dtype=D.dtype)
    outI = np.full((len(I), k), -1, dtype=np.int64)
    for r in range(len(I)):
        keep = (I[r] >= 0) & allowed[np.maximum(I[r], 0)]
        n = min(k, int(keep.sum()))
        outD[r, :n], outI[r, :n] = D[r][keep][:n], I[r][keep][:n]
    return outD, outI


def reference_filtered_knn(queries: np.ndarray, base: np.ndarray, allowed: np.ndarray,
                           k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact filtered k-NN: brute force over the ids that pass, answered with their global ids."""
    ids = np.flatnonzero(allowed)
    D, I = knn(queries, np.asarray(base)[ids], k)
    return D, np.where(I >= 0, ids[np.maximum(I, 0)], -1)


def index_bytes_per_vector(d: int, kind: str, m: int = 0, hnsw_M: int = 32, id_bytes: int = 8) -> int:
    """Bytes one stored vector costs (Section 7): ``flat`` 4d, ``ivf-flat`` 4d + id, ``hnsw`` 4d + 2M
    four-byte links on level 0, ``ivf-pq`` m code bytes + id (nbits = 8)."""
    sizes = {"flat": 4 * d, "ivf-flat": 4 * d + id_bytes, "hnsw": 4 * d + 2 * hnsw_M * 4, "ivf-pq": m + id_bytes}
    if kind not in sizes or (kind == "ivf-pq" and not 1 <= m <= d):
        raise ValueError(f"kind must be one of {sorted(sizes)} (ivf-pq with 1 <= m <= d), got {kind!r}, m={m}")
    return sizes[kind]


__all__ = ["IVFPQIndex", "ivfpq_build", "adc_tables", "ivfpq_search", "naive_ivfpq_search", "rerank",
           "post_filter", "reference_filtered_knn", "index_bytes_per_vector"]
