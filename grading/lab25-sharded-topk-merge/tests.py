"""Lab 25: the exact two-round threshold top-k. Each rank holds only its shard; the grader checks rank 0's
answer against one exact search of the whole base (the course library's, run here in the grader), the
order rule with ties, empty and short shards, real processes, and, from its own trace and recorded
messages, the protocol: m = ceil(k/K) pairs per query in round 1, tau (the k-th smallest round-1
distance, recomputed here) sent in the data's dtype, and in round 2 exactly each rank's candidates at or
under tau, capped at k - m."""
from __future__ import annotations

import numpy as np

from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after
from scaleoutai.serving.vectors import knn

# (K, n, nq, k, d, dtype, values, shard order, first id, what). values "int": clusters of 2k integer-valued
# vectors shuffled over the shards: exact distances, ties everywhere, and a query's neighbours spread over
# the shards, so tau is tight (at K = 8, k pairs per rank is 3.5-4x the protocol's bytes, tau and counts
# included); "near": the same in float64 plus noise of 1e-8, distances float32 cannot tell apart; "ties":
# uniform in {-2..2}^d, so a shard holds many candidates at tau (the cap k - m binds); "blocks": the
# clusters unshuffled, whole on their shards; "far": continuous, every entry near 500, where
# ||q||^2 - 2q.x + ||x||^2 cancels in float32
REGULAR = [(1, 60, 6, 5, 3, "float64", "int", "ranks", 0, ""), (2, 90, 8, 5, 3, "float32", "int", "ranks", 0, ""),
           (3, 301, 12, 7, 3, "float64", "int", "ranks", 0, ", uneven shards"),
           (5, 500, 16, 11, 3, "float32", "int", "ranks", 0, ""), (8, 800, 16, 17, 4, "float64", "int", "ranks", 0, ""),
           (8, 900, 16, 25, 4, "float32", "int", "ranks", 0, ""),
           (8, 300, 8, 3, 3, "float32", "int", "ranks", 0, ": k < K, so m = 1"),
           (4, 403, 12, 9, 3, "float32", "int", "reversed", 0, ": rank 0 holds the last rows, rank 3 the first"),
           (3, 120, 6, 7, 3, "float64", "int", "ranks", 3 * 2 ** 31 + 7, ": ids from 3*2^31 (billions of rows)"),
           (5, 200, 8, 1, 3, "float32", "int", "ranks", 0, ": k = 1"),
           (3, 90, 1, 4, 2, "float64", "int", "ranks", 0, ": a single query"),
           (4, 300, 8, 9, 3, "float64", "near", "ranks", 0, ": float64 distances closer than float32 resolves"),
           (3, 120, 8, 6, 2, "float64", "ties", "ranks", 0, ": vectors in {-2..2}^2, ties at every distance"),
           (5, 200, 8, 9, 3, "float32", "ties", "reversed", 0, ": vectors in {-2..2}^3, shards in reverse id order"),
           (4, 240, 8, 8, 3, "float32", "blocks", "ranks", 0, ": each shard holds whole clusters"),
           (3, 60, 5, 4, 4, "float32", "far", "ranks", 0, ": non-integer vectors far from 0"),
           (5, 100, 4, 6, 3, "float64", "far", "ranks", 0, ": non-integer vectors far from 0")]
SMALL = [(4, 10, 5, 6, 3, "float64", "ties", "ranks", 0, ": k larger than a shard"),
         (8, 5, 4, 3, 2, "float32", "ties", "ranks", 0, ": empty shards"),
         (5, 3, 3, 7, 3, "float64", "ties", "reversed", 0, ": K > n, k > n"),
         (3, 7, 4, 7, 2, "float32", "ties", "ranks", 0, ": k larger than a shard"),
         (4, 1, 3, 2, 3, "float64", "ties", "ranks", 0, ": one vector in the whole base"),
         (2, 0, 2, 3, 2, "float32", "ties", "ranks", 0, ": an empty base")]
PROCESS = [(2, 60, 5, 5, 3, "float32", "int", "ranks", 0, "")]
PROPERTY = 4  # seeded random cases: K, n, nq, k, d, dtype, values, shard order and first id all drawn
UNIMPORTABLE = ("scaleoutai.serving", "faiss")  # the chapter's search_shard and merge_topk, and a library
RTOL = {"float32": 1e-5, "float64": 1e-7}  # non-integer vectors: any order of summation passes
EXACT = ("int", "ties", "blocks")  # integer-valued vectors: every distance exact, compared with ==
ASKS = ("the lab asks for the two-round threshold protocol (m = ceil(k/K) pairs per query, tau back from rank 0, "
        "then only the candidates at or under tau); the chapter's one-round merge of k pairs per rank is not it")


def _draw(rng: np.random.Generator, n: int, nq: int, d: int, k: int, dtype: str, values: str):
    if values == "far":
        while True:
            base, queries = 500 + rng.standard_normal((n, d)), 500 + rng.standard_normal((nq, d))
            dist = np.sort(((queries[:, None, :] - base[None]) ** 2).sum(-1), axis=1)[:, :k + 1]
            if dist.shape[1] < 2 or (np.diff(dist, axis=1) > 1e-3 * (1 + dist[:, 1:])).all():
                return base.astype(dtype), queries.astype(dtype)
    if values == "ties":
        return rng.integers(-2, 3, size=(n, d)).astype(dtype), rng.integers(-2, 3, size=(nq, d)).astype(dtype)
    centres = rng.integers(-60, 61, size=(n // (2 * k) + 1, d))  # clusters of 2k vectors
    base = np.repeat(centres, 2 * k, axis=0)[:n] + rng.integers(-1, 2, size=(n, d))
    base = base if values == "blocks" else base[rng.permutation(n)]
    queries = centres[rng.integers(0, len(centres), nq)] + rng.integers(-1, 2, size=(nq, d))
    if values == "near":
        base = base + rng.uniform(0, 1e-8, size=base.shape)
    return base.astype(dtype), queries.astype(dtype)


def _add(p: Plan, cid: str, kind: str, spec: tuple, base: np.ndarray, queries: np.ndarray, note: str) -> None:
    K, n, nq, k, d, dtype, values, order, first = spec[:9]
    bounds = block_bounds(n, K)
    blocks = list(range(K)) if order == "ranks" else list(reversed(range(K))) if order == "reversed" else order
    shards = [base[bounds[b][0]:bounds[b][1]] for b in blocks]  # rank r holds block blocks[r]
    offsets = [first + bounds[b][0] for b in blocks]
    backend = "process" if kind == "process" else "sim"
    label = (f"K={K}, n={n} (shards of {min(map(len, shards))}..{max(map(len, shards))}), k={k}, {nq} "
             f"quer{'y' if nq == 1 else 'ies'}, {dtype}, {'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_topk", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 10,
                data={"kind": kind, "k": k, "nq": nq, "dtype": dtype, "base": base, "first": first, "values": values,
                      "shards": shards, "offsets": offsets, "record_messages": backend == "sim"})
    p.add_in_order(case, [("queries", queries), ("shard", shards),
                          ("offset", [np.array([o], dtype=np.int64) for o in offsets]), ("=", k)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(REGULAR + SMALL + PROCESS):
        kind = "regular" if i < len(REGULAR) else "small" if i < len(REGULAR) + len(SMALL) else "process"
        base, queries = _draw(rng, spec[1], spec[2], spec[4], spec[3], spec[5], spec[6])
        _add(p, f"c{i:02d}", kind, spec, base, queries, spec[9])
    for i in range(PROPERTY):
        K, nq = int(rng.integers(2, 10)), int(rng.integers(1, 9))
        k, d = int(rng.integers(1, 13)), int(rng.integers(1, 6))
        n = int(rng.integers(0, K * k) if i % 2 else rng.integers(3 * K * k, 8 * K * k))  # odd i: shards hold < k
        dtype, values = str(rng.choice(["float32", "float64"])), ("ties", "int", "far", "int")[i]
        order = [int(b) for b in rng.permutation(K)]
        first = int(rng.choice([0, int(rng.integers(2 ** 31, 2 ** 40))]))
        base, queries = _draw(rng, n, nq, d, k, dtype, values)
        _add(p, f"p{i}", "small" if i % 2 else "regular", (K, n, nq, k, d, dtype, values, order, first), base, queries,
             f": seeded random case ({values} values, shards in the order {order}"
             f"{', ids from ' + str(first) if first else ''})")
    return p


def _answer(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    c = res.case
    got = res.value(0, "answer (run_topk's stack of dists and ids)", dtype=np.float64,
                    shape=(2, c.data["nq"], c.data["k"]))
    return got[0], got[1]


def _truth(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    D, I = knn(res.shared("queries"), res.case.data["base"], res.case.data["k"])
    return D.astype(np.float64), np.where(I >= 0, I + res.case.data["first"], -1)


def _same(got: np.ndarray, want: np.ndarray, res: CaseResult) -> np.ndarray:
    """Where the distances agree: exactly on integer-valued vectors, within rounding otherwise."""
    if res.case.data["values"] in EXACT:
        return got == want
    return (got == want) | (np.abs(got - want) <= RTOL[res.case.data["dtype"]] * np.abs(want))


def _distances(res: CaseResult) -> None:
    dists, _ = _answer(res)
    want, _ = _truth(res)
    if not np.array_equal(np.sort(dists, axis=1), dists):
        raise Fail("rank 0's distances are not in ascending order (nearest first)")
    bad = ~_same(dists, want, res)
    if bad.any():
        hint = ("is tau the k-th smallest of ALL ranks' round-1 distances (an upper bound only then), and does round 2 "
                "send every remaining candidate <= tau?")
        if res.case.data["values"] == "far" and np.isfinite(want).all() and np.isfinite(dists).all():
            hint = ("each is sum_j (q_j - x_j)^2 in the input's dtype: ||q||^2 - 2 q.x + ||x||^2 loses the digits "
                    "of vectors far from 0")
        raise Fail(f"rank 0's distances differ from the global k smallest in {int(bad.sum())} of {bad.size} entries "
                   f"({hint})")


def _ids(res: CaseResult) -> None:
    dists, ids = _answer(res)
    bad = ids != _truth(res)[1]
    if bad.any():
        base, q = res.case.data["base"].astype(np.float64), res.shared("queries").astype(np.float64)
        rows = ids - res.case.data["first"]
        real = (rows >= 0) & (rows < len(base)) & (ids == np.round(ids))
        own = [bool(real[r, c]) and bool(_same(np.array(((q[r] - base[int(rows[r, c])]) ** 2).sum()),
                                               np.array(dists[r, c]), res)) for r, c in zip(*np.nonzero(bad))]
        hint = (" (each is a vector at the distance you report: among equal distances the smaller id comes first, so "
                "round 2 must send the candidates exactly at tau too, in the data's dtype)") if all(own) else \
            " (some are not the vector at the distance you report: a global id is the shard's offset plus the row, in int64)"
        raise Fail(f"rank 0's ids differ from the global top-k in {int(bad.sum())} of {bad.size} entries{hint}")


def distances(res: CaseResult):
    _distances(res)
    return 1.0, ""


def correct(res: CaseResult):
    _distances(res)
    _ids(res)
    return 1.0, ""


def ids(res: CaseResult):
    graded_after(lambda: _distances(res), "every distance")
    _ids(res)
    return 1.0, ""


def _expected(res: CaseResult) -> tuple[int, list[int], np.ndarray, list[int]]:
    """The grader's own protocol: m, round-1 pairs per rank, tau per query, round-2 pairs per rank."""
    c = res.case
    k, K, q = c.data["k"], c.world_size, res.shared("queries")
    m = -(-k // K)
    lists = []
    for shard, off in zip(c.data["shards"], c.data["offsets"]):
        diff = shard[None, :, :] - q[:, None, :]
        dist = (diff * diff).sum(-1)
        gid = np.arange(len(shard)) + off
        lists.append(np.stack([row[np.lexsort((gid, row))][:k] for row in dist]) if len(shard) else
                     np.empty((len(q), 0), dtype=dist.dtype))
    first = np.concatenate([d[:, :m] for d in lists], axis=1)
    tau = np.full(len(q), np.inf, dtype=first.dtype)
    if first.shape[1] >= k:
        tau[:] = np.sort(first, axis=1)[:, k - 1]
    second = [int((d[:, m:] <= tau[:, None]).sum()) for d in lists]  # d holds k at most: the cap k - m
    return m, [len(q) * d[:, :m].shape[1] for d in lists], tau, second


def _rounds(res: CaseResult, r: int) -> tuple[int, int]:
    """Bytes rank r sent before and after it received tau, from the grader's trace (all of it to rank 0)."""
    events = [e for e in res.trace if e.rank == r]
    heard = [j for j, e in enumerate(events) if e.kind == "recv" and e.peer == 0]
    if not heard:
        raise Fail(f"rank {r} never received tau from rank 0: {ASKS}")
    if any(e.kind == "send" and e.peer != 0 for e in events):
        raise Fail(f"rank {r} sent to a rank other than 0: every candidate goes to rank 0")
    before = sum(e.nbytes for e in events[:heard[0]] if e.kind == "send")
    return before, sum(e.nbytes for e in events[heard[0]:] if e.kind == "send")


def _protocol_graded(res: CaseResult) -> None:
    graded_after(lambda: _distances(res), "every distance")
    graded_after(lambda: _ids(res), "every id")


def round1(res: CaseResult):
    """Before tau, a rank sends its best m = ceil(k/K) pairs per query: the payload plus two headers at most."""
    _protocol_graded(res)
    c, item = res.case, np.dtype(res.case.data["dtype"]).itemsize
    m, pairs, _, _ = _expected(res)
    for r in range(1, c.world_size):
        sent, want = _rounds(res, r)[0], pairs[r] * (item + 8)
        if sent > want + 2 * envelope_bytes(3):
            full = min(c.data["k"], len(c.data["shards"][r])) * c.data["nq"] * (item + 8)
            many = "k pairs per query: " + ASKS if sent >= full > want else "more than m pairs per query"
            raise Fail(f"rank {r} sent {sent} B before it received tau; round 1 is its best m = ceil(k/K) = {m} pairs "
                       f"per query, {want} B plus two headers ({many})")
        if sent < want:
            raise Fail(f"rank {r} sent {sent} B before it received tau, less than its best m = ceil(k/K) = {m} pairs per "
                       f"query of a {c.data['dtype']} distance and an int64 id ({want} B): fewer pairs (with m = "
                       f"floor(k/K), K m < k and tau is no upper bound) or narrower numbers than the lab's format")
    return 1.0, ""


def threshold(res: CaseResult):
    """Rank 0 sends each rank one message: tau per query in the data's dtype, equal to the grader's tau."""
    _protocol_graded(res)
    c = res.case
    _, _, tau, _ = _expected(res)
    for r in range(1, c.world_size):
        got = [a for s, d, a in res.messages if s == 0 and d == r]
        if not got:
            raise Fail(f"rank 0 sent nothing to rank {r}: {ASKS}")
        if len(got) != 1 or got[0].shape != tau.shape:
            raise Fail(f"rank 0 sent rank {r} {len(got)} message(s), the first of shape {got[0].shape}; the threshold is "
                       f"one message of shape {tau.shape}, one number per query, not the candidates themselves")
        if got[0].dtype != tau.dtype:
            raise Fail(f"rank 0 sent rank {r} tau as {got[0].dtype}; send it in the data's dtype, {tau.dtype} (a float32 "
                       f"tau on float64 data rounds, and loses candidates at the threshold or sends too many)")
        if not np.array_equal(got[0], tau) and not (c.data["values"] not in EXACT and np.allclose(got[0], tau, 1e-12, 0)):
            raise Fail(f"rank 0's tau to rank {r} differs from the k-th smallest round-1 distance in "
                       f"{int((got[0] != tau).sum())} of {tau.size} queries (rank 0's own best m included, every "
                       f"rank's round-1 list counted)")
    return 1.0, ""


def round2(res: CaseResult):
    """After tau, a rank sends its remaining candidates <= tau, at most k - m per query, with counts and headers."""
    _protocol_graded(res)
    c, item, nq = res.case, np.dtype(res.case.data["dtype"]).itemsize, res.case.data["nq"]
    m, _, _, second = _expected(res)
    for r in range(1, c.world_size):
        sent, want = _rounds(res, r)[1], second[r] * (item + 8) + nq * 8  # the pairs and the int64 counts
        top = want + 3 * envelope_bytes(2)
        if sent > top:
            raise Fail(f"rank {r} sent {sent} B after tau; its remaining candidates at or under tau, at most k - m = "
                       f"{c.data['k'] - m} per query, with int64 counts and three headers, are at most {top} B (send "
                       f"neither the round-1 pairs again, nor candidates over tau, nor more than k - m per query)")
        if sent < want:
            raise Fail(f"rank {r} sent {sent} B after tau, less than its candidates at or under tau and their int64 "
                       f"counts ({want} B): a candidate exactly at tau may win on its id, so round 2 keeps distance <= "
                       f"tau, and the format is int64 counts and ids, distances in the data's dtype")
    return 1.0, ""


# the protocol is graded on the regular cases (every shard holds k vectors or more) with exact distances
PROTOCOL = lambda c: c.data["kind"] == "regular" and c.world_size > 1 and c.data["values"] != "far"  # noqa: E731
TESTS = [
    Test("distances", "rank 0 returns the global k smallest distances, nearest first (K = 1, 2, 3, 5, 8, uneven shards)",
         select=lambda c: c.data["kind"] == "regular", check=distances),
    Test("ids", "the ids are global int64 and ties go to the smaller id, across shards too",
         select=lambda c: c.data["kind"] == "regular", check=ids),
    Test("small_shards", "empty shards (K > n) and k larger than a shard: the answer is padded with (+inf, -1)",
         select=lambda c: c.data["kind"] == "small", check=correct),
    Test("correct_process", "the two rounds are right on 2 real processes",
         select=lambda c: c.data["kind"] == "process", check=correct),
    Test("round1", "round 1: each rank sends exactly its best m = ceil(k/K) pairs per query (the grader's trace)",
         select=PROTOCOL, check=round1),
    Test("threshold", "rank 0 sends every rank tau, the k-th smallest round-1 distance, one per query in the data's "
         "dtype (the grader's recorded messages)", select=PROTOCOL, check=threshold),
    Test("round2", "round 2: each rank sends exactly its remaining candidates at or under tau, at most k - m per query "
         "(the grader's trace)", select=PROTOCOL, check=round2),
]
