"""Lab 6: a sort-based shuffle. Each rank holds only its split; the grader checks what comes back (every
pair once, or exact sums per key), the global order of ranks 0..K-1, the load bound N/K + 2N/s + 1 under
skew, and the messages and bytes each rank sends to each other rank (from the grader's trace)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after

# (K, n pairs, key kind, how the pairs are split, combine, s samples per rank). "heavy": one key holds half of
# the pairs; "big int": keys past 2**64 and values past 2**61 (sums past 2**63); "sorted": rank 0 holds the
# smallest keys; "sorted uneven": sorted and split 1:2:4:...; n = 0; K > n.
SIM = [(1, 30, "mixed", "even", None, 4), (2, 80, "str", "even", None, 8), (3, 90, "int", "one holds all", None, 12),
       (3, 150, "heavy", "even", None, 24), (4, 400, "heavy", "sorted", None, 32),
       (5, 150, "mixed", "one empty", None, 20), (5, 100, "one key", "uneven", None, 20),
       (6, 480, "int", "sorted uneven", None, 48), (7, 5, "str", "even", None, 8),
       (8, 320, "mixed", "uneven", None, 32),
       (3, 0, "str", "even", None, 4), (3, 80, "unicode", "even", None, 16), (7, 140, "big int", "uneven", None, 28),
       (4, 1200, "mixed", "even", None, 16), (5, 620, "str", "sorted uneven", None, 20),
       (1, 40, "few", "even", "sum", 4), (3, 900, "few", "even", "sum", 8), (5, 400, "heavy", "uneven", "sum", 10),
       (4, 160, "big int", "even", "sum", 8), (6, 60, "mixed", "one empty", "sum", 12), (8, 6, "int", "even", "sum", 8),
       (2, 0, "int", "even", "sum", 4)]
RANDOM = 3  # property cases: K, n, key kind, split, combine and s drawn from the plan's seeded rng
KINDS = ("str", "int", "mixed", "few", "heavy", "one key", "big int", "unicode")
SPLITS = ("even", "uneven", "one empty", "one holds all", "sorted", "sorted uneven")
PROCESS = [(2, 80, "heavy", "even", None, 8), (2, 120, "big int", "uneven", "sum", 8)]
UNIMPORTABLE = ("scaleoutai.data.mapreduce", "scaleoutai.data.mapreduce_tasks")  # the course's hash shuffle
RETURN_CAP = 4 << 20
BYTES_SLACK, PER_MESSAGE, PER_ENTRY = 1.5, 64 + envelope_bytes(1), 40  # data 1.5x its JSON; a sample entry L + 40 B
ASKS = ("the lab asks for a range-partitioned, sorted shuffle (rank r holds the keys between splitters t_r and "
        "t_r+1); a hash partition does not give that")


def order(key):
    return (type(key) is str, key)  # the lab's order: ints, then strs


def _pairs(rng: np.random.Generator, n: int, kind: str) -> list[tuple]:
    def key(z: int, j: int):
        if kind == "few":
            return ["k0", 5, "k1"][z % 3]
        if kind == "one key":
            return "same"
        if kind == "heavy" and j % 2 == 0:
            return "hot"
        if kind == "big int":
            return (-1) ** z * (2**70 + z * 7919) if j % 3 else 2**64 + z
        if kind == "unicode":
            return ["wörter", "ключ", "鍵", "naïve", "x"][z % 5] + str(z)
        return [f"w{z}", z * 7 - 40][{"str": 0, "int": 1}.get(kind, j % 2)]
    big = kind == "big int"
    return [(key(int(rng.zipf(1.4)) % 60, j), int(rng.integers(2**61, 2**62) if big else rng.integers(-5, 100)))
            for j in range(n)]


def _split(rng: np.random.Generator, pairs: list, K: int, how: str) -> list[list]:
    n = len(pairs)
    if how.startswith("sorted"):
        pairs = sorted(pairs, key=lambda p: (order(p[0]), p[1]))
    if how in ("even", "sorted"):
        cuts = [n * r // K for r in range(1, K)]
    elif how == "sorted uneven":
        cuts = [n * (2**r - 1) // (2**K - 1) for r in range(1, K)]
    elif how == "one empty":
        cuts = sorted([0] + [n * r // (K - 1) for r in range(1, K - 1)])
    elif how == "one holds all":
        return [[] for _ in range(K - 1)] + [pairs] if K > 1 else [pairs]
    else:
        cuts = sorted(int(c) for c in rng.integers(0, n + 1, size=K - 1))
    edges = [0, *cuts, n]
    return [pairs[edges[r]:edges[r + 1]] for r in range(K)]


def _encode(pairs: list) -> np.ndarray:
    return np.frombuffer(json.dumps([[k, v] for k, v in pairs]).encode(), dtype=np.uint8)


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    cases = [(spec, "sim", "") for spec in SIM] + [(spec, "process", "") for spec in PROCESS]
    for i in range(RANDOM):
        K = int(rng.integers(1, 8))
        spec = (K, int(rng.integers(0, 200)), str(rng.choice(KINDS)), str(rng.choice(SPLITS)) if K > 2 else "uneven",
                [None, "sum"][int(rng.integers(2))], int(rng.integers(1, 5)) * max(K, 2))
        cases.append((spec, "sim", f"random case {i + 1}: "))
    for i, ((K, n, kind, how, combine, s), backend, prefix) in enumerate(cases):
        splits = _split(rng, _pairs(rng, n, kind), K, how)
        where = "simulator" if backend == "sim" else "2 real processes"
        label = f"{prefix}K={K}, {n} {kind} pairs split {how}, combine={combine}, s={s}, {where}"
        case = Case(id=f"c{i:02d}", fn="run_sort_shuffle", label=label, world_size=K, backend=backend,
                    timeout=30 if backend == "process" else 10, data={"splits": splits, "combine": combine, "s": s})
        p.add_in_order(case, [("split", [_encode(sp) for sp in splits]), ("=", combine), ("=", s)])
    return p


def _returned(res: CaseResult, r: int) -> list[tuple]:
    arr = res.value(r, "pairs (encode_pairs of a list)", dtype=np.uint8)
    if arr.ndim != 1 or arr.nbytes > RETURN_CAP:
        raise Fail(f"rank {r} returned a uint8 array of shape {arr.shape}; return encode_pairs(your pairs)")
    try:
        raw = json.loads(arr.tobytes().decode("utf-8"))
        if not isinstance(raw, list):
            raise ValueError
        out = []
        for item in raw:
            if not (isinstance(item, list) and len(item) == 2 and all(type(x) in (int, str) for x in item)
                    and type(item[1]) is int):
                raise ValueError
            out.append((item[0], item[1]))
        return out
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        raise Fail(f"rank {r}'s return value is not encode_pairs of a list of (int or str key, int value) pairs") \
            from None


def _all(res: CaseResult) -> list[list[tuple]]:
    return [_returned(res, r) for r in range(res.case.world_size)]


def _want(res: CaseResult) -> list[tuple]:
    return [tuple(p) for s in res.case.data["splits"] for p in s]


def _sums(pairs) -> dict:
    out: dict = {}
    for k, v in pairs:
        out[k] = out.get(k, 0) + v
    return out


def _complete(res: CaseResult) -> None:
    """combine=None: every pair exactly once; combine="sum": every key once, with its exact sum."""
    outs = _all(res)
    if res.case.data["combine"] == "sum":
        return _combined(res, outs)
    want, got = Counter(_want(res)), Counter(p for out in outs for p in out)
    if got == want:
        return
    missing, extra = want - got, got - want
    twice = sum(n for pair, n in extra.items() if pair in want)
    invented = sum(n for pair, n in extra.items() if pair not in want)
    parts = [f"{sum(missing.values())} of the {sum(want.values())} pairs are on no rank"] if missing else []
    if twice:
        parts.append(f"{twice} pairs come back more than once (a pair must end on exactly one rank)")
    if invented:
        parts.append(f"{invented} pairs are in no rank's split")
    raise Fail("; ".join(parts))


def _combined(res: CaseResult, outs: list[list[tuple]]) -> None:
    want = _sums(_want(res))
    where: dict = {}
    for r, out in enumerate(outs):
        for k, _ in out:
            where.setdefault(k, []).append(r)
    twice = [k for k, rs in where.items() if len(rs) > 1]
    if twice:
        k = twice[0]
        if len(set(where[k])) == 1:
            raise Fail(f"{len(twice)} keys come back several times on one rank, e.g. a {type(k).__name__} key "
                       f"{len(where[k])} times on rank {where[k][0]}: with combine='sum' sum what you receive into one "
                       f"pair per key (merge the sorted runs, then add up adjacent pairs of one key)")
        raise Fail(f"{len(twice)} keys come back more than once, e.g. a {type(k).__name__} key on ranks "
                   f"{sorted(set(where[k]))[:4]}: with combine='sum' every key is one pair on one rank (route by the "
                   f"key against the splitters' keys, so a key equal to a splitter's goes left on every rank)")
    got = {k: v for out in outs for k, v in out}
    if set(got) != set(want):
        raise Fail(f"{len(set(want) - set(got))} keys are missing and {len(set(got) - set(want))} are in no split")
    wrong = [k for k in want if got[k] != want[k]]
    if wrong:
        raise Fail(f"{len(wrong)} of the {len(want)} sums are wrong (values are Python ints, sums past 2**63 "
                   f"included: no int64, no float)")


def complete(res: CaseResult):
    _complete(res)
    return 1.0, ""


def combined(res: CaseResult):
    _complete(res)
    return 1.0, ""


def _sorted(res: CaseResult) -> None:
    outs = [[order(k) for k, _ in out] for out in _all(res)]
    prev, prev_r = None, -1
    for r, keys in enumerate(outs):
        if keys and prev is not None and min(keys) < prev:
            raise Fail(f"rank {r} holds a key that comes before a key of rank {prev_r}, so ranks 0..K-1 read in order "
                       f"are not sorted: {ASKS}")
        if keys:
            prev, prev_r = max(keys), r
    for r, keys in enumerate(outs):
        bad = next((i for i in range(1, len(keys)) if keys[i] < keys[i - 1]), None)
        if bad is not None:
            raise Fail(f"rank {r}'s pairs are not sorted by order(key) (position {bad} of {len(keys)}): merge the "
                       f"sorted runs you receive; {ASKS}")


def sorted_ranges(res: CaseResult):
    graded_after(lambda: _complete(res), "the shuffle's result")
    _sorted(res)
    return 1.0, ""


def balance(res: CaseResult):
    graded_after(lambda: _complete(res), "the shuffle's result")
    K, s, N = res.case.world_size, res.case.data["s"], len(_want(res))
    bound = N / K + 2 * N / s + 1
    loads = [len(out) for out in _all(res)]
    r = int(np.argmax(loads))
    if loads[r] > bound:
        raise Fail(f"rank {r} holds {loads[r]} of the {N} pairs, above N/K + 2N/s + 1 = {bound:.1f}: the lab asks "
                   f"for splitters from every rank's weighted regular sample, and a hot key split across consecutive "
                   f"ranks (ties broken by (rank, position)); hashing, one rank's sample or an unweighted sample does not")
    return 1.0, ""


def correct_process(res: CaseResult):
    _complete(res)
    _sorted(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """From the grader's trace: r sends d at most 2 messages, the data about 1.5x the (combined) pairs of r in
    d's key range, plus a sample of at most s + K entries."""
    K, splits, s = res.case.world_size, res.case.data["splits"], res.case.data["s"]
    graded_after(lambda: _complete(res), "the shuffle's result")
    outs = _all(res)
    ranges = [(min(order(k) for k, _ in out), max(order(k) for k, _ in out)) if out else None for out in outs]
    L = max(len(json.dumps(k)) for sp in splits for k, _ in sp)
    sends = [e for e in res.trace if e.kind == "send"]
    for r in range(K):
        mine = list(_sums(splits[r]).items()) if res.case.data["combine"] == "sum" else splits[r]
        for d in range(K):
            if d == r:
                continue
            msgs = [e for e in sends if e.rank == r and e.peer == d]
            if len(msgs) > 2:
                raise Fail(f"rank {r} sent {len(msgs)} messages to rank {d}; a sort shuffle sends each rank one sample "
                           f"and one message of data")
            for_d = [p for p in mine if ranges[d] and ranges[d][0] <= order(p[0]) <= ranges[d][1]]
            bound = BYTES_SLACK * _encode(for_d).nbytes + (s + K) * (L + PER_ENTRY) + PER_MESSAGE * max(1, len(msgs))
            sent = sum(e.nbytes for e in msgs)
            if sent > bound:
                what = " after combining" if res.case.data["combine"] == "sum" else ""
                raise Fail(f"rank {r} sent rank {d} {sent} B, but had only {len(for_d)} pairs{what} in rank {d}'s key "
                           f"range ({_encode(for_d).nbytes} B as JSON) and a sample of at most s entries: combine before "
                           f"the exchange, sample s entries (not every key), send each rank only its range, directly")
    return 1.0, ""


def _sim(c: Case) -> bool:
    return c.backend == "sim"


def _has_pairs(c: Case) -> bool:
    return any(c.data["splits"])


TESTS = [
    Test("complete", "every pair comes back exactly once (K = 1-8, K > n, empty and uneven splits, big ints, "
         "non-ASCII keys)", select=lambda c: _sim(c) and c.data["combine"] is None, check=complete),
    Test("sorted", "ranks 0..K-1 hold increasing key ranges, each sorted (order: ints, then strs)",
         select=lambda c: _sim(c) and _has_pairs(c), check=sorted_ranges),
    Test("balance", "no rank holds more than N/K + 2N/s + 1 pairs (a key with half the pairs, one key, sorted and "
         "1:2:4 splits)", select=lambda c: _sim(c) and _has_pairs(c) and c.data["combine"] is None, check=balance),
    Test("combine", "combine='sum': every key once, on one rank, with its exact sum (past 2**63)",
         select=lambda c: _sim(c) and c.data["combine"] == "sum", check=combined),
    Test("correct_process", "the shuffle is complete and sorted on 2 real processes",
         select=lambda c: c.backend == "process", check=correct_process),
    Test("traffic", "one sample and one data message from each rank to each rank, the data only the pairs of the "
         "receiver's range, combined (the grader's trace)", select=lambda c: _sim(c) and c.world_size > 1 and _has_pairs(c),
         check=traffic),
]
