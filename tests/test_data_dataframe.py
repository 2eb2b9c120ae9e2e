"""The partitioned DataFrame of Chapter 7 equals its single-machine reference for any K; its plan has
one stage per shuffle + 1; a lost partition is rebuilt from lineage running only the tasks it names."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.data.dataframe import (DataFrame, assert_frame_close, col, lineage, lit, recompute_partition,
                                       recompute_partitions, reference_query, run_query)

KS = [1, 2, 3, 5, 8, 50]  # 50 > the 37 rows of T: some ranks hold no rows at all
RNG = np.random.default_rng(7)
N = 37  # not a multiple of any K > 1 but 37: uneven partitions
T = {"k": RNG.integers(0, 6, N), "x": RNG.standard_normal(N) * 10, "y": RNG.integers(-50, 50, N),
     "g": RNG.integers(0, 2, N)}
T["k"][:10] = 9  # key 9 only in the first rows: absent from every later block
U = {"k": np.array([0, 2, 2, 5, 9, 11]), "w": np.array([1.5, -2.0, 4.0, 0.25, 8.0, 3.0])}  # 11 matches nothing


def run(query, K, backend="sim"):
    """collect() of ``query(comm)`` on K ranks; every rank must return the same result."""
    def worker(comm):
        return query(comm).collect()
    res = cluster.run(worker, K, backend=backend, timeout=90, **({"quiet": True} if backend == "process" else {}))
    for v in res.values[1:]:
        assert_frame_close(v, res.values[0], rtol=0, atol=0)
    return res.values[0]


def t(comm):
    return DataFrame.from_table(comm, T, "t")


def u(comm):
    return DataFrame.from_table(comm, U, "u")


OPS = {
    "select": lambda c: t(c).select("y", "k"),
    "filter expr": lambda c: t(c).filter((col("x") > 0) & ~(col("k") == 3) | (col("y") < -40)),
    "filter callable": lambda c: t(c).filter(lambda cols: cols["y"] % 3 == 0),
    "with_column": lambda c: t(c).with_column("z", col("x") * 2 + col("y")).with_column("one", lit(1)),
    "overwrite column": lambda c: t(c).with_column("y", col("y") - 1),
    "group_by sum/count": lambda c: t(c).group_by("k").agg(s=("y", "sum"), n=("x", "count"), f=("x", "sum")),
    "group_by mean/min/max": lambda c: t(c).group_by("k", "g").agg(m=("x", "mean"), lo=("y", "min"), hi=("x", "max")),
    "join": lambda c: t(c).join(u(c), on="k"),
    "composed": lambda c: (t(c).filter(col("x") > -5).with_column("z", col("y") * 2)
                           .join(u(c), on="k").group_by("g").agg(s=("z", "sum"), m=("w", "mean"), n=("k", "count"))
                           .filter(col("n") > 0)),
}


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("name", list(OPS))
def test_every_operator_equals_the_reference(name, K):
    got = run(OPS[name], K)
    want = reference_query(OPS[name](None))
    assert len(want[next(iter(want))]) > 0  # the case is not vacuous
    assert_frame_close(got, want, rtol=1e-12)  # float sums in another order: rounding only
    assert {k: v.dtype for k, v in got.items()} == {k: v.dtype for k, v in want.items()}


def test_result_types_are_spark_s_and_integers_are_exact():
    got = run(OPS["group_by sum/count"], 3)
    assert got["s"].dtype == np.int64 and got["n"].dtype == np.int64 and got["f"].dtype == np.float64
    big = {"k": np.zeros(4, dtype=np.int64), "v": np.array([2**62, 1, -(2**62), 3], dtype=np.int64)}
    got = run(lambda c: DataFrame.from_table(c, big).group_by("k").agg(s=("v", "sum")), 4)
    assert got["s"].tolist() == [4]  # through a float it would round away the 1 and the 3


@pytest.mark.parametrize("K", [1, 3, 8])
def test_from_columns_with_uneven_and_empty_slices_equals_the_reference(K):
    cuts = np.sort(np.random.default_rng(K).integers(0, N, K - 1))
    edges = np.concatenate([[0], cuts, [N]])  # some slices empty when cuts repeat
    if K > 1:
        edges[1] = 0  # rank 0 holds nothing
    strings = {**T, "name": np.array([f"n{v % 4}" for v in T["y"]])}

    def query(comm):
        lo, hi = edges[comm.rank], edges[comm.rank + 1]
        mine = {k: v[lo:hi] for k, v in strings.items()}
        return DataFrame.from_columns(comm, mine, "t").group_by("name").agg(s=("x", "sum"), n=("y", "count"))

    got = run(query, K)
    want = reference_query(DataFrame.from_columns(None, strings, "t").group_by("name")
                           .agg(s=("x", "sum"), n=("y", "count")), tables={"t": strings})
    assert_frame_close(got, want, rtol=1e-12)
    assert got["name"].tolist() == ["n0", "n1", "n2", "n3"]


@pytest.mark.parametrize("K", [1, 4, 9])
def test_a_filter_that_keeps_nothing_gives_typed_empty_columns(K):
    got = run(lambda c: t(c).filter(col("x") > 1e9).group_by("k").agg(s=("y", "sum"), m=("x", "mean")), K)
    assert all(len(v) == 0 for v in got.values())
    assert got["k"].dtype == np.int64 and got["s"].dtype == np.int64 and got["m"].dtype == np.float64


PLANS = {  # name -> (query, stages): one stage per shuffle + 1, shuffles skipped as Spark skips them
    "narrow only": (lambda c: t(c).filter(col("x") > 0).with_column("z", col("x") * 2).select("k", "z"), 1),
    "group_by": (OPS["group_by sum/count"], 2),
    "join": (OPS["join"], 3),
    "join then group_by on the join key": (lambda c: t(c).join(u(c), on="k").group_by("k").agg(s=("w", "sum")), 3),
    "group_by then join on its key": (lambda c: t(c).group_by("k").agg(s=("y", "sum")).join(u(c), on="k"), 3),
    "group_by on a superset of the keys": (lambda c: t(c).group_by("k").agg(s=("y", "sum"))
                                           .group_by("k", "s").agg(n=("s", "count")), 2),
    "group_by on another key": (lambda c: t(c).group_by("k", "g").agg(s=("y", "sum"))
                                .group_by("g").agg(n=("s", "count")), 3),
    "overwritten key loses the partitioning": (lambda c: t(c).group_by("k").agg(s=("y", "sum"))
                                               .with_column("k", col("k") % 2).group_by("k").agg(n=("s", "sum")), 3),
    "composed": (OPS["composed"], 4),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_stage_count_is_shuffles_plus_one_and_the_result_is_right(name):
    query, stages = PLANS[name]
    assert query(None).stages() == stages
    for K in (1, 3, 5):
        assert_frame_close(run(query, K), reference_query(query(None)), rtol=1e-12)


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("name", ["narrow only", "group_by", "composed"])
def test_nothing_moves_until_the_action_and_each_shuffle_is_one_all_to_all(name, K):
    query, stages = PLANS[name]

    def worker(comm):
        df = query(comm)
        before = comm.stats.messages_sent
        _, stats = df.collect_partition()
        return before, comm.stats.messages_sent, comm.stats.bytes_sent, stats

    for before, after, sent, stats in cluster.run(worker, K, timeout=60).values:
        assert before == 0 and after == (K - 1) * (stages - 1)
        assert len(stats.shuffles) == stages - 1
        assert sum(s["bytes_sent"] for s in stats.shuffles) <= sent


@pytest.mark.parametrize("K", [2, 3, 5])
def test_group_by_combines_before_the_shuffle(K):
    def worker(comm):
        return t(comm).group_by("k").agg(s=("y", "sum")).collect_partition()[1].shuffles[0]

    for r, shuffle in enumerate(cluster.run(worker, K, timeout=60).values):
        lo, hi = np.array_split(np.arange(N), K)[r][[0, -1]]
        assert shuffle["rows_sent"] + shuffle["rows_kept"] == len(np.unique(T["k"][lo:hi + 1]))  # one row per key


def test_explain_names_the_stages_and_what_ends_them():
    text = OPS["composed"](None).explain()
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0] == "Stage 0: scan t[k, x, y, g] -> filter(x > -5) -> with_column(z = y * 2) | shuffle by (k)"
    assert lines[1] == "Stage 1: scan u[k, w] | shuffle by (k)"
    assert lines[2].startswith("Stage 2: hash_join(on k: read shuffle of stage 0 x read shuffle of stage 1) -> partial_agg(by g:")
    assert lines[2].endswith("| shuffle by (g)")
    assert lines[3].startswith("Stage 3: read shuffle of stage 2 -> final_agg(by g: s=sum(z), m=mean(w), n=count(k))")
    assert lines[3].endswith("-> filter(n > 0) | collect")


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("name", ["narrow only", "group_by", "composed"])
def test_a_lost_partition_is_rebuilt_from_lineage_running_only_its_tasks(name, K):
    query, stages = PLANS[name]

    def worker(comm):
        df = query(comm)
        part, stats = df.collect_partition(keep_shuffle=True)
        return part, stats.map_outputs

    values = cluster.run(worker, K, timeout=60).values
    df = query(_Size(K))
    expected = {"narrow only": 1, "group_by": K + 1, "composed": 3 * K + 1}[name]  # vs K * stages for a rerun
    for p in range(K):
        rebuilt, tasks = recompute_partition(df, p)
        assert_frame_close(rebuilt, values[p][0], rtol=0, atol=0)  # the same rows, bit for bit
        # narrow chain: one task; each wide dependency: every partition of the parent stage, once
        assert len(tasks) == len(set(tasks)) == expected and set(tasks) == lineage(df, p)
        # the survivors kept their shuffle outputs (Spark's shuffle files): only the lost rank's tasks rerun
        kept = {key: v for r, (_, outs) in enumerate(values) if r != p for key, v in outs.items()}
        rebuilt, tasks = recompute_partition(df, p, kept)
        assert_frame_close(rebuilt, values[p][0], rtol=0, atol=0)
        assert set(tasks) == lineage(df, p, kept) == {(s, p) for s in range(stages)}


class _Size:
    """A stand-in communicator for driver-side planning: only its size matters."""

    def __init__(self, size):
        self.size, self.rank = size, 0


@pytest.mark.parametrize("K, crashed", [(3, [1]), (4, [2]), (5, [1, 3])])
def test_a_rank_crashed_before_handing_over_is_recomputed_on_root(K, crashed):
    query, stages = PLANS["composed"]

    def worker(comm):
        return run_query(comm, query(comm))

    healthy = cluster.run(worker, K, timeout=60).values[0]
    crash = {r: (K - 1) * (stages - 1) for r in crashed}  # the send to root after every shuffle
    res = cluster.run(worker, K, faults=cluster.Faults(crash=crash), timeout=60)
    got, recovery = res.values[0]
    assert all(isinstance(res.values[r], cluster.RankCrashed) for r in crashed)
    assert recovery.lost == crashed and healthy[1].lost == []
    assert_frame_close(got, healthy[0], rtol=0, atol=0)
    assert_frame_close(got, reference_query(query(None)), rtol=1e-12)
    assert set(recovery.tasks) == lineage(query(_Size(K)), crashed) and len(recovery.tasks) == len(set(recovery.tasks))
    assert len(recovery.tasks) < recovery.full_rerun == K * stages


def test_a_rank_only_source_cannot_be_replayed():
    df = DataFrame.from_columns(_Size(2), {"k": np.arange(3)}, "t").group_by("k").agg(n=("k", "count"))
    with pytest.raises(ValueError, match="from_columns keeps only each rank's slice"):
        recompute_partition(df, 1)
    with pytest.raises(ValueError, match="reference_query needs the whole table"):
        reference_query(df)


@pytest.mark.parametrize("call, error, message", [
    (lambda: t(None).select("k", "nope"), ValueError, "select: unknown column 'nope'"),
    (lambda: t(None).filter(col("nope") > 1), ValueError, "filter: unknown column 'nope'"),
    (lambda: t(None).filter(3), TypeError, "filter needs an expression"),
    (lambda: t(None).with_column("z", col("q") + 1), ValueError, "with_column: unknown column 'q'"),
    (lambda: t(None).group_by("nope"), ValueError, "group_by: unknown column 'nope'"),
    (lambda: t(None).group_by("k").agg(s=("x", "median")), ValueError, "unknown aggregate; choose one of"),
    (lambda: t(None).group_by("k").agg(s=("nope", "sum")), ValueError, "agg: unknown column 'nope'"),
    (lambda: t(None).group_by("k").agg(s="x"), ValueError, r"write s=\(column, fn\)"),
    (lambda: t(None).group_by("k").agg(), ValueError, "agg needs at least one"),
    (lambda: t(None).group_by("k").agg(k=("x", "sum")), ValueError, "repeat a name"),
    (lambda: t(None).join(u(None), on="w"), ValueError, r"join \(left side\): unknown column 'w'"),
    (lambda: t(None).join(u(None), on="k", how="left"), ValueError, "only how='inner'"),
    (lambda: t(None).join(t(None), on="k"), ValueError, "on both sides; rename"),
    (lambda: t(None).join(U, on="k"), TypeError, "join needs another DataFrame"),
    (lambda: DataFrame.from_table(None, {"a": np.arange(3), "b": np.arange(4)}), ValueError, "differ in length"),
    (lambda: DataFrame.from_table(None, {"a": np.ones((2, 2))}), ValueError, "1-D array"),
    (lambda: DataFrame.from_table(None, [1, 2]), ValueError, "non-empty dict"),
    (lambda: recompute_partitions(t(_Size(2)), [2]), ValueError, "partition 2 does not exist"),
    (lambda: col(3), TypeError, "col\\(\\) takes a column name"),
    (lambda: lineage(t(None), 0), ValueError, "no communicator: pass K"),
    (lambda: recompute_partition(t(None), 0, K=0), ValueError, "K must be a number of partitions >= 1"),
])
def test_bad_input_is_one_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_an_unknown_column_in_a_callable_fails_the_run_with_its_name():
    with pytest.raises(cluster.RankError, match="KeyError: 'nope'"):
        run(lambda c: t(c).filter(lambda cols: cols["nope"] > 0), 2)


@pytest.mark.slow
def test_the_composed_query_on_real_processes_equals_the_reference():
    got = run(OPS["composed"], 2, backend="process")
    assert_frame_close(got, reference_query(OPS["composed"](None)), rtol=1e-12)
