"""Exact k-NN, the sharded scatter-gather, IVF and PQ against their references and FAISS (Chapter 25)."""
import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.serving import ivf, vectors as V

faiss = pytest.importorskip("faiss")

KS = [1, 2, 3, 5, 8]


def tied_data(dtype=np.float64, seed=0):
    """A base whose vectors repeat (exact distance ties across shards) and small-integer queries."""
    rng = np.random.default_rng(seed)
    distinct = rng.integers(-3, 4, size=(9, 4)).astype(dtype)
    base = distinct[rng.integers(0, 9, size=41)]
    return base, rng.integers(-3, 4, size=(6, 4)).astype(dtype)


@pytest.mark.parametrize("metric", ["l2", "ip"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_knn_equals_the_naive_loop_including_ties(metric, dtype):
    base, q = tied_data(dtype)
    for k in (1, 4, 41):
        D, I = V.knn(q, base, k, metric, block=50)  # tiny blocks: several query blocks
        Dn, In = V.naive_knn(q, base, k, metric)
        assert np.array_equal(I, In) and np.array_equal(D, Dn)
        assert D.dtype == dtype


def test_order_rule_breaks_ties_by_the_smaller_id_and_pads_short_answers():
    base = np.array([[1.0, 0], [0, 1], [1, 0], [-1, 0]])
    D, I = V.knn(np.zeros((1, 2)), base, 6)
    assert I.tolist() == [[0, 1, 2, 3, -1, -1]] and np.isinf(D[0, 4:]).all()
    D, I = V.knn(np.array([[1.0, 0]]), base, 2, metric="ip")
    assert I.tolist() == [[0, 2]] and D.tolist() == [[1.0, 1.0]]
    Dip, _ = V.knn(np.array([[1.0, 0]]), base, 6, metric="ip")
    assert np.isneginf(Dip[0, 4:]).all()


def test_knn_equals_faiss_flat_l2_and_ip():
    base, q = datasets.vector_data(3000, 50, 32, seed=3)
    D, I = V.knn(q, base, 10)
    index = faiss.IndexFlatL2(32)
    index.add(base)
    Df, If = index.search(q, 10)
    assert np.array_equal(I, If)  # continuous data: no ties, so the ids agree exactly
    np.testing.assert_allclose(D, Df, rtol=1e-4, atol=1e-4)  # faiss uses ||q||^2 - 2qx + ||x||^2
    ip = faiss.IndexFlatIP(32)
    ip.add(base)
    Df, If = ip.search(q, 10)
    D, I = V.knn(q, base, 10, metric="ip")
    assert np.array_equal(I, If)
    np.testing.assert_allclose(D, Df, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("merge", ["root", "tree"])
@pytest.mark.parametrize("metric", ["l2", "ip"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sharded_topk_equals_brute_force_for_every_K_with_ties(merge, metric, dtype):
    base, q = tied_data(dtype, seed=1)
    for k in (1, 5, 60):  # 60 > n: every shard answers short and the merge pads
        D, I = V.knn(q, base, k, metric)
        for K in KS + [len(base) + 4]:  # the last K leaves 4 shards empty
            Ds, Is, _ = V.run_sharded_knn(q, base, k, K, metric, merge, timeout=60)
            assert np.array_equal(Is, I), (K, k)
            assert np.array_equal(Ds, D) and Ds.dtype == dtype


def test_each_shard_sends_exactly_k_entries_per_query_measured():
    base, q = datasets.vector_data(1000, 30, 16, seed=4)
    k = 10
    for K in (2, 5, 8):
        _, _, res = V.run_sharded_knn(q, base, k, K, timeout=60)
        per_entry = base.dtype.itemsize + 8
        assert [s.bytes_sent for s in res.stats] == [0] + [len(q) * k * per_entry] * (K - 1)
        assert [s.messages_sent for s in res.stats] == [0] + [2] * (K - 1)
    _, _, res = V.run_sharded_knn(q, base[:3], k, 5, timeout=60)  # shards of 1, 1, 1, 0, 0 vectors
    assert [s.bytes_sent for s in res.stats] == [0, len(q) * per_entry, len(q) * per_entry, 0, 0]


def test_tree_merge_takes_fewer_simulated_seconds_than_the_root_merge_at_K_8():
    base, q = datasets.vector_data(4000, 200, 16, seed=5)
    net = cluster.Network(alpha=1e-4, beta=1e-8)
    t = {m: V.run_sharded_knn(q, base, 50, 8, merge=m, network=net, timeout=60)[2].sim_time for m in ("root", "tree")}
    assert t["tree"] < t["root"]


@pytest.mark.slow
def test_sharded_topk_on_real_processes_equals_brute_force():
    base, q = tied_data(np.float32, seed=2)
    D, I = V.knn(q, base, 7)
    Ds, Is, res = V.run_sharded_knn(q, base, 7, 3, backend="process", timeout=120)
    assert np.array_equal(Is, I) and np.array_equal(Ds, D) and res.backend == "process"


def test_bad_inputs_get_one_readable_error():
    base, q = tied_data()
    with pytest.raises(ValueError, match="metric"):
        V.knn(q, base, 3, metric="cosine")
    with pytest.raises(ValueError, match="k must be"):
        V.knn(q, base, 0)
    with pytest.raises(ValueError, match="share d"):
        V.knn(q[:, :3], base, 3)
    bad = base.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        V.knn(q, bad, 3)


def test_recall_at_k_counts_overlap_per_query():
    truth = np.array([[1, 2, 3], [4, 5, 6]])
    assert V.recall_at_k(np.array([[3, 2, 9], [-1, -1, -1]]), truth) == pytest.approx(2 / 6)
    assert V.recall_at_k(truth, truth) == 1.0 and V.recall_at_k(truth[:, ::-1], truth, k=1) == 0.0
    assert V.recall_at_k(np.array([[1, 9, 9], [9, 9, 9]]), truth, k=1) == 0.5


def test_kmeans_is_deterministic_and_lowers_the_error_of_its_start():
    X, _ = datasets.vector_data(2000, 0, 8, clusters=10, seed=6, dtype=np.float64)
    C1, C2 = ivf.kmeans(X, 10, iters=15, seed=1), ivf.kmeans(X, 10, iters=15, seed=1)
    assert np.array_equal(C1, C2)
    start = ivf.kmeans(X, 10, iters=0, seed=1)

    def err(C):
        return float(((X - C[ivf._assign(X, C)]) ** 2).sum())
    assert err(C1) < 0.8 * err(start)
    dup = np.repeat(X[:3], 10, axis=0)  # 3 distinct points, 5 clusters: empty clusters are re-seeded
    assert np.isfinite(ivf.kmeans(dup, 5, iters=5)).all()


def test_ivf_with_every_list_probed_equals_brute_force_exactly_and_recall_grows_with_nprobe():
    base, q = datasets.vector_data(4000, 100, 32, seed=7)
    D, I = V.knn(q, base, 10)
    index = ivf.ivf_build(base, 32, iters=8)
    assert index.list_sizes().sum() == len(base)
    Dp, Ip = ivf.ivf_search(index, q, 10, nprobe=32)
    assert np.array_equal(Ip, I) and np.array_equal(Dp, D)
    recalls = [V.recall_at_k(ivf.ivf_search(index, q, 10, p)[1], I) for p in (1, 2, 4, 8, 16)]
    assert all(a <= b for a, b in zip(recalls, recalls[1:])) and recalls[0] < 0.9 < recalls[-1]


def test_ivf_equals_faiss_ivfflat_with_the_same_centroids():
    base, q = datasets.vector_data(6000, 200, 32, seed=8)
    index = ivf.ivf_build(base, 48, iters=8)
    quantizer = faiss.IndexFlatL2(32)
    quantizer.add(index.centroids)
    fi = faiss.IndexIVFFlat(quantizer, 32, 48)
    assert fi.is_trained  # the quantizer already holds nlist centroids: faiss takes ours as they are
    fi.add(base)
    assert [fi.invlists.list_size(c) for c in range(48)] == index.list_sizes().tolist()
    truth = V.knn(q, base, 10)[1]
    for nprobe in (1, 3, 12):
        fi.nprobe = nprobe
        Df, If = fi.search(q, 10)
        Do, Io = ivf.ivf_search(index, q, 10, nprobe)
        assert np.mean(np.all(If == Io, axis=1)) >= 0.99  # near-ties in the coarse step may differ
        assert abs(V.recall_at_k(Io, truth) - V.recall_at_k(If, truth)) <= 0.005


def test_pq_adc_distance_is_the_distance_to_the_reconstruction_and_recall_grows_with_m():
    base, q = datasets.vector_data(3000, 60, 32, seed=9)
    truth = V.knn(q, base, 10)[1]
    recalls = {}
    for m in (2, 4, 8, 16):
        pq = ivf.pq_train(base, m, nbits=6, iters=8)
        codes = ivf.pq_encode(pq, base)
        assert codes.dtype == np.uint8 and codes.shape == (3000, m) and pq.bytes_per_vector() == m
        D, I = ivf.pq_search(pq, codes, q, 10)
        exact = V.knn(q, ivf.pq_decode(pq, codes), 10)
        np.testing.assert_allclose(D, exact[0], rtol=1e-4, atol=1e-4)
        assert np.mean(np.all(I == exact[1], axis=1)) >= 0.95  # float32 sums in another order may swap near-ties
        recalls[m] = V.recall_at_k(I, truth)
    assert recalls[2] < recalls[8] < recalls[16] and recalls[16] > 0.5


def test_pq_recall_is_close_to_faiss_index_pq():
    base, q = datasets.vector_data(4000, 100, 32, seed=10)
    truth = V.knn(q, base, 10)[1]
    pq = ivf.pq_train(base, 8, nbits=8, iters=10)
    ours = V.recall_at_k(ivf.pq_search(pq, ivf.pq_encode(pq, base), q, 10)[1], truth)
    fp = faiss.IndexPQ(32, 8, 8)
    fp.pq.cp.min_points_per_centroid = 1  # 4000 points for 256 centroids: silence the warning
    fp.train(base)
    fp.add(base)
    theirs = V.recall_at_k(fp.search(q, 10)[1], truth)
    assert abs(ours - theirs) < 0.08, (ours, theirs)


def test_pq_and_ivf_reject_bad_shapes():
    base, q = datasets.vector_data(300, 5, 10, seed=11)
    with pytest.raises(ValueError, match="divisible"):
        ivf.pq_train(base, 3)
    with pytest.raises(ValueError, match="2\\^nbits"):
        ivf.pq_train(base, 2, nbits=9)
    with pytest.raises(ValueError, match="nprobe"):
        ivf.ivf_search(ivf.ivf_build(base, 4, iters=2), q, 3, nprobe=5)
