"""Lab 1: the sharded loss and gradient of logistic regression, stable past exp's overflow."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes,
                                       graded_after)

# the course's sharded least-squares gradient, its collectives, and the library's softmax/logistic models
UNIMPORTABLE = ("scaleoutai.foundations.sharding", "scaleoutai.collectives", "scaleoutai.parallel", "scaleoutai.ml")

# (n, d, dtype, kind): "moderate" scores |z| of a few units; "extreme" |z| past exp's overflow (709 in float64,
# 88 in float32) on both sides; "confident" every example right with a margin of 25-45 (float64) or 12-30
# (float32), so the loss and the gradient are about e^-margin and must be right relative to their own size.
LOCAL = [(20, 3, "float64", "moderate"), (7, 4, "float32", "moderate"), (1, 5, "float64", "moderate"),
         (0, 3, "float64", "moderate"), (33, 6, "float32", "moderate"), (0, 2, "float32", "moderate"),
         (16, 3, "float64", "extreme"), (16, 4, "float32", "extreme"), (12, 3, "float64", "confident"),
         (12, 3, "float32", "confident")]
# (K, N, d, dtype, split, kind, backend): "even" is np.array_split (shards differ by one row, empty when K > N);
# a tuple gives each rank's row count. Stable cases use splits where K divides N.
SHARDED = [(1, 23, 4, "float64", "even", "moderate", "sim"), (2, 23, 4, "float64", "even", "moderate", "sim"),
           (3, 23, 4, "float32", "even", "moderate", "sim"), (5, 23, 4, "float64", "even", "moderate", "sim"),
           (8, 23, 4, "float64", "even", "moderate", "sim"), (5, 101, 6, "float32", "even", "moderate", "sim"),
           (8, 5, 3, "float64", "even", "moderate", "sim"), (4, 24, 3, "float64", "even", "moderate", "sim"),
           (7, 2, 3, "float32", "even", "moderate", "sim"),
           (6, 40, 3, "float64", (0, 1, 30, 0, 2, 7), "moderate", "sim"),
           (2, 4000, 3, "float32", (3300, 700), "moderate", "sim"),
           (2, 30, 3, "float64", (21, 9), "moderate", "process"),
           (3, 12, 3, "float64", "even", "extreme", "sim"), (2, 10, 4, "float32", "even", "extreme", "sim"),
           (4, 16, 3, "float32", "even", "confident", "sim"), (5, 15, 3, "float64", "even", "confident", "sim")]
RANDOM = 3  # property cases: K, N, d, dtype and the split drawn from the plan's seeded rng
TOL = {"float64": (1e-9, 1e-9), "float32": (2e-4, 1e-4)}  # (rtol, atol relative to the values' scale)
HEADERS = 3  # per peer: the gradient, the loss and the count together or as up to three messages
ASK = ("the lab asks for the logistic-regression loss mean(log(1 + e^z) - y z) and its gradient "
       "(1/n) X^T (sigmoid(z) - y), z = X w; the chapter's least-squares gradient is not it")


def _data(rng: np.random.Generator, n: int, d: int, dt: str, kind: str) -> dict[str, np.ndarray]:
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    if kind == "confident":  # move each row along w so that its margin is exactly t_i
        lo, hi = (25, 45) if dt == "float64" else (12, 30)
        t = rng.uniform(lo, hi, n) * rng.choice([-1.0, 1.0], n)
        X += np.outer(t - X @ w, w) / (w @ w)
        y = (t > 0).astype(float)
    else:
        if kind == "extreme":
            w *= 900.0 if dt == "float64" else 150.0
        y = (rng.random(n) < 0.5).astype(float)
    return {"X": X.astype(dt), "y": y.astype(dt), "w": w.astype(dt)}


def _random_case(rng: np.random.Generator) -> tuple:
    K = int(rng.integers(2, 7))
    n = int(rng.integers(1, 3 * K + 1))
    cuts = np.sort(rng.integers(0, n + 1, size=K - 1))
    sizes = tuple(int(s) for s in np.diff(np.concatenate([[0], cuts, [n]])))
    return K, n, int(rng.integers(1, 6)), str(rng.choice(["float32", "float64"])), sizes, "moderate", "sim"


def _add_sharded(p: Plan, rng: np.random.Generator, cid: str, K: int, n: int, d: int, dt: str, how, kind: str,
                 backend: str, prefix: str = "") -> None:
    full = _data(rng, n, d, dt, kind)
    rows = np.array_split(np.arange(n), K) if how == "even" else np.split(np.arange(n), np.cumsum(how)[:-1])
    sizes = [len(r) for r in rows]
    empty = sizes.count(0)
    why = (", uneven shards" if max(sizes) - min(sizes) > 1 else "") + (
        f", {empty} empty shard{'s' * (empty > 1)}" if empty else "") + _KIND[kind] + (
        ", 2 real processes" if backend == "process" else "")
    case = Case(id=cid, fn="grader_sharded", label=f"{prefix}K={K}, N={n}, d={d}, {dt}{why}", world_size=K,
                backend=backend, timeout=20 if backend == "process" else 8,
                data={"d": d, "dtype": dt, "kind": kind, "full": full, "record_messages": True})
    p.add_in_order(case, [("X", [full["X"][r] for r in rows]), ("y", [full["y"][r] for r in rows]),
                          ("w", full["w"])])


_KIND = {"moderate": "", "extreme": ", scores |z| past exp's overflow",
         "confident": ", every example confidently right (large margins)"}


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (n, d, dt, kind) in enumerate(LOCAL):
        case = Case(id=f"l{i}", fn="grader_local", mode="call", label=f"local_gradient on n={n} rows, d={d}, {dt}"
                    f"{_KIND[kind]}", timeout=5, data={"d": d, "dtype": dt, "kind": kind})
        p.add(case, shared=_data(rng, n, d, dt, kind))
    for i, spec in enumerate(SHARDED):
        _add_sharded(p, rng, f"s{i}", *spec)
    for i in range(RANDOM):
        _add_sharded(p, rng, f"p{i}", *_random_case(rng), prefix=f"random case {i + 1}: ")
    return p


def _reference(res: CaseResult) -> tuple[float, np.ndarray, np.ndarray]:
    """(loss, gradient, least-squares gradient) in float64 from the stored data, stable for every z."""
    full = res.case.data.get("full") or {k: res.shared(k) for k in ("X", "y", "w")}
    X, y, w = (full[k].astype(np.float64) for k in ("X", "y", "w"))
    if len(y) == 0:
        return 0.0, np.zeros_like(w), np.zeros_like(w)
    z = X @ w
    m = np.where(y == 1, z, -z)
    tail = np.exp(-np.abs(m))
    loss = float(np.mean(np.maximum(-m, 0) + np.log1p(tail)))
    wrong = np.where(m >= 0, tail / (1 + tail), 1 / (1 + tail))
    return loss, X.T @ np.where(y == 1, -wrong, wrong) / len(y), 2.0 / len(y) * X.T @ (z - y)


def _unpack(res: CaseResult, rank: int, who: str, typed: bool = True) -> tuple[float, np.ndarray]:
    d, dt = res.case.data["d"], res.case.data["dtype"]
    v = res.value(rank, f"{who}'s result", shape=(d + 2,))
    if v.dtype != np.float64:
        raise Fail(f"{who}'s result did not come back through the grader's cell (leave `_pack` as it is)")
    if typed and int(v[1]) != np.dtype(dt).itemsize:
        raise Fail(f"{who}'s gradient is not a 1-D float array of X's dtype {dt} (keep the input's dtype)")
    return float(v[0]), v[2:]


def _check_grad(res: CaseResult, rank: int, who: str) -> None:
    dt, kind = res.case.data["dtype"], res.case.data["kind"]
    loss, grad = _unpack(res, rank, who)
    ref, ref_ls = _reference(res)[1:]
    rtol, atol = TOL[dt]
    scale = float(np.abs(ref).max(initial=0)) + (kind == "moderate")  # stable cases: relative to its own size
    if not np.isfinite(grad).all():
        raise Fail(f"{who}'s gradient holds inf or NaN: an empty shard divides 0 by 0, or e^z overflowed")
    if len(ref_ls) and np.allclose(grad, ref_ls, rtol=1e-3, atol=1e-6) and not np.allclose(ref, ref_ls, rtol=1e-3):
        raise Fail(f"{who}'s gradient is the least-squares one, (2/n) X^T (Xw - y): {ASK}")
    try:
        close(grad, ref, rtol, atol * scale, f"{who}'s gradient")
    except Fail as err:
        hint = {"confident": "; on confident predictions sigmoid(z) - y is about e^-margin: 1 - sigmoid(z) cancels to "
                             "0, compute it from e^-|margin| directly",
                "extreme": "; with |z| past exp's overflow"}.get(kind, f" ({ASK})")
        raise Fail(f"{err}{hint}") from None


def _check_loss(res: CaseResult, rank: int, who: str) -> None:
    dt, kind = res.case.data["dtype"], res.case.data["kind"]
    loss = _unpack(res, rank, who, typed=False)[0]
    ref = _reference(res)[0]
    rtol = TOL[dt][0]
    if not np.isfinite(loss):
        raise Fail(f"{who}'s loss is {loss}: log(1 + e^z) must not overflow (a stable log-sum-exp never "
                   f"takes e of a large positive number)")
    if not abs(loss - ref) <= rtol * ref + (1e-12 if kind != "confident" else 0.0):
        what = {"confident": "; on confident predictions each loss term is about e^-margin: log(1 + e^z) - y z "
                             "cancels, use log1p(e^-|margin|)",
                "extreme": " with |z| past exp's overflow"}.get(
                    kind, f" ({ASK})" if who == "local_gradient" else " (weight each shard's loss by its rows)")
        raise Fail(f"{who}'s loss is off by {abs(loss - ref) / max(ref, 1e-300):.2g} relative (tolerance {rtol:g})"
                   f"{what}")


def local(res: CaseResult):
    _check_grad(res, 0, "local_gradient")
    _check_loss(res, 0, "local_gradient")
    return 1.0, ""


def sharded(res: CaseResult):
    for r in range(res.case.world_size):
        _check_grad(res, r, f"rank {r}")
    return 1.0, ""


def loss(res: CaseResult):
    for r in range(res.case.world_size):
        _check_loss(res, r, f"rank {r}")
    return 1.0, ""


def stable(res: CaseResult):
    if res.case.mode == "call":
        return local(res)
    sharded(res)
    return loss(res)


def communication(res: CaseResult):
    """From the grader's counts: (d + 2)-value messages, no rows of X, and every rank hears from every rank."""
    K, d = res.case.world_size, res.case.data["d"]
    graded_after(lambda: sharded(res), "the gradient")
    bound = (K - 1) * ((d + 2) * 8 + HEADERS * envelope_bytes(1))
    for r in range(K):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} bytes, {sent / bound:.1f}x the {bound} bytes that adding up a d={d} "
                       f"gradient, a loss and a count needs at most ((K-1)(d+2)*8 plus {HEADERS} message headers "
                       f"per peer); send sums, not rows of X")
    X = res.case.data["full"]["X"]
    entries = np.unique(np.concatenate([X.ravel().astype(np.float64), X.ravel().astype(np.float32).astype(np.float64)]))
    for src, dst, payload in res.messages:
        vals = np.asarray(payload).ravel()
        if vals.dtype.kind not in "fc":
            continue
        hits = int(np.isin(vals.real.astype(np.float64), entries).sum())
        if hits >= 2:
            raise Fail(f"a message from rank {src} to rank {dst} carries {hits} entries of the data X: each rank "
                       f"holds its own shard, so send its sums (d + 2 values), not rows of X")
    heard = {r: {r} for r in range(K)}  # whose contribution can have reached rank r so far
    in_flight: dict[tuple[int, int], list[set[int]]] = {}
    for e in sorted(res.trace, key=lambda e: (e.end, 0) if e.kind == "recv" else (e.start, 1)):
        if e.kind == "send":  # a message carries what its sender had heard when it left
            in_flight.setdefault((e.rank, e.peer), []).append(set(heard[e.rank]))
        elif in_flight.get((e.peer, e.rank)):
            heard[e.rank] |= in_flight[(e.peer, e.rank)].pop(0)
    for r in range(K):
        if len(heard[r]) < K:
            missing = sorted(set(range(K)) - heard[r])
            raise Fail(f"rank {r} returned a result although no message chain brought it rank "
                       f"{missing[0]}'s contribution: each rank holds only its own shard")
    return 1.0, ""


def _moderate(c: Case) -> bool:
    return c.data.get("kind") == "moderate"


TESTS = [
    Test("local", "local_gradient: the mean logistic loss and gradient of one shard, empty shards included",
         select=lambda c: c.mode == "call" and _moderate(c), check=local),
    Test("sharded", "sharded_gradient's gradient equals the single-machine one on every rank (K = 1-8, uneven and "
         "empty shards, float32/float64, 2 real processes)", select=lambda c: c.mode == "spmd" and _moderate(c),
         check=sharded),
    Test("loss", "sharded_gradient's loss equals the single-machine loss on every rank (weighted by shard size)",
         select=lambda c: c.mode == "spmd" and _moderate(c), check=loss),
    Test("stable", "loss and gradient stay finite and accurate past exp's overflow and on confident predictions "
         "(relative to their own size), on one shard and sharded", select=lambda c: not _moderate(c), check=stable),
    Test("communication", "sharded_gradient sends d + 2 sums, not data, and hears from every rank",
         select=lambda c: c.mode == "spmd" and c.world_size > 1 and c.backend == "sim" and _moderate(c),
         check=communication),
]
