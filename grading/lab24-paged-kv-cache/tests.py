"""Lab 24: a paged KV cache with prefix caching and LRU eviction, checked through the grader's own storage."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, NotGraded, Plan, Test
from scaleoutai.serving.decoder import decoder_init, generate, reference_generate

UNIMPORTABLE = ("scaleoutai.serving",)  # the chapter's allocator (serving.paged_cache) and its prefix sharing

KINDS = {0: "admit", 1: "append", 2: "fork", 3: "free"}
BEYOND = ("the lab asks to keep a freed sequence's full blocks cached under their prefix and reuse them "
          "until evicted, least recently used first; an allocator that forgets freed blocks does not")
DECODER = dict(vocab=32, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=48)
PROPERTY = 3


class Model:
    """The rules of the lab over the student's own block numbers: counts, registered prefixes, LRU order."""

    def __init__(self, N: int, B: int):
        self.N, self.B = N, B
        self.counts = [0] * N
        self.key = {}  # block -> prefix
        self.owner = {}  # prefix -> block
        self.lru: list[int] = []  # cached blocks, least recently used first
        self.tables: dict[int, list[int]] = {}
        self.toks: dict[int, list[int]] = {}

    def nfree(self) -> int:
        return self.N - sum(c > 0 for c in self.counts) - len(self.lru)

    def hits(self, toks: list[int]) -> list[int]:
        out: list[int] = []
        while (len(out) + 1) * self.B < len(toks) and tuple(toks[:(len(out) + 1) * self.B]) in self.owner:
            out.append(self.owner[tuple(toks[:(len(out) + 1) * self.B])])
        return out

    def evicted(self, k: int, pinned: list[int]) -> list[int]:
        """The cached blocks that k fresh blocks evict once ``pinned`` are used again."""
        return [b for b in self.lru if b not in pinned][:max(0, k - self.nfree())]

    def pick(self, k: int, pinned: list[int]) -> list[int]:
        ev = self.evicted(k, pinned)
        free = [b for b in range(self.N) if self.counts[b] == 0 and b not in self.key]
        return free[:k - len(ev)] + ev

    def use(self, b: int) -> None:
        if b in self.lru:
            self.lru.remove(b)
        self.counts[b] += 1

    def take(self, b: int) -> None:
        if b in self.key:
            self.lru.remove(b)
            del self.owner[self.key.pop(b)]
        self.counts[b] = 1

    def release(self, b: int) -> None:
        self.counts[b] -= 1
        if self.counts[b] == 0 and b in self.key:
            self.lru.append(b)

    def register(self, b: int, prefix: list[int]) -> None:
        if tuple(prefix) not in self.owner and b not in self.key:
            self.owner[tuple(prefix)], self.key[b] = b, tuple(prefix)

    def step(self, kind: int, a: int, b: int, prompt: list[int]) -> int:
        """Apply one operation choosing blocks by the rules: -1 OutOfBlocks, else the cached blocks it reused."""
        if kind == 0:
            hit = self.hits(prompt)
            need = -(-len(prompt) // self.B) - len(hit)
            idle = sum(self.counts[x] == 0 for x in hit)
            if need > self.nfree() + len(self.lru) - idle:
                return -1
            for x in hit:
                self.use(x)
            self.tables[a], self.toks[a] = hit + [self.take(x) or x for x in self.pick(need, hit)], list(prompt)
            for j in range(len(hit), len(prompt) // self.B):
                self.register(self.tables[a][j], prompt[:(j + 1) * self.B])
            return idle
        if kind == 1:
            tbl, L = self.tables[a], len(self.toks[a])
            if L % self.B == 0 or self.counts[tbl[-1]] > 1:
                if not self.nfree() + len(self.lru):
                    return -1
                x = self.pick(1, [])[0]
                self.take(x)
                if L % self.B:
                    self.release(tbl[-1])
                    tbl[-1] = x
                else:
                    tbl.append(x)
            self.toks[a].append(b)
            if (L + 1) % self.B == 0:
                self.register(tbl[-1], self.toks[a])
        elif kind == 2:
            for x in self.tables[a]:
                self.counts[x] += 1
            self.tables[b], self.toks[b] = list(self.tables[a]), list(self.toks[a])
        else:
            for x in reversed(self.tables.pop(a)):
                self.release(x)
            del self.toks[a]
        return 0


def flags(N: int, B: int, trace: tuple[np.ndarray, np.ndarray]) -> dict:
    """What a trace exercises under the rules: a freed (cached) block reused, a block cached at all."""
    m, used, out = Model(N, B), 0, {"cached_hit": False, "cached": False}
    for kind, a, b in trace[0].tolist():
        prompt = trace[1][used:used + b].tolist() if kind == 0 else []
        used += b if kind == 0 else 0
        if kind == 0 or a in m.tables:
            out["cached_hit"] |= m.step(kind, a, b, prompt) > 0
        out["cached"] |= bool(m.lru)
    return out


def random_ops(rng: np.random.Generator, N: int, B: int, steps: int, fork_w: int = 1):
    """A trace over a few system prompts, so prefixes come back after their sequences are freed, with a pool
    small enough that blocks are evicted and some operations must raise OutOfBlocks."""
    m, live, nxt, ops, toks = Model(N, B), [], 0, [], []
    systems = [list(rng.integers(0, 4, size=int(rng.integers(B, 3 * B + 1)))) for _ in range(3)]
    for _ in range(steps):
        kind = int(rng.choice([0, 0, 1, 1, 1] + [2] * fork_w + [3, 3])) if live else 0
        if live and m.nfree() + len(m.lru) < 2 and rng.random() < 0.6:
            kind = 3  # a full pool frees a sequence more often, so prefixes come back after their free
        a = nxt if kind == 0 else int(rng.choice(live))
        b = nxt if kind == 2 else int(rng.integers(0, 3))
        prompt = []
        if kind == 0:
            prompt = [int(t) for t in systems[int(rng.integers(3))][:int(rng.integers(0, 3 * B + 1))]]
            prompt += [int(t) for t in rng.integers(0, 3, size=int(rng.integers(0 if prompt else 1, B + 2)))]
            toks += prompt
            b = len(prompt)
        ops.append((kind, a, b if kind != 3 else 0))
        if m.step(kind, a, b, prompt) >= 0 and kind in (0, 2):
            live.append(nxt)
        if kind == 3:
            live.remove(a)
        nxt += kind in (0, 2)
    return np.array(ops, dtype=np.int64).reshape(-1, 3), np.array(toks, dtype=np.int64)


def hand(*steps) -> tuple[np.ndarray, np.ndarray]:
    """Operations written as ("a", seq, [tokens]), ("p", seq, token), ("f", parent, child), ("x", seq)."""
    ops, toks = [], []
    for st in steps:
        if st[0] == "a":
            ops.append((0, st[1], len(st[2])))
            toks += st[2]
        else:
            ops.append(({"p": 1, "f": 2, "x": 3}[st[0]], st[1], st[2] if len(st) > 2 else 0))
    return np.array(ops, dtype=np.int64).reshape(-1, 3), np.array(toks, dtype=np.int64)


BIG = 2 ** 40
HAND = [  # (label, N, B, trace)
    ("a freed prompt's full blocks are reused by the next request", 8, 2,
     hand(("a", 0, [1, 2, 3, 4, 5]), ("x", 0), ("a", 1, [1, 2, 3, 4, 9]), ("a", 2, [1, 2, 7]), ("a", 3, [1, 2, 3, 4]),
          ("x", 1), ("x", 2), ("x", 3), ("a", 4, [1, 2, 3, 4, 5, 6]))),
    ("a block's key is its whole prefix, not its own tokens", 8, 2,
     hand(("a", 0, [1, 2, 3, 4]), ("x", 0), ("a", 1, [9, 9, 3, 4, 5]), ("a", 2, [3, 4, 1]), ("a", 3, [1, 2, 3, 4, 1]))),
    ("blocks filled by append are registered and reused after free", 6, 3,
     hand(("a", 0, [5]), ("p", 0, 6), ("p", 0, 7), ("p", 0, 8), ("p", 0, 9), ("p", 0, 1), ("x", 0),
          ("a", 1, [5, 6, 7, 8, 9, 1, 2]), ("a", 2, [5, 6, 7, 8, 9, 2, 2]))),
    ("eviction takes free blocks first, then the least recently used cached block", 5, 2,
     hand(("a", 0, [1, 2, 3]), ("a", 1, [5, 6, 7]), ("x", 0), ("x", 1), ("a", 2, [8, 8, 8, 8, 8]), ("x", 2),
          ("a", 3, [5, 6, 1]), ("a", 4, [1, 2, 1]), ("a", 5, [8, 8, 8, 8, 1]))),
    ("free releases the last block first, so a sequence's tail is evicted first", 4, 2,
     hand(("a", 0, [1, 2, 3, 4, 5, 6]), ("x", 0), ("a", 1, [7, 7, 7]), ("x", 1), ("a", 2, [1, 2, 3, 4, 5, 6, 7]),
          ("x", 2), ("a", 3, [3, 3, 3, 3, 3]), ("a", 4, [1, 2, 3]))),
    ("a reused block leaves the eviction order and rejoins it at its next release", 4, 2,
     hand(("a", 0, [1, 2, 3]), ("a", 1, [4, 5, 6]), ("x", 0), ("x", 1), ("a", 2, [1, 2, 9]), ("x", 2),
          ("a", 3, [7, 7, 7, 7, 7]), ("a", 4, [1, 2, 1]))),
    ("fork, copy-on-write and a copy that fills its block", 6, 2,
     hand(("a", 0, [1, 2, 3]), ("f", 0, 1), ("p", 1, 4), ("p", 0, 4), ("p", 0, 5), ("x", 1), ("x", 0),
          ("a", 2, [1, 2, 3, 4, 5]), ("f", 2, 3), ("p", 3, 6), ("p", 2, 7))),
    ("a prompt of one block, an empty prompt and one token", 4, 3,
     hand(("a", 0, [1, 2, 3]), ("x", 0), ("a", 1, [1, 2, 3]), ("a", 2, []), ("p", 2, 1), ("p", 2, 2), ("p", 2, 3),
          ("a", 3, [1, 2, 3, 4]), ("a", 4, [9]))),
    ("sequence ids beyond 2^31", 5, 3, hand(("a", BIG, [1, 2, 3, 4]), ("f", BIG, BIG + 7), ("p", BIG + 7, 1),
                                           ("x", BIG), ("a", 70000, [1, 2, 3, 1]), ("p", BIG + 7, 2))),
    ("one sequence forked 300 times (reference counts above 255)", 4, 2,
     hand(("a", 0, [1, 2, 3]), *[("f", 0, c) for c in range(1, 301)], ("p", 7, 1), ("p", 0, 2), ("x", 0),
          *[("x", c) for c in range(1, 301)], ("a", 400, [1, 2, 3]))),
]
OOB = [
    ("allocate more than is free", 3, 2, hand(("a", 0, [1, 2, 3]), ("a", 1, [4, 5, 6]), ("a", 2, [4, 5]),
                                             ("p", 0, 4), ("p", 0, 5), ("p", 2, 1))),
    ("a reused cached block is not a fresh one", 3, 2,
     hand(("a", 0, [1, 2, 3, 4, 5]), ("x", 0), ("a", 1, [1, 2, 3, 4, 7, 8, 9]), ("a", 2, [1, 2, 3, 4, 7]),
          ("a", 3, [1, 2]))),
    ("a pool full of cached blocks still admits (by evicting)", 3, 2,
     hand(("a", 0, [1, 2, 3, 4, 5, 6]), ("x", 0), ("a", 1, [6, 6, 6, 6, 6, 6, 6]), ("a", 2, [6, 6, 6]), ("x", 2),
          ("a", 3, [6, 6, 6]))),
    ("copy-on-write with no block left", 3, 4, hand(("a", 0, [1, 2, 3, 4, 5, 6]), ("f", 0, 1), ("a", 2, [1, 2, 3, 4, 9]),
                                                   ("p", 1, 1), ("x", 2), ("p", 1, 1))),
]


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()

    def add(cid, label, N, B, trace, kind, timeout=10):
        p.add(Case(id=cid, fn="replay", label=f"{label} ({N} blocks of {B})", mode="call", timeout=timeout,
                   args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": kind, **flags(N, B, trace)}),
              shared={"ops": trace[0], "tokens": trace[1]})

    for i, (N, B, steps) in enumerate([(8, 1, 120), (10, 2, 150), (12, 3, 150), (9, 4, 200), (16, 8, 150), (6, 5, 150),
                                       (40, 2, 150)]):
        add(f"r{i}", f"random trace, {steps} operations", N, B, random_ops(rng, N, B, steps), "random")
    for i, (label, N, B, trace) in enumerate(HAND):
        add(f"h{i}", label, N, B, trace, "hand")
    for i, (label, N, B, trace) in enumerate(OOB):
        add(f"o{i}", label, N, B, trace, "oob")
    for i in range(PROPERTY):
        N, B, steps = int(rng.integers(3, 13)), int(rng.integers(1, 6)), int(rng.integers(60, 151))
        add(f"q{i}", f"seeded random trace, forks twice as often, {steps} operations", N, B,
            random_ops(rng, N, B, steps, 2), "random")
    for i, (B, sys_len, lens) in enumerate([(4, 9, (2, 3, 1)), (3, 7, (1, 4)), (2, 6, (3, 1, 2))]):
        system = list(rng.integers(0, DECODER["vocab"], size=sys_len))
        first = [np.array(system + [int(t) for t in rng.integers(0, DECODER["vocab"], size=2)])]
        second = [np.array(system + [j] + [int(t) for t in rng.integers(0, DECODER["vocab"], size=n - 1)])
                  for j, n in enumerate(lens)]
        params = decoder_init(**DECODER, seed=i)
        outs = [[reference_generate(params, q, 5) for q in batch] for batch in (first, second)]
        ops, toks = decoder_ops([first, second], outs)
        N = 3 + sum(-(-(len(q) + 5) // B) for q in first + second)
        p.add(Case(id=f"d{i}", fn="replay", label=f"decoder over your cache, blocks of {B}, a {sys_len}-token system "
                   f"prompt, then {len(lens)} requests with it", mode="call", timeout=10,
                   args=[{"value": N}, {"value": B}], data={"N": N, "B": B, "kind": "decoder", "batches": [first, second],
                                                            "outs": outs, "seed": i}),
              shared={"ops": ops, "tokens": toks})
    return p


def decoder_ops(batches, outs):
    """The cache operations generate() causes: per batch, admit(seq, prompt) at its first token and one
    append per generated token it feeds back; then the batch is freed. A warm-up sequence comes first."""
    ops, toks = [(0, 1000, 3), (3, 1000, 0)], [40, 41, 42]
    for k, (prompts, gen) in enumerate(zip(batches, outs)):
        seqs = [list(map(int, q)) + g for q, g in zip(prompts, gen)]
        for t in range(max(len(q) for q in prompts) + 4):
            for i, q in enumerate(prompts):
                if t == 0:
                    ops.append((0, 100 * k + i, len(q)))
                    toks += list(map(int, q))
                elif len(q) <= t < len(q) + 4:
                    ops.append((1, 100 * k + i, seqs[i][t]))
        ops += [(3, 100 * k + i, 0) for i in range(len(prompts))]
    return np.array(ops, dtype=np.int64), np.array(toks, dtype=np.int64)


Problem = tuple[str, str]  # (kind, message); kinds: tokens refcounts leak cow sharing oob hits lru error
_WALKS: dict[tuple, Problem | None] = {}  # one walk per case and answer, read by every test


def walk(res: CaseResult) -> Problem | None:
    """Replay the student's answers on the grader's storage and model; the first problem stops the walk (later
    operations are not graded: one mistake loses its points once)."""
    N, ops = res.case.data["N"], res.shared("ops")
    rows = res.value(0, "replay table", shape=(len(ops), 6 + 2 * N))
    key = (res.case.id, rows.tobytes())
    if key not in _WALKS:
        if len(_WALKS) > 64:
            _WALKS.clear()
        try:
            _WALKS[key] = _walk(N, res.case.data["B"], ops, res.shared("tokens").tolist(), rows)
        except (KeyError, IndexError, ValueError):
            _WALKS[key] = ("tokens", "an operation's table or slot does not match the sequences that exist")
    return _WALKS[key]


def _evictions(m: Model, fresh: list[int], k: int, pinned: list[int], what: str) -> Problem | None:
    want, got = m.evicted(k, pinned), [x for x in fresh if x in m.key]
    if sorted(got) == sorted(want):
        return None
    if len(got) > len(want):
        return ("lru", f"{what} evicted a cached block while free blocks were left: take free blocks first")
    return ("lru", f"{what} evicted a cached block other than the least recently used one (the one that "
                   f"became cached longest ago)")


def _walk(N: int, B: int, ops: np.ndarray, toks: list[int], rows: np.ndarray) -> Problem | None:
    m, store, ids, contents, used = Model(N, B), np.full((N, B), -1, dtype=np.int64), {}, {}, 0
    for i, ((kind, a, b), row) in enumerate(zip(ops.tolist(), rows.tolist())):
        prompt = toks[used:used + b] if kind == 0 else []
        used += len(prompt)
        if kind != 0 and a not in m.tables:
            continue  # a sequence whose admit rightly raised OutOfBlocks
        what = f"operation {i} ({KINDS[kind]}({a}{', ' + str(b) if kind in (1, 2) else ''}))"
        status, r1, off, src, nfree, ncached = row[:6]
        refs, tbl = row[6:6 + N], [x for x in row[6 + N:] if x >= 0]
        target, hit, need, spare, last, shared = (b if kind == 2 else a), [], 0, 0, None, False
        if kind == 0:
            hit = m.hits(prompt)
            need = -(-len(prompt) // B) - len(hit)
            spare = m.nfree() + len(m.lru) - sum(m.counts[x] == 0 for x in hit)
        elif kind == 1:
            L, last = len(m.toks[a]), m.tables[a][-1] if m.tables[a] else None
            shared = L % B != 0 and m.counts[last] > 1
            need, spare = int(L % B == 0 or shared), m.nfree() + len(m.lru)
        unchanged = (nfree == m.nfree() and ncached == len(m.lru) and refs == m.counts
                     and (target not in m.tables or tbl == m.tables[target]))
        if status == 2:
            return ("oob" if need > spare else "error", f"{what} raised an exception other than OutOfBlocks"
                    + (" where the pool is too small: raise OutOfBlocks before changing anything" if need > spare else ""))
        if kind == 0 and status == 0 and r1 != len(hit) * B:
            why = ("a block is reused only under the whole prefix up to its end (its keys and values depend on every "
                   "earlier token), and never the prompt's last token" if r1 > len(hit) * B else BEYOND
                   if any(m.counts[x] == 0 for x in hit) else "a prompt reuses every full block of its longest "
                   "registered prefix, also the blocks other sequences hold")
            return ("hits", f"{what} reused {'more' if r1 > len(hit) * B else 'fewer'} prompt tokens than the cached "
                            f"full blocks of its prefix cover: {why}")
        if kind == 1 and status == 0 and shared and src != last:
            return ("cow", f"{what}: the last block is shared and partly full, but copy_from is "
                           f"{'None' if src < 0 else 'not that block'}: copy it to a fresh block first (a write "
                           f"into a shared block changes a sibling)")
        if need > spare:
            if status != 1:
                return ("oob", f"{what} needs {need} fresh block(s) with {spare} free or evictable"
                        + (" (a cached block it reuses is no longer evictable)" if kind == 0 else "")
                        + " but did not raise OutOfBlocks")
            if not unchanged:
                return ("oob", f"{what} raised OutOfBlocks but changed the cache first: check that everything fits "
                               f"before changing anything")
            continue
        if status == 1:
            return ("oob", f"{what} raised OutOfBlocks with {spare} blocks free or evictable and {need} needed "
                           f"(a cached block can be evicted to make room)")
        written: set[int] = set()
        if kind == 0:
            if len(tbl) != len(hit) + need:
                return ("tokens", f"{what}: the table has {len(tbl)} blocks for {len(prompt)} tokens of {B}")
            if tbl[:len(hit)] != hit:
                return ("hits", f"{what} reused blocks that do not hold that prefix: reuse the block registered "
                                f"under the whole prefix up to the block's end")
            fresh = tbl[len(hit):]
            if len(set(fresh)) != len(fresh) or any(not 0 <= x < N or m.counts[x] > 0 or x in hit for x in fresh):
                return ("tokens", f"{what} handed out a block another sequence still holds")
            bad = _evictions(m, fresh, need, hit, what)
            if bad:
                return bad
            for x in hit:
                m.use(x)
            for x in fresh:
                m.take(x)
            m.tables[a], m.toks[a] = list(tbl), list(prompt)
            contents[a] = [ids.setdefault(tuple(prompt[:p + 1]), len(ids)) for p in range(len(prompt))]
            for p in range(len(hit) * B, len(prompt)):
                store[tbl[p // B], p % B] = contents[a][p]
            for j in range(len(hit), len(prompt) // B):
                m.register(tbl[j], prompt[:(j + 1) * B])
            written = set(fresh)
        elif kind == 1:
            blk, before = r1, m.tables[a]
            if not shared and src >= 0:
                return ("cow", f"{what} copied a block although " + ("the token starts a new block (a full last "
                               "block is never copied)" if L % B == 0 else "no other sequence holds it")
                        + ": copy-on-write copies only a shared, partly filled last block")
            want = before + [blk] if L % B == 0 else before[:-1] + [blk] if shared else before
            if tbl != want or off != L % B or (not need and blk != last):
                return ("tokens", f"{what} returned slot {off} of block {blk}, not the slot of position {L} of "
                                  f"the sequence in its table")
            if need:
                if not 0 <= blk < N or m.counts[blk] > 0:
                    return ("tokens", f"{what} handed out a block another sequence still holds")
                bad = _evictions(m, [blk], 1, [], what)
                if bad:
                    return bad
                m.take(blk)
                if shared:
                    store[blk] = store[last]
                    m.release(last)
                m.tables[a] = list(tbl)
            m.toks[a].append(b)
            contents[a].append(ids.setdefault(tuple(m.toks[a]), len(ids)))
            store[blk, L % B] = contents[a][-1]
            if (L + 1) % B == 0:
                m.register(blk, m.toks[a])
            written = {blk}
        elif kind == 2:
            if tbl != m.tables[a]:
                return ("sharing", f"{what}: the child's table is not the parent's; a fork shares every block "
                                   f"(reference count + 1) and takes none")
            for x in tbl:
                m.counts[x] += 1
            m.tables[b], m.toks[b], contents[b] = list(tbl), list(m.toks[a]), list(contents[a])
        else:
            for x in reversed(m.tables.pop(a)):
                m.release(x)
            del m.toks[a], contents[a]
        idle = N - sum(c > 0 for c in m.counts)
        if nfree + ncached != idle:
            return ("leak", f"after {what} num_free() + num_cached() is {nfree + ncached}, but {idle} blocks are held "
                            f"by no sequence (a block leaked, or a block still held was put back)")
        if refs != m.counts:
            if kind == 3:
                return ("leak", f"after {what} the reference counts of its blocks are not one lower each: free gives "
                                f"back one count per block")
            return ("refcounts", f"after {what} the reference counts differ from the number of tables holding each "
                                 f"block")
        if ncached != len(m.lru):
            return ("lru", f"after {what} num_cached() counts {'more' if ncached > len(m.lru) else 'fewer'} blocks "
                           f"than the registered full blocks no sequence holds: {BEYOND}")
        for s, want_c in contents.items():
            t = m.tables[s]
            if s not in (a, b) and not written.intersection(t):
                continue
            got = [int(store[t[p // B], p % B]) if p // B < len(t) else -2 for p in range(len(want_c))]
            if got != want_c:
                bad = sum(x != y for x, y in zip(got, want_c))
                return ("tokens", f"after {what}, sequence {s} reads {bad} of its {len(want_c)} positions wrong through "
                                  f"its table" + (" (a write changed another sequence's block)" if s != a else ""))
    return None


NAMES = {"tokens": "tokens", "refcounts": "refcounts", "leak": "no_leak", "cow": "copy_on_write",
         "sharing": "copy_on_write", "oob": "out_of_blocks", "hits": "prefix_hits", "lru": "lru_eviction"}


def _grade(*kinds: str):
    def check(res: CaseResult):
        stop = walk(res)
        if stop and (stop[0] in kinds or stop[0] == "error"):
            raise Fail(stop[1])
        if stop:
            raise NotGraded(f"graded once an earlier operation is right (the {NAMES[stop[0]]} test says what is wrong)")
        return 1.0, ""
    return check


class StudentCache:
    """The decoder's cache whose slots come from the student's answers, in the order generate() asks; a
    position the student's admit reused is read from the block, never written."""

    def __init__(self, rows: np.ndarray, ops: np.ndarray, N: int, B: int, d: int, layers: int):
        self.rows, self.ops, self.i, self.N, self.B = rows, ops, 2, N, B  # rows 0-1: the warm-up
        self.k, self.v = np.zeros((layers, N, B, d)), np.zeros((layers, N, B, d))
        self.tables, self.hits, self.plen, self.base = {}, {}, {}, 0

    def next(self) -> list[int]:
        row, (kind, a, _) = self.rows[self.i].tolist(), self.ops[self.i].tolist()
        self.i += 1
        if row[0] != 0:
            raise Fail(f"operation {self.i - 1} ({KINDS[kind]}) failed while the decoder ran with blocks to spare")
        if kind != 3:
            self.tables[a] = [x for x in row[6 + self.N:] if x >= 0]
        return row

    def write(self, layer, seq, pos, k, v):
        s = self.base + seq
        if layer == 0 and pos == 0:
            self.hits[s] = self.next()[1]
        elif layer == 0 and pos >= self.plen[s]:
            _, blk, _, src = self.next()[:4]
            if src >= 0:
                self.k[:, blk], self.v[:, blk] = self.k[:, src], self.v[:, src]
        if pos < self.hits[s]:
            return
        t = self.tables[s]
        if pos // self.B >= len(t):
            raise Fail(f"sequence {s}'s table has {len(t)} blocks at position {pos} (blocks of {self.B})")
        self.k[layer, t[pos // self.B], pos % self.B], self.v[layer, t[pos // self.B], pos % self.B] = k, v

    def read(self, layer, seq, length):
        t, d = self.tables[self.base + seq][:-(-length // self.B)], self.k.shape[-1]
        return self.k[layer, t].reshape(-1, d)[:length], self.v[layer, t].reshape(-1, d)[:length]


def decoder(res: CaseResult):
    N, B, batches, outs = (res.case.data[x] for x in ("N", "B", "batches", "outs"))
    ops = res.shared("ops")
    rows = res.value(0, "replay table", shape=(len(ops), 6 + 2 * N))
    if rows[0, 0] != 0 or rows[1, 0] != 0:
        raise Fail("admitting and freeing a first sequence on an empty pool failed")
    params = decoder_init(**DECODER, seed=res.case.data["seed"])
    cache = StudentCache(rows, ops, N, B, DECODER["d_model"], DECODER["n_layers"])
    first = [list(map(int, q)) + g[:4] for q, g in zip(batches[0], outs[0])]
    for k, (prompts, want) in enumerate(zip(batches, outs)):
        cache.base, cache.plen = 100 * k, {100 * k + i: len(q) for i, q in enumerate(prompts)}
        try:
            got = generate(params, prompts, 5, cache=cache)
        except (IndexError, ValueError) as exc:
            raise Fail(f"the decoder could not run over your tables ({type(exc).__name__}): a table points outside "
                       f"the pool or is shorter than the sequence") from None
        for i, q in enumerate(prompts):
            j = 0
            while k and (j + 1) * B < len(q) and any(s[:(j + 1) * B] == list(map(int, q[:(j + 1) * B])) for s in first):
                j += 1
            if cache.hits[100 * k + i] != j * B:
                raise Fail(f"request {i} of batch {k} reused {cache.hits[100 * k + i]} prompt tokens where the first "
                           f"batch left the blocks of {j * B} cached: {BEYOND}")
        wrong = sum(g != w for g, w in zip(got, want))
        if wrong:
            raise Fail(f"{wrong} of {len(prompts)} requests of batch {k} generated other tokens than greedy decoding "
                       f"without a cache: the decoder read keys and values from the wrong slots")
        for _ in prompts:
            cache.next()
    return 1.0, ""


def _walked(c) -> bool:
    return c.data["kind"] != "decoder"


TESTS = [
    Test("tokens", "every sequence reads back exactly its own contents through its table after every operation",
         select=_walked, check=_grade("tokens")),
    Test("refcounts", "reference counts equal the number of block tables holding each block",
         select=_walked, check=_grade("refcounts")),
    Test("no_leak", "num_free() + num_cached() counts exactly the blocks no sequence holds",
         select=_walked, check=_grade("leak")),
    Test("copy_on_write", "fork shares every block; a write copies a shared, partly filled last block and nothing else",
         select=_walked, check=_grade("cow", "sharing")),
    Test("out_of_blocks", "OutOfBlocks exactly when free and evictable blocks are too few, and nothing changed",
         select=_walked, check=_grade("oob")),
    Test("prefix_hits", "admit reuses exactly the cached full blocks of the longest registered prefix, also of "
         "freed sequences (traces where a freed prefix comes back)", select=lambda c: c.data.get("cached_hit"),
         check=_grade("hits")),
    Test("lru_eviction", "freed full blocks stay cached (num_cached); a fresh block comes from the free list, "
         "else the least recently used cached block", select=lambda c: c.data.get("cached"), check=_grade("lru")),
    Test("decoder", "the decoder over your cache: a second batch reuses the first batch's system prompt and "
         "generates the greedy reference tokens", select=lambda c: c.data["kind"] == "decoder", check=decoder),
]
