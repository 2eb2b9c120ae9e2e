"""Lab 9: session windows over P source partitions read by K ranks, with per-partition watermarks
(minimum over partitions, +inf once a partition is exhausted) carried in the event frames. Each rank is
handed only its own partitions; the grader replays the whole schedule on one machine here (sessions, the
step each is emitted at, late events) and reads its own trace: one frame per ordered pair of ranks per
step, each the float64 [w_r(i), t, k, v, ...] of the sender's watermark and its on-time events for the receiver."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

# (K, P, events, keys, steps, gap, delta, times, values, owners, shape, note). times/values: "int" or "float";
# "epoch" = int64 milliseconds since 1970 (past 2**40). owners: "mod" (p % K), "block", "random".
# shape: "plain", "late_start" (some partitions deliver nothing for the first steps: W stays -inf),
# "early_end" (some finish early: W_p = +inf), "empty" (some partitions hold no event).
REGULAR = [(1, 3, 150, 5, 8, 60, 40, "int", "int", "mod", "plain", ""),
           (2, 4, 200, 6, 10, 45.5, 30.25, "float", "float", "mod", "plain", ""),
           (3, 5, 260, 7, 12, 60, 90, "int", "float", "mod", "late_start", ", partitions that start late"),
           (5, 7, 300, 9, 10, 37.5, 50.0, "float", "int", "random", "early_end", ", partitions that finish early"),
           (4, 9, 300, 11, 12, 60, 20, "int", "int", "random", "plain", ", 2-3 partitions per rank"),
           (3, 6, 240, 5, 9, 50, 30, "epoch", "int", "block", "early_end", ", epoch-ms times past 2^40"),
           (2, 5, 220, 4, 14, 80, 120, "int", "int", "random", "late_start", ", uneven partitions")]
EDGE = [(6, 3, 90, 4, 8, 60, 40, "int", "int", "mod", "plain", ": K > P (ranks that read nothing)"),
        (5, 4, 80, 2, 7, 45.5, 20.0, "float", "float", "random", "empty", ": K > keys, empty partitions"),
        (3, 2, 1, 3, 4, 60, 10, "int", "float", "mod", "plain", ": one event in the whole stream"),
        (4, 3, 0, 3, 5, 60, 10, "int", "int", "mod", "empty", ": no event at all"),
        (7, 9, 150, 3, 3, 60, 60, "int", "int", "random", "early_end", ": K=7, 3 keys, 3 steps"),
        (2, 1, 120, 3, 10, 40, 10, "float", "int", "mod", "plain", ": one partition, rank 1 reads nothing")]
PROCESS = [(2, 4, 160, 5, 8, 60, 40, "int", "float", "mod", "late_start", "")]
PROPERTY = 4  # seeded random cases: one set of logs, several drawn schedules (interleavings), K and owners
UNIMPORTABLE = ("scaleoutai.data", "scaleoutai.collectives")  # the chapter's windows, shuffle and all-reduce
ASKS = ("the lab asks for session windows (a session is [first time, last time + gap), an event that bridges two "
        "sessions merges them) emitted when the minimum of the per-partition watermarks passes their end; the "
        "chapter's fixed windows and its all-reduced watermark are not it")


EPOCH = 1_700_000_000_000  # milliseconds since 1970 in late 2023


def _logs(rng, P, n, keys, gap, times, values, shape):
    """Per partition: (time, key, value) in log order over a common span of time (about one gap between
    a key's events), with disorder of up to a gap and a few events 2-6 gaps behind their neighbours."""
    weights = rng.random(P) ** 2 + 0.05
    if shape == "empty":
        weights[rng.permutation(P)[:max(1, P // 2)]] = 0
    sizes = rng.multinomial(n, weights / weights.sum()) if n else np.zeros(P, int)
    span = max(n, 1) * float(gap) / keys
    logs = []
    for size in sizes:
        t = np.sort(rng.uniform(0, span, size)) + rng.uniform(-float(gap), float(gap), size)
        far = rng.random(size) < 0.08
        t[far] -= rng.integers(2, 7, far.sum()) * float(gap)
        t = t if times == "float" else (np.round(t / 10) * 10).astype(np.int64) + (EPOCH if times == "epoch" else 0)
        v = rng.standard_normal(size) * 10 if values == "float" else rng.integers(-50, 51, size)
        logs.append((t, rng.integers(0, keys, size).astype(np.int64), v))
    return logs, span


def _schedule(rng, logs, steps, shape, span):
    """The step each event is delivered at: about where its time falls in the span, jittered by -1..2
    steps (a seeded interleaving), never decreasing along a log; clipped to [lo, hi] for late starters
    and early finishers."""
    out = []
    for p, (t, _, _) in enumerate(logs):
        lo = int(rng.integers(1, max(2, steps // 2))) if shape == "late_start" and p % 2 == 0 else 0
        hi = int(rng.integers(lo, steps)) if shape == "early_end" and p % 2 == 1 else steps - 1
        base = np.floor((np.asarray(t, np.float64) - (EPOCH if np.max(t, initial=0) > EPOCH else 0)) / span * steps)
        s = np.maximum.accumulate(np.clip(base + rng.integers(-1, 3, len(t)), lo, hi)) if len(t) else base
        out.append(s.astype(np.int64))
    return out


def _owners(rng, P, K, how):
    if how == "mod":
        return np.arange(P) % K
    if how == "block":
        return np.arange(P) * K // max(P, 1)
    return rng.integers(0, K, P)


def _add(p: Plan, cid, kind, spec, logs, sched, owner, note):
    K, P, n, keys, steps, gap, delta, times, values = spec[:9]
    tdt, vdt = np.float64 if times == "float" else np.int64, np.float64 if values == "float" else np.int64
    per = {name: [] for name in ("owned", "part", "step", "time", "key", "value")}
    for r in range(K):
        mine = [q for q in range(P) if owner[q] == r]
        per["owned"].append(np.array(mine, dtype=np.int64))
        per["part"].append(np.concatenate([np.zeros(0, np.int64)] + [np.full(len(logs[q][0]), q, np.int64) for q in mine]))
        per["step"].append(np.concatenate([np.zeros(0, np.int64)] + [sched[q] for q in mine]))
        for j, name, dt in ((0, "time", tdt), (1, "key", np.int64), (2, "value", vdt)):
            per[name].append(np.concatenate([np.zeros(0, dt)] + [logs[q][j].astype(dt) for q in mine]))
    backend = "process" if kind == "process" else "sim"
    sizes = [len(x[0]) for x in logs]
    label = (f"K={K}, P={P} partitions of {min(sizes, default=0)}..{max(sizes, default=0)} events, {keys} keys, "
             f"{steps} steps, gap={gap}, delta={delta}, {times} times, {values} values, "
             f"{'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_sessions", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 15,
                data={"kind": kind, "logs": logs, "sched": sched, "owner": owner, "steps": steps, "gap": gap,
                      "delta": delta, "floaty": values == "float",
                      "record_messages": backend == "sim"})
    p.add_in_order(case, [(name, per[name]) for name in per] + [("=", steps), ("=", gap), ("=", delta)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    specs = [("regular", s) for s in REGULAR] + [("edge", s) for s in EDGE] + [("process", s) for s in PROCESS]
    for i, (kind, s) in enumerate(specs):
        logs, span = _logs(rng, s[1], s[2], s[3], s[5], s[7], s[8], s[10])
        _add(p, f"c{i:02d}", kind, s, logs, _schedule(rng, logs, s[4], s[10], span), _owners(rng, s[1], s[0], s[9]),
             s[11])
    P, steps = int(rng.integers(3, 8)), int(rng.integers(6, 12))
    n, keys = int(rng.integers(120, 240)), int(rng.integers(3, 9))
    logs, span = _logs(rng, P, n, keys, 50, "int", "int", "plain")
    for i in range(PROPERTY):  # the same logs, a fresh interleaving each time
        K, shape = int(rng.integers(1, 9)), ("plain", "late_start", "early_end", "plain")[i]
        spec = (K, P, n, keys, steps, 50, 40, "int", "int")
        _add(p, f"p{i}", "random", spec, logs, _schedule(rng, logs, steps, shape, span), _owners(rng, P, K, "random"),
             f": seeded random interleaving {i} of one set of logs ({shape})")
    return p


def _marks(res: CaseResult) -> np.ndarray:
    """W_p(i) for every step i (rows) and partition p (columns)."""
    d = res.case.data
    out = np.full((d["steps"], len(d["logs"])), np.inf)
    for p, ((t, _, _), s) in enumerate(zip(d["logs"], d["sched"])):
        for i in range(d["steps"]):
            if len(s) and i < s[-1]:
                out[i, p] = float(t[s <= i].max()) - d["delta"] if (s <= i).any() else -np.inf
    return out


def _replay(res: CaseResult):
    """({(key, start, end): (step, count, sum)}, (partition, step, key, on time) per event, dropped)."""
    d = res.case.data
    logs, sched, gap = d["logs"], d["sched"], d["gap"]
    marks = list(_marks(res).min(axis=1, initial=np.inf))
    t = np.concatenate([np.zeros(0)] + [x[0].astype(np.float64) for x in logs])
    k = np.concatenate([np.zeros(0, np.int64)] + [x[1] for x in logs])
    v = np.concatenate([np.zeros(0)] + [x[2].astype(np.float64) for x in logs])
    s = np.concatenate([np.zeros(0, np.int64)] + list(sched))
    part = np.concatenate([np.zeros(0, np.int64)] + [np.full(len(x[0]), q) for q, x in enumerate(logs)])
    keep = t >= np.array([-np.inf] + marks)[s]
    out = {}
    for key in np.unique(k[keep]):
        sel = keep & (k == key)
        order = np.argsort(t[sel], kind="stable")
        ts, vs = t[sel][order], v[sel][order]
        cuts = np.flatnonzero(np.diff(ts) >= gap) + 1
        for a, b in zip(np.split(ts, cuts), np.split(vs, cuts)):
            end = a[-1] + gap
            out[(int(key), float(a[0]), float(end))] = (next(i for i, w in enumerate(marks) if end <= w), len(a),
                                                        float(b.sum()))
    return out, (part, s, k, keep), int((~keep).sum())


def _rows(res: CaseResult):
    K, got, dropped = res.case.world_size, {}, 0
    for r in range(K):
        arr = res.value(r, "rows (run_sessions' array)", dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 6 or arr.shape[0] < 1:
            raise Fail(f"rank {r}'s rows have shape {arr.shape}; run_sessions returns (1 + rows, 6)")
        dropped += arr[0, 0]
        for step, key, start, end, count, total in arr[1:]:
            if int(key) % K != r:
                raise Fail(f"rank {r} emitted a session of key {int(key)}: a key's sessions live on rank key % K")
            where = (int(key), float(start), float(end))
            if where in got:
                raise Fail(f"a session of key {int(key)} was emitted twice: emit a session once, when final")
            got[where] = (step, count, total)
    return got, dropped


def _sessions(res: CaseResult) -> None:
    want, _, _ = _replay(res)
    got, _ = _rows(res)
    missing, extra = len(want.keys() - got.keys()), len(got.keys() - want.keys())
    if missing or extra:
        none = (" (none was emitted: W never passed their end; a rank that reads no partition counts as +inf, and so "
                "does a partition that has delivered its last event)") if want and not got else ""
        raise Fail(f"{missing} of {len(want)} sessions (key, start, end) are missing and {extra} emitted sessions "
                   f"are not in the replay{none}. A session holds a key's events closer than gap to the next (a gap of "
                   f"exactly gap splits). {ASKS}")
    rtol = 1e-9 if res.case.data["floaty"] else 0.0
    bad = sum(got[w][1] != want[w][1] or abs(got[w][2] - want[w][2]) > rtol * (1 + abs(want[w][2])) for w in want)
    if bad:
        raise Fail(f"{bad} of {len(want)} sessions have the right bounds but a wrong count or sum (when an event "
                   f"bridges two sessions, the merged one adds both counts and sums)")


def _steps(res: CaseResult) -> None:
    want, _, _ = _replay(res)
    got, _ = _rows(res)
    early = sum(got[w][0] < want[w][0] for w in want)
    late = sum(got[w][0] > want[w][0] for w in want)
    if early or late:
        raise Fail(f"{early} sessions were emitted before and {late} after the step at which W(i), the minimum over "
                   f"all partitions of W_p (max time delivered - delta, -inf before the first event, +inf once "
                   f"exhausted), passed their end; emit at step i once step i's frames are in")


def _late(res: CaseResult) -> None:
    _, _, dropped = _replay(res)
    _, got = _rows(res)
    if got != dropped:
        raise Fail(f"the ranks counted {int(got)} late events, the replay {'more' if dropped > got else 'fewer'}: an "
                   f"event delivered at step i is late when t < W(i-1), the minimum over partitions of the previous "
                   f"step (so no partition's events turn late because another ran ahead)")


def sessions(res):
    _sessions(res)
    return 1.0, ""


def emitted_at(res):
    graded_after(lambda: _sessions(res), "every session")
    _steps(res)
    return 1.0, ""


def late(res):
    _late(res)
    return 1.0, ""


def correct(res):
    _sessions(res)
    _steps(res)
    _late(res)
    return 1.0, ""


def _graded(res):
    graded_after(lambda: correct(res), "every session, its step and the late count")


def _sends(res: CaseResult, r: int):
    return [e for e in res.trace if e.rank == r and e.kind == "send"]


def one_message(res: CaseResult):
    """Exactly one message from each rank to each other rank per step: the watermark rides with the events."""
    _graded(res)
    K, steps = res.case.world_size, res.case.data["steps"]
    for r in range(K):
        sent = _sends(res, r)
        per = np.bincount([e.peer for e in sent], minlength=K)
        if per[r] or any(per[d] != steps for d in range(K) if d != r):
            raise Fail(f"rank {r} sent {len(sent)} messages ({int(per.min())} to {int(per.max())} per rank) in "
                       f"{steps} steps; the protocol is one frame to every other rank per step, {steps * (K - 1)} in "
                       f"all: the watermark travels in the frame, not in an all-reduce of its own. {ASKS}")
    return 1.0, ""


def frames(res: CaseResult):
    """The i-th message from r to d is step i's frame: a 1-D float64 [w_r(i), t, k, v, ...] holding r's
    on-time events for d's keys (late events are never shipped), w_r(i) the minimum of r's partitions' W_p."""
    _graded(res)
    K, steps = res.case.world_size, res.case.data["steps"]
    _, (part, s, k, keep), _ = _replay(res)
    owner = np.asarray(res.case.data["owner"])
    reader = owner[part] if len(part) else np.zeros(0, int)
    marks = _marks(res)
    for r in range(K):
        for d in range(K):
            got = [a for src, dst, a in res.messages if src == r and dst == d]
            if d == r or len(got) != steps:
                continue  # one_message says what is wrong
            for i, frame in enumerate(got):
                n = int((keep & (reader == r) & (s == i) & (k % K == d)).sum())
                head = f"rank {r}'s frame of step {i} to rank {d}"
                if frame.dtype != np.float64 or frame.shape != (1 + 3 * n,):
                    shipped = int(((reader == r) & (s == i) & (k % K == d)).sum())
                    why = ("late events are dropped before the send" if frame.size == 1 + 3 * shipped > 1 + 3 * n
                           else "a frame is one 1-D float64 array [w, t_0, k_0, v_0, ...] of 1 + 3n entries")
                    raise Fail(f"{head} is {frame.dtype} of shape {frame.shape}; with its {n} on-time events for rank "
                               f"{d} it is float64 of shape ({1 + 3 * n},) ({why})")
                w = marks[i, owner == r].min(initial=np.inf)
                if frame[0] != w:
                    raise Fail(f"{head} does not start with the sender's watermark w_r(i), the minimum of W_p(i) "
                               f"over the partitions it reads (+inf if none): the watermark travels in the frame")
    return 1.0, ""


TESTS = [
    Test("sessions", "every session (key, [first, last + gap), count, sum) of the on-time events, on its key's owner "
         "(K = 1, 2, 3, 4, 5, int, float and epoch times)", select=lambda c: c.data["kind"] == "regular", check=sessions),
    Test("emitted_at", "each session is emitted at the step the minimum of the per-partition watermarks passes its end",
         select=lambda c: c.data["kind"] == "regular", check=emitted_at),
    Test("late", "late events (t < W(i-1)) are dropped and counted by the rank that read them",
         select=lambda c: c.data["kind"] == "regular", check=late),
    Test("edge_cases", "K > P, K > keys, empty partitions, one event, no event", select=lambda c: c.data["kind"] == "edge",
         check=correct),
    Test("interleavings", "seeded random interleavings of one set of logs equal the replay", check=correct,
         select=lambda c: c.data["kind"] == "random"),
    Test("correct_process", "the protocol is right on 2 real processes", select=lambda c: c.data["kind"] == "process",
         check=correct),
    Test("one_message", "one frame per ordered pair of ranks per step (the grader's trace)",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=one_message),
    Test("frames", "every frame is the sender's watermark and its on-time events for the receiver, float64 (the "
         "grader's recorded messages)", select=lambda c: c.backend == "sim" and c.world_size > 1, check=frames),
]
