# %% [markdown]
# # Lab 24: the paged KV-cache allocator
#
# Chapter 24's paged KV cache keeps every sequence's keys and values in blocks of `block_size` token
# slots taken from a pool of `num_blocks` blocks. You write the allocator: the bookkeeping that says
# which physical block holds which tokens. The cache storage is not yours; whoever holds the storage
# (here the grader) writes token t of a sequence into `table[t // block_size]`, slot `t % block_size`.
#
# `BlockAllocator(num_blocks, block_size)` keeps a free list, a block table and a length (tokens held)
# per sequence, and a reference count per block (how many tables hold it). Its methods:
#
# - `allocate(seq, n_tokens)`: a new sequence holding `n_tokens` slots, in ceil(n_tokens / B) fresh blocks;
# - `append_slot(seq)`: one more slot at position L = current length; returns `(block, offset, copy_from)`:
#   the slot is `offset = L % B` of `block`. If the last block is full (L is a multiple of B) a fresh
#   block is appended to the table. If the last block is partly full but **shared** (refcount > 1), the
#   sequence first gets a private copy: a fresh block replaces it in the table, the old block's count
#   drops by one, and `copy_from` names the old block (the storage copies its contents); otherwise
#   `copy_from` is `None`;
# - `fork(parent, child)`: the child shares every block of the parent (each count + 1), no block taken;
# - `free(seq)`: each of its blocks loses one count; a block whose count reaches 0 goes back to the free
#   list. Preemption by recompute is just `free`;
# - `table(seq)` (a list, logical order), `refcount(block)`, `num_free()`.
#
# When the pool cannot satisfy `allocate` or `append_slot`, raise `OutOfBlocks` **before changing
# anything**: the scheduler catches it, preempts a request and tries again.
#
# The grader drives your allocator with random traces and its own storage: after every operation it
# reads every sequence's tokens through your tables, recomputes the reference counts and the free
# count, and finally runs the Chapter 22 decoder over a cache built on your allocator.

# %% tags=["parameters"]
NUM_BLOCKS = 8
BLOCK_SIZE = 4

# %%
import numpy as np


class OutOfBlocks(Exception):
    """Given (leave it as it is): the pool cannot hold what was asked; nothing was changed."""


def replay(num_blocks, block_size, ops):
    """Given (the grader calls it; leave it as it is): run rows (kind, a, b) on a fresh allocator; kind 0 =
    allocate(a, b), 1 = append_slot(a), 2 = fork(a, b), 3 = free(a). One output row per operation:
    [status (0 ok, 1 OutOfBlocks, 2 other error), block, offset, copy_from, num_free,
     refcount of blocks 0..N-1, table of a (of b for fork) padded with -1 to N entries]."""
    alloc = BlockAllocator(int(num_blocks), int(block_size))
    n = int(num_blocks)
    out = []
    for kind, a, b in np.asarray(ops, dtype=np.int64).reshape(-1, 3).tolist():
        row = [0, -1, -1, -1]
        try:
            if kind == 0:
                alloc.allocate(a, b)
            elif kind == 1:
                blk, off, src = alloc.append_slot(a)
                row[1:4] = [blk, off, -1 if src is None else src]
            elif kind == 2:
                alloc.fork(a, b)
            else:
                alloc.free(a)
        except OutOfBlocks:
            row[0] = 1
        except Exception:  # noqa: BLE001 - reported as status 2
            row[0] = 2
        try:
            tbl = [] if kind == 3 and row[0] == 0 else list(alloc.table(b if kind == 2 else a))
        except Exception:  # noqa: BLE001 - a sequence that does not exist has no table
            tbl = []
        tbl = (tbl + [-1] * n)[:n]
        out.append(row + [alloc.num_free()] + [alloc.refcount(i) for i in range(n)] + tbl)
    return np.array(out, dtype=np.int64).reshape(-1, 5 + 2 * n)


# %%
class BlockAllocator:
    """Free list, block tables and reference counts over num_blocks blocks of block_size slots."""

    def __init__(self, num_blocks, block_size):
        ### BEGIN SOLUTION
        self.B = int(block_size)
        self.free_list = list(range(int(num_blocks) - 1, -1, -1))
        self.counts = [0] * int(num_blocks)
        self.tables, self.lengths = {}, {}
        ### END SOLUTION

    def num_free(self):
        ### BEGIN SOLUTION
        return len(self.free_list)
        ### END SOLUTION

    def refcount(self, block):
        ### BEGIN SOLUTION
        return self.counts[block]
        ### END SOLUTION

    def table(self, seq):
        ### BEGIN SOLUTION
        return list(self.tables[seq])
        ### END SOLUTION

    def allocate(self, seq, n_tokens):
        """A new sequence with n_tokens slots; OutOfBlocks (nothing changed) if they do not fit."""
        ### BEGIN SOLUTION
        need = -(-int(n_tokens) // self.B)
        if need > len(self.free_list):
            raise OutOfBlocks(f"{need} blocks needed, {len(self.free_list)} free")
        self.tables[seq] = [self._take() for _ in range(need)]
        self.lengths[seq] = int(n_tokens)
        ### END SOLUTION

    def append_slot(self, seq):
        """(block, offset, copy_from) of the slot for the next token; copy-on-write of a shared last block."""
        ### BEGIN SOLUTION
        tbl, L = self.tables[seq], self.lengths[seq]
        copy_from = None
        if L % self.B == 0:
            if not self.free_list:
                raise OutOfBlocks("no free block for a new block")
            tbl.append(self._take())
        elif self.counts[tbl[-1]] > 1:
            if not self.free_list:
                raise OutOfBlocks("no free block for copy-on-write")
            copy_from = tbl[-1]
            tbl[-1] = self._take()
            self._release(copy_from)
        self.lengths[seq] = L + 1
        return tbl[-1], L % self.B, copy_from
        ### END SOLUTION

    def fork(self, parent, child):
        ### BEGIN SOLUTION
        for b in self.tables[parent]:
            self.counts[b] += 1
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        ### END SOLUTION

    def free(self, seq):
        ### BEGIN SOLUTION
        for b in self.tables.pop(seq):
            self._release(b)
        del self.lengths[seq]
        ### END SOLUTION

    ### BEGIN SOLUTION
    def _take(self):
        b = self.free_list.pop()
        self.counts[b] = 1
        return b

    def _release(self, b):
        self.counts[b] -= 1
        if self.counts[b] == 0:
            self.free_list.append(b)
    ### END SOLUTION


# %% [markdown]
# Try it: a sequence of 6 tokens, a fork, and the child's first own token.

# %%
try:
    demo = BlockAllocator(NUM_BLOCKS, BLOCK_SIZE)
    demo.allocate("parent", 6)
    demo.fork("parent", "child")
    print("child writes into", demo.append_slot("child"), "| parent", demo.table("parent"),
          "child", demo.table("child"), "| free", demo.num_free())
except NotImplementedError as err:
    print("not finished yet:", err)

# %% tags=["public-tests"]
from public_tests import run_public_tests

run_public_tests(BlockAllocator, OutOfBlocks)
