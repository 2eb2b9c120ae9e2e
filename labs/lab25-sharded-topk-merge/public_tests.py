"""Public tests for lab 25: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check


def _reference(queries, base, k):
    full = ((queries[:, None, :].astype(np.float64) - base[None]) ** 2).sum(-1)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    for r, row in enumerate(full):
        order = np.lexsort((np.arange(len(base)), row))[:k]
        ids[r, :order.size] = order
    return ids


def _worker(comm, queries, base, k, two_round_topk):
    lo = len(base) * comm.rank // comm.size
    hi = len(base) * (comm.rank + 1) // comm.size
    return two_round_topk(comm, queries, base[lo:hi], lo, k)


def _check(two_round_topk, K, n, k, dtype):
    rng = np.random.default_rng(K * 100 + n)
    base = rng.integers(-2, 3, size=(n, 3)).astype(dtype)
    queries = rng.integers(-2, 3, size=(4, 3)).astype(dtype)
    res = cluster.run(_worker, K, args=(queries, base, k, two_round_topk), timeout=60, trace=True)
    out = res.values[0]
    assert out is not None, f"K={K}: rank 0 must return (dists, ids)"
    dists, ids = out
    assert np.asarray(ids).shape == (4, k), f"K={K}, n={n}, k={k}: ids have shape {np.shape(ids)}, expected (4, {k})"
    assert np.array_equal(ids, _reference(queries, base, k)), \
        f"K={K}, n={n}, k={k}, {np.dtype(dtype).name}: ids differ from the global top-k (order: distance, then smaller id)"
    m, item = -(-k // K), np.dtype(dtype).itemsize
    for r in range(1, K):
        mine = [ev for ev in res.trace if ev.rank == r]
        got_tau = next((j for j, ev in enumerate(mine) if ev.kind == "recv" and ev.peer == 0), None)
        assert got_tau is not None, f"K={K}: rank {r} never received tau from rank 0"
        first = sum(ev.nbytes for ev in mine[:got_tau] if ev.kind == "send")
        pairs = 4 * min(m, n * (r + 1) // K - n * r // K)
        assert first == pairs * (item + 8), \
            f"K={K}, k={k}: rank {r} sent {first} B in round 1, expected {pairs} pairs of {item + 8} B (m = ceil(k/K))"


NOTE = ("public tests passed; the grader also checks empty shards, ids past 2^32, real processes, tau and the"
        " bytes of round 2")


@check
def local_topk_global_ids(local_topk):
    d, i = local_topk(np.zeros((1, 2)), np.array([[1.0, 0], [0, 1], [2, 0]]), 10, 2)
    assert np.array_equal(i, [[10, 11]]) and np.array_equal(d, [[1.0, 1.0]]), \
        "local_topk: ids must be global (offset added) and ties go to the smaller id"


@check
def threshold_tau(threshold):
    tau = threshold(np.array([[3.0, 1.0, 2.0, 2.0]]), 3)
    assert np.array_equal(tau, [2.0]), "threshold: tau is the k-th smallest round-1 distance"
    assert np.array_equal(threshold(np.array([[1.0]]), 2), [np.inf]), "threshold: +inf with fewer than k"


@check
def round2_candidates(pack_round2):
    counts, fd, fi = pack_round2(np.array([[1.0, 2.0, 2.0, 5.0]]), np.array([[7, 3, 9, 4]]), np.array([2.0]), 1, 4)
    assert np.array_equal(counts, [2]) and np.array_equal(fi, [3, 9]) and np.array_equal(fd, [2.0, 2.0]), \
        "pack_round2: after the first m, every candidate <= tau (ties at tau included)"


@check
def two_round_exact_topk(two_round_topk):
    _check(two_round_topk, 1, 20, 5, np.float64)
    _check(two_round_topk, 3, 30, 4, np.float32)
    _check(two_round_topk, 4, 9, 5, np.float64)
