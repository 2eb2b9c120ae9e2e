"""MapReduce over the communicator (Chapter 6) equals the sequential job for any K."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_range
from scaleoutai.data import mapreduce as mr

KS = [1, 2, 3, 5, 8, 13]  # 13 > the 7 records of SMALL: some ranks map nothing
LINES = datasets.zipf_lines(60, words_per_line=6, vocab=40, seed=1)
SMALL = LINES[:7]


def job(records, mapper, reducer, combiner=None, partitions=None):
    def worker(comm):
        mine, stats = mr.run_mapreduce(comm, records, mapper, reducer, combiner, partitions)
        shuffled = comm.stats.bytes_sent
        return mine, stats, shuffled, mr.gather_result(comm, mine)
    return worker


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("records", [LINES, SMALL, []], ids=["60 lines", "7 lines", "empty"])
def test_word_count_equals_the_sequential_job(K, records):
    ref = mr.reference_mapreduce(records, mr.word_count_mapper, mr.sum_reducer)
    res = cluster.run(job(records, mr.word_count_mapper, mr.sum_reducer), K, timeout=60)
    assert all(v[3] == ref for v in res.values)
    owned = [set(v[0]) for v in res.values]
    assert sum(len(o) for o in owned) == len(ref) and set().union(*owned) == set(ref)  # disjoint, complete


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("partitions", [1, 3, 16])
def test_combiner_and_partition_count_do_not_change_the_answer(K, partitions):
    ref = mr.reference_mapreduce(LINES, mr.word_count_mapper, mr.sum_reducer)
    res = cluster.run(job(LINES, mr.word_count_mapper, mr.sum_reducer, mr.sum_reducer, partitions), K, timeout=60)
    assert all(v[3] == ref for v in res.values)
    for rank, (mine, stats, _, _) in enumerate(res.values):
        assert all(mr.partition_of(key, partitions) % K == rank for key in mine)  # partition p lives on p mod K
        lo, hi = block_range(len(LINES), K, rank)
        distinct = {w for line in LINES[lo:hi] for w in line.split()}
        assert stats.pairs_after_combine == len(distinct) <= stats.pairs_mapped


@pytest.mark.parametrize("K", KS)
def test_values_reach_the_reducer_in_record_order(K):
    # An order-sensitive reducer: exact equality holds only if the shuffle keeps record order.
    records = [(i % 5, float(i) / 7) for i in range(41)]
    ref = mr.reference_mapreduce(records, lambda rec: [rec], lambda k, vs: list(vs))
    res = cluster.run(job(records, lambda rec: [rec], lambda k, vs: list(vs)), K, timeout=60)
    assert all(v[3] == ref for v in res.values)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("K", [1, 3, 8])
def test_weighted_sums_are_bitwise_equal_in_several_dtypes(dtype, K):
    rng = np.random.default_rng(K)
    records = [(f"k{rng.integers(10)}", dtype(rng.standard_normal() * 100)) for _ in range(50)]
    ref = mr.reference_mapreduce(records, lambda rec: [rec], mr.sum_reducer)
    res = cluster.run(job(records, lambda rec: [rec], mr.sum_reducer), K, timeout=60)
    for got in (v[3] for v in res.values):
        assert got.keys() == ref.keys()
        assert all(type(got[k]) is type(ref[k]) and got[k] == ref[k] for k in ref)


@pytest.mark.parametrize("K", KS)
def test_inverted_index_and_join_equal_the_sequential_job(K):
    docs = list(enumerate(LINES[:20]))
    ref = mr.reference_mapreduce(docs, mr.index_mapper, mr.postings_reducer)
    assert cluster.run(job(docs, mr.index_mapper, mr.postings_reducer), K, timeout=60).values[0][3] == ref
    rows = [("L", i % 4, f"order{i}") for i in range(9)] + [("R", i % 6, f"user{i}") for i in range(8)]
    ref = mr.reference_mapreduce(rows, mr.join_mapper, mr.join_reducer)
    assert ref[1] == [(a, b) for a in ("order1", "order5") for b in ("user1", "user7")]
    assert cluster.run(job(rows, mr.join_mapper, mr.join_reducer), K, timeout=60).values[0][3] == ref


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_shuffle_bytes_are_what_the_shuffle_sent_and_near_the_uniform_model(K):
    records = [f"key{i}" for i in range(4000)]  # distinct keys: uniform over the partitions
    res = cluster.run(job(records, lambda rec: [(rec, 1)], mr.sum_reducer), K, timeout=60)
    for mine, stats, shuffled, _ in res.values:
        assert stats.bytes_sent == shuffled  # every byte the rank sent before the final gather
        assert stats.pairs_sent + stats.pairs_kept == stats.pairs_after_combine
        frac = stats.pairs_sent / stats.pairs_after_combine
        assert abs(frac - mr.shuffle_fraction(K)) < 4 * np.sqrt(frac * (1 - frac) / stats.pairs_after_combine) + 0.02


def test_stable_hash_is_the_same_in_every_process():
    res = cluster.run(lambda comm: [mr.stable_hash(k) for k in ("a", ("b", 1), 7)], 2, backend="process",
                      timeout=60, quiet=True)
    assert res.values[0] == res.values[1] == [mr.stable_hash(k) for k in ("a", ("b", 1), 7)]


@pytest.mark.slow
@pytest.mark.parametrize("K", [2, 3])
def test_word_count_on_real_processes_equals_the_sequential_job(K):
    ref = mr.reference_mapreduce(LINES, mr.word_count_mapper, mr.sum_reducer)
    res = cluster.run(job(LINES, mr.word_count_mapper, mr.sum_reducer, mr.sum_reducer), K, backend="process",
                      timeout=90, quiet=True)
    assert all(v[3] == ref for v in res.values)


@pytest.mark.parametrize("call, message", [
    (lambda: mr.join_mapper(("X", 1, "row")), "join rows are"),
    (lambda: datasets.zipf_lines(-1), "n_lines >= 0"),
    (lambda: mr.shuffle_fraction(0), "K must be >= 1"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_zero_partitions_is_a_clear_error():
    with pytest.raises(cluster.RankError, match="partitions must be >= 1"):
        cluster.run(job(LINES, mr.word_count_mapper, mr.sum_reducer, partitions=0), 2, timeout=30)


def test_a_straggler_sets_the_job_time_on_the_simulator():
    def timed(comm):
        mr.run_mapreduce(comm, LINES, mr.word_count_mapper, mr.sum_reducer, map_seconds=1e-3)
        return comm.clock

    even = cluster.run(timed, 3, network=cluster.Network(0.0, 0.0)).sim_time
    slow = cluster.run(timed, 3, network=cluster.Network(0.0, 0.0), faults=cluster.Faults(slow={1: 4.0})).sim_time
    assert even == pytest.approx(20 * 1e-3) and slow == pytest.approx(4 * 20 * 1e-3)  # 60 lines / 3 ranks


# --- map tasks, a master and speculative backups (Section 6) -----------------------------------------

from scaleoutai.data import mapreduce_tasks as mt  # noqa: E402

TASK_LINES = datasets.zipf_lines(120, words_per_line=5, vocab=30, seed=2)


def task_job(records, backups=True, tasks=None, combiner=None, partitions=None, map_seconds=1e-3):
    def worker(comm):
        mine, stats = mt.run_mapreduce_tasks(comm, records, mr.word_count_mapper, mr.sum_reducer, combiner,
                                             partitions, tasks=tasks, map_seconds=map_seconds, backups=backups)
        return mine, stats, mr.gather_result(comm, mine)
    return worker


def straggler(K, factor=5.0):
    return cluster.Faults(slow={1: factor}) if K > 1 else cluster.Faults()


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("records", [TASK_LINES, SMALL, []], ids=["120 lines", "7 lines", "empty"])
def test_task_job_with_backups_and_a_straggler_equals_the_sequential_job(K, records):
    ref = mr.reference_mapreduce(records, mr.word_count_mapper, mr.sum_reducer)
    res = cluster.run(task_job(records, tasks=max(1, K - 1)), K, faults=straggler(K), timeout=60)
    assert all(v[2] == ref for v in res.values)
    owned = [set(v[0]) for v in res.values]
    assert sum(len(o) for o in owned) == len(ref) and set().union(*owned) == set(ref)


@pytest.mark.parametrize("K", [3, 5, 8])
@pytest.mark.parametrize("combiner", [None, mr.sum_reducer], ids=["no combiner", "combiner"])
def test_backups_keep_every_task_exactly_once(K, combiner):
    # An order-sensitive reducer would show a duplicated or lost task as a wrong list.
    records = [(i % 7, i) for i in range(90)]

    def worker(comm):
        mine, stats = mt.run_mapreduce_tasks(comm, records, lambda rec: [rec], lambda k, vs: list(vs),
                                             tasks=2 * (K - 1), map_seconds=1e-3)
        return stats, mr.gather_result(comm, mine)

    res = cluster.run(worker, K, faults=straggler(K), timeout=60)
    ref = mr.reference_mapreduce(records, lambda rec: [rec], lambda k, vs: list(vs))
    assert all(v[1] == ref for v in res.values)
    master = res.values[0][0]
    assert master.backups_launched >= 1
    assert sum(v[0].tasks_kept for v in res.values) == master.tasks == 2 * (K - 1)
    won = sorted(task for task, *_, outcome in master.schedule if outcome == "won")
    assert won == list(range(master.tasks))


@pytest.mark.parametrize("K", [3, 4, 5, 8])
@pytest.mark.parametrize("tasks_per_worker", [1, 2])  # with many small tasks the pull alone may hide it
def test_backups_cut_the_makespan_under_a_5x_straggler(K, tasks_per_worker):
    M = tasks_per_worker * (K - 1)
    off = cluster.run(task_job(TASK_LINES, False, M), K, faults=straggler(K), timeout=60)
    on = cluster.run(task_job(TASK_LINES, True, M), K, faults=straggler(K), timeout=60)
    assert on.sim_time < off.sim_time
    assert off.values[0][1].backups_launched == 0 and on.values[0][1].backups_won >= 1
    assert on.values[0][1].wasted_seconds > 0  # the price: the straggler's aborted work


@pytest.mark.parametrize("K", [2, 3, 5, 8])
@pytest.mark.parametrize("tasks_per_worker", [1, 3])
def test_no_backup_is_launched_without_a_straggler(K, tasks_per_worker):
    M = tasks_per_worker * (K - 1)
    on = cluster.run(task_job(TASK_LINES, True, M), K, timeout=60)
    off = cluster.run(task_job(TASK_LINES, False, M), K, timeout=60)
    stats = on.values[0][1]
    assert stats.backups_launched == 0 and stats.wasted_seconds == 0
    assert on.sim_time == off.sim_time


def test_task_job_is_deterministic_on_the_simulator():
    runs = [cluster.run(task_job(TASK_LINES, True, 8), 5, faults=straggler(5), timeout=60) for _ in range(2)]
    assert runs[0].sim_time == runs[1].sim_time
    assert runs[0].values[0][1].schedule == runs[1].values[0][1].schedule


def test_more_tasks_than_workers_beat_static_blocks_under_a_straggler():
    def static(comm):
        mr.run_mapreduce(comm, TASK_LINES, mr.word_count_mapper, mr.sum_reducer, map_seconds=1e-3)

    blocks = cluster.run(static, 5, faults=straggler(5), timeout=60).sim_time
    tasks = cluster.run(task_job(TASK_LINES, True, 16), 5, faults=straggler(5), timeout=60).sim_time
    assert tasks < blocks


@pytest.mark.parametrize("kwargs, message", [
    ({"tasks": 0}, "tasks must be >= 1"),
    ({"margin": 0.5}, "margin >= 1"),
    ({"heartbeat": -1.0}, "heartbeat must be >= 0"),
    ({"partitions": 0}, "partitions must be >= 1"),
])
def test_bad_task_job_arguments_are_clear_errors(kwargs, message):
    def worker(comm):
        mt.run_mapreduce_tasks(comm, TASK_LINES, mr.word_count_mapper, mr.sum_reducer, **kwargs)

    with pytest.raises(cluster.RankError, match=message):
        cluster.run(worker, 2, timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("K", [2, 3])
def test_task_job_with_backups_on_real_processes_equals_the_sequential_job(K):
    ref = mr.reference_mapreduce(TASK_LINES, mr.word_count_mapper, mr.sum_reducer)
    res = cluster.run(task_job(TASK_LINES, True, 4, map_seconds=2e-4), K, backend="process",
                      faults=cluster.Faults(slow={1: 5.0}), timeout=90, quiet=True)
    assert all(v[2] == ref for v in res.values)
    assert res.values[0][1].tasks == sum(v[1].tasks_kept for v in res.values) == 4
