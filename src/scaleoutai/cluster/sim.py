"""The simulated cluster: one coroutine per rank, an alpha-beta clock per rank (Chapters 2-4).

Each rank is a greenlet (a plain function with a blocking ``recv``) on one scheduler thread: a rank runs
until it must wait, then the next runnable rank resumes, in the order they became runnable. A switch
costs well under a microsecond, where handing the GIL between K threads cost several: a K = 1024 ring
all-reduce (2 million messages) pays 1.5-2 us of simulator per message (benchmarks/bench_sim_ring.py). The ranks share
that thread: contextvars are per rank (greenlets keep their own), torch's grad mode is kept per rank by
the scheduler, but a ``threading.local`` of user code is one for all ranks.

Time model (Network(alpha, beta)): a single-port, full-duplex link per rank. A send of n bytes started
at the sender's clock t occupies the sender's egress until t + alpha + n*beta (sends are eager, so they
never block in real time). The message then needs the receiver's ingress for alpha + n*beta: it takes
the earliest free interval of that length starting no earlier than t, so messages arriving together
serialize (incast). A recv moves the receiver's clock to max(own clock, end of that interval). Ingress
intervals are placed in the receiver's recv order, so results and clocks depend only on the program,
never on scheduling: every run is deterministic. ``Network(ingress="free")`` skips the ingress (a
rank receives any number of messages at once). A barrier moves every clock to the latest one. When
every live rank waits and nothing can arrive, DeadlockError names them.
"""
from __future__ import annotations

import bisect
import sys
import threading
import time
import traceback
from collections import deque
from queue import SimpleQueue
from typing import Any, Callable

import numpy as np

from .core import (ClusterError, Communicator, DeadlockError, Faults, MessageLostError, Network, PeerCrashedError,
                   RankCrashed, RankError, RunResult, RunTimeout, keep_freed_memory)

_ENDED = ("done", "crashed", "failed")
_AT_BARRIER = -1  # what a rank waits on at a barrier: never a rank, so no send wakes it
# np.may_share_memory without its __array_function__ dispatch (NEP 18's ``_implementation``): half the
# cost, and sendrecv's inline path asks it 2 million times in a K = 1024 ring.
_may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)
_ndarray = np.ndarray


class _Aborted(BaseException):
    """Unwinds a rank once the run has failed elsewhere (not seen by user code)."""


class _Crash(BaseException):
    """Unwinds a crashed rank; a BaseException so that user code's ``except Exception`` can't hide it."""


class _World:
    """The shared state of one run. Only the scheduler's thread touches it (ranks are greenlets there),
    so it needs no locks; the caller's thread only sets ``abort`` when the run times out."""

    def __init__(self, size: int, network: Network, faults: Faults):
        self.size = size
        self.network = network
        self.faults = faults
        # mail[dst][src]: the messages from src that dst has not received yet. Made on first use: K^2
        # deques up front cost more than a K = 1024 ring's 2 million messages do.
        self.mail: list[dict[int, deque]] = [{} for _ in range(size)]
        self.state = ["new"] * size
        self.waiting_on: list[int | None] = [None] * size
        self.posted: list[np.ndarray | None] = [None] * size  # a blocked recv's out, for the sender to fill
        self.ready: deque[int] = deque(range(size))  # ranks to resume, in the order they became runnable
        self.hub: Any = None  # the scheduler's greenlet
        self.barrier_gen = 0
        self.barrier_arrived: list[int] = []
        self.barrier_clock = 0.0
        self.release_clock: dict[int, float] = {}
        self.abort: BaseException | None = None
        self.comms: list[SimComm] = []
        self.failures: list[tuple[int, BaseException, str]] = []
        self.finished = threading.Event()

    def block(self, r: int, state: str, on: int | None) -> None:
        """Park rank r (the running greenlet) until someone makes it ready again.

        torch's grad mode belongs to the thread, which every rank shares here: a rank that waits inside
        ``torch.no_grad()`` must not switch gradients off for the rank that runs next, so it is kept."""
        self.state[r], self.waiting_on[r] = state, on
        torch = sys.modules.get("torch")
        grad = torch.is_grad_enabled() if torch is not None else None
        self.hub.switch()
        if grad is not None:
            torch.set_grad_enabled(grad)
        self.state[r], self.waiting_on[r] = "run", None

    def wake(self, r: int) -> None:
        if self.waiting_on[r] is not None:
            self.waiting_on[r] = None
            self.ready.append(r)

    def wake_blocked(self, only_waiting_on: int | None = None) -> None:
        for q in range(self.size):
            if self.state[q] == "recv" and only_waiting_on in (None, self.waiting_on[q]):
                self.wake(q)
            elif self.state[q] == "barrier" and only_waiting_on is None:
                self.wake(q)

    def stop(self, err: BaseException) -> None:
        """End the run with ``err`` (the first reason given wins); every rank unwinds at its next message."""
        if self.abort is None:
            self.abort = err
        self.troubled()

    def troubled(self) -> None:
        """A rank crashed or the run is ending: every sendrecv takes the checked path from now on."""
        for c in self.comms:
            c._inline = False

    def fail_run(self, err: BaseException) -> None:
        self.stop(err)
        self.wake_blocked()

    def barrier_members(self) -> int:
        return sum(1 for s in self.state if s != "crashed")

    def deadlock(self) -> DeadlockError:
        """Nothing is ready and some ranks have not ended: each waits for something that cannot come."""
        waiting: dict[int, str] = {}
        for r in range(self.size):
            if self.state[r] == "recv":
                s = self.waiting_on[r]
                why = " (it has finished)" if self.state[s] == "done" else ""
                waiting[r] = f"to receive from rank {s}{why}"
            elif self.state[r] == "barrier":
                gone = [q for q in range(self.size) if self.state[q] == "done"]
                why = f" (ranks {gone} finished without calling it)" if gone else ""
                waiting[r] = f"at barrier(){why}"
        return DeadlockError(waiting)


class SimComm(Communicator):
    """A rank of the simulated cluster. ``comm.clock`` is its simulated time in seconds."""

    backend = "sim"

    def __init__(self, world: _World, rank: int, trace: bool):
        super().__init__(rank, world.size, trace)
        self._w = world
        self.clock = 0.0
        self._crash_after = world.faults.crash.get(rank)
        self._slow = float(world.faults.slow.get(rank, 1.0))
        faults = world.faults
        self._lossy = faults.lossy
        self._drops = frozenset(faults.drop.get(rank, ()))
        self._loss_rng = np.random.default_rng([faults.seed, rank]) if faults.loss > 0 else None
        self._alpha, self._beta = world.network.alpha, world.network.beta
        self._serial = world.network.ingress == "serial"
        # Busy intervals of this rank's ingress, sorted and disjoint: [starts[i], ends[i]).
        self._in_starts: list[float] = []
        self._in_ends: list[float] = []
        # For sendrecv's inline path: this rank's mailboxes by sender and by receiver (filled as the checked
        # path makes them), and whether it has anything (tracing, faults) that needs the checked path.
        self._inbox = world.mail[rank]
        self._outbox: dict[int, deque] = {}
        self._inline = not trace and self._crash_after is None and not self._lossy  # and _World.troubled

    # send and recv are the hot path (2 million messages at K = 1024): counts and costs are inlined.
    def _send(self, arr: np.ndarray, dst: int) -> None:
        w, st, nbytes = self._w, self.stats, arr.nbytes
        if self._crash_after is not None and st.messages_sent >= self._crash_after:
            raise _Crash
        if w.abort is not None:
            raise _Aborted
        start = self.clock
        self.clock = arrival = start + self._alpha + nbytes * self._beta
        if self._lossy and self._is_lost(st.messages_sent):
            self._mailbox(dst).append((None, start, arrival))  # the receiver's timeout fires at arrival
            if w.waiting_on[dst] == self.rank:
                w.wake(dst)
        elif w.state[dst] != "crashed":
            out = w.posted[dst]
            if out is not None and w.waiting_on[dst] == self.rank and out.dtype == arr.dtype and out.shape == arr.shape:
                # The receiver has posted this exact buffer (rendezvous): one copy, straight into it.
                np.copyto(out, arr)
                payload = out
            else:
                payload = arr.copy()  # eager: the receiver must never alias the sender's buffer
            self._mailbox(dst).append((payload, start, arrival))
            if w.waiting_on[dst] == self.rank:
                w.wake(dst)
        st.messages_sent += 1
        st.bytes_sent += nbytes
        if self.trace is not None:
            self._trace("send", dst, nbytes, start, arrival)

    def _mailbox(self, dst: int) -> deque:
        """The deque that holds this rank's messages to ``dst`` until dst receives them."""
        box = self._outbox.get(dst)
        if box is None:
            box = self._outbox[dst] = self._w.mail[dst].setdefault(self.rank, deque())
        return box

    def _recv(self, src: int, out: np.ndarray | None = None) -> np.ndarray:
        w = self._w
        start = self.clock
        box = self._inbox.get(src)
        if box is None:
            box = self._inbox[src] = deque()
        if not box:
            w.posted[self.rank] = out
            try:
                while not box:
                    if w.abort is not None:
                        raise _Aborted
                    if w.state[src] == "crashed":
                        raise PeerCrashedError(self.rank, src)
                    w.block(self.rank, "recv", src)
            finally:
                w.posted[self.rank] = None
        payload, sent, arrival = box.popleft()
        if payload is None:
            self.clock = max(self.clock, arrival)
            if self.trace is not None:
                self._trace("recv", src, 0, start, self.clock)
            raise MessageLostError(self.rank, src)
        if self._serial:
            arrival = self._book(sent, arrival)
        if arrival > start:
            self.clock = arrival
        st = self.stats
        st.messages_received += 1
        st.bytes_received += payload.nbytes
        if self.trace is not None:
            self._trace("recv", src, payload.nbytes, start, self.clock)
        if out is not None and payload is not out and payload.dtype == out.dtype and payload.shape == out.shape:
            np.copyto(out, payload)  # another dtype or shape is left to _deliver, which names the mismatch
            return out
        return payload

    def _is_lost(self, n: int) -> bool:
        """Whether this rank's n-th send is lost (Faults.drop, or a draw below Faults.loss)."""
        lost = n in self._drops
        if self._loss_rng is not None:
            lost = (self._loss_rng.random() < self._w.faults.loss) or lost  # one draw per send, always
        return lost

    def _recv_into(self, src: int, out: np.ndarray) -> np.ndarray:
        return self._recv(src, out)

    def _sendrecv(self, arr: np.ndarray, dst: int, src: int, out: np.ndarray | None) -> np.ndarray:
        self._send(arr, dst)
        return self._recv(src, out)

    def sendrecv(self, array: np.ndarray, dst: int, src: int, out: np.ndarray | None = None) -> np.ndarray:
        """As ``Communicator.sendrecv``, with its common case inline: arrays, int ranks, a posted receive that
        fits a message already waiting, no faults or tracing. A K = 1024 ring all-reduce makes 2 million of
        these calls, so each check here is the cheapest exact one; anything else takes the checked path,
        which names what is wrong."""
        box = self._inbox.get(src) if type(src) is int else None  # None too for src == rank or no mail yet
        outbox = self._outbox.get(dst) if type(dst) is int else None
        if not box or outbox is None or type(out) is not _ndarray or type(array) is not _ndarray or not self._inline:
            return Communicator.sendrecv(self, array, dst, src, out)
        payload, sent, arrival = box[0]
        shape = out.shape
        if payload is None or payload.shape != shape or payload.dtype is not out.dtype or not out.flags.carray \
                or _may_share_memory(array, out):
            return Communicator.sendrecv(self, array, dst, src, out)
        box.popleft()
        out[...] = payload
        # payload was this rank's alone and is now delivered: its buffer carries the message we send when
        # it fits (a ring's blocks mostly do), which saves an allocation per message.
        if array.shape == shape and array.dtype is payload.dtype:
            payload[...] = array
        else:
            payload = array.copy()
        nbytes = payload.nbytes
        start = self.clock
        clock = start + self._alpha + nbytes * self._beta
        outbox.append((payload, start, clock))
        w = self._w
        if w.waiting_on[dst] == self.rank:
            w.waiting_on[dst] = None
            w.ready.append(dst)
        if self._serial:
            ends = self._in_ends
            if ends and ends[-1] == sent:  # _book's commonest case inline: right after the last booking
                arrival = ends[-1] = sent + (arrival - sent)
            else:
                arrival = self._book(sent, arrival)
        self.clock = arrival if arrival > clock else clock
        st = self.stats
        st.messages_sent += 1
        st.bytes_sent += nbytes
        st.messages_received += 1
        st.bytes_received += out.nbytes
        return out

    def _book(self, sent: float, arrival: float) -> float:
        """The end of the ingress interval a message sent at ``sent`` gets (``_ingress``), with its common
        case inline: the message comes after everything booked so far (every message of a ring)."""
        ends = self._in_ends
        if ends and sent < ends[-1]:
            return self._ingress(sent, arrival - sent)
        end = sent + (arrival - sent)  # the same rounding as _ingress
        if ends and ends[-1] == sent:
            ends[-1] = end
        elif end > sent:
            self._in_starts.append(sent)
            ends.append(end)
        return end

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
        if w.abort is not None:
            raise _Aborted
        gen = w.barrier_gen
        w.barrier_arrived.append(self.rank)
        w.barrier_clock = max(w.barrier_clock, self.clock)
        if len(w.barrier_arrived) >= w.barrier_members():
            w.release_clock[gen] = w.barrier_clock
            w.barrier_gen += 1
            arrived, w.barrier_arrived, w.barrier_clock = w.barrier_arrived, [], 0.0
            for q in arrived:
                if w.state[q] == "barrier":
                    w.wake(q)
        else:
            while w.barrier_gen == gen:
                if w.abort is not None:
                    raise _Aborted
                w.block(self.rank, "barrier", _AT_BARRIER)
        self.clock = max(self.clock, w.release_clock[gen])

    def compute(self, seconds: float) -> None:
        """Advance this rank's clock by ``seconds`` of local work, times its straggler factor."""
        if seconds < 0:
            raise ValueError(f"compute(seconds={seconds}): time cannot run backwards")
        self.clock += seconds * self._slow


_hub_lock = threading.Lock()
_idle_hubs: list[SimpleQueue] = []  # the job queues of scheduler threads waiting for a run


def _hub_loop(jobs: SimpleQueue) -> None:
    while True:
        job, done = jobs.get()
        try:
            job()
        finally:
            with _hub_lock:
                _idle_hubs.append(jobs)
            done.set()


def _on_hub(job: Callable[[], None], done: threading.Event) -> None:
    """Run ``job`` on an idle scheduler thread, then set ``done``; a new thread only if all are busy.

    Threads are kept, not started per run: when a thread that ran greenlets exits, greenlet clears its
    main greenlet with ``gc.get_referrers``, a walk over every object of the process; after ``import
    torch`` (or Ray, or MLflow) that walk cost 15 ms, three times the run itself, at every run."""
    with _hub_lock:
        jobs = _idle_hubs.pop() if _idle_hubs else None
    if jobs is None:  # the first run, a run inside a rank, or a thread still busy with a timed-out run
        jobs = SimpleQueue()
        threading.Thread(target=_hub_loop, args=(jobs,), name="sim-scheduler", daemon=True).start()
    jobs.put((job, done))


def run_sim(fn: Callable[..., Any], world_size: int, args: tuple, kwargs: dict, network: Network | None,
            faults: Faults | None, timeout: float | None, trace: bool) -> RunResult:
    from greenlet import GreenletExit, getcurrent, greenlet

    network = network or Network()
    faults = faults or Faults()
    faults.check(world_size)
    keep_freed_memory()  # K ranks' arrays come and go together, run after run
    w = _World(world_size, network, faults)
    comms = w.comms = [SimComm(w, r, trace) for r in range(world_size)]
    values: list[Any] = [None] * world_size
    t0 = time.perf_counter()

    def body(r: int) -> None:
        comm = comms[r]
        end_state = "done"
        try:
            if w.abort is not None:
                raise _Aborted
            w.state[r] = "run"
            if "torch" in sys.modules:  # each rank starts as a new thread would: gradients on
                sys.modules["torch"].set_grad_enabled(True)
            values[r] = fn(comm, *args, **kwargs)
        except (_Aborted, GreenletExit):
            end_state = "failed"
        except _Crash:
            values[r] = RankCrashed(r, comm._crash_after)
            end_state = "crashed"
        except BaseException as exc:  # noqa: BLE001 - any rank failure ends the group
            end_state = "failed"
            w.failures.append((r, exc, traceback.format_exc()))
            w.fail_run(exc)
        finally:
            comm.stats.wall_time = time.perf_counter() - t0
            comm.stats.sim_time = comm.clock
            w.state[r] = end_state
            if end_state == "crashed":
                w.troubled()
                w.wake_blocked(only_waiting_on=r)  # peers waiting on r learn of the crash

    def schedule() -> None:
        """The scheduler thread: resume ready ranks until all have ended, or name a deadlock."""
        try:
            w.hub = getcurrent()
            ranks = [greenlet(lambda r=r: body(r)) for r in range(world_size)]
            while True:
                while w.ready:
                    ranks[w.ready.popleft()].switch()
                if all(s in _ENDED for s in w.state):
                    break
                if w.abort is None:
                    w.stop(w.deadlock())
                w.wake_blocked()  # every rank still waiting unwinds with _Aborted
        except BaseException as exc:  # pragma: no cover - a bug in the scheduler itself
            w.failures.append((-1, exc, traceback.format_exc()))

    _on_hub(schedule, w.finished)
    try:
        done = w.finished.wait(timeout)
    except BaseException:  # Ctrl-C in a notebook: every rank unwinds at its next message
        w.stop(RunTimeout(0.0, []))
        raise
    if not done:
        running = [r for r in range(world_size) if w.state[r] not in _ENDED]
        w.stop(RunTimeout(timeout, running))
        raise RunTimeout(timeout, running)
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
