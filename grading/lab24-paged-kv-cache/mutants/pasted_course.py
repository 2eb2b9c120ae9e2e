# mutant: the chapter's BlockAllocator (paged_cache.allocate / _append_one / fork / free) adapted by hand: no prefix is ever reused, freed blocks go straight back to the free list
# loses: out_of_blocks, prefix_hits, lru_eviction, decoder
# says: keep a freed sequence's full blocks cached
# score-at-most: 50
class PrefixCache:
    def __init__(self, num_blocks, block_size):
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.free_list = list(range(self.num_blocks - 1, -1, -1))
        self.counts = [0] * self.num_blocks
        self.tables, self.lengths = {}, {}

    def num_free(self):
        return len(self.free_list)

    def num_cached(self):
        return 0

    def refcount(self, block):
        return self.counts[block]

    def table(self, seq):
        return list(self.tables[seq])

    def admit(self, seq, tokens):
        need = -(-len(tokens) // self.block_size)
        if need > len(self.free_list):
            raise OutOfBlocks(f"sequence {seq!r} needs {need} blocks, {len(self.free_list)} are free")
        self.tables[seq], self.lengths[seq] = [], 0
        for _ in range(len(tokens)):
            self._append_one(seq)
        return 0

    def append(self, seq, token):
        L, B = self.lengths[seq], self.block_size
        need = int(L % B == 0 or self.counts[self.tables[seq][-1]] > 1)
        if need > len(self.free_list):
            raise OutOfBlocks(f"sequence {seq!r} needs a block, none is free")
        return self._append_one(seq)

    def _append_one(self, seq):
        tbl, L, B = self.tables[seq], self.lengths[seq], self.block_size
        copy_from = None
        if L % B == 0:
            tbl.append(self._take())
        elif self.counts[tbl[-1]] > 1:
            copy_from = tbl[-1]
            tbl[-1] = self._take()
            self._release(copy_from)
        self.lengths[seq] = L + 1
        return tbl[-1], L % B, copy_from

    def fork(self, parent, child):
        for b in self.tables[parent]:
            self.counts[b] += 1
        self.tables[child], self.lengths[child] = list(self.tables[parent]), self.lengths[parent]

    def free(self, seq):
        for b in reversed(self.tables[seq]):
            self._release(b)
        del self.tables[seq], self.lengths[seq]

    def _take(self):
        b = self.free_list.pop()
        self.counts[b] = 1
        return b

    def _release(self, b):
        self.counts[b] -= 1
        if self.counts[b] == 0:
            self.free_list.append(b)
