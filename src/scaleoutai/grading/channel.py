"""The wire between the grader and one sandboxed rank: framed JSON headers and raw NumPy bytes.

A frame is ``!II`` (header length, payload length), a JSON object, then the payload: the raw bytes of
the arrays the header describes (``"arrays": [[dtype, shape], ...]``). Both ends validate: dtypes are
plain numbers (``b i u f c``, never objects or records), shapes are small lists of non-negative ints
whose sizes add up to the payload, and every length is capped before anything is allocated. Nothing is
unpickled. The grader treats every frame from a sandbox as hostile (grading/README.md, "Isolation").
"""
from __future__ import annotations

import json
import re
import select
import socket
import struct
import time
from typing import Any

import numpy as np

_LEN = struct.Struct("!II")
HEADER_CAP = 1 << 20  # one JSON header
PAYLOAD_CAP = 64 << 20  # the arrays of one frame
_DTYPE = re.compile(r"^[<>|=]?[biufc][0-9]{1,2}$")


class ChannelClosed(EOFError):
    """The other end closed the channel or sent something that is not a frame."""


class ChannelTimeout(TimeoutError):
    """Nothing arrived before the deadline."""


def _describe(arr: np.ndarray) -> list:
    return [arr.dtype.str, list(arr.shape)]


def check_array_spec(spec: Any) -> tuple[np.dtype, tuple[int, ...], int]:
    """(dtype, shape, nbytes) of one ``[dtype, shape]`` entry; ChannelClosed for anything else."""
    if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], list)):
        raise ChannelClosed("malformed array description")
    if not _DTYPE.match(spec[0]) or len(spec[1]) > 32:
        raise ChannelClosed(f"unsupported array type {spec[0][:20]!r}")
    dt = np.dtype(spec[0])
    if dt.kind not in "biufc" or dt.hasobject:
        raise ChannelClosed(f"unsupported array type {spec[0][:20]!r}")
    shape = spec[1]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= PAYLOAD_CAP for n in shape):
        raise ChannelClosed("malformed array shape")
    count = 1
    for n in shape:
        count *= n
        if count * dt.itemsize > PAYLOAD_CAP:
            raise ChannelClosed("array too large for one message")
    return dt, tuple(shape), count * dt.itemsize


class Channel:
    """One end of a socket pair. ``send(header, arrays)`` and ``recv(timeout) -> (header, arrays)``."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sock.setblocking(True)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, header: dict, arrays: list[np.ndarray] = ()) -> None:
        arrays = [a if a.flags.c_contiguous else a.copy(order="C") for a in map(np.asarray, arrays)]  # 0-d stays 0-d
        head = dict(header, arrays=[_describe(a) for a in arrays])
        raw = json.dumps(head, separators=(",", ":")).encode()
        size = sum(a.nbytes for a in arrays)
        if len(raw) > HEADER_CAP or size > PAYLOAD_CAP:
            raise ValueError(f"message too large to send ({len(raw)} B header, {size} B of arrays; "
                             f"the cap is {PAYLOAD_CAP >> 20} MiB)")
        try:
            self.sock.sendall(_LEN.pack(len(raw), size) + raw)
            for a in arrays:
                if a.nbytes:
                    self.sock.sendall(memoryview(a).cast("B"))
        except OSError as exc:
            raise ChannelClosed(f"the other end is gone ({exc.strerror or exc})") from None

    def _read(self, n: int, deadline: float | None) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise ChannelTimeout("no message within the time limit")
            try:
                k = self.sock.recv_into(view[got:], n - got)
            except OSError as exc:
                raise ChannelClosed(f"the channel broke ({exc.strerror or exc})") from None
            if k == 0:
                raise ChannelClosed("the other end closed the channel")
            got += k
        return buf

    def recv(self, timeout: float | None = None, payload_cap: int = PAYLOAD_CAP,
             header_cap: int = HEADER_CAP) -> tuple[dict, list[np.ndarray]]:
        """The next frame; ChannelClosed before anything is read past the header's length if the frame is
        over ``header_cap`` or ``payload_cap`` (the grader caps a sandbox's frames by what the op needs)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        hlen, plen = _LEN.unpack(self._read(_LEN.size, deadline))
        if hlen > header_cap or plen > payload_cap:
            raise ChannelClosed(f"a message of {hlen + plen} bytes is over the cap")
        try:
            head = json.loads(bytes(self._read(hlen, deadline)).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ChannelClosed("a message header is not JSON") from None
        if not isinstance(head, dict) or not isinstance(head.get("op"), str):
            raise ChannelClosed("a message header has no op")
        specs = head.pop("arrays", [])
        if not isinstance(specs, list) or len(specs) > 64:
            raise ChannelClosed("malformed array list")
        checked = [check_array_spec(s) for s in specs]
        if sum(n for _, _, n in checked) != plen:
            raise ChannelClosed("array sizes do not add up to the payload")
        payload = self._read(plen, deadline) if plen else bytearray()
        arrays, at = [], 0
        for dt, shape, n in checked:
            arrays.append(np.frombuffer(payload, dtype=dt, count=n // dt.itemsize if dt.itemsize else 0,
                                        offset=at).reshape(shape).copy() if n else np.zeros(shape, dt))
            at += n
        return head, arrays


GRADER_IO_TIMEOUT = 300.0  # no single send or receive of the grader's waits longer, whatever a sandbox does


def pair() -> tuple[Channel, socket.socket]:
    """(the grader's end, the socket to hand to the sandbox). The grader's end never blocks forever:
    a sandbox that stops reading cannot hang the grader in a send."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ch = Channel(a)
    a.settimeout(GRADER_IO_TIMEOUT)
    return ch, b
