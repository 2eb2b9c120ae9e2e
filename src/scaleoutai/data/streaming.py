"""Event-time windows and watermarks over a micro-batched stream (Chapter 9, Sections 2-4).

An event is (event time t in ms, key, value); the stream delivers events in *arrival* order, which is
not event-time order. A tumbling or sliding window of ``size`` ms every ``slide`` ms covers
[s, s + size) for every start s that is a multiple of ``slide``; an event belongs to every window with
s <= t < s + size. Each window keeps count and sum per key (the mean is sum / count).

Watermarks follow Spark Structured Streaming's micro-batch rule, so that the same files in the same
batches give Spark's answer (Section 5). With W_0 = 0 and L the allowed lateness:

    W_{i+1} = max(W_i, max event time in batches 0..i  -  L)
    batch i drops an (event, window) pair when  window end <= W_{i-1}   (late: the previous watermark)
    batch i emits, then forgets, every window with  end <= W_i          (final in append mode)

After the last batch one batch with no data evicts with the last watermark (Spark runs it too);
``flush=True`` instead emits every open window, as a bounded source does at end of input in Flink.
Distributed: each rank reads block r of every micro-batch, sends each event to the rank owning its
key (``partition_of(key, K)``, one ``all_to_all``) and windows its keys; the watermark takes the max
event time over all ranks (an all-reduce), so every rank, for any K, drops and emits what one rank would.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Comm
from ..collectives import all_to_all, block_range, recursive_doubling_allreduce
from ..datasets import Events
from .mapreduce import partition_of

Row = tuple[int, int, int, float]  # (window start, key, count, sum)
Table = dict[tuple[int, int], tuple[int, float]]  # (window start, key) -> (count, sum)


def micro_batches(events: Events, batch_size: int) -> list[Events]:
    """Consecutive slices of ``batch_size`` events in arrival order: the source offsets of each batch."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [events[i:i + batch_size] for i in range(0, len(events), batch_size)]


def check_window(size: int, slide: int | None) -> int:
    """The slide in ms (None: tumbling, slide = size); integer ms with 0 < slide <= size, or ValueError."""
    slide = size if slide is None else slide
    if not (isinstance(size, (int, np.integer)) and isinstance(slide, (int, np.integer)) and 0 < slide <= size):
        raise ValueError(f"windows need integer ms with 0 < slide <= size, got size={size!r}, slide={slide!r}")
    return int(slide)


def assign_windows(time: np.ndarray, size: int, slide: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(event index, window start) for every window of every event: starts s = j * slide with
    s <= t < s + size, i.e. ceil(size / slide) candidates below the last start floor(t / slide) * slide."""
    slide = check_window(size, slide)
    t = np.asarray(time, dtype=np.int64)
    last = t - np.mod(t, slide)
    starts = last[:, None] - slide * np.arange(-(-size // slide), dtype=np.int64)[None, :]
    inside = starts > t[:, None] - size
    idx = np.nonzero(inside)
    return idx[0], starts[idx]


def _table(starts: np.ndarray, keys: np.ndarray, values: np.ndarray) -> Table:
    if len(starts) == 0:
        return {}
    pairs = np.stack([starts, keys], axis=1)
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv, minlength=len(uniq))
    sums = np.bincount(inv, weights=values, minlength=len(uniq))
    return {(int(s), int(k)): (int(c), float(v)) for (s, k), c, v in zip(uniq, counts, sums)}


def batch_watermarks(events: Events, batch_size: int, lateness: int) -> np.ndarray:
    """W_0 .. W_n for n micro-batches: W_{i+1} = max(W_i, max time of batches 0..i - lateness), W_0 = 0."""
    marks = [0]
    seen = None
    for batch in micro_batches(events, batch_size):
        if len(batch):
            seen = int(batch.time.max()) if seen is None else max(seen, int(batch.time.max()))
        marks.append(marks[-1] if seen is None else max(marks[-1], seen - lateness))
    return np.array(marks, dtype=np.int64)


def reference_windows(events: Events, size: int, slide: int | None = None, lateness: int | None = None,
                      batch_size: int | None = None, flush: bool = False) -> Table:
    """The batch answer. Without ``lateness``: every window of every event. With ``lateness`` and
    ``batch_size``: only on-time (event, window) pairs (end > W_{i-1} for an event of batch i), and
    unless ``flush`` only the windows the last watermark closed (end <= W_n)."""
    idx, starts = assign_windows(events.time, size, slide)
    if lateness is None:
        return _table(starts, events.key[idx], events.value[idx])
    if batch_size is None:
        raise ValueError("reference_windows with lateness= needs the batch_size the stream was cut into")
    marks = batch_watermarks(events, batch_size, int(lateness))
    late_mark = np.concatenate([[0], marks[:-1]])[np.arange(len(events)) // batch_size]
    keep = starts + size > late_mark[idx]
    if not flush:
        keep &= starts + size <= marks[-1]
    return _table(starts[keep], events.key[idx[keep]], events.value[idx[keep]])


@dataclass
class WindowOperator:
    """One rank's window state: open windows of its keys, the watermarks, late pairs dropped."""

    size: int
    slide: int
    lateness: int
    state: dict[tuple[int, int], list] = field(default_factory=dict)
    late_mark: int = 0  # W_{i-1}: pairs of windows ending at or before it are late
    watermark: int = 0  # W_i: windows ending at or before it are final
    dropped: int = 0
    seen: int | None = None  # the latest event time this rank has read

    def process(self, batch: Events) -> None:
        """Add the batch's on-time (event, window) pairs to the open windows; count the late ones."""
        idx, starts = assign_windows(batch.time, self.size, self.slide)
        on_time = starts + self.size > self.late_mark
        self.dropped += int((~on_time).sum())
        for (s, k), (c, v) in _table(starts[on_time], batch.key[idx[on_time]], batch.value[idx[on_time]]).items():
            acc = self.state.setdefault((s, k), [0, 0.0])
            acc[0] += c
            acc[1] += v

    def evict(self, everything: bool = False) -> list[Row]:
        """Emit and forget the windows that end at or before the watermark (all of them when flushing)."""
        done = sorted(w for w in self.state if everything or w[0] + self.size <= self.watermark)
        return [(s, k, *self.state.pop((s, k))) for s, k in done]

    def advance(self, max_time: int | None) -> None:
        """End of a batch: the late mark becomes this batch's watermark, and the watermark follows time."""
        self.late_mark = self.watermark
        if max_time is not None:
            self.watermark = max(self.watermark, int(max_time) - self.lateness)


def shuffle_by_key(comm: Comm, batch: Events) -> Events:
    """Send every event to the rank that owns its key, ``partition_of(key, K)``; one all_to_all."""
    K = comm.size
    uniq, inv = np.unique(batch.key, return_inverse=True)
    owner = np.array([partition_of(int(k), K) for k in uniq], dtype=np.int64)[inv.reshape(-1)]
    packed = batch.pack()
    received = all_to_all(comm, [packed[owner == j] for j in range(K)])
    return Events.concat([Events.unpack(block) for block in received])


_NONE = np.iinfo(np.int64).min  # "no event seen" in the watermark all-reduce


def global_max_time(comm: Comm, seen: int | None, policy: str = "max") -> int | None:
    """The time the watermark follows. "max": the latest event any rank read (Spark, the same for
    every K). "min": the smallest per-rank latest time, as Flink combines parallel source partitions:
    one idle rank holds the watermark back for everyone (Section 6)."""
    mine = np.array([_NONE if seen is None else seen], dtype=np.int64)
    if policy == "max":
        out = int(recursive_doubling_allreduce(comm, mine, op="max")[0])
    elif policy == "min":
        out = int(recursive_doubling_allreduce(comm, mine, op="min")[0])
    else:
        raise ValueError(f"watermark policy {policy!r} is not one of 'max' (Spark) or 'min' (per-partition)")
    return None if out == _NONE else out


@dataclass
class WindowRun:
    """What one rank emitted: rows (batch id, window start, key, count, sum), drops, watermarks."""

    rows: list[tuple[int, int, int, int, float]]
    dropped: int
    watermarks: list[int]

    def table(self) -> Table:
        return {(s, k): (c, v) for _, s, k, c, v in self.rows}


def step(comm: Comm, op: WindowOperator, batch: Events, policy: str = "max") -> list[Row]:
    """One micro-batch on every rank: read block r, shuffle by key, window, emit final windows, advance."""
    lo, hi = block_range(len(batch), comm.size, comm.rank)
    mine = batch[lo:hi]
    if len(mine):
        op.seen = int(mine.time.max()) if op.seen is None else max(op.seen, int(mine.time.max()))
    op.process(shuffle_by_key(comm, mine))
    rows = op.evict()
    op.advance(global_max_time(comm, op.seen, policy))
    return rows


def run_windows(comm: Comm, events: Events, batch_size: int, size: int, slide: int | None = None,
                lateness: int = 0, policy: str = "max", flush: bool = False) -> WindowRun:
    """The whole stream on every rank (each reads its block of every micro-batch); returns its WindowRun.
    Merge the ranks with ``merge_tables``; their keys are disjoint."""
    if policy not in ("max", "min"):
        raise ValueError(f"watermark policy {policy!r} is not one of 'max' (Spark) or 'min' (per-partition)")
    op = WindowOperator(int(size), check_window(size, slide), int(lateness))
    rows: list[tuple[int, int, int, int, float]] = []
    marks = []
    batches = micro_batches(events, batch_size)
    for i, batch in enumerate(batches):
        marks.append(op.watermark)
        rows += [(i, *row) for row in step(comm, op, batch, policy)]
    marks.append(op.watermark)
    rows += [(len(batches), *row) for row in op.evict(everything=flush)]  # the no-data batch
    return WindowRun(rows, op.dropped, marks)


def merge_tables(tables: Sequence[Table]) -> Table:
    """One table from the ranks' tables; a window and key emitted twice is an error."""
    out: Table = {}
    for t in tables:
        for w, v in t.items():
            if w in out:
                raise ValueError(f"window {w} was emitted by two ranks: keys must have one owner")
            out[w] = v
    return out


def tables_equal(a: Table, b: Table, rtol: float = 1e-9) -> bool:
    """Same windows and keys, equal counts, sums equal up to ``rtol`` (float sums depend on order)."""
    return a.keys() == b.keys() and all(a[w][0] == b[w][0] and np.isclose(a[w][1], b[w][1], rtol=rtol, atol=1e-9)
                                        for w in a)
