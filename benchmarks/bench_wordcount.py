"""Word count over generated text: our MapReduce on real processes (K = 1, 2) beside PySpark (local[2]).

The text is ``datasets.zipf_lines`` (seeded, Zipf word frequencies; generation is not timed), cut into
records of ``--lines-per-record`` lines as a file system cuts input splits. Ours: ``run_mapreduce`` with
a mapper that counts the words of its record (in-mapper combining) and the sum as combiner and reducer,
on ``cluster.run(backend="process")``; the job time is measured inside the workers, from a barrier after
start-up to a barrier after the reduce. Spark: the same lines as a cached RDD (``flatMap`` then
``reduceByKey``) and as a cached DataFrame (``split``, ``explode``, ``groupBy().count()``), each timed
after the session's start-up and the caching. The counts must be equal, and the script asserts it.
Usage: python benchmarks/bench_wordcount.py [--mb 50] [--repeats 3] [--smoke]
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

from _common import machine
from scaleoutai import cluster, datasets
from scaleoutai.data import mapreduce as mr
from scaleoutai.data.spark import JAVA_HINT, have_java, local_spark


def count_words(record: str) -> list[tuple[str, int]]:
    return list(Counter(record.split()).items())


def timed_job(comm, records):
    comm.barrier()
    t = time.perf_counter()
    mine, _ = mr.run_mapreduce(comm, records, count_words, mr.sum_reducer, combiner=mr.sum_reducer)
    comm.barrier()
    return mine, time.perf_counter() - t


def ours(records: list[str], K: int) -> tuple[float, dict]:
    res = cluster.run(timed_job, K, backend="process", args=(records,), timeout=900, quiet=True)
    counts: dict = {}
    for mine, _ in res.values:
        counts.update(mine)
    return max(t for _, t in res.values), counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=50.0, help="megabytes of generated text")
    ap.add_argument("--vocab", type=int, default=50_000)
    ap.add_argument("--lines-per-record", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="1 MB, 1 repeat: checks the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.mb, a.repeats = 1.0, 1
    if not have_java():
        raise SystemExit(JAVA_HINT)
    n_lines = int(a.mb * 1e6 / 42.4)  # zipf_lines averages about 42 bytes a line at 10 words
    lines = datasets.zipf_lines(n_lines, words_per_line=10, vocab=a.vocab, seed=0)
    size = sum(len(s) + 1 for s in lines)
    records = ["\n".join(lines[i:i + a.lines_per_record]) for i in range(0, len(lines), a.lines_per_record)]
    print(f"# word count, {size / 1e6:.1f} MB, {len(lines)} lines, {len(records)} records; {machine()}")

    results: dict[str, float] = {}
    reference: dict | None = None
    for K in (1, 2):
        times = []
        for _ in range(a.repeats):
            t, counts = ours(records, K)
            times.append(t)
            assert reference is None or counts == reference, f"K={K} disagrees with K=1"
            reference = counts
        results[f"ours, process backend, K={K}"] = statistics.median(times)

    from pyspark.sql import functions as F

    spark = local_spark("bench-wordcount", {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "4g"})
    try:
        rdd = spark.sparkContext.parallelize(lines, 8).cache()
        rdd.count()  # materialise the cache: loading is not the job
        df = spark.createDataFrame([(s,) for s in lines], "line string").repartition(8).cache()
        df.count()
        rdd_times, df_times = [], []
        for _ in range(a.repeats):
            t = time.perf_counter()
            got = dict(rdd.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(lambda x, y: x + y).collect())
            rdd_times.append(time.perf_counter() - t)
            assert got == reference, "Spark's RDD word count disagrees with ours"
            t = time.perf_counter()
            rows = df.select(F.explode(F.split("line", " ")).alias("w")).groupBy("w").count().collect()
            df_times.append(time.perf_counter() - t)
            assert {r["w"]: r["count"] for r in rows} == reference, "Spark's DataFrame word count disagrees with ours"
        results["PySpark local[2], RDD reduceByKey"] = statistics.median(rdd_times)
        results["PySpark local[2], DataFrame groupBy().count()"] = statistics.median(df_times)
    finally:
        spark.stop()

    base = results["ours, process backend, K=1"]
    print(f"{'job':48s} {'wall s':>8s} {'MB/s':>7s} {'vs ours K=1':>12s}")
    for name, t in results.items():
        print(f"{name:48s} {t:8.2f} {size / 1e6 / t:7.1f} {base / t:11.2f}x")
    print(f"counts equal: {len(reference)} distinct words, {sum(reference.values())} words in all")


if __name__ == "__main__":
    main()
