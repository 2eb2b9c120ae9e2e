"""Lab 25: sharded top-k merge. Each rank holds only its shard; the grader checks rank 0's merged answer
against one exact search of the whole base (the course library's, run here in the grader), the order
rule with ties, empty and short shards, real processes, and the bytes each rank sends (its own count)."""
from __future__ import annotations

import numpy as np

from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after
from scaleoutai.serving.vectors import knn

# (K, n, nq, k, d, dtype, backend): integer-valued vectors, so every distance is exact in any order of
# summation and ties are common
REGULAR = [(1, 40, 6, 5, 3, "float64", "sim"), (2, 60, 5, 4, 3, "float32", "sim"), (3, 90, 7, 6, 4, "float64", "sim"),
           (5, 150, 6, 8, 3, "float32", "sim"), (8, 400, 5, 10, 4, "float64", "sim"),
           (3, 301, 4, 3, 2, "float32", "sim")]
SMALL = [(4, 10, 5, 6, 3, "float64", "sim"), (8, 5, 4, 3, 2, "float32", "sim"), (5, 3, 3, 7, 3, "float64", "sim"),
         (3, 7, 4, 7, 2, "float32", "sim")]
PROCESS = [(2, 50, 4, 5, 3, "float32", "process")]
# the boundaries of the contract: (K, n, nq, k, d, dtype, values, order, first id, what)
# values "int": integer-valued (ties everywhere, exact); "far": continuous, every entry near 500, where
# ||q||^2 - 2q.x + ||x||^2 cancels in float32 (the lab's formula takes the differences first)
EDGES = [(3, 60, 5, 4, 4, "float32", "far", "ranks", 0, "non-integer vectors far from 0"),
         (5, 100, 4, 6, 3, "float64", "far", "ranks", 0, "non-integer vectors far from 0"),
         (3, 45, 4, 5, 3, "float64", "int", "ranks", 3 * 2 ** 31 + 7, "ids from 3*2^31 (a base of billions of rows)"),
         (4, 80, 5, 6, 3, "float32", "int", "reversed", 0, "rank 0 holds the last rows, rank 3 the first"),
         (3, 30, 5, 1, 3, "float64", "int", "ranks", 0, "k = 1"),
         (2, 20, 1, 3, 2, "float32", "int", "ranks", 0, "a single query")]
TINY = [(4, 1, 3, 2, 3, "float64", "int", "ranks", 0, "one vector in the whole base"),
        (2, 0, 2, 3, 2, "float32", "int", "ranks", 0, "an empty base")]
PROPERTY = 4  # seeded random cases: K, n, nq, k, d, dtype, values, shard order and first id all drawn
UNIMPORTABLE = ("scaleoutai.serving.vectors", "scaleoutai.serving.ivf", "scaleoutai.serving.hnsw",
                "scaleoutai.serving.rag", "faiss")  # the course's answer, and a library that gives it
TRAFFIC_SLACK = 256  # bytes per rank on top of k (distance, id) pairs of 16 bytes per query and two headers
# non-integer vectors: any order of summation passes, and so does ||q||^2 - 2q.x + ||x||^2 in float64
RTOL = {"float32": 1e-5, "float64": 1e-7}


def _separated(queries: np.ndarray, base: np.ndarray, k: int) -> bool:
    """No two of a query's k + 1 nearest distances are closer than rounding could confuse."""
    d = np.sort(((queries[:, None, :].astype(np.float64) - base[None]) ** 2).sum(-1), axis=1)[:, :k + 1]
    return d.shape[1] < 2 or bool((np.diff(d, axis=1) > 1e-3 * (1 + d[:, 1:])).all())


def _draw(rng: np.random.Generator, n: int, nq: int, d: int, k: int, dtype: str, values: str):
    if values == "int":
        return (rng.integers(-3, 4, size=(n, d)).astype(dtype), rng.integers(-3, 4, size=(nq, d)).astype(dtype))
    while True:
        base = (500 + rng.standard_normal((n, d))).astype(dtype)
        queries = (500 + rng.standard_normal((nq, d))).astype(dtype)
        if _separated(queries, base, k):
            return base, queries


def _add(p: Plan, cid: str, kind: str, spec: tuple, base: np.ndarray, queries: np.ndarray, note: str = "") -> None:
    K, n, nq, k, d, dtype, values, order, first = spec[:9]
    bounds = block_bounds(n, K)
    blocks = list(range(K)) if order == "ranks" else list(reversed(range(K))) if order == "reversed" else order
    sizes = [bounds[b][1] - bounds[b][0] for b in blocks]  # rank r holds block blocks[r]
    backend = "process" if kind == "process" else "sim"
    where = "simulator" if backend == "sim" else "2 real processes"
    label = (f"K={K}, n={n} (shards of {min(sizes)}..{max(sizes)}), k={k}, {nq} quer{'y' if nq == 1 else 'ies'}, "
             f"{dtype}, {where}{note}")
    case = Case(id=cid, fn="run_topk", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 10,
                data={"kind": kind, "k": k, "nq": nq, "dtype": dtype, "sizes": sizes, "d": d, "base": base,
                      "first": first, "exact": values == "int"})
    p.add_in_order(case, [("queries", queries), ("shard", [base[bounds[b][0]:bounds[b][1]] for b in blocks]),
                          ("offset", [np.array([first + bounds[b][0]], dtype=np.int64) for b in blocks]), ("=", k)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (K, n, nq, k, d, dtype, backend) in enumerate(REGULAR + SMALL + PROCESS):
        base = rng.integers(-3, 4, size=(n, d)).astype(dtype)
        queries = rng.integers(-3, 4, size=(nq, d)).astype(dtype)
        kind = "regular" if i < len(REGULAR) else "small" if i < len(REGULAR) + len(SMALL) else "process"
        _add(p, f"c{i:02d}", kind, (K, n, nq, k, d, dtype, "int", "ranks", 0), base, queries)
    for i, spec in enumerate(EDGES + TINY):
        base, queries = _draw(rng, *spec[1:3], spec[4], spec[3], spec[5], spec[6])
        _add(p, f"e{i}", "regular" if i < len(EDGES) else "small", spec, base, queries, f": {spec[9]}")
    for i in range(PROPERTY):
        K, nq = int(rng.integers(1, 10)), int(rng.integers(1, 7))
        k, d = int(rng.integers(1, 13)), int(rng.integers(1, 6))
        n = int(rng.integers(0, K * k) if i % 2 else rng.integers(K * k, 4 * K * k))  # odd i: a shard holds < k
        dtype, values = str(rng.choice(["float32", "float64"])), str(rng.choice(["int", "far"]))
        order = [int(b) for b in rng.permutation(K)]
        first = int(rng.choice([0, int(rng.integers(2 ** 31, 2 ** 40))]))
        base, queries = _draw(rng, n, nq, d, k, dtype, values)
        kind = "small" if i % 2 else "regular"
        spec = (K, n, nq, k, d, dtype, values, order, first)
        what = "integer" if values == "int" else "non-integer"
        _add(p, f"p{i}", kind, spec, base, queries, f": seeded random case ({what} values, shards in the order "
             f"{order}{', ids from ' + str(first) if first else ''})")
    return p


def _answer(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    c = res.case
    got = res.value(0, "answer (run_topk's stack of dists and ids)", dtype=np.float64,
                    shape=(2, c.data["nq"], c.data["k"]))
    return got[0], got[1]


def _truth(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    D, I = knn(res.shared("queries"), res.case.data["base"], res.case.data["k"])
    return D, np.where(I >= 0, I + res.case.data["first"], -1)


def _same(got: np.ndarray, want: np.ndarray, res: CaseResult) -> np.ndarray:
    """Where the distances agree: exactly on integer-valued vectors, within rounding otherwise."""
    if res.case.data["exact"]:
        return got == want
    return (got == want) | (np.abs(got - want) <= RTOL[res.case.data["dtype"]] * np.abs(want))


def _distances(res: CaseResult) -> None:
    dists, _ = _answer(res)
    want, _ = _truth(res)
    if not np.array_equal(np.sort(dists, axis=1), dists):
        raise Fail("rank 0's distances are not in ascending order (nearest first)")
    bad = ~_same(dists, want.astype(np.float64), res)
    if bad.any():
        hint = "are some shards' candidates missing, or fewer than k taken per shard?"
        if not res.case.data["exact"] and np.isfinite(want).all() and np.isfinite(dists).all():
            hint = ("each is sum_j (q_j - x_j)^2 in the input's dtype: ||q||^2 - 2 q.x + ||x||^2 loses the digits "
                    "of vectors far from 0")
        raise Fail(f"rank 0's distances differ from the global k smallest in {int(bad.sum())} of {bad.size} entries "
                   f"({hint})")


def _ids(res: CaseResult) -> None:
    dists, ids = _answer(res)
    _, want = _truth(res)
    bad = ids != want
    if bad.any():
        base, q = res.case.data["base"].astype(np.float64), res.shared("queries").astype(np.float64)
        rows = ids - res.case.data["first"]
        real = (rows >= 0) & (rows < len(base)) & (ids == np.round(ids))
        own = [bool(real[r, c]) and bool(_same(np.array(((q[r] - base[int(rows[r, c])]) ** 2).sum()),
                                               np.array(dists[r, c]), res))
               for r, c in zip(*np.nonzero(bad))]
        hint = " (each of them is a vector at the distance you report: among equal distances the smaller id " \
               "comes first)" if all(own) else " (some are not the vector at the distance you report: a global " \
               "id is the shard's offset plus the row in the shard, in int64)"
        raise Fail(f"rank 0's ids differ from the global top-k in {int(bad.sum())} of {bad.size} entries{hint}")


def distances(res: CaseResult):
    _distances(res)
    return 1.0, ""


def ids(res: CaseResult):
    graded_after(lambda: _distances(res), "the distances")
    _ids(res)
    return 1.0, ""


def small_shards(res: CaseResult):
    _distances(res)
    _ids(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """The grader's own counts: a rank sends at most k pairs per query (16 bytes each), two headers and a little."""
    c = res.case
    graded_after(lambda: _distances(res), "the distances")
    bound = c.data["nq"] * c.data["k"] * 16 + 2 * envelope_bytes(3) + TRAFFIC_SLACK
    for r in range(1, c.world_size):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            shard_bytes = c.data["sizes"][r] * c.data["d"] * np.dtype(c.data["dtype"]).itemsize
            raise Fail(f"rank {r} sent {sent} B; k (distance, id) pairs per query are at most {bound} B "
                       f"(its whole shard is {shard_bytes} B): send only the local top-k")
    return 1.0, ""


TESTS = [
    Test("distances", "rank 0 returns the global k smallest distances, nearest first (K = 1, 2, 3, 5, 8, uneven shards)",
         select=lambda c: c.data["kind"] == "regular", check=distances),
    Test("ids", "the ids are global and ties go to the smaller id",
         select=lambda c: c.data["kind"] == "regular", check=ids),
    Test("small_shards", "empty shards (K > n) and k larger than a shard: the answer is padded with (+inf, -1)",
         select=lambda c: c.data["kind"] == "small", check=small_shards),
    Test("correct_process", "the merge is right on 2 real processes",
         select=lambda c: c.data["kind"] == "process", check=small_shards),
    Test("traffic", "each rank sends at most k (distance, id) pairs per query (the grader's byte count)",
         select=lambda c: c.data["kind"] == "regular" and c.world_size > 1, check=traffic),
]
