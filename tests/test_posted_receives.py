"""Posted receives, ``comm.recv(src, out=buf)`` (Chapter 4): the bytes land in ``out`` on every backend,
and a message that does not fit is one clear error, never a hang or an aborted process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.cluster.wire import INLINE_BYTES, SEGMENT_BYTES

# inline in the header, one segment, a whole number of segments, a partial last segment
SIZES = [INLINE_BYTES // 8, 40_000, 2 * SEGMENT_BYTES // 8, SEGMENT_BYTES // 8 * 2 + 12_345]


def ring_of_posted_receives(comm):
    K, r = comm.size, comm.rank
    nxt, prv = (r + 1) % K, (r - 1) % K
    ok = []
    for n in SIZES:
        mine = np.arange(n, dtype=np.float64) + 1000 * r
        out = np.full(n, -1.0)
        comm.send(mine, nxt)
        got = comm.recv(prv, out=out)
        ok.append(got is out and np.array_equal(out, np.arange(n) + 1000.0 * prv))
        out2 = np.empty(n)
        got2 = comm.sendrecv(mine * 2, nxt, prv, out=out2)
        ok.append(got2 is out2 and np.array_equal(out2, 2 * (np.arange(n) + 1000.0 * prv)))
    comm.send(np.arange(3.0), nxt)  # the stream is still in step for a plain receive
    ok.append(np.array_equal(comm.recv(prv), np.arange(3.0)))
    return ok


@pytest.mark.parametrize("backend", ["sim", pytest.param("process", marks=pytest.mark.slow)])
@pytest.mark.parametrize("K", [2, 3])
def test_posted_receive_lands_in_out_for_every_message_size(backend, K):
    res = cluster.run(ring_of_posted_receives, K, backend=backend, timeout=60, quiet=True)
    assert all(all(v) for v in res.values), res.values
    n_msgs = 2 * len(SIZES) + 1
    assert all(s.messages_received == n_msgs for s in res.stats)


def _send_then_post(message, out):
    def worker(comm):
        if comm.rank == 0:
            comm.send(message, 1)
            comm.barrier()
        else:
            try:
                comm.recv(0, out=out)
            finally:
                comm.barrier()
    return worker


CASES = [  # (what is sent, the posted out, the error)
    (np.zeros(40_000), np.zeros(39_999), r"received float64\[40000\] from rank 0 but out is float64\[39999\]"),
    (np.zeros(39_999), np.zeros(40_000), r"received float64\[39999\] from rank 0 but out is float64\[40000\]"),
    (np.zeros(10), np.zeros(40_000), r"received float64\[10\] from rank 0 but out is float64\[40000\]"),
    (np.zeros(40_000, np.int64), np.zeros(40_000), r"received int64\[40000\] from rank 0 but out is float64\[40000\]"),
    (np.zeros((200, 200)), np.zeros(40_000), r"received float64\[200, 200\] from rank 0 but out is float64\[40000\]"),
]


@pytest.mark.parametrize("backend", ["sim", pytest.param("process", marks=pytest.mark.slow)])
@pytest.mark.parametrize("message, out, error", CASES, ids=["longer", "shorter", "inline", "dtype", "shape"])
def test_a_message_that_does_not_fit_the_posted_receive_is_one_clear_error(backend, message, out, error):
    with pytest.raises(cluster.RankError, match=error + ".*exact dtype and shape"):
        cluster.run(_send_then_post(message, out), 2, backend=backend, timeout=30, quiet=True)


@pytest.mark.parametrize("bad, error", [([0.0], "out must be a writable, C-contiguous"),
                                         (np.zeros((4, 4))[:, 0], "out must be a writable, C-contiguous")])
def test_an_out_that_cannot_take_bytes_is_a_clear_error(bad, error):
    def worker(comm):
        if comm.rank == 0:
            comm.send(np.zeros(4), 1)
        else:
            comm.recv(0, out=bad)

    with pytest.raises(cluster.RankError, match=error):
        cluster.run(worker, 2, timeout=10)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_posted_receives_work_in_a_script_under_torchrun(tmp_path):
    # cluster.init() ranks have no receiver threads: the posted receive goes behind the header's own.
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        from scaleoutai import cluster
        from scaleoutai.collectives import ring_allreduce
        comm = cluster.init()
        K, r = comm.size, comm.rank
        for n in {SIZES}:
            out = np.empty(n)
            comm.send(np.full(n, float(r)), (r + 1) % K)
            assert comm.recv((r - 1) % K, out=out) is out and (out == (r - 1) % K).all()
        x = np.arange(100_001, dtype=np.float64) * (r + 1)
        assert np.array_equal(ring_allreduce(comm, x), np.arange(100_001) * K * (K + 1) / 2)
        print(f"rank {{r}} posted receives ok")
    """))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
                          str(script)], capture_output=True, text=True, timeout=150,
                         env={**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(f"rank {r} posted receives ok" in out.stdout for r in range(3))


def _sub_ring(comm):
    from scaleoutai.cluster import groups

    sub = groups.SubComm(comm, list(range(comm.size))[::-1])  # group rank != global rank
    return ring_of_posted_receives(sub), sub.stats.messages_received


@pytest.mark.parametrize("backend", ["sim", pytest.param("process", marks=pytest.mark.slow)])
def test_a_sub_communicator_passes_the_posted_receive_to_its_parent(backend):
    res = cluster.run(_sub_ring, 3, backend=backend, timeout=60, quiet=True)
    assert all(all(ok) and n == 2 * len(SIZES) + 1 for ok, n in res.values), res.values
