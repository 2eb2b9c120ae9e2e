"""The shared generators are pure functions of their seed and keep the shapes they promise."""
import numpy as np
import pytest

from scaleoutai import datasets


def test_generators_are_pure_functions_of_the_seed():
    for make in (lambda s: datasets.linear_regression(50, 3, seed=s),
                 lambda s: datasets.classification(50, 3, classes=3, seed=s),
                 lambda s: datasets.blobs(50, 4, seed=s),
                 lambda s: (datasets.power_law_graph(30, 100, seed=s),),
                 lambda s: datasets.community_graph(40, seed=s)):
        a, b, c = make(1), make(1), make(2)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_linear_regression_targets_follow_the_true_weights():
    X, y, w = datasets.linear_regression(2000, 4, noise=0.01, seed=3)
    assert np.abs(y - X @ w).max() < 0.06


def test_classification_labels_are_balanced_and_separable():
    X, y = datasets.classification(999, 5, classes=3, separation=6.0, seed=0, dtype=np.float32)
    assert X.dtype == np.float32 and y.dtype == np.int64
    assert sorted(np.bincount(y).tolist()) == [333, 333, 333]
    means = np.stack([X[y == c].mean(0) for c in range(3)])
    nearest = np.argmin(((X[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (nearest == y).mean() > 0.95


def test_power_law_graph_has_distinct_edges_without_self_loops_and_hubs():
    e = datasets.power_law_graph(1000, 20000, seed=0)
    assert e.shape == (20000, 2) and e.dtype == np.int64
    assert (e[:, 0] != e[:, 1]).all()
    assert np.unique(e[:, 0] * 1000 + e[:, 1]).size == 20000
    deg = np.bincount(e[:, 1], minlength=1000)
    assert deg.max() > 20 * np.median(deg)


def test_power_law_graph_refuses_more_edges_than_a_simple_graph_holds():
    with pytest.raises(ValueError, match="at most 6 edges"):
        datasets.power_law_graph(3, 7)


def test_community_graph_is_symmetric_and_mostly_inside_communities():
    edges, X, y = datasets.community_graph(400, communities=4, d=8, seed=0)
    pairs = set(map(tuple, edges.tolist()))
    assert all((j, i) in pairs for i, j in pairs)
    assert (edges[:, 0] != edges[:, 1]).all()
    assert (y[edges[:, 0]] == y[edges[:, 1]]).mean() > 0.75
    assert X.shape == (400, 8) and np.bincount(y).tolist() == [100] * 4


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_communication_graphs_are_simple_undirected_and_have_their_degrees(n):
    for nb, degree in [(datasets.ring_graph(n), min(2, n - 1)), (datasets.complete_graph(n), n - 1),
                       (datasets.grid_graph(1, n), min(2, n - 1))]:
        assert datasets.check_neighbours(nb) is nb and datasets.is_connected(nb)
        assert [len(row) for row in nb] == [degree] * n
    torus = datasets.grid_graph(3, 4)
    assert [len(row) for row in torus] == [4] * 12 and torus[0] == [1, 3, 4, 8]
    path = datasets.grid_graph(2, 3, periodic=False)
    assert sorted(len(row) for row in path) == [2, 2, 2, 2, 3, 3]


def test_random_communication_graphs_are_connected_and_pure_functions_of_the_seed():
    for make in (lambda s: datasets.random_regular_graph(10, 3, s), lambda s: datasets.random_geometric_graph(30, 0.35, s),
                 lambda s: datasets.erdos_renyi_graph(30, 0.2, s)):
        nb = make(4)
        assert nb == make(4) and datasets.is_connected(datasets.check_neighbours(nb))
    assert {len(row) for row in datasets.random_regular_graph(10, 3, 1)} == {3}


def test_bad_graphs_get_one_clear_error():
    with pytest.raises(ValueError, match="must be undirected"):
        datasets.check_neighbours([[1], []])
    with pytest.raises(ValueError, match="distinct nodes"):
        datasets.check_neighbours([[0]])
    with pytest.raises(ValueError, match="n\\*d even"):
        datasets.random_regular_graph(5, 3)
    with pytest.raises(ValueError, match="positive integer"):
        datasets.ring_graph(0)
    assert not datasets.is_connected([[], []])
