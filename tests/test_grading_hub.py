"""The grader's end of the network: framed channels, one sandbox per rank, the grader's own counts."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from scaleoutai.grading.channel import Channel, ChannelClosed, ChannelTimeout, pair
from scaleoutai.grading.checks import Case, Plan, envelope_bytes
from scaleoutai.grading.hub import SubmissionRun
from scaleoutai.grading.jail import Limits
from scaleoutai.grading.rank import exec_cells, record
from scaleoutai.grading.jail import probe_mode
from scaleoutai.grading.sandbox import UID_BASE
from scaleoutai.grading.zygote import Zygote

pytestmark = pytest.mark.timeout(60)


def test_channel_round_trips_numbers_of_every_kind_and_shape():
    a, b = pair()
    other = Channel(b)
    arrays = [np.arange(5, dtype=np.int64), np.float32(2.5) * np.ones((2, 3), np.float32), np.array(7.0),
              np.zeros((0, 4)), np.array([1 + 2j], np.complex64), np.array([True, False])]
    a.send({"op": "x", "n": 1}, arrays)
    head, got = other.recv(timeout=5)
    assert head == {"op": "x", "n": 1}
    for x, y in zip(arrays, got):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


@pytest.mark.parametrize("frame", [
    b'\x00\x00\x00\x10\x00\x00\x00\x00{"op":"x","arrays":[["|O8",[1]]]}'[:8] + b'{"op":"x","arrays":[["|O8",[1]]]}',
    b"\x00\x00\x00\x05\x00\x00\x00\x00[1,2]",
    b"\x7f\xff\xff\xff\x00\x00\x00\x00",
])
def test_channel_refuses_objects_garbage_and_giants(frame):
    a, b = socket.socketpair()
    if frame[:4] == b"\x00\x00\x00\x10":
        body = b'{"op":"x","arrays":[["|O8",[1]]]}'
        frame = len(body).to_bytes(4, "big") + (8).to_bytes(4, "big") + body + b"\x00" * 8
    a.sendall(frame)
    with pytest.raises(ChannelClosed):
        Channel(b).recv(timeout=2)


def test_channel_payload_must_match_its_description_and_a_silent_peer_times_out():
    a, b = socket.socketpair()
    body = b'{"op":"x","arrays":[["<f8",[4]]]}'
    a.sendall(len(body).to_bytes(4, "big") + (8).to_bytes(4, "big") + body + b"\x00" * 8)
    with pytest.raises(ChannelClosed):
        Channel(b).recv(timeout=2)
    with pytest.raises(ChannelTimeout):
        Channel(a).recv(timeout=0.1)


def test_record_keeps_numbers_only():
    assert record(np.arange(3))[0]["stored"] and record(3.5)[1][0].shape == ()
    assert "not numbers" in record(np.array(["a"]))[0]["note"] and record({"a": 1}) == ({"type": "dict"}, [])


def test_cells_run_in_order_and_failures_including_sys_exit_are_reported_not_fatal():
    ns: dict = {}
    report = exec_cells([{"source": "x = 1", "skip": False}, {"source": "import sys; sys.exit(2)", "skip": False},
                         {"source": "y = x + 1", "skip": False}, {"source": "z = 1", "skip": True}], ns)
    assert ns["y"] == 2 and "z" not in ns and len(report) == 1 and "sys.exit(2)" in report[0]["error"]


CELLS = '''
import gc
import numpy as np

def others(comm, x):
    """How many arrays in this process hold another rank's marker (rank r's input is all (r + 1) * 1000)."""
    mine = float(x[0])
    seen = 0
    for obj in gc.get_objects():
        if isinstance(obj, np.ndarray) and obj.size and obj.dtype == np.float64:
            v = float(obj.flat[0])
            if v != mine and v % 1000 == 0 and 0 < v <= 8000 and np.all(obj == v):
                seen += 1
    return np.array([seen, comm.size], dtype=np.int64)

def ring_once(comm, x):
    if comm.size > 1:
        comm.send(x, (comm.rank + 1) % comm.size)
        x = comm.recv((comm.rank - 1) % comm.size)
    comm.stats.messages_sent = 999  # the student's own counter; the grade never reads it
    return x

def stuck(comm, x):
    return comm.recv((comm.rank + 1) % comm.size)

def tolerant(comm, x):
    from scaleoutai.cluster import PeerCrashedError
    if comm.rank == 1:
        comm.send(x, 0)
        return x
    try:
        return comm.recv(1)
    except PeerCrashedError:
        return np.array([-1.0])
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    mode = probe_mode()
    zygote = Zygote(mode)
    plan = Plan()
    for i, (fn, K, faults) in enumerate([("others", 4, {}), ("ring_once", 3, {}), ("stuck", 3, {}),
                                          ("tolerant", 2, {"crash": {"1": 0}})]):
        plan.add(Case(id=f"c{i}", fn=fn, label=fn, world_size=K, faults=faults, timeout=8),
                 per_rank={"x": [np.full(5, (r + 1) * 1000.0) for r in range(K)]})
    base = tmp_path_factory.mktemp("hub")
    sub = SubmissionRun(zygote, "t", list(range(UID_BASE + 3000, UID_BASE + 3016)), None, f"{base}/t",
                        Limits(timeout=40, mode=mode), [{"source": CELLS, "skip": False}], plan)
    outcomes = {c.id: sub.run(c) for c in plan.cases}
    sub.close()
    zygote.close()
    return outcomes


def test_each_rank_process_holds_only_its_own_inputs(run):
    out = run["c0"]
    assert out.meta["ok"], out.meta
    assert [int(out.arrays[f"r{r}"][0]) for r in range(4)] == [0, 0, 0, 0]


def test_messages_are_moved_counted_and_traced_by_the_grader(run):
    out = run["c1"]
    assert out.meta["ok"], out.meta
    assert [float(out.arrays[f"r{r}"][0]) for r in range(3)] == [3000.0, 1000.0, 2000.0]
    assert [s["messages_sent"] for s in out.meta["stats"]] == [1, 1, 1]  # not the 999 the ranks wrote
    sends = [(e.rank, e.peer, e.nbytes) for e in out.trace if e.kind == "send"]
    wire = 40 + envelope_bytes(1)  # five float64 and the header (dtype, shape), which is counted too
    assert sorted(sends) == [(0, 1, wire), (1, 2, wire), (2, 0, wire)] and out.meta["sim_time"] > 0


def test_a_deadlock_is_named_and_an_injected_crash_reaches_the_peer(run):
    assert "deadlock" in run["c2"].meta["error"] and "waits to receive" in run["c2"].meta["error"]
    out = run["c3"]
    assert out.meta["ok"] and out.meta["ranks"][1].get("crashed") and float(out.arrays["r0"][0]) == -1.0
