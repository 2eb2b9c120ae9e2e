"""Chapter 9, Section 5: Spark Structured Streaming over the same files gives our windows and watermarks."""
from __future__ import annotations


import pytest

from scaleoutai import cluster, datasets
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sinks as ss
from scaleoutai.data.spark import JAVA_HINT, have_java, local_spark

pytestmark = pytest.mark.skipif(not have_java(), reason=JAVA_HINT)


@pytest.fixture(scope="module")
def spark():
    session = local_spark("test-ch09")
    try:
        yield session
    finally:
        session.stop()


EVENTS = datasets.generate_events(2_400, keys=5, rate=1000.0, disorder_ms=200, lateness=0.08, late_ms=1_500, seed=7)


@pytest.mark.parametrize("size,slide,lateness", [(1000, 1000, 300), (1000, 300, 500)])
def test_spark_structured_streaming_equals_our_windows(spark, tmp_path, size, slide, lateness):
    batch = 300
    ss.write_batch_files(EVENTS, batch, str(tmp_path / "in"))
    got = ss.spark_windows(spark, str(tmp_path / "in"), size, slide, lateness, str(tmp_path / "ckpt"), timeout=120)
    ours = cluster.run(st.run_windows, 3, args=(EVENTS, batch, size, slide, lateness), timeout=60)
    want = st.merge_tables([v.table() for v in ours.values])
    assert got.batches == len(st.micro_batches(EVENTS, batch)) + 1  # one per file, then the no-data batch
    assert want and st.tables_equal(got.table, want)
    marks = ours.values[0].watermarks  # the same W_i in every batch (Spark's report may read 1 ms low)
    assert len(got.watermarks) == len(marks) and all(0 <= a - b <= 1 for a, b in zip(marks, got.watermarks))
    assert st.tables_equal(want, st.reference_windows(EVENTS, size, slide, lateness=lateness, batch_size=batch))


def test_late_data_rule_differs_from_dropping_against_the_current_watermark(spark, tmp_path):
    # 85 s arrives when W = 91 s, but Spark judges it against the previous watermark (0) and keeps it
    ev = datasets.Events([100_000, 101_000, 85_000, 125_000], [1] * 4, [1.0] * 4)
    ss.write_batch_files(ev, 2, str(tmp_path / "in"))
    got = ss.spark_windows(spark, str(tmp_path / "in"), 10_000, None, 10_000, str(tmp_path / "ckpt"), timeout=120)
    assert got.table == {(80_000, 1): (1, 1.0), (100_000, 1): (2, 2.0)}
    assert got.table == st.reference_windows(ev, 10_000, lateness=10_000, batch_size=2)
