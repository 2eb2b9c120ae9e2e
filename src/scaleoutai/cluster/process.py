"""Real processes under torch.distributed: the communicator for laptops, GPUs, Slurm and Ray.

``ProcessComm`` sends a message as torch.distributed point-to-point messages in the format of
``wire`` (a header with dtype and shape, then the bytes), so the receiver preallocates nothing. gloo
moves bytes only into a posted receive, which shapes the rest:
- sends are ``isend`` of a copy (eager, like the simulator): a ring where every rank sends first
  cannot deadlock, and the caller may change its array as soon as ``send`` returns;
- a reaper thread waits on each send once and drops its buffer (a gloo send reports completion only
  when waited on: without the reaper every payload copy lived until the end of the run);
- the next header's receive from a peer is posted as soon as the last one landed, and with
  ``progress=True`` (``cluster.run`` workers, the grader's ranks) a receiver thread per peer posts each
  payload's receive the moment its header arrives, whatever the rank's program is doing, as MPI's
  progress engine does. ``recv`` takes the next posted message from that peer and waits for its bytes;
- a posted receive (``recv(src, out=buf)``, ``sendrecv(..., out=buf)``) posts the payload's receive into
  ``buf`` before the header arrives, right behind the header's own receive, so the bytes can flow as
  soon as they are sent (MPI's ``irecv`` into a named buffer); the header then only confirms the size;
- ``sendrecv`` sends without a copy (see ``_sendrecv``).
``run_process`` starts one OS process per rank (see ``_worker``), owns the rendezvous store on a port
the OS picks, relays each rank's output, and ends the whole group on the first failure.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any

import numpy as np

from .core import Communicator, Faults, check_fits, keep_freed_memory
from .wire import HEADER_LEN, INLINE_BYTES, SEGMENT_BYTES, TAG, decode_header, encode_header

CRASH_EXIT_CODE = 75


class InjectedCrash(BaseException):
    """Raised inside a worker when its crash fault fires; the worker then exits abruptly."""


FOREVER = 10 * 365 * 86400.0  # an idle receiver must not time out: gloo closes the pair when a wait does


class ProcessComm(Communicator):
    """A rank of a real torch.distributed group (gloo on CPU, nccl on GPU)."""

    backend = "process"

    def __init__(self, rank: int, size: int, trace: bool = False, faults: Faults | None = None,
                 device: str = "cpu", timeout: float = 300.0, progress: bool = False):
        super().__init__(rank, size, trace)
        faults = faults or Faults()
        self._crash_after = faults.crash.get(rank)
        self._slow = float(faults.slow.get(rank, 1.0))
        self._device = device
        self._timeout = timeout
        # Receiver threads only where the process ends with os._exit: a thread still waiting inside
        # gloo when the interpreter shuts down aborts the process ("terminate called ...").
        self._progress = progress and device == "cpu"
        self._inbox: dict[int, queue.SimpleQueue] = {}
        # src -> (header buffer, its posted receive): the receive of the next header from src, once posted
        self._headers: dict[int, tuple[Any, Any]] = {}
        # src -> (out, its payload's posted receives, the scratch segment for a partial last piece or None)
        self._early: dict[int, tuple[np.ndarray, list[Any], np.ndarray | None]] = {}
        self._lock = threading.Lock()  # orders a receiver thread's posting against a posted receive
        self._sent: queue.SimpleQueue = queue.SimpleQueue()
        self._reaper: threading.Thread | None = None
        self._in_flight = 0  # messages handed to gloo whose sends the reaper has not yet seen complete
        self._reaped = threading.Condition()
        self._send_error: BaseException | None = None
        self._t0 = time.perf_counter()
        self._last = self._t0
        keep_freed_memory()

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def _straggle(self) -> None:
        # A straggler of factor f takes f times as long for the work it did since its last message.
        if self._slow > 1.0:
            time.sleep((self._slow - 1.0) * (time.perf_counter() - self._last))

    def _group(self) -> Any:
        # Looked up each time, never kept: a script may destroy the group itself, and a group still
        # referenced at interpreter exit takes gloo's threads down with it ("terminate called ...").
        import torch.distributed as dist

        pg = dist.distributed_c10d._get_default_group()
        if self._progress and not self._inbox:  # start listening on first use, so peers' sends flow
            for src in range(self.size):
                if src != self.rank:
                    self._inbox[src] = queue.SimpleQueue()
                    with self._lock:  # the first header is posted before any payload can be
                        self._headers[src] = self._post_header(src, pg)
                    threading.Thread(target=self._listen, args=(src,), daemon=True,
                                     name=f"scaleout-recv-{self.rank}<-{src}").start()
        return pg

    def _before_send(self) -> None:
        if self._crash_after is not None and self.stats.messages_sent >= self._crash_after:
            raise InjectedCrash
        self._straggle()

    def _post_message(self, arr: np.ndarray, dst: int, copy: bool) -> tuple[list[Any], list[Any]]:
        """Hand ``arr`` to gloo in the ``wire`` format: its header, then above INLINE_BYTES its bytes in
        SEGMENT_BYTES pieces. Returns (sends to wait on once each, the tensors they read). ``copy=False``
        sends arr's own memory: the caller must not return before those sends complete."""
        import torch

        pg = self._group()  # the group object itself: dist.isend's Python checks cost more than a segment
        header = torch.from_numpy(encode_header(arr)).to(self._device)
        works, keep = [pg.send([header], dst, TAG)], [header]
        if arr.nbytes > INLINE_BYTES:
            raw = arr.reshape(-1).view(np.uint8)
            payload = torch.from_numpy(raw.copy() if copy or not raw.flags.writeable else raw).to(self._device)
            works += [pg.send([payload[i:i + SEGMENT_BYTES]], dst, TAG) for i in range(0, arr.nbytes, SEGMENT_BYTES)]
            keep.append(payload)
        return works, keep

    def _send(self, arr: np.ndarray, dst: int) -> None:
        self._before_send()
        start = self._now()
        # A copy: the caller may change its array as soon as send returns (value semantics).
        self._hand_to_reaper(*self._post_message(arr, dst, copy=True))
        self._count_send(arr.nbytes)
        self._trace("send", dst, arr.nbytes, start, self._now())
        self._last = time.perf_counter()

    def _recv(self, src: int) -> np.ndarray:
        self._straggle()
        start = self._now()
        self._group()
        arr = self._finish(self._take(src) if self._progress else self._post(src, None), src)
        self._count_recv(arr.nbytes)
        self._trace("recv", src, arr.nbytes, start, self._now())
        self._last = time.perf_counter()
        return arr

    def _recv_into(self, src: int, out: np.ndarray) -> np.ndarray:
        self._group()
        with self._lock:
            self._expect(src, out)
        return self._recv(src)

    def _expect(self, src: int, out: np.ndarray) -> None:
        """With the lock held: post the receive of src's next payload into ``out`` now, if it is next.

        It goes right behind the posted receive of that message's header (gloo matches a peer's
        messages in the order the receives were posted), so no byte waits for the header to be read."""
        if out.nbytes <= INLINE_BYTES or src in self._early or self._device != "cpu":
            return  # small messages travel inside their header; one posted receive per peer; CPU memory only
        if self._progress and not self._inbox[src].empty():
            return  # an earlier message from src is next in line: it was received already
        if src not in self._headers:  # no receiver thread: post the header's receive first
            self._headers[src] = self._post_header(src)
        import torch

        # gloo aborts the process when a message is longer than its posted receive, so every piece
        # posted here holds a whole segment: the last, partial one goes to a scratch segment. A message
        # of another size is then caught at its header, which lands first, before anything aborts.
        pg, raw = self._group(), out.reshape(-1).view(np.uint8)
        whole = out.nbytes - out.nbytes % SEGMENT_BYTES
        reqs = [pg.recv([torch.from_numpy(raw[i:i + SEGMENT_BYTES])], src, TAG) for i in range(0, whole, SEGMENT_BYTES)]
        tail = None
        if whole < out.nbytes:
            tail = np.empty(SEGMENT_BYTES, dtype=np.uint8)
            reqs.append(pg.recv([torch.from_numpy(tail)], src, TAG))
        self._early[src] = (out, reqs, tail)

    def _sendrecv(self, arr: np.ndarray, dst: int, src: int, out: np.ndarray | None) -> np.ndarray:
        """Two copies fewer than send + recv: src's message lands straight in ``out`` (registered here
        before its header can arrive), and ours leaves without a copy, so we return only once it has left.
        That wait depends on dst's receiver thread alone, never on dst's program: still eager."""
        if not self._progress:  # no receiver thread to post dst's receives: the eager pair
            return super()._sendrecv(arr, dst, src, out)
        from datetime import timedelta

        self._before_send()
        start = self._now()
        self._group()  # starts the receiver threads on first use
        if out is not None:
            with self._lock:
                self._expect(src, out)
        works, keep = self._post_message(arr, dst, copy=False)
        sent = self._now()
        got = self._finish(self._take(src), src)
        self._wait_sends(works, timedelta(seconds=self._timeout))  # no copy: the caller's array is free only now
        del keep
        if self._send_error is not None:
            raise RuntimeError(f"rank {self.rank}: sending to rank {dst} failed: {self._send_error}")
        self._count_send(arr.nbytes)
        self._trace("send", dst, arr.nbytes, start, sent)
        self._count_recv(got.nbytes)
        self._trace("recv", src, got.nbytes, start, self._now())
        self._last = time.perf_counter()
        return got

    def _take(self, src: int) -> tuple[Any, ...]:
        """The next message from ``src`` whose receive the receiver thread has posted."""
        try:
            posted = self._inbox[src].get(timeout=self._timeout)
        except queue.Empty:
            raise TimeoutError(f"rank {self.rank} waited {self._timeout:g} s for a message from rank {src} "
                               f"that never came: does rank {src} send it?") from None
        if isinstance(posted, BaseException):
            self._inbox[src].put(posted)  # every later receive from this peer fails the same way
            if isinstance(posted, ValueError):  # a posted receive the message did not fit
                raise posted
            raise RuntimeError(f"rank {self.rank}: receiving from rank {src} failed: {posted}") from posted
        return posted

    def _listen(self, src: int) -> None:
        """Receiver thread: post the receive of each message from ``src`` as soon as its header lands.

        The caller's ``recv`` then waits on that receive itself: one thread hand-off, not two.
        """
        from datetime import timedelta

        forever = timedelta(seconds=FOREVER)
        try:
            while True:
                self._post(src, forever)
        except BaseException as exc:  # noqa: BLE001 - the peer is gone; recv() reports it
            self._inbox[src].put(exc)

    def _post_header(self, src: int, pg: Any = None) -> tuple[Any, Any]:
        import torch

        header = torch.empty(HEADER_LEN, dtype=torch.int64, device=self._device)
        return header, (pg or self._group()).recv([header], src, TAG)

    def _post(self, src: int, header_timeout: Any) -> tuple[Any, list[Any], np.dtype, tuple[int, ...], Any]:
        """Wait for the next header from ``src``, then post the receive of its payload into a fresh buffer
        (or confirm the posted receive already waiting for it)."""
        with self._lock:
            if src not in self._headers:
                self._headers[src] = self._post_header(src)
            header, work = self._headers[src]
        work.wait() if header_timeout is None else work.wait(header_timeout)
        dtype, shape, inline = decode_header(header.cpu().numpy())
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        with self._lock:
            self._headers.pop(src, None)  # close() may have cleared it already
            early, tail = self._early.pop(src, None), None
            if early is not None:
                out, reqs, tail = early
                if inline is not None or nbytes != out.nbytes:
                    # The posted receive is the wrong size: the stream from src is out of step, so stop
                    # here, before the next header's receive is posted.
                    check_fits(dtype, shape, out, self.rank, src, "comm.recv")
                arr = out.reshape(-1).view(np.uint8)
            elif inline is not None:  # the whole message came in its header
                arr, reqs = inline, []
            else:
                arr, reqs = self._post_payload(src, nbytes)
            if self._progress:
                # Post the next header now, behind this payload (gloo matches a peer's messages in order),
                # so it is already waiting when the peer sends: no round trip before the next payload can
                # flow. Only where the process ends with os._exit: a receive still posted when the
                # interpreter exits can abort it ("terminate called without an active exception").
                self._headers[src] = self._post_header(src)
                self._inbox[src].put((arr, reqs, dtype, shape, tail))
        return arr, reqs, dtype, shape, tail

    def _post_payload(self, src: int, nbytes: int) -> tuple[Any, list[Any]]:
        import torch

        if self._device == "cpu":  # NumPy owns the memory, so freed buffers return to the malloc pool
            arr = np.empty(nbytes, dtype=np.uint8)
            buf = torch.from_numpy(arr)
        else:
            arr = buf = torch.empty(nbytes, dtype=torch.uint8, device=self._device)
        pg = self._group()
        return arr, [pg.recv([buf[i:i + SEGMENT_BYTES]], src, TAG) for i in range(0, nbytes, SEGMENT_BYTES)]

    def _finish(self, posted: tuple[Any, ...], src: int) -> np.ndarray:
        arr, reqs, dtype, shape, tail = posted
        try:
            for req in reqs:
                req.wait()
        except RuntimeError as exc:
            raise RuntimeError(f"rank {self.rank}: receiving from rank {src} failed: {exc}") from exc
        if tail is not None:  # the last partial segment of a posted receive landed in scratch
            rest = len(arr) % SEGMENT_BYTES
            arr[len(arr) - rest:] = tail[:rest]
        if not isinstance(arr, np.ndarray):
            arr = arr.cpu().numpy()
        return arr.view(dtype).reshape(shape)

    def barrier(self) -> None:
        import torch.distributed as dist

        self._straggle()
        dist.barrier()
        self._last = time.perf_counter()

    def compute(self, seconds: float) -> None:
        """Emulate ``seconds`` of local work by sleeping (times the straggler factor)."""
        if seconds < 0:
            raise ValueError(f"compute(seconds={seconds}): time cannot run backwards")
        time.sleep(seconds * self._slow)
        self._last = time.perf_counter()

    def _hand_to_reaper(self, works: list[Any], keep: list[Any]) -> None:
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name=f"scaleout-send-reaper-{self.rank}",
                                            daemon=True)
            self._reaper.start()
        with self._reaped:
            self._in_flight += 1
        self._sent.put((works, keep))

    def _reap(self) -> None:
        """Wait on each send exactly once (a second wait on a gloo send blocks for a send that never comes)."""
        from datetime import timedelta

        timeout = timedelta(seconds=self._timeout)
        while True:
            item = self._sent.get()
            if item is None:  # close()
                return
            self._wait_sends(item[0], timeout)
            item = None  # hold no gloo object while idle: the group must be free to go
            with self._reaped:
                self._in_flight -= 1
                self._reaped.notify_all()

    def _wait_sends(self, works: list[Any], timeout: Any) -> None:
        try:
            for w in works:
                w.wait(timeout)  # releases the GIL
        except BaseException as exc:  # noqa: BLE001 - a dead peer; flush() reports it
            self._send_error = self._send_error or exc

    def close(self) -> None:
        """Stop the reaper and let go of the group, so ``destroy_process_group`` can free gloo's threads
        while the interpreter still runs (else they may be torn down at exit: "terminate called ...")."""
        if self._reaper is not None:
            self._sent.put(None)
            self._reaper.join(timeout=5)
            self._reaper = None
        self._headers.clear()

    def flush(self) -> None:
        """Wait until every message this rank sent has left its buffers (the peers have received them)."""
        with self._reaped:
            if not self._reaped.wait_for(lambda: self._in_flight == 0, timeout=self._timeout):
                raise TimeoutError(f"rank {self.rank}: {self._in_flight} sent message(s) were not received "
                                   f"within {self._timeout:g} s; does every send have a matching recv?")
        if self._send_error is not None:
            raise RuntimeError(f"rank {self.rank}: a send failed: {self._send_error}")
