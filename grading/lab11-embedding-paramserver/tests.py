"""Lab 11: a sharded embedding parameter server. The grader runs S servers and W workers of the student's
code on its own simulated network, records every request and answer, and replays them: the sharding rule,
BSP against single-machine SGD (the library's reference_train), every push applied exactly once, every
pull answered with the rows of that moment, the SSP bound from its own log of the clocks, whom each server
listens to (the lab's virtual-time rule, replayed from the server's own trace), which server each key goes to
and the bytes (its own counts, one envelope per message). Speeds are multiples of 2**-10 seconds, so every
virtual time is exact and a tie is a tie however a student sums."""
from __future__ import annotations

import numpy as np

from scaleoutai import datasets
from scaleoutai.collectives import block_range
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after
from scaleoutai.ml import paramserver as ps
from scaleoutai.ml import paramserver_server as wire

UNIMPORTABLE = ("scaleoutai.ml",)  # the course's answer: serve_shard, train_worker
HEAD_BYTES = 8 * wire.HEADER
TOL = 1e-10
BASE_SPEED = 2.0 ** -10  # simulated seconds of compute per clock (exact in binary: sums of speeds tie exactly)

# (S, W, s, straggler factor, clocks T, users, items, d, global batch B)
SPMD = [(1, 1, 0, 1, 6, 5, 7, 3, 8), (2, 3, 0, 1, 8, 6, 10, 3, 12), (3, 2, 0, 1, 8, 6, 10, 3, 12),
        (1, 5, 0, 1, 6, 6, 10, 2, 4), (5, 2, 0, 1, 6, 6, 10, 3, 12), (6, 2, 0, 1, 6, 2, 3, 2, 6),
        (2, 3, 0, 4, 8, 6, 10, 3, 12), (2, 3, 1, 4, 10, 6, 10, 3, 12), (3, 3, 2, 4, 12, 6, 12, 2, 12),
        (1, 4, 3, 5, 14, 5, 9, 2, 8), (2, 2, 9, 3, 6, 4, 6, 2, 6),  # s beyond the run: the bound never holds back
        (2, 3, 1, [1, 3, 2], 6, 5, 8, 2, 9)]  # mixed speeds (units of BASE_SPEED): waiting shifts the virtual times
RANDOM_SPMD = 2  # property cases: random S, W, s, speeds and sizes from the plan's seeded rng
# shard_of(keys, n_rows, S)
CALLS = [(10, 3), (7, 7), (5, 8), (1, 1), (100, 6), (13, 4), (64, 1), (9, 2), (7, 5),
         (70_000, 3), (5_000_000_011, 7)]  # keys beyond 2**16 and 2**32: an int16 or int32 wraps
RANDOM_CALLS = 3
WIDE = 1 << 31


def _random_spmd(rng: np.random.Generator) -> tuple:
    """(S, W, s, speeds in units of BASE_SPEED, T, users, items, d, B): a property case with mixed speeds."""
    W = int(rng.integers(2, 5))
    return (int(rng.integers(1, 5)), W, int(rng.integers(0, 4)), [int(x) for x in rng.integers(1, 5, size=W)],
            int(rng.integers(4, 9)), int(rng.integers(2, 8)), int(rng.integers(2, 10)), 2, int(rng.integers(2, 13)))


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (S, W, s, slow, T, nu, ni, d, B) in enumerate(SPMD + [_random_spmd(rng) for _ in range(RANDOM_SPMD)]):
        seed = int(rng.integers(1 << 16))
        n_rows, n, lr = nu + ni, 5 * B, 0.5
        users, items, r = datasets.low_rank_ratings(nu, ni, n, rank=2, seed=seed)
        batches = np.stack([ps.batch_indices(n, B, c, seed) for c in range(T)])
        table0 = ps.init_rows(np.arange(n_rows), d, seed)
        owner = wire.owner_of(np.arange(n_rows), n_rows, S, "range")
        keys = [np.flatnonzero(owner == j).astype(np.int64) for j in range(S)]
        mixed = isinstance(slow, list)  # every worker its own speed (in units of BASE_SPEED)
        speeds = BASE_SPEED * (np.array(slow, dtype=np.float64) if mixed else np.ones(W))
        if not mixed:
            speeds[-1] *= slow
        extra = ((f", worker speeds {slow}" if mixed else f", worker {W - 1} is {slow}x slower" if slow > 1 else "")
                 + (", more servers than rows" if S > n_rows else "") + (", W > B" if W > B else ""))
        label = f"S={S} servers, W={W} workers, s={s}, {T} clocks, {n_rows} rows of d={d}{extra}, simulator"
        data = {"record_messages": True, "S": S, "W": W, "s": s, "slow": 1 if mixed else slow, "T": T, "d": d,
                "B": B, "lr": lr, "n_users": nu, "n_rows": n_rows, "users": users, "items": items, "r": r,
                "batches": batches, "table0": table0, "keys": keys, "seed": seed, "speeds": speeds,
                "mixed": mixed}
        case = Case(id=f"p{i:02d}", fn="run_ps", label=label, world_size=S + W, timeout=15, data=data)
        p.add_in_order(case, [("=", S), ("shard_keys", keys + [np.zeros(0, np.int64)] * W),
                              ("shard_rows", [table0[k] for k in keys] + [np.zeros((0, d))] * W),
                              ("users", users), ("items", items), ("r", r), ("batches", batches),
                              ("speeds", speeds), ("=", nu), ("=", n_rows), ("=", lr), ("=", s)])
    calls = CALLS + [(int(rng.integers(1, 1 << 40)), int(rng.integers(1, 13))) for _ in range(RANDOM_CALLS)]
    for i, (n_rows, S) in enumerate(calls):
        keys = rng.integers(0, n_rows, size=min(3 * n_rows + 2, 400)).astype(np.int64)
        keys[:2] = [0, n_rows - 1]  # both ends of the table
        case = Case(id=f"c{i:02d}", fn="shard_of", mode="call", timeout=5, data={"n_rows": n_rows, "S": S},
                    label=f"shard_of({len(keys)} keys in random order, n_rows={n_rows}, S={S})")
        p.add_in_order(case, [("keys", keys), ("=", n_rows), ("=", S)])
    return p


def shard_rule(res: CaseResult):
    d = res.case.data
    keys = res.shared("keys")
    got = res.value(0, "shard_of result")
    if got.dtype.kind not in "iu" or got.shape != keys.shape:
        raise Fail(f"returned {got.dtype} of shape {got.shape}; return one integer server id per key")
    want = wire.owner_of(keys, d["n_rows"], d["S"], "range")
    bad = np.flatnonzero(got.astype(np.int64) != want)
    if len(bad):
        k = int(keys[bad[0]])
        narrow = (f" (keys beyond 2**31 here: is an integer type too narrow for n_rows={d['n_rows']}?)"
                  if d["n_rows"] > WIDE else "")
        raise Fail(f"{len(bad)} of {len(keys)} keys go to the wrong server, e.g. key {k} to {int(got[bad[0]])}: "
                   f"cut the rows into S contiguous blocks as np.array_split does (the first n_rows mod S blocks "
                   f"one row longer), not key % S{narrow}")
    return 1.0, ""


def _request(res: CaseResult, q: int, j: int, msg: np.ndarray) -> tuple:
    d = res.case.data["d"]
    raw = np.ascontiguousarray(msg).reshape(-1).view(np.uint8)
    what = f"worker {q}'s message to server {j} is not pack(kind, clock, push_keys, pull_keys, push_rows)"
    if raw.nbytes < HEAD_BYTES:
        raise Fail(what)
    head = raw[:HEAD_BYTES].view(np.int64)
    n_push, n_pull = (int(x) for x in head[3:5])
    if n_push < 0 or n_pull < 0 or raw.nbytes != HEAD_BYTES + 8 * (n_push + n_pull) + 8 * d * n_push:
        raise Fail(what)
    kind, c, _, push, pull, rows = wire.unpack(raw, d, np.float64)
    n_rows = res.case.data["n_rows"]
    for ks in (push, pull):
        if len(ks) and (ks.min() < 0 or ks.max() >= n_rows):
            raise Fail(f"worker {q} sent server {j} a key outside 0..{n_rows - 1}")
    return kind, c, push.copy(), pull.copy(), rows.copy()


def _replay(res: CaseResult) -> dict:
    """The grader's log, from its own trace and recorded messages: per server, the requests it received and
    the answers it sent in its own order; the rows each answer should hold; the clock gap at each answer."""
    if "_log" in res.meta:
        return res.meta["_log"]
    d = res.case.data
    S, W, lr = d["S"], d["W"], d["lr"]
    queues: dict[tuple[int, int], list] = {}
    for src, dst, msg in res.messages:
        queues.setdefault((src, dst), []).append(msg)
    log = {"requests": [], "answers": 0, "max_gap": 0, "gap_at": None, "pushed": [], "errors": [], "events": []}
    for j in range(S):
        rows = d["table0"][d["keys"][j]].copy()
        keys = d["keys"][j]
        latest, pending = [0] * W, [None] * W
        taken, events = {}, []
        log["events"].append(events)  # (what, worker, kind): server j's receives and answers in its own order
        for e in (e for e in res.trace if e.rank == j):
            q = e.peer - S
            if q < 0:
                raise Fail(f"server {j} exchanged a message with server {e.peer}; servers talk only to workers")
            n = taken.get((e.kind, e.peer), 0)
            taken[(e.kind, e.peer)] = n + 1
            if e.kind == "recv":
                kind, c, push, pull, grads = _request(res, q, j, queues[(e.peer, j)][n])
                log["requests"].append((q, j, kind, c, push, pull, grads))
                events.append(("recv", q, kind))
                own = np.isin(push, keys)
                loc = np.searchsorted(keys, push[own])
                np.subtract.at(rows, loc, lr * grads[own])
                log["pushed"].append((push, grads))
                latest[q] = c
                pending[q] = None if kind == wire.KIND_DONE else (c, pull)
            else:
                if pending[q] is None:
                    raise Fail(f"server {j} sent worker {q} a message it had not asked for (one answer per request)")
                c, pull = pending[q]
                pending[q] = None
                events.append(("send", q, None))
                log["answers"] += 1
                gap = c - min(latest)
                if gap > log["max_gap"] or log["gap_at"] is None:
                    log["max_gap"], log["gap_at"] = max(gap, log["max_gap"]), (j, q, c, min(latest))
                ans = np.asarray(queues[(j, e.peer)][n])
                if ans.shape != (len(pull), d["d"]) or ans.dtype.kind != "f":
                    log["errors"].append(f"server {j} answered worker {q}'s pull of {len(pull)} keys at clock {c} with "
                                         f"a {ans.dtype} array of shape {ans.shape}; send the rows, shape "
                                         f"({len(pull)}, d)")
                    continue
                want = rows[np.searchsorted(keys, pull[np.isin(pull, keys)])]
                if want.shape != ans.shape or not np.allclose(ans, want, rtol=0, atol=TOL):
                    log["errors"].append(f"server {j} answered worker {q}'s pull at clock {c} with rows that are not "
                                         f"its rows at that moment (every push it had received applied, once)")
        unanswered = [q for q in range(W) if pending[q] is not None]
        if unanswered:
            log["errors"].append(f"server {j} never answered worker {unanswered[0]}'s last pull")
    res.meta["_log"] = log
    return log


def _final(res: CaseResult) -> np.ndarray:
    d = res.case.data
    table = np.empty_like(d["table0"])
    for j in range(d["S"]):
        got = res.value(j, f"server {j}'s final rows", shape=(len(d["keys"][j]), d["d"]))
        table[d["keys"][j]] = got
    return table


def _exactly_once(res: CaseResult) -> None:
    d = res.case.data
    log = _replay(res)
    want = d["table0"].copy()
    for push, grads in log["pushed"]:
        np.subtract.at(want, push, d["lr"] * grads)
    n_push = sum(len(p) for p, _ in log["pushed"])
    try:
        close(_final(res), want, 0, TOL, f"the final table (after {n_push} pushed rows)")
    except Fail as exc:
        raise Fail(f"{exc}: each pushed gradient row must be applied exactly once (row -= lr * grad), "
                   f"none lost, none twice") from None


def _current(res: CaseResult) -> None:
    log = _replay(res)
    if log["errors"]:
        raise Fail(f"{len(log['errors'])} answers are wrong, e.g. {log['errors'][0]}")


def exactly_once(res: CaseResult):
    _exactly_once(res)
    return 1.0, ""


def pulls_current(res: CaseResult):
    _current(res)
    return 1.0, ""


def bsp_exact(res: CaseResult):
    d = res.case.data
    table, losses = ps.reference_train(d["n_rows"], d["d"], d["users"], d["items"], d["r"], d["n_users"], d["B"],
                                       d["T"], d["lr"], seed=d["seed"])
    close(_final(res), table, 0, TOL, "with s=0 the final table (single-machine SGD on the same batches)")
    sse = sum(res.value(d["S"] + k, f"worker {k}'s sums of squared errors", shape=(d["T"],)).astype(np.float64)
              for k in range(d["W"]))
    close(sse / (2 * d["B"]), losses, 0, TOL, "with s=0 the loss of each clock (all workers' sse / 2B)")
    return 1.0, ""


def _gated(res: CaseResult) -> dict:
    graded_after(lambda: (_exactly_once(res), _current(res)), "the server's rows (exactly once, current pulls)")
    return _replay(res)


def _rule_gap(d: dict) -> int:
    """The largest clock gap the lab's rule reaches with these speeds: one server, workers that request clocks
    0..T-1 and then DONE, answered under the bound s in virtual time (every server makes the same choices)."""
    W, T, s, speeds = d["W"], d["T"], d["s"], [float(x) for x in d["speeds"]]
    state, completed, vt, now, top = ["answered"] * W, [0] * W, [0.0] * W, 0.0, 0
    asked = [0] * W
    while any(st != "done" for st in state):
        ready = [k for k in range(W) if state[k] == "answered"]
        if ready:
            k = min(ready, key=lambda q: (vt[q], q))
            now, completed[k] = vt[k], asked[k]
            state[k], asked[k] = ("done" if asked[k] == T else "waiting"), asked[k] + 1
        slowest = min(completed)
        allowed = [q for q in range(W) if state[q] == "waiting" and completed[q] - slowest <= s]
        if not ready and not allowed:
            break
        for q in allowed:
            vt[q], state[q], top = max(now, vt[q]) + speeds[q], "answered", max(top, completed[q] - slowest)
    return top


def staleness(res: CaseResult):
    d, log = res.case.data, _gated(res)
    s = d["s"]
    j, q, c, m = log["gap_at"]
    if log["max_gap"] > s:
        raise Fail(f"the grader's log of the clocks: server {j} answered worker {q}'s pull of clock {c} while the "
                   f"slowest worker had only reached clock {m}, a gap of {c - m} > s={s}: answer only when "
                   f"c - min completed <= s")
    reach = min(s, _rule_gap(d))  # what the rule reaches; another listening order is the schedule test's mistake
    if log["max_gap"] < reach:
        graded_after(lambda: schedule(res), "whom each server listens to")
        raise Fail(f"with these worker speeds the fast workers never ran more than {log['max_gap']} clocks ahead, "
                   f"where s={s} lets them run {reach}: the bound is stricter than asked (SSP lets them run s "
                   f"clocks ahead)")
    return 1.0, ""


def schedule(res: CaseResult):
    """Whom each server listens to, replayed from its own trace: the answered, not-done worker with the smallest
    virtual time vt_k (ties: the lower k), vt_k = max(now, vt_k) + speeds[k] at each answer. The answers are the
    ones the server made: whether they respect the bound is the staleness test's."""
    d, log = res.case.data, _gated(res)
    W, speeds = d["W"], [float(x) for x in d["speeds"]]
    for j, events in enumerate(log["events"]):
        state, vt, now, received = ["answered"] * W, [0.0] * W, 0.0, 0
        for what, q, kind in events:
            if what == "send":
                vt[q] = max(now, vt[q]) + speeds[q]
                state[q] = "answered"
                continue
            ready = [k for k in range(W) if state[k] == "answered"]
            want = min(ready, key=lambda k: (vt[k], k)) if ready else None
            received += 1
            if q != want:
                rule = (f"worker {want} (virtual time {vt[want] / BASE_SPEED:g} units; worker {q}'s is "
                        f"{vt[q] / BASE_SPEED:g})" if want is not None else "no one: every worker waits for an answer")
                raise Fail(f"server {j}'s receive number {received} waited for worker {q}, but the lab's virtual-time "
                           f"rule listens to {rule}: the answered worker with the smallest vt_k, ties to the lower k, "
                           f"with vt_k = max(now, vt_k) + speeds[k] when k is answered (not the order requests "
                           f"arrive in, nor a fixed round of the workers)")
            now = vt[q]
            state[q] = "done" if kind == wire.KIND_DONE else "waiting"
    return 1.0, ""


def owners(res: CaseResult):
    d, log = res.case.data, _gated(res)
    for q, j, kind, c, push, pull, _ in log["requests"]:
        keys = np.concatenate([push, pull])
        own = wire.owner_of(keys, d["n_rows"], d["S"], "range")
        if (own != j).any():
            k = int(keys[own != j][0])
            raise Fail(f"worker {q} sent key {k} to server {j} at clock {c}, but server {int(own[own != j][0])} owns "
                       f"it: send each key only to the server shard_of names")
    return 1.0, ""


def _batch_keys(d: dict, k: int, c: int) -> np.ndarray:
    lo, hi = block_range(d["B"], d["W"], k)
    idx = d["batches"][c][lo:hi]
    return np.unique(np.concatenate([d["users"][idx], d["n_users"] + d["items"][idx]]))


def sparse(res: CaseResult):
    d, log = res.case.data, _gated(res)
    S, W, T, dd = d["S"], d["W"], d["T"], d["d"]
    pulled: dict[tuple[int, int], list] = {}
    for q, j, kind, c, push, pull, _ in log["requests"]:
        pulled.setdefault((q, c), []).append(pull)
    for k in range(W):
        sizes = [len(_batch_keys(d, k, c)) for c in range(T)]
        for c in range(T):
            got = np.sort(np.concatenate(pulled.get((k, c), [np.zeros(0, np.int64)])))
            want = _batch_keys(d, k, c)
            if not np.array_equal(got, want):
                raise Fail(f"worker {k} pulled {len(got)} rows at clock {c}, but its batch touches {len(want)} "
                           f"(pull exactly the rows this clock's batch touches: no more, and no row kept from an "
                           f"earlier clock, which would be stale)")
        # one request per server and clock (and DONE), each a 1-D message with its envelope
        bound = sum(S * (HEAD_BYTES + envelope_bytes(1)) + 8 * (n + p) + 8 * dd * p
                    for n, p in zip(sizes + [0], [0] + sizes))
        st = res.stats(S + k)
        if st["bytes_sent"] > bound:
            raise Fail(f"worker {k} sent {st['bytes_sent']} B (the grader's count); its batches' keys and "
                       f"gradients need at most {bound} B: push only the rows its batch touched")
        want_in = 8 * dd * sum(sizes) + T * S * envelope_bytes(2)  # one (rows, d) answer per server and clock
        if st["bytes_received"] > want_in:
            raise Fail(f"worker {k} received {st['bytes_received']} B (the grader's count), but the rows its "
                       f"batches touch are {want_in} B: a sparse pull, not the whole table")
    return 1.0, ""


def _spmd(c: Case) -> bool:
    return c.mode == "spmd"


TESTS = [
    Test("shard_rule", "shard_of follows the range rule for every key (S > n_rows included)",
         select=lambda c: c.fn == "shard_of", check=shard_rule),
    Test("bsp_exact", "s=0 (BSP) equals single-machine SGD: final table and every clock's loss (several S, W)",
         select=lambda c: _spmd(c) and c.data["s"] == 0, check=bsp_exact),
    Test("exactly_once", "every pushed gradient row is applied exactly once (the grader's record of the pushes)",
         select=_spmd, check=exactly_once),
    Test("pulls_current", "every pull is answered, once, with the server's rows of that moment",
         select=_spmd, check=pulls_current),
    Test("staleness", "with a slow worker the grader's clock log shows gaps up to s and never above",
         select=lambda c: _spmd(c) and (c.data["slow"] > 1 or c.data["mixed"]), check=staleness),
    Test("schedule", "each server listens to the worker the virtual-time rule names (smallest vt_k, ties to the "
         "lower k), replayed from the server's own trace", select=_spmd, check=schedule),
    Test("owners", "each key goes only to the server that owns it", select=_spmd, check=owners),
    Test("sparse", "a worker pulls exactly its batch's rows; bytes within the sparse bound (the grader's counts)",
         select=_spmd, check=sparse),
]
