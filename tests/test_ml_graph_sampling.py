"""Chapter 13: neighbour sampling, GCN/SAGE aggregation, remote feature fetch, PyG agreement."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.ml import graph_partition as GP
from scaleoutai.ml import graph_sampling as S

N, D = 300, 6
EDGES, X, Y = datasets.community_graph(N, 3, d=D, seed=1, dtype=np.float64)
INDPTR, INDICES = S.in_csr(EDGES, N)
BATCH = np.array([4, 90, 150, 151, 299])


def _layers(sizes, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((a, b)).astype(dtype), rng.standard_normal(b).astype(dtype),
             rng.standard_normal((a, b)).astype(dtype)) for a, b in zip(sizes, sizes[1:])]


def _dense_mean(X, edges, n):
    A = np.zeros((n, n))
    np.add.at(A, (edges[:, 1], edges[:, 0]), 1.0)
    return (A @ X) / np.maximum(A.sum(1, keepdims=True), 1)


def test_in_csr_lists_every_in_neighbour_in_source_order():
    for v in (0, 4, 150, 299):
        want = sorted(EDGES[EDGES[:, 1] == v, 0])
        assert list(INDICES[INDPTR[v]:INDPTR[v + 1]]) == want


def test_gcn_aggregate_equals_the_dense_adjacency_product():
    assert np.abs(S.gcn_aggregate(X, EDGES.T, N) - _dense_mean(X, EDGES, N)).max() < 1e-12
    summed = S.gcn_aggregate(X, EDGES.T, N, mode="sum")
    deg = np.bincount(EDGES[:, 1], minlength=N)[:, None]
    assert np.abs(summed - deg * _dense_mean(X, EDGES, N)).max() < 1e-11
    assert np.all(S.gcn_aggregate(X, np.zeros((2, 0), dtype=int), N) == 0)  # no in-edge: zero message


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_full_fanout_subgraph_aggregation_equals_full_graph_restricted_to_the_batch(layers, dtype):
    Xd = X.astype(dtype)
    sub = S.sample_subgraph(INDPTR, INDICES, BATCH, [-1] * layers, seed=0)
    assert np.array_equal(sub.nodes[:len(BATCH)], BATCH)
    params = _layers([D, 5, 3][:layers + 1], dtype=dtype)
    full = S.sage_forward(Xd, EDGES.T, params)[BATCH]
    mini = S.sage_forward(Xd[sub.nodes], sub.edge_index, params)[:len(BATCH)]
    assert mini.dtype == dtype and np.array_equal(mini, full)  # exactly: same neighbours, same order
    agg_full = S.gcn_aggregate(Xd, EDGES.T, N)[BATCH]
    assert np.array_equal(S.gcn_aggregate(Xd[sub.nodes], sub.edge_index, len(sub.nodes))[:len(BATCH)], agg_full)


def test_a_fanout_above_every_degree_is_the_full_neighbourhood():
    big = int(np.diff(INDPTR).max())
    a = S.sample_subgraph(INDPTR, INDICES, BATCH, [big, big], seed=1)
    b = S.sample_subgraph(INDPTR, INDICES, BATCH, [-1, -1], seed=2)
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.edge_index, b.edge_index)


@pytest.mark.parametrize("fanouts", [[2], [3, 2], [2, 2, 2]])
def test_sampled_size_is_bounded_by_batch_times_fanouts_and_seeded(fanouts):
    sub = S.sample_subgraph(INDPTR, INDICES, BATCH, fanouts, seed=3)
    bound = len(BATCH)
    for hop, f in enumerate(fanouts, 1):
        bound_hop = len(BATCH) * int(np.prod(fanouts[:hop]))
        assert len(sub.hops[hop]) <= bound_hop and sub.edges_per_hop[hop - 1] <= bound_hop
        bound += bound_hop
    assert len(sub.nodes) <= bound
    deg_in = np.bincount(sub.edge_index[1], minlength=len(sub.nodes))
    assert deg_in.max() <= max(fanouts)
    again = S.sample_subgraph(INDPTR, INDICES, BATCH, fanouts, seed=3)
    other = S.sample_subgraph(INDPTR, INDICES, BATCH, fanouts, seed=4)
    assert np.array_equal(again.edge_index, sub.edge_index) and not np.array_equal(other.nodes, sub.nodes)


def test_sampled_mean_aggregation_is_unbiased():
    # Mean of R independent 2-of-deg samples vs the exact neighbour mean: within 5 standard errors
    # (per coordinate: a false alarm has probability < 1e-5 under the null).
    R, fan = 2000, 2
    exact = S.gcn_aggregate(X, EDGES.T, N)[BATCH]
    est = np.stack([S.gcn_aggregate(X[s.nodes], s.edge_index, len(s.nodes))[:len(BATCH)]
                    for s in (S.sample_subgraph(INDPTR, INDICES, BATCH, [fan], seed=i) for i in range(R))])
    se = est.std(axis=0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(est.mean(0) - exact) <= 5 * se + 1e-12)
    assert se.max() > 0  # the fan-out really sampled
    biased = S.gcn_aggregate(X, EDGES.T, N, mode="sum")[BATCH]  # sum over 2 neighbours is not the full sum
    assert np.any(np.abs(est.mean(0) * fan - biased) > 5 * se * fan)


def test_bad_sampler_input_is_rejected():
    with pytest.raises(ValueError, match="distinct"):
        S.sample_subgraph(INDPTR, INDICES, [1, 1], [2])
    with pytest.raises(ValueError, match="fanouts"):
        S.sample_subgraph(INDPTR, INDICES, [1], [0])
    with pytest.raises(ValueError, match="mode"):
        S.gcn_aggregate(X, EDGES.T, N, mode="max")


# --- PyTorch Geometric ----------------------------------------------------------------------------

def test_pyg_sageconv_on_our_sampled_batch_equals_full_graph_and_our_numpy():
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    convs = [pyg.SAGEConv(D, 5, aggr="mean"), pyg.SAGEConv(5, 3, aggr="mean")]
    params = [(c.lin_l.weight.detach().numpy().T.astype(np.float32), c.lin_l.bias.detach().numpy(),
               c.lin_r.weight.detach().numpy().T.astype(np.float32)) for c in convs]

    def run(x, ei):
        with torch.no_grad():
            h = convs[1](torch.relu(convs[0](torch.from_numpy(x), torch.from_numpy(ei))), torch.from_numpy(ei))
        return h.numpy()

    X32 = X.astype(np.float32)
    sub = S.sample_subgraph(INDPTR, INDICES, BATCH, [-1, -1])
    full, mini = run(X32, EDGES.T.copy()), run(X32[sub.nodes], sub.edge_index)[:len(BATCH)]
    assert full.shape == (N, 3)
    assert np.allclose(mini, full[BATCH], atol=1e-5, rtol=1e-5)
    ours = S.sage_forward(X32, EDGES.T, params)
    assert np.allclose(ours, full, atol=1e-5, rtol=1e-5)
    small = S.sample_subgraph(INDPTR, INDICES, BATCH, [2, 2], seed=0)  # a real sample: estimates differ
    assert not np.allclose(run(X32[small.nodes], small.edge_index)[:len(BATCH)], full[BATCH], atol=1e-3)


def test_pyg_gcnconv_on_our_sampled_batch_with_full_graph_weights_equals_full_graph():
    """GCNConv normalises by both endpoints' degrees, which a sampled subgraph does not keep: the
    batch carries the full graph's coefficients 1/sqrt(d_i d_j) (self-loops included) as edge weights."""
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(1)
    full_conv = pyg.GCNConv(D, 4)
    mini_conv = pyg.GCNConv(D, 4, normalize=False, add_self_loops=False)
    mini_conv.load_state_dict(full_conv.state_dict())
    X32 = torch.from_numpy(X.astype(np.float32))
    with torch.no_grad():
        full = full_conv(X32, torch.from_numpy(EDGES.T.copy())).numpy()
    dinv = 1.0 / np.sqrt(np.bincount(EDGES[:, 1], minlength=N) + 1.0)
    sub = S.sample_subgraph(INDPTR, INDICES, BATCH, [-1])
    loops = np.arange(len(sub.nodes))
    ei = np.concatenate([sub.edge_index, np.stack([loops, loops])], axis=1)
    w = (dinv[sub.nodes[ei[0]]] * dinv[sub.nodes[ei[1]]]).astype(np.float32)
    with torch.no_grad():
        mini = mini_conv(X32[torch.from_numpy(sub.nodes)], torch.from_numpy(ei), torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(mini[:len(BATCH)], full[BATCH], atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the subgraph's own degrees instead: a different, wrong answer
        naive = full_conv(X32[torch.from_numpy(sub.nodes)], torch.from_numpy(sub.edge_index)).numpy()
    assert not np.allclose(naive[:len(BATCH)], full[BATCH], atol=1e-3)


# --- distributed feature fetch and training -------------------------------------------------------

def _fetch(comm, X, parts, needed):
    return S.fetch_features(comm, X[parts == comm.rank], parts, needed[comm.rank])


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fetch_features_returns_the_rows_and_pays_remote_rows_times_d_times_itemsize(K, dtype):
    Xd = X.astype(dtype)
    parts = GP.hash_partition(N, K)
    rng = np.random.default_rng(K)
    needed = [rng.choice(N, size=40 + r, replace=False) for r in range(K)]
    res = cluster.run(_fetch, K, args=(Xd, parts, needed))
    for r, (rows, got) in enumerate(res.values):
        assert np.array_equal(rows, Xd[needed[r]])
        remote = int(np.count_nonzero(parts[needed[r]] != r))
        assert got["remote_nodes"] == remote and got["feature_bytes"] == remote * D * Xd.itemsize


def test_fetch_features_with_more_ranks_than_vertices():
    tinyX = np.arange(12.0).reshape(4, 3)
    parts = np.array([0, 5, 5, 9])
    needed = [np.array([3, 0]) if r in (0, 5) else np.array([], dtype=np.int64) for r in range(10)]
    res = cluster.run(_fetch, 10, args=(tinyX, parts, needed))
    assert np.array_equal(res.values[5][0], tinyX[[3, 0]]) and res.values[5][1]["feature_bytes"] == 2 * 3 * 8
    assert res.values[0][1]["remote_nodes"] == 1


def test_distributed_minibatch_training_learns_and_a_good_partition_fetches_less():
    edges, Xc, yc = datasets.community_graph(400, 4, d=8, seed=0, dtype=np.float64)
    n, K = 400, 2
    runs = {}
    for name, parts in (("hash", GP.hash_partition(n, K)), ("ldg", GP.ldg_partition(edges, n, K))):
        res = cluster.run(S.train_sage_minibatch, K, args=(edges, Xc, yc, parts, 4), kwargs=dict(steps=30))
        W, info = res.values[0]
        assert all(np.array_equal(W[0], v[0][0]) for v in res.values)  # replicas stay identical
        runs[name] = sum(sum(v[1]["feature_bytes"]) for v in res.values)
        agg = S.gcn_aggregate(Xc, edges.T, n)
        acc = ((agg @ W[0] + W[1] + Xc @ W[2]).argmax(1) == yc).mean()
        assert acc > 0.9 and info["loss"][-1] < 0.5 * info["loss"][0]
    assert runs["ldg"] < 0.6 * runs["hash"]


def test_one_rank_training_equals_the_k_rank_step_on_the_same_batch():
    # With K = 1 and a batch that is the whole vertex set, sampling with full fan-out is exact, so the
    # first gradient step equals the full-graph gradient of the linear SAGE model.
    edges, Xc, yc = datasets.community_graph(60, 3, d=4, seed=2, dtype=np.float64)
    from scaleoutai import nn
    res = cluster.run(S.train_sage_minibatch, 1, args=(edges, Xc, yc, np.zeros(60, dtype=np.int64), 3),
                      kwargs=dict(batch=60, fanout=60, steps=1, lr=1.0))
    W = res.values[0][0]
    agg = S.gcn_aggregate(Xc, edges.T, 60)
    _, dl = nn.softmax_cross_entropy(np.zeros((60, 3)), yc)
    assert np.allclose(W[0], -agg.T @ dl, atol=1e-14) and np.allclose(W[2], -Xc.T @ dl, atol=1e-14)


@pytest.mark.slow
def test_fetch_features_on_processes():
    parts = GP.hash_partition(N, 2)
    needed = [np.arange(0, N, 3), np.arange(1, N, 2)]
    res = cluster.run(_fetch, 2, args=(X, parts, needed), backend="process", timeout=120)
    for r, (rows, got) in enumerate(res.values):
        assert np.array_equal(rows, X[needed[r]])
        assert got["feature_bytes"] == int(np.count_nonzero(parts[needed[r]] != r)) * D * 8
