"""Chapter 7, Section 5: PySpark (local[2]) runs the same queries to the same rows, with the same
number of stages, and its RDD word count equals the MapReduce reference of Chapter 6."""
from __future__ import annotations

import re

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.data import mapreduce as mr
from scaleoutai.data.spark import COMPARABLE_PLANS, JAVA_HINT, have_java, local_spark
from scaleoutai.data.dataframe import DataFrame, assert_frame_close, col, reference_query, sort_rows

pytestmark = pytest.mark.skipif(not have_java(), reason=JAVA_HINT)

RNG = np.random.default_rng(3)
N = 2_000
T = {"k": RNG.integers(0, 40, N), "x": RNG.standard_normal(N) * 10, "y": RNG.integers(-50, 50, N),
     "g": RNG.integers(0, 3, N)}
U = {"k": np.arange(0, 60, 3), "w": np.linspace(-1.0, 2.0, 20)}


@pytest.fixture(scope="module")
def spark():
    session = local_spark("test-ch07", COMPARABLE_PLANS)
    try:
        yield session
    finally:
        session.stop()


def spark_run(spark, sdf, group):
    """Collect ``sdf`` and count the stages of the jobs it ran, from Spark's own status tracker."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        pdf = sdf.toPandas()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = {s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds}
    return sort_rows({c: pdf[c].to_numpy() for c in pdf.columns}), len(stages)


def physical_plan(sdf) -> str:
    return sdf._jdf.queryExecution().executedPlan().toString()


def queries(spark):
    """name -> (our query as a function of comm, the same query in PySpark)."""
    from pyspark.sql import functions as F

    ts, us = spark.createDataFrame(_pandas(T)), spark.createDataFrame(_pandas(U))
    return {
        "narrow": (lambda c: DataFrame.from_table(c, T, "t").filter(col("x") > 0).with_column("z", col("y") * 2)
                   .select("k", "z"),
                   ts.filter(F.col("x") > 0).withColumn("z", F.col("y") * 2).select("k", "z")),
        "group_by": (lambda c: DataFrame.from_table(c, T, "t").filter(col("x") > -5).with_column("z", col("y") * 2)
                     .group_by("k").agg(s=("z", "sum"), m=("x", "mean"), n=("y", "count"), lo=("y", "min"),
                                        hi=("x", "max")),
                     ts.filter(F.col("x") > -5).withColumn("z", F.col("y") * 2).groupBy("k")
                     .agg(F.sum("z").alias("s"), F.avg("x").alias("m"), F.count("y").alias("n"),
                          F.min("y").alias("lo"), F.max("x").alias("hi"))),
        "join": (lambda c: DataFrame.from_table(c, T, "t").join(DataFrame.from_table(c, U, "u"), on="k"),
                 ts.join(us, on="k", how="inner")),
        "group_by then join": (lambda c: DataFrame.from_table(c, T, "t").group_by("k").agg(s=("y", "sum"))
                               .join(DataFrame.from_table(c, U, "u"), on="k"),
                               ts.groupBy("k").agg(F.sum("y").alias("s")).join(us, on="k")),
        "composed": (lambda c: DataFrame.from_table(c, T, "t").filter(col("x") > -5).with_column("z", col("y") * 2)
                     .join(DataFrame.from_table(c, U, "u"), on="k").group_by("g")
                     .agg(s=("z", "sum"), m=("w", "mean"), n=("k", "count")).filter(col("n") > 0),
                     ts.filter(F.col("x") > -5).withColumn("z", F.col("y") * 2).join(us, on="k").groupBy("g")
                     .agg(F.sum("z").alias("s"), F.avg("w").alias("m"), F.count("k").alias("n"))
                     .filter(F.col("n") > 0)),
    }


def _pandas(table):
    import pandas as pd

    return pd.DataFrame(table)


def test_spark_gives_our_rows_and_our_stage_count_for_every_query(spark):
    for name, (ours, theirs) in queries(spark).items():
        got = cluster.run(lambda comm: ours(comm).collect(), 2, timeout=60).values[0]
        spark_rows, spark_stages = spark_run(spark, theirs, f"ch07-{name}")
        assert_frame_close(spark_rows, got, rtol=1e-9)
        assert_frame_close(got, reference_query(ours(None)), rtol=1e-12)
        assert spark_stages == ours(None).stages(), (name, spark_stages, ours(None).explain())
        plan = physical_plan(theirs)
        assert len(re.findall(r"Exchange hashpartitioning", plan)) == ours(None).stages() - 1, name
        # map-side combine on both sides: Spark's partial_ aggregates where ours has partial_agg
        assert ("partial_" in plan) == ("partial_agg" in ours(None).explain()), name


def test_spark_rdd_word_count_equals_the_mapreduce_reference(spark):
    lines = datasets.zipf_lines(500, words_per_line=8, vocab=200, seed=5)
    counts = dict(spark.sparkContext.parallelize(lines, 2).flatMap(str.split).map(lambda w: (w, 1))
                  .reduceByKey(lambda a, b: a + b).collect())
    assert counts == mr.reference_mapreduce(lines, mr.word_count_mapper, mr.sum_reducer)
    assert sum(counts.values()) == 500 * 8
