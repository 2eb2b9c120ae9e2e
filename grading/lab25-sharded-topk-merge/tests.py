"""Lab 25: sharded top-k merge. Each rank holds only its shard; the grader checks rank 0's merged answer
against one exact search of the whole base (the course library's, run here in the grader), the order
rule with ties, empty and short shards, real processes, and the bytes each rank sends (its own count)."""
from __future__ import annotations

import numpy as np

from scaleoutai.collectives import block_bounds
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after
from scaleoutai.serving.vectors import knn

# (K, n, nq, k, d, dtype, backend): integer-valued vectors, so every distance is exact in any order of
# summation and ties are common
REGULAR = [(1, 40, 6, 5, 3, "float64", "sim"), (2, 60, 5, 4, 3, "float32", "sim"), (3, 90, 7, 6, 4, "float64", "sim"),
           (5, 150, 6, 8, 3, "float32", "sim"), (8, 400, 5, 10, 4, "float64", "sim"),
           (3, 301, 4, 3, 2, "float32", "sim")]
SMALL = [(4, 10, 5, 6, 3, "float64", "sim"), (8, 5, 4, 3, 2, "float32", "sim"), (5, 3, 3, 7, 3, "float64", "sim"),
         (3, 7, 4, 7, 2, "float32", "sim")]
PROCESS = [(2, 50, 4, 5, 3, "float32", "process")]
UNIMPORTABLE = ("scaleoutai.serving.vectors", "scaleoutai.serving.ivf", "scaleoutai.serving.hnsw",
                "scaleoutai.serving.rag", "faiss")  # the course's answer, and a library that gives it
TRAFFIC_SLACK = 256  # bytes per rank on top of k (distance, id) pairs of 16 bytes per query


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (K, n, nq, k, d, dtype, backend) in enumerate(REGULAR + SMALL + PROCESS):
        base = rng.integers(-3, 4, size=(n, d)).astype(dtype)
        queries = rng.integers(-3, 4, size=(nq, d)).astype(dtype)
        bounds = block_bounds(n, K)
        kind = "regular" if i < len(REGULAR) else "small" if i < len(REGULAR) + len(SMALL) else "process"
        sizes = [hi - lo for lo, hi in bounds]
        where = "simulator" if backend == "sim" else "2 real processes"
        label = f"K={K}, n={n} (shards of {min(sizes)}..{max(sizes)}), k={k}, {nq} queries, {dtype}, {where}"
        case = Case(id=f"c{i:02d}", fn="run_topk", label=label, world_size=K, backend=backend,
                    timeout=30 if backend == "process" else 10,
                    data={"kind": kind, "k": k, "nq": nq, "dtype": dtype, "sizes": sizes, "d": d})
        p.add_in_order(case, [("queries", queries), ("shard", [base[lo:hi] for lo, hi in bounds]),
                              ("offset", [np.array([lo], dtype=np.int64) for lo, _ in bounds]), ("=", k)])
    return p


def _answer(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    c = res.case
    got = res.value(0, "answer (run_topk's stack of dists and ids)", dtype=np.float64,
                    shape=(2, c.data["nq"], c.data["k"]))
    return got[0], got[1]


def _truth(res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    base = np.concatenate(res.per_rank("shard"))
    return knn(res.shared("queries"), base, res.case.data["k"])


def _distances(res: CaseResult) -> None:
    dists, _ = _answer(res)
    want, _ = _truth(res)
    if not np.array_equal(np.sort(dists, axis=1), dists):
        raise Fail("rank 0's distances are not in ascending order (nearest first)")
    bad = ~(dists == want.astype(np.float64))
    if bad.any():
        raise Fail(f"rank 0's distances differ from the global k smallest in {int(bad.sum())} of {bad.size} entries "
                   f"(are some shards' candidates missing, or fewer than k taken per shard?)")


def _ids(res: CaseResult) -> None:
    dists, ids = _answer(res)
    _, want = _truth(res)
    bad = ids != want
    if bad.any():
        base, q = np.concatenate(res.per_rank("shard")).astype(np.float64), res.shared("queries").astype(np.float64)
        real = (ids >= 0) & (ids < len(base)) & (ids == np.round(ids))
        rows = np.nonzero(bad)
        own = [bool(real[r, c]) and float(((q[r] - base[int(ids[r, c])]) ** 2).sum()) == dists[r, c]
               for r, c in zip(*rows)]
        hint = " (each of them is a vector at the distance you report: among equal distances the smaller id " \
               "comes first)" if all(own) else " (some are not the vector at the distance you report: a global " \
               "id is the shard's offset plus the row in the shard)"
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
    """The grader's own counts: a rank sends at most k pairs per query (16 bytes each) plus a little."""
    c = res.case
    graded_after(lambda: _distances(res), "the distances")
    bound = c.data["nq"] * c.data["k"] * 16 + TRAFFIC_SLACK
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
