"""The deterministic distributed sampler (Chapter 8): exactly-once epochs, torch's padding and r::K,
reshuffled by epoch, resumable mid-epoch, computed locally on every rank, equal to torch's sampler."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.data import sampler as sp

KS = [1, 2, 3, 5, 8, 9]
NS = [1, 7, 10, 23, 100]  # uneven for most K, and K > n for the small ones


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("n", NS)
def test_padded_epoch_reads_every_sample_and_only_the_padding_twice(n, K):
    lists = sp.reference_epoch(n, K, epoch=2, seed=3)
    assert {len(x) for x in lists} == {-(-n // K)}  # every rank the same count: no rank waits on another
    counts = sp.epoch_counts(lists, n)
    assert counts.min() >= 1 and counts.sum() == K * -(-n // K)
    order = sp.epoch_order(n, 2, 3)
    pad = K * -(-n // K) - n
    assert np.array_equal(np.bincount(np.resize(order, n + pad), minlength=n), counts)  # repeats from the start


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("n", NS)
def test_drop_last_reads_each_sample_at_most_once_and_drops_n_mod_k(n, K):
    lists = sp.reference_epoch(n, K, epoch=1, seed=0, drop_last=True)
    counts = sp.epoch_counts(lists, n)
    assert counts.max(initial=0) <= 1 and counts.sum() == K * (n // K)
    assert {len(x) for x in lists} == {n // K}


def test_rank_takes_every_kth_index_of_the_padded_order():
    order = sp.epoch_order(10, 0, 7)
    padded = np.concatenate([order, order[:2]])
    for r in range(4):
        assert np.array_equal(sp.shard_indices(10, 4, r, 0, 7), padded[r::4])
    assert np.array_equal(sp.shard_indices(10, 4, 1, shuffle=False), [1, 5, 9])
    assert np.array_equal(sp.shard_indices(3, 5, 4, shuffle=False), [1])  # pad > n: repeat again


def test_orders_differ_across_epochs_and_repeat_across_calls():
    a, b = sp.shard_indices(50, 3, 1, epoch=0, seed=1), sp.shard_indices(50, 3, 1, epoch=1, seed=1)
    assert not np.array_equal(a, b) and set(np.concatenate(sp.reference_epoch(50, 3, 1, 1))) == set(range(50))
    assert np.array_equal(a, sp.shard_indices(50, 3, 1, epoch=0, seed=1))
    assert not np.array_equal(a, np.sort(a))


@pytest.mark.parametrize("start", [0, 1, 5, 33, 34, 40])
def test_resume_at_start_returns_exactly_the_tail(start):
    full = sp.shard_indices(100, 3, 2, epoch=4, seed=9)
    tail = sp.shard_indices(100, 3, 2, epoch=4, seed=9, start=start)
    assert np.array_equal(tail, full[start:])
    done = full[:start]
    assert sorted(np.concatenate([done, tail]).tolist()) == sorted(full.tolist())  # no skip, no repeat


def test_resume_position_counts_samples_of_finished_steps():
    assert sp.resume_position(7, 4) == 28
    with pytest.raises(ValueError, match="batch_size"):
        sp.resume_position(1, 0)


@pytest.mark.parametrize("n,K,epoch,drop_last", [(10, 3, 0, False), (10, 3, 5, True), (7, 9, 2, False),
                                                 (7, 9, 2, True), (101, 8, 1, False), (64, 4, 3, True)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_equals_torch_distributed_sampler_index_for_index(n, K, epoch, drop_last, shuffle):
    for r in range(K):
        ours = sp.shard_indices(n, K, r, epoch, seed=11, shuffle=shuffle, drop_last=drop_last, generator="torch")
        assert np.array_equal(ours, sp.torch_indices(n, K, r, epoch, 11, shuffle, drop_last)), r


def test_numpy_order_keeps_torchs_sizes_and_exactly_once_but_not_its_order():
    ours = sp.reference_epoch(101, 4, 2, 11)
    torch_lists = [sp.torch_indices(101, 4, r, 2, 11) for r in range(4)]
    assert [len(x) for x in ours] == [len(x) for x in torch_lists]
    assert np.array_equal(sp.epoch_counts(ours, 101).clip(max=1), sp.epoch_counts(torch_lists, 101).clip(max=1))
    assert not np.array_equal(ours[0], torch_lists[0])


@pytest.mark.parametrize("bad,msg", [(dict(n=-1), "n must"), (dict(K=0), "K must"), (dict(rank=3), "rank=3"),
                                     (dict(start=-2), "start must"), (dict(generator="jax"), "generator"),
                                     (dict(n=0), "empty dataset")])
def test_bad_arguments_get_one_readable_line(bad, msg):
    args = dict(n=10, K=3, rank=0) | bad
    with pytest.raises(ValueError, match=msg):
        sp.shard_indices(**args)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 9, 12])
def test_each_rank_computes_locally_and_the_gathered_lists_are_the_epoch(K):
    n = 10  # K = 12 > n
    res = cluster.run(sp.run_sampler, K, args=(n, 3, 4), timeout=60)
    want = sp.reference_epoch(n, K, 3, 4)
    for r, (mine, everyone) in enumerate(res.values):
        assert np.array_equal(mine, want[r])
        assert np.array_equal(everyone.reshape(K, -1), np.stack(want))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_real_processes_compute_their_lists_without_talking_and_union_is_the_epoch():
    res = cluster.run(sp.run_sampler, 2, backend="process", args=(23, 1, 0, True, True), timeout=90, quiet=True)
    want = sp.reference_epoch(23, 2, 1, 0, drop_last=True)
    assert [np.array_equal(m, w) for (m, _), w in zip(res.values, want)] == [True, True]
    assert sp.epoch_counts([res.values[0][1]], 23).sum() == 22
