"""A rank of the simulated cluster: its clock, its link and its mailboxes (Chapters 2-4).

Time model (Network(alpha, beta)): a single-port, full-duplex link per rank. A send of n bytes started
at the sender's clock t occupies the sender's egress until t + alpha + n*beta (sends are eager, so they
never block in real time). The message then needs the receiver's ingress for alpha + n*beta: it takes
the earliest free interval of that length starting no earlier than t, so messages arriving together
serialize (incast). A recv moves the receiver's clock to max(own clock, end of that interval). Ingress
intervals are placed in the receiver's recv order, so results and clocks depend only on the program,
never on scheduling: every run is deterministic. ``Network(ingress="free")`` skips the ingress (a
rank receives any number of messages at once). A barrier moves every clock to the latest one.
The world the ranks share and the scheduler that runs them are in ``sim``.
"""
from __future__ import annotations

import bisect
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from .core import Communicator, MessageLostError, PeerCrashedError

if TYPE_CHECKING:
    from .sim import _World

_AT_BARRIER = -1  # what a rank waits on at a barrier: never a rank, so no send wakes it
# np.may_share_memory without its __array_function__ dispatch (NEP 18's ``_implementation``): half the
# cost, and sendrecv's inline path asks it 2 million times in a K = 1024 ring.
_may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)
_ndarray = np.ndarray


class _Aborted(BaseException):
    """Unwinds a rank once the run has failed elsewhere (not seen by user code)."""


class _Crash(BaseException):
    """Unwinds a crashed rank; a BaseException so that user code's ``except Exception`` can't hide it."""


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
