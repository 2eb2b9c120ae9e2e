"""Real processes under torch.distributed: the communicator for laptops, GPUs, Slurm and Ray.

``ProcessComm`` carries one message as two torch.distributed point-to-point messages: a fixed-size
int64 header (dtype string, ndim, shape) and the raw bytes, so the receiver preallocates nothing.
Sends are ``isend`` (eager, like the simulator), so a ring where every rank sends before it receives
cannot deadlock. ``run_process`` starts one OS process per rank (see ``_worker``), owns the rendezvous
store on a port the OS picks, relays each rank's output, and ends the whole group on the first failure.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from .core import Communicator, Faults

MAX_DIMS = 12
HEADER_LEN = 2 + MAX_DIMS
# A payload travels as segments of this size, all posted at once: gloo moves a segment only once its
# receive is posted, so many segments in flight pipeline where one big late receive would serialize.
SEGMENT_BYTES = 1 << 20
CRASH_EXIT_CODE = 75


class InjectedCrash(BaseException):
    """Raised inside a worker when its crash fault fires; the worker then exits abruptly."""


def keep_freed_memory() -> None:
    """Ask glibc to reuse freed memory instead of returning it to the OS (Linux only).

    A received message is fresh memory; if every 8 MiB buffer comes from a new mmap, the first write
    to each 4 KiB page faults, and 2048 faults cost more than the transfer itself on a VM.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: serve blocks up to 32 MiB (glibc's max) from the heap
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep up to 1 GiB of freed heap for reuse
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def encode_header(arr: np.ndarray) -> list[int]:
    if arr.dtype.hasobject:
        raise TypeError("comm.send cannot send object arrays; use a numeric dtype")
    if arr.ndim > MAX_DIMS:
        raise ValueError(f"comm.send supports at most {MAX_DIMS} dimensions, got {arr.ndim}")
    code = int.from_bytes(arr.dtype.str.encode().ljust(8, b"\0"), "little", signed=True)
    return [code, arr.ndim, *arr.shape, *([0] * (MAX_DIMS - arr.ndim))]


def decode_header(header: list[int]) -> tuple[np.dtype, tuple[int, ...]]:
    code, ndim = int(header[0]), int(header[1])
    dtype = np.dtype(code.to_bytes(8, "little", signed=True).rstrip(b"\0").decode())
    return dtype, tuple(int(d) for d in header[2:2 + ndim])


class ProcessComm(Communicator):
    """A rank of a real torch.distributed group (gloo on CPU, nccl on GPU)."""

    backend = "process"

    def __init__(self, rank: int, size: int, trace: bool = False, faults: Faults | None = None,
                 device: str = "cpu", timeout: float = 300.0):
        super().__init__(rank, size, trace)
        faults = faults or Faults()
        self._crash_after = faults.crash.get(rank)
        self._slow = float(faults.slow.get(rank, 1.0))
        self._device = device
        self._timeout = timeout
        self._pending: list[tuple[Any, ...]] = []
        self._t0 = time.perf_counter()
        self._last = self._t0
        keep_freed_memory()

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def _straggle(self) -> None:
        # A straggler of factor f takes f times as long for the work it did since its last message.
        if self._slow > 1.0:
            time.sleep((self._slow - 1.0) * (time.perf_counter() - self._last))

    def _send(self, arr: np.ndarray, dst: int) -> None:
        import torch
        import torch.distributed as dist

        if self._crash_after is not None and self.stats.messages_sent >= self._crash_after:
            raise InjectedCrash
        self._straggle()
        start = self._now()
        header = torch.tensor(encode_header(arr), dtype=torch.int64, device=self._device)
        works = [dist.isend(header, dst)]
        keep: list[Any] = [header]
        if arr.nbytes:
            payload = torch.from_numpy(arr.reshape(-1).view(np.uint8).copy()).to(self._device)
            works += [dist.isend(payload[i:i + SEGMENT_BYTES], dst) for i in range(0, arr.nbytes, SEGMENT_BYTES)]
            keep.append(payload)
        self._pending.append((works, keep))
        self._pending = [p for p in self._pending if not all(w.is_completed() for w in p[0])]
        self._count_send(arr.nbytes)
        self._trace("send", dst, arr.nbytes, start, self._now())
        self._last = time.perf_counter()

    def _recv(self, src: int) -> np.ndarray:
        import torch
        import torch.distributed as dist

        self._straggle()
        start = self._now()
        header = torch.empty(HEADER_LEN, dtype=torch.int64, device=self._device)
        dist.recv(header, src)
        dtype, shape = decode_header(header.cpu().tolist())
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if self._device == "cpu":  # NumPy owns the memory, so freed buffers return to the malloc pool
            arr = np.empty(nbytes, dtype=np.uint8)
            buf = torch.from_numpy(arr)
        else:
            buf = torch.empty(nbytes, dtype=torch.uint8, device=self._device)
        for req in [dist.irecv(buf[i:i + SEGMENT_BYTES], src) for i in range(0, nbytes, SEGMENT_BYTES)]:
            req.wait()
        if self._device != "cpu":
            arr = buf.cpu().numpy()
        arr = arr.view(dtype).reshape(shape)
        self._count_recv(nbytes)
        self._trace("recv", src, nbytes, start, self._now())
        self._last = time.perf_counter()
        return arr

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

    def flush(self) -> None:
        """Wait until every message this rank sent has left its buffers."""
        from datetime import timedelta

        for works, _ in self._pending:
            for w in works:
                w.wait(timedelta(seconds=self._timeout))
        self._pending = []


def worker_env(world_size: int) -> dict[str, str]:
    """Environment for a local worker: loopback transport, and no thread oversubscription."""
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    threads = max(1, (os.cpu_count() or 1) // world_size)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, str(threads))
    env["PYTHONUNBUFFERED"] = "1"
    return env
