"""Lab 2: causal broadcast with vector timestamps. Each rank gets its own script only; the grader replays the
protocol itself (delivered counts, hold-back queue) on the same scripts and compares what every rank has
delivered after every step of its script, checks the order against the causes of each message, and reads
the timestamps on the wire from its own recorded messages."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, NotGraded, Plan, Test, graded_after

UNIMPORTABLE = ("scaleoutai.foundations.clocks", "scaleoutai.foundations.consensus", "scaleoutai.collectives",
                "scaleoutai.parallel")
ASKS = ("the lab asks for causal delivery: hold a message back until every message it depends on is delivered, "
        "and stamp it with the counts of broadcasts delivered; a vector clock that delivers on arrival does not")

# (K, broadcasts, ranks that never broadcast, what): links read in causal order (no message ever waits)
INORDER = [(1, 5, (), ""), (2, 6, (), ""), (3, 10, (), ""), (5, 15, (), ""), (3, 0, (), ": no broadcast at all"),
           (4, 10, (2,), ""), (2, 300, (1,), ": 300 broadcasts of one rank (seq past 255)")]
# the grader picks which link a rank reads next so that messages overtake their causes
REORDER = [(3, 8, (), ""), (3, 12, (), ""), (4, 16, (), ""), (5, 20, (), ""), (7, 21, (), ""),
           (4, 12, (0,), ""), (6, 18, (), ""), (3, 300, (2,), ": 300 broadcasts of two ranks (seq past 127)")]
PROCESS = [(2, 8, (), "")]
RANDOM = 3  # seeded random reordered cases: K, broadcasts and a quiet rank drawn from the plan's rng
# deliverable(stamp, delivered, sender): hand-built (stamp, delivered, sender, what)
RULE = [([1, 0], [0, 0], 0, "the sender's first message"), ([3, 0, 0], [1, 0, 0], 0, "a gap in the sender's seq"),
        ([1, 2, 0], [1, 2, 0], 1, "a message already delivered"), ([1, 1, 0], [0, 0, 0], 1, "a cause on a third rank"),
        ([0, 1, 2, 1], [3, 0, 2, 4], 1, "third-rank entries below the counters"), ([1], [0], 0, "K = 1"),
        ([300, 7], [299, 9], 0, "counters past 255"), ([2, 5, 4], [2, 5, 3], 2, "the sender's next, equal elsewhere"),
        ([2, 6, 3], [2, 5, 2], 2, "two entries ahead")]


def _schedule(rng: np.random.Generator, K: int, n: int, quiet: tuple, reorder: bool) -> list[np.ndarray]:
    """A global run of n broadcasts and their arrivals, projected on each rank (so nothing deadlocks)."""
    talkers = [r for r in range(K) if r not in quiet]
    inflight: dict[tuple[int, int], list[np.ndarray]] = {(a, b): [] for a in range(K) for b in range(K) if a != b}
    seen = np.zeros((K, K), dtype=np.int64)  # seen[b]: broadcasts b has delivered (arrival = delivery here)
    rows: list[list[tuple[int, int]]] = [[] for _ in range(K)]
    while n or any(inflight.values()):
        heads = [ab for ab, q in inflight.items() if q]
        ready = [(a, b) for a, b in heads if inflight[(a, b)][0][a] == seen[b][a] + 1 and
                 all(inflight[(a, b)][0][k] <= seen[b][k] for k in range(K) if k != a)]
        if n and (not heads or rng.random() < 0.4):
            a = int(rng.choice(talkers))
            seen[a][a] += 1
            for b in range(K):
                if b != a:
                    inflight[(a, b)].append(seen[a].copy())
            rows[a].append((0, 0))
            n -= 1
            continue
        early = [ab for ab in heads if ab not in ready]
        pool = early if reorder and early and rng.random() < 0.6 else heads if reorder else ready
        a, b = pool[int(rng.integers(len(pool)))]
        stamp = inflight[(a, b)].pop(0)
        if not reorder:
            seen[b] = np.maximum(seen[b], stamp)
        rows[b].append((1, a))
    return [np.array(r, dtype=np.int64).reshape(-1, 2) for r in rows]


def _replay(scripts: list[np.ndarray]):
    """The grader's causal broadcast: per rank its deliveries, the count after each step, the stamps it sent,
    and how many arrivals had to wait."""
    K = len(scripts)
    pos, counts = [0] * K, [np.zeros(K, dtype=np.int64) for _ in range(K)]
    wire: dict[tuple[int, int], list[np.ndarray]] = {}
    queue: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(K)]
    log: list[list[tuple[int, int]]] = [[] for _ in range(K)]
    after: list[list[int]] = [[] for _ in range(K)]
    sent: list[list[np.ndarray]] = [[] for _ in range(K)]
    waited = 0
    while any(pos[r] < len(scripts[r]) for r in range(K)):
        for r in range(K):
            if pos[r] == len(scripts[r]):
                continue
            kind, peer = (int(v) for v in scripts[r][pos[r]])
            if kind == 0:
                counts[r][r] += 1
                sent[r].append(counts[r].copy())
                for b in range(K):
                    if b != r:
                        wire.setdefault((r, b), []).append(counts[r].copy())
                log[r].append((r, int(counts[r][r])))
            else:
                if not wire.get((peer, r)):
                    continue
                queue[r].append((peer, wire[(peer, r)].pop(0)))
                before = len(log[r])
                while True:
                    ok = [i for i, (j, w) in enumerate(queue[r]) if w[j] - 1 == counts[r][j]
                          and (np.delete(w, j) <= np.delete(counts[r][:], j)).all()]
                    if not ok:
                        break
                    j, w = queue[r].pop(ok[0])
                    counts[r][j] = w[j]
                    log[r].append((j, int(w[j])))
                waited += len(log[r]) == before
            after[r].append(len(log[r]))
            pos[r] += 1
    return log, after, sent, waited


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    specs = [(K, n, q, w, False, "sim", "inorder") for K, n, q, w in INORDER]
    specs += [(K, n, q, w, True, "sim", "reorder") for K, n, q, w in REORDER]
    specs += [(K, n, q, w, False, "process", "process") for K, n, q, w in PROCESS]
    for i in range(RANDOM):
        K = int(rng.integers(3, 8))
        quiet = (int(rng.integers(K)),) if rng.random() < 0.5 else ()
        specs.append((K, int(rng.integers(K, 5 * K)), quiet, f": seeded random case {i + 1}", True, "sim", "reorder"))
    for i, (K, n, quiet, what, reorder, backend, kind) in enumerate(specs):
        for _ in range(200):  # a reordered case must hold at least one message back
            scripts = _schedule(rng, K, n, quiet, reorder)
            if not reorder or _replay(scripts)[3]:
                break
        note = f", rank {quiet[0]} never broadcasts" if quiet else ""
        label = (f"K={K}, {n} broadcasts{note}, links read {'out of causal order' if reorder else 'in causal order'}, "
                 f"{'simulator' if backend == 'sim' else '2 real processes'}{what}")
        p.add(Case(id=f"b{i:02d}", fn="causal_broadcast", label=label, world_size=K, backend=backend,
                   timeout=30 if backend == "process" else 10, data={"kind": kind, "record_messages": backend == "sim"}),
              per_rank={"script": scripts})
    rules = list(RULE)
    for i in range(4):
        K = int(rng.integers(2, 7))
        have = rng.integers(0, 40, size=K)
        s = int(rng.integers(K))
        stamp = np.minimum(have, rng.integers(0, 40, size=K))
        stamp[s] = have[s] + 1
        if i % 2:
            stamp[(s + 1) % K] = have[(s + 1) % K] + 1 + int(rng.integers(3))
        rules.append((stamp.tolist(), have.tolist(), s, f"seeded random case {i + 1}"))
    for i, (stamp, have, s, what) in enumerate(rules):
        p.add_in_order(Case(id=f"r{i}", fn="deliverable", mode="call", timeout=5, label=f"deliverable: {what}",
                            data={"stamp": stamp, "have": have, "sender": s}),
                       [("stamp", np.array(stamp, dtype=np.int64)), ("delivered", np.array(have, dtype=np.int64)),
                        ("=", s)])
    return p


def rule(res: CaseResult):
    d = res.case.data
    w, h, s = np.array(d["stamp"]), np.array(d["have"]), d["sender"]
    want = bool(w[s] == h[s] + 1 and all(w[k] <= h[k] for k in range(len(w)) if k != s))
    got = res.value(0, "answer", array_only=False)
    if got.shape != () or got.dtype.kind not in "bi":
        raise Fail(f"deliverable returned an array of shape {got.shape} and dtype {got.dtype}: return one bool")
    if bool(got) != want:
        why = ("it is the sender's next message and every entry of another rank is at most the counters" if want else
               "it was delivered already (its seq is not above the sender's counter)" if w[s] <= h[s] else
               "an earlier message of the sender is missing" if w[s] > h[s] + 1 else
               "a message of a third rank it depends on is not delivered yet")
        why += "" if want else f": {ASKS}"
        raise Fail(f"deliverable returned {bool(got)}, but {why}")
    return 1.0, ""


def _deliveries(res: CaseResult, r: int, log: list, after: list, stamps: dict) -> None:
    K = res.case.world_size
    got = res.value(r, "deliveries", array_only=False)
    if got.size == 0 and not log:
        if got.ndim != 2 or got.shape[1:] != (2,):
            raise Fail(f"rank {r} delivered nothing, so it returns shape (0, 2), not {got.shape}")
        return
    if got.ndim != 2 or got.shape[1] != 2:
        raise Fail(f"rank {r}'s deliveries have shape {got.shape}: return one row (sender, seq) per delivery")
    if got.dtype.kind not in "iu":
        raise Fail(f"rank {r}'s deliveries are {got.dtype}: return an integer array (int64)")
    rows = [(int(a), int(b)) for a, b in got.astype(np.int64)]
    if len(set(rows)) != len(rows) or any(x not in stamps for x in rows):
        wrap = " A seq of 0 or below looks like a counter that wrapped: keep the counters in int64." \
            if any(q <= 0 for _, q in rows) else ""
        raise Fail(f"rank {r} delivered a message twice or one never broadcast (seq counts the sender's broadcasts "
                   f"from 1; a message is delivered exactly once).{wrap}")
    if len(rows) != len(log):
        raise Fail(f"rank {r} delivered {len(rows)} of the {len(log)} messages broadcast: every message reaches "
                   f"every rank, so a held message must be delivered once its causes are (keep delivering until no "
                   f"held message is deliverable)")
    have = np.zeros(K, dtype=np.int64)
    for i, (s, q) in enumerate(rows):
        w = stamps[(s, q)]
        if q != have[s] + 1 or any(w[k] > have[k] for k in range(K) if k != s):
            raise Fail(f"rank {r}'s delivery {i} (a message of rank {s}) came before a message it depends on: {ASKS}")
        have[s] = q
    for t, c in enumerate(after):
        if set(rows[:c]) != set(log[:c]):
            early = len(set(rows[:c]) - set(log[:c])) > 0
            raise Fail(f"after step {t} of its script rank {r} had " + (
                "delivered a message before the step of its script that receives it" if early else
                "not delivered a message whose causes had all been delivered: deliver as soon as a message is "
                "deliverable, and after each delivery look at the held messages again"))


def _check(res: CaseResult) -> None:
    log, after, sent, _ = _replay(res.per_rank("script"))
    stamps = {(r, i + 1): w for r in range(len(sent)) for i, w in enumerate(sent[r])}
    for r in range(res.case.world_size):
        _deliveries(res, r, log[r], after[r], stamps)


def deliveries(res: CaseResult):
    _check(res)
    return 1.0, ""


def timestamps(res: CaseResult):
    graded_after(lambda: _check(res), "what every rank delivers")
    K = res.case.world_size
    _, _, sent, _ = _replay(res.per_rank("script"))
    if not any(sent):
        raise NotGraded("no broadcast, no timestamp")
    for a in range(K):
        for b in range(K):
            if a == b:
                continue
            wire = [m for s, d, m in res.messages if s == a and d == b]
            if len(wire) != len(sent[a]):
                raise Fail(f"rank {a} sent rank {b} {len(wire)} messages for its {len(sent[a])} broadcasts: exactly one "
                           f"message per broadcast and other rank (no acks, no relaying of others' messages)")
            for i, (m, w) in enumerate(zip(wire, sent[a])):
                if m.dtype != np.int64 or m.shape != (K,):
                    raise Fail(f"rank {a}'s broadcast {i + 1} went to rank {b} as {m.dtype} of shape {m.shape}: the "
                               f"timestamp is one int64 vector of K = {K} counters")
                if not np.array_equal(m, w):
                    raise Fail(f"rank {a}'s broadcast {i + 1} carries a timestamp that is not its counts of delivered "
                               f"broadcasts (its own entry counting this broadcast; receives and held messages do not "
                               f"tick): {ASKS}")
    return 1.0, ""


def _kind(*kinds):
    return lambda c: c.fn == "causal_broadcast" and c.data["kind"] in kinds


TESTS = [
    Test("rule", "deliverable: the sender's next message, every cause from a third rank delivered",
         select=lambda c: c.fn == "deliverable", check=rule),
    Test("delivery", "links read in causal order: every message delivered once, own broadcasts at once (K = 1-5, "
         "no broadcast, a rank that never broadcasts, 300 broadcasts)", select=_kind("inorder"), check=deliveries),
    Test("causal", "messages overtaking their causes wait in the hold-back queue and leave as soon as they may "
         "(K = 3-7, seeded reorderings)", select=_kind("reorder"), check=deliveries),
    Test("process", "causal broadcast on 2 real processes", select=_kind("process"), check=deliveries),
    Test("timestamps", "the grader's recorded messages: one int64 vector timestamp of delivered counts per broadcast "
         "and other rank", select=lambda c: c.fn == "causal_broadcast" and c.backend == "sim" and c.world_size > 1,
         check=timestamps),
]
