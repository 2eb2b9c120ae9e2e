"""Lab 13: one mean-aggregation SAGE layer, forward and backward, over an edge-cut with halo exchange.
Each rank holds its owned rows of X and dOut and the in-edges of its owned vertices only; the grader
checks every rank's out and dX and the sum of the K weight-gradient shares against one scipy.sparse
computation of the whole graph, and, from its own trace, the bytes between every ordered pair of ranks:
the ids of the distinct ghosts, one row per ghost forward and one gradient row per ghost backward."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after

UNIMPORTABLE = ("scaleoutai.ml",)  # the chapter's fetch_features, gcn_aggregate, sage_layer, pagerank_vertex_cut
RTOL = {"float32": 1e-4, "float64": 1e-9}
HEADERS = 4  # messages of at most 2 dimensions a rank may send a peer: ids, rows, gradients and one spare
BACK = ("the lab asks for the backward pass over the partition: the gradient of every ghost row goes back to its "
        "owner and is added there, summed over every rank that holds the ghost (the chapter's fetch_features only "
        "fetches forward)")
# (K, n, graph, partition, dtype, d_in, d_out, note). "lattice": v -> v+-1, v+-2, v+-3 and n/20 random
# far edges, so contiguous ranges have a small halo and several cut edges per ghost; "ranges": contiguous
# blocks of given sizes; "random": parts drawn uniformly (every vertex may be a ghost)
REGULAR = [(1, 40, "lattice", "even", "float64", 16, 8, ""), (2, 90, "lattice", "even", "float32", 16, 8, ""),
           (3, 120, "lattice", "even", "float64", 16, 8, ""), (5, 150, "lattice", "even", "float32", 16, 8, ""),
           (3, 100, "lattice", (5, 80, 15), "float64", 12, 16, ", uneven ranges (5, 80, 15), d_out > d_in"),
           (4, 60, "lattice", "random", "float64", 8, 8, ", random owners"),
           (5, 130, "lattice", "reversed", "float32", 16, 8, ", rank 0 owns the last range")]
SMALL = [(5, 3, "chain", "even", "float64", 3, 2, ": K > n, ranks own nothing"),
         (4, 12, "isolated", "random", "float32", 4, 3, ": isolated vertices and vertices without in-edges"),
         (3, 9, "loops", "even", "float64", 3, 4, ": self-loops and repeated edges"),
         (3, 10, "none", "even", "float64", 3, 2, ": no edges at all"),
         (2, 7, "star", (0, 7), "float32", 4, 3, ": rank 0 owns nothing"),
         (3, 30, "star", "random", "float64", 5, 3, ": a hub with every vertex pointing at it and back")]
PROCESS = [(2, 40, "lattice", "even", "float64", 8, 4, "")]
PROPERTY = 4


def _graph(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    v = np.arange(n)
    if kind == "lattice":
        ring = [np.stack([v, (v + s) % n], 1) for s in (-3, -2, -1, 1, 2, 3)]
        e = np.concatenate(ring + [rng.integers(0, n, size=(max(1, n // 20), 2))])
    elif kind == "chain":
        e = np.stack([v[:-1], v[1:]], 1)
    elif kind == "isolated":  # half the vertices touch nothing, some only send
        e = rng.choice(n // 2, size=(n, 2)) * 2
        e[: n // 3, 0] = 1
    elif kind == "loops":
        e = np.concatenate([np.stack([v, v], 1), np.stack([v, (v + 1) % n], 1).repeat(3, axis=0),
                            rng.integers(0, n, size=(n, 2))])
    elif kind == "star":
        e = np.concatenate([np.stack([v[1:], np.zeros(n - 1, int)], 1), np.stack([np.zeros(n - 1, int), v[1:]], 1)])
    else:
        e = np.zeros((0, 2), dtype=np.int64)
    return e[rng.permutation(len(e))].astype(np.int64)


def _parts(rng: np.random.Generator, n: int, K: int, how) -> np.ndarray:
    if how == "random":
        return rng.integers(0, K, size=n).astype(np.int64)
    sizes = how if isinstance(how, tuple) else [n // K + (r < n % K) for r in range(K)]
    ranks = np.arange(K)[::-1] if how == "reversed" else np.arange(K)
    return np.repeat(ranks, sizes).astype(np.int64)


def _add(p: Plan, rng: np.random.Generator, cid: str, kind: str, spec: tuple, edges=None, parts=None) -> None:
    K, n, graph, how, dtype, d_in, d_out, note = spec
    e = _graph(rng, n, graph) if edges is None else edges
    parts = _parts(rng, n, K, how) if parts is None else parts
    X = rng.standard_normal((n, d_in)).astype(dtype)
    dOut = rng.standard_normal((n, d_out)).astype(dtype)
    scale = 1 / np.sqrt(d_in)
    W = [(scale * rng.standard_normal((d_in, d_out))).astype(dtype), rng.standard_normal(d_out).astype(dtype),
         (scale * rng.standard_normal((d_in, d_out))).astype(dtype)]
    backend = "process" if kind == "process" else "sim"
    own = [int((parts == r).sum()) for r in range(K)]
    label = (f"K={K}, n={n} ({graph}, {len(e)} edges, {min(own)}..{max(own)} vertices per rank), d_in={d_in}, "
             f"d_out={d_out}, {dtype}, {'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_layer", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 10,
                data={"kind": kind, "dtype": dtype, "edges": e, "parts": parts, "X": X, "dOut": dOut,
                      "dims": (d_in, d_out)})
    p.add_in_order(case, [("X_own", [X[parts == r] for r in range(K)]),
                          ("edges_in", [e[parts[e[:, 1]] == r] for r in range(K)]), ("parts", parts),
                          ("W_l", W[0]), ("b_l", W[1]), ("W_r", W[2]), ("dOut", [dOut[parts == r] for r in range(K)])])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(REGULAR + SMALL + PROCESS):
        kind = "regular" if i < len(REGULAR) else "small" if i < len(REGULAR) + len(SMALL) else "process"
        _add(p, rng, f"c{i:02d}", kind, spec)
    for i in range(PROPERTY):
        K, n = int(rng.integers(2, 7)), int(rng.integers(5, 60))
        e = rng.integers(0, n, size=(int(rng.integers(n, 4 * n)), 2)).astype(np.int64)
        parts = rng.integers(0, K, size=n).astype(np.int64) if i % 2 else np.sort(rng.integers(0, K, size=n))
        spec = (K, n, "random", "", str(rng.choice(["float32", "float64"])), int(rng.integers(1, 7)),
                int(rng.integers(1, 7)), f": seeded random case ({'scattered' if i % 2 else 'contiguous'} owners)")
        _add(p, rng, f"p{i}", "random", spec, edges=e, parts=parts)
    return p


def _reference(res: CaseResult) -> list[np.ndarray]:
    """out, dX, and the flat weight gradients of the whole graph, in float64 with scipy.sparse."""
    c = res.case.data
    e, X, dOut = c["edges"], c["X"].astype(np.float64), c["dOut"].astype(np.float64)
    W_l, b_l, W_r = (res.shared(k).astype(np.float64) for k in ("W_l", "b_l", "W_r"))
    n = len(X)
    A = sp.csr_matrix((np.ones(len(e)), (e[:, 1], e[:, 0])), shape=(n, n))  # duplicates add up
    M = sp.diags(1.0 / np.maximum(np.asarray(A.sum(axis=1)).ravel(), 1)) @ A
    agg = M @ X
    shares = [agg.T @ dOut, dOut.sum(axis=0), X.T @ dOut]
    return [agg @ W_l + b_l + X @ W_r, M.T @ (dOut @ W_l.T) + dOut @ W_r.T, np.concatenate([s.ravel() for s in shares])]


def _pieces(res: CaseResult, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = res.case.data
    d_in, d_out = c["dims"]
    m = int((c["parts"] == r).sum())
    flat = res.value(r, "result (run_layer's out, dX and weight-gradient shares)", dtype=c["dtype"],
                     shape=(m * (d_in + d_out) + 2 * d_in * d_out + d_out,))
    return flat[:m * d_out].reshape(m, d_out), flat[m * d_out:m * (d_out + d_in)].reshape(m, d_in), flat[m * (d_out + d_in):]


def _close(got: np.ndarray, want: np.ndarray, res: CaseResult, what: str, hint: str = "") -> None:
    rtol = RTOL[res.case.data["dtype"]]
    try:  # the grader's own check, with an absolute floor of rtol x the largest entry
        close(got, want, rtol, rtol * max(1.0, float(np.abs(want).max(initial=0))), what)
    except Fail as exc:
        raise Fail(f"{exc}{hint}") from None


def _out(res: CaseResult) -> None:
    want = _reference(res)[0]
    for r in range(res.case.world_size):
        _close(_pieces(res, r)[0], want[res.case.data["parts"] == r], res, f"rank {r}'s out",
               " (the mean over ALL in-edges, ghosts included: a repeated edge counts twice, no in-edge gives agg = 0)")


def _dx(res: CaseResult) -> None:
    want = _reference(res)[1]
    parts = res.case.data["parts"]
    for r in range(res.case.world_size):
        rows = want[parts == r]
        got = _pieces(res, r)[1]
        hint = f" ({BACK})" if res.case.world_size > 1 else " (dOut @ W_r^T plus the share of every out-edge)"
        _close(got, rows, res, f"rank {r}'s dX", hint)


def _weights(res: CaseResult) -> None:
    total = sum(_pieces(res, r)[2].astype(np.float64) for r in range(res.case.world_size))
    _close(np.asarray(total), _reference(res)[2], res, "the sum of the K weight-gradient shares (dW_l, db_l, dW_r)",
           " (each rank returns the sum over its own rows only; the grader adds the K shares)")


def _all(res: CaseResult) -> None:
    _out(res)
    _dx(res)
    _weights(res)


def forward(res: CaseResult):
    _out(res)
    return 1.0, ""


def input_grads(res: CaseResult):
    _dx(res)
    return 1.0, ""


def weight_grads(res: CaseResult):
    _weights(res)
    return 1.0, ""


def correct(res: CaseResult):
    _all(res)
    return 1.0, ""


def halo_traffic(res: CaseResult):
    """Per ordered pair (r, j): ids of r's ghosts from j, j's ghost rows from r, r's gradients back, headers."""
    graded_after(lambda: _out(res), "out")
    graded_after(lambda: _dx(res), "dX")
    c, K = res.case.data, res.case.world_size
    e, parts = c["edges"], c["parts"]
    item, width = np.dtype(c["dtype"]).itemsize, max(c["dims"])
    ghosts = np.zeros((K, K), dtype=np.int64)  # ghosts[r, j]: distinct sources owned by j that rank r needs
    for r in range(K):
        src = np.unique(e[parts[e[:, 1]] == r, 0])
        ghosts[r] = np.bincount(parts[src], minlength=K)
        ghosts[r, r] = 0
    sent = np.zeros((K, K), dtype=np.int64)
    for ev in res.trace:
        if ev.kind == "send":
            sent[ev.rank, ev.peer] += ev.nbytes
    for r in range(K):
        for j in range(K):
            top = 8 * ghosts[r, j] + item * width * (ghosts[j, r] + ghosts[r, j]) + HEADERS * envelope_bytes(2)
            if sent[r, j] > top:
                raise Fail(f"rank {r} sent {sent[r, j]} B to rank {j}; the halo allows at most {top} B: the ids of the "
                           f"{ghosts[r, j]} distinct ghosts it needs from {j} (int64), {ghosts[j, r]} rows forward and "
                           f"{ghosts[r, j]} gradient rows back, each in the data's dtype ({c['dtype']}), and "
                           f"{HEADERS} headers (send each distinct ghost once each way: no row per cut edge, no "
                           f"gather of the whole matrix)")
    return 1.0, ""


TRAFFIC = lambda c: c.data["kind"] == "regular" and c.world_size > 1  # noqa: E731
TESTS = [
    Test("forward", "every rank's out equals the whole-graph layer (K = 1, 2, 3, 5, uneven and random owners)",
         select=lambda c: c.data["kind"] == "regular", check=forward),
    Test("input_grads", "every rank's dX equals the whole-graph gradient: ghost gradients go back to their owners",
         select=lambda c: c.data["kind"] == "regular", check=input_grads),
    Test("weight_grads", "the K weight-gradient shares add up to dW_l, db_l and dW_r",
         select=lambda c: c.data["kind"] == "regular", check=weight_grads),
    Test("small", "K > n, ranks owning nothing, isolated vertices, self-loops, repeated edges, no edges, a hub",
         select=lambda c: c.data["kind"] == "small", check=correct),
    Test("process", "the layer is right on 2 real processes", select=lambda c: c.data["kind"] == "process",
         check=correct),
    Test("random", "seeded random graphs, owners, widths and dtypes", select=lambda c: c.data["kind"] == "random",
         check=correct),
    Test("halo_traffic", "from the grader's trace: per pair of ranks only the distinct ghosts' ids, rows and "
         "gradients cross", select=TRAFFIC, check=halo_traffic),
]
