"""The simulated cluster: message semantics, alpha-beta clocks, faults, deadlocks and timeouts."""
from __future__ import annotations

import time

import numpy as np
import pytest

from scaleoutai import cluster


def ring_shift(comm, x):
    if comm.size > 1:
        comm.send(x * comm.rank, (comm.rank + 1) % comm.size)
        return comm.recv((comm.rank - 1) % comm.size)
    return x


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 64])
def test_values_are_indexed_by_rank(K):
    res = cluster.run(lambda comm: comm.rank * 10, K)
    assert res.values == [r * 10 for r in range(K)]
    assert len(res.stats) == K


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int64, np.uint16, np.bool_,
                                   np.complex64])
def test_shape_and_dtype_travel_with_the_message(dtype):
    def worker(comm):
        if comm.rank == 0:
            comm.send(np.ones((2, 3, 4), dtype=dtype), 1)
            comm.send(np.zeros((0, 5), dtype=dtype), 1)
            comm.send(np.asarray(7, dtype=dtype), 1)
            return None
        return [comm.recv(0) for _ in range(3)]

    got = cluster.run(worker, 2).values[1]
    assert [(a.shape, a.dtype) for a in got] == [((2, 3, 4), np.dtype(dtype)), ((0, 5), np.dtype(dtype)),
                                                 ((), np.dtype(dtype))]


def test_received_array_does_not_alias_the_sent_one():
    def worker(comm):
        if comm.rank == 0:
            x = np.zeros(3)
            comm.send(x, 1)
            x += 5  # mutating after send must not change what rank 1 receives
            comm.barrier()
            return None
        comm.barrier()
        return comm.recv(0)

    assert np.all(cluster.run(worker, 2).values[1] == 0)


def test_inline_sendrecv_sends_a_snapshot_and_never_hands_out_a_buffer_twice():
    # Rank 0 runs first and queues three messages, so rank 1's sendrecvs all take the inline path, which
    # recycles each delivered message's buffer for the message it sends on. Rank 1 then scribbles over
    # everything it sent and received; what ranks 0 and 2 get must be the values at the time of sending.
    def worker(comm):
        r = comm.rank
        if r == 0:
            for i in range(3):
                comm.send(np.full(4, 10.0 * (i + 1)), 1)
            return None
        if r == 1:
            sent, outs = [], []
            for i in range(3):
                x = np.full(4 if i < 2 else 5, float(i))  # the last one does not fit the recycled buffer
                out = np.empty(4)
                comm.sendrecv(x, 2, 0, out=out)
                sent.append(x)
                outs.append(out)
            for a in sent + outs:
                a[...] = -1.0
            return None
        return [comm.recv(1) for _ in range(3)]

    res = cluster.run(worker, 3)
    got = res.values[2]
    assert [a.tolist() for a in got] == [[0.0] * 4, [1.0] * 4, [2.0] * 5]
    assert len({id(a) for a in got}) == 3
    assert res.stats[1].messages_sent == res.stats[1].messages_received == 3
    assert res.stats[1].bytes_received == 3 * 32 and res.stats[1].bytes_sent == 2 * 32 + 40


def test_messages_between_a_pair_arrive_in_order():
    def worker(comm):
        if comm.rank == 0:
            for i in range(100):
                comm.send(np.array([i]), 1)
            return None
        return [int(comm.recv(0)[0]) for _ in range(100)]

    assert cluster.run(worker, 2).values[1] == list(range(100))


def test_stats_count_messages_and_payload_bytes_per_rank():
    res = cluster.run(ring_shift, 4, args=(np.ones(10, np.float32),))
    for s in res.stats:
        assert (s.messages_sent, s.bytes_sent, s.messages_received, s.bytes_received) == (1, 40, 1, 40)


def test_clock_follows_the_alpha_beta_rule():
    alpha, beta = 1e-3, 1e-6

    def worker(comm):
        if comm.rank == 0:
            comm.compute(0.5)
            comm.send(np.zeros(1000, np.uint8), 1)  # sent at 0.5, arrives at 0.5 + alpha + 1000 beta
            return comm.clock
        comm.compute(0.1)
        comm.recv(0)
        return comm.clock

    t0, t1 = cluster.run(worker, 2, network=cluster.Network(alpha, beta)).values
    assert t0 == pytest.approx(0.5 + alpha + 1000 * beta)  # the sender is busy while its message goes out
    assert t1 == pytest.approx(0.5 + alpha + 1000 * beta)  # receiver waits for the arrival


def test_receive_of_an_early_message_costs_nothing_extra():
    def worker(comm):
        if comm.rank == 0:
            comm.send(np.zeros(1), 1)
            return comm.clock
        comm.compute(10.0)
        comm.recv(0)
        return comm.clock

    assert cluster.run(worker, 2, network=cluster.Network(1e-3, 0)).values[1] == pytest.approx(10.0)


def test_barrier_moves_every_clock_to_the_latest():
    def worker(comm):
        comm.compute(float(comm.rank))
        comm.barrier()
        return comm.clock

    assert cluster.run(worker, 5).values == [4.0] * 5


def test_repeated_barriers_with_uneven_work_never_deadlock():
    def worker(comm):
        for i in range(50):
            if (i + comm.rank) % 3 == 0:
                time.sleep(0.0001)
            comm.barrier()
        return True

    assert all(cluster.run(worker, 6, timeout=30).values)


def test_runs_are_deterministic():
    def worker(comm):
        rng = np.random.default_rng(comm.rank)
        x = rng.standard_normal(100)
        for _ in range(5):
            x = ring_shift(comm, x) + 1
        return x

    a = cluster.run(worker, 7, network=cluster.Network(1e-5, 1e-9))
    b = cluster.run(worker, 7, network=cluster.Network(1e-5, 1e-9))
    assert all(np.array_equal(x, y) for x, y in zip(a.values, b.values))
    assert [s.sim_time for s in a.stats] == [s.sim_time for s in b.stats]


def test_deadlock_names_every_blocked_rank_and_its_peer():
    def worker(comm):  # everyone receives first: a cycle of waits
        return comm.recv((comm.rank + 1) % comm.size)

    with pytest.raises(cluster.DeadlockError) as info:
        cluster.run(worker, 3, timeout=10)
    assert info.value.waiting == {0: "to receive from rank 1", 1: "to receive from rank 2",
                                  2: "to receive from rank 0"}


def test_deadlock_on_a_rank_that_finished_says_so():
    def worker(comm):
        if comm.rank == 1:
            return comm.recv(0)
        return None

    with pytest.raises(cluster.DeadlockError, match="rank 1 waits to receive from rank 0 \\(it has finished\\)"):
        cluster.run(worker, 2, timeout=10)


def test_deadlock_at_a_barrier_names_the_ranks_that_skipped_it():
    def worker(comm):
        if comm.rank != 2:
            comm.barrier()

    with pytest.raises(cluster.DeadlockError, match=r"ranks \[2\] finished without calling it"):
        cluster.run(worker, 3, timeout=10)


def test_exception_on_one_rank_ends_the_group_with_its_traceback():
    def worker(comm):
        if comm.rank == 2:
            raise ValueError("bad shard")
        return comm.recv(2)  # would wait forever without fail-fast

    with pytest.raises(cluster.RankError) as info:
        cluster.run(worker, 4, timeout=10)
    assert info.value.rank == 2
    assert "ValueError: bad shard" in str(info.value)
    assert 'raise ValueError("bad shard")' in info.value.traceback


def test_injected_crash_stops_the_rank_and_peers_detect_it():
    def worker(comm):
        if comm.rank == 0:
            for dst in (1, 2, 1, 2):
                comm.send(np.array([dst]), dst)
            return "leader done"
        got = []
        try:
            while True:
                got.append(int(comm.recv(0)[0]))
        except cluster.PeerCrashedError as err:
            return got, err.peer

    res = cluster.run(worker, 3, faults=cluster.Faults(crash={0: 3}), timeout=10)
    assert isinstance(res.values[0], cluster.RankCrashed)
    assert res.values[0].after_messages == 3
    assert res.values[1] == ([1, 1], 0)  # messages already in flight are still delivered
    assert res.values[2] == ([2], 0)
    assert res.stats[0].messages_sent == 3


def test_unhandled_peer_crash_fails_the_run_naming_the_crashed_rank():
    def worker(comm):
        if comm.rank == 1:
            comm.send(np.zeros(1), 0)
        return comm.recv(1) if comm.rank == 0 else None

    with pytest.raises(cluster.RankError, match="waited for rank 1, which has crashed"):
        cluster.run(worker, 2, faults=cluster.Faults(crash={1: 0}), timeout=10)


def test_crash_cannot_be_swallowed_by_user_code():
    def worker(comm):
        try:
            comm.send(np.zeros(1), 1 - comm.rank)
        except Exception:  # noqa: BLE001
            return "swallowed"
        return "sent"

    res = cluster.run(worker, 2, faults=cluster.Faults(crash={1: 0}), timeout=10)
    assert isinstance(res.values[1], cluster.RankCrashed)


def test_straggler_stretches_compute_and_delays_everyone_at_the_barrier():
    def worker(comm):
        comm.compute(1.0)
        comm.barrier()
        return comm.clock

    res = cluster.run(worker, 4, faults=cluster.Faults(slow={3: 2.5}))
    assert res.values == [2.5] * 4


def test_timeout_names_the_ranks_still_running():
    import threading

    stop = threading.Event()  # threads cannot be killed: let the stuck rank go once the test has seen it

    def worker(comm):
        if comm.rank == 1:
            while not stop.is_set():
                time.sleep(0.01)

    t = time.perf_counter()
    try:
        with pytest.raises(cluster.RunTimeout) as info:
            cluster.run(worker, 3, timeout=0.5)
    finally:
        stop.set()
    assert time.perf_counter() - t < 5
    assert 1 in info.value.running and 0 not in info.value.running


def test_a_run_completes_while_a_timed_out_run_still_holds_its_scheduler_thread():
    import threading

    stop = threading.Event()

    def stuck(comm):
        if comm.rank == 0:
            while not stop.is_set():
                time.sleep(0.01)

    try:
        with pytest.raises(cluster.RunTimeout):
            cluster.run(stuck, 2, timeout=0.3)
        res = cluster.run(ring_shift, 3, args=(np.arange(3.0),), timeout=10)
        np.testing.assert_array_equal(res.values[0], np.arange(3.0) * 2)
    finally:
        stop.set()


def test_consecutive_runs_reuse_one_scheduler_thread():
    import threading

    for _ in range(2):  # the first may start the thread
        cluster.run(ring_shift, 2, args=(np.ones(2),))
    before = {t.ident for t in threading.enumerate() if t.name == "sim-scheduler"}
    for _ in range(5):
        cluster.run(ring_shift, 2, args=(np.ones(2),))
    assert {t.ident for t in threading.enumerate() if t.name == "sim-scheduler"} == before


def test_trace_records_every_send_and_recv_with_simulated_times():
    res = cluster.run(ring_shift, 3, args=(np.ones(4),), trace=True, network=cluster.Network(1.0, 0.0))
    assert sorted((e.kind, e.rank, e.peer) for e in res.trace) == sorted(
        [("send", r, (r + 1) % 3) for r in range(3)] + [("recv", r, (r - 1) % 3) for r in range(3)])
    assert all(e.end == pytest.approx(1.0) for e in res.trace)


def test_timeline_plot_has_one_lane_per_rank():
    import matplotlib

    matplotlib.use("Agg")
    res = cluster.run(ring_shift, 4, args=(np.ones(4),), trace=True)
    ax = cluster.plot_timeline(res)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"rank {r}" for r in range(4)]
    with pytest.raises(ValueError, match="trace=True"):
        cluster.plot_timeline(cluster.run(ring_shift, 2, args=(np.ones(1),)))


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(world_size=0), ValueError, "world_size must be >= 1, got 0"),
    (dict(world_size=2.5), TypeError, "world_size must be an int"),
    (dict(world_size=2, backend="mpi"), ValueError, "unknown backend 'mpi'"),
    (dict(world_size=2, timeout=0), ValueError, "timeout must be a positive number"),
    (dict(world_size=2, faults=cluster.Faults(crash={5: 1})), ValueError, "names rank 5"),
    (dict(world_size=2, faults=cluster.Faults(slow={0: 0.5})), ValueError, "straggler factor must be >= 1"),
    (dict(world_size=2, network=(1, 2)), TypeError, "cluster.Network"),
])
def test_bad_run_arguments_give_one_clear_error(kwargs, error, message):
    with pytest.raises(error, match=message):
        cluster.run(lambda comm: None, **kwargs)


def test_run_needs_a_callable():
    with pytest.raises(TypeError, match="needs a function"):
        cluster.run("not a function", 2)


@pytest.mark.parametrize("payload, message", [
    ([1, 2, 3], "sends NumPy arrays only, got list"),
    ("text", "got str"),
])
def test_sending_a_non_array_is_a_clear_error(payload, message):
    def worker(comm):
        if comm.rank == 0:
            comm.send(payload, 1)

    with pytest.raises(cluster.RankError, match=message):
        cluster.run(worker, 2, timeout=10)


@pytest.mark.parametrize("call, message", [
    (lambda comm: comm.send(np.zeros(1), 7), "dst=7 is out of range"),
    (lambda comm: comm.recv(-1), "src=-1 is out of range"),
    (lambda comm: comm.send(np.zeros(1), comm.rank), "tried to send to itself"),
    (lambda comm: comm.recv(comm.rank), "tried to receive from itself"),
    (lambda comm: comm.compute(-1), "time cannot run backwards"),
])
def test_bad_peer_or_time_is_a_clear_error(call, message):
    with pytest.raises(cluster.RankError, match=message):
        cluster.run(call, 2, timeout=10)


def test_network_rejects_negative_costs():
    with pytest.raises(ValueError, match="alpha >= 0"):
        cluster.Network(alpha=-1.0)


def ring_step(comm, x):
    return comm.sendrecv(x * comm.rank, (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size)


@pytest.mark.parametrize("K", [2, 3, 5])
def test_sendrecv_costs_and_counts_exactly_a_send_then_a_recv(K):
    net = cluster.Network(alpha=1e-3, beta=1e-6)
    x = np.arange(7, dtype=np.float64)
    fused = cluster.run(ring_step, K, args=(x,), network=net)
    split = cluster.run(ring_shift, K, args=(x,), network=net)
    for r in range(K):
        np.testing.assert_array_equal(fused.values[r], x * ((r - 1) % K))
        same = ("messages_sent", "bytes_sent", "messages_received", "bytes_received", "sim_time")
        assert [getattr(fused.stats[r], k) for k in same] == [getattr(split.stats[r], k) for k in same]


def test_sendrecv_fills_out_in_place_and_returns_it():
    def worker(comm):
        out = np.full((2, 3), -1, np.int64)
        got = comm.sendrecv(np.full((2, 3), comm.rank, np.int64), 1 - comm.rank, 1 - comm.rank, out=out)
        return got is out, out

    for r, (same, out) in enumerate(cluster.run(worker, 2).values):
        assert same
        np.testing.assert_array_equal(out, np.full((2, 3), 1 - r))


@pytest.mark.parametrize("call, message", [
    (lambda comm: comm.sendrecv(np.zeros(1), comm.rank, 1 - comm.rank), "sendrecv with itself"),
    (lambda comm: comm.sendrecv(np.zeros(1), 1 - comm.rank, 5), "src=5 is out of range"),
    (lambda comm: comm.sendrecv(np.zeros(1), 1 - comm.rank, 1 - comm.rank, out=[0.0]),
     "out must be a writable, C-contiguous NumPy array"),
    (lambda comm: comm.sendrecv(np.zeros(4), 1 - comm.rank, 1 - comm.rank, out=np.zeros(3, np.float32)),
     r"received float64\[4\] from rank \d but out is float32\[3\]"),
    (lambda comm: comm.sendrecv(np.zeros(4), 1 - comm.rank, 1 - comm.rank, out=np.zeros(4, np.int64)),
     r"received float64\[4\] from rank \d but out is int64\[4\]"),
    (lambda comm: (lambda buf: comm.sendrecv(buf[:4], 1 - comm.rank, 1 - comm.rank, out=buf[2:6]))(np.zeros(8)),
     "out overlaps the array being sent"),
])
def test_bad_sendrecv_arguments_are_a_clear_error(call, message):
    with pytest.raises(cluster.RankError, match=message):
        cluster.run(call, 2, timeout=10)


def _readonly(n):
    a = np.zeros(n)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("call, message", [
    (lambda comm: comm.sendrecv(np.zeros(1), 1, 0, out=np.zeros(4)), "sendrecv with itself"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 5, out=np.zeros(4)), "src=5 is out of range"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 0, out=[0.0]), "out must be a writable, C-contiguous"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 0, out=np.zeros(8)[::2]), "out must be a writable, C-contiguous"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 0, out=_readonly(4)), "out must be a writable, C-contiguous"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 0, out=np.zeros(3, np.float32)),
     r"received float64\[4\] from rank 0 but out is float32\[3\]"),
    (lambda comm: comm.sendrecv(np.zeros(1), 0, 0, out=np.zeros(4, np.int64)),
     r"received float64\[4\] from rank 0 but out is int64\[4\]"),
    (lambda comm: (lambda buf: comm.sendrecv(buf[:4], 0, 0, out=buf[2:6]))(np.zeros(8)),
     "out overlaps the array being sent"),
])
def test_bad_sendrecv_is_the_same_clear_error_when_the_message_is_already_waiting(call, message):
    # Rank 0 runs first and leaves a float64[4] in rank 1's mailbox: rank 1's sendrecv takes the
    # simulator's inline path, which must hand every wrong argument to the checks of the slow one.
    def worker(comm):
        if comm.rank == 0:
            comm.send(np.zeros(4), 1)
            return None
        return call(comm)

    with pytest.raises(cluster.RankError, match=message):
        cluster.run(worker, 2, timeout=10)


@pytest.mark.parametrize("K, n", [(2, 5), (5, 13), (17, 3), (64, 1000)])
def test_inline_sendrecv_gives_the_same_values_clocks_and_counts_as_the_traced_path(K, n):
    from scaleoutai.collectives import ring_allreduce

    def worker(comm):
        return ring_allreduce(comm, np.arange(n, dtype=np.float32) * (comm.rank + 1))

    net = cluster.Network(alpha=3e-6, beta=7e-10)
    fast = cluster.run(worker, K, network=net)
    traced = cluster.run(worker, K, network=net, trace=True)  # a trace takes the general path
    assert len(traced.trace) == 2 * 2 * (K - 1) * K
    for r in range(K):
        np.testing.assert_array_equal(fast.values[r], traced.values[r])
        assert fast.stats[r].sim_time == traced.stats[r].sim_time
        assert fast.stats[r].bytes_received == traced.stats[r].bytes_received
        assert fast.stats[r].messages_sent == traced.stats[r].messages_sent == 2 * (K - 1)


def test_a_rank_that_never_blocks_runs_before_the_next_starts_and_order_is_fixed():
    order: list[int] = []

    def worker(comm):
        order.append(comm.rank)
        if comm.rank < comm.size - 1:
            comm.send(np.zeros(1), comm.rank + 1)
        if comm.rank:
            comm.recv(comm.rank - 1)
        order.append(comm.rank)

    cluster.run(worker, 4)
    assert order == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_rank_waiting_inside_no_grad_does_not_switch_gradients_off_for_the_others():
    import torch

    def worker(comm):
        if comm.rank == 0:
            with torch.no_grad():
                comm.recv(1)  # rank 1 runs while rank 0 waits in here
                return torch.is_grad_enabled()
        enabled = torch.is_grad_enabled()
        comm.send(np.zeros(1), 0)
        return enabled

    assert cluster.run(worker, 2).values == [False, True]


def test_dropped_message_raises_message_lost_at_its_arrival_time_and_later_messages_arrive():
    def worker(comm):
        if comm.rank == 0:
            for i in range(3):
                comm.send(np.full(4, i, dtype=np.float64), 1)
            return None
        got = []
        for _ in range(3):
            try:
                got.append(int(comm.recv(0)[0]))
            except cluster.MessageLostError as err:
                got.append(("lost", err.peer, comm.clock))
        return got

    net = cluster.Network(alpha=1.0, beta=0.0)
    res = cluster.run(worker, 2, network=net, faults=cluster.Faults(drop={0: {1}}), timeout=10)
    assert res.values[1] == [0, ("lost", 0, 2.0), 2]  # the timeout fires when the message was due
    assert res.stats[0].messages_sent == 3 and res.stats[1].messages_received == 2


def test_random_loss_is_reproducible_from_the_seed_and_close_to_its_rate():
    def worker(comm, n):
        if comm.rank == 0:
            for _ in range(n):
                comm.send(np.zeros(1), 1)
            return None
        lost = 0
        for _ in range(n):
            try:
                comm.recv(0)
            except cluster.MessageLostError:
                lost += 1
        return lost

    runs = [cluster.run(worker, 2, args=(2000,), faults=cluster.Faults(loss=0.1, seed=s), timeout=30).values[1]
            for s in (1, 1, 2)]
    assert runs[0] == runs[1] and 150 < runs[0] < 250 and 150 < runs[2] < 250


def test_lost_message_in_a_sendrecv_ring_raises_on_the_receiver_only():
    def worker(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        try:
            return float(comm.sendrecv(np.full(2, comm.rank, dtype=np.float64), right, left, out=np.empty(2))[0])
        except cluster.MessageLostError as err:
            return ("lost", err.peer)

    res = cluster.run(worker, 3, faults=cluster.Faults(drop={2: {0}}), timeout=10)
    assert res.values == [("lost", 2), 0.0, 1.0]


@pytest.mark.parametrize("faults, match", [
    (dict(drop={5: {0}}), "names rank 5"),
    (dict(drop={0: {-1}}), "message numbers >= 0"),
    (dict(loss=1.0), "0 <= loss < 1"),
])
def test_bad_loss_faults_are_refused_with_a_clear_error(faults, match):
    with pytest.raises(ValueError, match=match):
        cluster.run(lambda comm: None, 2, faults=cluster.Faults(**faults))


def test_message_loss_is_refused_on_the_process_backend():
    with pytest.raises(ValueError, match="backend='sim'"):
        cluster.run(lambda comm: None, 2, backend="process", faults=cluster.Faults(loss=0.1))

