"""Chapter 9: event-time windows, watermarks, exactly-once output and online SGD on a stream."""
from __future__ import annotations

import os

import numpy as np
import pytest

from scaleoutai import cluster, datasets
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sgd as sg
from scaleoutai.data import streaming_sinks as ss

KS = [1, 2, 3, 5, 8]
KEYS = 5
EVENTS = datasets.generate_events(1_500, keys=KEYS, rate=1000.0, disorder_ms=200, lateness=0.08, late_ms=1_500, seed=4)
SHAPES = [(1000, 1000), (1000, 300), (800, 400)]  # tumbling, sliding with size % slide != 0, sliding


def merged(res: cluster.RunResult) -> st.Table:
    return st.merge_tables([v.table() for v in res.values])


def test_assign_windows_matches_the_definition():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 10_000, 300)
    for size, slide in SHAPES + [(700, 700), (1000, 1)]:
        idx, starts = st.assign_windows(t, size, slide)
        for i, ti in enumerate(t):
            # every multiple of slide (windows may start before 0) whose window holds ti
            want = {s for s in range(-(size // slide + 1) * slide, int(ti) + 1, slide) if s <= ti < s + size}
            assert set(starts[idx == i].tolist()) == want, (size, slide, ti)


def test_watermarks_and_late_drops_follow_the_hand_computed_example():
    # 2 events per batch, lateness 10 s. Batch 0 (100, 101 s) gives W_1 = 91 s. Batch 1: 85 s lands in
    # [80, 90), which ends before W_1 but is judged against W_0 = 0, so it is kept (and emitted at once);
    # 125 s gives W_2 = 115 s. Batch 2: 105 s is judged against W_1 = 91 s (kept) and [100, 110) is
    # emitted with W_2. Batch 3: 109 s is judged against W_2 = 115 s (dropped); 112 s opens [110, 120),
    # which the last watermark (116 s) never closes.
    ev = datasets.Events([100_000, 101_000, 85_000, 125_000, 105_000, 126_000, 109_000, 112_000],
                   [1] * 8, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    assert st.batch_watermarks(ev, 2, 10_000).tolist() == [0, 91_000, 115_000, 116_000, 116_000]
    ref = st.reference_windows(ev, 10_000, lateness=10_000, batch_size=2)
    assert ref == {(80_000, 1): (1, 4.0), (100_000, 1): (3, 19.0)}
    res = cluster.run(st.run_windows, 2, args=(ev, 2, 10_000, None, 10_000))
    assert merged(res) == ref
    assert [b for v in res.values for b, *_ in v.rows] == [1, 2]  # the batches that emitted them
    flushed = cluster.run(st.run_windows, 3, args=(ev, 2, 10_000, None, 10_000), kwargs={"flush": True})
    assert merged(flushed) == {**ref, (110_000, 1): (1, 128.0), (120_000, 1): (2, 40.0)}
    assert sum(v.dropped for v in res.values) == 1


@pytest.mark.parametrize("size,slide", SHAPES)
@pytest.mark.parametrize("K", KS + [KEYS + 4])
def test_windows_match_reference_for_late_events(K, size, slide):
    ref = st.reference_windows(EVENTS, size, slide, lateness=500, batch_size=97)  # 97: uneven blocks
    res = cluster.run(st.run_windows, K, args=(EVENTS, 97, size, slide, 500), timeout=60)
    assert ref and st.tables_equal(merged(res), ref)
    assert len({v.watermarks[-1] for v in res.values}) == 1  # every rank agrees on the watermark


def test_late_pairs_are_dropped_and_counted():
    size, slide, L = 1000, 300, 400
    res = cluster.run(st.run_windows, 3, args=(EVENTS, 97, size, slide, L), kwargs={"flush": True})
    total = len(st.assign_windows(EVENTS.time, size, slide)[0])
    kept = sum(c for c, _ in st.reference_windows(EVENTS, size, slide, lateness=L, batch_size=97, flush=True).values())
    dropped = sum(v.dropped for v in res.values)
    assert dropped == total - kept > 0


def test_flush_with_unbounded_lateness_equals_the_batch_answer():
    res = cluster.run(st.run_windows, 3, args=(EVENTS, 100, 1000, 500, 10**9), kwargs={"flush": True})
    assert st.tables_equal(merged(res), st.reference_windows(EVENTS, 1000, 500))
    assert sum(v.dropped for v in res.values) == 0


def test_without_flush_only_windows_closed_by_the_last_watermark_are_emitted():
    res = cluster.run(st.run_windows, 2, args=(EVENTS, 100, 1000, None, 300))
    last = res.values[0].watermarks[-1]
    assert all(s + 1000 <= last for s, _ in merged(res))
    everything = st.reference_windows(EVENTS, 1000, lateness=300, batch_size=100, flush=True)
    assert any(s + 1000 > last for s, _ in everything)  # there were open windows left behind


def test_windows_are_emitted_once_by_the_owner_of_their_key():
    res = cluster.run(st.run_windows, 4, args=(EVENTS, 100, 1000, 500, 300))
    from scaleoutai.data.mapreduce import partition_of

    for r, v in enumerate(res.values):
        assert all(partition_of(k, 4) == r for _, k in v.table())
        assert len(v.rows) == len(v.table())


def test_min_watermark_policy_stalls_on_an_idle_rank():
    K, batch = 6, 4  # two ranks read nothing, ever: their watermark never moves
    ev = EVENTS[:400]
    stalled = cluster.run(st.run_windows, K, args=(ev, batch, 1000, None, 300), kwargs={"policy": "min"})
    moving = cluster.run(st.run_windows, K, args=(ev, batch, 1000, None, 300), kwargs={"policy": "max"})
    assert stalled.values[0].watermarks[-1] == 0 and not merged(stalled)
    assert moving.values[0].watermarks[-1] > 0 and merged(moving)


def test_bad_input_is_one_readable_error():
    with pytest.raises(ValueError, match="slide <= size"):
        st.assign_windows(np.array([1]), 100, 200)
    with pytest.raises(ValueError, match=">= 0"):
        datasets.Events([-1], [0], [0.0])
    with pytest.raises(ValueError, match="batch_size"):
        st.reference_windows(EVENTS, 100, lateness=10)
    with pytest.raises(cluster.RankError, match="watermark policy 'median'"):
        cluster.run(st.run_windows, 1, args=(EVENTS[:10], 5, 100, None, 0), kwargs={"policy": "median"})
    with pytest.raises(ValueError, match="lateness"):
        datasets.generate_events(10, lateness=2.0)


@pytest.mark.slow
def test_windows_match_reference_on_processes():
    ref = st.reference_windows(EVENTS, 1000, 300, lateness=500, batch_size=97)
    res = cluster.run(st.run_windows, 2, backend="process", args=(EVENTS, 97, 1000, 300, 500), timeout=120, quiet=True)
    assert st.tables_equal(merged(res), ref)


# --- exactly-once --------------------------------------------------------------------------------

def busy_batch(size: int, slide: int, L: int, batch: int) -> int:
    """A batch that emits windows: a crash after it leaves output to replay."""
    rows = cluster.run(st.run_windows, 1, args=(EVENTS, batch, size, slide, L)).values[0].rows
    counts = np.bincount([b for b, *_ in rows])
    return int(np.argmax(counts[:-1]))


def crash_then_resume(tmp_path, K, sink, crash_after, crash_rank):
    args = (EVENTS, 100, 1000, 500, 400, str(tmp_path / "ckpt"), str(tmp_path / "sink"), sink)
    with pytest.raises(cluster.RankError, match="InjectedCrash"):
        cluster.run(ss.run_exactly_once, K, args=args, kwargs={"crash_after": crash_after, "crash_rank": crash_rank},
                    timeout=60)
    resumed = cluster.run(ss.run_exactly_once, K, args=args, timeout=60).values[0]
    return ss.sink_table(ss.read_sink(str(tmp_path / "sink"))), resumed


@pytest.mark.parametrize("K", KS + [KEYS + 4])
def test_upsert_sink_after_crash_has_nothing_lost_or_duplicated(tmp_path, K):
    crash = busy_batch(1000, 500, 400, 100)
    (table, dup), resumed = crash_then_resume(tmp_path, K, ss.upsert_sink, crash, K - 1)
    assert resumed.start_batch == crash  # replayed from the last commit, not from the start
    assert dup == 0 and st.tables_equal(table, st.reference_windows(EVENTS, 1000, 500, lateness=400, batch_size=100))


def test_naive_append_sink_duplicates_after_the_same_crash(tmp_path):
    crash = busy_batch(1000, 500, 400, 100)
    (table, dup), _ = crash_then_resume(tmp_path, 3, ss.naive_append_sink, crash, 1)
    replayed = cluster.run(st.run_windows, 3, args=(EVENTS, 100, 1000, 500, 400)).values
    want = sum(1 for v in replayed for b, *_ in v.rows if b == crash)
    assert dup == want > 0  # the crashed batch's rows, twice
    assert st.tables_equal(table, st.reference_windows(EVENTS, 1000, 500, lateness=400, batch_size=100))


def test_a_run_without_crash_writes_the_same_sink_as_a_crashed_one(tmp_path):
    cluster.run(ss.run_exactly_once, 2, args=(EVENTS, 100, 1000, 500, 400, str(tmp_path / "c"), str(tmp_path / "s")))
    clean = ss.sink_table(ss.read_sink(str(tmp_path / "s")))
    again = cluster.run(ss.run_exactly_once, 2, args=(EVENTS, 100, 1000, 500, 400, str(tmp_path / "c"),
                                                       str(tmp_path / "s"))).values[0]
    assert again.processed == 0  # everything was committed: nothing is replayed
    assert ss.sink_table(ss.read_sink(str(tmp_path / "s"))) == clean


def test_atomic_write_leaves_the_old_file_when_the_temporary_is_abandoned(tmp_path):
    path = tmp_path / "commit.json"
    ss.atomic_write(path, b'{"batch": 3}')
    (tmp_path / "commit.json.tmp").write_bytes(b'{"bat')  # a writer killed before its rename
    assert path.read_bytes() == b'{"batch": 3}'
    ss.atomic_write(path, b'{"batch": 4}')
    assert path.read_bytes() == b'{"batch": 4}' and not os.path.exists(str(path) + ".tmp")


@pytest.mark.slow
def test_crash_and_resume_on_processes(tmp_path):
    crash = busy_batch(1000, 500, 400, 100)
    args = (EVENTS, 100, 1000, 500, 400, str(tmp_path / "ckpt"), str(tmp_path / "sink"))
    with pytest.raises(cluster.RankError, match="InjectedCrash"):
        cluster.run(ss.run_exactly_once, 2, backend="process", args=args, kwargs={"crash_after": crash},
                    timeout=120, quiet=True)
    cluster.run(ss.run_exactly_once, 2, backend="process", args=args, timeout=120, quiet=True)
    table, dup = ss.sink_table(ss.read_sink(str(tmp_path / "sink")))
    assert dup == 0 and st.tables_equal(table, st.reference_windows(EVENTS, 1000, 500, lateness=400, batch_size=100))


# --- online SGD ----------------------------------------------------------------------------------

X, Y, W = datasets.drifting_regression(150, 24, dim=3, drift=0.03, noise=0.1, seed=1)


@pytest.mark.parametrize("K", KS + [30])  # 30 > 24 rows per batch: some ranks hold none
def test_distributed_online_sgd_equals_single_rank_sgd(K):
    w_ref, e_ref = sg.reference_online_sgd(X, Y, 0.1)
    res = cluster.run(sg.train_online_sgd, K, args=(X, Y, 0.1), timeout=60)
    for w, e in res.values:
        np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(e, e_ref, rtol=1e-10, atol=1e-12)


def test_online_sgd_tracks_drift_while_the_stale_model_degrades():
    _, online = sg.reference_online_sgd(X, Y, 0.1)
    stale = sg.batch_errors(sg.stale_model(X, Y, batches=5), X, Y)
    assert stale[-30:].mean() > 10 * stale[:5].mean()  # the world rotated away from it
    assert online[-30:].mean() < 0.2 * stale[-30:].mean()
    assert online[-30:].mean() < 3 * 0.1 ** 2 + 0.05  # near the noise floor


def test_without_drift_the_stale_model_stays_good():
    X0, Y0, _ = datasets.drifting_regression(150, 24, dim=3, drift=0.0, noise=0.1, seed=1)
    stale = sg.batch_errors(sg.stale_model(X0, Y0, batches=5), X0, Y0)
    assert stale[-30:].mean() < 2 * 0.1 ** 2


@pytest.mark.slow
def test_online_sgd_on_processes():
    w_ref, _ = sg.reference_online_sgd(X, Y, 0.1)
    res = cluster.run(sg.train_online_sgd, 2, backend="process", args=(X, Y, 0.1), timeout=120, quiet=True)
    np.testing.assert_allclose(res.values[1][0], w_ref, rtol=1e-10, atol=1e-12)
