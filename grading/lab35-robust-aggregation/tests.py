"""Lab 35: the weighted geometric median by smoothed Weiszfeld steps, run as a server protocol over the
workers' weighted sums. The grader owns the honest gradients, the attacks (it hands the Byzantine ranks their
vectors), the transport, the counts of messages and rounds, and its own Weiszfeld iteration (below); the
course's rules (``scaleoutai.infra.robust_agg``: median, trimmed mean, Krum) are unimportable in the sandbox."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after
from scaleoutai.infra.robust_agg import attack_vectors, coordinate_median, multi_krum, trimmed_mean

UNIMPORTABLE = ("scaleoutai.infra",)  # the course's rules (median, trimmed mean, Krum)
TOL = {"float64": (1e-10, 1e-10), "float32": (2e-6, 2e-6)}  # (rtol, atol per unit of max|v|)
ATTACKS = ("sign_flip", "gaussian", "alie", "ipm")
# stacks: (K, d, dtype, kind, counts, nu, tol, max_iter); counts "ones" or a list; kind as in _vectors
CALLS = [(1, 3, "float64", "random", "ones", 1e-6, 1e-9, 20), (2, 4, "float32", "random", "ones", 1e-6, 1e-9, 50),
         (3, 1, "float64", "random", "ones", 1e-4, 1e-10, 100), (4, 5, "float64", "ties", "ones", 1e-3, 1e-8, 60),
         (5, 17, "float32", "clustered", "ones", 1e-4, 1e-7, 80), (5, 3, "float64", "onpoint", "ones", 1e-6, 1e-9, 40),
         (8, 6, "float64", "clustered", "ones", 1e-4, 1e-9, 3), (9, 4, "float32", "ties", "ones", 1e-2, 1e-7, 60),
         (7, 5, "float64", "offset", "ones", 1e-3, 1e-7, 50), (6, 6, "float64", "random", "ones", 1e-5, 0.0, 7)]
WEIGHTED = [(3, 4, "float64", "random", [5, 0, 1], 1e-5, 1e-9, 60), (4, 3, "float64", "clustered", [0, 0, 3, 1], 1e-4,
            1e-9, 80), (6, 5, "float32", "clustered", [7, 1, 19, 0, 3, 2], 1e-4, 1e-7, 60),
            (9, 2, "float64", "random", [10 ** 6, 3, 2 * 10 ** 6, 7, 1, 0, 5, 10 ** 5, 2], 1e-4, 1e-9, 100),
            (5, 3, "float64", "random", [0, 0, 4, 0, 0], 1e-6, 1e-9, 30),
            (7, 4, "float32", "onpoint", [2, 1, 1, 3, 1, 1, 3], 1e-5, 1e-8, 50)]
# refusals: (K, f, nu, tol, max_iter, counts) where the rule is not defined
REFUSE = [(4, 2, 1e-6, 1e-9, 10, "ones"), (5, 3, 1e-6, 1e-9, 10, "ones"), (1, 1, 1e-6, 1e-9, 10, "ones"),
          (5, -1, 1e-6, 1e-9, 10, "ones"), (5, 1, 0.0, 1e-9, 10, "ones"), (5, 1, 1e-6, -1e-9, 10, "ones"),
          (5, 1, 1e-6, 1e-9, 0, "ones"), (5, 1, 1e-6, 1e-9, 10, [0, 0, 0, 0, 0]),
          (5, 1, 1e-6, 1e-9, 10, [1, 2, -1, 3, 1]), (5, 1, 1e-6, 1e-9, 10, [1, 1, 1, 1])]
PROPERTY_CALLS, PROPERTY_SERVERS, D_SERVER = 8, 2, 7
# server cases: (K, f, attackers, attack, dtype, empty shard, nu, tol, max_iter, backend)
SERVER = [(1, 0, 0, "none", "float64", False, 1e-6, 1e-9, 20, "sim"),
          (2, 0, 0, "none", "float32", False, 1e-4, 1e-8, 30, "sim"),
          (3, 1, 1, "sign_flip", "float64", False, 1e-4, 1e-8, 30, "sim"),
          (4, 1, 1, "gaussian", "float64", True, 1e-4, 1e-8, 30, "sim"),
          (5, 2, 2, "alie", "float32", False, 1e-3, 1e-7, 30, "sim"),
          (6, 2, 2, "ipm", "float64", True, 1e-4, 1e-8, 30, "sim"),
          (7, 3, 3, "sign_flip", "float64", False, 1e-4, 1e-9, 25, "sim"),
          (8, 3, 2, "gaussian", "float32", True, 1e-3, 1e-7, 30, "sim"),
          (9, 4, 4, "alie", "float64", False, 1e-4, 1e-8, 20, "sim"),
          (5, 2, 2, "ipm", "float64", False, 1e-4, 1e-8, 30, "sim"),
          (3, 1, 1, "sign_flip", "float64", False, 1e-4, 1e-8, 30, "process")]
COURSE = "the lab asks for the geometric median by smoothed Weiszfeld steps; Chapter 35's median, trimmed mean " \
         "and Krum are not it"


def _vectors(rng: np.random.Generator, K: int, d: int, dtype: str, kind: str) -> np.ndarray:
    if kind == "ties":  # small integers, duplicated rows
        V = rng.integers(-2, 3, size=(K, d)).astype(dtype)
        V[1::2] = V[0::2][:K // 2]
        return V
    if kind == "clustered":  # an honest cloud and a third of the rows far away
        V = rng.standard_normal(d) + 0.3 * rng.standard_normal((K, d))
        V[K - K // 3:] = 20.0 * rng.standard_normal(d)
        return V.astype(dtype)
    if kind == "onpoint":  # the weighted mean starts exactly on a row: only the floor nu keeps beta finite
        half = rng.integers(-3, 4, size=((K - 1) // 2, d)).astype(np.float64)
        return np.concatenate([np.zeros((1, d)), half, -half, np.zeros((1 - K % 2, d))]).astype(dtype)
    if kind == "offset":  # far from 0: the stopping rule is relative to |z|
        return (3000.0 + rng.standard_normal((K, d))).astype(dtype)
    return (rng.standard_normal((K, d)) * rng.uniform(0.5, 3.0)).astype(dtype)


def weiszfeld(V: np.ndarray, c, nu: float, tol: float, max_iter: int, power: int = 1, start: str = "mean",
              weigh: bool = True, stop: bool = True) -> tuple[np.ndarray, int]:
    """(aggregate in V's dtype, number of steps): the lab's rule (defaults) and the variants students write."""
    V64, c = V.astype(np.float64), np.asarray(c, dtype=np.float64)
    z = (c[:, None] * V64).sum(axis=0) / c.sum() if start == "mean" else np.zeros(V.shape[1])
    steps = 0
    with np.errstate(all="ignore"):
        for steps in range(1, max_iter + 1):
            dist = np.linalg.norm(V64 - z, axis=1) ** power
            beta = (c if weigh else (c > 0).astype(float)) / (np.maximum(nu, dist) if nu else dist)
            z_new = (beta[:, None] * V64).sum(axis=0) / beta.sum()
            step, z = np.linalg.norm(z_new - z), z_new
            if stop and step <= tol * max(1.0, np.linalg.norm(z)):
                break
    return z.astype(V.dtype), steps


MISTAKES = [(dict(power=2), "the weights are c_i / max(nu, |g_i - z|), not over the squared distance"),
            (dict(weigh=False), "beta_i = c_i / max(nu, |g_i - z|) carries the count c_i in every step"),
            (dict(start="zero"), "the iteration starts from the weighted mean"),
            (dict(stop=False), "stop at the first step that moves z by at most tol * max(1, |z|)")]


def _counts(rng: np.random.Generator, K: int, spec) -> np.ndarray:
    return np.ones(K, dtype=np.int64) if spec == "ones" else np.asarray(spec, dtype=np.int64)


def _add_call(p: Plan, cid: str, group: str, K: int, d: int, dt: str, f: int, c: np.ndarray, nu: float, tol: float,
              it: int, V: np.ndarray, note: str) -> None:
    label = f"K={K}, d={d}, {dt}, f={f}, nu={nu:g}, tol={tol:g}, max_iter={it}{note}"
    case = Case(id=cid, fn="grader_call", mode="call", timeout=5, label=label,
                data={"group": group, "K": K, "d": d, "dtype": dt, "f": f, "nu": nu, "tol": tol, "it": it})
    p.add_in_order(case, [("vectors", V), ("counts", c), ("=", f), ("=", nu), ("=", tol), ("=", it)])


def _attacked(rng: np.random.Generator, K: int, n_byz: int, attack: str, dt: str, empty: bool):
    honest = rng.standard_normal((K - n_byz, D_SERVER)) * 0.5 + rng.standard_normal(D_SERVER)
    byz = attack_vectors(attack, honest, n_byz, rng) if n_byz else np.zeros((0, D_SERVER))
    c = rng.integers(1, 9, K)
    if empty:
        c[1] = 0  # an honest worker with an empty shard (rank 0, the server, keeps its data)
    while c[K - n_byz:].sum() >= c[:K - n_byz].sum():  # attackers hold less than half of the weight
        c[K - n_byz:] = np.maximum(1, c[K - n_byz:] // 2)
        c[0] += 1
    return np.concatenate([honest, byz]).astype(dt), c.astype(np.int64)


def _add_server(p: Plan, cid: str, K: int, f: int, n_byz: int, attack: str, dt: str, empty: bool, nu: float,
                tol: float, it: int, backend: str, rng: np.random.Generator, note: str = "") -> None:
    grads, c = _attacked(rng, K, n_byz, attack, dt, empty)
    where = "simulator" if backend == "sim" else "3 real processes"
    who = f"{n_byz} attacker(s) on ranks {list(range(K - n_byz, K))} ({attack})" if n_byz else "no attackers"
    label = (f"{note}K={K}, f={f}, {who}, {'an empty shard, ' if empty else ''}d={D_SERVER}, {dt}, nu={nu:g}, "
             f"tol={tol:g}, max_iter={it}, {where}")
    case = Case(id=cid, fn="robust_aggregate", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 15,
                data={"group": "server" if backend == "sim" else "process", "f": f, "n_byz": n_byz, "grads": grads,
                      "counts": c, "dtype": dt, "nu": nu, "tol": tol, "it": it})
    p.add_in_order(case, [("grad", list(grads)), ("count", [np.array(x) for x in c]), ("=", f), ("=", nu), ("=", tol),
                          ("=", it)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for group, table in (("gm", CALLS), ("weighted", WEIGHTED)):
        for i, (K, d, dt, kind, spec, nu, tol, it) in enumerate(table):
            _add_call(p, f"{group}{i}", group, K, d, dt, (K - 1) // 2, _counts(rng, K, spec), nu, tol, it,
                      _vectors(rng, K, d, dt, kind), f" ({kind} rows{'' if spec == 'ones' else ', uneven counts'})")
    for i, (K, f, nu, tol, it, spec) in enumerate(REFUSE):
        case = Case(id=f"x{i}", fn="grader_call", mode="call", timeout=5, data={"group": "refuse"},
                    label=f"K={K}, f={f}, nu={nu:g}, tol={tol:g}, max_iter={it}, counts {'all 1' if spec == 'ones' else spec}")
        p.add_in_order(case, [("vectors", rng.standard_normal((K, 3))), ("counts", _counts(rng, K, spec)), ("=", f),
                              ("=", nu), ("=", tol), ("=", it)])
    for i, args in enumerate(SERVER):
        _add_server(p, f"s{i:02d}", *args, rng=rng)
    for i in range(PROPERTY_CALLS):
        K, d, dt = int(rng.integers(1, 10)), int(rng.integers(1, 13)), str(rng.choice(["float32", "float64"]))
        kind = str(rng.choice(["random", "ties", "clustered", "onpoint", "offset"]))
        c = rng.integers(0, 6, K) if i % 2 else np.ones(K, dtype=np.int64)
        c[int(rng.integers(0, K))] += i % 2  # a positive sum
        nu, tol = float(10.0 ** -rng.integers(2, 7)), float(10.0 ** -rng.integers(6, 11))
        _add_call(p, f"p{i}", "weighted" if i % 2 else "gm", K, d, dt, int(rng.integers(0, (K - 1) // 2 + 1)), c,
                  nu, tol, int(rng.integers(1, 80)), _vectors(rng, K, d, dt, kind), f", seeded random case ({kind} rows)")
    for i in range(PROPERTY_SERVERS):
        K = int(rng.integers(2, 10))
        f = int(rng.integers(0, (K - 1) // 2 + 1))
        n_byz = int(rng.integers(0, f + 1))
        _add_server(p, f"u{i}", K, f, n_byz, str(rng.choice(ATTACKS)) if n_byz else "none",
                    str(rng.choice(["float32", "float64"])), bool(rng.integers(0, 2)) and K > 2, 1e-4, 1e-8, 25,
                    "sim", rng, "seeded random case, ")
    return p


def _close(got: np.ndarray, want: np.ndarray, dtype: str, V: np.ndarray, what: str) -> None:
    rtol, atol = TOL[dtype]
    close(got, want, rtol, atol * max(1.0, float(np.abs(V).max())), what)


def _matches(got: np.ndarray, want: np.ndarray, dtype: str, V: np.ndarray) -> bool:
    try:
        _close(got, want, dtype, V, "")
    except Fail:
        return False
    return True


def _why(got: np.ndarray, V: np.ndarray, c: np.ndarray, f: int, nu: float, tol: float, it: int, dt: str) -> str:
    """Name the mistake when the answer is a known wrong rule (the course's rules first)."""
    course = [lambda: coordinate_median(V), lambda: trimmed_mean(V, f), lambda: multi_krum(V, f, 1)]
    for rule in course:
        try:
            if _matches(got, rule(), dt, V):
                return f": {COURSE}"
        except ValueError:
            pass
    why = [w for how, w in MISTAKES if _matches(got, weiszfeld(V, c, nu, tol, it, **how)[0], dt, V)]
    return f": {why[0]}" if len(why) == 1 else ""


def gm_value(res: CaseResult):
    c = res.case.data
    V, counts = res.shared("vectors"), res.shared("counts")
    if res.value(0, "result", array_only=False).shape == (0,):
        raise Fail("raised ValueError where the geometric median is defined")
    got = res.value(0, "result", dtype=c["dtype"], shape=(c["d"],), array_only=False)
    want = weiszfeld(V, counts, c["nu"], c["tol"], c["it"])[0]
    try:
        _close(got, want, c["dtype"], V, "the geometric median")
    except Fail as exc:
        raise Fail(f"{exc}{_why(got, V, counts, c['f'], c['nu'], c['tol'], c['it'], c['dtype'])}") from None
    return 1.0, ""


def refuse(res: CaseResult):
    if res.value(0, "result", array_only=False).shape != (0,):
        raise Fail("returned a vector instead of raising ValueError: the rule needs 0 <= f with 2f < K, nu > 0, "
                   "tol >= 0, max_iter >= 1 and K counts >= 0 with a positive sum")
    return 1.0, ""


def _bound_check(res: CaseResult, r: int, got: np.ndarray) -> None:
    c = res.case.data
    K, n_byz, counts = res.case.world_size, c["n_byz"], c["counts"].astype(np.float64)
    honest, w = c["grads"][:K - n_byz].astype(np.float64), counts[:K - n_byz]
    W_h, W_b = w.sum(), counts[K - n_byz:].sum()
    centre = (w[:, None] * honest).sum(axis=0) / W_h
    reach = np.linalg.norm(honest[w > 0] - centre, axis=1).max()
    bound = 2 * W_h * reach / (W_h - W_b)
    gap = np.linalg.norm(got.astype(np.float64) - centre)
    if not gap <= bound * (1 + 1e-5) + 1e-6:
        raise Fail(f"rank {r}'s aggregate is {gap:.3g} from the honest weighted mean, more than the {bound:.3g} the "
                   f"geometric median guarantees (2 W_H r / (W_H - W_B)): the attackers moved it")


def _server_values(res: CaseResult) -> None:
    c = res.case.data
    want = weiszfeld(c["grads"], c["counts"], c["nu"], c["tol"], c["it"])[0]
    for r in range(res.case.world_size):
        got = res.value(r, "aggregate", dtype=c["dtype"], shape=(D_SERVER,))
        _bound_check(res, r, got)
        try:
            _close(got, want, c["dtype"], c["grads"], f"rank {r}'s aggregate (Weiszfeld over the weighted sums)")
        except Fail as exc:
            raise Fail(f"{exc}{_why(got, c['grads'], c['counts'], c['f'], c['nu'], c['tol'], c['it'], c['dtype'])}") \
                from None


def server(res: CaseResult):
    _server_values(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """The grader's own counts: R + 1 messages of d + 1 float64 numbers each way per worker, a star around 0."""
    graded_after(lambda: _server_values(res), "the aggregate")
    c, K = res.case.data, res.case.world_size
    R = weiszfeld(c["grads"], c["counts"], c["nu"], c["tol"], c["it"])[1]
    one = (D_SERVER + 1) * 8 + envelope_bytes(1)
    for r in range(1, K):
        s = res.stats(r)
        if s["messages_sent"] != R + 1 or s["messages_received"] != R + 1 or s["bytes_sent"] > (R + 1) * one:
            raise Fail(f"rank {r} sent {s['messages_sent']} and received {s['messages_received']} messages "
                       f"({s['bytes_sent']} bytes sent); this case takes {R} Weiszfeld steps, so a worker sends "
                       f"{R + 1} sums [beta g, beta] of d + 1 float64 (round 0 and one per step) and receives "
                       f"{R + 1} (each z, then the aggregate): stop at the first step that moves z by at most "
                       f"tol * max(1, |z|), and send weighted sums, never the raw gradient alone")
    s = res.stats(0)
    if s["messages_sent"] != (K - 1) * (R + 1) or s["bytes_sent"] > (K - 1) * (R + 1) * one:
        raise Fail(f"rank 0 sent {s['messages_sent']} messages ({s['bytes_sent']} bytes); in {R} steps the server "
                   f"sends each of the {K - 1} workers {R} estimates [z, 0] and one aggregate [z, 1]")
    wrong = sorted({(e.rank, e.peer) for e in res.trace if e.kind == "send" and 0 not in (e.rank, e.peer)})
    if wrong:
        raise Fail(f"workers sent to each other ({wrong[:3]}): every message goes to or from the server, rank 0")
    return 1.0, ""


TESTS = [
    Test("geometric_median", "geometric_median: smoothed Weiszfeld steps from the mean, stopped by tol or max_iter "
         "(K = 1-9, float32/float64, ties, rows far from 0, the mean on a row)",
         select=lambda c: c.data["group"] == "gm", check=gm_value),
    Test("weighted", "the weighted geometric median: uneven sample counts and empty shards (count 0)",
         select=lambda c: c.data["group"] == "weighted", check=gm_value),
    Test("limits", "ValueError for f >= K/2, f < 0, nu <= 0, tol < 0, max_iter < 1 and bad counts",
         select=lambda c: c.data["group"] == "refuse", check=refuse),
    Test("server", "robust_aggregate under attack: every rank gets the grader's Weiszfeld aggregate, within the "
         "geometric median's bound of the honest gradients (K = 1-9, four attacks, empty shards)",
         select=lambda c: c.data["group"] == "server", check=server),
    Test("traffic", "the protocol, from the grader's counts: round 0 and one round per Weiszfeld step, d + 1 "
         "numbers per message, the server's stopping rule, a star around rank 0",
         select=lambda c: c.data["group"] == "server" and c.world_size > 1, check=traffic),
    Test("correct_process", "the same aggregate on 3 real processes", select=lambda c: c.data["group"] == "process",
         check=server),
]
