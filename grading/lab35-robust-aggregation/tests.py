"""Lab 35: robust aggregation under f attackers. The grader owns the honest gradients, the attacks (it hands
the Byzantine ranks their vectors), the transport and the counts; the references are the course
library's rules (``scaleoutai.infra.robust_agg``), run here in the grader and unimportable in the sandbox."""
from __future__ import annotations

import itertools
import math

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, graded_after
from scaleoutai.infra.robust_agg import aggregate, attack_vectors, krum_scores, multi_krum

UNIMPORTABLE = ("scaleoutai.infra",)  # the course's answer
TOL = {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6)}
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
REFUSE = [("trimmed_mean", 4, 2, 1), ("trimmed_mean", 5, 3, 1), ("trimmed_mean", 1, 1, 1), ("krum", 6, 2, 1),
          ("krum", 4, 1, 1), ("krum", 2, 0, 1), ("krum", 5, 1, 0), ("krum", 5, 1, 6)]
# server cases: (K, rule, f, attackers, attack, dtype, backend)
SERVER = [(1, "median", 0, 0, "none", "float64", "sim"), (2, "trimmed_mean", 0, 0, "none", "float32", "sim"),
          (3, "median", 1, 1, "sign_flip", "float64", "sim"), (5, "trimmed_mean", 2, 2, "gaussian", "float64", "sim"),
          (5, "krum", 1, 1, "alie", "float32", "sim"), (6, "median", 2, 2, "ipm", "float32", "sim"),
          (7, "multi_krum", 2, 2, "sign_flip", "float64", "sim"), (7, "krum", 2, 1, "gaussian", "float64", "sim"),
          (8, "trimmed_mean", 3, 3, "alie", "float64", "sim"), (9, "krum", 3, 3, "ipm", "float64", "sim"),
          (9, "multi_krum", 3, 3, "gaussian", "float32", "sim"), (4, "median", 1, 1, "sign_flip", "float64", "sim"),
          (3, "trimmed_mean", 1, 1, "sign_flip", "float64", "process")]
D_SERVER = 7


def _vectors(rng: np.random.Generator, K: int, d: int, dtype: str, kind: str) -> np.ndarray:
    if kind == "ties":
        V = rng.integers(-2, 3, size=(K, d)).astype(dtype)
        if K >= 4:
            V[2] = V[0]  # a duplicated row: equal Krum scores, the lower index must win
        return V
    return (rng.standard_normal((K, d)) * rng.uniform(0.5, 3.0)).astype(dtype)


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (rule, K, d, f, m, dt, kind) in enumerate(CALLS):
        what = {"median": "coordinate_median", "trimmed_mean": f"trimmed_mean, f={f}", "krum": f"krum, f={f}",
                "multi_krum": f"krum, f={f}, m={m}"}[rule]
        case = Case(id=f"r{i:02d}", fn="grader_call", mode="call", timeout=5,
                    label=f"{what}, K={K}, d={d}, {dt}{', integer values with ties' if kind == 'ties' else ''}",
                    data={"group": rule, "rule": rule, "f": f, "m": m, "K": K, "d": d, "dtype": dt})
        p.add_in_order(case, [("vectors", _vectors(rng, K, d, dt, kind)), ("=", rule), ("=", f), ("=", m)])
    for i, (rule, K, f, m) in enumerate(REFUSE):
        what = f"trimmed_mean with f={f} of K={K}" if rule == "trimmed_mean" else f"krum with K={K}, f={f}, m={m}"
        case = Case(id=f"x{i}", fn="grader_call", mode="call", timeout=5, label=what,
                    data={"group": "refuse", "rule": rule, "f": f, "m": m, "K": K})
        p.add_in_order(case, [("vectors", rng.standard_normal((K, 3))), ("=", rule), ("=", f), ("=", m)])
    for i, (K, rule, f, n_byz, attack, dt, backend) in enumerate(SERVER):
        honest = rng.standard_normal((K - n_byz, D_SERVER)) * 0.5 + rng.standard_normal(D_SERVER)
        byz = attack_vectors(attack, honest, n_byz, rng) if n_byz else np.zeros((0, D_SERVER))
        grads = np.concatenate([honest, byz]).astype(dt)  # rank 0 (the server) is honest; attackers last
        where = "simulator" if backend == "sim" else "3 real processes"
        label = (f"K={K}, {rule}, f={f}, {n_byz} attacker(s) on ranks {list(range(K - n_byz, K))} ({attack})"
                 f", d={D_SERVER}, {dt}, {where}") if n_byz else f"K={K}, {rule}, f={f}, no attackers, {dt}, {where}"
        case = Case(id=f"s{i:02d}", fn="robust_aggregate", label=label, world_size=K, backend=backend,
                    timeout=30 if backend == "process" else 10,
                    data={"group": "server" if backend == "sim" else "process", "rule": rule, "f": f,
                          "n_byz": n_byz, "grads": grads, "dtype": dt})
        p.add_in_order(case, [("grad", list(grads)), ("=", rule), ("=", f)])
    return p


def _reference(V: np.ndarray, rule: str, f: int, m: int) -> np.ndarray:
    return multi_krum(V, f, m) if rule in ("krum", "multi_krum") else aggregate(V, rule, f)


def rule_value(res: CaseResult):
    c = res.case.data
    V = res.shared("vectors")
    raw = res.value(0, "result", array_only=False)
    if raw.shape == (0,):
        raise Fail(f"raised ValueError for f={c['f']}, K={c['K']}" + (f", m={c['m']}" if c["rule"] != "median" else "")
                   + ", where the rule is defined")
    got = res.value(0, "result", dtype=c["dtype"], shape=(c["d"],), array_only=False)
    close(got, _reference(V, c["rule"], c["f"], c["m"]), *TOL[c["dtype"]], "the aggregate")
    return 1.0, ""


def refuse(res: CaseResult):
    c = res.case.data
    raw = res.value(0, "result", array_only=False)
    if raw.shape != (0,):
        need = ("0 <= f and 2f < K" if c["rule"] == "trimmed_mean" else
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
        close(got, want, *TOL[c["dtype"]], f"rank {r}'s aggregate (the rule on the K gradients in rank order)")


def server(res: CaseResult):
    _server_values(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """The grader's own counts: one gradient to rank 0 from each rank, one aggregate back to each rank."""
    graded_after(lambda: _server_values(res), "the aggregate")
    K, item = res.case.world_size, np.dtype(res.case.data["dtype"]).itemsize
    for r in range(1, K):
        s = res.stats(r)
        if s["messages_sent"] != 1 or s["bytes_sent"] != D_SERVER * item:
            raise Fail(f"rank {r} sent {s['messages_sent']} messages, {s['bytes_sent']} bytes; a worker sends its "
                       f"gradient to rank 0 once ({D_SERVER * item} bytes)")
    s = res.stats(0)
    if s["messages_sent"] != K - 1 or s["bytes_sent"] != (K - 1) * D_SERVER * item:
        raise Fail(f"rank 0 sent {s['messages_sent']} messages, {s['bytes_sent']} bytes; the server sends the "
                   f"aggregate once to each of the other {K - 1} ranks")
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
