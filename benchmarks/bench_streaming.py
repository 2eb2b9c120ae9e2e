"""Streaming throughput (events/s): our windows beside Spark Structured Streaming on the same files.

Both compute the same sliding windows with the same watermark over the same parquet files, one file
per micro-batch; Spark's session start-up is excluded, each query's planning and commits are not. Ours
runs on one rank in this process (cluster.run, backend "sim", K = 1) and on K = 2 simulated ranks
(threads sharing the interpreter: it shows the shuffle's overhead, not a speedup). The results must be
equal, and the script says so. Figures are medians of ``--repeats`` runs, measured in one run.
Usage: python benchmarks/bench_streaming.py [--events 200000] [--batches 10] [--repeats 3] [--smoke]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import machine
from scaleoutai import cluster, datasets
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sinks as ss
from scaleoutai.data.spark import JAVA_HINT, have_java, local_spark


def ours(events: datasets.Events, batch: int, size: int, slide: int, delta: int, K: int) -> tuple[float, st.Table]:
    t = time.perf_counter()
    res = cluster.run(st.run_windows, K, args=(events, batch, size, slide, delta), timeout=600)
    return time.perf_counter() - t, st.merge_tables([v.table() for v in res.values])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=10, help="micro-batches (files) the stream is cut into")
    ap.add_argument("--keys", type=int, default=16)
    ap.add_argument("--window-ms", type=int, default=2_000)
    ap.add_argument("--slide-ms", type=int, default=1_000)
    ap.add_argument("--lateness-ms", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="20k events, 1 repeat: checks the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.events, a.repeats = 20_000, 1
    if not have_java():
        raise SystemExit(JAVA_HINT)
    events = datasets.generate_events(a.events, keys=a.keys, rate=10_000.0, disorder_ms=300, lateness=0.05, late_ms=3_000)
    batch = -(-a.events // a.batches)
    work = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    t0 = time.perf_counter()
    spark = local_spark("bench-streaming")
    startup = time.perf_counter() - t0
    try:
        ss.write_batch_files(events, batch, str(work / "in"))
        windows = (a.window_ms, a.slide_ms, a.lateness_ms)
        spark_s, ours1_s, ours2_s = [], [], []
        for r in range(a.repeats):
            run = ss.spark_windows(spark, str(work / "in"), *windows, str(work / f"ckpt-{r}"), timeout=600)
            spark_s.append(run.seconds)
            t1, table1 = ours(events, batch, *windows, K=1)
            t2, table2 = ours(events, batch, *windows, K=2)
            ours1_s.append(t1)
            ours2_s.append(t2)
            assert st.tables_equal(run.table, table1) and st.tables_equal(table1, table2), "results differ"
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {name: float(np.median(v)) for name, v in (("spark", spark_s), ("ours1", ours1_s), ("ours2", ours2_s))}
    print(f"machine: {machine()}")
    print(f"{a.events} events, {a.keys} keys, {a.batches} micro-batches of {batch}, windows {a.window_ms} ms every "
          f"{a.slide_ms} ms, lateness {a.lateness_ms} ms; {len(table1)} (window, key) results, equal in all runs")
    print(f"Spark session start-up (excluded): {startup:.1f} s")
    print(f"{'engine':<34} {'median s':>9} {'events/s':>11} {'vs Spark':>9}")
    for label, key in (("Spark Structured Streaming local[2]", "spark"), ("ours, K = 1 (one rank)", "ours1"),
                       ("ours, K = 2 simulated ranks", "ours2")):
        print(f"{label:<34} {med[key]:>9.2f} {a.events / med[key]:>11,.0f} {med['spark'] / med[key]:>8.1f}x")


if __name__ == "__main__":
    main()
