"""The lazy plan of ``data.dataframe`` (Chapter 7, Sections 2-4): expressions, plan nodes, stages, kernels.

A plan is a tree of nodes. ``Scan``, ``Select``, ``Filter`` and ``WithColumn`` are narrow: output
partition p needs only input partition p. ``Aggregate`` and ``Join`` are wide: they need rows of every
input partition, brought together by a hash shuffle (partition ``stable_hash(key) mod K``). A stage is
the narrow chain between two shuffles, so ``stages = shuffles + 1``. A shuffle is skipped when the input
is already hash-partitioned on a subset of the grouping keys (or on exactly the join keys), as Spark's
planner does.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

Columns = dict[str, np.ndarray]
AGGS = ("sum", "count", "mean", "min", "max")


# --- expressions ------------------------------------------------------------------------------------

class Expr:
    """A column expression: ``col("x") * 2 > 3``, combined with ``&``, ``|`` and ``~``."""

    def evaluate(self, cols: Columns) -> np.ndarray:
        raise NotImplementedError

    def columns(self) -> set[str]:
        raise NotImplementedError

    def _bin(self, other: Any, op: Callable, sym: str, swap: bool = False) -> "Expr":
        other = other if isinstance(other, Expr) else Lit(other)
        return BinOp(other, self, op, sym) if swap else BinOp(self, other, op, sym)

    def __add__(self, o): return self._bin(o, operator.add, "+")
    def __radd__(self, o): return self._bin(o, operator.add, "+", True)
    def __sub__(self, o): return self._bin(o, operator.sub, "-")
    def __rsub__(self, o): return self._bin(o, operator.sub, "-", True)
    def __mul__(self, o): return self._bin(o, operator.mul, "*")
    def __rmul__(self, o): return self._bin(o, operator.mul, "*", True)
    def __truediv__(self, o): return self._bin(o, operator.truediv, "/")
    def __mod__(self, o): return self._bin(o, operator.mod, "%")
    def __gt__(self, o): return self._bin(o, operator.gt, ">")
    def __ge__(self, o): return self._bin(o, operator.ge, ">=")
    def __lt__(self, o): return self._bin(o, operator.lt, "<")
    def __le__(self, o): return self._bin(o, operator.le, "<=")
    def __eq__(self, o): return self._bin(o, operator.eq, "==")  # type: ignore[override]
    def __ne__(self, o): return self._bin(o, operator.ne, "!=")  # type: ignore[override]
    def __and__(self, o): return self._bin(o, operator.and_, "&")
    def __or__(self, o): return self._bin(o, operator.or_, "|")
    def __invert__(self): return Not(self)
    __hash__ = object.__hash__


@dataclass(eq=False)
class Col(Expr):
    name: str

    def evaluate(self, cols: Columns) -> np.ndarray:
        return cols[self.name]

    def columns(self) -> set[str]:
        return {self.name}

    def __repr__(self) -> str:
        return self.name


@dataclass(eq=False)
class Lit(Expr):
    value: Any

    def evaluate(self, cols: Columns) -> Any:
        return self.value

    def columns(self) -> set[str]:
        return set()

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(eq=False)
class BinOp(Expr):
    left: Expr
    right: Expr
    op: Callable
    sym: str

    def evaluate(self, cols: Columns) -> np.ndarray:
        return self.op(self.left.evaluate(cols), self.right.evaluate(cols))

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()

    def __repr__(self) -> str:
        wrap = lambda e: f"({e!r})" if isinstance(e, BinOp) else repr(e)  # noqa: E731
        return f"{wrap(self.left)} {self.sym} {wrap(self.right)}"


@dataclass(eq=False)
class Not(Expr):
    inner: Expr

    def evaluate(self, cols: Columns) -> np.ndarray:
        return ~self.inner.evaluate(cols)

    def columns(self) -> set[str]:
        return self.inner.columns()

    def __repr__(self) -> str:
        return f"~({self.inner!r})"


def col(name: str) -> Col:
    """A reference to column ``name``."""
    if not isinstance(name, str):
        raise TypeError(f"col() takes a column name (str), got {type(name).__name__}")
    return Col(name)


def lit(value: Any) -> Lit:
    """A constant, broadcast against the columns it meets."""
    return Lit(value)


ExprLike = Union[Expr, Callable[[Columns], np.ndarray]]


def evaluate(expr: ExprLike, cols: Columns, n: int) -> np.ndarray:
    """An expression or a callable on the column dict, as a column of n rows."""
    out = expr.evaluate(cols) if isinstance(expr, Expr) else expr(cols)
    return np.broadcast_to(np.asarray(out), (n,)).copy() if np.ndim(out) == 0 else np.asarray(out)


def describe(expr: ExprLike) -> str:
    return repr(expr) if isinstance(expr, Expr) else f"<{getattr(expr, '__name__', 'fn')}>"


# --- plan nodes -------------------------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """A plan node. ``schema``: output column names; ``partitioning``: the key columns the output is
    hash-partitioned by (None: no known partitioning)."""

    schema: tuple[str, ...] = field(init=False, default=())
    partitioning: tuple[str, ...] | None = field(init=False, default=None)

    def children(self) -> tuple["Node", ...]:
        return ()


@dataclass(eq=False)
class Scan(Node):
    """The source. ``table`` (full, replayable) is read block p for partition p; ``local`` is this rank's
    slice (from_columns), which lineage cannot replay."""

    name: str
    names: tuple[str, ...]
    table: Columns | None = None
    local: Columns | None = None

    def __post_init__(self) -> None:
        self.schema = self.names


@dataclass(eq=False)
class Select(Node):
    child: Node
    cols: tuple[str, ...]

    def __post_init__(self) -> None:
        need(self.child, self.cols, "select")
        self.schema = self.cols
        part = self.child.partitioning
        self.partitioning = part if part is not None and set(part) <= set(self.cols) else None

    def children(self): return (self.child,)


@dataclass(eq=False)
class Filter(Node):
    child: Node
    predicate: ExprLike

    def __post_init__(self) -> None:
        check_expr(self.child, self.predicate, "filter")
        self.schema, self.partitioning = self.child.schema, self.child.partitioning

    def children(self): return (self.child,)


@dataclass(eq=False)
class WithColumn(Node):
    child: Node
    name: str
    expr: ExprLike

    def __post_init__(self) -> None:
        check_expr(self.child, self.expr, "with_column")
        if not isinstance(self.name, str):
            raise TypeError(f"with_column needs a column name (str), got {type(self.name).__name__}")
        s = self.child.schema
        self.schema = s if self.name in s else s + (self.name,)
        part = self.child.partitioning  # overwriting a key column breaks the partitioning
        self.partitioning = None if part is not None and self.name in part else part

    def children(self): return (self.child,)


@dataclass(eq=False)
class Aggregate(Node):
    """group_by(keys).agg(out=(column, fn)): a partial aggregate on each partition (map-side combine),
    a shuffle by the keys, the final aggregate. ``shuffle`` is False when the child is already
    partitioned by a subset of the keys."""

    child: Node
    keys: tuple[str, ...]
    aggs: tuple[tuple[str, str, str], ...]  # (out, column, fn)

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("group_by needs at least one key column")
        need(self.child, self.keys, "group_by")
        need(self.child, tuple(c for _, c, _ in self.aggs), "agg")
        for out, _, fn in self.aggs:
            if fn not in AGGS:
                raise ValueError(f"agg {out}=(..., {fn!r}): unknown aggregate; choose one of {AGGS}")
        outs = self.keys + tuple(o for o, _, _ in self.aggs)
        if len(set(outs)) != len(outs):
            raise ValueError(f"agg output names {outs} repeat a name: give every aggregate its own name")
        self.schema = outs
        part = self.child.partitioning
        self.shuffle = not (part is not None and set(part) <= set(self.keys))
        self.partitioning = self.keys if self.shuffle else part

    def children(self): return (self.child,)


@dataclass(eq=False)
class Join(Node):
    """Inner hash join on ``on``; each side is shuffled by ``on`` unless already partitioned by it."""

    left: Node
    right: Node
    on: tuple[str, ...]
    how: str = "inner"

    def __post_init__(self) -> None:
        if self.how != "inner":
            raise ValueError(f"join how={self.how!r} is not supported: only how='inner'")
        need(self.left, self.on, "join (left side)")
        need(self.right, self.on, "join (right side)")
        rest = tuple(c for c in self.right.schema if c not in self.on)
        clash = sorted(set(rest) & set(self.left.schema))
        if clash:
            raise ValueError(f"join: columns {clash} are on both sides; rename one side with select/with_column")
        self.schema = self.left.schema + rest
        self.shuffle = (self.left.partitioning != self.on, self.right.partitioning != self.on)
        self.partitioning = self.on

    def children(self): return (self.left, self.right)


def need(node: Node, cols: tuple[str, ...], where: str) -> None:
    for c in cols:
        if not isinstance(c, str):
            raise TypeError(f"{where}: column names are str, got {c!r}")
        if c not in node.schema:
            raise ValueError(f"{where}: unknown column {c!r}; the columns are {list(node.schema)}")


def check_expr(node: Node, expr: ExprLike, where: str) -> None:
    if isinstance(expr, Expr):
        need(node, tuple(sorted(expr.columns())), where)
    elif not callable(expr):
        raise TypeError(f"{where} needs an expression like col('x') > 3 or a function of the column dict, "
                        f"got {type(expr).__name__}")
