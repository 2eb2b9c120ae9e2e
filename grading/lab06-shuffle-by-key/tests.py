"""Lab 6: shuffle by key. Each rank holds only its split; the grader checks what comes back, where each
key lands (the blake2b partitioner of the lab, partition p on rank p mod K) and the bytes each rank
sends to each other rank (from the grader's trace)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

from scaleoutai.data.mapreduce import partition_of
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after

# (K, R, n pairs, key kind, how the pairs are split, backend). "big int": keys and values beyond 2**31 (and keys
# beyond 2**53), which no int32 or float64 carries exactly; "unicode": str keys outside ASCII; and no pairs at all.
SIM = [(1, 1, 30, "mixed", "even", "sim"), (2, 2, 80, "str", "even", "sim"), (3, 3, 90, "int", "uneven", "sim"),
       (3, 7, 60, "tuple", "even", "sim"), (5, 5, 120, "mixed", "one empty", "sim"),
       (5, 12, 150, "mixed", "uneven", "sim"), (8, 8, 200, "mixed", "even", "sim"),
       (8, 8, 40, "few keys", "even", "sim"), (8, 1, 64, "str", "even", "sim"),
       (6, 6, 90, "str", "one holds all", "sim"), (7, 5, 70, "big int", "uneven", "sim"),
       (4, 9, 30, "few keys", "one empty", "sim"), (3, 5, 45, "unicode", "even", "sim"),
       (3, 4, 0, "str", "even", "sim")]
RANDOM = 3  # property cases: K, R, n, key kind and split drawn from the plan's seeded rng
KINDS = ("str", "int", "tuple", "mixed", "few keys", "big int", "unicode")
SPLITS = ("even", "uneven", "one empty", "one holds all")
PROCESS = [(2, 2, 80, "mixed", "even", "process"), (2, 3, 60, "str", "uneven", "process")]
UNIMPORTABLE = ("scaleoutai.data.mapreduce", "scaleoutai.data.mapreduce_tasks")  # the course's answer
RETURN_CAP = 4 << 20
# a rank may send 1.5x the JSON size of the pairs it has for d, + 64 B and one header a message
BYTES_SLACK, PER_MESSAGE = 1.5, 64 + envelope_bytes(1)


def _pairs(rng: np.random.Generator, n: int, kind: str) -> list[tuple]:
    def key(i: int, j: int):
        if kind == "few keys":
            return f"k{i % 3}"
        if kind == "big int":
            return (-1) ** (i % 2) * (2**33 + i * 7919) if j % 2 else 2**60 + i
        if kind == "unicode":
            return ["wörter", "ключ", "鍵", "naïve", "x"][i % 5] + str(i)
        pick = {"str": 0, "int": 1, "tuple": 2, "mixed": j % 3}[kind]
        return [f"w{i}", int(i) * 7 - 40, (f"u{i % 5}", int(i))][pick]
    big = kind == "big int"
    return [(key(int(rng.zipf(1.4)) % 60, j), int(rng.integers(2**31, 2**40) if big else rng.integers(-5, 100)))
            for j in range(n)]


def _split(rng: np.random.Generator, pairs: list, K: int, how: str) -> list[list]:
    n = len(pairs)
    if how == "even":
        cuts = [n * r // K for r in range(1, K)]
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


def _key(k):
    return tuple(_key(x) for x in k) if isinstance(k, list) else k


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    cases = [(spec, "") for spec in SIM + PROCESS]
    for i in range(RANDOM):
        K = int(rng.integers(1, 8))
        spec = (K, int(rng.integers(1, 13)), int(rng.integers(0, 81)), str(rng.choice(KINDS)),
                str(rng.choice(SPLITS)) if K > 2 else "uneven", "sim")
        cases.append((spec, f"random case {i + 1}: "))
    for i, ((K, R, n, kind, how, backend), prefix) in enumerate(cases):
        splits = _split(rng, _pairs(rng, n, kind), K, how)
        where = "simulator" if backend == "sim" else "2 real processes"
        label = f"{prefix}K={K}, R={R}, {n} {kind} pairs split {how}, {where}"
        case = Case(id=f"c{i:02d}", fn="run_shuffle", label=label,
                    world_size=K, backend=backend, timeout=30 if backend == "process" else 10,
                    data={"R": R, "splits": splits})
        p.add_in_order(case, [("split", [_encode(s) for s in splits]), ("=", R)])
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
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], int)):
                raise ValueError
            key = _key(item[0])
            hash(key)
            out.append((key, item[1]))
        return out
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        raise Fail(f"rank {r}'s return value is not encode_pairs of a list of (key, value) pairs") from None


def _owner(key, R: int, K: int) -> int:
    return partition_of(key, R) % K


def _complete(res: CaseResult) -> None:
    K, R, splits = res.case.world_size, res.case.data["R"], res.case.data["splits"]
    want = Counter(tuple(pair) for s in splits for pair in s)
    got = Counter()
    for r in range(K):
        got += Counter(_returned(res, r))
    if got == want:
        return
    missing, extra = want - got, got - want
    twice = sum(n for pair, n in extra.items() if pair in want)
    invented = sum(n for pair, n in extra.items() if pair not in want)
    parts = []
    if missing:
        owners = sorted({_owner(k, R, K) for k, _ in missing})
        parts.append(f"{sum(missing.values())} of the {sum(want.values())} pairs are on no rank (they belong to "
                     f"rank{'s' if len(owners) > 1 else ''} {', '.join(map(str, owners[:4]))})")
    if twice:
        parts.append(f"{twice} pairs come back more than once (a pair must end on exactly one rank)")
    if invented:
        parts.append(f"{invented} pairs are in no rank's split")
    raise Fail("; ".join(parts))


def complete(res: CaseResult):
    _complete(res)
    return 1.0, ""


def placement(res: CaseResult):
    K, R = res.case.world_size, res.case.data["R"]
    seen: dict = {}
    for r in range(K):
        for key, _ in _returned(res, r):
            seen.setdefault(key, set()).add(r)
    split = [k for k, ranks in seen.items() if len(ranks) > 1]
    if split:
        k = split[0]
        raise Fail(f"{len(split)} keys are on more than one rank, e.g. a {type(k).__name__} key on ranks "
                   f"{sorted(seen[k])[:4]}: every pair of a key must meet on one rank (is your partition the "
                   f"same in every process? Python's hash of a str is not)")
    wrong = [(k, next(iter(rs))) for k, rs in seen.items() if _owner(k, R, K) not in rs]
    if wrong:
        k, r = wrong[0]
        raise Fail(f"{len(wrong)} keys are on the wrong rank, e.g. a {type(k).__name__} key on rank {r} whose "
                   f"partition (R={R}) lives on rank {_owner(k, R, K)}: use the lab's blake2b rule, the same in every "
                   f"process (Python's hash of a str is not), and p mod K")
    return 1.0, ""


def correct_process(res: CaseResult):
    _complete(res)
    placement(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """From the grader's trace: rank r sends rank d at most 2 messages and about the pairs it had for d."""
    K, R, splits = res.case.world_size, res.case.data["R"], res.case.data["splits"]
    graded_after(lambda: (_complete(res), placement(res)), "the shuffle's result")
    sends = [e for e in res.trace if e.kind == "send"]
    for r in range(K):
        for d in range(K):
            if d == r:
                continue
            mine = [e for e in sends if e.rank == r and e.peer == d]
            for_d = [p for p in splits[r] if _owner(p[0], R, K) == d]
            bound = BYTES_SLACK * _encode(for_d).nbytes + PER_MESSAGE * max(1, len(mine))
            if len(mine) > 2:
                raise Fail(f"rank {r} sent {len(mine)} messages to rank {d}; one exchange sends each rank one "
                           f"message (two if you send a size first)")
            sent = sum(e.nbytes for e in mine)
            if sent > bound:
                raise Fail(f"rank {r} sent rank {d} {sent} B, but had only {len(for_d)} pairs for it "
                           f"({_encode(for_d).nbytes} B as JSON): send each rank only the pairs it owns, "
                           f"directly (no gathering to one rank, no all-gather then filter)")
    return 1.0, ""


TESTS = [
    Test("complete", "every pair comes back exactly once (K = 1-8, K > keys, str/int/tuple/big int/non-ASCII keys)",
         select=lambda c: c.backend == "sim", check=complete),
    Test("placement", "every key on exactly one rank: partition(key, R) mod K",
         select=lambda c: c.backend == "sim", check=placement),
    Test("correct_process", "the shuffle is right on 2 real processes (the partition is stable across processes)",
         select=lambda c: c.backend == "process", check=correct_process),
    Test("traffic", "one exchange: each rank sends each other rank only the pairs it owns (the grader's trace)",
         select=lambda c: c.backend == "sim" and c.world_size > 1 and any(c.data["splits"]),  # pairs to move
         check=traffic),
]
