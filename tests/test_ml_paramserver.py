"""Chapter 11: the sharded parameter server against its single-machine reference, SSP, replicas, Ray."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_bounds, block_range
from scaleoutai.errors import RankError
from scaleoutai.ml import paramserver as ps
from scaleoutai.ml.paramserver_server import HEADER, shard_keys

U, I, D = 30, 90, 4
USERS, ITEMS, R = datasets.low_rank_ratings(U, I, 800, seed=3)
TOL = {np.float64: 1e-12, np.float32: 2e-5}


def _run(servers, workers, batch=32, steps=8, lr=3.0, **kw):
    return ps.run_paramserver(USERS, ITEMS, R, U, I, D, servers, workers, batch, steps, lr, **kw)


@pytest.mark.parametrize("servers,workers", [(1, 1), (1, 2), (2, 3), (3, 5), (2, 8), (5, 3)])
@pytest.mark.parametrize("sharding", ["range", "hash"])
def test_bsp_equals_single_machine_sparse_sgd(servers, workers, sharding):
    ref, ref_loss = ps.reference_train(U + I, D, USERS, ITEMS, R, U, 32, 8, 3.0)
    res = _run(servers, workers, sharding=sharding)
    np.testing.assert_allclose(res.table, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.losses, ref_loss, rtol=1e-12)
    assert res.max_gap == 0 and not np.allclose(ref, ps.init_rows(np.arange(U + I), D))  # it trained


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("optimizer,lr", [("sgd", 3.0), ("adagrad", 0.1)])
def test_bsp_equals_reference_for_each_dtype_and_server_optimizer(dtype, optimizer, lr):
    ref, _ = ps.reference_train(U + I, D, USERS, ITEMS, R, U, 24, 6, lr, optimizer=optimizer, dtype=dtype)
    res = _run(3, 4, batch=24, steps=6, lr=lr, optimizer=optimizer, dtype=dtype, sharding="hash")
    assert res.table.dtype == dtype
    np.testing.assert_allclose(res.table, ref, rtol=0, atol=TOL[dtype])


def test_more_workers_than_examples_and_more_servers_than_rows():
    users, items, r = datasets.low_rank_ratings(2, 3, 40, seed=1)  # 5 rows in the table
    ref, _ = ps.reference_train(5, 2, users, items, r, 2, 3, 5, 1.0)
    res = ps.run_paramserver(users, items, r, 2, 3, 2, servers=7, workers=4, batch=3, steps=5, lr=1.0)
    np.testing.assert_allclose(res.table, ref, atol=1e-12)
    assert res.rows_served[5:].sum() == 0  # shards 5 and 6 are empty


@pytest.mark.parametrize("s", [1, 2, 3])
def test_ssp_gap_never_exceeds_s_and_reaches_it_with_a_straggler(s):
    res = _run(2, 4, steps=20, staleness=s, compute_s=1e-4, faults=cluster.Faults(slow={2: 4.0}))
    assert res.gaps[:, 3].max() == s == res.max_gap
    assert (res.gaps[:, 3] >= 0).all()


def test_bsp_has_gap_zero_and_asp_exceeds_any_small_bound():
    slow = cluster.Faults(slow={2: 4.0})
    assert _run(2, 3, steps=15, staleness=0, compute_s=1e-4, faults=slow).max_gap == 0
    assert _run(2, 3, steps=15, staleness=None, compute_s=1e-4, faults=slow).max_gap >= 8


def test_ssp_finishes_sooner_than_bsp_with_transient_stragglers():
    t = {s: _run(2, 6, steps=40, lr=2.0, staleness=s, compute_s=1e-4, jitter=1.0).sim_time for s in (0, 4)}
    assert t[4] < 0.8 * t[0]


def test_worker_bytes_are_the_sparse_rows_it_touched():
    M, K, B, T = 3, 4, 32, 6
    res = _run(M, K, batch=B, steps=T, dtype=np.float32)
    for k in range(K):
        expected, dense = 0, 0
        prev = 0
        for c in range(T + 1):
            n = 0
            if c < T:
                lo, hi = block_range(B, K, k)
                idx = ps.batch_indices(len(R), B, c)[lo:hi]
                n = len(np.unique(np.concatenate([USERS[idx], U + ITEMS[idx]])))
            # per server a header; pull keys of this clock; push keys and float32 rows of the last one
            expected += M * HEADER * 8 + 8 * (n + prev) + prev * D * 4
            prev = n
        dense += T * 2 * (U + I) * D * 4
        assert res.bytes_per_worker[k] == expected
        assert res.bytes_per_worker[k] < dense / 3


def test_no_worker_holds_the_whole_table():
    res = _run(4, 4, batch=16)
    assert 0 < res.max_rows_held <= 2 * 16 // 4 < U + I


def test_server_crash_is_served_by_its_replica_and_loses_no_update():
    base = _run(3, 4, steps=10, replicate=True, optimizer="adagrad", lr=0.1, sharding="hash")
    ref, _ = ps.reference_train(U + I, D, USERS, ITEMS, R, U, 32, 10, 0.1, optimizer="adagrad")
    np.testing.assert_allclose(base.table, ref, atol=1e-12)
    for server in range(3):
        for after in (0, 3, 17, 35):  # a server sends steps x workers = 40 answers
            res = _run(3, 4, steps=10, replicate=True, optimizer="adagrad", lr=0.1, sharding="hash",
                       faults=cluster.Faults(crash={server: after}))
            assert res.dead == [server]
            np.testing.assert_array_equal(res.table, base.table)


def test_a_crash_without_replicas_fails_loudly():
    with pytest.raises(RankError, match="crashed"):
        _run(2, 2, faults=cluster.Faults(crash={1: 2}))


def test_range_sharding_puts_hot_ids_on_one_server_and_hash_spreads_them():
    users, items, r = datasets.low_rank_ratings(50, 2000, 4000, popularity=1.2, seed=0)
    load = {}
    for sharding in ("range", "hash"):
        res = ps.run_paramserver(users, items, r, 50, 2000, 2, servers=4, workers=2, batch=64, steps=10,
                                 lr=1.0, sharding=sharding)
        load[sharding] = res.rows_served.max() / res.rows_served.mean()
    assert load["range"] > 1.5 and load["hash"] < 1.25


@pytest.mark.parametrize("n,m", [(10, 3), (7, 9), (1000, 4)])
def test_shards_partition_the_keys(n, m):
    for sharding in ("range", "hash"):
        parts = [shard_keys(j, n, m, sharding) for j in range(m)]
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))
        for j, keys in enumerate(parts):
            assert (ps.owner_of(keys, n, m, sharding) == j).all()
    assert [len(p) for p in (shard_keys(j, n, m, "range") for j in range(m))] == \
        [hi - lo for lo, hi in block_bounds(n, m)]


def test_init_rows_do_not_depend_on_who_makes_them():
    keys = np.array([5, 1030, 2, 4000])
    np.testing.assert_array_equal(ps.init_rows(keys, 3), ps.init_rows(np.arange(4001), 3)[keys])


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="sharding"):
        _run(2, 2, sharding="modulo")
    with pytest.raises(ValueError, match="staleness"):
        _run(2, 2, staleness=-1)
    with pytest.raises(ValueError, match="workers"):
        _run(2, 0)
    with pytest.raises(ValueError, match="row ids"):
        ps.owner_of(np.array([99]), 10, 2)


@pytest.mark.slow
def test_process_backend_bsp_equals_reference_and_ssp_keeps_its_bound():
    ref, _ = ps.reference_train(U + I, D, USERS, ITEMS, R, U, 32, 6, 3.0)
    res = _run(2, 2, steps=6, backend="process", timeout=90)
    np.testing.assert_allclose(res.table, ref, atol=1e-12)
    res = _run(1, 3, steps=8, staleness=1, backend="process", timeout=90, compute_s=1e-4)
    assert res.max_gap <= 1


# --- Production: each shard a Ray actor, workers as Ray tasks, BSP order -------------------------------

def _ray_train(ray, servers, workers, batch, steps, lr, sharding):
    @ray.remote
    class Shard:
        def __init__(self, j):
            self.keys = shard_keys(j, U + I, servers, sharding)
            self.rows = ps.init_rows(self.keys, D)
            self.inbox = {}

        def pull(self, keys):
            return self.rows[np.searchsorted(self.keys, keys)]

        def push(self, worker, keys, g):
            self.inbox[worker] = (keys, g)

        def apply(self):  # the BSP clock boundary: sum the workers' rows in worker order, one SGD step
            parts = [self.inbox[k] for k in sorted(self.inbox)]
            self.inbox = {}
            keys = np.concatenate([k for k, _ in parts])
            uk, inv = np.unique(keys, return_inverse=True)
            g = np.zeros((len(uk), D))
            np.add.at(g, inv, np.concatenate([x for _, x in parts]))
            self.rows[np.searchsorted(self.keys, uk)] -= lr * g

        def dump(self):
            return self.keys, self.rows

    @ray.remote
    def step(shards, worker, c):
        lo, hi = block_range(batch, workers, worker)
        idx = ps.batch_indices(len(R), batch, c)[lo:hi]
        keys, inv = np.unique(np.concatenate([USERS[idx], U + ITEMS[idx]]), return_inverse=True)
        own = ps.owner_of(keys, U + I, servers, sharding)
        rows = np.empty((len(keys), D))
        for j in np.unique(own):
            rows[own == j] = ray.get(shards[j].pull.remote(keys[own == j]))
        u, v = rows[inv[:len(idx)]], rows[inv[len(idx):]]
        err = (u * v).sum(1) - R[idx]
        g = np.zeros_like(rows)
        np.add.at(g, inv[:len(idx)], (err / batch)[:, None] * v)
        np.add.at(g, inv[len(idx):], (err / batch)[:, None] * u)
        ray.get([shards[j].push.remote(worker, keys[own == j], g[own == j]) for j in range(servers)])

    shards = [Shard.remote(j) for j in range(servers)]
    for c in range(steps):
        ray.get([step.remote(shards, k, c) for k in range(workers)])
        ray.get([s.apply.remote() for s in shards])
    table = np.empty((U + I, D))
    for keys, rows in ray.get([s.dump.remote() for s in shards]):
        table[keys] = rows
    return table


@pytest.mark.slow
def test_ray_actor_shards_give_our_table(ray_local):
    ours = _run(2, 3, steps=5, sharding="hash").table
    theirs = _ray_train(ray_local, 2, 3, 32, 5, 3.0, "hash")
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-12)
    assert not np.allclose(theirs, ps.init_rows(np.arange(U + I), D))
