"""Exactly-once output: checkpointed offsets, idempotent sinks, a crash between processing and commit
(Chapter 9, Sections 4 and 6), and the same discipline on a real broker, Redis Streams (Section 5).

Per micro-batch i every rank: processes its events, writes its final windows to the sink, saves its
state (window state and watermarks) to ``rank-r/state-i.pkl``; after two barriers (all wrote; none
failed) rank 0 commits ``commit.json`` = {batch: i, offset: the source offset after batch i}. Files are written to a temporary name and
renamed, so a crash leaves the old file or the new one, never half of one. A restart loads the
committed batch's state and replays from its offset. Output written before the crash is written
again: ``upsert_sink`` (keyed by (window, key)) absorbs it, ``naive_append_sink`` duplicates it.
Invariant: after any crashes and restarts the upsert sink equals the run without crashes.
"""
from __future__ import annotations

import json
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster import Comm
from .streaming import Events, Row, Table, WindowOperator, check_window, micro_batches, step

Sink = Callable[[str, int, int, list[Row]], None]  # (sink dir, rank, batch id, rows)


class InjectedCrash(RuntimeError):
    """Raised by the crash hook: the process dies after writing output and before committing it."""


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write to ``path.tmp``, fsync, rename: readers see the old content or the new, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def upsert_sink(sink_dir: str, rank: int, batch_id: int, rows: list[Row]) -> None:
    """Idempotent: the rank's table maps (window start, key) -> row; writing a row again replaces it."""
    path = Path(sink_dir) / f"part-{rank}.pkl"
    table = pickle.loads(path.read_bytes()) if path.exists() else {}
    for s, k, c, v in rows:
        table[(int(s), int(k))] = (int(s), int(k), int(c), float(v))
    atomic_write(path, pickle.dumps(table))


def naive_append_sink(sink_dir: str, rank: int, batch_id: int, rows: list[Row]) -> None:
    """At-least-once: append every row; a batch replayed after a crash is appended twice."""
    path = Path(sink_dir) / f"part-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for s, k, c, v in rows:
            f.write(json.dumps([int(s), int(k), int(c), float(v)]) + "\n")


def read_sink(sink_dir: str) -> list[Row]:
    """Every row the sink holds, from either kind of sink (duplicates kept, so they can be counted)."""
    rows: list[Row] = []
    for path in sorted(Path(sink_dir).glob("part-*")):
        if path.suffix == ".pkl":
            rows += [tuple(r) for r in pickle.loads(path.read_bytes()).values()]
        elif path.suffix == ".jsonl":
            rows += [tuple(json.loads(line)) for line in path.read_text().splitlines() if line]
    return rows


def sink_table(rows: Sequence[Row]) -> tuple[Table, int]:
    """(table, duplicates): the last row per (window, key) and how many rows repeated a window and key."""
    table = {(int(s), int(k)): (int(c), float(v)) for s, k, c, v in rows}
    return table, len(rows) - len(table)


@dataclass
class Resume:
    """Where a run started (the committed batch + 1) and how many batches it processed."""

    start_batch: int
    processed: int


def _load(checkpoint_dir: Path, rank: int, size: int, slide: int, lateness: int) -> tuple[int, WindowOperator]:
    commit = checkpoint_dir / "commit.json"
    if not commit.exists():
        return 0, WindowOperator(size, slide, lateness)
    batch = json.loads(commit.read_text())["batch"]
    op = pickle.loads((checkpoint_dir / f"rank-{rank}" / f"state-{batch}.pkl").read_bytes())
    return batch + 1, op


def run_exactly_once(comm: Comm, events: Events, batch_size: int, size: int, slide: int | None,
                     lateness: int, checkpoint_dir: str, sink_dir: str, sink: Sink = upsert_sink,
                     crash_after: int | None = None, crash_rank: int = 0, flush: bool = False) -> Resume:
    """Windows with checkpointed offsets and state; resumes from ``checkpoint_dir`` if it holds a commit.

    ``crash_after=i`` makes ``crash_rank`` raise InjectedCrash after batch i reached the sink and before
    it is committed. Batch ``len(batches)`` is the final no-data batch (or the flush).
    """
    slide = check_window(size, slide)
    ckpt = Path(checkpoint_dir)
    start, op = _load(ckpt, comm.rank, int(size), slide, int(lateness))
    batches = micro_batches(events, batch_size)
    processed = 0
    for i in range(start, len(batches) + 1):
        if i < len(batches):
            rows = step(comm, op, batches[i])
        else:
            rows = op.evict(everything=flush)
        sink(sink_dir, comm.rank, i, rows)
        atomic_write(ckpt / f"rank-{comm.rank}" / f"state-{i}.pkl", pickle.dumps(op))
        comm.barrier()  # phase 1: every rank's output and state for batch i are on disk
        if crash_after == i and comm.rank == crash_rank:
            raise InjectedCrash(f"rank {comm.rank} crashed after writing batch {i} and before committing it")
        comm.barrier()  # phase 2: no rank failed in between, so the batch may be committed
        if comm.rank == 0:
            offset = min(len(events), (i + 1) * batch_size)
            atomic_write(ckpt / "commit.json", json.dumps({"batch": i, "offset": offset}).encode())
        old = ckpt / f"rank-{comm.rank}" / f"state-{i - 2}.pkl"  # batch i-1 is committed by now: keep it
        if old.exists():
            old.unlink()
        processed += 1
    return Resume(start, processed)


# --- Redis Streams: the broker keeps the offsets, the consumer group the acknowledgements -----------

def redis_publish(client: Any, stream: str, events: Events) -> list[str]:
    """XADD every event in arrival order (one pipeline); returns the entry ids."""
    pipe = client.pipeline(transaction=False)
    for t, k, v in zip(events.time, events.key, events.value):
        pipe.xadd(stream, {"t": int(t), "k": int(k), "v": repr(float(v))})
    return [i.decode() if isinstance(i, bytes) else i for i in pipe.execute()]


def _parse(entries: list) -> tuple[list[str], Events]:
    ids, t, k, v = [], [], [], []
    for entry_id, fields in entries:
        f = {(a.decode() if isinstance(a, bytes) else a): (b.decode() if isinstance(b, bytes) else b)
             for a, b in fields.items()}
        ids.append(entry_id.decode() if isinstance(entry_id, bytes) else entry_id)
        t.append(int(f["t"]))
        k.append(int(f["k"]))
        v.append(float(f["v"]))
    return ids, Events(t, k, v)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def run_redis_consumer(client: Any, stream: str, group: str, consumer: str, batch_size: int, size: int,
                       slide: int | None, lateness: int, checkpoint: str, sink_dir: str,
                       sink: Sink = upsert_sink, crash_after: int | None = None, flush: bool = False) -> Resume:
    """One consumer of a consumer group windows a bounded Redis stream, exactly once into the sink.

    Per batch (XREADGROUP COUNT batch_size): process, write the sink, checkpoint (state, last entry
    id, batch id) atomically, then XACK. On restart the consumer first re-reads its pending entries
    (id "0": delivered, never acknowledged) and replays them; then it reads new entries (">"). Entries
    at or below the checkpoint's last id are acknowledged and skipped, wherever they come from. The group must exist (XGROUP CREATE ... MKSTREAM).
    """
    slide = check_window(size, slide)
    path = Path(checkpoint)
    if path.exists():
        saved = pickle.loads(path.read_bytes())
        op, last_id, batch_id = saved["op"], saved["last_id"], saved["batch"] + 1
    else:
        op, last_id, batch_id = WindowOperator(int(size), slide, int(lateness)), "0-0", 0
    start, processed = batch_id, 0
    pending = True
    while True:
        got = client.xreadgroup(group, consumer, {stream: "0" if pending else ">"}, count=batch_size)
        entries = got[0][1] if got else []
        ids, batch = _parse(entries)
        done = [i for i in ids if _id_key(i) <= _id_key(last_id)]
        if done:  # already in the checkpoint (a crash between checkpoint and XACK, or a redelivery)
            client.xack(stream, group, *done)
            continue
        if pending and not ids:
            pending = False
            continue
        final = not ids
        if final:
            rows = op.evict(everything=flush)
        else:
            if len(batch):
                op.seen = int(batch.time.max()) if op.seen is None else max(op.seen, int(batch.time.max()))
            op.process(batch)
            rows = op.evict()
            op.advance(op.seen)
        sink(sink_dir, 0, batch_id, rows)
        if crash_after == batch_id:
            raise InjectedCrash(f"consumer {consumer} crashed after writing batch {batch_id}, before XACK")
        last_id = ids[-1] if ids else last_id
        atomic_write(path, pickle.dumps({"op": op, "last_id": last_id, "batch": batch_id}))
        if ids:
            client.xack(stream, group, *ids)
        processed += 1
        batch_id += 1
        if final:
            return Resume(start, processed)



# --- Spark Structured Streaming over a bounded file source (Section 5) -----------------------------

def write_batch_files(events: Events, batch_size: int, directory: str) -> list[str]:
    """One parquet file per micro-batch, modification times 1 s apart in batch order: Spark's file
    source with maxFilesPerTrigger=1 reads the oldest file first, so its batches are ours."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    batches = micro_batches(events, batch_size)
    base = int(time.time()) - len(batches) - 10
    paths = []
    for i, batch in enumerate(batches):
        path = out / f"batch-{i:06d}.parquet"
        pq.write_table(pa.table({"t": batch.time, "key": batch.key, "value": batch.value}), path)
        os.utime(path, (base + i, base + i))
        paths.append(str(path))
    return paths


@dataclass
class SparkRun:
    """What the Spark query produced: the windows, its wall time (session start-up excluded), batches,
    and the watermark of each batch as its progress report prints it (which can read 1 ms low: the
    report goes through floating-point seconds)."""

    table: Table
    seconds: float
    batches: int
    watermarks: list[int]


def spark_windows(spark: Any, directory: str, size: int, slide: int | None, lateness: int,
                  checkpoint: str, timeout: float = 300.0) -> SparkRun:
    """The same windows in Spark: file source (one file per trigger), watermark, window, append mode.

    trigger(availableNow=True) reads every file present, one micro-batch per file, runs the no-data
    batch that closes windows with the last watermark, and stops.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    slide = check_window(size, slide)
    schema = T.StructType([T.StructField("t", T.LongType()), T.StructField("key", T.LongType()),
                           T.StructField("value", T.DoubleType())])
    name = f"windows_{abs(hash((directory, checkpoint))) % 10**9}"
    stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(directory)
              .withColumn("ts", F.timestamp_millis("t"))
              .withWatermark("ts", f"{int(lateness)} milliseconds"))
    windows = (stream.groupBy(F.window("ts", f"{int(size)} milliseconds", f"{slide} milliseconds"), "key")
               .agg(F.count("*").alias("n"), F.sum("value").alias("s"))
               .select(F.unix_millis(F.col("window.start")).alias("start"), "key", "n", "s"))
    t0 = time.perf_counter()
    query = (windows.writeStream.trigger(availableNow=True).outputMode("append").format("memory")
             .queryName(name).option("checkpointLocation", checkpoint).start())
    finished = query.awaitTermination(timeout)
    seconds = time.perf_counter() - t0
    if not finished:
        query.stop()
        raise TimeoutError(f"the Spark streaming query did not finish within {timeout} s")
    if query.exception() is not None:
        raise RuntimeError(f"the Spark streaming query failed: {query.exception()}")
    progress = query.recentProgress
    marks = [int(_progress_ms(p["eventTime"]["watermark"])) for p in progress if "watermark" in p.get("eventTime", {})]
    rows = spark.sql(f"SELECT start, key, n, s FROM {name}").collect()
    spark.catalog.dropTempView(name)
    table = {(int(r["start"]), int(r["key"])): (int(r["n"]), float(r["s"])) for r in rows}
    return SparkRun(table, seconds, (progress[-1]["batchId"] + 1) if progress else 0, marks)


def _progress_ms(stamp: str) -> int:
    """Spark's progress timestamp '1970-01-01T00:01:30.000Z' as ms since the epoch."""
    from datetime import datetime, timezone

    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp() * 1000)
