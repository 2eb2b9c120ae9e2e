"""Chapter 38: row-sharded embedding tables over the communicator equal torch's dense EmbeddingBag model;
byte counts, placements, skew, crash and re-sharded resume; retrieval metrics against hand counts and sklearn."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cases import recsys as rc
from scaleoutai.cases import recsys_shard as rs
from scaleoutai.cases import recsys_train as rt
from scaleoutai.datasets.recsys import recsys_interactions

TOL = {np.float64: 1e-10, np.float32: 2e-5}  # max |sharded - dense| over every parameter after 3 steps


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    # the simulator runs every rank in one thread; torch's own threads only fight the other test workers
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data():
    # 41 features and 97 items (primes): no K > 1 divides either vocabulary, so every shard is uneven
    return recsys_interactions(150, 97, 41, per_user=6, test_per_user=1, bag_size=(2, 6), seed=3)


def _params(data, dtype=np.float64):
    return rc.init_two_tower(data.n_features, data.n_items, d=8, hidden=12, out=6, seed=1, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode,weighted,optimizer", [("sum", False, "sgd"), ("mean", False, "adagrad"),
                                                     ("sum", True, "adagrad")])
@pytest.mark.parametrize("K,scheme,replicate", [(1, "mod", (0, 0)), (2, "range", (0, 0)), (3, "mod", (2, 3)),
                                                (5, "hash", (1, 0)), (20, "range", (0, 2))])
def test_sharded_training_equals_the_dense_torch_model_for_every_K_mode_and_dtype(data, K, scheme, replicate, mode,
                                                                                  weighted, optimizer, dtype):
    p0 = _params(data, dtype)
    lr = 0.5 if optimizer == "sgd" else 0.05
    want, want_loss = rc.reference_train(data, p0, 3, 16, lr, mode=mode, weighted=weighted, optimizer=optimizer)
    run = rt.run_sharded(data, p0, K, 3, 16, lr, scheme=scheme, replicate=replicate, mode=mode, weighted=weighted,
                         optimizer=optimizer, timeout=60)
    got, loss = run.params, run.losses
    for k in want:
        assert got[k].dtype == dtype
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=TOL[dtype], err_msg=k)
    np.testing.assert_allclose(loss, want_loss, rtol=10 * TOL[dtype])
    assert not np.allclose(got["item_table"], p0["item_table"])  # it did train
    if K == 20:  # K > B = 16: some ranks hold no rows of the batch, and more ranks than rows touched
        assert len(np.unique(data.train_items[rc.batch_rows(len(data.train_items), 16, 0)])) < K


def _bags(rng, V, n_bags, max_len=5, empty=True):
    lengths = rng.integers(0 if empty else 1, max_len + 1, size=n_bags)
    ids = rng.integers(0, V, size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return ids, offsets, rng.uniform(0.5, 2.0, size=len(ids))


@pytest.mark.parametrize("K", [1, 2, 3, 5, 13])
@pytest.mark.parametrize("mode,weighted", [("sum", False), ("mean", False), ("sum", True)])
def test_lookup_and_its_gradient_equal_torch_embedding_bag_with_empty_bags(K, mode, weighted):
    import torch

    V, d = 11, 4
    rng = np.random.default_rng(K)
    table = rng.standard_normal((V, d))
    bags = [_bags(np.random.default_rng([K, r]), V, 4) for r in range(K)]
    grads = [np.random.default_rng([K, r, 1]).standard_normal((4, d)) for r in range(K)]
    p = rs.place_rows(V, K, "range", replicated=[0, 3] if K > 2 else [])

    def worker(comm):
        shard = rs.shard_table(table, p, comm.rank)
        ids, offsets, w = bags[comm.rank]
        pooled, ctx = rs.sharded_bag_forward(comm, p, shard, ids, offsets, w if weighted else None, mode)
        d_rows, d_rep = rs.sharded_bag_backward(comm, p, shard, ctx, grads[comm.rank])
        return pooled, {"ids": shard["ids"], "rows": d_rows, "rep_ids": shard["rep_ids"], "replica": d_rep}

    res = cluster.run(worker, K, timeout=30)
    weight = torch.tensor(table, requires_grad=True)
    for r, (ids, offsets, w) in enumerate(bags):
        want = torch.nn.functional.embedding_bag(torch.tensor(ids), weight, torch.tensor(offsets), mode=mode,
                                                 per_sample_weights=torch.tensor(w) if weighted else None)
        np.testing.assert_allclose(res.values[r][0], want.detach().numpy(), rtol=0, atol=1e-13)
        (want * torch.tensor(grads[r])).sum().backward()
    np.testing.assert_allclose(rs.gather_table([v[1] for v in res.values], V), weight.grad.numpy(), rtol=0, atol=1e-13)


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("weighted,replicate", [(False, (0, 0)), (True, (3, 4))])
def test_bytes_sent_in_a_step_equal_the_counted_ids_vectors_and_all_reduces(data, K, weighted, replicate):
    p0 = _params(data)
    res = rt.run_sharded(data, p0, K, 1, 16, 0.5, replicate=replicate, weighted=weighted, timeout=30).result
    pu, pi = rt.placements(data, K, "mod", replicate)
    n_mlp = sum(p0[k].size for k in rc.MLP_KEYS)
    model = rt.step_bytes(data, pu, pi, rc.batch_rows(len(data.train_items), 16, 0), 8, 6, n_mlp, 8, weighted)
    assert sum(s.bytes_sent for s in res.stats) == sum(model.values())
    assert model["user ids"] > 0 and (model["user weights"] > 0) == weighted
    # the data-parallel alternative all-reduces both full tables: more bytes even for these tiny tables
    assert rt.replicated_step_bytes(data.n_features, data.n_items, 8, n_mlp, K, 16, 6) > sum(model.values())


@pytest.mark.parametrize("scheme", rs.SCHEMES)
@pytest.mark.parametrize("V,K", [(10, 1), (10, 3), (7, 7), (5, 8), (97, 5)])
def test_every_row_has_one_owner_and_local_rows_are_contiguous(scheme, V, K):
    p = rs.place_rows(V, K, scheme, replicated=[1] if V > 1 else [])
    assert p.owner[1] == -1 and p.local[1] == 0 and list(p.replicated) == [1]
    seen = np.concatenate([p.ids_of(r) for r in range(K)])
    assert np.array_equal(np.sort(seen), np.setdiff1d(np.arange(V), [1]))
    for r in range(K):
        assert np.array_equal(p.local[p.ids_of(r)], np.arange(len(p.ids_of(r))))
    if scheme == "range":  # contiguous blocks cut by the course's one split rule
        assert list(p.rows_per_rank()) == [hi - lo for lo, hi in rs.block_bounds(V - 1, K)]
    if scheme == "mod":
        assert np.array_equal(p.owner[p.owner >= 0] % 1, np.zeros(V - 1)) and p.owner[0] == 0


def test_bad_placements_and_modes_raise_one_clear_error():
    with pytest.raises(ValueError, match="scheme"):
        rs.place_rows(10, 2, "random")
    with pytest.raises(ValueError, match="replicated"):
        rs.place_rows(10, 2, replicated=[10])
    with pytest.raises(cluster.RankError, match="mode='mean' with weights"):  # the rank's ValueError, named
        cluster.run(lambda comm: rs.sharded_bag_forward(comm, rs.place_rows(3, 1), {"rows": np.zeros((3, 2))},
                                                        np.array([0]), np.array([0]), np.ones(1), "mean"), 1)
    with pytest.raises(ValueError, match="batch size"):
        rc.batch_rows(10, 11, 0)
    with pytest.raises(ValueError, match="optimizer"):
        rc.make_optimizer(rc.reference_model(rc.init_two_tower(3, 3, 2, 2, 2)), "adam", 0.1)


def test_replicating_the_hottest_rows_cuts_the_zipf_load_imbalance():
    d = recsys_interactions(2000, 1000, 200, per_user=10, zipf=1.3, seed=0)
    K = 8
    imbalance = {}
    for name, scheme, h in (("range", "range", 0), ("mod", "mod", 0), ("mod+replicate", "mod", 32)):
        p = rs.place_rows(d.n_items, K, scheme, rs.hot_ids(d.train_items, d.n_items, h))
        load = rs.owner_load(p, d.train_items)
        assert load.sum() == pytest.approx(len(d.train_items))
        imbalance[name] = load.max() / load.mean()
    assert imbalance["range"] > 2.0 > imbalance["mod"] > imbalance["mod+replicate"], imbalance
    assert imbalance["mod+replicate"] < 1.1


def test_a_crashed_shard_names_its_rank_and_training_resumes_on_fewer_ranks_after_resharding(data, tmp_path):
    p0 = _params(data)
    want, _ = rc.reference_train(data, p0, 5, 16, 0.05, optimizer="adagrad")
    kw = dict(ckpt_dir=str(tmp_path), ckpt_every=2, optimizer="adagrad", timeout=30)
    ok = rt.run_sharded(data, p0, 3, 1, 16, 0.05, **dict(kw, ckpt_dir=None)).result
    per_step = ok.stats[2].messages_sent
    with pytest.raises(cluster.ClusterError, match="rank 2") as err:  # dies in step 4, after the step-2 checkpoint
        rt.run_sharded(data, p0, 3, 5, 16, 0.05, faults=cluster.Faults(crash={2: 3 * per_step + 2}), **kw)
    assert "embedding shard on rank 2 is lost" in str(err.value) or isinstance(err.value, cluster.RankCrashed)
    step, params, state = rt.load_checkpoint(tmp_path, data.n_features, data.n_items)
    assert step == 2 and state is not None and state["item_table"].any()  # rows and their Adagrad sums
    pu2, _ = rt.placements(data, 2)
    pu3, _ = rt.placements(data, 3)
    assert (pu2.owner != pu3.owner).sum() > data.n_features // 2  # re-sharding moved most rows
    run = rt.run_sharded(data, params, 2, 5 - step, 16, 0.05, start_step=step, optimizer="adagrad", state=state,
                         timeout=30)
    for k in want:
        np.testing.assert_allclose(run.params[k], want[k], rtol=0, atol=1e-10, err_msg=k)


def test_recall_and_ndcg_match_hand_counts_and_sklearn():
    from sklearn.metrics import ndcg_score

    topk = np.array([[3, 1, 4, 0], [2, 0, 1, 3]])
    rel = [np.array([1, 0]), np.array([3])]
    assert rc.recall_at_k(topk, rel, 2) == pytest.approx((1 / 2 + 0) / 2)
    assert rc.recall_at_k(topk, rel, 4) == pytest.approx(1.0)
    assert rc.recall_at_k(topk, [rel[0], np.array([], dtype=int)], 2) == pytest.approx(1 / 2)  # no relevant: skipped
    # user 0: hits at ranks 2 and 4 -> (1/log2 3 + 1/log2 5) / (1 + 1/log2 3); user 1: hit at rank 4
    want = ((1 / np.log2(3) + 1 / np.log2(5)) / (1 + 1 / np.log2(3)) + 1 / np.log2(5)) / 2
    assert rc.ndcg_at_k(topk, rel, 4) == pytest.approx(want)
    rng = np.random.default_rng(0)
    S = rng.standard_normal((30, 25))
    truth = (rng.random((30, 25)) < 0.15).astype(float)
    truth[truth.sum(1) == 0, 0] = 1.0
    top = rc.topk_items(S, np.eye(25), 25)
    for k in (1, 5, 10):
        assert rc.ndcg_at_k(top, [np.flatnonzero(t) for t in truth], k) == pytest.approx(ndcg_score(truth, S, k=k))


def test_brute_force_topk_masks_seen_items_and_popularity_ranks_by_count():
    rng = np.random.default_rng(1)
    U, V = rng.standard_normal((7, 3)), rng.standard_normal((20, 3))
    seen = [np.array([i, i + 1]) for i in range(7)]
    top = rc.topk_items(U, V, 5, seen)
    for u in range(7):
        S = U[u] @ V.T
        S[seen[u]] = -np.inf
        assert np.array_equal(top[u], np.argsort(-S, kind="stable")[:5])
    pop = rc.popularity_topk(np.array([4, 4, 4, 2, 2, 9]), 10, 2, 3, [np.array([4]), np.array([], dtype=int)])
    assert pop[0].tolist() == [2, 9, 0] and pop[1].tolist() == [4, 2, 9]
    with pytest.raises(ValueError, match="k="):
        rc.recall_at_k(top, seen, 6)
