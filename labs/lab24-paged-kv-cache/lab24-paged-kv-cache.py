# %% [markdown]
# # Lab 24: a paged KV cache that keeps freed prefixes (automatic prefix caching)
#
# Chapter 24's paged KV cache keeps every sequence's keys and values in blocks of `block_size` (B)
# token slots taken from a pool of `num_blocks` (N) blocks, shares blocks between forks with reference
# counts and copies a shared, partly filled block before writing into it. Its `share_prefix` shares
# a common prompt only while some sequence still holds it: the moment the last holder is freed, the
# blocks go back to the free list and their keys and values are forgotten. A chat server sends the same
# system prompt thousands of times a minute, usually *after* the previous request has finished, so
# that cache misses nearly every time. Exercise 2 of the chapter ("keep freed prefixes") asks for the
# fix, and this lab builds it: the allocator of vLLM's automatic prefix caching (and of SGLang's
# RadixAttention, there with a tree): a freed block that holds a full block of a known prefix stays
# **cached**, is found again by the next request with that prefix, and is **evicted**, least recently
# used first, only when a fresh block is needed and the free list is empty.
#
# **The key of a block.** The keys and values in logical block j of a sequence depend on every token
# before them, not only on the B tokens of the block. So a full block j of a sequence with tokens t is
# registered under the key `tuple(t[:(j + 1) * B])`: the **whole prefix** up to the end of the block.
# Only full blocks are registered (a partly filled block still changes). A block is registered the
# moment it becomes full (in `admit` for the full blocks of a prompt, in `append` for the token that
# fills it), unless a block is already registered under that key (then it stays unregistered).
#
# **A block is in one of three states**: *used* (its reference count, the number of block tables that
# hold it, is above 0); *cached* (count 0, registered: its contents are kept and can be found); *free*
# (count 0, not registered). `num_free() + num_cached() + used = N`.
#
# `PrefixCache(num_blocks, block_size)`, with its methods:
#
# - `admit(seq, tokens)`: a new sequence whose prompt is `tokens` (a list of ints). Walk its full
#   blocks j = 0, 1, ... while `(j + 1) * B < len(tokens)` (the last token is never reused: its logits
#   must be computed) and reuse the block registered under each block's key; stop at the first key
#   that is not registered. Each reused block's count goes up by one (a cached one is used again and
#   leaves the eviction order). The rest of the prompt takes fresh blocks:
#   `ceil(len(tokens) / B) - hits` of them. Return the number of prompt tokens reused, `hits * B`: the
#   storage computes the keys and values of the positions after them only;
# - `append(seq, token)`: one more token at position L = current length; returns
#   `(block, offset, copy_from)` as in the chapter: offset = L % B; a fresh block when L is a multiple
#   of B; if the last block is partly full and **shared** (count > 1), a fresh private copy replaces
#   it (the old block's count drops by one and `copy_from` names it), otherwise `copy_from` is `None`;
# - `fork(parent, child)`: the child shares every block (and the tokens) of the parent; no block taken;
# - `free(seq)`: release the sequence's blocks **from its last block to its first**; a block whose
#   count reaches 0 becomes *cached* if it is registered (it joins the eviction order as the most
#   recently used) and *free* otherwise;
# - `table(seq)` (a list, logical order), `refcount(block)`, `num_free()`, `num_cached()`.
#
# **Taking a fresh block** (admit, append, copy-on-write): from the free list while it has one;
# otherwise **evict** the cached block that became cached longest ago (least recently used): forget its
# key and hand it out. Releasing last block first means a sequence's tail, the part fewer requests
# share, is evicted before its head.
#
# **OutOfBlocks.** When the free and cached blocks together cannot give what `admit` or `append`
# needs, raise `OutOfBlocks` **before changing anything** (no count, no table, no eviction order
# changed). Careful in `admit`: a cached block it reuses is no longer available as a fresh block.
#
# **What the grader checks.** It drives your cache with hand-built and seeded random traces over its
# own storage: after every operation it reads every sequence's contents through your tables (a reused
# block must hold exactly that prefix; a write never changes a sibling), recomputes the reference counts
# and the numbers of free and cached blocks, and checks every reuse count and every eviction against
# its own model of the rules above. Finally it runs the Chapter 22 decoder twice over a cache built on
# your allocator: a second batch of requests with the first batch's system prompt must reuse its blocks
# (and generate the same tokens as greedy decoding without a cache). The course's allocator, which
# forgets freed blocks, keeps at most half of the points. `scaleoutai.serving` (the chapter's
# allocator and decoder) cannot be imported in the grader.

# %% tags=["parameters"]
NUM_BLOCKS = 6
BLOCK_SIZE = 2

# %%
from collections import OrderedDict

import numpy as np


class OutOfBlocks(Exception):
    """Given (leave it as it is): the pool cannot hold what was asked; nothing was changed."""


def replay(num_blocks, block_size, ops, tokens):
    """Given (the grader calls it; leave it as it is): run rows (kind, a, b) on a fresh cache; kind 0 =
    admit(a, the next b entries of tokens), 1 = append(a, b), 2 = fork(a, b), 3 = free(a). One output row
    per operation: [status (0 ok, 1 OutOfBlocks, 2 other error), hits (admit) or block (append), offset,
    copy_from, num_free, num_cached, refcount of blocks 0..N-1, table of a (of b for fork) padded with -1]."""
    cache = PrefixCache(int(num_blocks), int(block_size))
    n = int(num_blocks)
    toks = np.asarray(tokens, dtype=np.int64).reshape(-1).tolist()
    used, out = 0, []
    for kind, a, b in np.asarray(ops, dtype=np.int64).reshape(-1, 3).tolist():
        row = [0, -1, -1, -1]
        try:
            if kind == 0:
                prompt, used = toks[used:used + b], used + b
                row[1] = int(cache.admit(a, prompt))
            elif kind == 1:
                blk, off, src = cache.append(a, b)
                row[1:4] = [blk, off, -1 if src is None else src]
            elif kind == 2:
                cache.fork(a, b)
            else:
                cache.free(a)
        except OutOfBlocks:
            row[0] = 1
        except Exception:  # noqa: BLE001 - reported as status 2
            row[0] = 2
        try:
            tbl = [] if kind == 3 and row[0] == 0 else list(cache.table(b if kind == 2 else a))
        except Exception:  # noqa: BLE001 - a sequence that does not exist has no table
            tbl = []
        tbl = (tbl + [-1] * n)[:n]
        out.append(row + [cache.num_free(), cache.num_cached()] + [cache.refcount(i) for i in range(n)] + tbl)
    return np.array(out, dtype=np.int64).reshape(-1, 6 + 2 * n)


# %%
class PrefixCache:
    """Block tables, reference counts, copy-on-write, and full blocks kept under their prefix until evicted."""

    def __init__(self, num_blocks, block_size):
        ### BEGIN SOLUTION
        self.B = int(block_size)
        self.unused = list(range(int(num_blocks) - 1, -1, -1))  # unregistered, unreferenced
        self.counts = [0] * int(num_blocks)
        self.tables, self.tokens = {}, {}
        self.block_for = {}  # prefix (tuple) -> the block registered under it
        self.prefix_of = {}  # registered block -> its prefix
        self.evictable = OrderedDict()  # cached blocks (count 0, registered), least recently used first
        ### END SOLUTION

    def num_free(self):
        """How many blocks are free: count 0 and not registered under any prefix."""
        ### BEGIN SOLUTION
        return len(self.unused)
        ### END SOLUTION

    def num_cached(self):
        """How many blocks are cached: count 0, registered, kept until evicted."""
        ### BEGIN SOLUTION
        return len(self.evictable)
        ### END SOLUTION

    def refcount(self, block):
        """The number of block tables that hold ``block`` now."""
        ### BEGIN SOLUTION
        return self.counts[block]
        ### END SOLUTION

    def table(self, seq):
        """``seq``'s block table: a new list of block ids in logical order."""
        ### BEGIN SOLUTION
        return list(self.tables[seq])
        ### END SOLUTION

    def admit(self, seq, tokens):
        """A new sequence with prompt ``tokens``; returns the prompt tokens reused from cached blocks."""
        ### BEGIN SOLUTION
        prompt, B = [int(t) for t in tokens], self.B
        reused, end = [], B
        while end < len(prompt) and tuple(prompt[:end]) in self.block_for:  # never the last token's block
            reused.append(self.block_for[tuple(prompt[:end])])
            end += B
        fresh = -(-len(prompt) // B) - len(reused)
        idle = sum(1 for blk in reused if self.counts[blk] == 0)  # cached now, no longer available
        if fresh > len(self.unused) + len(self.evictable) - idle:
            raise OutOfBlocks(f"{fresh} fresh blocks needed, {len(self.unused)} free and "
                              f"{len(self.evictable) - idle} evictable")
        for blk in reused:
            self.evictable.pop(blk, None)
            self.counts[blk] += 1
        tbl = reused + [self._take() for _ in range(fresh)]
        self.tables[seq], self.tokens[seq] = tbl, prompt
        for j in range(len(reused), len(prompt) // B):
            self._register(tbl[j], prompt[:(j + 1) * B])
        return len(reused) * B
        ### END SOLUTION

    def append(self, seq, token):
        """(block, offset, copy_from) of the slot for the next token; copy-on-write of a shared last block."""
        ### BEGIN SOLUTION
        tbl, seen, B = self.tables[seq], self.tokens[seq], self.B
        pos, copy_from = len(seen), None
        cow = pos % B > 0 and self.counts[tbl[-1]] > 1  # a shared, partly filled last block
        if cow or pos % B == 0:
            if not (self.unused or self.evictable):
                raise OutOfBlocks("no free or cached block left")
            if cow:  # the siblings keep the old block untouched; the storage copies it into the new one
                copy_from = tbl.pop()
                self._release(copy_from)
            tbl.append(self._take())
        seen.append(int(token))
        if pos % B == B - 1:  # this token fills the block
            self._register(tbl[-1], seen)
        return tbl[-1], pos % B, copy_from
        ### END SOLUTION

    def fork(self, parent, child):
        """``child`` shares every block and token of ``parent``; no block is taken."""
        ### BEGIN SOLUTION
        for blk in self.tables[parent]:
            self.counts[blk] += 1
        self.tables[child] = list(self.tables[parent])
        self.tokens[child] = list(self.tokens[parent])
        ### END SOLUTION

    def free(self, seq):
        """Release ``seq``'s blocks, last block first; a block at count 0 becomes cached if registered."""
        ### BEGIN SOLUTION
        for blk in reversed(self.tables.pop(seq)):
            self._release(blk)
        del self.tokens[seq]
        ### END SOLUTION

    ### BEGIN SOLUTION
    def _take(self):
        blk = self.unused.pop() if self.unused else self._evict()
        self.counts[blk] = 1
        return blk

    def _evict(self):
        """The least recently used cached block, its prefix forgotten."""
        blk, _ = self.evictable.popitem(last=False)
        del self.block_for[self.prefix_of.pop(blk)]
        return blk

    def _release(self, blk):
        self.counts[blk] -= 1
        if self.counts[blk] > 0:
            return
        if blk in self.prefix_of:
            self.evictable[blk] = None  # the most recently used end
        else:
            self.unused.append(blk)

    def _register(self, blk, prefix):
        key = tuple(prefix)
        if key not in self.block_for and blk not in self.prefix_of:
            self.block_for[key], self.prefix_of[blk] = blk, key
    ### END SOLUTION


# %% [markdown]
# Try it: a request with a 5-token prompt finishes; the next request with the same first 4 tokens reuses
# its two full blocks, although no sequence held them in between.

# %% tags=["demo"]
try:
    demo = PrefixCache(NUM_BLOCKS, BLOCK_SIZE)
    demo.admit("first", [7, 3, 9, 1, 4])
    demo.append("first", 8)
    demo.free("first")
    print("after free: free", demo.num_free(), "cached", demo.num_cached())
    reused = demo.admit("second", [7, 3, 9, 1, 5])
    print("second request reuses", reused, "tokens, table", demo.table("second"))
    assert reused == 4 and demo.num_cached() == 1 and demo.num_free() == NUM_BLOCKS - 4
except NotImplementedError as err:
    print("not finished yet:", err)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
