"""IVF-PQ against its definition and FAISS IndexIVFPQ; exact re-ranking; pre- and post-filtered search
against brute force over the ids that pass (Chapter 25)."""
from math import comb

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import ivfpq as P, vectors as V

faiss = pytest.importorskip("faiss")

# (n, d, nlist, m, nbits): several sizes, dimensions, code widths
SHAPES = [(2000, 16, 16, 4, 6), (2500, 32, 24, 8, 8), (2500, 48, 16, 6, 4)]


def _data(n, d, seed=0, dtype=np.float32):
    return datasets.vector_data(n, 60, d, clusters=32, seed=seed, dtype=dtype)


def _faiss_ivfpq(base, nlist, m, nbits, centroids=None, codebooks=None):
    d = base.shape[1]
    quantizer = faiss.IndexFlatL2(d)
    index = faiss.IndexIVFPQ(quantizer, d, nlist, m, nbits)
    index.cp.min_points_per_centroid = 1  # small bases: no warning about too few training points
    index.pq.cp.min_points_per_centroid = 1
    if centroids is None:
        index.train(base)
    else:
        quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))
        faiss.copy_array_to_vector(np.ascontiguousarray(codebooks, dtype=np.float32).ravel(), index.pq.centroids)
        index.is_trained = True
        index.precompute_table()
    index.add(base)
    return index


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d, nlist, m, nbits", SHAPES[:2])
def test_adc_distance_equals_the_distance_to_the_decoded_reconstruction(n, d, nlist, m, nbits, dtype):
    base, q = _data(n, d, dtype=dtype)
    index = P.ivfpq_build(base, nlist, m, nbits, iters=3, pq_iters=2, seed=1)
    assert index.pq.codebooks.dtype == dtype and all(c.dtype == np.uint8 for c in index.list_codes)
    for nprobe in (1, 3, nlist):
        D, I = P.ivfpq_search(index, q, 10, nprobe)
        Dn, In = P.naive_ivfpq_search(index, q, 10, nprobe)
        tol = 1e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(D, Dn, rtol=tol, atol=tol)
        assert np.mean(I == In) >= 0.99  # ids differ only where two reconstructions tie within rounding


def test_every_vector_is_filed_once_with_m_codes_and_sized_as_stated():
    base, _ = _data(2000, 16)
    index = P.ivfpq_build(base, 16, 4, 8, iters=3, pq_iters=3)
    ids = np.sort(np.concatenate(index.list_ids))
    assert np.array_equal(ids, np.arange(2000)) and all(c.shape[1] == 4 for c in index.list_codes)
    assert index.nbytes() == 2000 * (4 + 8) + 16 * 16 * 4 + 4 * 256 * 4 * 4
    assert P.index_bytes_per_vector(768, "flat") == 3072 and P.index_bytes_per_vector(768, "ivf-pq", m=96) == 104
    assert P.index_bytes_per_vector(384, "hnsw", hnsw_M=32) == 1536 + 256
    with pytest.raises(ValueError, match="kind must be one of"):
        P.index_bytes_per_vector(768, "ivf-pq", m=0)


@pytest.mark.parametrize("n, d, nlist, m, nbits", SHAPES)
def test_faiss_loaded_with_our_centroids_and_codebooks_returns_our_neighbours(n, d, nlist, m, nbits, one_faiss_thread):
    base, q = _data(n, d, seed=2)
    index = P.ivfpq_build(base, nlist, m, nbits, iters=3, pq_iters=2, seed=0)
    fidx = _faiss_ivfpq(base, nlist, m, nbits, index.centroids, index.pq.codebooks)
    assert [fidx.invlists.list_size(c) for c in range(nlist)] == index.list_sizes().tolist()
    for nprobe in (1, 4):
        fidx.nprobe = nprobe
        Df, If = fidx.search(q, 10)
        D, I = P.ivfpq_search(index, q, 10, nprobe)
        assert np.mean(I == If) >= 0.99
        np.testing.assert_allclose(D, Df, rtol=1e-4, atol=1e-4)


@pytest.fixture
def one_faiss_thread():
    """FAISS's OpenMP threads spin on a loaded 2-core machine: train with one, then restore."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("n, d, nlist, m, nbits", SHAPES)
def test_ivfpq_recall_equals_faiss_ivfpq_trained_on_its_own_within_004(n, d, nlist, m, nbits, one_faiss_thread):
    """Both train their own k-means (different starts and samples), so the recall agrees to a tolerance."""
    base, _ = _data(n, d, seed=3)
    q = np.concatenate([_data(n, d, seed=s)[1] for s in (3, 13, 23)])  # 180 queries from the same mixture
    _, truth = V.knn(q, base, 10)
    index = P.ivfpq_build(base, nlist, m, nbits, iters=10, pq_iters=20 if nbits < 8 else 6, seed=0)
    fidx = _faiss_ivfpq(base, nlist, m, nbits)
    for nprobe in (1, 4, nlist // 2):
        fidx.nprobe = nprobe
        ours = V.recall_at_k(P.ivfpq_search(index, q, 10, nprobe)[1], truth)
        theirs = V.recall_at_k(fidx.search(q, 10)[1], truth)
        assert abs(ours - theirs) <= 0.04, (nprobe, ours, theirs)


def test_reranking_every_candidate_is_exact_and_reranking_adc_candidates_raises_recall():
    base, q = _data(3000, 32, seed=4)
    D_true, I_true = V.knn(q, base, 10)
    every = np.tile(np.arange(len(base)), (len(q), 1))
    D, I = P.rerank(base, q, every, 10)
    assert np.array_equal(I, I_true) and np.array_equal(D, D_true)
    index = P.ivfpq_build(base, 16, 4, 8, iters=5, pq_iters=4)
    _, cand = P.ivfpq_search(index, q, 100, nprobe=4)
    Dr, Ir = P.rerank(base, q, cand, 10)
    for r in range(len(q)):  # the exact top-10 of the candidates, whatever their ADC order
        Dc, Ic = V.knn(q[r:r + 1], base[cand[r]], 10)
        assert np.array_equal(Ir[r], cand[r][Ic[0]]) and np.array_equal(Dr[r], Dc[0])
    before = V.recall_at_k(P.ivfpq_search(index, q, 10, nprobe=4)[1], I_true)
    assert V.recall_at_k(Ir, I_true) > before + 0.2


@pytest.mark.parametrize("share", [0.5, 0.05])
def test_prefilter_with_every_list_and_reranking_equals_brute_force_over_the_allowed_ids(share):
    base, q = _data(2000, 16, seed=5)
    allowed = np.random.default_rng(0).random(len(base)) < share
    D_ref, I_ref = P.reference_filtered_knn(q, base, allowed, 10)
    ids = np.flatnonzero(allowed)
    Dn, In = V.naive_knn(q[:2], base[ids], 10)
    assert np.array_equal(I_ref[:2], ids[In])  # the reference against the definition
    index = P.ivfpq_build(base, 16, 4, 6, iters=3, pq_iters=3)
    _, cand = P.ivfpq_search(index, q, len(ids), nprobe=16, allowed=allowed)
    assert np.all(allowed[cand]) and np.all(cand >= 0)  # every allowed id, nothing else
    D, I = P.rerank(base, q, cand, 10)
    assert np.array_equal(I, I_ref) and np.array_equal(D, D_ref)
    _, I4 = P.ivfpq_search(index, q, 10, nprobe=4, allowed=allowed)
    assert np.all(allowed[I4[I4 >= 0]])


def test_post_filter_keeps_the_allowed_prefix_and_loses_recall_when_the_filter_is_selective():
    base, q = _data(4000, 16, seed=6)
    rng = np.random.default_rng(1)
    for share, k_post in ((0.5, 10), (0.05, 10), (0.05, 200)):
        allowed = rng.random(len(base)) < share
        _, I_ref = P.reference_filtered_knn(q, base, allowed, 10)
        D, I = V.knn(q, base, k_post)
        Dp, Ip = P.post_filter(D, I, allowed, 10)
        counts = (Ip >= 0).sum(axis=1)
        for r in range(len(q)):  # exactly the first answers of the filtered truth, in order
            assert np.array_equal(Ip[r, :counts[r]], I_ref[r, :counts[r]])
        recall = V.recall_at_k(Ip, I_ref)
        assert recall == pytest.approx(counts.mean() / 10)
        # min(Bin(k_post, share), 10) answers survive: its expectation over 10 is the expected recall
        pmf = [comb(k_post, x) * share ** x * (1 - share) ** (k_post - x) for x in range(k_post + 1)]
        expected = sum(min(x, 10) * p for x, p in enumerate(pmf)) / 10
        assert abs(recall - expected) < 0.08, (share, k_post, recall, expected)
    assert P.post_filter(D, I, np.zeros(len(base), bool), 10)[1].max() == -1


def test_bad_arguments_are_one_clear_error():
    base, q = _data(600, 8)
    index = P.ivfpq_build(base, 4, 2, 4, iters=2, pq_iters=2)
    with pytest.raises(ValueError, match="nprobe must lie in 1..nlist=4"):
        P.ivfpq_search(index, q, 5, nprobe=5)
    with pytest.raises(ValueError, match="the given pq has m=2"):
        P.ivfpq_build(base, 4, 4, 4, pq=index.pq)
    with pytest.raises(ValueError, match="d divisible by m"):
        P.ivfpq_build(base, 4, 3, 4)
