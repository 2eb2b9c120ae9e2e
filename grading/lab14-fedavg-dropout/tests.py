"""Lab 14: SCAFFOLD with client dropout (the grader decides who drops: a crash fault at a client's send).

Graded: the server's (w, c) after every round against the grader's reference (uniform mean of delta_y over the
reporters, c's update divided by N = all clients) with no drops, drops at round 0, in the middle and in the last
round, everyone gone, empty clients, float32 data and random cases from the plan's rng; on heterogeneous clients the
final model reaches the optimum where the grader's own FedAvg with the same steps drifts; every surviving client's
c_i; the server's sends and the clients' bytes and payloads, all from the grader's own counts and records."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, NotGraded, Plan, Test, close, envelope_bytes,
                                       graded_after)

UNIMPORTABLE = ("scaleoutai.ml", "scaleoutai.collectives", "scaleoutai.parallel")  # FedAvg and its aggregation

D, LR, STEPS, LR_G = 5, 0.05, 3, 0.7
ASKS = "the lab asks for SCAFFOLD's control variates that correct client drift"
# (K, rounds, {client rank: reports it sends before it drops}, empty client ranks, backend, dtype of X and y)
NO_DROP = [(2, 3, {}, (), "sim", "float64"), (5, 3, {}, (2,), "sim", "float64"), (4, 3, {}, (), "sim", "float32")]
DROP = [(3, 3, {1: 0}, (), "sim", "float64"), (5, 3, {2: 2, 4: 0}, (3,), "sim", "float64"),  # a last-round drop
        (8, 3, {1: 0, 3: 1, 6: 2, 7: 0}, (), "sim", "float64"), (4, 3, {3: 1}, (), "sim", "float32")]
EDGE = [(1, 2, {}, (), "sim", "float64"), (4, 3, {1: 1, 2: 1, 3: 1}, (), "sim", "float64"),
        (3, 3, {2: 1}, (1,), "sim", "float64"), (3, 3, {1: 2, 2: 1}, (), "sim", "float64")]
DRIFT = [(5, 50, {}, (), "sim", "float64")]
DRIFT_STEPS, DRIFT_TOL = 8, 1e-4
PROCESS = [(3, 3, {}, (), "process", "float64")]
RANDOM = 1  # property cases: random K, rounds, drops and empty clients from the plan's rng


def _random_case(rng: np.random.Generator) -> tuple:
    K, rounds = int(rng.integers(3, 7)), int(rng.integers(2, 5))
    others = rng.permutation(np.arange(2, K))
    n_drop = int(rng.integers(1, len(others) + 1))
    crash = {int(q): int(rng.integers(0, rounds)) for q in others[:n_drop]}
    empty = tuple(int(q) for q in others[n_drop:] if rng.random() < 0.5)
    return K, rounds, crash, empty, "sim", "float64"


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    random_cases = [_random_case(rng) for _ in range(RANDOM)]
    groups = (("n", NO_DROP), ("d", DROP + random_cases), ("a", EDGE), ("h", DRIFT), ("p", PROCESS))
    for group, cases in groups:
        for i, (K, rounds, crash, empty, backend, dtype) in enumerate(cases):
            sizes = [0] + [0 if r in empty else int(rng.integers(2, 40)) for r in range(1, K)]
            if group == "h":
                sizes = [0] + [int(rng.integers(12, 40)) for _ in range(1, K)]
            X = [rng.standard_normal((n, D)).astype(dtype) for n in sizes]
            y = [(x @ (3 * rng.standard_normal(D)) + 0.1 * rng.standard_normal(len(x))).astype(dtype) for x in X]
            w0 = rng.standard_normal(D)
            steps, lr_g = (DRIFT_STEPS, 1.0) if group == "h" else (STEPS, LR_G)
            drops = ", ".join(f"client {r} drops in round {c}" for r, c in sorted(crash.items())) or "no drops"
            label = (f"K={K}, {rounds} rounds, n_k={sizes[1:]}, {drops}, {dtype} data, {steps} local steps, "
                     f"lr_g={lr_g}, {'simulator' if backend == 'sim' else '3 processes'}")
            case = Case(id=f"{group}{i}", fn="scaffold", label=label, world_size=K, backend=backend,
                        timeout=30 if backend == "process" else 20,
                        faults={"crash": {str(r): c for r, c in crash.items()}} if crash else {},
                        data={"group": group, "rounds": rounds, "crash": crash, "record_messages": backend == "sim",
                              "w0": w0, "X": X, "y": y, "steps": steps, "lr_g": lr_g})
            p.add_in_order(case, [("w", w0), ("X", X), ("y", y), ("=", rounds), ("=", LR), ("=", steps),
                                  ("=", lr_g)])
    return p


def _grad(w, X, y):
    if len(y) == 0:
        return np.zeros(D)
    X64 = X.astype(np.float64)
    return 2.0 * X64.T @ (X64 @ w - y.astype(np.float64)) / len(y)


def _reporters(d: dict, K: int, t: int) -> list[int]:
    return [q for q in range(1, K) if d["crash"].get(q, d["rounds"]) > t]


def _reference(res: CaseResult, control: bool = True):
    """(w, c) after every round and every client's c_i; control=False is the grader's FedAvg (uniform)."""
    d, K = res.case.data, res.case.world_size
    w, c, cs, out = d["w0"].astype(np.float64), np.zeros(D), [np.zeros(D) for _ in range(K)], []
    for t in range(d["rounds"]):
        dys, dcs = [], []
        for q in _reporters(d, K, t):
            v = w.copy()
            for _ in range(d["steps"]):
                v = v - LR * (_grad(v, d["X"][q], d["y"][q]) + (c - cs[q] if control else 0))
            new = cs[q] - c + (w - v) / (d["steps"] * LR) if control else cs[q]
            dys.append(v - w)
            dcs.append(new - cs[q])
            cs[q] = new
        if dys:
            w, c = w + d["lr_g"] * np.mean(dys, axis=0), c + np.sum(dcs, axis=0) / (K - 1)
        out.append(np.stack([w, c]))
    return np.stack(out), cs


def models(res: CaseResult):
    rounds, K = res.case.data["rounds"], res.case.world_size
    want, _ = _reference(res)
    got = res.value(0, "the server's (w, c) per round", dtype="float64", shape=(rounds, 2, D))
    for t in range(rounds):
        who = f"after round {t} (reported: clients {_reporters(res.case.data, K, t)})"
        close(got[t, 0], want[t, 0], 1e-9, 1e-12, f"the global model w {who}")
        if not np.any(got[t, 1]) and np.any(want[t, 1]):
            raise Fail(f"the server's c {who} is still 0: {ASKS}; FedAvg has none")
        close(got[t, 1], want[t, 1], 1e-9, 1e-12, f"the server's control variate c {who} (c moves by "
              f"(1/N) sum delta c_i, N = {K - 1} clients)")
    return 1.0, ""


def drift(res: CaseResult):
    """On heterogeneous clients the final w reaches the optimum of (1/N) sum f_i; the grader's FedAvg does not."""
    d = res.case.data
    H = sum(2 * X.T @ X / len(y) for X, y in zip(d["X"][1:], d["y"][1:]))
    w_star = np.linalg.solve(H, sum(2 * X.T @ y / len(y) for X, y in zip(d["X"][1:], d["y"][1:])))
    got = res.value(0, "the server's (w, c) per round", dtype="float64", shape=(d["rounds"], 2, D))[-1, 0]
    gap = float(np.linalg.norm(got - w_star) / np.linalg.norm(w_star))
    fed = float(np.linalg.norm(_reference(res, control=False)[0][-1, 0] - w_star) / np.linalg.norm(w_star))
    if not gap <= DRIFT_TOL:
        raise Fail(f"after {d['rounds']} rounds your model is {gap:.1e} (relative) from the optimum of (1/N) sum "
                   f"f_i, the grader's FedAvg with the same steps {fed:.1e}; {ASKS} and reach it (within "
                   f"{DRIFT_TOL:.0e})")
    return 1.0, ""


def privacy(res: CaseResult):
    """From the grader's own counts and recorded payloads: at most 2d + 1 float64 per report, never data."""
    graded_after(lambda: models(res), "the server's (w, c)")
    K, d = res.case.world_size, res.case.data
    for q in range(1, K):
        reports = min(d["crash"].get(q, d["rounds"]), d["rounds"])
        sent, bound = res.stats(q)["bytes_sent"], reports * ((2 * D + 1) * 8 + envelope_bytes(1))
        if sent > bound:
            raise Fail(f"client {q} sent {sent} bytes in {reports} reports, more than the {bound} bytes of "
                       f"{reports} reports of at most 2d + 1 = {2 * D + 1} float64 each (one message each, header "
                       f"included); send (delta_y, delta_c), not data")
    entries = np.unique(np.concatenate([np.concatenate([x.ravel() for x in d["X"]]).astype(np.float64),
                                        np.concatenate([v.ravel() for v in d["y"]]).astype(np.float64)]))
    for src, dst, payload in res.messages:
        vals = np.asarray(payload).ravel()
        if vals.dtype.kind == "f" and int(np.isin(vals.astype(np.float64), entries).sum()) >= 2:
            raise Fail(f"a message from rank {src} to rank {dst} carries rows of a client's data: only "
                       "(delta_y, delta_c) may leave a client")
    return 1.0, ""


def clients(res: CaseResult):
    """Every client that did not drop returns its control variate c_i after the last round."""
    graded_after(lambda: models(res), "the server's (w, c)")
    d, K = res.case.data, res.case.world_size
    _, cs = _reference(res)
    for q in range(1, K):
        if d["crash"].get(q, d["rounds"]) < d["rounds"]:
            continue  # it dropped: its process stopped before it could return
        got = res.value(q, "its control variate c_i", dtype="float64", shape=(D,))
        close(got, cs[q], 1e-9, 1e-12, f"client {q}'s returned c_i (kept from round to round, option II)")
    return 1.0, ""


def broadcast(res: CaseResult):
    """From the grader's counts: one (w, c) per round to each client the server still hears from."""
    graded_after(lambda: models(res), "the server's (w, c)")
    d, K, rounds = res.case.data, res.case.world_size, res.case.data["rounds"]
    want = sum(1 for t in range(rounds) for q in range(1, K) if d["crash"].get(q, rounds) >= t)
    st = res.stats(0)
    if st["messages_sent"] > want or st["bytes_sent"] > want * (16 * D + envelope_bytes(1)):
        raise Fail(f"the server sent {st['messages_sent']} messages ({st['bytes_sent']} B); one (w, c) per round to "
                   f"each client it still hears from takes {want}: once a client's recv raises PeerCrashedError it "
                   f"has dropped, so leave it out of every later round (send it nothing)")
    return 1.0, ""


def _traffic(c: Case) -> bool:
    return c.backend == "sim" and c.world_size > 1 and c.data["group"] != "h"


TESTS = [
    Test("no_drop", "the server's w and c every round (K = 2, 4, 5, uneven and empty clients, float32 data)",
         select=lambda c: c.data["group"] == "n", check=models),
    Test("dropout", "dropped clients leave the mean of delta_y; c still divides by all N clients",
         select=lambda c: c.data["group"] == "d", check=models),
    Test("edge", "K = 1 and rounds where nobody reports keep (w, c)", select=lambda c: c.data["group"] == "a",
         check=models),
    Test("drift", "on heterogeneous clients SCAFFOLD reaches the optimum where FedAvg with the same steps drifts",
         select=lambda c: c.data["group"] == "h", check=drift),
    Test("privacy", "clients send only (delta_y, delta_c): bytes and payloads counted by the grader",
         select=_traffic, check=privacy),
    Test("clients", "every client that did not drop returns its control variate c_i", select=_traffic,
         check=clients),
    Test("broadcast", "the server sends (w, c) only to clients it still hears from (the grader's counts)",
         select=_traffic, check=broadcast),
    Test("correct_process", "the same (w, c) on 3 real processes", select=lambda c: c.data["group"] == "p",
         check=models),
]
