"""Running the plan of ``data.dataframe`` on partitions (Chapter 7, Section 4): the kernels every
partition runs (filter, partial and final aggregate, hash join, hash partitioning) and the evaluators
that produce partition p of any node, either as rank p of a run (a shuffle is one ``all_to_all``) or
on the driver from lineage (a shuffle read pulls partition p out of every parent partition).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, block_range
from . import dataframe_plan as P
from .dataframe_plan import Aggregate, Columns, Join
from .mapreduce import decode, encode, partition_of


# --- kernels: what every partition runs -------------------------------------------------------------

def take(cols: Columns, idx: np.ndarray) -> Columns:
    return {k: v[idx] for k, v in cols.items()}


def num_rows(cols: Columns) -> int:
    return len(next(iter(cols.values()))) if cols else 0


def concat(parts: list[Columns]) -> Columns:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def sort_rows(cols: Columns) -> Columns:
    """Rows ordered by every column, first column first: the deterministic order of ``collect``."""
    if num_rows(cols) == 0:
        return cols
    return take(cols, np.lexsort([cols[k] for k in reversed(list(cols))]))


def group(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Sort rows by the keys: (order, start of each group in that order, the distinct keys)."""
    n = len(keys[0])
    order = np.lexsort(keys[::-1]) if n else np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    if n:
        change[0] = True
        for k in keys:
            s = k[order]
            change[1:] |= s[1:] != s[:-1]
    starts = np.flatnonzero(change)
    return order, starts, [k[order][starts] for k in keys]


def agg_dtype(fn: str, dtype: np.dtype) -> np.dtype:
    """Result types as Spark gives them: count -> int64, mean -> float64, sum of integers -> int64."""
    if fn == "count":
        return np.dtype(np.int64)
    if fn == "mean":
        return np.dtype(np.float64)
    if fn == "sum":
        return np.dtype(np.int64) if dtype.kind in "bui" else np.dtype(np.float64)
    return dtype


_REDUCE = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def _reduce(fn: str, values: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    if len(starts) == 0:
        return values[:0]
    return _REDUCE[fn].reduceat(values[order], starts)


def partial_aggregate(cols: Columns, node: Aggregate) -> Columns:
    """Map-side combine: one row per key on this partition; mean travels as (sum, count)."""
    order, starts, uniq = group([cols[k] for k in node.keys])
    counts = np.diff(np.append(starts, len(order))).astype(np.int64)
    out = dict(zip(node.keys, uniq))
    for name, c, fn in node.aggs:
        v = cols[c]
        if fn in ("sum", "mean"):
            out[f"{name}.sum"] = _reduce("sum", v.astype(agg_dtype("sum", v.dtype)), order, starts)
        if fn in ("count", "mean"):
            out[f"{name}.count"] = counts
        if fn in ("min", "max"):
            out[f"{name}.{fn}"] = _reduce(fn, v, order, starts)
    return out


def final_aggregate(cols: Columns, node: Aggregate) -> Columns:
    """Merge the partial rows of each key: sums and counts add, min/max fold, mean = sum / count."""
    order, starts, uniq = group([cols[k] for k in node.keys])
    out = dict(zip(node.keys, uniq))
    for name, _, fn in node.aggs:
        if fn == "mean":
            out[name] = (_reduce("sum", cols[f"{name}.sum"], order, starts)
                         / _reduce("sum", cols[f"{name}.count"], order, starts))
        else:  # (partial column, how partials merge)
            part, how = {"sum": ("sum", "sum"), "count": ("count", "sum")}.get(fn, (fn, fn))
            out[name] = _reduce(how, cols[f"{name}.{part}"], order, starts)
    return out


def hash_join(left: Columns, right: Columns, node: Join) -> Columns:
    """Inner join of one partition: rows of each side grouped by key codes, matches paired in left order."""
    nl = num_rows(left)
    keys = [np.concatenate([left[k], right[k]]) for k in node.on]
    order, starts, _ = group(keys)
    code = np.empty(len(order), dtype=np.int64)
    code[order] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(order))))
    lc, rc = code[:nl], code[nl:]
    r_order = np.argsort(rc, kind="stable")
    rs = rc[r_order]
    lo, hi = np.searchsorted(rs, lc, "left"), np.searchsorted(rs, lc, "right")
    cnt = hi - lo
    li = np.repeat(np.arange(nl), cnt)
    offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    ri = r_order[np.repeat(lo, cnt) + offs]
    out = take(left, li)
    out.update({k: v[ri] for k, v in right.items() if k not in node.on})
    return out


def partition_ids(cols: Columns, keys: tuple[str, ...], K: int) -> np.ndarray:
    """Destination of every row: ``stable_hash(key) mod K``, hashed once per distinct key."""
    order, starts, uniq = group([cols[k] for k in keys])
    values = list(zip(*(u.tolist() for u in uniq)))  # Python scalars: the same repr in every process
    dest = np.array([partition_of(v[0] if len(keys) == 1 else v, K) for v in values], dtype=np.int64)
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.repeat(dest, np.diff(np.append(starts, len(order))))
    return out


# --- stages: the plan cut at every shuffle -----------------------------------------------------------

@dataclass
class Stage:
    """The narrow chain between shuffles: ``ops`` pipelined on one partition, then ``output``."""

    id: int
    ops: list[str]
    parents: list[int]
    output: str


def build_stages(root: P.Node) -> tuple[list[Stage], dict[tuple[int, int], int]]:
    """Cut the plan at every shuffle. Returns the stages (parents first, the result stage last) and the
    stage that writes each shuffle, keyed by (id(node), side)."""
    stages: list[Stage] = []
    writes: dict[tuple[int, int], int] = {}

    def cut(node: P.Node, side: int, ops: list[str], parents: list[int], keys: tuple[str, ...]) -> int:
        stages.append(Stage(len(stages), ops, parents, f"shuffle by ({', '.join(keys)})"))
        writes[(id(node), side)] = stages[-1].id
        return stages[-1].id

    def chain(node: P.Node) -> tuple[list[str], list[int]]:
        if isinstance(node, P.Scan):
            return [f"scan {node.name}[{', '.join(node.names)}]"], []
        if isinstance(node, (P.Select, P.Filter, P.WithColumn)):
            ops, parents = chain(node.child)
            return ops + [_describe(node)], parents
        if isinstance(node, P.Aggregate):
            ops, parents = chain(node.child)
            aggs = ", ".join(f"{o}={f}({c})" for o, c, f in node.aggs)
            ops = ops + [f"partial_agg(by {', '.join(node.keys)}: {aggs})"]
            final = f"final_agg(by {', '.join(node.keys)}: {aggs})"
            if not node.shuffle:  # already partitioned by the keys: no stage boundary
                return ops + [final], parents
            s = cut(node, 0, ops, parents, node.keys)
            return [f"read shuffle of stage {s}", final], [s]
        if isinstance(node, P.Join):
            inputs, parents = [], []
            for side, child in enumerate(node.children()):
                ops, par = chain(child)
                if node.shuffle[side]:
                    s = cut(node, side, ops, par, node.on)
                    inputs.append(f"read shuffle of stage {s}")
                    parents.append(s)
                else:
                    inputs.append("(" + " -> ".join(ops) + ")")
                    parents += par
            return [f"hash_join(on {', '.join(node.on)}: {' x '.join(inputs)})"], parents
        raise TypeError(f"not a plan node: {type(node).__name__}")

    ops, parents = chain(root)
    stages.append(Stage(len(stages), ops, parents, "collect"))
    return stages, writes


def _describe(node: P.Node) -> str:
    if isinstance(node, P.Select):
        return f"select({', '.join(node.cols)})"
    if isinstance(node, P.Filter):
        return f"filter({P.describe(node.predicate)})"
    return f"with_column({node.name} = {P.describe(node.expr)})"


# --- evaluators --------------------------------------------------------------------------------------

@dataclass
class ExecStats:
    """What one rank's execution did: rows scanned, and per shuffle the rows and bytes it sent away
    (``rows_kept`` stayed local). ``tasks``: the (stage, partition) tasks run. ``map_outputs``: the
    shuffle outputs this rank wrote, kept when asked (Spark keeps them on the mapper's disk)."""

    rows_scanned: int = 0
    shuffles: list[dict[str, int]] = field(default_factory=list)
    tasks: list[tuple[int, int]] = field(default_factory=list)
    map_outputs: dict[tuple[int, int], Columns] = field(default_factory=dict)


class Evaluator:
    """Partition p of any node. ``shuffle(node, side, p)`` brings partition p of a shuffle's output."""

    def __init__(self, K: int, plan: P.Node, charge: Callable[[int], None] = lambda rows: None):
        self.K, self.charge, self.stats = K, charge, ExecStats()
        self.rank: int | None = None  # the partition whose from_columns slice is at hand
        self.stages, self.writes = build_stages(plan)

    def part(self, node: P.Node, p: int) -> Columns:
        if isinstance(node, P.Scan):
            out = self.scan(node, p)
            self.stats.rows_scanned += num_rows(out)
        elif isinstance(node, (P.Select, P.Filter, P.WithColumn)):
            cols = self.part(node.child, p)
            n = num_rows(cols)
            self.charge(n)
            if isinstance(node, P.Select):
                out = {c: cols[c] for c in node.cols}
            elif isinstance(node, P.Filter):
                out = take(cols, P.evaluate(node.predicate, cols, n).astype(bool))
            else:
                out = dict(cols)
                out[node.name] = P.evaluate(node.expr, cols, n)
        elif isinstance(node, P.Aggregate):
            cols = self.shuffle(node, 0, p) if node.shuffle else self.map_side(node, 0, p)
            self.charge(num_rows(cols))
            out = final_aggregate(cols, node)
        else:
            left, right = (self.shuffle(node, s, p) if node.shuffle[s] else self.part(c, p)
                           for s, c in enumerate(node.children()))
            out = hash_join(left, right, node)
            self.charge(num_rows(left) + num_rows(right) + num_rows(out))
        return out

    def scan(self, node: P.Scan, p: int) -> Columns:
        if node.table is None and p == self.rank:
            return node.local
        if node.table is None:
            raise ValueError(f"partition {p} of scan {node.name!r} cannot be read again: from_columns keeps "
                             f"only each rank's slice; build it with DataFrame.from_table to replay lineage")
        lo, hi = block_range(num_rows(node.table), self.K, p)
        return {k: v[lo:hi] for k, v in node.table.items()}

    def map_side(self, node: P.Node, side: int, p: int) -> Columns:
        """What the stage that writes this shuffle produces on partition p (after the map-side combine)."""
        if isinstance(node, P.Aggregate):
            cols = self.part(node.child, p)
            self.charge(num_rows(cols))
            return partial_aggregate(cols, node)
        return self.part(node.children()[side], p)

    def keys(self, node: P.Node) -> tuple[str, ...]:
        return node.keys if isinstance(node, P.Aggregate) else node.on

    def shuffle(self, node: P.Node, side: int, p: int) -> Columns:
        raise NotImplementedError


class Distributed(Evaluator):
    """Every rank runs its own partition; a shuffle is one all_to_all (its blocks in rank order)."""

    def __init__(self, comm: Comm, plan: P.Node, row_seconds: float, keep: bool):
        super().__init__(comm.size, plan, lambda rows: comm.compute(row_seconds * rows))
        self.comm, self.keep, self.rank = comm, keep, comm.rank

    def shuffle(self, node: P.Node, side: int, p: int) -> Columns:
        mapped = self.map_side(node, side, p)
        stage = self.writes[(id(node), side)]
        self.stats.tasks.append((stage, p))
        if self.keep:
            self.stats.map_outputs[(stage, p)] = mapped
        dest = partition_ids(mapped, self.keys(node), self.K)
        blocks = [encode(take(mapped, dest == j)) for j in range(self.K)]
        self.stats.shuffles.append({"stage": stage, "rows_sent": int(np.sum(dest != p)),
                                    "rows_kept": int(np.sum(dest == p)),
                                    "bytes_sent": sum(b.nbytes for j, b in enumerate(blocks) if j != p)})
        return concat([decode(b) for b in all_to_all(self.comm, blocks)])


class Lineage(Evaluator):
    """The driver rebuilding partitions from lineage: a shuffle read of partition p needs partition p's
    rows from every parent partition q, each parent task run once (or taken from ``kept``)."""

    def __init__(self, K: int, plan: P.Node, kept: dict[tuple[int, int], Columns] | None):
        super().__init__(K, plan)
        self.outputs = dict(kept or {})

    def shuffle(self, node: P.Node, side: int, p: int) -> Columns:
        stage = self.writes[(id(node), side)]
        parts = []
        for q in range(self.K):
            if (stage, q) not in self.outputs:
                self.outputs[(stage, q)] = self.map_side(node, side, q)
                self.stats.tasks.append((stage, q))
            mapped = self.outputs[(stage, q)]
            parts.append(take(mapped, partition_ids(mapped, self.keys(node), self.K) == p))
        return concat(parts)
