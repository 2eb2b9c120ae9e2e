"""Chapter 9, Sections 5-6: Redis Streams with a consumer group carries the stream through a crash."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sinks as ss
from scaleoutai.data.broker import INSTALL_HINT, redis_server

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason=INSTALL_HINT)

EVENTS = datasets.generate_events(1_200, keys=5, rate=1000.0, disorder_ms=200, lateness=0.08, late_ms=1_500, seed=9)
SIZE, SLIDE, LATE, BATCH = 1000, 500, 400, 100


@pytest.fixture
def server(tmp_path):
    with redis_server(str(tmp_path)) as srv:
        yield srv
    assert srv.proc.poll() is not None  # stopped, not left running


def published(srv):
    client = srv.client()
    ids = ss.redis_publish(client, "events", EVENTS)
    client.xgroup_create("events", "windows", id="0", mkstream=True)
    assert len(ids) == client.xlen("events") == len(EVENTS)
    return client


def busy_batch() -> int:
    """A batch that emits windows, so a crash after it leaves output to replay."""
    return int(np.argmax(_rows_by_batch()[:-1]))


def _rows_by_batch() -> np.ndarray:
    from scaleoutai import cluster

    rows = cluster.run(st.run_windows, 1, args=(EVENTS, BATCH, SIZE, SLIDE, LATE)).values[0].rows
    return np.bincount([b for b, *_ in rows])


def run(client, tmp_path, sink=ss.upsert_sink, crash_after=None, flush=False):
    return ss.run_redis_consumer(client, "events", "windows", "worker-1", BATCH, SIZE, SLIDE, LATE,
                                 str(tmp_path / "consumer.ckpt"), str(tmp_path / "sink"), sink=sink,
                                 crash_after=crash_after, flush=flush)


def test_consumer_crash_before_ack_loses_and_duplicates_nothing(server, tmp_path):
    client = published(server)
    crash = busy_batch()
    with pytest.raises(ss.InjectedCrash):
        run(client, tmp_path, crash_after=crash)
    assert client.xpending("events", "windows")["pending"] == BATCH  # delivered, processed, never acknowledged
    resumed = run(client, tmp_path)
    assert resumed.start_batch == crash
    table, dup = ss.sink_table(ss.read_sink(str(tmp_path / "sink")))
    assert dup == 0
    assert st.tables_equal(table, st.reference_windows(EVENTS, SIZE, SLIDE, lateness=LATE, batch_size=BATCH))
    assert client.xpending("events", "windows")["pending"] == 0


def test_append_sink_duplicates_the_replayed_batch(server, tmp_path):
    client = published(server)
    crash = busy_batch()
    with pytest.raises(ss.InjectedCrash):
        run(client, tmp_path, sink=ss.naive_append_sink, crash_after=crash)
    run(client, tmp_path, sink=ss.naive_append_sink)
    _, dup = ss.sink_table(ss.read_sink(str(tmp_path / "sink")))
    assert dup == _rows_by_batch()[crash] > 0


def test_crash_between_checkpoint_and_ack_is_not_counted_twice(server, tmp_path):
    client = published(server)
    run(client, tmp_path, flush=True)  # a clean run, then every entry is delivered again
    clean = ss.sink_table(ss.read_sink(str(tmp_path / "sink")))
    client.xgroup_setid("events", "windows", id="0")
    entries = client.xreadgroup("windows", "worker-1", {"events": ">"}, count=BATCH)[0][1]
    assert len(entries) == BATCH and client.xpending("events", "windows")["pending"] == BATCH
    run(client, tmp_path, flush=True)
    assert ss.sink_table(ss.read_sink(str(tmp_path / "sink"))) == clean
    assert client.xpending("events", "windows")["pending"] == 0
