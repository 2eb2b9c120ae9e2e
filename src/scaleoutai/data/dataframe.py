"""A partitioned DataFrame with a lazy plan over the communicator (Chapter 7, Sections 2-6).

Partition p of every DataFrame lives on rank p (K partitions on K ranks). Transformations only build
a plan (``dataframe_plan``); an action (``collect``) cuts it into stages at every shuffle and runs them:
narrow operators pipelined on the local partition, each shuffle one ``all_to_all`` of the rows
hash-partitioned by key (``stable_hash(key) mod K``). ``stages() == shuffles + 1``.

Invariant: ``collect()`` returns on every rank the rows of ``reference_query`` (the plan run on the
whole table in one process), sorted by every column; integer columns equal exactly, float sums up to
rounding (partial sums add in another order).
Lineage: a lost partition p is rebuilt by ``recompute_partition`` from the replayable source, running
only the tasks its lineage names (``lineage``): one task through narrow dependencies, every partition
of the parent stage through a wide one, unless those shuffle outputs were kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_gather
from ..errors import PeerCrashedError
from . import dataframe_exec as E
from . import dataframe_plan as P
from .dataframe_exec import sort_rows  # noqa: F401  (re-exported: the order of collect)
from .dataframe_plan import Columns, col, lit  # noqa: F401  (re-exported: df.filter(col("x") > 3))
from .mapreduce import decode, encode


def _check_table(columns: Any, where: str) -> Columns:
    if not isinstance(columns, dict) or not columns:
        raise ValueError(f"{where} needs a non-empty dict of column name -> 1-D NumPy array")
    out = {}
    for name, values in columns.items():
        arr = np.asarray(values)
        if not isinstance(name, str) or arr.ndim != 1:
            raise ValueError(f"{where}: column {name!r} must be named by a str and hold a 1-D array, "
                             f"got {arr.ndim}-D")
        out[name] = arr
    lengths = {k: len(v) for k, v in out.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"{where}: columns differ in length {lengths}; every column needs one value per row")
    return out


class DataFrame:
    """A lazy, partitioned table: transformations return a new DataFrame, ``collect`` runs the plan."""

    def __init__(self, comm: Comm, plan: P.Node):
        self.comm, self.plan = comm, plan

    @classmethod
    def from_table(cls, comm: Comm, table: dict[str, np.ndarray], name: str = "table") -> "DataFrame":
        """The whole table on every rank, of which rank r reads block r (a replayable source)."""
        t = _check_table(table, "DataFrame.from_table")
        return cls(comm, P.Scan(name, tuple(t), table=t))

    @classmethod
    def from_columns(cls, comm: Comm, columns: dict[str, np.ndarray], name: str = "table") -> "DataFrame":
        """Each rank passes its own slice: partition r is what rank r holds (not replayable)."""
        t = _check_table(columns, "DataFrame.from_columns")
        return cls(comm, P.Scan(name, tuple(t), local=t))

    @property
    def columns(self) -> list[str]:
        return list(self.plan.schema)

    def select(self, *cols: str) -> "DataFrame":
        return DataFrame(self.comm, P.Select(self.plan, tuple(cols)))

    def filter(self, predicate: P.ExprLike) -> "DataFrame":
        return DataFrame(self.comm, P.Filter(self.plan, predicate))

    def with_column(self, name: str, expr: P.ExprLike) -> "DataFrame":
        return DataFrame(self.comm, P.WithColumn(self.plan, name, expr))

    def group_by(self, *keys: str) -> "GroupedData":
        P.need(self.plan, tuple(keys), "group_by")
        return GroupedData(self, tuple(keys))

    def join(self, other: "DataFrame", on: str | list[str], how: str = "inner") -> "DataFrame":
        if not isinstance(other, DataFrame):
            raise TypeError(f"join needs another DataFrame, got {type(other).__name__}")
        on_t = (on,) if isinstance(on, str) else tuple(on)
        return DataFrame(self.comm, P.Join(self.plan, other.plan, on_t, how))

    def stage_list(self) -> list[E.Stage]:
        return E.build_stages(self.plan)[0]

    def stages(self) -> int:
        """Number of stages: shuffles + 1."""
        return len(self.stage_list())

    def explain(self) -> str:
        """The stages, one line each: ``Stage 0: scan -> filter -> partial_agg | shuffle by (k)``."""
        return "\n".join(f"Stage {s.id}: {' -> '.join(s.ops)} | {s.output}" for s in self.stage_list())

    def collect_partition(self, row_seconds: float = 0.0, keep_shuffle: bool = False) -> tuple[Columns, E.ExecStats]:
        """Action: run the plan; this rank's result partition (unsorted) and what the run did."""
        ev = E.Distributed(self.comm, self.plan, row_seconds, keep_shuffle)
        out = ev.part(self.plan, self.comm.rank)
        ev.stats.tasks.append((ev.stages[-1].id, self.comm.rank))
        return out, ev.stats

    def collect(self, row_seconds: float = 0.0) -> Columns:
        """Action: the whole result on every rank, rows sorted by every column (first column first).
        ``row_seconds``: simulated compute charged per row an operator reads."""
        part, _ = self.collect_partition(row_seconds)
        return E.sort_rows(E.concat(_all_gather_objects(self.comm, part)))


class GroupedData:
    def __init__(self, df: DataFrame, keys: tuple[str, ...]):
        self.df, self.keys = df, keys

    def agg(self, **aggs: tuple[str, str]) -> DataFrame:
        """``agg(total=("x", "sum"), n=("x", "count"))``: one row per key; fns in ``AGGS``."""
        if not aggs:
            raise ValueError(f"agg needs at least one name=(column, fn) with fn in {P.AGGS}")
        for name, spec in aggs.items():
            if not (isinstance(spec, tuple) and len(spec) == 2):
                raise ValueError(f"agg {name}={spec!r}: write {name}=(column, fn) with fn in {P.AGGS}")
        triples = tuple((name, c, fn) for name, (c, fn) in aggs.items())
        return DataFrame(self.df.comm, P.Aggregate(self.df.plan, self.keys, triples))


def _all_gather_objects(comm: Comm, obj: Any) -> list[Any]:
    payload = encode(obj)
    sizes = all_gather(comm, np.array([payload.nbytes], dtype=np.int64))
    data, edges = all_gather(comm, payload), np.cumsum(np.append(0, sizes))
    return [decode(data[edges[i]:edges[i + 1]]) for i in range(comm.size)]


def _size(df: DataFrame, K: int | None) -> int:
    if K is None:
        if df.comm is None:
            raise ValueError("this DataFrame has no communicator: pass K, the number of partitions")
        return df.comm.size
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K must be a number of partitions >= 1, got {K!r}")
    return int(K)


def lineage(df: DataFrame, partitions: int | list[int], kept: Any = (), K: int | None = None) -> set[tuple[int, int]]:
    """The (stage, partition) tasks that rebuild the given result partitions from the source. A task
    whose output was ``kept`` is not rerun; through a shuffle a task needs every partition of the parent
    stage (a wide dependency), through a narrow chain only its own. K defaults to ``df.comm.size``."""
    stages, K = df.stage_list(), _size(df, K)
    need: set[tuple[int, int]] = set()

    def visit(stage: int, q: int) -> None:
        if (stage, q) in need or (stage, q) in kept:
            return
        need.add((stage, q))
        for parent in stages[stage].parents:
            for q2 in range(K):
                visit(parent, q2)

    for p in [partitions] if isinstance(partitions, int) else partitions:
        visit(stages[-1].id, p)
    return need


def recompute_partitions(df: DataFrame, partitions: list[int], kept: dict[tuple[int, int], Columns] | None = None,
                         K: int | None = None) -> tuple[dict[int, Columns], list[tuple[int, int]]]:
    """Rebuild lost result partitions from lineage on the caller alone, each parent task at most once.
    ``kept``: shuffle outputs that survived ((stage, q) -> columns, ``collect_partition(keep_shuffle=True)``),
    not rerun. Returns {p: partition} and the (stage, partition) tasks that ran, in order."""
    K = _size(df, K)
    for p in partitions:
        if not (isinstance(p, (int, np.integer)) and 0 <= p < K):
            raise ValueError(f"partition {p!r} does not exist: there are K={K} partitions, 0..{K - 1}")
    ev = E.Lineage(K, df.plan, kept)
    out = {}
    for p in partitions:
        out[p] = ev.part(df.plan, p)
        ev.stats.tasks.append((ev.stages[-1].id, p))
    return out, ev.stats.tasks


def recompute_partition(df: DataFrame, p: int, kept: dict[tuple[int, int], Columns] | None = None,
                        K: int | None = None) -> tuple[Columns, list[tuple[int, int]]]:
    """One lost partition: ``recompute_partitions(df, [p], kept, K)``."""
    parts, tasks = recompute_partitions(df, [p], kept, K)
    return parts[p], tasks


@dataclass
class Recovery:
    """What root rebuilt: the ranks lost, the tasks rerun, and the tasks of a full rerun (K * stages)."""

    lost: list[int]
    tasks: list[tuple[int, int]]
    full_rerun: int


def run_query(comm: Comm, df: DataFrame, root: int = 0, row_seconds: float = 0.0
              ) -> tuple[Columns | None, Recovery | None]:
    """Run ``df`` and gather the result on ``root``; partitions of ranks that crashed before handing
    theirs over are rebuilt on root from lineage (the source must be ``from_table``). Root returns
    (sorted result, Recovery); the other ranks (None, None)."""
    part, _ = df.collect_partition(row_seconds)
    if comm.rank != root:
        comm.send(encode(part), root)
        return None, None
    parts: dict[int, Columns] = {root: part}
    lost = []
    for src in range(comm.size):
        if src != root:
            try:
                parts[src] = decode(comm.recv(src))
            except PeerCrashedError:  # the simulator's perfect failure detector: src is gone
                lost.append(src)
    rebuilt, tasks = recompute_partitions(df, lost)
    parts.update(rebuilt)
    result = E.sort_rows(E.concat([parts[p] for p in range(comm.size)]))
    return result, Recovery(lost, tasks, comm.size * df.stages())


# --- the single-machine reference -------------------------------------------------------------------

def reference_query(query: DataFrame | P.Node, tables: dict[str, dict[str, np.ndarray]] | None = None) -> Columns:
    """The plan run on whole tables in one process, row by row in Python for the wide operators (no
    kernel shared with the distributed path), rows sorted as ``collect`` sorts them. ``tables`` maps a
    scan's name to its table; by default each scan's own ``from_table`` table."""
    def run(node: P.Node) -> Columns:
        if isinstance(node, P.Scan):
            table = (tables or {}).get(node.name, node.table)
            if table is None:
                raise ValueError(f"reference_query needs the whole table of scan {node.name!r}: pass tables={{"
                                 f"{node.name!r}: columns}}")
            return _check_table(table, "reference_query")
        if isinstance(node, P.Join):
            left, right = run(node.left), run(node.right)
            index: dict[tuple, list[int]] = {}
            for j in range(E.num_rows(right)):
                index.setdefault(tuple(right[k][j].item() for k in node.on), []).append(j)
            pairs = [(i, j) for i in range(E.num_rows(left))
                     for j in index.get(tuple(left[k][i].item() for k in node.on), [])]
            li, ri = (np.array([pr[s] for pr in pairs], dtype=np.int64) for s in (0, 1))
            out = E.take(left, li)
            out.update({k: v[ri] for k, v in right.items() if k not in node.on})
            return out
        cols = run(node.children()[0])
        n = E.num_rows(cols)
        if isinstance(node, P.Select):
            return {c: cols[c] for c in node.cols}
        if isinstance(node, P.Filter):
            return E.take(cols, P.evaluate(node.predicate, cols, n).astype(bool))
        if isinstance(node, P.WithColumn):
            return {**cols, node.name: P.evaluate(node.expr, cols, n)}
        groups: dict[tuple, list[int]] = {}
        for i in range(n):
            groups.setdefault(tuple(cols[k][i].item() for k in node.keys), []).append(i)
        out = {k: np.array([g[j] for g in groups], dtype=cols[k].dtype) for j, k in enumerate(node.keys)}
        for name, c, fn in node.aggs:
            values = [[cols[c][i].item() for i in rows] for rows in groups.values()]
            reduce = {"sum": sum, "count": len, "mean": lambda v: sum(v) / len(v), "min": min, "max": max}[fn]
            out[name] = np.array([reduce(v) for v in values], dtype=E.agg_dtype(fn, cols[c].dtype))
        return out

    return E.sort_rows(run(query.plan if isinstance(query, DataFrame) else query))


def assert_frame_close(got: Columns, want: Columns, rtol: float = 1e-9, atol: float = 1e-12) -> None:
    """Same columns in the same order, same rows: exact for integers, strings and booleans, within
    ``rtol``/``atol`` for floats (partial aggregates add in another order than one loop)."""
    if list(got) != list(want):
        raise AssertionError(f"columns differ: {list(got)} != {list(want)}")
    for k in want:
        a, b = np.asarray(got[k]), np.asarray(want[k])
        if a.shape != b.shape:
            raise AssertionError(f"column {k!r}: {a.shape[0]} rows != {b.shape[0]} rows")
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"column {k!r}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"column {k!r}")
