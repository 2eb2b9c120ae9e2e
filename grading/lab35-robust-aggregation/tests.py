"""Lab 35: robust aggregation under f attackers. The grader owns the honest gradients, the attacks (it hands
the Byzantine ranks their vectors), the transport and the counts; the references are the course
library's rules (``scaleoutai.infra.robust_agg``), run here in the grader and unimportable in the sandbox."""
from __future__ import annotations

import itertools
import math

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after
from scaleoutai.infra.robust_agg import aggregate, attack_vectors, multi_krum

UNIMPORTABLE = ("scaleoutai.infra",)  # the course's answer
# (rtol, atol per unit of K * max|v|): a rule may sum in the input's dtype, whose rounding grows with K and |v|
TOL = {"float64": (1e-12, 1e-13), "float32": (1e-5, 1e-6)}
ATTACKS = ("sign_flip", "gaussian", "alie", "ipm")
RULES = ("median", "trimmed_mean", "krum", "multi_krum")
LIMIT = {"median": lambda K: (K - 1) // 2, "trimmed_mean": lambda K: (K - 1) // 2,
         "krum": lambda K: (K - 3) // 2, "multi_krum": lambda K: (K - 3) // 2}
# rule calls: (rule, K, d, f, m, dtype, kind); kind "ties" uses small integers, so equal values are everywhere
CALLS = ([("median", K, d, 0, 1, dt, kind) for K, d, dt, kind in
          [(1, 3, "float64", "random"), (2, 4, "float32", "random"), (3, 1, "float64", "random"),
           (4, 5, "float64", "ties"), (5, 17, "float32", "random"), (6, 3, "float64", "ties"),
           (8, 6, "float64", "random"), (9, 4, "float32", "ties")]]
         + [("trimmed_mean", K, d, f, 1, dt, kind) for K, d, f, dt, kind in
            [(1, 3, 0, "float64", "random"), (2, 5, 0, "float32", "random"), (3, 4, 1, "float64", "random"),
             (4, 6, 1, "float64", "ties"), (5, 3, 2, "float32", "random"), (6, 7, 2, "float64", "ties"),
             (7, 2, 1, "float64", "random"), (9, 5, 4, "float32", "random"), (9, 5, 3, "float64", "ties")]]
         + [("krum", K, d, f, 1, dt, kind) for K, d, f, dt, kind in
            [(3, 4, 0, "float64", "random"), (4, 3, 0, "float32", "random"), (5, 5, 1, "float64", "random"),
             (6, 2, 1, "float64", "ties"), (7, 6, 2, "float32", "random"), (8, 4, 2, "float64", "ties"),
             (9, 3, 3, "float64", "random"), (9, 8, 2, "float32", "ties")]]
         + [("multi_krum", K, d, f, m, dt, kind) for K, d, f, m, dt, kind in
            [(4, 3, 0, 4, "float64", "random"), (5, 4, 1, 2, "float64", "random"), (6, 5, 1, 5, "float32", "random"),
             (7, 3, 2, 3, "float64", "ties"), (8, 6, 2, 6, "float64", "random"), (9, 4, 3, 6, "float32", "random"),
             (9, 5, 1, 9, "float64", "ties")]])
# hand-built stacks (integer values: exact in float32 and float64): (rule, f, m, dtype, what, rows)
TIE_A = [[50, 100], [1, 2], [10, 20], [0, 0], [11, 22]]  # scores 82 (rows 1, 2) and 101 (rows 3, 4) tie
TIE_B = [TIE_A[i] for i in (0, 2, 1, 4, 3)]  # the same vectors, each tie in the other order
SQUARED = [[2, 0], [0, -1], [-2, 3], [-1, 1], [2, -1], [-3, -2]]  # plain distances, or one neighbour more or less, differ
HAND = [("krum", 1, 1, "float64", "two vectors tie for the best score, the nearer to 0 first", TIE_A),
        ("krum", 1, 1, "float32", "two vectors tie for the best score, the farther from 0 first", TIE_B),
        ("krum", 1, 1, "float64", "squared distances and plain distances rank the vectors differently", SQUARED),
        ("multi_krum", 1, 3, "float64", "the third place is a tie, the nearer to 0 first", TIE_A),
        ("multi_krum", 1, 3, "float32", "the third place is a tie, the farther from 0 first", TIE_B),
        ("multi_krum", 1, 5, "float32", "squared distances and plain distances rank the vectors differently", SQUARED)]
OFFSET = [("krum", 7, 6, 2, 1), ("multi_krum", 8, 5, 2, 6)]  # (rule, K, d, f, m): float32, every entry near 3000
REFUSE = [("trimmed_mean", 4, 2, 1), ("trimmed_mean", 5, 3, 1), ("trimmed_mean", 1, 1, 1), ("krum", 6, 2, 1),
          ("krum", 4, 1, 1), ("krum", 2, 0, 1), ("krum", 5, 1, 0), ("krum", 5, 1, 6)]
REFUSE_MORE = [("trimmed_mean", 5, -1, 1), ("krum", 6, -1, 1)]  # f below 0
PROPERTY_CALLS, PROPERTY_SERVERS = 8, 2  # seeded random cases of every parameter
# server cases: (K, rule, f, attackers, attack, dtype, backend)
SERVER = [(1, "median", 0, 0, "none", "float64", "sim"), (2, "trimmed_mean", 0, 0, "none", "float32", "sim"),
          (3, "median", 1, 1, "sign_flip", "float64", "sim"), (5, "trimmed_mean", 2, 2, "gaussian", "float64", "sim"),
          (5, "krum", 1, 1, "alie", "float32", "sim"), (6, "median", 2, 2, "ipm", "float32", "sim"),
          (7, "multi_krum", 2, 2, "sign_flip", "float64", "sim"), (7, "krum", 2, 1, "gaussian", "float64", "sim"),
          (8, "trimmed_mean", 3, 3, "alie", "float64", "sim"), (9, "krum", 3, 3, "ipm", "float64", "sim"),
          (9, "multi_krum", 3, 3, "gaussian", "float32", "sim"), (4, "median", 1, 1, "sign_flip", "float64", "sim"),
          (3, "trimmed_mean", 1, 1, "sign_flip", "float64", "process")]
D_SERVER = 7
SERVER_TIE = [[50, 100, 0, 0, 0, 0, 0], [1, 2, 0, 0, 0, 0, 0], [10, 20, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0],
              [11, 22, 0, 0, 0, 0, 0]]  # Krum's best score is a tie of ranks 1 and 2: rank order decides


def _vectors(rng: np.random.Generator, K: int, d: int, dtype: str, kind: str) -> np.ndarray:
    if kind == "ties":
        V = rng.integers(-2, 3, size=(K, d)).astype(dtype)
        if K >= 4:
            V[2] = V[0]  # a duplicated row: equal Krum scores, the lower index must win
        return V
    if kind == "offset":  # far from 0: ||a||^2 + ||b||^2 - 2a.b cancels in float32, the differences do not
        return (3000.0 + rng.standard_normal((K, d))).astype(dtype)
    return (rng.standard_normal((K, d)) * rng.uniform(0.5, 3.0)).astype(dtype)


def _krum(V: np.ndarray, f: int, m: int, power: int = 2, ties: str = "low", gram: bool = False,
          more: int = 0) -> np.ndarray:
    """Multi-Krum as the lab defines it (power 2, ties to the lower index, differences first) and the
    variants students write by mistake, to name the mistake in the feedback."""
    K, V64 = len(V), V.astype(np.float64)
    if gram:  # ||a||^2 + ||b||^2 - 2a.b in the input's dtype
        norms = (V * V).sum(axis=1)
        D = (norms[:, None] + norms[None, :] - 2 * (V @ V.T)).astype(np.float64)
    else:
        D = ((V64[:, None, :] - V64[None, :, :]) ** 2).sum(axis=-1)
    D = np.sqrt(np.maximum(D, 0)) if power == 1 else D
    np.fill_diagonal(D, np.inf)
    if more < 0:  # the vector counted as its own neighbour
        np.fill_diagonal(D, 0.0)
    s = np.sort(D, axis=1)[:, :K - f - 2 + max(more, 0)].sum(axis=1)
    order = np.argsort(s, kind="stable") if ties == "low" else K - 1 - np.argsort(s[::-1], kind="stable")
    return V64[np.sort(order[:m])].mean(axis=0).astype(V.dtype)


KRUM_MISTAKES = [(dict(power=1), "the scores must sum squared distances ||v_i - v_j||^2, not distances"),
                 (dict(ties="high"), "among equal scores the lower index comes first"),
                 (dict(gram=True), "the distances went through ||a||^2 + ||b||^2 - 2a.b in the input's dtype, "
                                   "which cancels for vectors far from 0: take the differences first (or compute in "
                                   "float64)"),
                 (dict(more=1), "a score sums K - f - 2 neighbours, not K - f - 1"),
                 (dict(more=-1), "a vector is not its own neighbour (j != i)")]


def _clear_margin(V: np.ndarray, f: int, m: int) -> bool:
    """The m-th and (m+1)-th Krum scores differ by far more than float32 rounding (or m = K)."""
    s = np.sort(_scores(V.astype(np.float64), f))
    return m >= len(V) or s[m] - s[m - 1] > 1e-3 * max(1.0, s[m])


def _scores(V64: np.ndarray, f: int) -> np.ndarray:
    D = ((V64[:, None, :] - V64[None, :, :]) ** 2).sum(axis=-1)
    np.fill_diagonal(D, np.inf)
    return np.sort(D, axis=1)[:, :len(V64) - f - 2].sum(axis=1)


def _random_call(rng: np.random.Generator, rule: str) -> tuple:
    """(K, d, f, m, dtype, kind, vectors) of a rule with every parameter drawn, inside the rule's limits."""
    K = int(rng.integers(3 if "krum" in rule else 1, 10))
    f = int(rng.integers(0, LIMIT[rule](K) + 1)) if rule != "median" else 0
    m = int(rng.integers(1, K + 1)) if rule == "multi_krum" else 1
    d, dt = int(rng.integers(1, 13)), str(rng.choice(["float32", "float64"]))
    kind = str(rng.choice(["random", "ties", "offset"]))
    V = _vectors(rng, K, d, dt, kind)
    while "krum" in rule and kind != "ties" and not _clear_margin(V, f, m):
        V = _vectors(rng, K, d, dt, kind)
    return K, d, f, m, dt, kind, V


def _add_call(p: Plan, cid: str, rule: str, K: int, d: int, f: int, m: int, dt: str, note: str, V: np.ndarray) -> None:
    what = {"median": "coordinate_median", "trimmed_mean": f"trimmed_mean, f={f}", "krum": f"krum, f={f}",
            "multi_krum": f"krum, f={f}, m={m}"}[rule]
    case = Case(id=cid, fn="grader_call", mode="call", timeout=5, label=f"{what}, K={K}, d={d}, {dt}{note}",
                data={"group": rule, "rule": rule, "f": f, "m": m, "K": K, "d": d, "dtype": dt})
    p.add_in_order(case, [("vectors", V), ("=", rule), ("=", f), ("=", m)])


def _add_refuse(p: Plan, cid: str, rule: str, K: int, f: int, m: int, V: np.ndarray) -> None:
    what = f"trimmed_mean with f={f} of K={K}" if rule == "trimmed_mean" else f"krum with K={K}, f={f}, m={m}"
    case = Case(id=cid, fn="grader_call", mode="call", timeout=5, label=what,
                data={"group": "refuse", "rule": rule, "f": f, "m": m, "K": K})
    p.add_in_order(case, [("vectors", V), ("=", rule), ("=", f), ("=", m)])


def _add_server(p: Plan, cid: str, K: int, rule: str, f: int, n_byz: int, attack: str, dt: str, backend: str,
                grads: np.ndarray, note: str = "") -> None:
    where = "simulator" if backend == "sim" else "3 real processes"
    who = f"{n_byz} attacker(s) on ranks {list(range(K - n_byz, K))} ({attack})" if n_byz else "no attackers"
    case = Case(id=cid, fn="robust_aggregate", label=f"{note}K={K}, {rule}, f={f}, {who}, d={D_SERVER}, {dt}, {where}",
                world_size=K, backend=backend, timeout=30 if backend == "process" else 10,
                data={"group": "server" if backend == "sim" else "process", "rule": rule, "f": f,
                      "n_byz": n_byz, "grads": grads, "dtype": dt})
    p.add_in_order(case, [("grad", list(grads)), ("=", rule), ("=", f)])


def _attacked(rng: np.random.Generator, K: int, n_byz: int, attack: str, dt: str) -> np.ndarray:
    honest = rng.standard_normal((K - n_byz, D_SERVER)) * 0.5 + rng.standard_normal(D_SERVER)
    byz = attack_vectors(attack, honest, n_byz, rng) if n_byz else np.zeros((0, D_SERVER))
    return np.concatenate([honest, byz]).astype(dt)  # rank 0 (the server) is honest; attackers last


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (rule, K, d, f, m, dt, kind) in enumerate(CALLS):
        _add_call(p, f"r{i:02d}", rule, K, d, f, m, dt, ", integer values with ties" if kind == "ties" else "",
                  _vectors(rng, K, d, dt, kind))
    for i, (rule, K, f, m) in enumerate(REFUSE):
        _add_refuse(p, f"x{i}", rule, K, f, m, rng.standard_normal((K, 3)))
    for i, (K, rule, f, n_byz, attack, dt, backend) in enumerate(SERVER):
        _add_server(p, f"s{i:02d}", K, rule, f, n_byz, attack, dt, backend, _attacked(rng, K, n_byz, attack, dt))
    for i, (rule, f, m, dt, what, rows) in enumerate(HAND):
        V = np.array(rows, dtype=dt)
        _add_call(p, f"h{i}", rule, len(V), V.shape[1], f, m, dt, f", integer values: {what}", V)
    for i, (rule, K, d, f, m) in enumerate(OFFSET):  # drawn until the Gram-matrix distances pick other vectors
        V = _vectors(rng, K, d, "float32", "offset")
        while not _clear_margin(V, f, m) or np.abs(_krum(V, f, m, gram=True) - _krum(V, f, m)).max() < 0.5:
            V = _vectors(rng, K, d, "float32", "offset")
        _add_call(p, f"o{i}", rule, K, d, f, m, "float32", ", every entry near 3000", V)
    for i in range(PROPERTY_CALLS):
        rule = RULES[i % len(RULES)]
        K, d, f, m, dt, kind, V = _random_call(rng, rule)
        _add_call(p, f"p{i}", rule, K, d, f, m, dt, f", seeded random case ({kind} values)", V)
    for i, (rule, K, f, m) in enumerate(REFUSE_MORE):
        _add_refuse(p, f"y{i}", rule, K, f, m, rng.standard_normal((K, 3)))
    _add_server(p, "t0", 5, "krum", 1, 0, "none", "float64", "sim", np.array(SERVER_TIE, dtype=np.float64),
                "Krum's best score tied between two ranks, ")
    for i in range(PROPERTY_SERVERS):
        rule = str(rng.choice(RULES))
        K = int(rng.integers(3 if "krum" in rule else 2, 10))
        f = int(rng.integers(0, LIMIT[rule](K) + 1))
        n_byz, dt = int(rng.integers(0, f + 1)), str(rng.choice(["float32", "float64"]))
        attack = str(rng.choice(ATTACKS)) if n_byz else "none"
        _add_server(p, f"u{i}", K, rule, f, n_byz, attack, dt, "sim", _attacked(rng, K, n_byz, attack, dt),
                    "seeded random case, ")
    return p


def _reference(V: np.ndarray, rule: str, f: int, m: int) -> np.ndarray:
    return multi_krum(V, f, m) if rule in ("krum", "multi_krum") else aggregate(V, rule, f)


def _close(got: np.ndarray, want: np.ndarray, dtype: str, V: np.ndarray, what: str) -> None:
    rtol, atol = TOL[dtype]
    close(got, want, rtol, atol * len(V) * max(1.0, float(np.abs(V).max())), what)


def _matches(got: np.ndarray, want: np.ndarray, dtype: str, V: np.ndarray) -> bool:
    try:
        _close(got, want, dtype, V, "")
    except Fail:
        return False
    return True


def rule_value(res: CaseResult):
    c = res.case.data
    V = res.shared("vectors")
    raw = res.value(0, "result", array_only=False)
    if raw.shape == (0,):
        raise Fail(f"raised ValueError for f={c['f']}, K={c['K']}" + (f", m={c['m']}" if c["rule"] != "median" else "")
                   + ", where the rule is defined")
    got = res.value(0, "result", dtype=c["dtype"], shape=(c["d"],), array_only=False)
    try:
        _close(got, _reference(V, c["rule"], c["f"], c["m"]), c["dtype"], V, "the aggregate")
    except Fail as exc:
        if "krum" in c["rule"]:  # name the mistake when exactly one known mistake gives this answer
            why = [why for how, why in KRUM_MISTAKES if _matches(got, _krum(V, c["f"], c["m"], **how), c["dtype"], V)]
            if len(why) == 1:
                raise Fail(f"{exc}: {why[0]}") from None
        raise
    return 1.0, ""


def refuse(res: CaseResult):
    c = res.case.data
    raw = res.value(0, "result", array_only=False)
    if raw.shape != (0,):
        need = ("0 <= f and 2f < K" if c["rule"] == "trimmed_mean" else "0 <= f" if c["f"] < 0 else
                "K > 2f + 2" if c["K"] <= 2 * c["f"] + 2 else "1 <= m <= K")
        raise Fail(f"returned a vector instead of raising ValueError: {c['rule']} needs {need}")
    return 1.0, ""


def _bound_check(res: CaseResult, r: int, got: np.ndarray) -> None:
    c = res.case.data
    K, f, n_byz = res.case.world_size, c["f"], c["n_byz"]
    honest = c["grads"][:K - n_byz].astype(np.float64)
    g = got.astype(np.float64)
    if c["rule"] in ("median", "trimmed_mean"):
        slack = 1e-5 * (1 + np.abs(honest).max())
        out = int(((g < honest.min(axis=0) - slack) | (g > honest.max(axis=0) + slack)).sum())
        if out:
            raise Fail(f"rank {r}'s aggregate left the range of the honest gradients in {out} of {g.size} "
                       f"coordinates: the attackers moved it (a robust {c['rule']} stays inside that range)")
    else:
        diam = max((np.linalg.norm(a - b) for a, b in itertools.combinations(honest, 2)), default=0.0)
        centre = honest.mean(axis=0)
        reach = math.sqrt(K - f - 2) * diam + np.linalg.norm(honest - centre, axis=1).max()
        if np.linalg.norm(g - centre) > reach * (1 + 1e-5) + 1e-6:
            raise Fail(f"rank {r}'s aggregate is {np.linalg.norm(g - centre):.3g} from the honest mean, more than the "
                       f"{reach:.3g} Krum guarantees: the attackers' vectors were chosen")


def _server_values(res: CaseResult) -> None:
    c = res.case.data
    K = res.case.world_size
    m = K - c["f"] if c["rule"] == "multi_krum" else 1
    want = _reference(c["grads"], c["rule"], c["f"], m)
    for r in range(K):
        got = res.value(r, "aggregate", dtype=c["dtype"], shape=(D_SERVER,))
        _bound_check(res, r, got)
        _close(got, want, c["dtype"], c["grads"], f"rank {r}'s aggregate (the rule on the K gradients in rank order)")


def server(res: CaseResult):
    _server_values(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """The grader's own counts: one gradient to rank 0 from each rank, one aggregate back to each rank."""
    graded_after(lambda: _server_values(res), "the aggregate")
    K, item = res.case.world_size, np.dtype(res.case.data["dtype"]).itemsize
    one = D_SERVER * item + envelope_bytes(2)  # d numbers of the input's dtype and a header (a vector or one row)
    for r in range(1, K):
        s = res.stats(r)
        if s["messages_sent"] != 1 or s["bytes_sent"] > one:
            raise Fail(f"rank {r} sent {s['messages_sent']} messages, {s['bytes_sent']} bytes; a worker sends its "
                       f"gradient to rank 0 once (d = {D_SERVER} numbers of {res.case.data['dtype']}, at most {one} "
                       f"bytes with the message header)")
    s = res.stats(0)
    if s["messages_sent"] != K - 1 or s["bytes_sent"] > (K - 1) * one:
        raise Fail(f"rank 0 sent {s['messages_sent']} messages, {s['bytes_sent']} bytes; the server sends the "
                   f"aggregate once to each of the other {K - 1} ranks (at most {(K - 1) * one} bytes)")
    wrong = sorted({(e.rank, e.peer) for e in res.trace if e.kind == "send" and 0 not in (e.rank, e.peer)})
    if wrong:
        raise Fail(f"workers sent to each other ({wrong[:3]}): every message goes to or from the server, rank 0")
    return 1.0, ""


TESTS = [
    Test("median", "coordinate_median: per coordinate, the middle value or the mean of the two middle ones "
         "(K = 1-9, float32/float64, ties)", select=lambda c: c.data["group"] == "median", check=rule_value),
    Test("trimmed_mean", "trimmed_mean drops the f smallest and f largest per coordinate (f = 0 to the limit)",
         select=lambda c: c.data["group"] == "trimmed_mean", check=rule_value),
    Test("krum", "krum (m = 1) picks the vector of smallest score over K - f - 2 neighbours, ties to the lower index",
         select=lambda c: c.data["group"] == "krum", check=rule_value),
    Test("multi_krum", "multi-Krum averages the m vectors of smallest score", select=lambda c: c.data["group"] ==
         "multi_krum", check=rule_value),
    Test("limits", "f too large for the rule (or m out of 1..K) raises ValueError",
         select=lambda c: c.data["group"] == "refuse", check=refuse),
    Test("server", "robust_aggregate under attack: every rank gets the rule's aggregate, within the rule's bound "
         "of the honest gradients (K = 1-9, four attacks)", select=lambda c: c.data["group"] == "server", check=server),
    Test("traffic", "one gradient to rank 0 per worker, one aggregate back per worker (the grader's counts)",
         select=lambda c: c.data["group"] == "server" and c.world_size > 1, check=traffic),
    Test("correct_process", "the same aggregate on 3 real processes", select=lambda c: c.data["group"] == "process",
         check=server),
]
