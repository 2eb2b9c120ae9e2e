"""Stream-pipeline option: keyed tumbling-window aggregates with watermarks over K partitions (Chapter 9).

The stream: ``datasets.generate_events`` (event time in ms, integer key, float value) in arrival order,
some events out of order, a share of them late, all from one seed. It is cut into micro-batches of
``--batch`` events, as Spark Structured Streaming reads a source. The operator
(``data.streaming.WindowOperator``) keeps (count, sum) per (window, key), drops the (event, window)
pairs that arrive after the previous watermark, and emits, then forgets, every window the current
watermark closed.

Distribution axis: data. Per micro-batch rank r of K reads block r of the batch (its source
partition), sends every event to the rank owning its key (``partition_of(key, K)``: one all-to-all,
the shuffle), windows the keys it owns, and the ranks agree on the watermark with one all-reduce of
the latest event time (max). Every rank therefore drops and emits exactly what one machine would:
the union of the K ranks' rows equals the single-machine rows, window by window and key by key.
"""
from __future__ import annotations

import os

ROW_FIELDS = ("batch", "window_start", "key", "count", "sum")


def set_threads(threads: int) -> None:
    """One BLAS thread per process (before NumPy loads), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def make_stream(args):
    """The whole event stream in arrival order, the same bytes on every rank and at any K.

    A replayed source: every rank regenerates it (outside the timed region, as a broker would hold it)
    and reads only its block of each micro-batch."""
    from scaleoutai.datasets import generate_events

    return generate_events(args.n, keys=args.keys, rate=args.rate, disorder_ms=args.disorder_ms,
                           lateness=args.late_frac, late_ms=args.late_ms, seed=args.seed)


def warm_up(events, args) -> None:
    """Load the modules and run the operator once on the first micro-batch, before the timed region, so
    neither script times its first imports and first calls (Chapter 5: warm up, then measure)."""
    import scaleoutai.collectives  # noqa: F401
    import scaleoutai.data.streaming  # noqa: F401

    single_step(new_operator(args), events[:args.batch])


def new_operator(args):
    from scaleoutai.data.streaming import WindowOperator, check_window

    return WindowOperator(int(args.window), check_window(int(args.window), None), int(args.lateness))


def read_block(batch, rank: int, size: int):
    """This rank's source partition of one micro-batch: block ``rank`` of ``size`` (uneven, maybe empty)."""
    from scaleoutai.collectives import block_range

    lo, hi = block_range(len(batch), size, rank)
    return batch[lo:hi]


def partition_step(comm, op, batch) -> list[tuple]:
    """One micro-batch on every rank: read my block, shuffle by key, window, emit, advance the watermark."""
    from scaleoutai.data.streaming import global_max_time, shuffle_by_key

    mine = read_block(batch, comm.rank, comm.size)
    if len(mine):
        t = int(mine.time.max())
        op.seen = t if op.seen is None else max(op.seen, t)
    op.process(shuffle_by_key(comm, mine))        # all-to-all: (n_i (K-1)/K) events x 24 bytes leave a rank
    rows = op.evict()
    op.advance(global_max_time(comm, op.seen))    # all-reduce of one int64: the watermark is global
    return rows


def single_step(op, batch) -> list[tuple]:
    """The same micro-batch on one machine: no shuffle, the watermark follows this machine's latest time."""
    if len(batch):
        t = int(batch.time.max())
        op.seen = t if op.seen is None else max(op.seen, t)
    op.process(batch)
    rows = op.evict()
    op.advance(op.seen)
    return rows


def run_stream(events, args, step) -> tuple[list[tuple], int]:
    """Feed the micro-batches through ``step(op, batch)``; then the no-data batch that evicts the rest.

    Returns (rows (batch id, window start, key, count, sum), late pairs dropped)."""
    from scaleoutai.data.streaming import micro_batches

    op = new_operator(args)
    rows = []
    batches = micro_batches(events, args.batch)
    for i, batch in enumerate(batches):
        rows += [(i, *r) for r in step(op, batch)]
    rows += [(len(batches), *r) for r in op.evict(everything=args.flush)]
    return rows, op.dropped


def rows_array(rows):
    """Rows as one (n, 5) float64 array sorted by (window start, key): what a rank sends to rank 0.
    Times, keys and counts are integers far below 2^53, so they survive float64 exactly."""
    import numpy as np

    arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
    return arr[np.lexsort((arr[:, 2], arr[:, 1]))] if len(arr) else arr


def compare(got, ref) -> tuple[bool, str]:
    """Exact comparison: the same (batch, window, key) rows with equal counts and bit-equal sums.

    Each key's events reach its owner in arrival order (blocks are concatenated in rank order), so
    every per-key sum adds the same numbers in the same order as one machine: no tolerance is needed."""
    import numpy as np

    if got.shape != ref.shape:
        return False, f"{len(got)} rows, the baseline has {len(ref)}"
    if not np.array_equal(got[:, :4], ref[:, :4]):
        bad = int(np.sum(np.any(got[:, :4] != ref[:, :4], axis=1)))
        return False, f"{bad} rows differ in batch, window, key or count"
    err = float(np.max(np.abs(got[:, 4] - ref[:, 4]))) if len(got) else 0.0
    return err == 0.0, f"max |sum - sum_baseline| = {err:.3e}"


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --n 100000)."""
    parser.add_argument("--n", type=int, default=1_000_000, help="events in the stream")
    parser.add_argument("--keys", type=int, default=1000, help="distinct keys")
    parser.add_argument("--rate", type=float, default=50_000.0, help="events per second of event time")
    parser.add_argument("--batch", type=int, default=20_000, help="events per micro-batch")
    parser.add_argument("--window", type=int, default=1000, help="tumbling window size in ms")
    parser.add_argument("--lateness", type=int, default=500, help="allowed lateness L in ms (watermark = max time - L)")
    parser.add_argument("--disorder-ms", type=int, default=200, help="ordinary out-of-order delay, uniform below this")
    parser.add_argument("--late-frac", type=float, default=0.02, help="share of events delayed past any lateness")
    parser.add_argument("--late-ms", type=int, default=5000, help="delay of the late events, in [late_ms, 2 late_ms)")
    parser.add_argument("--flush", action="store_true", help="emit every open window at the end (bounded source)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
