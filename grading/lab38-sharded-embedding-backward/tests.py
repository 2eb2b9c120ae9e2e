"""Lab 38: one training step of a row-sharded EmbeddingBag with deduplicated traffic and a sparse update on
the owners. Each rank holds its rows, its bags and dL/dpooled of its bags only; the grader checks the pooled
bags and the updated rows (and row-wise Adagrad accumulators) against torch's embedding_bag and one optimizer
step on the whole table, and, from its own recorded messages, the protocol: per ordered pair of ranks one
int64 request of the distinct ids, one reply of exactly those rows, one summed gradient row per id."""
from __future__ import annotations

import numpy as np
import torch

from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

# (K, V, d, bags per rank, longest bag, dtype, mode, weighted, optimizer, placement, what). Ids follow a Zipf
# law over a shuffled vocabulary, so hot ids repeat across bags and live on every owner.
REGULAR = [(1, 12, 4, 10, 6, "float64", "sum", False, "sgd", "mod", ""),
           (2, 20, 4, 12, 6, "float32", "sum", True, "sgd", "mod", ", per-sample weights"),
           (3, 31, 5, 12, 8, "float64", "mean", False, "rowwise_adagrad", "range", ", uneven blocks (31 rows)"),
           (5, 47, 3, 14, 8, "float32", "sum", True, "rowwise_adagrad", "random", ", random owners, weights"),
           (8, 60, 4, 16, 10, "float64", "sum", False, "rowwise_adagrad", "mod", ""),
           (5, 23, 4, 12, 6, "float64", "mean", False, "sgd", "mod", ", 23 rows"),
           (4, 30, 3, 10, 6, "float32", "mean", False, "rowwise_adagrad", "range", ""),
           (3, 40, 6, 12, 8, "float64", "sum", True, "rowwise_adagrad", "random", ", random owners, weights"),
           (2, 15, 1, 10, 6, "float64", "sum", False, "rowwise_adagrad", "mod", ", d = 1"),
           (3, 25, 4, 12, 8, "float32", "sum", False, "sgd", "random", ", random owners")]
SMALL = [(6, 4, 3, 3, 4, "float64", "sum", False, "rowwise_adagrad", "mod", ": K > V (ranks without rows), empty bags"),
         (5, 3, 2, 4, 3, "float32", "mean", False, "sgd", "range", ": K > V, empty bags in mean mode"),
         (3, 10, 3, (5, 0, 4), 5, "float64", "sum", True, "sgd", "range", ": a rank without bags, weights"),
         (4, 12, 2, 5, 0, "float32", "mean", False, "rowwise_adagrad", "random", ": every bag empty"),
         (2, 1, 3, 4, 3, "float64", "sum", False, "rowwise_adagrad", "mod", ": a one-row table"),
         (3, 14, 3, 6, 5, "float64", "sum", True, "rowwise_adagrad", "one", ": rank 0 owns every row")]
PROCESS = [(2, 16, 4, 8, 6, "float32", "sum", True, "rowwise_adagrad", "mod", "")]
PROPERTY = 4  # seeded random cases: K, V, d, bags, dtype, mode, weights, optimizer and placement drawn
UNIMPORTABLE = ("scaleoutai.cases.recsys", "scaleoutai.cases.recsys_shard", "scaleoutai.cases.recsys_train")
EPS = 1e-10
TOL = {"float32": 2e-5, "float64": 1e-10}  # relative to 1 + |expected|: any order of summation passes
ASKS = ("the lab asks for deduplicated traffic: each distinct id once to its owner, its row once back, one summed "
        "gradient row per id; the chapter's (row, segment) pairs per entry and partials per segment are not it")


def _owner(rng: np.random.Generator, V: int, K: int, placement: str) -> np.ndarray:
    if placement == "mod":
        return np.arange(V, dtype=np.int64) % K
    if placement == "range":
        return np.concatenate([np.full(hi - lo, j) for j, (lo, hi) in enumerate(block_bounds(V, K))]).astype(np.int64)
    if placement == "one":
        return np.zeros(V, dtype=np.int64)
    return rng.integers(0, K, V).astype(np.int64)


def _bags(rng: np.random.Generator, n: int, longest: int, V: int, perm: np.ndarray, empty: bool):
    lengths = rng.integers(0 if empty else 1, longest + 1, n)
    if empty and n > 1:
        lengths[[0, -1]] = 0  # the first and the last bag empty (offsets[-1] == len(ids))
    ids = perm[(rng.zipf(1.3, int(lengths.sum())) - 1) % V].astype(np.int64)
    return ids, (np.cumsum(lengths) - lengths).astype(np.int64)


def _add(p: Plan, rng: np.random.Generator, cid: str, kind: str, spec: tuple) -> None:
    K, V, d, nb, longest, dtype, mode, weighted, optimizer, placement, note = spec
    owner, perm = _owner(rng, V, K, placement), rng.permutation(V)
    table = rng.standard_normal((V, d)).astype(dtype)
    acc = (rng.uniform(0, 1, V) if optimizer == "rowwise_adagrad" else np.zeros(V)).astype(dtype)
    bags = [_bags(rng, nb if isinstance(nb, int) else nb[r], longest, V, perm, kind == "small") for r in range(K)]
    weights = [rng.uniform(0.5, 2, len(i)).astype(dtype) if weighted else np.ones(len(i), dtype) for i, _ in bags]
    grads = [rng.standard_normal((len(o), d)).astype(dtype) for _, o in bags]
    mine = [np.flatnonzero(owner == r) for r in range(K)]
    backend = "process" if kind == "process" else "sim"
    label = (f"K={K}, V={V} (shards of {min(map(len, mine))}..{max(map(len, mine))} rows, {placement}), d={d}, "
             f"mode={mode}, {optimizer}, {dtype}, {'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_step", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 10,
                data={"kind": kind, "dtype": dtype, "mode": mode, "weighted": weighted, "optimizer": optimizer,
                      "lr": 0.1, "table": table, "acc": acc, "owner": owner, "bags": bags, "weights": weights,
                      "grads": grads, "mine": mine, "record_messages": backend == "sim"})
    p.add_in_order(case, [("owner", owner), ("rows", [table[m] for m in mine]), ("acc", [acc[m] for m in mine]),
                          ("ids", [i for i, _ in bags]), ("offsets", [o for _, o in bags]), ("weights", weights),
                          ("grad", grads), ("=", mode), ("=", weighted), ("=", 0.1), ("=", optimizer)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(REGULAR + SMALL + PROCESS):
        kind = "regular" if i < len(REGULAR) else "small" if i < len(REGULAR) + len(SMALL) else "process"
        _add(p, rng, f"c{i:02d}", kind, spec)
    for i in range(PROPERTY):
        K, V = int(rng.integers(2, 7)), int(rng.integers(2, 50))
        mode = str(rng.choice(["sum", "mean"]))
        spec = (K, V, int(rng.integers(1, 6)), int(rng.integers(1, 15)), int(rng.integers(1, 9)),
                str(rng.choice(["float32", "float64"])), mode, bool(mode == "sum" and rng.integers(2)),
                ("sgd", "rowwise_adagrad")[i % 2], str(rng.choice(["mod", "range", "random"])), ": seeded random case")
        _add(p, rng, f"p{i}", "small" if i % 2 else "regular", spec)
    return p


def _truth(res: CaseResult):
    """torch on the whole table in float64: pooled bags per rank, the table's gradient, rows and acc after."""
    c = res.case.data
    weight = torch.tensor(c["table"].astype(np.float64), requires_grad=True)
    outs, loss = [], weight.sum() * 0
    for (ids, offsets), w, g in zip(c["bags"], c["weights"], c["grads"]):
        psw = torch.tensor(w.astype(np.float64)) if c["weighted"] else None
        out = torch.nn.functional.embedding_bag(torch.tensor(ids), weight, torch.tensor(offsets), mode=c["mode"],
                                                per_sample_weights=psw)
        outs.append(out.detach().numpy())
        loss = loss + (out * torch.tensor(g.astype(np.float64))).sum()
    loss.backward()
    grad, acc = weight.grad.numpy(), c["acc"].astype(np.float64)
    if c["optimizer"] == "sgd":
        return outs, grad, c["table"] - c["lr"] * grad, acc
    acc = acc + (grad * grad).mean(axis=1)
    return outs, grad, c["table"] - c["lr"] * grad / (np.sqrt(acc)[:, None] + EPS), acc


def _split(res: CaseResult, r: int):
    c = res.case.data
    nb, n, d = len(c["bags"][r][1]), len(c["mine"][r]), c["table"].shape[1]
    got = res.value(r, "[pooled, rows, acc] (run_step's array)", dtype=c["dtype"], shape=(nb * d + n * d + n,))
    return got[:nb * d].reshape(nb, d), got[nb * d:nb * d + n * d].reshape(n, d), got[nb * d + n * d:]


def _close(got: np.ndarray, want: np.ndarray, res: CaseResult, what: str, hint: str) -> None:
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= TOL[res.case.data["dtype"]] * (1 + np.abs(want)))
    if bad.any():
        raise Fail(f"{what} is wrong in {int(bad.sum())} of {bad.size} entries (largest error "
                   f"{float(np.nanmax(np.where(np.isfinite(err), err, np.inf))):.3g}): {hint}")


def _pooled(res: CaseResult) -> None:
    outs = _truth(res)[0]
    for r in range(res.case.world_size):
        _close(_split(res, r)[0], outs[r], res, f"rank {r}'s pooled bags",
               "each bag is the (weighted) sum, or the mean, of its rows; an empty bag pools to zeros")


def _updated(res: CaseResult) -> None:
    _, grad, rows, acc = _truth(res)
    c = res.case.data
    for r in range(res.case.world_size):
        _, got_rows, got_acc = _split(res, r)
        m = c["mine"][r]
        _close(got_rows, rows[m], res, f"rank {r}'s rows after the step",
               "a row's gradient is the sum over EVERY rank's entries of that id (duplicates add, w_e times G[b] in "
               "sum mode, G[b]/|b| in mean mode)" + ("; row-wise Adagrad adds mean(g^2) to the row's accumulator "
                                                     "first" if c["optimizer"] != "sgd" else ""))
        _close(got_acc, acc[m], res, f"rank {r}'s accumulators after the step",
               "a += mean over the d columns of the row's summed gradient squared (unchanged for SGD)")


def pooled(res: CaseResult):
    _pooled(res)
    return 1.0, ""


def updated(res: CaseResult):
    graded_after(lambda: _pooled(res), "the pooled bags")
    _updated(res)
    return 1.0, ""


def correct(res: CaseResult):
    _pooled(res)
    _updated(res)
    return 1.0, ""


def _needs(res: CaseResult) -> dict[tuple[int, int], np.ndarray]:
    """(r, j) -> the distinct ids rank r's bags hold that rank j owns, increasing."""
    c, K = res.case.data, res.case.world_size
    out = {}
    for r in range(K):
        uniq = np.unique(c["bags"][r][0])
        for j in range(K):
            out[r, j] = uniq[c["owner"][uniq] == j]
    return out


def _between(res: CaseResult, s: int, t: int) -> list[np.ndarray]:
    return [a for src, dst, a in res.messages if src == s and dst == t]


def _graded(res: CaseResult) -> None:
    graded_after(lambda: _pooled(res), "the pooled bags")  # the messages' contents are checked here, not the update


def requests(res: CaseResult):
    """Per ordered pair, exactly one integer message: the distinct ids r needs from j, int64, increasing."""
    _graded(res)
    for (r, j), need in _needs(res).items():
        if r == j:
            continue
        ints = [a for a in _between(res, r, j) if a.dtype.kind in "iub"]
        if len(ints) != 1:
            raise Fail(f"rank {r} sent rank {j} {len(ints)} integer messages; the request is one int64 message "
                       f"of the distinct ids rank {r} needs from rank {j} (empty when none): {ASKS}")
        a = ints[0]
        if a.dtype != np.int64 or a.shape != need.shape:
            more = " (an id per entry, or (row, segment) pairs: " + ASKS + ")" if a.size > need.size else ""
            raise Fail(f"rank {r}'s request to rank {j} is {a.dtype} of shape {a.shape}; it holds each distinct id "
                       f"rank {j} owns once, int64, shape ({need.size},){more}")
        if not np.array_equal(a, need):
            raise Fail(f"rank {r}'s request to rank {j} holds the wrong ids in {int((a != need).sum())} of "
                       f"{need.size} places: the distinct ids of its bags that rank {j} owns, in increasing order")
    return 1.0, ""


def replies(res: CaseResult):
    """Owner j sends r one (u_rj, d) message: its rows of r's request, in that order, in the table's dtype."""
    _graded(res)
    c = res.case.data
    for (r, j), need in _needs(res).items():
        if r == j:
            continue
        want = c["table"][need]
        floats = [a for a in _between(res, j, r) if a.dtype.kind == "f"]
        if not any(a.dtype == want.dtype and a.shape == want.shape and np.array_equal(a, want) for a in floats):
            shapes = sorted({str(a.shape) for a in floats})
            raise Fail(f"rank {j} never sent rank {r} exactly its rows of rank {r}'s request ({need.size} rows of "
                       f"{want.dtype}, in the order asked); it sent float messages of shapes {', '.join(shapes) or 'none'} "
                       f"(no shard, no partial sums per segment, no other dtype: {ASKS})")
    return 1.0, ""


def gradients(res: CaseResult):
    """r sends j one summed gradient row per requested id; nothing else crosses (the grader's trace)."""
    _graded(res)
    c, d = res.case.data, res.case.data["table"].shape[1]
    needs = _needs(res)
    for (r, j), need in needs.items():
        if r == j:
            continue
        ids, offsets = c["bags"][r]
        lengths = np.diff(np.append(offsets, len(ids)))
        per = c["grads"][r].astype(np.float64)
        per = per / np.maximum(lengths, 1)[:, None] if c["mode"] == "mean" else per
        contrib = per[np.repeat(np.arange(len(offsets)), lengths)] * c["weights"][r].astype(np.float64)[:, None]
        want = np.zeros((need.size, d))
        np.add.at(want, np.searchsorted(need, ids[c["owner"][ids] == j]), contrib[c["owner"][ids] == j])
        floats = [a for a in _between(res, r, j) if a.dtype.kind == "f"]
        ok = [a for a in floats if a.shape == want.shape and a.dtype == np.dtype(c["dtype"])
              and (np.abs(a - want) <= TOL[c["dtype"]] * (1 + np.abs(want))).all()]
        if not ok:
            shaped = any(a.shape == want.shape and a.dtype == np.dtype(c["dtype"]) for a in floats)
            why = ("a message of that shape came, but its rows are not the summed gradients: every entry of an id adds "
                   "w_e G[b] (sum mode) or G[b]/|b| (mean mode)") if shaped else \
                f"it sent float messages of shapes {', '.join(sorted({str(a.shape) for a in floats})) or 'none'}: {ASKS}"
            raise Fail(f"rank {r} never sent rank {j} one gradient row per id of its request ({need.size} rows of "
                       f"{c['dtype']}, each the sum of every entry's contribution, in the request's order); {why}")
        sent = [e for e in res.trace if e.kind == "send" and e.rank == r and e.peer == j]
        if len(sent) != 3:
            raise Fail(f"rank {r} sent rank {j} {len(sent)} messages ({sum(e.nbytes for e in sent)} B); the step needs "
                       f"exactly 3 (its request, its reply to rank {j}'s request, its gradients): nothing else crosses "
                       f"(no table, no shard, no weights, no second round)")
    return 1.0, ""


# the protocol is graded where bags repeat hot ids (the regular cases): there the chapter's pairs per entry and
# partials per segment differ from the distinct rows; tiny cases can coincide
PROTOCOL = lambda c: c.data["kind"] == "regular" and c.world_size > 1  # noqa: E731
TESTS = [
    Test("pooled", "every rank's pooled bags equal torch's embedding_bag on the whole table (K = 1, 2, 3, 5, 8, "
         "uneven and random owners, sum/mean/weights, float32/float64)",
         select=lambda c: c.data["kind"] == "regular", check=pooled),
    Test("update_sgd", "after one SGD step every owner's rows equal torch's step on the whole table (duplicate ids "
         "summed across bags and ranks)", select=lambda c: c.data["kind"] == "regular" and c.data["optimizer"] == "sgd",
         check=updated),
    Test("update_rowwise", "after one row-wise Adagrad step every owner's rows and accumulators equal the step on the "
         "whole table", select=lambda c: c.data["kind"] == "regular" and c.data["optimizer"] != "sgd", check=updated),
    Test("small", "empty bags, K > V (ranks without rows), ranks without bags, a one-row table",
         select=lambda c: c.data["kind"] == "small", check=correct),
    Test("correct_process", "the step is right on 2 real processes", select=lambda c: c.data["kind"] == "process",
         check=correct),
    Test("requests", "each rank sends each owner one int64 request: the distinct ids it needs, once each "
         "(the grader's recorded messages)", select=PROTOCOL, check=requests),
    Test("replies", "each owner replies with exactly the requested rows, once (no shard, no partial sums)",
         select=PROTOCOL, check=replies),
    Test("gradients", "one summed gradient row per requested id goes back to its owner, and nothing else crosses "
         "(the grader's trace)", select=PROTOCOL, check=gradients),
]
