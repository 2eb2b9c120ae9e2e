"""Public tests for lab 9: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check

# two partitions read by the ranks p % K; key 1 is the only key. Partition 0: events at steps 0, 1, 2;
# partition 1: one event at step 0 (so it is exhausted, W_1 = +inf, from step 0 on).
PART = np.array([0, 0, 0, 1])
STEP = np.array([0, 1, 2, 0])
TIME = np.array([100, 160, 20, 130])
KEY = np.array([1, 1, 1, 1])
VALUE = np.array([1, 2, 4, 8])
# gap 50, delta 10. W(0) = 100 - 10 = 90, W(1) = 150, W(2) = +inf (partition 0 finished).
# Step 2's event at t = 20 is behind W(1) = 150: late. The on-time times 100, 130, 160 are closer than the
# gap: one session [100, 210) of 3 events, final only at step 2 (210 > W(1)).
EXPECT = {(1, 100.0, 210.0): (2, 3, 11.0)}


def _worker(comm, part, step, time, key, value, n_steps, gap, delta, run_sessions):
    owned = np.arange(comm.rank, 2, comm.size)
    mine = np.isin(part, owned)
    return run_sessions(comm, owned, part[mine], step[mine], time[mine], key[mine], value[mine], n_steps, gap, delta)


def _check(run_sessions, K, dtype):
    args = (PART, STEP, TIME.astype(dtype), KEY, VALUE.astype(dtype), 3, 50, 10, run_sessions)
    res = cluster.run(_worker, K, args=args, timeout=60, trace=True)
    got = {(int(r[1]), float(r[2]), float(r[3])): (int(r[0]), int(r[4]), float(r[5]))
           for out in res.values for r in np.asarray(out)[1:]}
    assert got == EXPECT, f"K={K}, {np.dtype(dtype).name}: sessions (key, start, end): (step, count, sum) {got}, " \
                          f"expected {EXPECT}"
    dropped = sum(int(np.asarray(out)[0, 0]) for out in res.values)
    assert dropped == 1, f"K={K}: {dropped} late events counted, expected 1 (t = 20 at step 2 is behind W(1) = 150)"
    for r in range(K):
        sends = sorted(ev.peer for ev in res.trace if ev.rank == r and ev.kind == "send")
        want = sorted([d for d in range(K) if d != r] * 3)
        assert sends == want, f"K={K}: rank {r} sent to {sends}; one frame per other rank per step is {want}"


NOTE = ("public tests passed; the grader also checks many keys and partitions, K > P, seeded schedules, real "
        "processes and the size of every frame")


@check
def watermark_rule(partition_watermark):
    assert partition_watermark(None, False, 5) == -np.inf, "partition_watermark: -inf before the first event"
    assert partition_watermark(30, True, 5) == np.inf, "partition_watermark: +inf once the partition is exhausted"
    assert partition_watermark(30, False, 5) == 25.0, "partition_watermark: max time - delta"


@check
def session_merge_and_split(add_event):
    s = add_event([[0, 10, 1, 1.0], [18, 28, 1, 2.0]], 9, 4.0, 10)
    assert sorted(map(list, s)) == [[0, 28, 3, 7.0]], f"add_event: t=9 with gap 10 bridges both sessions, got {s}"
    s = add_event([[0, 10, 1, 1.0]], 10, 4.0, 10)
    assert sorted(map(list, s)) == [[0, 10, 1, 1.0], [10, 20, 1, 4.0]], "add_event: a gap of exactly `gap` splits"


@check
def frame_round_trip(pack_frame, unpack_frame):
    frame = pack_frame(-np.inf, np.array([5.0]), np.array([3]), np.array([2.5]))
    assert frame.dtype == np.float64 and frame.shape == (4,), "pack_frame: a 1-D float64 of 1 + 3n entries"
    w, t, k, v = unpack_frame(frame)
    assert w == -np.inf and list(t) == [5.0] and list(k) == [3] and list(v) == [2.5], "unpack_frame inverts pack_frame"


@check
def sessions_K_1_2_3(run_sessions):
    _check(run_sessions, 1, np.int64)
    _check(run_sessions, 2, np.float64)
    _check(run_sessions, 3, np.int64)
