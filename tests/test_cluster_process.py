"""Real processes over torch.distributed (gloo): same results as the simulator, fail fast, no orphans."""
from __future__ import annotations

import os
import re
import time

import numpy as np
import psutil
import pytest

from scaleoutai import cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def ring_shift(comm, x):
    comm.send(x * comm.rank, (comm.rank + 1) % comm.size)
    return comm.recv((comm.rank - 1) % comm.size)


def no_leftover_workers() -> bool:
    deadline = time.time() + 5
    while time.time() < deadline:
        kids = []
        for p in psutil.Process().children(recursive=True):  # fresh interpreters, or forked by the rank server
            try:
                parent = " ".join(p.parent().cmdline()) if p.parent() else ""
                if "scaleoutai.cluster._worker" in " ".join(p.cmdline()) or "cluster.forkserver" in parent:
                    kids.append(p)
            except psutil.NoSuchProcess:
                continue
        if not kids:
            return True
        time.sleep(0.1)
    return False


def test_process_backend_gives_the_same_values_and_stats_as_the_simulator():
    x = np.arange(6, dtype=np.float32)
    sim = cluster.run(ring_shift, 3, args=(x,))
    proc = cluster.run(ring_shift, 3, backend="process", args=(x,), quiet=True)
    for a, b in zip(sim.values, proc.values):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(sim.stats, proc.stats):
        assert (a.messages_sent, a.bytes_sent, a.messages_received, a.bytes_received) == \
               (b.messages_sent, b.bytes_sent, b.messages_received, b.bytes_received)
    assert proc.stats[0].sim_time is None and proc.sim_time is None


def test_shape_and_dtype_travel_over_gloo():
    def worker(comm):
        if comm.rank == 0:
            for a in (np.ones((2, 3), np.float16), np.zeros((0, 4), np.int64), np.asarray(3.5), np.arange(5) > 2):
                comm.send(a, 1)
            return None
        return [comm.recv(0) for _ in range(4)]

    got = cluster.run(worker, 2, backend="process", quiet=True).values[1]
    assert [(a.shape, a.dtype.name) for a in got] == [((2, 3), "float16"), ((0, 4), "int64"), ((), "float64"),
                                                      ((5,), "bool")]
    assert got[2] == 3.5 and got[3].tolist() == [False, False, False, True, True]


def test_messages_at_the_inline_boundary_arrive_bit_exact():
    from scaleoutai.cluster.process import INLINE_BYTES, SEGMENT_BYTES

    sizes = [0, 1, INLINE_BYTES - 1, INLINE_BYTES, INLINE_BYTES + 1, SEGMENT_BYTES + 3]

    def worker(comm):
        rng = np.random.default_rng(7)
        msgs = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes] + [np.float64(2.5), np.arange(64.0)]
        if comm.rank == 0:
            for m in msgs:
                comm.send(m, 1)
            return None
        return all(np.array_equal(comm.recv(0), m) for m in msgs)

    assert cluster.run(worker, 2, backend="process", quiet=True).values[1] is True


def test_sent_payloads_are_freed_once_delivered():
    # gloo reports a send complete only when waited on; before the reaper thread, every payload copy
    # stayed alive until the run ended (8 MiB per message of a 16 MiB all-reduce).
    def worker(comm):
        import tracemalloc

        x = np.ones(1 << 18, np.float32)  # 1 MiB
        peer = 1 - comm.rank
        tracemalloc.start()
        for _ in range(40):
            comm.send(x, peer)
            comm.recv(peer)
        comm.barrier()  # both have received everything; their sends may still await the reaper
        time.sleep(0.2)
        return tracemalloc.get_traced_memory()[0]

    held = cluster.run(worker, 2, backend="process", quiet=True).values
    assert max(held) < 8 << 20, f"{max(held) >> 20} MiB still held after 40 MiB sent"


def test_comm_messages_never_match_the_users_own_torch_point_to_point():
    def worker(comm):
        import torch
        import torch.distributed as dist

        peer = 1 - comm.rank
        comm.send(np.full(3, 10.0 + comm.rank), peer)  # in flight while the user's own tag-0 messages pass
        t = torch.full((2,), float(comm.rank))
        if comm.rank == 0:
            dist.send(t, 1)
        else:
            dist.recv(t, 0)
        return comm.recv(peer).tolist(), t.tolist()

    got = cluster.run(worker, 2, backend="process", quiet=True).values
    assert got == [([11.0] * 3, [0.0, 0.0]), ([10.0] * 3, [0.0, 0.0])]


def sendrecv_ring(comm, n, dtype, into):
    x = (np.arange(n) + 100 * comm.rank).astype(dtype)
    nxt, prv = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    out = np.full(n, -1, dtype) if into else None
    got = comm.sendrecv(x, nxt, prv, out=out)
    return got, (got is out) if into else None


@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("n, dtype", [(3, np.float32), (1000, np.int64), ((1 << 20) // 8 + 5, np.float64)])
def test_sendrecv_ring_matches_the_simulator_and_fills_out_in_place(K, n, dtype):
    for into in (False, True):
        proc = cluster.run(sendrecv_ring, K, backend="process", args=(n, dtype, into), quiet=True)
        sim = cluster.run(sendrecv_ring, K, args=(n, dtype, into))
        for r in range(K):
            expect = (np.arange(n) + 100 * ((r - 1) % K)).astype(dtype)
            np.testing.assert_array_equal(proc.values[r][0], expect)
            assert proc.values[r][1] == sim.values[r][1]  # ``out`` itself is returned when given
            assert proc.stats[r].bytes_sent == sim.stats[r].bytes_sent == expect.nbytes


def test_sendrecv_send_half_is_eager_against_a_peer_that_receives_first():
    # Rank 1 only sends after it has received: rank 0's sendrecv must deliver without waiting for rank 1.
    def worker(comm):
        big = np.arange(300_000, dtype=np.float64)
        if comm.rank == 0:
            got = comm.sendrecv(big, 1, 1)
            big[:] = -1  # ours again once sendrecv returned: the peer already holds its own bytes
            comm.send(big[:3], 1)
            return float(got[0])
        first = comm.recv(0)
        time.sleep(0.2)
        comm.send(first[:10] * 0 + 7.0, 0)
        return float(first.sum()), comm.recv(0).tolist()

    got = cluster.run(worker, 2, backend="process", quiet=True, timeout=60).values
    assert got[0] == 7.0
    assert got[1] == (float(np.arange(300_000, dtype=np.float64).sum()), [-1.0, -1.0, -1.0])


def test_sendrecv_into_an_out_of_the_wrong_shape_is_a_clear_error():
    def worker(comm):
        comm.sendrecv(np.zeros(40_000), 1 - comm.rank, 1 - comm.rank, out=np.zeros(39_999))

    with pytest.raises(cluster.RankError, match=r"received float64\[40000\] from rank \d but out is float64\[39999\]"):
        cluster.run(worker, 2, backend="process", quiet=True, timeout=60)
    assert no_leftover_workers()


def test_functions_defined_at_runtime_travel_by_value():
    scale = 3.0
    fn = eval("lambda comm, s: comm.rank * s")  # like a function typed into a notebook cell
    assert cluster.run(fn, 2, backend="process", args=(scale,), quiet=True).values == [0.0, 3.0]


def test_torch_distributed_is_initialized_inside_each_worker():
    def worker(comm):
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(comm.rank + 1)])
        dist.all_reduce(t)
        return dist.get_rank(), dist.get_world_size(), float(t)

    assert cluster.run(worker, 3, backend="process", quiet=True).values == [(0, 3, 6.0), (1, 3, 6.0), (2, 3, 6.0)]


def test_worker_output_is_relayed_with_a_rank_prefix(capsys):
    cluster.run(lambda comm: print("hello from", comm.rank), 2, backend="process")
    out = capsys.readouterr().out
    assert "[rank 0] hello from 0" in out and "[rank 1] hello from 1" in out


def test_exception_on_one_rank_ends_the_group_fast_with_its_traceback():
    def worker(comm):
        if comm.rank == 1:
            raise KeyError("missing shard")
        return comm.recv(1)  # blocks forever without fail-fast

    t = time.perf_counter()
    with pytest.raises(cluster.RankError) as info:
        cluster.run(worker, 3, backend="process", timeout=60, quiet=True)
    assert time.perf_counter() - t < 20
    assert info.value.rank == 1
    assert "KeyError: 'missing shard'" in str(info.value)
    assert "raise KeyError" in info.value.traceback
    assert no_leftover_workers()


@pytest.mark.parametrize("body, message", [
    ("import sys; sys.exit(3)", "called sys.exit(3)"),
    ("import os; os._exit(0)", "exited without writing its result"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed by signal 9"),
])
def test_abrupt_exits_are_reported_not_hung(body, message):
    code = compile(body, "<cell>", "exec")

    def worker(comm):
        if comm.rank == 0:
            exec(code)
        return comm.rank

    with pytest.raises(cluster.RankError, match=re.escape(message)):
        cluster.run(worker, 2, backend="process", timeout=30, quiet=True)
    assert no_leftover_workers()


def test_timeout_kills_every_rank_and_names_the_stuck_ones():
    def worker(comm):
        if comm.rank == 1:
            time.sleep(600)
        return comm.rank

    t = time.perf_counter()
    with pytest.raises(cluster.RunTimeout) as info:
        cluster.run(worker, 2, backend="process", timeout=4, quiet=True)
    assert time.perf_counter() - t < 15
    assert 1 in info.value.running
    assert no_leftover_workers()


def test_injected_crash_kills_the_process_and_is_reported():
    def worker(comm):
        for _ in range(5):
            comm.send(np.zeros(1), 1 - comm.rank)
            comm.recv(1 - comm.rank)

    with pytest.raises(cluster.RankCrashed) as info:
        cluster.run(worker, 2, backend="process", faults=cluster.Faults(crash={1: 2}), timeout=30, quiet=True)
    assert info.value.rank == 1 and info.value.after_messages == 2
    assert no_leftover_workers()


def test_straggler_is_slower_in_wall_time():
    def worker(comm):
        comm.compute(0.2)
        comm.barrier()
        return comm.stats.wall_time

    res = cluster.run(worker, 2, backend="process", faults=cluster.Faults(slow={1: 3.0}), quiet=True)
    assert res.stats[0].wall_time >= 0.55  # rank 0 waits at the barrier for the 0.6 s straggler


def test_unpicklable_return_value_is_a_clear_error():
    def worker(comm):
        import threading

        return threading.Lock()

    with pytest.raises(cluster.RankError, match="return value could not be sent back"):
        cluster.run(worker, 2, backend="process", timeout=30, quiet=True)


def test_network_argument_is_refused_for_real_processes():
    with pytest.raises(ValueError, match="simulator"):
        cluster.run(lambda comm: None, 2, backend="process", network=cluster.Network())


def test_each_run_uses_its_own_port_so_runs_can_follow_each_other():
    for _ in range(3):
        assert cluster.run(lambda comm: comm.size, 2, backend="process", quiet=True).values == [2, 2]
    assert os.environ.get("MASTER_PORT") is None  # nothing leaks into the caller's environment


def test_stop_ends_a_process_group_that_ignores_sigterm_within_the_grace():
    import subprocess
    import sys
    import time

    from scaleoutai.cluster.procs import free_ports, stop

    code = "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print('up', flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert p.stdout.readline().strip() == b"up"
    t0 = time.monotonic()
    stop([p], grace=1.0)
    assert p.returncode is not None and time.monotonic() - t0 < 15
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(0 < q < 65536 for q in ports)
