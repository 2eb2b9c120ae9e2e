"""Every channel between graded ranks is a counted message (grading/README.md, "Guarantees"): clocks,
barriers and array headers carry nothing for free, and uncounted requests and oversized frames are refused."""
from __future__ import annotations

import os

import numpy as np
import pytest

from scaleoutai.grading.checks import MAX_NDIM, Case, Plan, envelope_bytes
from scaleoutai.grading.hub import SubmissionRun, pack, unpack
from scaleoutai.grading.jail import Limits, probe_mode
from scaleoutai.grading.sandbox import UID_BASE
from scaleoutai.grading.zygote import Zygote

pytestmark = pytest.mark.timeout(240)

CELLS = '''
import numpy as np, struct

def clock_after_barrier(comm, x):
    # the attack: rank 1 "computes" for x[0] seconds, the barrier moves every clock to the latest,
    # and rank 0 reads x[0] back from its clock without a single message
    if comm.rank == 1:
        comm.compute(float(x[0]))
    comm.barrier()
    return np.array([comm.clock])

def raw_clock_request(comm, x):
    comm._ch.send({"op": "clock"})
    return comm._ch.recv()[0]

def barrier_value(comm, x):
    return comm.barrier()

def shape_channel(comm, x):
    # the attack: a zero-size array whose shape spells rank 1's data
    if comm.rank == 1:
        comm.send(np.zeros((0, *[int(v) for v in x[:3]]), dtype=np.float32), 0)
        return np.zeros(1)
    return np.array(comm.recv(1).shape, dtype=np.int64)

def too_many_dims(comm, x):
    if comm.rank == 1:
        comm.send(np.zeros((0,) + (1,) * MAXD), 0)
    else:
        comm.recv(1)
    return np.zeros(1)

def request_flood(comm, x):
    for _ in range(30_000):
        comm.compute(0.0)
    return np.zeros(1)

def giant_header(comm, x):
    # a frame whose JSON header the grader would have to parse: 1 MB of nothing
    comm._ch.sock.sendall(struct.pack("!II", 1 << 20, 0) + b" " * (1 << 20))
    return comm.recv(0)
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the sandbox drops privileges and needs root")
    mode = probe_mode()
    zygote = Zygote(mode)
    plan = Plan()
    for fn in ("clock_after_barrier", "raw_clock_request", "barrier_value", "shape_channel", "too_many_dims",
               "request_flood", "giant_header"):
        plan.add(Case(id=fn, fn=fn, label=fn, world_size=2, timeout=20),
                 per_rank={"x": [np.array([123.0, 45.0, 67.0]) * (r + 1) for r in range(2)]})
    base = tmp_path_factory.mktemp("channels")
    cells = [{"source": CELLS.replace("MAXD", str(MAX_NDIM)), "skip": False}]
    sub = SubmissionRun(zygote, "c", list(range(UID_BASE + 3100, UID_BASE + 3116)), None, f"{base}/c",
                        Limits(timeout=120, mode=mode), cells, plan)
    try:
        yield {c.id: sub.run(c) for c in plan.cases}
    finally:
        sub.close()
        zygote.close()


def test_a_rank_cannot_read_the_clock_a_barrier_synchronised(run):
    out = run["clock_after_barrier"]
    assert not out.meta["ok"] and "comm.clock is not available while a lab is graded" in out.meta["error"]


def test_a_hand_made_clock_request_is_refused_not_answered(run):
    out = run["raw_clock_request"]
    assert not out.meta["ok"] and "unknown request 'clock'" in out.meta["error"]


def test_a_barrier_hands_back_nothing(run):
    out = run["barrier_value"]
    assert out.meta["ok"], out.meta
    assert [m["type"] for m in out.meta["ranks"]] == ["NoneType", "NoneType"]


def test_a_zero_size_array_pays_for_its_shape_in_the_counted_bytes(run):
    out = run["shape_channel"]
    assert out.meta["ok"], out.meta
    assert list(out.arrays["r0"]) == [0, 246, 90, 134]  # the data arrived, so it must have been paid for
    stats = out.meta["stats"][1]
    assert stats["messages_sent"] == 1 and stats["bytes_sent"] == envelope_bytes(4) > 0
    assert out.meta["stats"][0]["bytes_received"] == envelope_bytes(4)
    assert [e.nbytes for e in out.trace if e.kind == "send"] == [envelope_bytes(4)]


def test_arrays_of_more_dimensions_than_the_cap_are_refused(run):
    out = run["too_many_dims"]
    assert not out.meta["ok"] and f"carries at most {MAX_NDIM}" in out.meta["error"]


def test_uncounted_requests_are_capped_per_rank(run):
    out = run["request_flood"]
    assert not out.meta["ok"] and "more than 20000 barrier or compute calls" in out.meta["error"]


def test_a_frame_over_the_header_cap_is_refused_before_it_is_parsed(run):
    out = run["giant_header"]
    assert not out.meta["ok"] and "frame it refuses" in out.meta["error"] and "over the cap" in out.meta["error"]


@pytest.mark.parametrize("arr", [np.arange(5.0), np.zeros((0, 3, 7), np.float32), np.array(3, np.int64),
                                 np.ones((2, 3), np.complex128), np.array([True, False]),
                                 np.arange(6, dtype=">i4").reshape(2, 3), np.zeros((1,) * MAX_NDIM, np.uint8)])
def test_the_wire_round_trips_every_dtype_and_shape_and_charges_the_envelope(arr):
    wire = pack(arr)
    assert wire.nbytes == arr.nbytes + envelope_bytes(arr.ndim)
    back = unpack(wire)
    assert back.dtype == arr.dtype and back.shape == arr.shape and np.array_equal(back, arr)
