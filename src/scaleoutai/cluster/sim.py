"""The simulated cluster: one thread per rank, an alpha-beta clock per rank (Chapters 2-4).

Time model (Network(alpha, beta)): a single-port, full-duplex link per rank. A send of n bytes started
at the sender's clock t occupies the sender's egress until t + alpha + n*beta (sends are eager, so they
never block in real time). The message then needs the receiver's ingress for alpha + n*beta: it takes
the earliest free interval of that length starting no earlier than t, so messages arriving together
serialize (incast). A recv moves the receiver's clock to max(own clock, end of that interval). Ingress
intervals are placed in the receiver's recv order, so results and clocks depend only on the program,
never on thread timing: every run is deterministic. ``Network(ingress="free")`` skips the ingress (a
rank receives any number of messages at once). A barrier moves every clock to the latest one. When
every live rank waits and nothing can arrive, DeadlockError names them.
"""
from __future__ import annotations

import _thread
import bisect
import threading
import time
import traceback
from collections import deque
from typing import Any, Callable

import numpy as np

from .core import (ClusterError, Communicator, DeadlockError, Faults, Network, PeerCrashedError,
                   RankCrashed, RankError, RunResult, RunTimeout, keep_freed_memory)

_ENDED = ("done", "crashed", "failed")


class _Aborted(BaseException):
    """Unwinds a rank's thread once the run has failed elsewhere (not seen by user code)."""


class _Crash(BaseException):
    """Unwinds a crashed rank; a BaseException so that user code's ``except Exception`` can't hide it."""


class _World:
    def __init__(self, size: int, network: Network, faults: Faults):
        self.size = size
        self.network = network
        self.faults = faults
        self.lock = threading.Lock()
        # One raw lock per rank used as a wake-up semaphore: far cheaper than threading.Condition,
        # which matters at K=256 ranks and 10^5 messages.
        self.wake = [_thread.allocate_lock() for _ in range(size)]
        for lk in self.wake:
            lk.acquire()
        self.sleeping = [False] * size
        # The baton: only the rank holding it runs user code, and it hands it over only when it blocks.
        # Without it, 256 runnable threads thrash the GIL every time NumPy releases it for a copy.
        self.baton = _thread.allocate_lock()
        self.mail: list[list[deque]] = [[deque() for _ in range(size)] for _ in range(size)]
        self.state = ["run"] * size
        self.waiting_on: list[int | None] = [None] * size
        self.blocked = 0
        self.ended = 0
        self.barrier_gen = 0
        self.barrier_arrived: list[int] = []
        self.barrier_clock = 0.0
        self.release_clock: dict[int, float] = {}
        self.abort: BaseException | None = None
        self.failures: list[tuple[int, BaseException, str]] = []
        self.finished = threading.Event()

    # -- called with self.lock held ------------------------------------------------------------
    def sleep(self, r: int) -> None:
        """Release the world lock until another rank wakes ``r``, then take it again."""
        self.sleeping[r] = True
        self.lock.release()
        self.baton.release()
        self.wake[r].acquire()
        self.baton.acquire()
        self.lock.acquire()

    def wake_rank(self, r: int) -> None:
        if self.sleeping[r]:
            self.sleeping[r] = False
            self.wake[r].release()

    def wake_all(self) -> None:
        for r in range(self.size):
            self.wake_rank(r)

    def fail_run(self, err: BaseException) -> None:
        if self.abort is None:
            self.abort = err
        self.wake_all()
        self.finished.set()

    def barrier_members(self) -> int:
        return sum(1 for s in self.state if s != "crashed")

    def check_deadlock(self) -> None:
        live = [r for r in range(self.size) if self.state[r] not in _ENDED]
        if not live or self.blocked < len(live):
            return
        waiting: dict[int, str] = {}
        for r in live:
            if self.state[r] == "recv":
                s = self.waiting_on[r]
                if self.mail[r][s] or self.state[s] == "crashed":
                    return  # r has been woken and will proceed
                why = " (it has finished)" if self.state[s] == "done" else ""
                waiting[r] = f"to receive from rank {s}{why}"
            elif self.state[r] == "barrier":
                if self.waiting_on[r] != self.barrier_gen:
                    return  # the barrier r waits at has been released; r will proceed
                gone = [q for q in range(self.size) if self.state[q] == "done"]
                why = f" (ranks {gone} finished without calling it)" if gone else ""
                waiting[r] = f"at barrier(){why}"
            else:
                return
        self.fail_run(DeadlockError(waiting))


class SimComm(Communicator):
    """A rank of the simulated cluster. ``comm.clock`` is its simulated time in seconds."""

    backend = "sim"

    def __init__(self, world: _World, rank: int, trace: bool):
        super().__init__(rank, world.size, trace)
        self._w = world
        self.clock = 0.0
        self._crash_after = world.faults.crash.get(rank)
        self._slow = float(world.faults.slow.get(rank, 1.0))
        self._alpha, self._beta = world.network.alpha, world.network.beta
        self._serial = world.network.ingress == "serial"
        # Busy intervals of this rank's ingress, sorted and disjoint: [starts[i], ends[i]).
        self._in_starts: list[float] = []
        self._in_ends: list[float] = []

    # send and recv are the hot path (10^5 messages at K = 256): counts and costs are inlined.
    def _send(self, arr: np.ndarray, dst: int) -> None:
        w, st, nbytes = self._w, self.stats, arr.nbytes
        if self._crash_after is not None and st.messages_sent >= self._crash_after:
            raise _Crash
        start = self.clock
        self.clock = arrival = start + self._alpha + nbytes * self._beta
        payload = arr.copy()  # the receiver must never alias the sender's buffer
        with w.lock:
            if w.abort is not None:
                raise _Aborted
            if w.state[dst] != "crashed":
                w.mail[dst][self.rank].append((payload, start, arrival))
                if w.state[dst] == "recv" and w.waiting_on[dst] == self.rank:
                    w.wake_rank(dst)
        st.messages_sent += 1
        st.bytes_sent += nbytes
        if self.trace is not None:
            self._trace("send", dst, nbytes, start, arrival)

    def _recv(self, src: int) -> np.ndarray:
        w = self._w
        start = self.clock
        with w.lock:
            box = w.mail[self.rank][src]
            while not box:
                if w.abort is not None:
                    raise _Aborted
                if w.state[src] == "crashed":
                    raise PeerCrashedError(self.rank, src)
                w.state[self.rank], w.waiting_on[self.rank] = "recv", src
                w.blocked += 1
                w.check_deadlock()
                if w.abort is None:
                    w.sleep(self.rank)
                w.blocked -= 1
                w.state[self.rank], w.waiting_on[self.rank] = "run", None
            payload, sent, arrival = box.popleft()
        if self._serial:
            arrival = self._ingress(sent, arrival - sent)
        if arrival > start:
            self.clock = arrival
        st = self.stats
        st.messages_received += 1
        st.bytes_received += payload.nbytes
        if self.trace is not None:
            self._trace("recv", src, payload.nbytes, start, self.clock)
        return payload

    def _ingress(self, t: float, cost: float) -> float:
        """Book ``cost`` seconds of ingress in the earliest gap starting at or after ``t``; return its end."""
        if cost <= 0.0:
            return t
        starts, ends = self._in_starts, self._in_ends
        i = len(ends)
        if i and t < ends[-1]:  # not after everything booked so far: look for a gap
            i = bisect.bisect_right(ends, t)
            while i < len(starts) and t + cost > starts[i]:
                t = max(t, ends[i])
                i += 1
        end = t + cost
        if i and ends[i - 1] == t:  # touching the previous interval: extend it (keeps the lists short)
            if i < len(starts) and starts[i] == end:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
            else:
                ends[i - 1] = end
        elif i < len(starts) and starts[i] == end:
            starts[i] = t
        else:
            starts.insert(i, t)
            ends.insert(i, end)
        return end

    def barrier(self) -> None:
        """Wait until every rank that has not crashed arrives; clocks move to the latest."""
        w = self._w
        with w.lock:
            if w.abort is not None:
                raise _Aborted
            gen = w.barrier_gen
            w.barrier_arrived.append(self.rank)
            w.barrier_clock = max(w.barrier_clock, self.clock)
            if len(w.barrier_arrived) >= w.barrier_members():
                w.release_clock[gen] = w.barrier_clock
                w.barrier_gen += 1
                w.barrier_arrived = []
                w.barrier_clock = 0.0
                w.wake_all()
            else:
                w.state[self.rank], w.waiting_on[self.rank] = "barrier", gen
                w.blocked += 1
                while w.barrier_gen == gen and w.abort is None:
                    w.check_deadlock()
                    if w.abort is None:
                        w.sleep(self.rank)
                w.blocked -= 1
                w.state[self.rank], w.waiting_on[self.rank] = "run", None
                if w.abort is not None:
                    raise _Aborted
            self.clock = max(self.clock, w.release_clock[gen])

    def compute(self, seconds: float) -> None:
        """Advance this rank's clock by ``seconds`` of local work, times its straggler factor."""
        if seconds < 0:
            raise ValueError(f"compute(seconds={seconds}): time cannot run backwards")
        self.clock += seconds * self._slow


def run_sim(fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, network: Network | None,
            faults: Faults | None, timeout: float | None, trace: bool) -> RunResult:
    network = network or Network()
    faults = faults or Faults()
    faults.check(world_size)
    keep_freed_memory()  # K ranks' arrays come and go together, run after run
    w = _World(world_size, network, faults)
    comms = [SimComm(w, r, trace) for r in range(world_size)]
    values: list[Any] = [None] * world_size
    t0 = time.perf_counter()

    def body(r: int) -> None:
        comm = comms[r]
        end_state = "done"
        w.baton.acquire()
        try:
            values[r] = fn(comm, *args, **kwargs)
        except _Aborted:
            end_state = "failed"
        except _Crash:
            values[r] = RankCrashed(r, comm._crash_after)
            end_state = "crashed"
        except BaseException as exc:  # noqa: BLE001 - any rank failure ends the group
            end_state = "failed"
            with w.lock:
                w.failures.append((r, exc, traceback.format_exc()))
                w.fail_run(exc)
        finally:
            comm.stats.wall_time = time.perf_counter() - t0
            comm.stats.sim_time = comm.clock
            with w.lock:
                w.state[r] = end_state
                w.ended += 1
                if end_state == "crashed":
                    w.wake_all()  # peers waiting on r learn of the crash
                if w.ended == world_size:
                    w.finished.set()
                else:
                    w.check_deadlock()
            w.baton.release()

    threads = [threading.Thread(target=body, args=(r,), name=f"sim-rank-{r}", daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    if not w.finished.wait(timeout):
        with w.lock:
            running = [r for r in range(world_size) if w.state[r] not in _ENDED]
            w.fail_run(RunTimeout(timeout, running))
        raise RunTimeout(timeout, running)
    for t in threads:  # every thread is unwinding by now; a stuck one is a daemon and left behind
        t.join(timeout=1.0)
    if w.failures:
        rank, exc, tb = w.failures[0]
        raise RankError(rank, f"{type(exc).__name__}: {exc}", tb) from exc
    if isinstance(w.abort, ClusterError):
        raise w.abort
    events = None
    if trace:
        events = sorted((e for c in comms for e in c.trace), key=lambda e: (e.start, e.rank, e.kind))
    return RunResult(values=values, stats=[c.stats for c in comms], backend="sim",
                     wall_time=time.perf_counter() - t0, trace=events)
