"""The one local Spark session of Part II (Chapters 7 and 9), the same for a notebook, a test or a benchmark.

``local[2]`` on this course's 2-core machines, quiet (no console progress bars, no web UI, errors only, the
JVM's console in ``jvm_log()``),
two shuffle partitions (Spark's default of 200 would make 200 tiny tasks per shuffle), UTC for event
times, Arrow for pandas. PySpark needs a Java runtime, which pip cannot install: without one the error
says how to get it. Start-up takes seconds, so start one session per notebook and stop it at the end.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

JAVA_HINT = ("PySpark needs Java 17 or newer: run `bash environments/data/install-ci.sh` as root (Debian/Ubuntu), "
             "or install OpenJDK 17 with your package manager (macOS: brew install openjdk@17)")

# What makes Spark's plan comparable stage for stage with ours (Chapter 7, Section 5): adaptive query
# execution re-plans at run time (coalescing or skipping stages), a broadcast join shuffles neither side,
# and ConvertToLocalRelation evaluates a narrow query on an in-memory table while planning, with no job.
COMPARABLE_PLANS = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.optimizer.excludedRules": "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation",
}


def jvm_log() -> Path:
    """Where this process's Spark JVM writes its console: start-up notes and log4j lines stay out of cells."""
    return Path(tempfile.gettempdir()) / f"scaleout-spark-jvm-{os.getpid()}.log"


def _start_context(app: str, cores: int, settings: dict[str, str]) -> None:
    """Launch the JVM with its stdout and stderr in ``jvm_log()`` (PySpark's ``popen_kwargs`` hook, meant for
    this): the JVM prints its module and log4j notes at start-up, below any log level. A Java exception still
    reaches Python as a Py4JJavaError with its stack trace."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf().setMaster(f"local[{cores}]").setAppName(app).setAll(list(settings.items()))
    with open(jvm_log(), "ab") as log:  # the JVM keeps its own copy of the descriptor
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    SparkContext(conf=conf, gateway=gateway)


def have_java() -> bool:
    return shutil.which("java") is not None


def local_spark(app: str, conf: dict[str, str] | None = None, cores: int = 2) -> Any:
    """A SparkSession on ``local[cores]`` named ``app``, with the course's settings and then ``conf``.

    The caller stops it (``spark.stop()``), in a ``finally`` or the notebook's last cell."""
    if not have_java():
        raise RuntimeError(JAVA_HINT)
    import logging
    import warnings

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    logging.getLogger("py4j").setLevel(logging.ERROR)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind locally, and skip the warning about it
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    settings = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC",
                "spark.sql.execution.arrow.pyspark.enabled": "true", **(conf or {})}
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    if SparkContext._gateway is None:  # the first session of this process launches the JVM
        _start_context(app, cores, settings)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
