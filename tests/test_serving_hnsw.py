"""HNSW: levels, degree bounds, determinism, the neighbour heuristic, recall vs ef, and FAISS beside it (Chapter 25)."""
import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import hnsw as H, vectors as V

faiss = pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def data():
    base, q = datasets.vector_data(1500, 100, 32, seed=0)
    return base, q, V.knn(q, base, 10)[1], H.hnsw_build(base, M=8, ef_construction=40, seed=0)


def test_levels_thin_out_by_a_factor_M():
    levels = H.hnsw_levels(200_000, 16, seed=1)
    for level in (1, 2):
        assert np.mean(levels >= level) == pytest.approx(16.0 ** -level, rel=0.1)


def test_degrees_stay_within_M_above_and_2M_on_level_0(data):
    g = data[3]
    for node, links in enumerate(g.links):
        assert len(links) == g.levels[node] + 1
        assert len(links[0]) <= 2 * g.M and all(len(lk) <= g.M for lk in links[1:])
        assert node not in links[0]
    assert g.levels[g.entry] == g.max_level == max(g.levels)


def test_the_graph_is_deterministic_given_the_seed_and_changes_with_it(data):
    base, g = data[0][:400], H.hnsw_build(data[0][:400], M=8, seed=3)
    assert H.hnsw_build(base, M=8, seed=3).links == g.links
    assert H.hnsw_build(base, M=8, seed=4).links != g.links


def test_adding_vectors_later_builds_the_same_graph_as_one_build(data):
    base = data[0][:300]
    g = H.hnsw_build(base[:200], M=8, seed=5)
    H.hnsw_add(g, base[200:])
    assert g.links == H.hnsw_build(base, M=8, seed=5).links


def test_heuristic_drops_a_candidate_shadowed_by_a_kept_neighbour():
    # from the query at 0: a at 1 and b at 1.2 lie on the same side, c at -1.5 on the other
    pts = np.array([[0.0], [1.0], [1.2], [-1.5]])
    g = H.HNSW(pts, M=3, ef_construction=10, seed=0)
    cands = sorted(zip(g._dist(pts[0], [1, 2, 3]), [1, 2, 3]))
    assert g.select_neighbors(cands, 3) == [1, 3]  # b is nearer to a than to the query: dropped
    assert g.select_neighbors(cands, 1) == [1]


def test_recall_grows_with_ef_and_an_ef_of_n_is_exact(data):
    base, q, truth, g = data
    recalls = [V.recall_at_k(H.hnsw_search(g, q, 10, ef)[1], truth) for ef in (10, 20, 40, 80)]
    assert all(a <= b + 0.01 for a, b in zip(recalls, recalls[1:])) and recalls[0] < recalls[-1]
    assert recalls[-1] > 0.97
    D, I = H.hnsw_search(g, q[:10], 10, ef=len(base))
    Dt, It = V.knn(q[:10], base, 10)
    assert np.array_equal(I, It) and np.allclose(D, Dt)


def test_short_graphs_pad_and_bad_parameters_are_refused():
    g = H.hnsw_build(np.eye(3, dtype=np.float32), M=4)
    D, I = H.hnsw_search(g, np.zeros((1, 3), dtype=np.float32), 5)
    assert I[0, :3].tolist() == [0, 1, 2] and I[0, 3:].tolist() == [-1, -1] and np.isinf(D[0, 3:]).all()
    with pytest.raises(ValueError, match="M >= 2"):
        H.hnsw_build(np.eye(3), M=1)
    with pytest.raises(ValueError, match="non-empty"):
        H.hnsw_build(np.zeros((0, 3)))


def test_recall_is_within_a_margin_of_faiss_hnsw_at_the_same_M_and_ef(data):
    base, q, truth, g = data
    index = faiss.IndexHNSWFlat(base.shape[1], g.M)
    index.hnsw.efConstruction = g.ef_construction
    index.add(base)
    for ef in (10, 20, 40):
        index.hnsw.efSearch = ef
        theirs = V.recall_at_k(index.search(q, 10)[1], truth)
        ours = V.recall_at_k(H.hnsw_search(g, q, 10, ef)[1], truth)
        assert abs(ours - theirs) <= 0.04, (ef, ours, theirs)
