"""Lab 11: an elastic embedding parameter server with momentum. The grader runs S servers (server S-1 joins at
clock J) and W workers of the student's code on its own simulated network, records every message and replays
it: the consistent-hash ring, the final rows and losses against single-machine momentum SGD on the whole table
(every row moves at every step), every answer against the rows of that moment, where each request and key
goes (clock c's ring), the migration at the join (exactly the rows that move, values and velocities) and the
bytes (its own counts, one envelope per message). One case runs on 3 real processes."""
from __future__ import annotations

import numpy as np

from scaleoutai.collectives import block_range
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after

UNIMPORTABLE = ("scaleoutai.ml", "scaleoutai.data.storage")  # the course's parameter server and its hash ring
KIND_REQUEST, KIND_MIGRATE, KIND_DONE = range(3)
HEAD = 40  # 5 int64 header words
TOL = {"float64": (1e-9, 1e-9), "float32": (2e-4, 1e-4)}  # (atol, rtol): any order of summation passes
ASKS = ("the lab asks for heavy-ball momentum on the server applied to every row at every step (a row nobody "
        "pushed still moves by its decayed velocity, caught up lazily); SGD on the pushed rows only, as the "
        "chapter's server applies it, does not")
# (S, W, join J, vnodes, clocks T, users, items, d, global batch B, dtype, note)
SPMD = [(1, 1, 0, 1, 5, 4, 6, 2, 6, "float64", ", one server"),
        (2, 3, 3, 4, 8, 6, 10, 3, 12, "float64", ""),
        (3, 2, 2, 3, 8, 6, 10, 3, 12, "float32", ""),
        (4, 3, 1, 2, 6, 6, 12, 2, 9, "float64", ", the join at clock 1"),
        (3, 5, 4, 5, 7, 5, 8, 2, 4, "float64", ", W > B: workers without ratings"),
        (5, 2, 3, 1, 6, 3, 4, 2, 6, "float64", ", 1 point per server: servers that own nothing"),
        (2, 2, 5, 8, 6, 5, 7, 2, 8, "float32", ", the join at the last clock"),
        (3, 3, 0, 4, 6, 6, 10, 3, 12, "float64", ", all servers from the start"),
        (6, 2, 2, 3, 6, 2, 3, 2, 6, "float64", ", more servers than rows"),
        (3, 2, 2, 4, 6, 5_000_000_011, 7, 2, 8, "float32", ", user ids beyond 2**32")]
PROCESS = (2, 1, 4, 3, 6, 6, 12, 2, 4, "float64", "")
RANDOM_SPMD = 2
# ring_owner(keys, members, vnodes): (members, vnodes, largest key)
CALLS = [([0], 1, 100), ([0, 1, 2], 2, 1000), ([3, 1, 7], 4, 1 << 20), ([2, 5], 16, 1 << 40), (list(range(10)), 3, 500),
         ([4], 5, 7), ([1, 0], 1, 5_000_000_011), ([9, 2, 6, 4], 8, (1 << 62) - 1)]
RANDOM_CALLS = 2


def _splitmix(x):
    h = np.atleast_1d(np.asarray(x)).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        h = (h ^ (h >> np.uint64(shift))) * np.uint64(mult)
    return h ^ (h >> np.uint64(31))


def _start_rows(ids, width, seed, dtype):
    u = np.asarray(ids, dtype=np.int64).astype(np.uint64)[:, None] * np.uint64(width)
    h = _splitmix(u + np.arange(width, dtype=np.uint64) + np.uint64(seed) * np.uint64(2 ** 40))
    unit = (h >> np.uint64(11)).astype(np.float64) / 2.0 ** 53
    return ((unit - 0.5) * 0.6).reshape(-1, width).astype(dtype)


def ring(keys, members, vnodes) -> np.ndarray:
    """The lab's rule, the grader's own way: every point, sorted; the first at or after the key's, wrapping."""
    pts = sorted((int(_splitmix(2 ** 62 + 2 ** 20 * j + v)[0]), j) for j in members for v in range(vnodes))
    at = np.searchsorted(np.array([p for p, _ in pts], dtype=np.uint64), _splitmix(np.asarray(keys, np.int64)))
    return np.array([pts[i % len(pts)][1] for i in at], dtype=np.int64).reshape(-1)


def members(d: dict, c: int) -> list[int]:
    return list(range(d["S"])) if c >= d["join"] else list(range(d["S"] - 1))


def batch_keys(d: dict, k: int, c: int) -> np.ndarray:
    if c < 0 or c >= d["T"]:
        return np.zeros(0, np.int64)
    lo, hi = block_range(d["B"], d["W"], k)
    idx = d["batches"][c][lo:hi]
    return np.unique(np.concatenate([d["users"][idx], d["n_users"] + d["items"][idx]])).astype(np.int64)


def _reference(d: dict) -> None:
    """States (w, v) before each clock c = 0..T (after steps 0..c-1) on the touched rows, and the losses, in
    float64 from the dtype's initial rows: momentum SGD on the whole table (untouched rows never move)."""
    B, n_u, lr, mu = d["B"], d["n_users"], d["lr"], d["mu"]
    U = np.unique(np.concatenate([d["users"][d["batches"]].ravel(), n_u + d["items"][d["batches"]].ravel()]))
    w = _start_rows(U, d["d"], d["seed"], d["dtype"]).astype(np.float64)
    v, r = np.zeros_like(w), d["r"].astype(d["dtype"]).astype(np.float64)
    states, losses = [(w, v)], []
    for idx in d["batches"]:
        ks, inv = np.unique(np.concatenate([d["users"][idx], n_u + d["items"][idx]]), return_inverse=True)
        loc = np.searchsorted(U, ks)
        a, b = w[loc][inv[:B]], w[loc][inv[B:]]
        err = np.sum(a * b, axis=1) - r[idx]
        grad = np.zeros(w.shape)
        np.add.at(grad, loc[inv[:B]], (err / B)[:, None] * b)
        np.add.at(grad, loc[inv[B:]], (err / B)[:, None] * a)
        losses.append(err @ err / (2 * B))
        v = mu * v + grad
        w = w - lr * v
        states.append((w, v))
    d.update(U=U, states=states, losses=np.array(losses))


def _random_spmd(rng: np.random.Generator) -> tuple:
    S, T = int(rng.integers(1, 5)), int(rng.integers(4, 8))
    return (S, int(rng.integers(1, 5)), 0 if S == 1 else int(rng.integers(0, T)), int(rng.integers(1, 7)), T,
            int(rng.integers(2, 8)), int(rng.integers(2, 10)), 2, int(rng.integers(2, 13)),
            str(rng.choice(["float64", "float32"])), ", random")


def _add(p: Plan, rng: np.random.Generator, cid: str, spec: tuple, backend: str = "sim") -> None:
    S, W, J, V, T, nu, ni, dd, B, dtype, note = spec
    n, seed = 5 * B, int(rng.integers(1 << 16))
    ids = np.sort(rng.choice(nu, size=min(nu, 8), replace=False)) if nu > 1000 else np.arange(nu)
    users, items = ids[rng.integers(0, len(ids), n)].astype(np.int64), rng.integers(0, ni, n).astype(np.int64)
    r, batches = rng.standard_normal(n), np.stack([rng.permutation(n)[:B] for _ in range(T)]).astype(np.int64)
    where = "simulator" if backend == "sim" else f"{S + W} real processes"
    label = (f"S={S} servers (server {S - 1} joins at clock {J}), W={W} workers, {V} points per server, {T} clocks, "
             f"d={dd}, {dtype}{note}, {where}" if J else
             f"S={S} servers from the start, W={W} workers, {V} points per server, {T} clocks, d={dd}, {dtype}{note}, "
             f"{where}")
    data = {"record_messages": backend == "sim", "S": S, "W": W, "join": J, "vnodes": V, "T": T, "d": dd, "B": B,
            "dtype": dtype, "lr": 0.4, "mu": 0.7, "n_users": nu, "users": users, "items": items, "r": r,
            "batches": batches, "seed": seed, "process": backend == "process"}
    _reference(data)
    case = Case(id=cid, fn="run_ps", label=label, world_size=S + W, backend=backend,
                timeout=15 if backend == "sim" else 40, data=data)
    p.add_in_order(case, [("=", S), ("=", J), ("=", V), ("users", users), ("items", items), ("r", r),
                          ("batches", batches), ("=", nu), ("=", dd), ("=", dtype), ("=", 0.4), ("=", 0.7),
                          ("=", seed)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(SPMD + [_random_spmd(rng) for _ in range(RANDOM_SPMD)]):
        _add(p, rng, f"p{i:02d}", spec)
    _add(p, rng, "proc", PROCESS, backend="process")
    calls = CALLS + [(sorted(rng.choice(40, size=int(rng.integers(1, 9)), replace=False).tolist()),
                      int(rng.integers(1, 12)), int(rng.integers(1, 1 << 50))) for _ in range(RANDOM_CALLS)]
    for i, (mem, V, top) in enumerate(calls):
        keys = rng.integers(0, top, size=300).astype(np.int64)
        keys[:2] = [0, top - 1]
        case = Case(id=f"c{i:02d}", fn="ring_owner", mode="call", timeout=5, data={"members": mem, "vnodes": V},
                    label=f"ring_owner(300 keys below {top}, members {mem}, vnodes={V})")
        p.add_in_order(case, [("keys", keys), ("members", np.array(mem, dtype=np.int64)), ("=", V)])
    return p


def ring_rule(res: CaseResult):
    d, keys = res.case.data, res.shared("keys")
    got = res.value(0, "ring_owner result")
    if got.dtype.kind not in "iu" or got.shape != keys.shape:
        raise Fail(f"returned {got.dtype} of shape {got.shape}; return one integer server id per key")
    bad = np.flatnonzero(got.astype(np.int64) != ring(keys, d["members"], d["vnodes"]))
    if len(bad):
        raise Fail(f"{len(bad)} of {len(keys)} keys go to the wrong server: the owner of a key is the "
                   f"server of the first point at or after mix64(key) (unsigned 64-bit, wrapping to the smallest "
                   f"point), server j's points mix64(2**62 + 2**20*j + v); hash the int64 key, no narrower type")
    return 1.0, ""


def _tol(d: dict) -> tuple[float, float]:
    return TOL[d["dtype"]]


def _parse(res: CaseResult, src: int, dst: int, msg, width: int) -> tuple:
    d, dt = res.case.data, np.dtype(res.case.data["dtype"])
    raw = np.ascontiguousarray(msg).reshape(-1).view(np.uint8)
    what = f"rank {src}'s message to rank {dst} is not pack(kind, clock, push_keys, pull_keys, rows of {d['dtype']})"
    if raw.nbytes < HEAD:
        raise Fail(what)
    head = raw[:HEAD].view(np.int64)
    n_push, n_pull = (int(x) for x in head[3:5])
    if n_push < 0 or n_pull < 0 or raw.nbytes != HEAD + 8 * (n_push + n_pull) + dt.itemsize * width * n_push:
        raise Fail(what)
    a, b = HEAD + 8 * n_push, HEAD + 8 * (n_push + n_pull)
    rows = raw[b:].view(dt).reshape(n_push, width).astype(np.float64)
    return int(head[0]), int(head[1]), raw[HEAD:a].view(np.int64).copy(), raw[a:b].view(np.int64).copy(), rows


def _queues(res: CaseResult) -> dict:
    if "_q" not in res.meta:
        q: dict = {}
        for src, dst, msg in res.messages:
            q.setdefault((src, dst), []).append(msg)
        res.meta["_q"] = q
    return res.meta["_q"]


def _requests(res: CaseResult, k: int, j: int) -> list:
    d = res.case.data
    return [_parse(res, d["S"] + k, j, m, d["d"]) for m in _queues(res).get((d["S"] + k, j), [])]


def routing(res: CaseResult):
    d = res.case.data
    S, T = d["S"], d["T"]
    for k in range(d["W"]):
        for j in range(S):
            reqs = _requests(res, k, j)
            want = [c for c in range(T + 1) if j in members(d, c)]
            kinds = [KIND_REQUEST] * (len(want) - 1) + [KIND_DONE] * bool(want)
            if [x[1] for x in reqs] != want or [x[0] for x in reqs] != kinds:
                late = f" (server {S - 1} joins at clock {d['join']})" if j == S - 1 and d["join"] else ""
                raise Fail(f"worker {k} sent server {j} {len(reqs)} messages where the lab's protocol sends {len(want)}"
                           f"{late}: one request per clock to every server of that clock's ring, DONE after the last")
            for _, c, push, pull, _ in reqs:
                for what, ks in (("pushed", push), ("pulled", pull)):
                    if len(ks) and np.any(ring(ks, members(d, c), d["vnodes"]) != j):
                        raise Fail(f"worker {k} {what} keys at clock {c} from server {j}, which does not own them on "
                                   f"clock {c}'s ring: route every key of a clock-c request (the push of clock c-1 "
                                   f"too) by the ring of clock c")
    for (src, dst) in _queues(res):
        if src < S and dst < S and not (d["join"] and dst == S - 1 and src < S - 1):
            raise Fail(f"server {src} sent server {dst} a message: only the old servers send the new one its rows")
    return 1.0, ""


def pulls_current(res: CaseResult):
    d = res.case.data
    S, dt, (atol, rtol) = d["S"], np.dtype(d["dtype"]), _tol(d)
    for k in range(d["W"]):
        for j in range(S):
            asks = [(c, pull) for kind, c, _, pull, _ in _requests(res, k, j) if kind == KIND_REQUEST]
            answers = _queues(res).get((j, S + k), [])
            if len(answers) != len(asks):
                raise Fail(f"server {j} answered worker {k} {len(answers)} times for {len(asks)} requests: one answer "
                           f"per request, none for DONE")
            for (c, pull), ans in zip(asks, answers):
                ans = np.asarray(ans)
                if ans.shape != (len(pull), d["d"]) or ans.dtype != dt:
                    raise Fail(f"server {j} answered worker {k}'s pull of {len(pull)} keys at clock {c} with a "
                               f"{ans.dtype} array of shape {ans.shape}; send the rows, ({len(pull)}, d), {dt}")
                known = np.isin(pull, d["U"])
                w = d["states"][c][0][np.searchsorted(d["U"], pull[known])]
                try:
                    close(ans[known], w, rtol, atol, f"server {j}'s answer to worker {k} at clock {c}")
                except Fail as exc:
                    raise Fail(f"{exc}: answer with the rows after step c-1; {ASKS}") from None
    return 1.0, ""


def migration(res: CaseResult):
    d = res.case.data
    S, J, (atol, rtol), q = d["S"], d["join"], _tol(d), _queues(res)
    old, new = list(range(S - 1)), list(range(S))
    seen = np.unique(np.concatenate([batch_keys(d, k, c) for k in range(d["W"]) for c in range(J)]
                                    + [np.zeros(0, np.int64)]))
    w, v = d["states"][J - 1]
    for i in old:
        msgs = q.get((i, S - 1), [])
        if len(msgs) != 1:
            raise Fail(f"server {i} sent the new server {len(msgs)} messages: at the join each old server sends it "
                       f"exactly one, pack(MIGRATE, J, keys, [], hstack([w, v]))")
        kind, c, keys, pull, wv = _parse(res, i, S - 1, msgs[0], 2 * d["d"])
        mine = seen[ring(seen, old, d["vnodes"]) == i]
        want = mine[ring(mine, new, d["vnodes"]) == S - 1]
        if kind != KIND_MIGRATE or c != J or len(pull):
            raise Fail(f"server {i}'s message to the new server is not pack(MIGRATE, {J}, keys, [], rows)")
        if not np.array_equal(keys, want):
            raise Fail(f"server {i} handed the new server {len(keys)} rows, where the new ring moves {len(want)} of "
                       f"the rows it holds: send exactly the rows it has materialised that server {S - 1} owns on the "
                       f"new ring (consistent hashing moves nothing else), in increasing key order")
        loc = np.searchsorted(d["U"], keys)
        close(wv[:, :d["d"]], w[loc], rtol, atol, f"the rows server {i} migrated (after step J-2)")
        try:
            close(wv[:, d["d"]:], v[loc], rtol, atol, f"the velocities server {i} migrated")
        except Fail as exc:
            raise Fail(f"{exc}: a moved row carries its momentum, caught up to the same step as its value") from None
    return 1.0, ""


def _final(res: CaseResult) -> None:
    d = res.case.data
    (atol, rtol), U, S = _tol(d), d["U"], d["S"]
    owner = ring(U, members(d, d["T"]), d["vnodes"])
    for j in range(S):
        keys = U[owner == j]
        got = np.asarray(res.value(j, f"server {j}'s final rows", dtype=d["dtype"]))
        if got.shape != (len(keys), d["d"]):
            raise Fail(f"server {j} returned rows of shape {got.shape}; it holds {len(keys)} at the end (every row it "
                       f"materialised and owns on the final ring, none it handed on): ({len(keys)}, d)")
        close(got, d["states"][-1][0][owner == j], rtol, atol,
              f"server {j}'s final rows against single-machine momentum SGD ({ASKS})")
    sse = sum(res.value(S + k, f"worker {k}'s sums of squared errors", shape=(d["T"],)).astype(np.float64)
              for k in range(d["W"]))
    close(sse / (2 * d["B"]), d["losses"], rtol, atol, "the loss of each clock (all workers' sse / 2B)")


def final_rows(res: CaseResult):
    _final(res)
    return 1.0, ""


def sparse(res: CaseResult):
    d = res.case.data
    graded_after(lambda: pulls_current(res), "every answer")
    S, T, dd, item = d["S"], d["T"], d["d"], np.dtype(d["dtype"]).itemsize
    for k in range(d["W"]):
        for c in range(T):
            got = np.sort(np.concatenate([x[3] for j in range(S) for x in _requests(res, k, j) if x[1] == c]
                                         + [np.zeros(0, np.int64)]))
            if not np.array_equal(got, batch_keys(d, k, c)):
                raise Fail(f"worker {k} pulled {len(got)} rows at clock {c}, but its batch touches "
                           f"{len(batch_keys(d, k, c))}: pull exactly the rows this clock's batch touches, once")
        sizes = [len(batch_keys(d, k, c)) for c in range(T + 1)]
        bound = sum(S * (HEAD + envelope_bytes(1)) + 8 * (sizes[c] + (c > 0) * sizes[c - 1])
                    + item * dd * (c > 0) * sizes[c - 1] for c in range(T + 1))
        st = res.stats(S + k)
        if st["bytes_sent"] > bound:
            raise Fail(f"worker {k} sent {st['bytes_sent']} B (the grader's count); its batches' keys and gradients "
                       f"need at most {bound} B: one request per server and clock, push only the rows it touched")
        want_in = sum(item * dd * sizes[c] + S * envelope_bytes(2) for c in range(T))
        if st["bytes_received"] > want_in:
            raise Fail(f"worker {k} received {st['bytes_received']} B (the grader's count), but the rows its batches "
                       f"touch are {want_in} B: a sparse pull in the table's dtype")
    return 1.0, ""


def _sim(c: Case) -> bool:
    return c.mode == "spmd" and not c.data["process"]


TESTS = [
    Test("ring", "ring_owner follows the consistent-hash rule for every key (ids beyond 2**32, any member ids)",
         select=lambda c: c.fn == "ring_owner", check=ring_rule),
    Test("final_rows", "the final rows and every clock's loss equal single-machine momentum SGD (several S, W, J, "
         "float64 and float32)", select=_sim, check=final_rows),
    Test("pulls_current", "every pull is answered with the rows of that moment (momentum moves untouched rows too)",
         select=_sim, check=pulls_current),
    Test("routing", "one request per clock to each server of that clock's ring; each key to its owner there",
         select=_sim, check=routing),
    Test("migration", "at the join each old server hands the new one exactly the rows that move, values and "
         "velocities", select=lambda c: _sim(c) and c.data["join"] > 0, check=migration),
    Test("sparse", "a worker pulls exactly its batch's rows; bytes within the sparse bound (the grader's counts)",
         select=_sim, check=sparse),
    Test("correct_process", "the final rows and losses are right on 3 real processes",
         select=lambda c: c.mode == "spmd" and c.data["process"], check=final_rows),
]
