"""The simulated cluster: one coroutine per rank, an alpha-beta clock per rank (Chapters 2-4).

Each rank is a greenlet (a plain function with a blocking ``recv``) on one scheduler thread: a rank runs
until it must wait, then the next runnable rank resumes, in the order they became runnable. A switch
costs well under a microsecond, where handing the GIL between K threads cost several: a K = 1024 ring
all-reduce (2 million messages) pays 1.4-2 us of simulator per message (benchmarks/bench_sim_ring.py).
The ranks share that thread: contextvars are per rank (greenlets keep their own), torch's grad mode is
kept per rank by the scheduler, but a ``threading.local`` of user code is one for all ranks. When every
live rank waits and nothing can arrive, DeadlockError names them. Each rank's communicator, with the
time model (alpha-beta, a single-port link per rank, incast), is ``sim_comm.SimComm``.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from queue import SimpleQueue
from typing import Any, Callable

import numpy as np

from .core import (ClusterError, DeadlockError, Faults, Network, RankCrashed, RankError, RunResult, RunTimeout,
                   keep_freed_memory)
from .sim_comm import SimComm, _Aborted, _Crash

_ENDED = ("done", "crashed", "failed")


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
