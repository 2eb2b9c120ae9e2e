"""Lab 24: the paged KV-cache allocator, checked through the grader's own storage and reads."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, NotGraded, Plan, Test
from scaleoutai.serving.decoder import decoder_init, generate, reference_generate
from scaleoutai.serving.paged_cache import BlockAllocator as Reference
from scaleoutai.serving.paged_cache import OutOfBlocks

UNIMPORTABLE = ("scaleoutai.serving",)  # the answer: serving.paged_cache

KINDS = {0: "allocate", 1: "append_slot", 2: "fork", 3: "free"}
PROPERTY = 3  # seeded random traces whose pool size, block size and length are drawn too
DECODER = dict(vocab=32, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40)


def random_ops(rng: np.random.Generator, N: int, B: int, steps: int, mix: tuple = (0, 1, 1, 1, 2, 3)) -> np.ndarray:
    """A trace the reference allocator can follow: allocations, appends, forks and frees on live ids,
    with the pool small enough that some operations must raise OutOfBlocks."""
    ref, live, nxt, ops = Reference(N, B), [], 0, []
    for _ in range(steps):
        kind = int(rng.choice(list(mix))) if live else 0
        if kind == 0:
            ops.append((0, nxt, int(rng.integers(0, 2 * B + 2))))
            try:
                ref.allocate(nxt, ops[-1][2])
                live.append(nxt)
            except OutOfBlocks:
                pass
            nxt += 1
        elif kind == 1:
            s = int(rng.choice(live))
            ops.append((1, s, 0))
            try:
                ref.append_slot(s)
            except OutOfBlocks:
                pass
        elif kind == 2:
            s = int(rng.choice(live))
            ops.append((2, s, nxt))
            ref.fork(s, nxt)
            live.append(nxt)
            nxt += 1
        else:
            s = live.pop(int(rng.integers(len(live))))
            ops.append((3, s, 0))
            ref.free(s)
    return np.array(ops, dtype=np.int64)


COW_OPS = [  # hand-built: shared half-full blocks written by the child, by the parent, three-way sharing
    ("fork of a half-full block, the child appends", 4, 4, [(0, 0, 6), (2, 0, 1), (1, 1, 0), (1, 1, 0), (1, 0, 0)]),
    ("fork, the parent appends first", 4, 4, [(0, 0, 5), (2, 0, 1), (1, 0, 0), (1, 1, 0), (1, 1, 0), (3, 0, 0)]),
    ("three-way sharing, every sibling appends", 6, 3, [(0, 0, 4), (2, 0, 1), (2, 1, 2), (1, 2, 0), (1, 0, 0), (1, 1, 0),
                                                        (3, 1, 0), (1, 2, 0), (0, 3, 6), (1, 0, 0)]),
    ("fork at a block boundary needs no copy", 4, 2, [(0, 0, 4), (2, 0, 1), (1, 1, 0), (1, 0, 0), (3, 1, 0), (1, 0, 0)]),
]
BIG = 2 ** 40  # a sequence id no int32 holds
HAND_OPS = [  # the boundaries of the contract
    ("a private partly filled block is written in place (no copy)", 3, 4, [(0, 0, 3), (1, 0, 0), (1, 0, 0), (1, 0, 0)]),
    ("shared, then private again once the sibling is freed: no copy", 4, 4, [(0, 0, 5), (2, 0, 1), (3, 1, 0), (1, 0, 0),
                                                                          (1, 0, 0)]),
    ("after the child's copy the parent's block is private: no second copy", 4, 4,
     [(0, 0, 5), (2, 0, 1), (1, 1, 0), (1, 0, 0), (1, 1, 0), (1, 0, 0)]),
    ("fork of an empty sequence, both append", 4, 2,
     [(0, 0, 0), (2, 0, 1), (1, 0, 0), (1, 1, 0), (1, 1, 0), (1, 0, 0)]),
    ("a full pool and a private partly filled block: the append needs no block", 3, 2,
     [(0, 0, 1), (1, 0, 0), (0, 1, 3), (1, 1, 0), (1, 1, 0), (3, 0, 0), (1, 1, 0)]),
    ("sequence ids beyond 2^31", 4, 3, [(0, BIG, 4), (2, BIG, BIG + 70000), (1, BIG + 70000, 0), (1, BIG, 0),
                                        (3, BIG, 0), (0, 70000, 2), (1, BIG + 70000, 0)]),
    ("one sequence forked 300 times (reference counts above 255)", 4, 2,
     [(0, 0, 3)] + [(2, 0, c) for c in range(1, 301)] + [(1, 7, 0), (1, 0, 0), (3, 0, 0)]
     + [(3, c, 0) for c in range(1, 301)]),
]
OOB_OPS = [
    ("allocate more than is free", 3, 2, [(0, 0, 3), (0, 1, 3), (0, 2, 2), (1, 0, 0), (1, 0, 0), (1, 2, 0)]),
    ("copy-on-write with no free block", 3, 4, [(0, 0, 6), (2, 0, 1), (0, 2, 4), (1, 1, 0), (3, 2, 0), (1, 1, 0)]),
    ("a new block with no free block", 2, 2, [(0, 0, 2), (0, 1, 2), (1, 0, 0), (3, 1, 0), (1, 0, 0), (1, 0, 0)]),
]


def decoder_ops(prompts: list[np.ndarray], max_new: int) -> np.ndarray:
    """The allocator calls a cache makes while the decoder's generate() runs: allocate(seq, 0) at a
    sequence's first token, then one append_slot per token (layer 0 writes first). A warm-up sequence
    is allocated and freed first, so the free list no longer hands out blocks in increasing order."""
    ops, seen = [(0, 1000, 3), (3, 1000, 0)], set()
    lens = [len(p) for p in prompts]
    for t in range(max(lens) + max_new - 1):
        for i in range(len(prompts)):
            if t < lens[i] + max_new - 1:
                if i not in seen:
                    ops.append((0, i, 0))
                    seen.add(i)
                ops.append((1, i, 0))
    return np.array(ops, dtype=np.int64)


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (N, B, steps) in enumerate([(8, 1, 120), (10, 2, 150), (12, 3, 150), (9, 4, 200), (16, 8, 150), (6, 5, 150)]):
        _add_random(p, f"r{i}", N, B, steps, random_ops(rng, N, B, steps), "random trace")
    for i, (label, N, B, ops) in enumerate(COW_OPS):
        p.add(Case(id=f"c{i}", fn="replay", label=f"{label} ({N} blocks of {B})", mode="call", timeout=5,
                   args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": "cow"}),
              shared={"ops": np.array(ops, dtype=np.int64)})
    for i, (label, N, B, ops) in enumerate(HAND_OPS):
        p.add(Case(id=f"b{i}", fn="replay", label=f"{label} ({N} blocks of {B})", mode="call", timeout=5,
                   args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": "hand"}),
              shared={"ops": np.array(ops, dtype=np.int64)})
    for i, (label, N, B, ops) in enumerate(OOB_OPS):
        p.add(Case(id=f"o{i}", fn="replay", label=f"{label} ({N} blocks of {B})", mode="call", timeout=5,
                   args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": "oob"}),
              shared={"ops": np.array(ops, dtype=np.int64)})
    for i, (B, lens) in enumerate([(4, (1, 6, 3)), (3, (5, 2)), (1, (4,)), (8, (9, 1, 12))]):
        prompts = [rng.integers(0, DECODER["vocab"], size=n) for n in lens]
        ops = decoder_ops(prompts, 6)
        N = max(3, len(lens) * -(-(max(lens) + 6) // B)) + 1  # one spare block
        p.add(Case(id=f"d{i}", fn="replay", label=f"decoder over your allocator, blocks of {B}, prompts {lens}",
                   mode="call", timeout=10, args=[{"value": N}, {"value": B}],
                   data={"N": N, "B": B, "kind": "decoder", "prompts": prompts, "seed": i}),
              shared={"ops": ops})
    for i in range(PROPERTY):  # every parameter drawn; forks twice as often, so copy-on-write is everywhere
        N, B, steps = int(rng.integers(2, 13)), int(rng.integers(1, 9)), int(rng.integers(60, 151))
        _add_random(p, f"q{i}", N, B, steps, random_ops(rng, N, B, steps, (0, 1, 1, 1, 2, 2, 3)),
                    "seeded random trace, forks twice as often")
    return p


def _add_random(p: Plan, cid: str, N: int, B: int, steps: int, ops: np.ndarray, what: str) -> None:
    p.add(Case(id=cid, fn="replay", label=f"{what}, {N} blocks of {B}, {steps} operations", mode="call", timeout=10,
               args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": "random"}), shared={"ops": ops})


Problem = tuple[str, str]  # (kind, message); kinds: tokens, refcounts, leak, sharing, oob, cow, unclear, error
_WALKS: dict[tuple, tuple[list[Problem], Problem | None]] = {}  # one walk per case and answer, read by every test


def walk(res: CaseResult) -> tuple[list[Problem], Problem | None]:
    """Replay the student's answers on the grader's storage: (problems the walk went on after, the problem
    that stopped it).

    The walk stops at a wrong answer that leaves the grader's picture of the pool unlike the student's, so
    later operations are not graded (one mistake loses its points once). A copy the rule does not ask for
    leaves the pool consistent: the storage copies the block, and the walk goes on."""
    rows = res.value(0, "replay table", shape=(len(res.shared("ops")), 5 + 2 * res.case.data["N"]))
    key = (res.case.id, rows.tobytes())
    if key not in _WALKS:
        if len(_WALKS) > 64:
            _WALKS.clear()
        soft: list[Problem] = []
        try:
            _WALKS[key] = soft, _walk(res, rows, soft)
        except (KeyError, IndexError):
            _WALKS[key] = soft, ("tokens", "an operation's table or slot does not match the sequences that exist")
    return _WALKS[key]


def _counts(tables: dict[int, list[int]], N: int) -> np.ndarray:
    counts = np.zeros(N, dtype=np.int64)
    for t in tables.values():
        np.add.at(counts, t, 1)
    return counts


def _append_cow(what: str, L: int, B: int, last: int | None, shared: bool, src: int, tbl: list[int],
                before: list[int], soft: list[Problem]) -> Problem | None:
    """Copy-on-write of one append_slot that returned: copy_from names the shared, partly filled last
    block exactly when there is one. A copy of a private block goes to ``soft`` (the walk goes on)."""
    if shared and src != last:
        return ("cow", f"{what}: the last block is shared and partly full, but copy_from is "
                       f"{'None' if src < 0 else 'not that block'}: copy it to a fresh block first (a write into a "
                       f"shared block changes a sibling)")
    if not shared and src >= 0:
        if L % B == 0 and len(tbl) != len(before) + 1:
            return ("cow", f"{what} copied the full last block instead of starting a new one: at a block boundary "
                           f"the token goes to a fresh block, with nothing to copy")
        soft.append(("cow", f"{what} copied a block although "
                            + ("the token starts a new block" if L % B == 0 else "no other sequence holds it")
                            + ": copy-on-write copies only a shared, partly filled last block (copy_from None "
                              "otherwise)"))
    return None


def _walk(res: CaseResult, rows: np.ndarray, soft: list[Problem]) -> Problem | None:
    N, B = res.case.data["N"], res.case.data["B"]
    ops = res.shared("ops")
    store = np.full((N, B), -1, dtype=np.int64)
    tables: dict[int, list[int]] = {}
    model: dict[int, list[int]] = {}
    counter, private = 0, ""  # private: what an append into a private, partly filled block did ("copy", "write")

    for i, ((kind, a, b), row) in enumerate(zip(ops.tolist(), rows.tolist())):
        if kind != 0 and a not in model:
            continue  # a sequence this allocator never held (its allocate raised after an accepted mistake)
        what = f"operation {i} ({KINDS[kind]}({a}{', ' + str(b) if kind in (0, 2) else ''}))"
        status, blk, off, src, nfree = row[:5]
        refs, tbl = row[5:5 + N], [x for x in row[5 + N:] if x >= 0]
        counts = _counts(tables, N)
        free_now = N - int((counts > 0).sum())
        shared, last = False, None
        if kind == 0:
            need = -(-b // B)
        elif kind == 1:
            L = len(model[a])
            last = tables[a][-1] if tables[a] else None
            shared = L % B != 0 and counts[last] > 1
            need = int(L % B == 0 or shared)
        else:
            need = 0
        if status == 2:
            return ("error", f"{what} raised an exception other than OutOfBlocks")
        unchanged = nfree == free_now and refs == counts.tolist() and ((b if kind == 2 else a) not in tables
                                                                         or tbl == tables[b if kind == 2 else a])
        if status == 0 and kind == 1:
            found = _append_cow(what, L, B, last, shared, src, tbl, tables[a], soft)
            if found:
                return found
            if L % B and not shared:
                private = private or ("copy" if src >= 0 else "write")
        if need > free_now:
            if status != 1:
                return ("oob", f"{what} needs {need} block(s) with {free_now} free but did not raise OutOfBlocks")
            if not unchanged:
                return ("oob", f"{what} raised OutOfBlocks but changed the allocator first (blocks taken or a table "
                            f"grew): check that everything fits before changing anything")
            continue
        if status == 1:
            if kind == 1 and L % B and private == "copy" and unchanged:
                continue  # the copy it makes of private blocks (said above) needs a block: the same mistake
            if kind == 1 and L % B and not private and unchanged:
                return ("unclear", f"{what} raised OutOfBlocks for a token that fits in its private last block")
            return ("oob", f"{what} raised OutOfBlocks with {free_now} free blocks and {need} needed")
        written: set[int] = set()
        if kind == 0:
            if len(tbl) != need:
                return ("tokens", f"{what}: the table has {len(tbl)} blocks for {b} tokens of {B}")
            if set(tbl) & {x for t in tables.values() for x in t}:
                return ("tokens", f"{what} handed out a block another sequence still holds")
            tables[a], model[a] = tbl, []
            for pos in range(b):
                counter += 1
                store[tbl[pos // B], pos % B] = counter
                model[a].append(counter)
            written = set(tbl)
        elif kind == 1:
            counter += 1
            if src >= 0:
                if not 0 <= src < N or not 0 <= blk < N:
                    return ("tokens", f"{what} returned block {blk} / copy_from {src} outside 0..{N - 1}")
                store[blk] = store[src]
            if 0 <= blk < N and 0 <= off < B:
                store[blk, off] = counter
            else:
                return ("tokens", f"{what} returned slot {off} of block {blk}, outside the pool")
            tables[a] = tbl
            model[a].append(counter)
            written = {blk}
        elif kind == 2:
            if tbl != tables[a]:
                return ("sharing", f"{what}: the child's table is not the parent's; a fork shares every block "
                                f"(reference count + 1) and takes none")
            tables[b], model[b] = tbl, list(model[a])
        else:
            del tables[a], model[a]
        counts = _counts(tables, N)
        if nfree != N - int((counts > 0).sum()):
            return ("leak", f"after {what} num_free() is {nfree}, but {N - int((counts > 0).sum())} blocks are held by "
                         f"no sequence (a block leaked, or a block still held was put back on the free list)")
        if refs != counts.tolist():
            if kind == 3:
                return ("leak", f"after {what} the reference counts of its blocks are not one lower each: free gives "
                                f"back one count per block (a block whose count never reaches 0 leaks)")
            return ("refcounts", f"after {what} the reference counts differ from the number of tables holding "
                              f"each block")
        for s in model:  # the sequences whose tokens this operation could change
            t = tables[s]
            if s not in (a, b) and not written.intersection(t):
                continue
            toks = model[s]
            got = [int(store[t[p // B], p % B]) if p // B < len(t) else -2 for p in range(len(toks))]
            if got != toks:
                bad = sum(x != y for x, y in zip(got, toks))
                return ("tokens", f"after {what}, sequence {s} reads {bad} of its {len(toks)} tokens wrong through its "
                               f"table" + (" (a write into a shared block changed a sibling)" if s != a else ""))
    return None


NAMES = {"tokens": "tokens", "refcounts": "refcounts", "leak": "no_leak", "sharing": "sharing", "oob": "out_of_blocks",
         "cow": "copy_on_write", "unclear": "copy_on_write or out_of_blocks"}


def _grade(keys: tuple[str, ...], cow_case_keys: tuple[str, ...] = ()):
    """A test of the problem kinds ``keys`` (and ``cow_case_keys`` on the hand-built copy-on-write traces)."""
    def check(res: CaseResult):
        soft, stop = walk(res)
        mine = keys + (cow_case_keys if res.case.data["kind"] == "cow" else ())
        for kind, msg in soft + ([stop] if stop else []):
            if kind in mine or kind == "error":
                raise Fail(msg)
        if stop:
            raise NotGraded(f"graded once an earlier operation is right (the {NAMES[stop[0]]} test says what is wrong)")
        return 1.0, ""
    return check


class StudentCache:
    """The decoder's cache whose slots come from the student's answers, in the order generate() asks."""

    def __init__(self, rows: np.ndarray, ops: np.ndarray, N: int, B: int, d: int, layers: int):
        self.rows, self.ops, self.i, self.N, self.B = rows, ops, 2, N, B  # rows 0-1: the warm-up
        self.k = np.zeros((layers, N, B, d))
        self.v = np.zeros((layers, N, B, d))
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}

    def _next(self) -> list[int]:
        row = self.rows[self.i].tolist()
        kind, a, _ = self.ops[self.i].tolist()
        self.i += 1
        if row[0] != 0:
            raise Fail(f"operation {self.i - 1} ({KINDS[kind]}) failed while the decoder ran with blocks to spare")
        self.tables[a] = [x for x in row[5 + self.N:] if x >= 0]
        return row

    def write(self, layer, seq, pos, k, v):
        if layer == 0:
            if seq not in self.lengths:
                self._next()
                self.lengths[seq] = 0
            _, blk, off, src = self._next()[:4]
            if src >= 0:
                self.k[:, blk], self.v[:, blk] = self.k[:, src], self.v[:, src]
            self.lengths[seq] += 1
        t = self.tables[seq]
        if pos // self.B >= len(t):
            raise Fail(f"sequence {seq}'s table has {len(t)} blocks at token {pos} (blocks of {self.B})")
        self.k[layer, t[pos // self.B], pos % self.B] = k
        self.v[layer, t[pos // self.B], pos % self.B] = v

    def read(self, layer, seq, length):
        t = self.tables[seq][:-(-length // self.B)]
        d = self.k.shape[-1]
        return self.k[layer, t].reshape(-1, d)[:length], self.v[layer, t].reshape(-1, d)[:length]


def decoder(res: CaseResult):
    N, B, prompts = res.case.data["N"], res.case.data["B"], res.case.data["prompts"]
    ops = res.shared("ops")
    rows = res.value(0, "replay table", shape=(len(ops), 5 + 2 * N))
    params = decoder_init(**DECODER, seed=res.case.data["seed"])
    if rows[0, 0] != 0 or rows[1, 0] != 0:
        raise Fail("allocating and freeing a first sequence on an empty pool failed")
    cache = StudentCache(rows, ops, N, B, DECODER["d_model"], DECODER["n_layers"])
    try:
        got = generate(params, prompts, 6, cache=cache)
    except (IndexError, ValueError) as exc:
        raise Fail(f"the decoder could not run over your tables ({type(exc).__name__}): a table points outside "
                   f"the pool or is shorter than the sequence") from None
    want = [reference_generate(params, p, 6) for p in prompts]
    wrong = sum(g != w for g, w in zip(got, want))
    if wrong:
        raise Fail(f"{wrong} of {len(prompts)} sequences generated other tokens than greedy decoding without a cache: "
                   f"the decoder read keys and values from the wrong slots")
    return 1.0, ""


TESTS = [
    Test("tokens", "every sequence reads back exactly the tokens written to it, after every operation of random traces",
         select=lambda c: c.data["kind"] in ("random", "oob", "hand"), check=_grade(("tokens",))),
    Test("refcounts", "reference counts equal the number of block tables holding each block",
         select=lambda c: c.data["kind"] in ("random", "cow", "oob", "hand"), check=_grade(("refcounts",))),
    Test("no_leak", "num_free() counts exactly the blocks no sequence holds: none leaked, none freed twice",
         select=lambda c: c.data["kind"] in ("random", "cow", "oob", "hand"), check=_grade(("leak",))),
    Test("copy_on_write", "a write after a fork copies the shared last block and leaves the sibling's tokens alone; "
         "a block no other sequence holds is never copied", select=lambda c: c.data["kind"] in ("random", "cow", "oob",
                                                                                               "hand"),
         check=_grade(("cow",), ("tokens",))),
    Test("sharing", "fork shares every block of the parent and takes none (random and hand-built traces)",
         select=lambda c: c.data["kind"] in ("random", "cow", "hand"), check=_grade(("sharing",))),
    Test("out_of_blocks", "OutOfBlocks exactly when the pool is too small, and nothing changed",
         select=lambda c: c.data["kind"] in ("random", "cow", "oob", "hand"), check=_grade(("oob",))),
    Test("decoder", "the decoder over your allocator generates the greedy reference tokens",
         select=lambda c: c.data["kind"] == "decoder", check=decoder),
]
