"""Lab 14: FedAvg with client dropout (the grader decides who drops: a crash fault at a client's send).

Graded: the server's models (no drops, drops at round 0, in the middle and in the last round, everyone gone,
empty clients, random cases from the plan's rng), every client's own return value against local training from
the model the server really sent it, the server's sends (never again to a client that dropped) and the clients'
bytes and payloads, all from the grader's own counts and records (one envelope per message)."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, NotGraded, Plan, Test, close, envelope_bytes,
                                       graded_after)
from scaleoutai.ml.federated import weighted_average  # the reference aggregation (grader side only)

UNIMPORTABLE = ("scaleoutai.ml", "scaleoutai.collectives", "scaleoutai.parallel")  # the answers

D, LR, STEPS = 5, 0.05, 3
# (K, rounds, {client rank: reports it sends before it drops}, empty client ranks, backend)
NO_DROP = [(2, 3, {}, (), "sim"), (3, 3, {}, (), "sim"), (5, 3, {}, (2,), "sim"),
           (8, 2, {}, (), "sim")]
DROP = [(3, 3, {1: 0}, (), "sim"), (5, 3, {2: 1, 4: 0}, (), "sim"), (5, 4, {1: 2}, (3,), "sim"),
        (8, 3, {1: 0, 3: 1, 6: 2, 7: 0}, (), "sim"), (4, 3, {3: 1}, (), "sim"),
        (6, 3, {2: 2, 5: 2}, (4,), "sim")]  # drops in the last round
ALL_DROP = [(1, 2, {}, (), "sim"), (4, 2, {1: 0, 2: 0, 3: 0}, (), "sim"), (3, 3, {1: 1, 2: 1}, (), "sim"),
            (3, 2, {2: 0}, (1,), "sim"), (2, 3, {1: 1}, (), "sim")]
PROCESS = [(3, 2, {}, (), "process")]
RANDOM = 2  # property cases: random K, rounds, drops and empty clients from the plan's rng


def _random_case(rng: np.random.Generator) -> tuple:
    """A random case in which client 1 holds data and never drops, so every round has a reporter with n_k > 0."""
    K, rounds = int(rng.integers(3, 8)), int(rng.integers(2, 5))
    others = rng.permutation(np.arange(2, K))
    n_drop = int(rng.integers(1, len(others) + 1))
    crash = {int(q): int(rng.integers(0, rounds)) for q in others[:n_drop]}
    empty = tuple(int(q) for q in others[n_drop:] if rng.random() < 0.5)
    return K, rounds, crash, empty, "sim"


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    random_cases = [_random_case(rng) for _ in range(RANDOM)]
    for group, cases in (("n", NO_DROP), ("d", DROP + random_cases), ("a", ALL_DROP), ("p", PROCESS)):
        for i, (K, rounds, crash, empty, backend) in enumerate(cases):
            sizes = [0] + [0 if r in empty else int(rng.integers(2, 40)) for r in range(1, K)]
            X = [rng.standard_normal((n, D)) for n in sizes]
            y = [x @ rng.standard_normal(D) + 0.1 * rng.standard_normal(len(x)) for x in X]
            w0 = rng.standard_normal(D)
            drops = ", ".join(f"client {r} drops in round {c}" for r, c in sorted(crash.items())) or "no drops"
            label = (f"K={K}, {rounds} rounds, n_k={sizes[1:]}, {drops}, "
                     f"{'simulator' if backend == 'sim' else '3 processes'}")
            case = Case(id=f"{group}{i}", fn="fedavg", label=label, world_size=K, backend=backend,
                        timeout=30 if backend == "process" else 10,
                        faults={"crash": {str(r): c for r, c in crash.items()}} if crash else {},
                        data={"group": group, "rounds": rounds, "crash": crash, "record_messages": backend == "sim",
                              "w0": w0, "X": X, "y": y})
            p.add_in_order(case, [("w", w0), ("X", X), ("y", y), ("=", rounds), ("=", LR), ("=", STEPS)])
    return p


def _gd(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    for _ in range(STEPS):
        w = w - LR * (2.0 / len(y)) * (X.T @ (X @ w - y)) if len(y) else w
    return w


def _reference(res: CaseResult) -> np.ndarray:
    d, K = res.case.data, res.case.world_size
    w, out = d["w0"].astype(np.float64), []
    for t in range(d["rounds"]):
        reporters = [q for q in range(1, K) if d["crash"].get(q, d["rounds"]) > t]
        new = weighted_average([_gd(w, d["X"][q], d["y"][q]) for q in reporters],
                               [len(d["y"][q]) for q in reporters]) if reporters else None
        w = w if new is None else new
        out.append(w)
    return np.stack(out)


def models(res: CaseResult):
    rounds, K = res.case.data["rounds"], res.case.world_size
    want = _reference(res)
    got = res.value(0, "global models", dtype="float64", shape=(rounds, D))
    for t, row in enumerate(got):
        reporters = [q for q in range(1, K) if res.case.data["crash"].get(q, rounds) > t]
        close(row, want[t], 1e-9, 1e-12, f"the global model after round {t} (reported: clients {reporters})")
    return 1.0, ""


def privacy(res: CaseResult):
    """From the grader's own counts and recorded payloads: models and counts only, never data."""
    graded_after(lambda: models(res), "the global model")
    K, d = res.case.world_size, res.case.data
    for q in range(1, K):
        reports = min(d["crash"].get(q, d["rounds"]), d["rounds"])
        sent, bound = res.stats(q)["bytes_sent"], reports * ((D + 1) * 8 + envelope_bytes(1))
        if sent > bound:
            raise Fail(f"client {q} sent {sent} bytes in {reports} reports, more than the {bound} bytes of "
                       f"{reports} reports of (n_k, w_k) = {D + 1} float64 each (one message each, header "
                       f"included); send the model, not data")
    entries = np.unique(np.concatenate([np.concatenate([x.ravel() for x in d["X"]]),
                                        np.concatenate([v.ravel() for v in d["y"]])]))
    for src, dst, payload in res.messages:
        vals = np.asarray(payload).ravel()
        if vals.dtype.kind == "f" and int(np.isin(vals.astype(np.float64), entries).sum()) >= 2:
            raise Fail(f"a message from rank {src} to rank {dst} carries rows of a client's data: only the "
                       "model and n_k may leave a client")
    return 1.0, ""


def _sent_to(res: CaseResult, q: int) -> list[np.ndarray]:
    """What the server sent client q, in order (the grader's record)."""
    return [np.asarray(m) for src, dst, m in res.messages if src == 0 and dst == q]


def clients(res: CaseResult):
    """Every client that did not drop returns (rounds, d) float64: row t is local_train of the model the server
    really sent it in round t (graded on the server's messages, so a wrong server costs the server's tests)."""
    d, K = res.case.data, res.case.world_size
    rounds = d["rounds"]
    for q in range(1, K):
        if d["crash"].get(q, rounds) < rounds:
            continue  # it dropped: its process stopped before it could return
        got = res.value(q, "local models (one row per round)", dtype="float64", shape=(rounds, D))
        models = _sent_to(res, q)
        for t, row in enumerate(got):
            if t >= len(models) or models[t].shape != (D,) or not np.isfinite(models[t]).all():
                raise NotGraded(f"graded once the server sends client {q} a finite model every round; the global "
                                f"model tests say what is wrong")
            close(row, _gd(models[t].astype(np.float64), d["X"][q], d["y"][q]), 1e-9, 1e-12,
                  f"client {q}'s returned row {t} (its local model w_k of round {t}: local_train from the model "
                  f"it received)")
    return 1.0, ""


def broadcast(res: CaseResult):
    """From the grader's counts: one model (d float64) per round to each client the server still hears from;
    nothing to a client once its recv has raised PeerCrashedError."""
    graded_after(lambda: models(res), "the global model")
    d, K, rounds = res.case.data, res.case.world_size, res.case.data["rounds"]
    want = sum(1 for t in range(rounds) for q in range(1, K) if d["crash"].get(q, rounds) >= t)
    st = res.stats(0)
    if st["messages_sent"] > want or st["bytes_sent"] > want * (8 * D + envelope_bytes(1)):
        raise Fail(f"the server sent {st['messages_sent']} messages ({st['bytes_sent']} B); one model per round to "
                   f"each client it still hears from takes {want}: once a client's recv raises PeerCrashedError it "
                   f"has dropped, so leave it out of every later round (send it nothing)")
    return 1.0, ""


TESTS = [
    Test("no_drop", "the global model is the n_k-weighted average every round (K = 2, 3, 5, 8, uneven n_k)",
         select=lambda c: c.data["group"] == "n", check=models),
    Test("dropout", "clients that drop are left out and the rest weighted by their own n_k",
         select=lambda c: c.data["group"] == "d", check=models),
    Test("all_drop", "a round where nobody (or only empty clients) reports keeps the model (K = 1 included)",
         select=lambda c: c.data["group"] == "a", check=models),
    Test("privacy", "clients send only (n_k, w_k): bytes and payloads counted by the grader",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=privacy),
    Test("clients", "every client that did not drop returns its local model of every round",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=clients),
    Test("broadcast", "the server sends the model only to clients it still hears from (the grader's counts)",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=broadcast),
    Test("correct_process", "the same global models on 3 real processes", select=lambda c: c.data["group"] == "p",
         check=models),
]
