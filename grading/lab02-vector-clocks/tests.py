"""Lab 2: vector clocks and majority commit."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test

UNIMPORTABLE = ("scaleoutai.foundations.clocks", "scaleoutai.foundations.consensus", "scaleoutai.collectives", "scaleoutai.parallel")

# (K, steps of the global schedule, ranks that never take part): the last ones are a long run (clocks beyond what
# an int8 or uint8 counts) and a rank with no events at all (its clocks have shape (0, K))
CLOCKS = [(1, 5, ()), (2, 12, ()), (3, 20, ()), (5, 30, ()), (2, 400, ()), (4, 12, (3,))]
# (K, entries, {follower: acks it sends before crashing}); the label says how many crash. The last ones: the leader
# alone (K = 1) and f at its limit for even K (K/2 - 1 crashes still commit; K/2, as in K=4 with 2 crashes, never do)
COMMIT = [(3, 4, {}), (5, 3, {}), (3, 4, {2: 0}), (5, 4, {1: 0, 4: 0}), (3, 5, {1: 2, 2: 3}),
          (4, 3, {1: 0, 2: 0}), (5, 3, {1: 0, 2: 0, 3: 1}), (2, 3, {1: 0}), (1, 3, {}), (4, 3, {1: 0})]
RANDOM = 2  # property cases of each function: sizes, schedules and crashes drawn from the plan's seeded rng


def _schedule(rng: np.random.Generator, K: int, steps: int, idle: tuple = ()) -> list[np.ndarray]:
    """Per-rank events projected from one global order, so the run cannot deadlock; ``idle`` ranks have none."""
    events: list[list[tuple[int, int]]] = [[] for _ in range(K)]
    active = [r for r in range(K) if r not in idle]
    for _ in range(steps):
        a = int(rng.choice(active))
        if len(active) == 1 or rng.random() < 0.3:
            events[a].append((0, a))
        else:
            b = int(rng.choice([r for r in active if r != a]))
            events[a].append((1, b))
            events[b].append((2, a))
    return [np.array(e, dtype=np.int64).reshape(-1, 2) for e in events]


def _reference_clocks(events: list[np.ndarray]) -> list[np.ndarray]:
    K = len(events)
    pos, V = [0] * K, [np.zeros(K, dtype=np.int64) for _ in range(K)]
    queues: dict[tuple[int, int], list[np.ndarray]] = {}
    out: list[list[np.ndarray]] = [[] for _ in range(K)]
    while any(pos[r] < len(events[r]) for r in range(K)):
        for r in range(K):
            if pos[r] == len(events[r]):
                continue
            kind, peer = (int(v) for v in events[r][pos[r]])
            if kind == 2:
                q = queues.get((peer, r))
                if not q:
                    continue
                V[r] = np.maximum(V[r], q.pop(0))
            V[r][r] += 1
            if kind == 1:
                queues.setdefault((r, peer), []).append(V[r].copy())
            out[r].append(V[r].copy())
            pos[r] += 1
    return [np.array(o, dtype=np.int64).reshape(-1, K) for o in out]


def _commit_label(K: int, n: int, crash: dict) -> str:
    f = len(crash)
    return f"K={K}, {n} entries, {f} follower crash{'es' if f != 1 else ''}" + (
        f" (after {sorted(crash.values())} acks)" if any(crash.values()) else "")


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    clocks = [(K, steps, idle, "") for K, steps, idle in CLOCKS]
    commits = [(K, n, crash, "") for K, n, crash in COMMIT]
    for i in range(RANDOM):
        K = int(rng.integers(2, 7))
        idle = (int(rng.integers(K)),) if K > 2 and rng.random() < 0.5 else ()
        clocks.append((K, int(rng.integers(K, 6 * K)), idle, f"random case {i + 1}: "))
        K = int(rng.integers(2, 7))
        f = int(rng.integers(0, K))
        crashed = sorted(int(r) for r in rng.choice(np.arange(1, K), size=f, replace=False))
        n = int(rng.integers(1, 5))
        commits.append((K, n, {r: int(rng.integers(0, n)) for r in crashed}, f"random case {i + 1}: "))
    for i, (K, steps, idle, prefix) in enumerate(clocks):
        quiet = f", rank {idle[0]} has no events" if idle else ""
        p.add(Case(id=f"v{i}", fn="vector_clock_run", label=f"{prefix}vector clocks, K={K}, {steps} events{quiet}",
                   world_size=K, timeout=8, data={"K": K}), per_rank={"events": _schedule(rng, K, steps, idle)})
    for i, (K, n, crash, prefix) in enumerate(commits):
        values = rng.standard_normal(n)
        args = [values] + [np.full(n, np.nan) for _ in range(K - 1)]
        p.add(Case(id=f"m{i}", fn="replicate", label=prefix + _commit_label(K, n, crash), world_size=K, timeout=8,
                   faults={"crash": {str(r): c for r, c in crash.items()}}, data={"crash": crash, "n": n}),
              per_rank={"entries": args})
    return p


def clocks(res: CaseResult):
    ref = _reference_clocks(res.per_rank("events"))
    for r, want in enumerate(ref):
        got = res.value(r, "list of clocks", shape=want.shape, array_only=False)
        if got.size and got.dtype.kind not in "iu":
            raise Fail(f"rank {r}'s clocks are {got.dtype}: a vector clock counts events, return an integer array")
        if got.size and int(want.max()) > np.iinfo(got.dtype).max:
            raise Fail(f"rank {r}'s clocks are {got.dtype}, which cannot count to {int(want.max())} events: "
                       f"use int64")
        bad = np.nonzero(np.any(got != want, axis=1))[0]
        top = int(want.max(initial=0))
        if len(bad) and (got.min() < 0 or int(got.max()) <= 255 < top):
            raise Fail(f"rank {r}'s clocks overflow: an entry should count {top} events, but yours "
                       f"{'go negative' if got.min() < 0 else 'never pass 255'}; keep the counters in int64")
        if len(bad):
            raise Fail(f"rank {r}'s clock after its event {int(bad[0])} (kind {int(res.per_rank('events')[r][bad[0]][0])}) "
                       f"is wrong: increment your own entry before every event, and take the element-wise max on receive")
    return 1.0, ""


def commit(res: CaseResult):
    K, n, crash = res.case.world_size, res.case.data["n"], res.case.data["crash"]
    acks = np.array([sum(1 for f in range(1, K) if f not in crash or crash[f] > i) for i in range(n)])
    want = 2 * (1 + acks) > K
    got = res.value(0, "committed array", shape=(n,), array_only=False)
    for i in range(n):
        if bool(got[i]) != bool(want[i]):
            verdict = "committed" if got[i] else "did not commit"
            raise Fail(f"the leader {verdict} entry {i}, but {1 + acks[i]} of K={K} ranks held it "
                       f"(a majority needs more than {K / 2:g})")
    values = res.per_rank("entries")[0]
    for f in range(1, K):
        if f in crash:
            if not res.crashed(f):
                raise Fail(f"follower {f} should have crashed (injected fault) but returned normally")
            continue
        log = res.value(f, "log", shape=(n,), array_only=False)
        if not np.array_equal(log.astype(np.float64), values):
            raise Fail(f"follower {f}'s log differs from the leader's entries; append exactly what the leader sends")
    return 1.0, ""


TESTS = [
    Test("clocks", "vector clocks match the happened-before order (K = 1-6, long runs, ranks without events)",
         select=lambda c: c.fn == "vector_clock_run", check=clocks),
    Test("commit", "majority commit with no crash", select=lambda c: c.fn == "replicate" and not c.data["crash"],
         check=commit),
    Test("minority", "still commits while fewer than K/2 followers crash",
         select=lambda c: c.fn == "replicate" and 0 < len(c.data["crash"]) < c.world_size / 2, check=commit),
    Test("majority_lost", "never commits once K/2 or more ranks are gone",
         select=lambda c: c.fn == "replicate" and len(c.data["crash"]) >= c.world_size / 2, check=commit),
]
