"""The paged KV cache (Chapter 24, Section 4): a block allocator and a cache that reads through it.

PagedAttention (Kwon et al., SOSP 2023) stores a sequence's keys and values in fixed-size blocks of
``block_size`` tokens taken from one pool of ``num_blocks``, the way virtual memory stores a process
in pages. A **block table** maps a sequence's logical block j (tokens jB .. jB+B-1) to a physical
block; a **reference count** per block lets sequences share blocks (a forked sample, a common prompt
prefix); a write into a shared block first copies it (**copy-on-write**).

Invariants (tested under random traces):
- every block is either free (refcount 0, on the free list once) or used: free + used = N;
- a block's refcount equals the number of block-table entries that point to it;
- a write never changes a token another sequence reads; a read returns exactly what was written.

``BlockAllocator`` keeps only this bookkeeping; ``PagedCache`` owns the K and V storage
(n_layers, N, B, kv_width) and implements the decoder's ``write``/``read`` through the block table
(kv_width = n_kv_heads * d_h: d_model for multi-head attention, less with grouped-query attention).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .decoder import kv_width


class OutOfBlocks(RuntimeError):
    """The pool cannot hold what was asked; nothing was changed, so the scheduler can preempt and retry."""


class BlockAllocator:
    """Free list, block tables, reference counts and prefix sharing over N blocks of B tokens."""

    def __init__(self, num_blocks: int, block_size: int):
        if int(num_blocks) < 1 or int(block_size) < 1:
            raise ValueError(f"num_blocks and block_size must be positive integers, got {num_blocks} and {block_size}")
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.free_list: list[int] = list(range(self.num_blocks - 1, -1, -1))  # pop() hands out block 0 first
        self.refcount = np.zeros(self.num_blocks, dtype=np.int64)
        self.tables: dict[Any, list[int]] = {}
        self.lengths: dict[Any, int] = {}
        self.cached: dict[tuple, int] = {}  # token prefix -> block holding the K/V of its last B tokens
        self.hash_of: dict[int, tuple] = {}  # block -> its prefix key (forgotten when the block is freed)

    # -- queries --------------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self.free_list)

    def table(self, seq: Any) -> list[int]:
        return list(self._table(seq))

    def length(self, seq: Any) -> int:
        self._table(seq)
        return self.lengths[seq]

    def blocks_needed(self, seq: Any, n: int) -> int:
        """New blocks that ``append_slots(seq, n)`` takes: ceil((L + n) / B) - ceil(L / B), plus one
        when a shared, partly filled last block must be copied first."""
        L = self.lengths.get(seq, 0)
        grow = -(-(L + n) // self.block_size) - (-(-L // self.block_size))
        tbl = self.tables.get(seq, [])
        cow = n > 0 and L % self.block_size != 0 and self.refcount[tbl[-1]] > 1
        return grow + int(cow)

    def slot_usage(self) -> tuple[int, int]:
        """(allocated slots, filled slots): used blocks x B, and the distinct token slots holding data."""
        fill = np.zeros(self.num_blocks, dtype=np.int64)
        for seq, tbl in self.tables.items():
            L = self.lengths[seq]
            for j, b in enumerate(tbl):
                fill[b] = max(fill[b], min(self.block_size, L - j * self.block_size))
        used = self.num_blocks - self.num_free
        return used * self.block_size, int(fill.sum())

    # -- changes --------------------------------------------------------------------------------
    def allocate(self, seq: Any, n_tokens: int = 0) -> list[int]:
        """A new sequence with room for ``n_tokens``: ceil(n/B) blocks, all or nothing."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} already has blocks; free it first or fork to a new id")
        need = -(-int(n_tokens) // self.block_size)
        if need > self.num_free:
            raise OutOfBlocks(f"sequence {seq!r} needs {need} blocks, {self.num_free} are free")
        self.tables[seq], self.lengths[seq] = [], 0
        self.append_slots(seq, int(n_tokens))
        return self.table(seq)

    def append_slots(self, seq: Any, n: int = 1) -> list[tuple[int, int, int | None]]:
        """Room for n more tokens, all or nothing: one (block, offset, copy_from) per slot. A new block is
        taken when the last is full; a shared, partly filled last block is first replaced by a private
        copy (copy_from names the block whose contents the cache must copy)."""
        self._table(seq)
        if self.blocks_needed(seq, n) > self.num_free:
            raise OutOfBlocks(f"sequence {seq!r} needs {self.blocks_needed(seq, n)} blocks for {n} more tokens, "
                              f"{self.num_free} are free")
        return [self._append_one(seq) for _ in range(n)]

    def append_slot(self, seq: Any) -> tuple[int, int, int | None]:
        return self.append_slots(seq, 1)[0]

    def _append_one(self, seq: Any) -> tuple[int, int, int | None]:
        tbl, L, B = self.tables[seq], self.lengths[seq], self.block_size
        copy_from = None
        if L % B == 0:
            tbl.append(self._take())
        elif self.refcount[tbl[-1]] > 1:  # copy-on-write: the sibling keeps the old block untouched
            copy_from = tbl[-1]
            tbl[-1] = self._take()
            self._release(copy_from)
        self.lengths[seq] = L + 1
        return tbl[-1], L % B, copy_from

    def fork(self, parent: Any, child: Any) -> None:
        """The child shares every block of the parent (refcount + 1); no block is taken."""
        tbl = self._table(parent)
        if child in self.tables:
            raise ValueError(f"sequence {child!r} already exists; fork into a new id")
        for b in tbl:
            self.refcount[b] += 1
        self.tables[child], self.lengths[child] = list(tbl), self.lengths[parent]

    def free(self, seq: Any) -> None:
        """Drop the sequence: refcount - 1 on each block; a block reaching 0 returns to the free list."""
        for b in reversed(self._table(seq)):
            self._release(b)
        del self.tables[seq], self.lengths[seq]

    # -- prefix sharing keyed by the whole token prefix (vLLM hashes it; the tuple itself cannot collide),
    #    as vLLM's automatic prefix caching but without keeping freed blocks for later requests
    def share_prefix(self, seq: Any, tokens: np.ndarray | list[int]) -> int:
        """Start a new sequence on the cached full blocks of its longest cached prefix; returns the tokens
        covered. The last token is never shared, so its logits are always computed."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} already has blocks")
        toks, B = tuple(int(t) for t in tokens), self.block_size
        tbl: list[int] = []
        for j in range((len(toks) - 1) // B):
            b = self.cached.get(toks[:(j + 1) * B])
            if b is None:
                break
            tbl.append(b)
        for b in tbl:
            self.refcount[b] += 1
        self.tables[seq], self.lengths[seq] = tbl, len(tbl) * B
        return len(tbl) * B

    def publish(self, seq: Any, tokens: np.ndarray | list[int]) -> None:
        """Offer the sequence's full blocks (whose K/V are ``tokens``' first positions) for sharing."""
        toks, B = tuple(int(t) for t in tokens), self.block_size
        for j, b in enumerate(self._table(seq)[:min(self.lengths[seq], len(toks)) // B]):
            key = toks[:(j + 1) * B]
            if key not in self.cached and b not in self.hash_of:
                self.cached[key], self.hash_of[b] = b, key

    # -- internals ------------------------------------------------------------------------------
    def _table(self, seq: Any) -> list[int]:
        if seq not in self.tables:
            raise KeyError(f"sequence {seq!r} has no blocks: allocate it first")
        return self.tables[seq]

    def _take(self) -> int:
        b = self.free_list.pop()
        self.refcount[b] = 1
        return b

    def _release(self, b: int) -> None:
        self.refcount[b] -= 1
        if self.refcount[b] == 0:
            self.free_list.append(b)
            key = self.hash_of.pop(b, None)
            if key is not None:
                del self.cached[key]

    def check(self) -> None:
        """Raise AssertionError if an invariant is broken (leak, double free, wrong refcount)."""
        counts = np.zeros(self.num_blocks, dtype=np.int64)
        for seq, tbl in self.tables.items():
            assert len(tbl) == -(-self.lengths[seq] // self.block_size), f"{seq!r}: table and length disagree"
            np.add.at(counts, tbl, 1)
        assert len(set(self.free_list)) == len(self.free_list), "a block is on the free list twice"
        assert all(counts[b] == 0 for b in self.free_list), "a free block is still in a block table"
        assert (counts == self.refcount).all(), "a refcount differs from the number of tables holding the block"
        assert self.num_free + int((counts > 0).sum()) == self.num_blocks, "a block leaked"


class PagedCache:
    """The decoder's KV cache over a BlockAllocator: K and V of shape (n_layers, N, B, kv_width).

    ``write(layer, seq, pos)`` at pos == length appends a slot (allocating the sequence at pos 0);
    reads gather the sequence's blocks in table order. ``swap_out``/``swap_in`` move a sequence's
    blocks to a host copy and back (preemption by swapping).
    """

    def __init__(self, params: dict, num_blocks: int, block_size: int, allocator: BlockAllocator | None = None):
        cfg = params["config"]
        self.alloc = allocator or BlockAllocator(num_blocks, block_size)
        self.block_size = self.alloc.block_size
        shape = (cfg["n_layers"], self.alloc.num_blocks, self.block_size, kv_width(cfg))
        self.k = np.zeros(shape, dtype=params["tok"].dtype)
        self.v = np.zeros(shape, dtype=params["tok"].dtype)
        self.host: dict[Any, tuple[np.ndarray, np.ndarray, int]] = {}
        self.copies = 0  # copy-on-write block copies, for the chapter's counts

    def reserve(self, seq: Any, n: int = 1) -> None:
        """Room for n more tokens of ``seq`` (allocating it if new), copying shared blocks first."""
        if seq not in self.alloc.tables:
            self.alloc.allocate(seq, 0)
        for block, _, src in self.alloc.append_slots(seq, n):
            if src is not None:
                self.k[:, block], self.v[:, block] = self.k[:, src], self.v[:, src]
                self.copies += 1

    def write(self, layer: int, seq: Any, pos: int, k: np.ndarray, v: np.ndarray) -> None:
        if seq not in self.alloc.tables or pos == self.alloc.lengths[seq]:
            self.reserve(seq, 1)
        L = self.alloc.lengths[seq]
        if not 0 <= pos < L:
            raise ValueError(f"sequence {seq!r} holds {L} tokens; write position {pos} first reserve()s its slot")
        b = self.alloc.tables[seq][pos // self.block_size]
        if self.alloc.refcount[b] > 1:
            raise ValueError(f"position {pos} of sequence {seq!r} lies in block {b}, shared by "
                             f"{self.alloc.refcount[b]} sequences: writing it would change a sibling's tokens")
        self.k[layer, b, pos % self.block_size], self.v[layer, b, pos % self.block_size] = k, v

    def read(self, layer: int, seq: Any, length: int) -> tuple[np.ndarray, np.ndarray]:
        tbl = self.alloc.table(seq)[:-(-length // self.block_size)]
        d = self.k.shape[-1]
        return self.k[layer, tbl].reshape(-1, d)[:length], self.v[layer, tbl].reshape(-1, d)[:length]

    def free(self, seq: Any) -> None:
        self.alloc.free(seq)

    def swap_out(self, seq: Any) -> None:
        """Copy the sequence's blocks to host memory and free them on the device pool."""
        tbl = self.alloc.table(seq)
        self.host[seq] = (self.k[:, tbl].copy(), self.v[:, tbl].copy(), self.alloc.lengths[seq])
        self.alloc.free(seq)

    def swap_in(self, seq: Any) -> None:
        """Bring a swapped sequence back into fresh blocks (OutOfBlocks, state unchanged, if they do not fit)."""
        k, v, L = self.host[seq]
        tbl = self.alloc.allocate(seq, L)
        self.k[:, tbl], self.v[:, tbl] = k, v
        del self.host[seq]

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes
