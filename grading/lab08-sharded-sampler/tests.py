"""Lab 8: the elastic sampler. resume_indices is called one rank at a time in the grader's order, with K unchanged
(the course's contract) and after changes of K (index for index against the tape rule); whole elastic epochs with
one or several changes of K are replayed through the notebook's replay() and checked for exactly-once coverage and
equal counts; agree_progress runs on K sandboxes, each handed only the rows its rank read, and must return the same
[epoch, consumed] everywhere with at most 2(K-1) messages of 2 integers per rank by the grader's count."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after

UNIMPORTABLE = ("scaleoutai.data.sampler", "scaleoutai.data.storage", "scaleoutai.collectives", "scaleoutai.parallel")
ASKS = ("the lab asks for resumption when K changes: rank r reads tape position consumed + r + K j, a global "
        "count; the course's start= continues each rank's old list and is right only when K is unchanged")

# resume_indices(n, K, rank, epoch, seed, consumed, drop_last); SAME_K: consumed is a multiple of K (K unchanged)
SAME_K = [(10, 1, 0, 0, 0, 0, False), (10, 3, 2, 0, 4, 0, False), (23, 5, 4, 1, 7, 10, False),
          (23, 5, 0, 3, 7, 15, True), (7, 9, 8, 0, 1, 0, False), (7, 9, 3, 2, 1, 0, True), (100, 8, 5, 6, 11, 48, False),
          (99, 4, 3, 0, 2, 96, False), (64, 2, 1, 9, 3, 62, True), (3, 8, 6, 0, 2, 0, False),
          (50, 5, 2, 1, 3, 50, False), (40_000, 3, 1, 0, 5, 12_000, False)]
CHANGED = [(20, 3, 0, 0, 1, 4, False), (20, 3, 2, 0, 1, 4, False),  # 1 -> 3
           (50, 3, 1, 2, 5, 16, False), (50, 3, 2, 2, 5, 16, True),  # 4 -> 3
           (37, 5, 4, 1, 9, 6, False), (37, 5, 0, 1, 9, 6, True),  # 2 -> 5
           (45, 1, 0, 0, 6, 16, False),  # 8 -> 1
           (5, 7, 6, 0, 2, 3, False), (5, 7, 2, 0, 2, 3, False), (5, 7, 3, 0, 2, 3, True),  # 3 -> 7 with n < 7
           (30, 9, 8, 4, 3, 26, False), (30, 9, 1, 4, 3, 26, True),  # fewer samples left than ranks
           (30, 4, 1, 1, 3, 33, False),  # consumed past n: nothing left
           (101, 5, 3, 7, 0, 33, False), (64, 3, 0, 9, 3, 10, True),  # after several changes
           (70_000, 3, 2, 5, 9, 40_004, False), (70_000, 6, 5, 2, 9, 33_338, True)]  # indices past 2**16
# replay(n, epoch, seed, drop_last, runs): runs of (K, steps, batch), the last one to the end of the epoch
SCHEDULES = [(40, 0, 3, False, [(1, 3, 4), (3, -1, 2)]), (50, 1, 5, False, [(4, 2, 3), (3, -1, 3)]),
             (37, 2, 9, False, [(2, 3, 2), (5, -1, 1)]), (45, 0, 6, True, [(8, 1, 2), (1, -1, 4)]),
             (5, 0, 2, False, [(3, 1, 1), (7, -1, 1)]), (101, 3, 0, False, [(4, 2, 3), (3, 1, 3), (5, 2, 2), (2, -1, 4)]),
             (60, 4, 1, True, [(3, 2, 4), (5, 1, 2), (4, -1, 3)]), (30, 1, 7, False, [(4, 3, 2), (9, -1, 1)]),
             (24, 0, 4, False, [(2, 2, 3), (2, 1, 3), (6, -1, 2)]), (33, 5, 8, False, [(3, 0, 2), (5, 1, 3), (7, -1, 2)])]
# agree_progress: (n, K_new, K_old, epoch, start, done per old rank; None: that rank saved the next epoch's row)
AGREE = [(40, 1, 4, 0, 0, [6, 6, 3, 6]), (40, 3, 1, 2, 0, [9]), (50, 3, 4, 1, 0, [6, 3, 6, 6]), (37, 5, 2, 3, 0, [4, 2]),
         (45, 2, 8, 0, 0, [4, 4, 2, 4, 4, 4, 4, 4]), (5, 7, 3, 0, 0, [1, None, 1]), (30, 4, 4, 5, 0, [6, None, None, 6]),
         (30, 3, 2, 5, 0, [None, None]), (30, 3, 0, 0, 0, []), (50, 2, 3, 2, 16, [3, 6, 3]),
         (70_000, 3, 4, 40_000, 0, [5000, 4999, 5000, 5000]), (100, 8, 3, 1, 0, [10, 12, 12]),
         (61, 6, 6, 0, 0, [4, 4, 4, 2, 4, 4]), (40, 2, 3, 1, 0, [4, 2, 4])]  # the last: 2 real processes
ROW_DTYPES = {3: "uint16", 10: "int32"}  # rows handed over in a narrow type: epoch * n must still be int64
RANDOM_CALLS, RANDOM_SCHEDULES, RANDOM_AGREE = 6, 4, 3


def _tape(n, K, rank, epoch, seed, consumed, drop):
    """The lab's rule: rank r's j-th index sits at tape position consumed + r + K j; position p holds order[p % n]."""
    left = max(0, n - consumed)
    length = left // K if drop else -(-left // K)
    order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)
    return order[(consumed + rank + K * np.arange(length, dtype=np.int64)) % n] if length else order[:0]


def _rows(K_old, epoch, start, dones):
    return [[epoch + 1, 0, K_old, 0] if d is None else [epoch, start, K_old, d] for d in dones]


def _random_agree(rng):
    n, K_old, K_new, b = int(rng.integers(5, 200)), int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 4))
    start = int(rng.integers(0, n // 2))
    length, epoch = -(-(n - start) // K_old), int(rng.integers(0, 50))
    t = int(rng.integers(0, max(1, length // b)))
    dones = [min((t + int(rng.integers(2))) * b, length - 1) if rng.random() > 0.1 else None for _ in range(K_old)]
    return n, K_new, K_old, epoch, start, dones


def _random_schedule(rng):
    n, drop, runs, c = int(rng.integers(5, 200)), bool(rng.integers(2)), [], 0
    for _ in range(int(rng.integers(1, 5))):
        K, b = int(rng.integers(1, 10)), int(rng.integers(1, 5))
        left = max(0, n - c)
        length = left // K if drop else -(-left // K)
        steps = int(rng.integers(0, length // b + 1))
        runs.append((K, steps, b))
        c += K * steps * b
    runs.append((int(rng.integers(1, 10)), -1, int(rng.integers(1, 5))))
    return n, int(rng.integers(0, 30)), int(rng.integers(0, 1000)), drop, runs


def _random_call(rng):
    n, K = int(rng.integers(1, 300)), int(rng.integers(1, 13))
    return n, K, int(rng.integers(K)), int(rng.integers(20)), int(rng.integers(1000)), int(rng.integers(0, n + 3)), \
        bool(rng.integers(2))


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    calls = [(a, "same") for a in SAME_K] + [(a, "changed") for a in CHANGED]
    calls += [(_random_call(rng), "random") for _ in range(RANDOM_CALLS)]
    for i, (args, kind) in enumerate(calls):
        n, K, rank, epoch, seed, consumed, drop = args
        group = "same" if kind == "same" or (kind == "random" and consumed % K == 0) else "changed"
        label = (f"{'random case: ' if kind == 'random' else ''}resume_indices(n={n}, K={K}, rank={rank}, epoch={epoch}"
                 f", seed={seed}, consumed={consumed}, drop_last={drop})")
        p.add_in_order(Case(id=f"c{i:02d}", fn="resume_indices", mode="call", label=label, timeout=5,
                            data={"args": args, "group": group}), [("=", a) for a in args])
    for i, sched in enumerate(SCHEDULES + [_random_schedule(rng) for _ in range(RANDOM_SCHEDULES)]):
        n, epoch, seed, drop, runs = sched
        label = (f"{'random case: ' if i >= len(SCHEDULES) else ''}replay of n={n}, drop_last={drop}, runs (K, steps, "
                 f"batch) {[tuple(r) for r in runs]}")
        p.add_in_order(Case(id=f"s{i:02d}", fn="replay", mode="call", label=label, timeout=10, data={"sched": sched}),
                       [("=", n), ("=", epoch), ("=", seed), ("=", drop), ("=", [list(r) for r in runs])])
    for i, spec in enumerate(AGREE + [_random_agree(rng) for _ in range(RANDOM_AGREE)]):
        n, K_new, K_old, epoch, start, dones = spec
        rows = _rows(K_old, epoch, start, dones)
        dt = ROW_DTYPES.get(i, "int64")
        saved = [np.array(rows[r::K_new], dtype=dt).reshape(-1, 4) for r in range(K_new)]
        backend = "process" if i == len(AGREE) - 1 else "sim"
        where = "2 real processes" if backend == "process" else "simulator"
        empty = sum(len(s) == 0 for s in saved)
        old = f"K_old={K_old} -> K={K_new}, {len(rows)} rows" if rows else f"a fresh job (no rows), K={K_new}"
        label = (f"{'random case: ' if i >= len(AGREE) else ''}agree_progress, {old}, n={n}"
                 f"{f' ({empty} ranks hold none)' if empty and rows else ''}, rows as {dt}, {where}")
        p.add_in_order(Case(id=f"a{i:02d}", fn="agree_progress", world_size=K_new, backend=backend, label=label,
                            timeout=30 if backend == "process" else 10, data={"n": n, "rows": rows}),
                       [("=", n), ("saved", saved)])
    return p


def _ints(res: CaseResult, r: int, what: str) -> np.ndarray:
    arr = res.value(r, what)
    if arr.dtype.kind not in "iu":
        raise Fail(f"rank {r}'s {what} has dtype {arr.dtype}; return integers (int64)")
    return arr.astype(np.int64)


def _diagnose(got: np.ndarray, args: tuple) -> str:
    n, K, rank, epoch, seed, consumed, drop = args
    want = _tape(*args)
    order = np.random.default_rng(seed + epoch).permutation(n)
    total = K * (n // K if drop else -(-n // K))
    course = (order[:total] if drop else np.resize(order, total))[rank::K]
    if consumed and np.array_equal(got, course[consumed // K:]):
        return f"each rank continued its old list at consumed // K: {ASKS}"
    if consumed and np.array_equal(got, course):
        return "the whole epoch again: the job has read `consumed` positions already; start there"
    if consumed and np.array_equal(got, course[consumed:]):
        return "skipped `consumed` entries of each rank's list, K * consumed samples: consumed counts the whole job's"
    if got.size and (got.min() < 0 or got.max() >= n):
        return f"{int(((got < 0) | (got >= n)).sum())} indices outside 0..{n - 1} (an integer type too narrow?)"
    if got.shape != want.shape:
        return (f"returned {got.size} indices, expected {want.size}: every rank reads "
                f"{'floor' if drop else 'ceil'}((n - consumed) / K), 0 once consumed >= n")
    left = max(0, n - consumed)
    if not drop and left and np.array_equal(got, order[consumed:][(rank + K * np.arange(want.size)) % left]):
        return "the padding repeats the unread samples; the lab's tape repeats the epoch's order from its start"
    return f"{int((got != want).sum())} of the {want.size} indices differ from tape positions consumed + rank + K j"


def spec(res: CaseResult):
    args = tuple(res.case.data["args"])
    arr = res.value(0, "indices")
    if arr.dtype != np.int64:
        raise Fail(f"the indices have dtype {arr.dtype}; return int64 (n may pass what a narrower type holds)")
    if arr.ndim != 1 or not np.array_equal(arr, _tape(*args)):
        raise Fail(_diagnose(arr.reshape(-1), args))
    return 1.0, ""


def _schedule(res: CaseResult) -> None:
    n, epoch, seed, drop, runs = res.case.data["sched"]
    reads = _ints(res, 0, "replay result")
    if reads.ndim != 2 or reads.shape[1] != 3:
        raise Fail(f"replay returned shape {reads.shape}; it returns rows (run, rank, sample): leave it as given")
    c = 0
    for i, (K, steps, b) in enumerate(runs):
        left = max(0, n - c)
        length = left // K if drop else -(-left // K)
        want = length if steps < 0 else steps * b
        got = [int(np.sum((reads[:, 0] == i) & (reads[:, 1] == r))) for r in range(K)]
        if len(set(got)) > 1 or got[0] != want:
            raise Fail(f"run {i} (K={K}): the ranks have {sorted(set(got))} indices to read where every rank needs "
                       f"{want}: equal counts, {'floor' if drop else 'ceil'}((n - consumed) / K) per rank")
        c += K * want
    s = reads[:, 2]
    if s.size and (s.min() < 0 or s.max() >= n):
        raise Fail(f"an index outside 0..{n - 1}")
    counts, total = np.bincount(s, minlength=n), s.size
    q, extra = divmod(total, n)
    if drop and counts.max(initial=0) > 1 or not drop and (counts.min() < q or counts.max() > q + (extra > 0)
                                                            or int((counts > q).sum()) != extra):
        twice, never = int((counts > max(1, q + (extra > 0))).sum()), int((counts == 0).sum())
        if not drop and not never and not (counts < q).any():
            raise Fail(f"{twice} samples read more often than the padding allows: the tape repeats the epoch's "
                       f"order from its start, so no sample is read twice more than another")
        changed = any(runs[j][0] != runs[j + 1][0] for j in range(len(runs) - 1))
        hint = f" ({ASKS})" if changed else ""
        raise Fail(f"{twice} samples read more often than the padding allows and {never} never read over the epoch: "
                   f"the completed steps of every run must read the next K * steps * batch samples of the tape{hint}")


def schedules(res: CaseResult):
    _schedule(res)
    return 1.0, ""


def _want(n: int, rows: list) -> list[int]:
    if not rows:
        return [0, 0]
    g = min(e * n + s + k * d for e, s, k, d in rows)
    return [g // n, g % n]


def _agreed(res: CaseResult) -> None:
    n, rows, K = res.case.data["n"], res.case.data["rows"], res.case.world_size
    want = _want(n, rows)
    got = [_ints(res, r, "[epoch, consumed]").reshape(-1) for r in range(K)]
    for r, g in enumerate(got):
        if g.shape != (2,):
            raise Fail(f"rank {r} returned {g.size} numbers; return [epoch, consumed]")
    if len({tuple(g) for g in got}) > 1:
        raise Fail("the ranks returned different resume points: every rank must learn the others' rows' progress "
                   "(one all-reduce), or the new ranks read overlapping or missing samples")
    g = [int(x) for x in got[0]]
    if g == want:
        return
    if rows and g == _want(n, [[e, s, K, d] for e, s, _, d in rows]):
        why = "the new K read the old rows: progress is start + K_old * done, K_old from the row"
    elif rows and g == [min(e for e, *_ in rows), min(s + k * d for e, s, k, d in rows) % n]:
        why = "epoch and position were reduced apart: the smallest (epoch, position) pair is one number, epoch * n + pos"
    elif rows and g[0] * n + g[1] > want[0] * n + want[1]:
        why = "the resume point is past a step some rank never completed: take the smallest progress (min)"
    elif g == [0, 0]:
        why = "resumed at the start of epoch 0: a rank without rows must not pull the minimum down"
    else:
        why = "not the smallest epoch * n + start + K_old * done over the rows"
    raise Fail(f"every rank returned the same wrong [epoch, consumed]: {why} (the lab asks the ranks to agree on "
               f"the resume point across a change of K)")


def agree(res: CaseResult):
    _agreed(res)
    return 1.0, ""


def traffic(res: CaseResult):
    graded_after(lambda: _agreed(res), "the resume point")
    K, per = res.case.world_size, 16 + envelope_bytes(2)  # 2 int64 in an array of at most 2 dimensions
    cap_msgs = 2 * (K - 1)
    for r in range(K):
        st = res.stats(r)
        big = [e.nbytes for e in res.trace if e.kind == "send" and e.rank == r and e.nbytes > per]
        if st["messages_sent"] > cap_msgs or st["bytes_sent"] > cap_msgs * per or big:
            what = f"a message of {big[0]} bytes" if big else f"{st['messages_sent']} messages, {st['bytes_sent']} bytes"
            raise Fail(f"rank {r} sent {what}; one all-reduce of the progress sends at most 2(K-1) = {cap_msgs} "
                       f"messages of at most 2 integers ({per} bytes with the envelope): reduce the rows locally "
                       f"and send a number, not the rows")
    return 1.0, ""


TESTS = [
    Test("same_k", "resume_indices with K unchanged (the course's sampler and its start): the tape rule, int64",
         select=lambda c: c.fn == "resume_indices" and c.data["group"] == "same", check=spec),
    Test("k_changes", "resume_indices after K changed: tape positions consumed + rank + K j, padding, drop_last, "
         "K > what is left, consumed >= n, n past 2**16", select=lambda c: c.fn == "resume_indices" and
         c.data["group"] == "changed", check=spec),
    Test("schedules", "whole elastic epochs with one or several changes of K: every sample once (plus the padding or "
         "a dropped tail), equal counts", select=lambda c: c.fn == "replay", check=schedules),
    Test("agree", "agree_progress: the smallest progress over every rank's rows, the same on every rank (uneven rows, "
         "ranks without rows, two epochs, past 2**31, 2 processes)", select=lambda c: c.fn == "agree_progress",
         check=agree),
    Test("traffic", "agree_progress sends at most 2(K-1) messages of 2 integers per rank (the grader's count)",
         select=lambda c: c.fn == "agree_progress" and c.backend == "sim", check=traffic),
]
