"""Lab 8: the deterministic sharded sampler. The grader calls shard_indices one rank at a time in its own
order, and runs rank_epochs on K sandboxed processes holding only their rank; it checks the epoch
(exactly once plus the padding), the lab's rule index for index, resume, determinism, reshuffling and
that no rank sends a byte. Cases include K > 2n (the padding repeats the order more than once), n beyond
2**15 and 2**16 (an int16 or uint16 index wraps) and random cases drawn from the plan's seeded rng, all graded
against the library's rule."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

UNIMPORTABLE = ("scaleoutai.data.sampler", "scaleoutai.data.storage")  # the course's answer

# rank_epochs: (K, n, seed, epochs, drop_last, backend); several epochs per case, one repeated
SPMD = [(1, 60, 3, [0, 1, 0], False, "sim"), (2, 23, 1, [0, 1, 0], False, "sim"), (3, 23, 5, [2, 3, 2], True, "sim"),
        (3, 30, 2, [0, 1, 0], False, "sim"), (4, 37, 0, [1, 2, 1], True, "sim"), (5, 41, 9, [0, 4, 0], False, "sim"),
        (6, 60, 4, [0, 1, 0], False, "sim"), (7, 10, 8, [5, 6, 5, 7], False, "sim"), (8, 45, 6, [0, 1, 0], True, "sim"),
        (9, 5, 2, [0, 1, 2, 1], False, "sim"), (9, 100, 3, [3, 4, 3], False, "sim"),
        (8, 3, 1, [0, 1, 2, 0], True, "sim"), (5, 2, 7, [1, 2, 1], False, "sim"),  # K > 2n: pads 2.5 epochs
        (3, 70_000, 4, [0, 1, 0], False, "sim"),  # indices beyond 2**16: an int16 or uint16 wraps
        (2, 31, 7, [0, 1, 0], False, "process")]
# shard_indices: (n, K, rank, epoch, seed, drop_last, start)
CALLS = [(10, 1, 0, 0, 0, False, 0), (10, 3, 2, 0, 4, False, 0), (10, 3, 1, 2, 4, True, 0),
         (23, 5, 4, 1, 7, False, 0), (23, 5, 0, 3, 7, True, 0), (7, 9, 8, 0, 1, False, 0), (7, 9, 3, 2, 1, False, 0),
         (7, 9, 6, 1, 1, True, 0), (100, 8, 5, 6, 11, False, 0), (99, 4, 3, 0, 2, False, 0), (64, 2, 1, 9, 3, True, 0),
         (3, 8, 6, 0, 2, False, 0), (2, 7, 5, 1, 3, False, 0), (1, 4, 3, 0, 0, False, 0),  # K > 2n: wraps again, again
         (40_000, 3, 1, 0, 5, False, 0), (70_000, 6, 5, 2, 9, True, 0)]  # beyond 2**15 and 2**16
RESUME = [(50, 3, 1, 0, 5, False, 4), (50, 3, 2, 3, 5, True, 10), (23, 5, 4, 2, 1, False, 1),
          (100, 8, 0, 1, 2, False, 12), (7, 3, 2, 4, 0, False, 3), (40, 4, 1, 7, 3, False, 9),
          (10, 3, 0, 0, 1, True, 3), (3, 8, 7, 1, 2, False, 1),  # start = the list's length: nothing left
          (40_000, 3, 2, 1, 4, False, 13_000)]
RANDOM_SPMD, RANDOM_CALLS = 3, 8  # property cases: random K, n, epochs, seed, drop_last, start from the plan's rng
WIDE = 1 << 15  # n above this: an int16 index wraps


def _ref(n: int, K: int, rank: int, epoch: int, seed: int, drop_last: bool, start: int = 0) -> np.ndarray:
    """The lab's rule is the library's sampler with NumPy's permutation (the grader may import it; the
    student may not)."""
    from scaleoutai.data.sampler import shard_indices

    return shard_indices(n, K, rank, epoch, seed, shuffle=True, drop_last=drop_last, start=start)


def _random_spmd(rng: np.random.Generator) -> tuple:
    n, K = int(rng.integers(1, 61)), int(rng.integers(1, 7))
    e = [int(x) for x in rng.choice(12, size=2, replace=False)]
    return K, n, int(rng.integers(0, 1000)), [e[0], e[1], e[0]], bool(rng.integers(2)), "sim"


def _random_call(rng: np.random.Generator) -> tuple:
    n, K = int(rng.integers(1, 300)), int(rng.integers(1, 13))
    rank, drop = int(rng.integers(K)), bool(rng.integers(2))
    length = n // K if drop else -(-n // K)
    start = int(rng.integers(1, length + 1)) if length and rng.random() < 0.5 else 0
    return n, K, rank, int(rng.integers(0, 20)), int(rng.integers(0, 1000)), drop, start


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    spmd = SPMD + [_random_spmd(rng) for _ in range(RANDOM_SPMD)]
    calls = CALLS + RESUME + [_random_call(rng) for _ in range(RANDOM_CALLS)]
    for i, (K, n, seed, epochs, drop, backend) in enumerate(spmd):
        where = "simulator" if backend == "sim" else "2 real processes"
        why = ", more ranks than samples" if K > n else ""
        case = Case(id=f"e{i:02d}", fn="rank_epochs", world_size=K, backend=backend,
                    label=f"rank_epochs K={K}, n={n}, epochs {epochs}, drop_last={drop}{why}, {where}",
                    timeout=30 if backend == "process" else 10,
                    data={"n": n, "seed": seed, "epochs": epochs, "drop_last": drop})
        p.add_in_order(case, [("=", n), ("=", seed), ("=", epochs), ("=", drop)])
    for i, args in enumerate(calls):
        n, K, rank, epoch, seed, drop, start = args
        label = f"shard_indices(n={n}, K={K}, rank={rank}, epoch={epoch}, seed={seed}, drop_last={drop}, start={start})"
        case = Case(id=f"c{i:02d}", fn="shard_indices", mode="call", label=label, timeout=5, data={"args": args})
        p.add_in_order(case, [("=", a) for a in args])
    return p


def _ints(res: CaseResult, r: int, what: str, ndim: int, int64: bool = False) -> np.ndarray:
    """Rank r's integer result as int64; ``int64``: the dtype must be int64 itself (shard_indices' contract;
    rank_epochs is graded on its values, so a narrow type there costs only the cases whose indices it wraps)."""
    arr = res.value(r, what)
    if arr.dtype.kind not in "iu":
        raise Fail(f"rank {r}'s {what} has dtype {arr.dtype}; return integer indices (int64)")
    if int64 and arr.dtype != np.int64:
        raise Fail(f"rank {r}'s {what} has dtype {arr.dtype}; return int64 indices, as the lab's rule says (an "
                   f"int64 array holds any index; a narrower type caps n)")
    if arr.ndim != ndim:
        raise Fail(f"rank {r}'s {what} has {arr.ndim} dimensions, expected {ndim}")
    return arr.astype(np.int64)


def _narrow(n: int) -> str:
    """The hint for an index outside 0..n-1 when n is beyond what a narrow integer type holds."""
    if n <= WIDE:
        return ""
    return f" (an integer type too narrow for n={n}? int16 holds up to {WIDE - 1}, uint16 up to {2 * WIDE - 1})"


def _rows(res: CaseResult) -> list[np.ndarray]:
    d, K = res.case.data, res.case.world_size
    rows = [_ints(res, r, "rank_epochs result", 2) for r in range(K)]
    for r, a in enumerate(rows):
        if a.shape[0] != len(d["epochs"]):
            raise Fail(f"rank {r} returned {a.shape[0]} rows for {len(d['epochs'])} epochs; one row per epoch")
    return rows


def _epoch_once(res: CaseResult) -> None:
    d, K = res.case.data, res.case.world_size
    n, drop = d["n"], d["drop_last"]
    rows = _rows(res)
    want = n // K if drop else -(-n // K)
    lengths = sorted({a.shape[1] for a in rows})
    if lengths != [want]:
        again = " (with K > n the padding repeats the order again and again)" if K > n and not drop else ""
        raise Fail(f"the ranks read {lengths} samples each; every rank must read {'floor' if drop else 'ceil'}(n/K)"
                   f" = {want} (equal counts, or one rank waits forever in the next all-reduce){again}")
    for i, e in enumerate(d["epochs"]):
        joined = np.concatenate([a[i] for a in rows])
        if joined.size and (joined.min() < 0 or joined.max() >= n):
            raise Fail(f"epoch {e}: an index outside 0..{n - 1}{_narrow(n)}")
        counts = np.bincount(joined, minlength=n)
        if drop:
            if counts.max(initial=0) > 1:
                raise Fail(f"epoch {e}: {int((counts > 1).sum())} samples are read more than once with "
                           f"drop_last=True; drop the tail of the order, never pad{_narrow(n)}")
            continue
        missing = int((counts == 0).sum())
        if missing:
            raise Fail(f"epoch {e}: {missing} of the {n} samples are read by no rank; with drop_last=False pad "
                       f"the order by repeating it from its start, never drop{_narrow(n)}")
        q = K * want // n
        if counts.min() < q or counts.max() > q + 1:
            raise Fail(f"epoch {e}: some sample is read {int(counts.max())} times and another {int(counts.min())}; "
                       f"padding repeats the epoch's order from its start, so counts differ by at most one")


def exactly_once(res: CaseResult):
    _epoch_once(res)
    return 1.0, ""


def deterministic(res: CaseResult):
    graded_after(lambda: _epoch_once(res), "the epoch")
    d, rows = res.case.data, _rows(res)
    for i, e in enumerate(d["epochs"]):
        for j in range(i):
            if d["epochs"][j] == e:
                bad = [r for r, a in enumerate(rows) if not np.array_equal(a[i], a[j])]
                if bad:
                    raise Fail(f"rank {bad[0]} returned two different lists for epoch {e} in one run: the order "
                               f"must come from seed + epoch only (an unseeded random generator, or state kept "
                               f"between calls?)")
    return 1.0, ""


def reshuffled(res: CaseResult):
    graded_after(lambda: _epoch_once(res), "the epoch")
    d, rows, K = res.case.data, _rows(res), res.case.world_size
    epochs = d["epochs"]
    for i, e in enumerate(epochs):
        order = np.empty(K * rows[0].shape[1], dtype=np.int64)
        for r in range(K):
            order[r::K] = rows[r][i]
        if np.array_equal(order[:d["n"]], np.arange(min(d["n"], order.size))):
            raise Fail(f"epoch {e}: the ranks read the samples in the order 0, 1, 2, ...: shuffle with the "
                       f"permutation of seed + epoch")
        for j in range(i):
            if epochs[j] != e and all(np.array_equal(a[i], a[j]) for a in rows):
                raise Fail(f"epochs {epochs[j]} and {e} have the same order on every rank: draw the permutation "
                           f"from seed + epoch, not from the seed alone")
    return 1.0, ""


def no_messages(res: CaseResult):
    graded_after(lambda: _epoch_once(res), "the epoch")
    for r in range(res.case.world_size):
        st = res.stats(r)
        if st["messages_sent"] or st["bytes_sent"]:
            raise Fail(f"rank {r} sent {st['messages_sent']} messages ({st['bytes_sent']} bytes): every rank can "
                       f"compute its own indices from (n, K, rank, epoch, seed), so a sampler needs no message")
    return 1.0, ""


def _diagnose(got: np.ndarray, args: tuple) -> str:
    n, K, rank, epoch, seed, drop, start = args
    want = _ref(*args)
    perm = np.random.default_rng(seed + epoch).permutation(n)
    total = K * (n // K if drop else -(-n // K))
    if not drop and total > 2 * n:
        once = np.concatenate([perm, perm[:total - n]])
        if np.array_equal(got, once[rank::K][start:]):
            return (f"the padding repeats the order only once: with K={K} > n={n} repeat it from its start again and "
                    f"again until it holds K*ceil(n/K) = {total} entries")
    if got.size and (got.min() < 0 or got.max() >= n):
        return f"{int(((got < 0) | (got >= n)).sum())} indices outside 0..{n - 1}{_narrow(n)}"
    if got.shape != want.shape:
        return f"returned {got.size} indices, expected {want.size}"
    if np.array_equal(got, _ref(n, K, rank, 0, seed, drop, start)) and epoch:
        return "the same list as epoch 0: the permutation must come from seed + epoch"
    order = np.resize(np.arange(n), K * -(-n // K)) if not drop else np.arange(K * (n // K))
    if np.array_equal(got, order[rank::K][start:]):
        return "the indices are not shuffled: start from the permutation of seed + epoch"
    full = perm[:total] if drop else np.resize(perm, total)
    per = total // K
    if np.array_equal(got, full[rank * per:(rank + 1) * per][start:]):
        return "a contiguous block of the order: rank r takes order[r::K], every K-th entry (interleaved)"
    read = max(0, (n - rank + K - 1) // K - start)  # entries of this rank's list before the padding begins
    if not drop and np.array_equal(got[:read], want[:read]):
        return "the padded entries are wrong: pad by repeating the epoch's order from its start"
    return f"{int((got != want).sum())} of the {want.size} indices differ from the lab's rule (steps 1-3)"


def spec(res: CaseResult):
    args = tuple(res.case.data["args"])
    got = _ints(res, 0, "indices", 1, int64=True)
    if not np.array_equal(got, _ref(*args)):
        raise Fail(_diagnose(got, args))
    return 1.0, ""


def resume(res: CaseResult):
    args = tuple(res.case.data["args"])
    start = args[-1]
    got, full = _ints(res, 0, "indices", 1, int64=True), _ref(*args[:-1], 0)
    if np.array_equal(got, full[start:]):
        return 1.0, ""
    if np.array_equal(got, full):
        raise Fail(f"start={start} returned the whole list: resume must skip the {start} samples already read")
    for off in (-1, 1):
        if 0 <= start + off and np.array_equal(got, full[start + off:]):
            raise Fail(f"start={start} resumed one sample {'early' if off < 0 else 'late'} (off by one): "
                       f"{'a sample is read twice' if off < 0 else 'a sample is skipped'}")
    raise Fail(f"start={start}: not the last {max(0, full.size - start)} entries of this rank's list "
               f"({_diagnose(got, args)})")


TESTS = [
    Test("exactly_once", "rank_epochs: the K ranks read the whole epoch, equal counts, padding or dropping as "
         "stated (K = 1-9, K > n, simulator and 2 processes)", select=lambda c: c.mode == "spmd", check=exactly_once),
    Test("spec", "shard_indices follows the lab's rule index for index (permutation, padding, r::K)",
         select=lambda c: c.mode == "call" and c.data["args"][-1] == 0, check=spec),
    Test("resume", "shard_indices with start=i returns exactly the rest of the rank's epoch",
         select=lambda c: c.mode == "call" and c.data["args"][-1] > 0, check=resume),
    Test("deterministic", "the same epoch gives the same lists every time it is asked for",
         select=lambda c: c.mode == "spmd" and c.backend == "sim", check=deterministic),
    Test("reshuffled", "the order is shuffled and differs from epoch to epoch",
         select=lambda c: c.mode == "spmd" and c.backend == "sim" and c.data["n"] >= 20, check=reshuffled),
    Test("no_messages", "each rank computes its own indices: no rank sends a byte",
         select=lambda c: c.mode == "spmd" and c.backend == "sim" and c.world_size > 1, check=no_messages),
]
