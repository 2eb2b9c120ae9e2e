"""Lab 1: the sharded gradient of a linear model."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes,
                                       graded_after)

UNIMPORTABLE = ("scaleoutai.foundations.sharding", "scaleoutai.collectives", "scaleoutai.parallel")  # the answers

LOCAL = [(20, 3, "float64"), (7, 4, "float32"), (1, 5, "float64"), (0, 3, "float64"), (33, 6, "float32"),
         (0, 2, "float32")]
# (K, N, d, dtype, how the rows are split): "even" is np.array_split (shards differ by one row, empty when K > N);
# a tuple gives each rank's row count. The last cases: an even split, K > N twice over, a very uneven split
# with empty shards, and one shard of more rows than an int16 counts (the count must not overflow).
SHARDED = [(1, 23, 4, "float64", "even"), (2, 23, 4, "float64", "even"), (3, 23, 4, "float32", "even"),
           (5, 23, 4, "float64", "even"), (8, 23, 4, "float64", "even"), (5, 101, 6, "float32", "even"),
           (8, 5, 3, "float64", "even"), (4, 24, 3, "float64", "even"), (7, 2, 3, "float32", "even"),
           (6, 40, 3, "float64", (0, 1, 30, 0, 2, 7)), (2, 40_000, 2, "float32", (33_000, 7_000))]
RANDOM = 3  # property cases: K, N, d, dtype and the split drawn from the plan's seeded rng
TOL = {"float64": (1e-9, 1e-12), "float32": (2e-4, 1e-4)}  # (rtol, atol relative to the gradient's scale)
HEADERS = 2  # a rank may send its gradient and its row count together or as two messages (one header each)


def _data(rng: np.random.Generator, n: int, d: int, dtype: str) -> dict[str, np.ndarray]:
    X = rng.standard_normal((n, d)).astype(dtype)
    return {"X": X, "y": (X @ rng.standard_normal(d) + rng.standard_normal(n)).astype(dtype),
            "w": rng.standard_normal(d).astype(dtype)}


def _random_case(rng: np.random.Generator) -> tuple:
    K = int(rng.integers(2, 7))
    n = int(rng.integers(1, 3 * K + 1))
    cuts = np.sort(rng.integers(0, n + 1, size=K - 1))
    sizes = tuple(int(s) for s in np.diff(np.concatenate([[0], cuts, [n]])))
    return K, n, int(rng.integers(1, 6)), str(rng.choice(["float32", "float64"])), sizes


def _add_sharded(p: Plan, rng: np.random.Generator, cid: str, K: int, n: int, d: int, dt: str, how,
                 prefix: str = "") -> None:
    full = _data(rng, n, d, dt)
    if how == "even":
        rows = np.array_split(np.arange(n), K)  # each rank process is handed its own shard only
    else:
        rows = np.split(np.arange(n), np.cumsum(how)[:-1])
    sizes = [len(r) for r in rows]
    empty = sizes.count(0)
    why = (", uneven shards" if max(sizes) - min(sizes) > 1 else "") + (
        f", {empty} empty shard{'s' * (empty > 1)}" if empty else "")
    case = Case(id=cid, fn="sharded_gradient", label=f"{prefix}K={K}, N={n}, d={d}, {dt}{why}", world_size=K,
                timeout=8, data={"d": d, "dtype": dt, "full": full, "record_messages": True})
    p.add_in_order(case, [("X", [full["X"][r] for r in rows]), ("y", [full["y"][r] for r in rows]),
                          ("w", full["w"])])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (n, d, dt) in enumerate(LOCAL):
        p.add(Case(id=f"l{i}", fn="local_gradient", mode="call", label=f"local_gradient on n={n} rows, d={d}, {dt}",
                   timeout=5, data={"d": d, "dtype": dt}), shared=_data(rng, n, d, dt))
    for i, (K, n, d, dt, how) in enumerate(SHARDED):
        _add_sharded(p, rng, f"s{i}", K, n, d, dt, how)
    for i in range(RANDOM):
        _add_sharded(p, rng, f"p{i}", *_random_case(rng), prefix=f"random case {i + 1}: ")
    return p


def _reference(res: CaseResult) -> np.ndarray:
    full = res.case.data.get("full") or {k: res.shared(k) for k in ("X", "y", "w")}
    X, y, w = (full[k].astype(np.float64) for k in ("X", "y", "w"))
    return 2.0 / len(y) * X.T @ (X @ w - y) if len(y) else np.zeros_like(w)


def _check_rank(res: CaseResult, rank: int, what: str) -> None:
    d, dt = res.case.data["d"], res.case.data["dtype"]
    ref = _reference(res)
    rtol, atol = TOL[dt]
    got = res.value(rank, what, dtype=dt, shape=(d,))
    close(got, ref, rtol, atol * (1 + float(np.abs(ref).max(initial=0))), f"rank {rank}'s gradient")


def local(res: CaseResult):
    _check_rank(res, 0, "gradient")
    return 1.0, ""


def sharded(res: CaseResult):
    for r in range(res.case.world_size):
        _check_rank(res, r, "gradient")
    return 1.0, ""


def communication(res: CaseResult):
    """From the grader's counts: gradient-sized messages, and every rank's contribution reaches it."""
    K, d = res.case.world_size, res.case.data["d"]
    graded_after(lambda: sharded(res), "the gradient")
    bound = (K - 1) * ((d + 1) * 8 + HEADERS * envelope_bytes(1))
    for r in range(K):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} bytes, {sent / bound:.1f}x the {bound} bytes that averaging a "
                       f"d={d} gradient needs at most ((K-1)(d+1)*8 plus {HEADERS} message headers per peer); "
                       f"send gradients, not rows of X")
    # Bytes alone cannot tell a 3-row shard from a gradient: look inside the grader's recorded payloads too.
    X = res.case.data["full"]["X"]
    entries = np.unique(np.concatenate([X.ravel().astype(np.float64), X.ravel().astype(np.float32).astype(np.float64)]))
    for src, dst, payload in res.messages:
        vals = np.asarray(payload).ravel()
        if vals.dtype.kind not in "fc":
            continue
        hits = int(np.isin(vals.real.astype(np.float64), entries).sum())
        if hits >= 2:
            raise Fail(f"a message from rank {src} to rank {dst} carries {hits} entries of the data X: "
                       f"each rank holds its own shard, so send its gradient (d values, and its row count), not rows of X")
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
            raise Fail(f"rank {r} returned a gradient although no message chain brought it rank "
                       f"{missing[0]}'s contribution: each rank holds only its own shard")
    return 1.0, ""


TESTS = [
    Test("local", "local_gradient matches (2/n) X^T (Xw - y), empty shards included", select=lambda c: c.mode == "call",
         check=local),
    Test("sharded", "sharded_gradient equals the single-machine gradient on every rank (K = 1-8, uneven and empty "
         "shards, large shards)", select=lambda c: c.mode == "spmd", check=sharded),
    Test("communication", "sharded_gradient sends gradients, not data, and hears from every rank", select=lambda c: c.mode == "spmd"
         and c.world_size > 1, check=communication),
]
