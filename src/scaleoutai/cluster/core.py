"""The communicator contract shared by every backend (DESIGN.md, "The one idea").

A worker is ``fn(comm, *args, **kwargs)``. ``comm`` offers ``rank``, ``size``,
``send(array, dst)``, ``recv(src) -> array``, ``barrier()`` and ``stats``; the from-scratch
collectives of Chapter 4 use nothing else. Shape and dtype travel with each message.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


from ..errors import (ClusterError, DeadlockError, MessageLostError, PeerCrashedError, RankCrashed, RankError,  # noqa: F401
                      RunTimeout)


INGRESS = ("serial", "free")  # the link models of Network.ingress


@dataclass(frozen=True)
class Network:
    """Alpha-beta network of the simulator: a message of n bytes costs ``alpha + n * beta`` seconds.

    alpha: latency per message (s); beta: transfer time per byte (s/B) = 1 / bandwidth.
    ingress: ``"serial"`` (default) is the single-port, full-duplex link of the MPI cost literature: a
    rank sends one message and receives one message at a time, so k messages arriving together at one
    rank take k (alpha + n beta) (incast). ``"free"`` lets a rank receive any number of messages at once,
    the older model, kept to contrast the two (Chapter 4).
    """

    alpha: float = 1e-5
    beta: float = 1e-9
    ingress: str = "serial"

    def __post_init__(self) -> None:
        if not (self.alpha >= 0 and self.beta >= 0):
            raise ValueError(f"Network needs alpha >= 0 and beta >= 0, got alpha={self.alpha}, beta={self.beta}")
        if self.ingress not in INGRESS:
            raise ValueError(f"Network(ingress={self.ingress!r}) is not a link model: choose one of {INGRESS}")

    def message_time(self, nbytes: int) -> float:
        return self.alpha + nbytes * self.beta


@dataclass(frozen=True)
class Faults:
    """Deterministic fault injection.

    crash: {rank: n} stops ``rank`` when it tries to send its (n+1)-th message (fail-stop).
    slow:  {rank: factor} makes ``rank`` a straggler: its compute takes ``factor`` times longer.
    drop:  {rank: {n, ...}} loses ``rank``'s n-th message (0-based over all its sends) on the link.
    loss:  the chance that any message is lost, drawn from a generator seeded by (``seed``, sender rank).
    A lost message costs its sender as usual; the receiver's ``recv`` of it raises MessageLostError at the
    time it would have arrived (simulator only: the process backend has real links).
    """

    crash: dict[int, int] = field(default_factory=dict)
    slow: dict[int, float] = field(default_factory=dict)
    drop: dict[int, Any] = field(default_factory=dict)
    loss: float = 0.0
    seed: int = 0

    @property
    def lossy(self) -> bool:
        return bool(self.drop) or self.loss > 0

    def check(self, world_size: int) -> None:
        for name, table in (("crash", self.crash), ("slow", self.slow), ("drop", self.drop)):
            for r in table:
                if not (isinstance(r, int) and 0 <= r < world_size):
                    raise ValueError(f"Faults({name}=...) names rank {r!r}, but ranks are 0..{world_size - 1}")
        for r, n in self.crash.items():
            if int(n) < 0:
                raise ValueError(f"Faults(crash={{{r}: {n}}}): the message count must be >= 0")
        for r, f in self.slow.items():
            if not f >= 1:
                raise ValueError(f"Faults(slow={{{r}: {f}}}): a straggler factor must be >= 1")
        for r, ns in self.drop.items():
            if not all(isinstance(n, int) and n >= 0 for n in ns):
                raise ValueError(f"Faults(drop={{{r}: ...}}) must list message numbers >= 0, got {ns!r}")
        if not 0 <= self.loss < 1:
            raise ValueError(f"Faults(loss={self.loss}) is a probability: choose 0 <= loss < 1")


@dataclass
class RankStats:
    """What one rank sent and received; ``sim_time`` is its simulated clock (simulator only)."""

    messages_sent: int = 0
    bytes_sent: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    sim_time: float | None = None
    wall_time: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TraceEvent:
    """One send or recv: times are simulated seconds (sim) or wall seconds since the run began."""

    kind: str  # "send" or "recv"
    rank: int
    peer: int
    nbytes: int
    start: float
    end: float


@dataclass
class RunResult:
    """What ``cluster.run`` returns: per-rank return values, stats and (optionally) the trace."""

    values: list[Any]
    stats: list[RankStats]
    backend: str
    wall_time: float
    trace: list[TraceEvent] | None = None

    @property
    def sim_time(self) -> float | None:
        """The simulated makespan: the latest rank clock (None outside the simulator)."""
        times = [s.sim_time for s in self.stats if s.sim_time is not None]
        return max(times) if times else None


@runtime_checkable
class Comm(Protocol):
    """What every per-rank function may use of its ``comm`` (the simulator, processes, a sub-group,
    the grader's sandboxed rank): the type of every ``comm`` parameter in the library."""

    rank: int
    size: int
    stats: RankStats

    def send(self, array: np.ndarray, dst: int) -> None: ...

    def recv(self, src: int, out: np.ndarray | None = None) -> np.ndarray: ...

    def sendrecv(self, array: np.ndarray, dst: int, src: int, out: np.ndarray | None = None) -> np.ndarray: ...

    def barrier(self) -> None: ...

    def compute(self, seconds: float) -> None: ...


def as_message(array: Any, where: str) -> np.ndarray:
    """Validate a payload: NumPy arrays and scalars travel; anything else gets a teaching error."""
    if isinstance(array, np.ndarray):
        return array
    if isinstance(array, np.generic):
        return np.asarray(array)
    kind = type(array).__name__
    hint = " (call .numpy() on a torch tensor)" if kind == "Tensor" else " (wrap it with np.asarray(...))"
    raise TypeError(f"{where} sends NumPy arrays only, got {kind}{hint}")


def _check_out(out: Any, where: str) -> None:
    flags = out.flags if isinstance(out, np.ndarray) else None
    if flags is None or not (flags.c_contiguous and flags.writeable):
        raise TypeError(f"{where}: out must be a writable, C-contiguous NumPy array "
                        f"(got {type(out).__name__}); pass out=None to get a new array")


def check_fits(dtype: Any, shape: tuple[int, ...], out: np.ndarray, rank: int, src: int, where: str) -> None:
    """A received message of ``dtype[shape]`` may land in ``out`` only if out has that dtype and shape:
    a posted receive is bytes, and the process backend has posted it before the header could say more."""
    if tuple(shape) != out.shape or np.dtype(dtype) != out.dtype:
        raise ValueError(f"{where}: rank {rank} received {np.dtype(dtype)}{list(shape)} from rank {src} but "
                         f"out is {out.dtype}{list(out.shape)}; a posted receive needs the message's exact "
                         "dtype and shape")


def check_peer(peer: Any, size: int, what: str) -> int:
    if type(peer) is int and 0 <= peer < size:  # the common case, first: it runs once per message
        return peer
    if isinstance(peer, bool) or not isinstance(peer, (int, np.integer)):
        raise TypeError(f"{what} must be an int rank, got {type(peer).__name__}")
    if not 0 <= int(peer) < size:
        raise ValueError(f"{what}={peer} is out of range: ranks are 0..{size - 1}")
    return int(peer)


_memory_kept = False


def keep_freed_memory() -> None:
    """Ask glibc to reuse freed memory instead of returning it to the OS (Linux only; idempotent).

    Both backends allocate rank-sized arrays again and again (received messages, results). Returned
    to the OS, each comes back as fresh pages whose first touch faults: 2048 faults per 8 MiB cost
    more than moving the 8 MiB, and a simulated K=256 run faults in 2 GiB. The price: the process
    keeps up to 1 GiB of freed memory for reuse instead of giving it back.
    """
    global _memory_kept
    if _memory_kept:
        return
    _memory_kept = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: serve blocks up to 32 MiB (glibc's max) from the heap
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep up to 1 GiB of freed heap for reuse
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


class Communicator:
    """Base class: validation, stats and tracing. Backends implement ``_send``/``_recv``/``barrier``."""

    rank: int
    size: int
    backend: str = "?"

    def __init__(self, rank: int, size: int, trace: bool = False):
        self.rank = rank
        self.size = size
        self.stats = RankStats()
        self.trace: list[TraceEvent] | None = [] if trace else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank={self.rank} size={self.size}>"

    def send(self, array: np.ndarray, dst: int) -> None:
        """Send ``array`` to rank ``dst``. Never blocks on the receiver (eager, buffered)."""
        arr = as_message(array, "comm.send")
        dst = check_peer(dst, self.size, "dst")
        if dst == self.rank:
            raise ValueError(f"rank {self.rank} tried to send to itself; keep local data local")
        # np.ascontiguousarray would turn a 0-d array into shape (1,): only copy when needed
        self._send(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr), dst)

    def recv(self, src: int, out: np.ndarray | None = None) -> np.ndarray:
        """Receive the next message from ``src``: a new array with the sender's shape and dtype.

        A *posted receive* (MPI's ``irecv`` into a named buffer): with ``out`` (a writable C-contiguous
        array of the message's dtype and shape) the bytes land there and ``out`` is returned. The process
        backend posts that receive before the message's header arrives, so a rank that knows the size
        never waits for the header first (Chapter 4, eager and rendezvous). A message of another dtype or
        shape is a ValueError on every backend.
        """
        src = check_peer(src, self.size, "src")
        if src == self.rank:
            raise ValueError(f"rank {self.rank} tried to receive from itself; that would wait forever")
        if out is None:
            return self._recv(src)
        _check_out(out, "comm.recv")
        return self._deliver(self._recv_into(src, out), out, src, "comm.recv")

    def sendrecv(self, array: np.ndarray, dst: int, src: int, out: np.ndarray | None = None) -> np.ndarray:
        """Send ``array`` to ``dst`` and receive the next message from ``src``, as one step (MPI_Sendrecv).

        Counts and costs exactly one send and one receive; on the simulator it *is* send then recv. With
        ``out`` the receive is a posted receive, as in ``recv``; on real processes our message then
        leaves without a copy. Chapter 4.
        """
        # Each check's cheap case inline first: the simulator pays for this line 2 million times at K = 1024.
        arr = array if type(array) is np.ndarray else as_message(array, "comm.sendrecv")
        size = self.size
        if not (type(dst) is int and 0 <= dst < size):
            dst = check_peer(dst, size, "dst")
        if not (type(src) is int and 0 <= src < size):
            src = check_peer(src, size, "src")
        if self.rank == dst or self.rank == src:
            raise ValueError(f"rank {self.rank} tried to sendrecv with itself (dst={dst}, src={src}); "
                             "keep local data local")
        if out is not None:
            _check_out(out, "comm.sendrecv")
            if np.may_share_memory(arr, out):
                raise ValueError("comm.sendrecv: out overlaps the array being sent, so the message could be "
                                 "overwritten before it leaves; receive into a separate array")
        got = self._sendrecv(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr), dst, src, out)
        return got if out is None or got is out else self._deliver(got, out, src, "comm.sendrecv")

    def _deliver(self, got: np.ndarray, out: np.ndarray, src: int, where: str) -> np.ndarray:
        """``out`` holding the message ``got`` (already there when the backend received in place)."""
        if got is out:  # the backend received straight into out and checked it fits
            return out
        check_fits(got.dtype, got.shape, out, self.rank, src, where)
        if not np.shares_memory(got, out):
            out[...] = got
        return out

    def _recv_into(self, src: int, out: np.ndarray) -> np.ndarray:
        """Backends that can receive in place override this; the definition is a receive, then a copy."""
        return self._recv(src)

    def _sendrecv(self, arr: np.ndarray, dst: int, src: int, out: np.ndarray | None) -> np.ndarray:
        """Backends may overlap the two directions; this one is the definition: send, then receive."""
        self._send(arr, dst)
        return self._recv(src) if out is None else self._recv_into(src, out)

    def barrier(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute(self, seconds: float) -> None:
        """Account ``seconds`` of local work (stretched by a straggler factor). See Chapter 3."""
        raise NotImplementedError

    def _send(self, arr: np.ndarray, dst: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _recv(self, src: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _count_send(self, nbytes: int) -> None:
        self.stats.messages_sent += 1
        self.stats.bytes_sent += nbytes

    def _count_recv(self, nbytes: int) -> None:
        self.stats.messages_received += 1
        self.stats.bytes_received += nbytes

    def _trace(self, kind: str, peer: int, nbytes: int, start: float, end: float) -> None:
        if self.trace is not None:
            self.trace.append(TraceEvent(kind, self.rank, peer, nbytes, start, end))


def check_run_args(fn: Any, world_size: Any, timeout: Any) -> int:
    if not callable(fn):
        raise TypeError(f"cluster.run needs a function fn(comm, ...), got {type(fn).__name__}")
    if isinstance(world_size, bool) or not isinstance(world_size, (int, np.integer)):
        raise TypeError(f"world_size must be an int >= 1, got {type(world_size).__name__}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    return int(world_size)
