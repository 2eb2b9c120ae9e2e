"""Chapter 13: graph partitioning, Pregel PageRank (edge-cut and vertex-cut) and connected components."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.ml import graph as G
from scaleoutai.ml import graph_gas as GG
from scaleoutai.ml import graph_partition as GP

KS = [1, 2, 3, 5, 8]
N, M = 200, 900
EDGES = datasets.power_law_graph(N, M, seed=3)
TINY = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [5, 3]])  # two components, vertex 6 isolated, 4 dangling
N_TINY = 7


@pytest.fixture(scope="module")
def ref():
    return G.reference_pagerank(EDGES, N, iters=40)[0]


# --- partitioning ---------------------------------------------------------------------------------

def _brute_cut(edges, parts):
    return sum(1 for u, v in edges if parts[u] != parts[v])


def _brute_replication(edges, edge_parts, n):
    copies = {}
    for (u, v), p in zip(edges, edge_parts):
        copies.setdefault(int(u), set()).add(int(p))
        copies.setdefault(int(v), set()).add(int(p))
    return sum(len(s) for s in copies.values()) / len(copies), sum(len(s) - 1 for s in copies.values())


@pytest.mark.parametrize("K", KS)
def test_partition_metrics_equal_brute_force_definitions(K):
    for parts in (GP.hash_partition(N, K), GP.range_partition(N, K), GP.ldg_partition(EDGES, N, K)):
        assert parts.shape == (N,) and set(parts) <= set(range(K))
        m = GP.edge_cut_metrics(EDGES, parts, K)
        assert m["cut_edges"] == _brute_cut(EDGES, parts)
        assert m["cut_fraction"] == pytest.approx(_brute_cut(EDGES, parts) / M)
        load = [sum(parts == r) for r in range(K)]
        assert m["vertex_balance"] == pytest.approx(max(load) / (N / K))
    for ep in (GP.random_vertex_cut(EDGES, N, K, seed=1), GP.hdrf_vertex_cut(EDGES, N, K)):
        m = GP.vertex_cut_metrics(EDGES, ep, N, K)
        rf, mirrors = _brute_replication(EDGES, ep, N)
        assert m["replication_factor"] == pytest.approx(rf) and m["mirrors"] == mirrors
        assert 1.0 <= m["replication_factor"] <= K


def test_range_partition_is_the_block_split_and_ldg_respects_capacity():
    from scaleoutai.collectives import block_bounds
    parts = GP.range_partition(10, 4)
    assert [tuple(np.flatnonzero(parts == r)[[0, -1]] + [0, 1]) for r in range(4)] == block_bounds(10, 4)
    ldg = GP.ldg_partition(EDGES, N, 4, slack=1.1)
    assert np.bincount(ldg, minlength=4).max() <= int(np.ceil(1.1 * N / 4))


def test_greedy_partitioners_beat_random_ones():
    edges, _, _ = datasets.community_graph(400, 4, d=4, seed=0)
    n, K = 400, 4
    hash_cut = GP.edge_cut_metrics(edges, GP.hash_partition(n, K), K)["cut_fraction"]
    order = np.random.default_rng(0).permutation(n)  # a stream that does not follow the communities
    ldg_cut = GP.edge_cut_metrics(edges, GP.ldg_partition(edges, n, K, order=order), K)["cut_fraction"]
    assert ldg_cut < 0.6 * hash_cut
    rand_rf = GP.vertex_cut_metrics(EDGES, GP.random_vertex_cut(EDGES, N, K), N, K)["replication_factor"]
    hdrf = GP.hdrf_vertex_cut(EDGES, N, K)
    assert GP.vertex_cut_metrics(EDGES, hdrf, N, K)["replication_factor"] < 0.8 * rand_rf
    assert GP.vertex_cut_metrics(EDGES, hdrf, N, K)["edge_balance"] < 1.1


def test_pymetis_cuts_fewer_edges_than_hash_on_the_community_graph():
    pymetis = pytest.importorskip("pymetis")
    edges, _, _ = datasets.community_graph(400, 4, d=4, seed=0)
    n, K = 400, 4
    indptr, indices = GP.undirected_csr(edges[edges[:, 0] < edges[:, 1]], n)
    cuts, membership = pymetis.part_graph(K, adjacency=pymetis.CSRAdjacency(indptr, indices))
    parts = np.asarray(membership)
    assert set(parts) == set(range(K))  # it ran and used every part
    ours = GP.edge_cut_metrics(edges, parts, K)
    assert ours["cut_edges"] == 2 * cuts  # both directions of each undirected cut edge
    assert ours["cut_fraction"] < 0.5 * GP.edge_cut_metrics(edges, GP.hash_partition(n, K), K)["cut_fraction"]


# --- PageRank -------------------------------------------------------------------------------------

def test_reference_pagerank_is_a_distribution_and_a_fixed_point(ref):
    x, res = G.reference_pagerank(EDGES, N, tol=1e-14)
    assert x.sum() == pytest.approx(1.0, abs=1e-12) and res[-1] < 1e-14
    outdeg = np.bincount(EDGES[:, 0], minlength=N)
    y = np.zeros(N)
    np.add.at(y, EDGES[:, 1], x[EDGES[:, 0]] / outdeg[EDGES[:, 0]])
    assert np.allclose(0.15 / N + 0.85 * (y + x[outdeg == 0].sum() / N), x, atol=1e-14)


def test_reference_pagerank_equals_networkx_with_the_same_dangling_rule():
    nx = pytest.importorskip("networkx")
    g = nx.DiGraph()
    g.add_nodes_from(range(N))
    g.add_edges_from(map(tuple, EDGES.tolist()))
    want = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=500)
    x, _ = G.reference_pagerank(EDGES, N, tol=1e-15)
    assert np.abs(x - np.array([want[v] for v in range(N)])).max() < 1e-10


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("combine", [True, False])
def test_pagerank_equals_power_iteration_float64(K, combine, ref):
    for parts in (None, GP.hash_partition(N, K)):  # range blocks and uneven hashed shards
        res = cluster.run(G.pagerank, K, args=(EDGES, N), kwargs=dict(iters=40, parts=parts, combine=combine))
        assert np.abs(G.assemble(res.values, N) - ref).max() < 1e-12


def test_pagerank_float32_within_float32_tolerance(ref):
    res = cluster.run(G.pagerank, 3, args=(EDGES, N), kwargs=dict(iters=40, dtype=np.float32))
    x = G.assemble(res.values, N)
    assert x.dtype == np.float32 and np.abs(x - ref).max() < 1e-6
    assert np.abs(x - ref).max() > 0  # really computed in float32


def test_pagerank_with_more_ranks_than_vertices():
    want, _ = G.reference_pagerank(TINY, N_TINY, iters=30)
    for fn, kw in ((G.pagerank, {}), (GG.pagerank_vertex_cut, {"edge_parts": np.arange(len(TINY)) % 8})):
        res = cluster.run(fn, 8, args=(TINY, N_TINY), kwargs=dict(iters=30, **kw))
        assert np.abs(G.assemble(res.values, N_TINY) - want).max() < 1e-15


def test_pagerank_with_tol_stops_at_the_reference_superstep():
    want, res_ref = G.reference_pagerank(EDGES, N, tol=1e-10)
    res = cluster.run(G.pagerank, 3, args=(EDGES, N), kwargs=dict(tol=1e-10))
    assert len(res.values[0][2]["residuals"]) == len(res_ref)
    assert np.allclose(res.values[0][2]["residuals"], res_ref, rtol=1e-9, atol=1e-15)
    assert np.abs(G.assemble(res.values, N) - want).max() < 1e-12


@pytest.mark.parametrize("K", [2, 3, 5])
def test_messages_per_superstep_match_the_cut_edges(K):
    parts = GP.hash_partition(N, K)
    cut = GP.edge_cut_metrics(EDGES, parts, K)["cut_edges"]
    plain = cluster.run(G.pagerank, K, args=(EDGES, N), kwargs=dict(iters=3, parts=parts, combine=False))
    comb = cluster.run(G.pagerank, K, args=(EDGES, N), kwargs=dict(iters=3, parts=parts, combine=True))
    sent_plain = sum(v[2]["values_sent"][0] for v in plain.values)
    sent_comb = sum(v[2]["values_sent"][0] for v in comb.values)
    distinct = len({(parts[u], v) for u, v in EDGES if parts[u] != parts[v]})
    assert sent_plain == cut and sent_comb == distinct < cut
    assert sum(v[2]["bytes_sent"][1] for v in plain.values) == 8 * cut  # values only: ids travelled once


def test_ignoring_dangling_vertices_leaks_rank_mass():
    drop = cluster.run(G.pagerank, 2, args=(TINY, N_TINY), kwargs=dict(iters=30, dangling="drop"))
    keep = cluster.run(G.pagerank, 2, args=(TINY, N_TINY), kwargs=dict(iters=30))
    assert G.assemble(keep.values, N_TINY).sum() == pytest.approx(1.0, abs=1e-12)
    assert G.assemble(drop.values, N_TINY).sum() < 0.9
    assert np.allclose(G.assemble(drop.values, N_TINY), G.reference_pagerank(TINY, N_TINY, iters=30, dangling="drop")[0])


@pytest.mark.parametrize("K", KS)
def test_vertex_cut_pagerank_equals_power_iteration_and_moves_two_values_per_mirror(K, ref):
    for ep in (GP.random_vertex_cut(EDGES, N, K, seed=2), GP.hdrf_vertex_cut(EDGES, N, K)):
        res = cluster.run(GG.pagerank_vertex_cut, K, args=(EDGES, N, ep), kwargs=dict(iters=40))
        assert np.abs(G.assemble(res.values, N) - ref).max() < 1e-12
        mirrors = GP.vertex_cut_metrics(EDGES, ep, N, K)["mirrors"]
        assert sum(v[2]["bytes_sent"][0] for v in res.values) == 2 * 8 * mirrors


def test_vertex_cut_balances_the_hub_that_makes_an_edge_cut_straggle():
    n, K = 200, 4
    hub = np.array([[0, v] for v in range(1, n)] + [[v, (v + 1) % n] for v in range(1, n)])
    # HDRF with lam = 1 keeps a hub's edges together when they stream in first, in a row; lam > 1 or a
    # shuffled stream (the usual loader) spreads them.
    assert GP.vertex_cut_metrics(hub, GP.hdrf_vertex_cut(hub, n, K), n, K)["edge_balance"] == 4.0
    assert GP.vertex_cut_metrics(hub, GP.hdrf_vertex_cut(hub, n, K, lam=1.1), n, K)["edge_balance"] < 1.1
    hub = hub[np.random.default_rng(0).permutation(len(hub))]
    parts = GP.hash_partition(n, K)
    ec = cluster.run(G.pagerank, K, args=(hub, n), kwargs=dict(iters=5, parts=parts, seconds_per_edge=1e-6))
    vc = cluster.run(GG.pagerank_vertex_cut, K, args=(hub, n, GP.hdrf_vertex_cut(hub, n, K)),
                     kwargs=dict(iters=5, seconds_per_edge=1e-6))
    ec_edges = [v[2]["local_edges"] for v in ec.values]
    vc_edges = [v[2]["local_edges"] for v in vc.values]
    assert max(ec_edges) / np.mean(ec_edges) > 1.5 and max(vc_edges) / np.mean(vc_edges) < 1.1
    assert vc.sim_time < 0.8 * ec.sim_time
    assert np.allclose(G.assemble(ec.values, n), G.assemble(vc.values, n), atol=1e-15)


def test_checkpoint_restart_after_a_crash_equals_the_run_without_crash(tmp_path, ref):
    kw = dict(iters=40, checkpoint=str(tmp_path), every=4)
    with pytest.raises(cluster.RankError, match="crash"):
        cluster.run(G.pagerank, 3, args=(EDGES, N), kwargs=kw, faults=cluster.Faults(crash={1: 60}))
    saved = G.latest_checkpoint(str(tmp_path), 3)
    assert 0 < saved < 40
    res = cluster.run(G.pagerank, 3, args=(EDGES, N), kwargs=kw)
    assert res.values[0][2]["start"] == saved and len(res.values[0][2]["residuals"]) == 40 - saved
    assert np.abs(G.assemble(res.values, N) - ref).max() < 1e-12


def test_bad_input_gets_a_readable_error():
    with pytest.raises(ValueError, match="shape"):
        G.reference_pagerank(np.zeros((3, 3), dtype=int), 4, iters=1)
    with pytest.raises(ValueError, match="outside"):
        G.reference_pagerank(np.array([[0, 9]]), 4, iters=1)
    with pytest.raises(ValueError, match="iters"):
        G.reference_pagerank(TINY, N_TINY)
    with pytest.raises(ValueError, match="dangling"):
        G.reference_pagerank(TINY, N_TINY, iters=1, dangling="keep")
    with pytest.raises(ValueError, match="slack"):
        GP.ldg_partition(TINY, N_TINY, 2, slack=0.5)


# --- connected components -------------------------------------------------------------------------

def _scipy_labels(edges, n):
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    adj = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, lab = connected_components(adj, directed=True, connection="weak")
    first = {}
    return np.array([first.setdefault(c, v) for v, c in enumerate(lab)])  # relabel by smallest member


@pytest.mark.parametrize("K", KS)
def test_connected_components_equal_scipy_and_networkx(K):
    nx = pytest.importorskip("networkx")
    sparse = datasets.power_law_graph(300, 260, seed=5)  # sparse: many weak components
    want = _scipy_labels(sparse, 300)
    assert np.array_equal(G.reference_components(sparse, 300), want)
    g = nx.DiGraph()
    g.add_nodes_from(range(300))
    g.add_edges_from(map(tuple, sparse.tolist()))
    comps = {min(c): c for c in nx.weakly_connected_components(g)}
    assert len(comps) == len(set(want)) > 10
    for parts in (None, GP.hash_partition(300, K)):
        res = cluster.run(G.connected_components, K, args=(sparse, 300), kwargs=dict(parts=parts))
        got = G.assemble(res.values, 300)
        assert np.array_equal(got, want)
        assert all(set(np.flatnonzero(got == m)) == c for m, c in comps.items())


def test_components_vote_to_halt_and_more_ranks_than_vertices():
    res = cluster.run(G.connected_components, 8, args=(TINY, N_TINY))
    assert np.array_equal(G.assemble(res.values, N_TINY), [0, 0, 0, 3, 3, 3, 6])
    path = np.array([[v, v + 1] for v in range(20)])  # diameter 20: labels need 20 supersteps to travel
    res = cluster.run(G.connected_components, 3, args=(path, 21))
    info = res.values[0][2]
    assert np.array_equal(G.assemble(res.values, 21), np.zeros(21))
    assert 20 <= len(info["messages"]) <= 22 and info["active"][-1] < info["active"][0]


# --- real processes -------------------------------------------------------------------------------

@pytest.mark.slow
def test_pagerank_and_components_on_processes(ref):
    res = cluster.run(G.pagerank, 2, args=(EDGES, N), kwargs=dict(iters=40, parts=GP.hash_partition(N, 2)),
                      backend="process", timeout=120)
    assert np.abs(G.assemble(res.values, N) - ref).max() < 1e-12
    ep = GP.hdrf_vertex_cut(EDGES, N, 2)
    res = cluster.run(GG.pagerank_vertex_cut, 2, args=(EDGES, N, ep), kwargs=dict(iters=40), backend="process",
                      timeout=120)
    assert np.abs(G.assemble(res.values, N) - ref).max() < 1e-12
    res = cluster.run(G.connected_components, 2, args=(EDGES, N), backend="process", timeout=120)
    assert np.array_equal(G.assemble(res.values, N), G.reference_components(EDGES, N))
