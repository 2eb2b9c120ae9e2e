"""The paged KV cache: the allocator's invariants under random traces, copy-on-write, all-or-nothing
allocation, prefix sharing, and greedy decoding through the paged cache equal to the reference."""
import copy

import numpy as np
import pytest

from scaleoutai.serving.decoder import decode_step, decoder_init, generate, reference_generate
from scaleoutai.serving.paged_cache import BlockAllocator, OutOfBlocks, PagedCache


def _state(a):
    return (copy.deepcopy(a.tables), dict(a.lengths), list(a.free_list), a.refcount.copy(), dict(a.cached))


def _same(s1, s2):
    return s1[0] == s2[0] and s1[1] == s2[1] and s1[2] == s2[2] and (s1[3] == s2[3]).all() and s1[4] == s2[4]


def _random_trace(seed, num_blocks, block_size, dtype, steps=400):
    """Drive a PagedCache with random allocate/append/fork/free/swap; after every operation check the
    allocator's invariants and that every sequence reads back exactly the rows the model says it holds."""
    params = decoder_init(vocab=8, d_model=4, n_heads=1, n_layers=2, d_ff=4, max_len=8, dtype=dtype)
    cache = PagedCache(params, num_blocks, block_size)
    rng = np.random.default_rng(seed)
    model: dict[int, list[np.ndarray]] = {}  # what each live sequence must read back
    swapped: dict[int, list[np.ndarray]] = {}
    counter, next_id, ops = 0, 0, {"oob": 0, "fork": 0, "cow": 0}
    for _ in range(steps):
        op = rng.choice(["new", "append", "append", "append", "fork", "free", "swap"])
        live = sorted(model)
        before = _state(cache.alloc)
        try:
            if op == "new" or not live:
                n = int(rng.integers(0, 3 * block_size))
                cache.alloc.allocate(next_id, n)
                rows = []
                for pos in range(n):
                    counter += 1
                    row = np.full(4, counter, dtype=dtype)
                    for layer in range(2):
                        cache.write(layer, next_id, pos, row, -row)
                    rows.append(row)
                model[next_id], next_id = rows, next_id + 1
            elif op == "append":
                s = int(rng.choice(live))
                counter += 1
                row = np.full(4, counter, dtype=dtype)
                copies = cache.copies
                for layer in range(2):
                    cache.write(layer, s, len(model[s]), row, -row)
                ops["cow"] += cache.copies - copies
                model[s].append(row)
            elif op == "fork":
                s = int(rng.choice(live))
                cache.alloc.fork(s, next_id)
                model[next_id], next_id = list(model[s]), next_id + 1
                ops["fork"] += 1
            elif op == "free":
                s = int(rng.choice(live))
                cache.free(s)
                del model[s]
            else:
                if swapped and rng.random() < 0.5:
                    s = int(rng.choice(sorted(swapped)))
                    cache.swap_in(s)
                    model[s] = swapped.pop(s)
                else:
                    s = int(rng.choice(live))
                    cache.swap_out(s)
                    swapped[s] = model.pop(s)
        except OutOfBlocks:
            ops["oob"] += 1
            assert _same(before, _state(cache.alloc)), f"OutOfBlocks in {op} changed the allocator"
        cache.alloc.check()
        for s, rows in model.items():
            for layer in range(2):
                K, V = cache.read(layer, s, len(rows))
                want = np.array(rows).reshape(-1, 4)
                np.testing.assert_array_equal(K, want)
                np.testing.assert_array_equal(V, -want)
    return ops


@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_traces_leak_no_block_and_every_sequence_reads_what_was_written(block_size, dtype):
    ops = _random_trace(seed=block_size, num_blocks=12, block_size=block_size, dtype=dtype)
    assert ops["fork"] > 10 and ops["oob"] > 0  # the trace exercised sharing and a full pool
    if block_size > 1:
        assert ops["cow"] > 0


def test_check_catches_a_leaked_block_and_a_wrong_refcount():
    a = BlockAllocator(4, 2)
    a.allocate("x", 3)
    a.check()
    a.free_list.pop()  # a block vanishes
    with pytest.raises(AssertionError, match="leaked"):
        a.check()
    b = BlockAllocator(4, 2)
    b.allocate("x", 3)
    b.refcount[b.tables["x"][0]] += 1  # counted as shared but only one table holds it
    with pytest.raises(AssertionError, match="refcount"):
        b.check()


def test_copy_on_write_leaves_the_parent_unchanged_and_unshares_only_the_last_block():
    params = decoder_init(vocab=8, d_model=4, n_heads=1, n_layers=1, d_ff=4, max_len=16)
    cache = PagedCache(params, 6, 4)
    for pos in range(6):  # one full block and half of another
        cache.write(0, "p", pos, np.full(4, pos + 1.0), np.zeros(4))
    cache.alloc.fork("p", "c")
    assert cache.alloc.num_free == 4 and cache.alloc.tables["p"] == cache.alloc.tables["c"]
    cache.write(0, "c", 6, np.full(4, 99.0), np.zeros(4))
    pt, ct = cache.alloc.tables["p"], cache.alloc.tables["c"]
    assert pt[0] == ct[0] and pt[1] != ct[1] and cache.copies == 1  # full block still shared, last one copied
    assert cache.alloc.refcount[pt[0]] == 2 and cache.alloc.refcount[pt[1]] == 1
    np.testing.assert_array_equal(cache.read(0, "p", 6)[0][:, 0], [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(cache.read(0, "c", 7)[0][:, 0], [1, 2, 3, 4, 5, 6, 99])
    with pytest.raises(ValueError, match="shared by 2 sequences"):
        cache.write(0, "c", 1, np.zeros(4), np.zeros(4))  # rewriting a shared token is refused


def test_out_of_blocks_is_all_or_nothing():
    a = BlockAllocator(5, 4)
    a.allocate("a", 10)  # 3 blocks
    s = _state(a)
    with pytest.raises(OutOfBlocks):
        a.allocate("b", 9)  # needs 3, 2 free
    assert _same(s, _state(a)) and "b" not in a.tables
    with pytest.raises(OutOfBlocks):
        a.append_slots("a", 11)  # 21 tokens need 6 blocks
    assert _same(s, _state(a))
    a.fork("a", "f")
    a.allocate("c", 8)
    s = _state(a)
    with pytest.raises(OutOfBlocks):
        a.append_slot("f")  # copy-on-write of the shared half-full block needs one block: none free
    assert _same(s, _state(a))
    assert a.blocks_needed("f", 1) == 1 and a.blocks_needed("a", 2) == 1


def test_freeing_a_shared_sequence_keeps_the_blocks_its_sibling_holds():
    a = BlockAllocator(4, 2)
    a.allocate("p", 4)
    a.fork("p", "c")
    a.free("p")
    assert a.num_free == 2 and list(a.refcount[a.tables["c"]]) == [1, 1]
    a.free("c")
    assert a.num_free == 4 and not a.refcount.any()
    a.check()


def test_prefix_sharing_reuses_full_blocks_and_never_the_last_token():
    a = BlockAllocator(16, 4)
    system = list(range(10))
    a.allocate("a", 12)
    a.publish("a", system + [50, 51])  # 3 full blocks: tokens 0..11
    assert a.share_prefix("b", system + [60, 61, 62]) == 8  # blocks 0-1 match, block 2 differs at token 10
    assert a.tables["b"] == a.tables["a"][:2] and a.num_free == 13
    assert a.share_prefix("c", system[:8]) == 4  # the 8th token must be computed: one block only
    assert a.share_prefix("d", [99] + system) == 0
    a.free("a")
    a.free("b")
    a.free("c")
    assert a.share_prefix("e", system + [50, 51, 52]) == 0  # freed blocks are forgotten (no eviction cache)
    a.check()


@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 8, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_greedy_decoding_through_the_paged_cache_equals_the_reference(block_size, dtype):
    params = decoder_init(vocab=40, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40, seed=3, dtype=dtype)
    rng = np.random.default_rng(block_size)
    prompts = [rng.integers(0, 40, size=n) for n in (1, 5, 2, 8, 13)]
    cache = PagedCache(params, num_blocks=-(-40 // block_size) * 5, block_size=block_size)
    assert generate(params, prompts, max_new=7, cache=cache) == [reference_generate(params, p, 7) for p in prompts]
    assert cache.k.dtype == dtype
    allocated, filled = cache.alloc.slot_usage()
    assert filled == sum(len(p) + 6 for p in prompts) and allocated - filled < 5 * block_size


def test_a_cache_without_copy_on_write_corrupts_a_sibling_and_the_decoder_notices():
    params = decoder_init(vocab=30, d_model=16, n_heads=2, n_layers=2, d_ff=16, max_len=24, seed=4)

    class NoCow(BlockAllocator):  # writes into the shared last block instead of copying it
        def _append_one(self, seq):
            tbl, L, B = self.tables[seq], self.lengths[seq], self.block_size
            if L % B == 0:
                tbl.append(self._take())
            self.lengths[seq] = L + 1
            return tbl[-1], L % B, None

    prompt = [3, 1, 4, 1, 5]  # 5 tokens: block 1 is half full when the sequence forks

    class Unguarded(PagedCache):  # without the shared-block guard of PagedCache.write
        def write(self, layer, seq, pos, k, v):
            if seq not in self.alloc.tables or pos == self.alloc.lengths[seq]:
                self.reserve(seq, 1)
            b = self.alloc.tables[seq][pos // self.block_size]
            self.k[layer, b, pos % self.block_size], self.v[layer, b, pos % self.block_size] = k, v

    def branch(alloc, cls=PagedCache):
        cache = cls(params, 20, 4, allocator=alloc)
        for pos, tok in enumerate(prompt):
            logits = decode_step(params, np.array([tok]), np.array([pos]), cache, seqs=np.array([0]))
        a0 = int(np.argmax(logits[0]))
        cache.alloc.fork(0, 1)
        toks, out = {0: a0, 1: (a0 + 1) % 30}, {0: [], 1: []}  # the child takes another branch
        first = dict(toks)
        for pos in range(5, 10):
            lg = decode_step(params, np.array([toks[1], toks[0]]), np.array([pos, pos]), cache, seqs=np.array([1, 0]))
            toks = {1: int(np.argmax(lg[0])), 0: int(np.argmax(lg[1]))}
            out[0].append(toks[0])
            out[1].append(toks[1])
        return first, out

    first, out = branch(BlockAllocator(20, 4))
    want = {s: reference_generate(params, np.array(prompt + [first[s]]), 5) for s in (0, 1)}
    assert out == want
    with pytest.raises(ValueError, match="would change a sibling's tokens"):
        branch(NoCow(20, 4))  # the cache's guard catches the missing copy
    first, bad = branch(NoCow(20, 4), Unguarded)
    assert bad[0] == want[0] and bad[1] != want[1]  # the parent overwrote the child's token in the shared block


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="positive integers"):
        BlockAllocator(0, 4)
    a = BlockAllocator(4, 2)
    a.allocate("x", 1)
    with pytest.raises(ValueError, match="already has blocks"):
        a.allocate("x", 1)
    with pytest.raises(KeyError, match="allocate it first"):
        a.append_slot("nope")
    with pytest.raises(ValueError, match="fork into a new id"):
        a.fork("x", "x")


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_greedy_decoding_of_a_gqa_model_through_the_paged_cache_equals_the_reference(n_kv_heads):
    """The blocks hold n_kv_heads * d_h numbers per token: 1/4 and 1/2 of a multi-head cache here."""
    params = decoder_init(vocab=40, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=40, seed=5,
                          n_kv_heads=n_kv_heads)
    rng = np.random.default_rng(n_kv_heads)
    prompts = [rng.integers(0, 40, size=n) for n in (1, 6, 11)]
    cache = PagedCache(params, num_blocks=30, block_size=4)
    assert generate(params, prompts, max_new=6, cache=cache) == [reference_generate(params, p, 6) for p in prompts]
    assert cache.k.shape[-1] == cache.v.shape[-1] == n_kv_heads * 4
