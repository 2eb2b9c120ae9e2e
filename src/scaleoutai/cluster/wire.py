"""The wire format of ``ProcessComm`` messages (Chapter 4): what travels so the receiver preallocates nothing.

A message is a fixed-size int64 header (dtype string, ndim, shape, and the bytes themselves when at
most INLINE_BYTES), then for larger messages the raw bytes in SEGMENT_BYTES pieces, all on TAG.
"""
from __future__ import annotations

import numpy as np

MAX_DIMS = 12
# A message of at most INLINE_BYTES travels inside its header: one gloo message instead of two, and no
# round trip between them (a scalar ping-pong is 3x faster).
INLINE_BYTES = 256
HEADER_LEN = 2 + MAX_DIMS + INLINE_BYTES // 8
# A payload travels as segments of this size, all posted at once: gloo moves a segment only once its
# receive is posted, so many segments in flight pipeline where one big late receive would serialize.
SEGMENT_BYTES = 1 << 20
# Our messages travel on their own tag, so a user's own dist.send/recv (tag 0) never matches them.
TAG = 0x5CA1E


def encode_header(arr: np.ndarray) -> np.ndarray:
    """int64 words: dtype string, ndim, shape, and the bytes themselves when they fit (INLINE_BYTES)."""
    if arr.dtype.hasobject:
        raise TypeError("comm.send cannot send object arrays; use a numeric dtype")
    if arr.ndim > MAX_DIMS:
        raise ValueError(f"comm.send supports at most {MAX_DIMS} dimensions, got {arr.ndim}")
    words = np.zeros(HEADER_LEN, dtype=np.int64)
    words[0] = int.from_bytes(arr.dtype.str.encode().ljust(8, b"\0"), "little", signed=True)
    words[1] = arr.ndim
    words[2:2 + arr.ndim] = arr.shape
    if arr.nbytes <= INLINE_BYTES:
        words[2 + MAX_DIMS:].view(np.uint8)[:arr.nbytes] = arr.reshape(-1).view(np.uint8)
    return words


def decode_header(words: np.ndarray) -> tuple[np.dtype, tuple[int, ...], np.ndarray | None]:
    """(dtype, shape, the inline bytes or None when the payload follows as its own message)."""
    code, ndim = int(words[0]), int(words[1])
    dtype = np.dtype(code.to_bytes(8, "little", signed=True).rstrip(b"\0").decode())
    shape = tuple(int(d) for d in words[2:2 + ndim])
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    inline = words[2 + MAX_DIMS:].view(np.uint8)[:nbytes].copy() if nbytes <= INLINE_BYTES else None
    return dtype, shape, inline
