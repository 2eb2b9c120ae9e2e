"""The record types of Appendix D's catalogue, and the three functions that read an entry:
``load`` (call its loader at a chapter's smoke or full size), ``measure`` (rows x columns of the first
output, and bytes of the whole) and ``digest`` (a SHA-256 over every byte, for "same seed, same bytes").
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

Chapter = int | str  # 13, or an appendix letter "A"


@dataclass(frozen=True)
class Use:
    """One chapter's use of a loader: its arguments at the smoke and full sizes, and the (rows, columns)
    of the first output at each; ``via`` names the part function the chapter calls when it does not call
    the loader itself (``scaleoutai.ml.gossip.topology``)."""

    chapter: Chapter
    smoke: dict[str, Any]
    full: dict[str, Any]
    smoke_shape: tuple[int, int]
    full_shape: tuple[int, int]
    via: str = ""


@dataclass(frozen=True)
class Dataset:
    """A loader of ``scaleoutai.datasets``, what it generates, its seed argument (None: no randomness)
    and every chapter that uses it."""

    loader: str
    kind: str
    what: str
    uses: tuple[Use, ...]
    seed: str | None = "seed"

    @property
    def chapters(self) -> tuple[Chapter, ...]:
        return tuple(u.chapter for u in self.uses)


@dataclass(frozen=True)
class Instance:
    """A problem instance a chapter builds with a part's constructor (a game, a market, a puzzle):
    not a dataset, but Appendix D names it."""

    constructor: str  # dotted path
    what: str
    chapters: tuple[Chapter, ...]
    seeded: bool = True


@dataclass(frozen=True)
class Shipped:
    """Data that ships inside a pinned package (weights, a game definition), never downloaded at run time."""

    name: str
    package: str  # the distribution name pinned in environments/constraints.txt
    version: str
    module: str  # what the chapter imports
    what: str
    chapters: tuple[Chapter, ...]


@dataclass(frozen=True)
class Benchmark:
    script: str  # benchmarks/<script>
    measures: str
    chapters: tuple[Chapter, ...]
    quick: bool  # accepts --quick


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, tuple) and value else value


def _columns(row: Any) -> int:
    if isinstance(row, str):
        return len(row.split())
    if is_dataclass(row):
        return len(fields(row))
    return len(row)


def measure(value: Any) -> tuple[int, int, int]:
    """(rows, columns, bytes). Rows x columns describe the first output: an array's first axis by the
    product of the rest; a record of aligned columns (``Events``, ``JobTrace``) by its field count; a
    list by the widest item (words of a line, tokens of a record, neighbours of a node, a request's
    fields); a record led by scalars (``Arena``) by its first array. Bytes count every array, string (UTF-8) and number of every output."""
    head = _first(value)
    if isinstance(head, np.ndarray):
        rows, cols = (head.shape[0], int(np.prod(head.shape[1:]))) if head.ndim else (1, 1)
    elif is_dataclass(head) and hasattr(getattr(head, fields(head)[0].name), "__len__"):
        rows, cols = len(getattr(head, fields(head)[0].name)), len(fields(head))
    elif is_dataclass(head):  # a record led by scalars (an Arena's side): its first array lays it out
        grid = next(v for v in (getattr(head, f.name) for f in fields(head)) if isinstance(v, np.ndarray))
        rows, cols = grid.shape[0], int(np.prod(grid.shape[1:]))
    elif isinstance(head, list):
        rows, cols = len(head), max((_columns(x) for x in head), default=0)
    else:
        raise TypeError(f"measure does not know how to lay out a {type(head).__name__}")
    return int(rows), int(cols), _bytes(value)


def _bytes(v: Any) -> int:
    if isinstance(v, np.ndarray):
        return int(v.nbytes)
    if isinstance(v, str):
        return len(v.encode())
    if isinstance(v, (bool, int, float, np.generic)):
        return 8
    if is_dataclass(v):
        return sum(_bytes(getattr(v, f.name)) for f in fields(v))
    if isinstance(v, dict):
        return sum(_bytes(k) + _bytes(x) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return sum(_bytes(x) for x in v)
    raise TypeError(f"cannot count the bytes of a {type(v).__name__}")


def digest(value: Any) -> str:
    """SHA-256 over the dtype, shape and bytes of every array and the text of every string, in order."""
    h = hashlib.sha256()

    def feed(v: Any) -> None:
        if isinstance(v, np.ndarray):
            h.update(f"{v.dtype.str}{v.shape}".encode())
            h.update(np.ascontiguousarray(v).tobytes())
        elif is_dataclass(v):
            for f in fields(v):
                feed(getattr(v, f.name))
        elif isinstance(v, dict):
            for k in v:
                feed(k)
                feed(v[k])
        elif isinstance(v, (list, tuple)):
            h.update(f"[{len(v)}".encode())
            for x in v:
                feed(x)
        else:
            h.update(repr(v).encode())
    feed(value)
    return h.hexdigest()
