"""Lab 2: vector clocks and majority commit."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test

UNIMPORTABLE = ("scaleoutai.foundations.clocks", "scaleoutai.foundations.consensus", "scaleoutai.collectives", "scaleoutai.parallel")

CLOCKS = [(1, 5), (2, 12), (3, 20), (5, 30)]  # (K, steps of the global schedule)
# (K, entries, {follower: acks it sends before crashing}); the label says how many crash
COMMIT = [(3, 4, {}), (5, 3, {}), (3, 4, {2: 0}), (5, 4, {1: 0, 4: 0}), (3, 5, {1: 2, 2: 3}),
          (4, 3, {1: 0, 2: 0}), (5, 3, {1: 0, 2: 0, 3: 1}), (2, 3, {1: 0})]


def _schedule(rng: np.random.Generator, K: int, steps: int) -> list[np.ndarray]:
    """Per-rank events projected from one global order, so the run cannot deadlock."""
    events: list[list[tuple[int, int]]] = [[] for _ in range(K)]
    for _ in range(steps):
        a = int(rng.integers(K))
        if K == 1 or rng.random() < 0.3:
            events[a].append((0, a))
        else:
            b = int((a + rng.integers(1, K)) % K)
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


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (K, steps) in enumerate(CLOCKS):
        p.add(Case(id=f"v{i}", fn="vector_clock_run", label=f"vector clocks, K={K}, {steps} events", world_size=K,
                   timeout=8, data={"K": K}), per_rank={"events": _schedule(rng, K, steps)})
    for i, (K, n, crash) in enumerate(COMMIT):
        f = len(crash)
        label = f"K={K}, {n} entries, {f} follower crash{'es' if f != 1 else ''}" + (
            f" (after {sorted(crash.values())} acks)" if any(crash.values()) else "")
        values = rng.standard_normal(n)
        args = [values] + [np.full(n, np.nan) for _ in range(K - 1)]
        p.add(Case(id=f"m{i}", fn="replicate", label=label, world_size=K, timeout=8,
                   faults={"crash": {str(r): c for r, c in crash.items()}}, data={"crash": crash, "n": n}),
              per_rank={"entries": args})
    return p


def clocks(res: CaseResult):
    ref = _reference_clocks(res.per_rank("events"))
    for r, want in enumerate(ref):
        got = res.value(r, "list of clocks", shape=want.shape, array_only=False)
        if got.size and got.dtype.kind not in "iu":
            raise Fail(f"rank {r}'s clocks are {got.dtype}: a vector clock counts events, return an integer array")
        bad = np.nonzero(np.any(got != want, axis=1))[0]
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
    Test("clocks", "vector clocks match the happened-before order (K = 1, 2, 3, 5)",
         select=lambda c: c.fn == "vector_clock_run", check=clocks),
    Test("commit", "majority commit with no crash", select=lambda c: c.fn == "replicate" and not c.data["crash"],
         check=commit),
    Test("minority", "still commits while fewer than K/2 followers crash",
         select=lambda c: c.fn == "replicate" and 0 < len(c.data["crash"]) < c.world_size / 2, check=commit),
    Test("majority_lost", "never commits once K/2 or more ranks are gone",
         select=lambda c: c.fn == "replicate" and len(c.data["crash"]) >= c.world_size / 2, check=commit),
]
