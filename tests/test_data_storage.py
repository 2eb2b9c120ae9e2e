"""Consistent hashing, replication, sharded files and read amplification (Chapter 8)."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.data import sampler as sp
from scaleoutai.data import storage as st

KEYS = [f"key-{i}" for i in range(20_000)]


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_a_join_moves_about_one_over_n_plus_one_of_the_keys_and_modulo_moves_most(n):
    before, after = st.HashRing(range(n), vnodes=128), st.HashRing(range(n + 1), vnodes=128)
    moved = st.moved_fraction(before, after, KEYS)
    assert abs(moved - st.expected_moved_fraction(n)) < 0.35 * st.expected_moved_fraction(n)
    naive = st.moved_fraction(list(range(n)), list(range(n + 1)), KEYS)
    assert abs(naive - st.expected_moved_fraction(n, scheme="modulo")) < 0.03
    # every moved key moved to the new node: nothing shuffles between old nodes
    assert all(b == a or b == n for a, b in zip(before.owner_of_each(KEYS), after.owner_of_each(KEYS)))


def test_a_leave_moves_only_the_leaving_nodes_keys():
    ring = st.HashRing(range(6), vnodes=64)
    before = ring.owner_of_each(KEYS)
    ring.remove(3)
    after = ring.owner_of_each(KEYS)
    assert all((a == b) == (a != 3) for a, b in zip(before, after))
    assert abs(sum(a == 3 for a in before) / len(KEYS) - st.expected_moved_fraction(6, "leave")) < 0.35 / 6
    assert after == st.HashRing([0, 1, 2, 4, 5], vnodes=64).owner_of_each(KEYS)  # same as built without it


def test_more_virtual_nodes_balance_the_load():
    imb = {v: st.load_imbalance(st.HashRing(range(10), vnodes=v).load(KEYS)) for v in (1, 16, 1024)}
    assert imb[1] > 2 * imb[16] and imb[16] > imb[1024] and imb[1024] < 1.1


@pytest.mark.parametrize("r", [1, 2, 3, 5])
def test_replicas_are_distinct_physical_nodes_and_survive_r_minus_1_failures(r):
    ring = st.HashRing([f"n{i}" for i in range(5)], vnodes=32, replicas=r)
    for key in KEYS[:300]:
        owners = ring.owners(key)
        assert len(owners) == len(set(owners)) == r and owners[0] == ring.owner(key)
        assert st.live_owner(ring, key, set(owners[:-1])) == owners[-1]
    with pytest.raises(LookupError, match="replicas"):
        st.live_owner(ring, KEYS[0], set(ring.owners(KEYS[0])))


def test_naive_owners_is_hash_mod_n_and_bad_input_is_named():
    assert st.naive_owners("a", [10, 11, 12], 2)[0] == [10, 11, 12][st.stable_hash("a") % 3]
    with pytest.raises(ValueError, match="vnodes"):
        st.HashRing([1], vnodes=0)
    with pytest.raises(ValueError, match="not on the ring"):
        st.HashRing([1]).remove(2)
    with pytest.raises(ValueError, match="no nodes"):
        st.HashRing([]).owner("a")


@pytest.mark.parametrize("n,shards", [(100, 1), (100, 7), (5, 8), (257, 16)])
def test_sharded_files_return_every_record_by_global_index(tmp_path, n, shards):
    records = datasets.make_records(n, seed=2, min_len=1, max_len=40)
    ds = st.write_sharded(tmp_path, records, shards)
    reader = st.BlockReader(ds, block_bytes=64)
    for i in np.random.default_rng(0).permutation(n):
        assert np.array_equal(reader.read(int(i)), records[i])
    assert not list(tmp_path.glob("*.tmp"))  # every file renamed into place
    assert sum(ds.shard_bytes(s) for s in range(shards)) == sum(r.nbytes for r in records)


def test_read_amplification_is_one_sequentially_and_about_block_over_record_at_random(tmp_path):
    records = datasets.make_records(400, seed=1, min_len=100, max_len=100)  # 400-byte records
    ds = st.write_sharded(tmp_path, records, 4)
    assert st.read_amplification(ds, range(400), 4096) == pytest.approx(1.0)
    random = np.random.default_rng(3).permutation(400)
    amp = st.read_amplification(ds, random, 4096)
    assert 8 < amp < 12  # a 4096-byte block for a 400-byte record, sometimes two blocks
    assert st.read_amplification(ds, random, None) > 60  # a whole 40 KB shard per record, unless it is the last one
    assert st.read_amplification(ds, random, None, cache_blocks=4) == pytest.approx(1.0)  # shards fit in cache


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 12])
def test_ranks_load_their_sampler_indices_from_the_shard_files(tmp_path, K):
    records = datasets.make_records(10, seed=5, min_len=3, max_len=9)
    st.write_sharded(tmp_path, records, 3)
    res = cluster.run(st.run_loader, K, args=(str(tmp_path), 2, 7), timeout=60)
    for r, (mine, got, stats) in enumerate(res.values):
        assert np.array_equal(mine, sp.shard_indices(10, K, r, 2, 7))
        assert all(np.array_equal(a, records[i]) for a, i in zip(got, mine))
        assert stats["bytes_needed"] == sum(records[i].nbytes for i in mine)
    assert sp.epoch_counts([v[0] for v in res.values], 10).min() == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_loader_on_real_processes_reads_the_same_records(tmp_path):
    records = datasets.make_records(21, seed=5)
    st.write_sharded(tmp_path, records, 4)
    res = cluster.run(st.run_loader, 2, backend="process", args=(str(tmp_path), 1, 0, True), timeout=90, quiet=True)
    for r, (mine, got, _) in enumerate(res.values):
        assert np.array_equal(mine, sp.shard_indices(21, 2, r, 1, 0, drop_last=True))
        assert all(np.array_equal(a, records[i]) for a, i in zip(got, mine))
