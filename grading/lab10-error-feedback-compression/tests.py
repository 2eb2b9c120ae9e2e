"""Lab 10: top-k compression with error feedback. The references are the course library's
(``scaleoutai.ml.compression``), run here in the grader; the student's sandbox cannot import them."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, graded_after
from scaleoutai.ml.compression import TopK, reference_compressed_allreduce, topk_compress, topk_decompress

UNIMPORTABLE = ("scaleoutai.ml",)  # the course's answer
TOPK = [(12, 3, "float64", "ties"), (9, 0, "float64", "k = 0"), (5, 8, "float32", "k > n"),
        (40, 7, "float32", "random"), (1, 1, "float64", "n = 1")]
# (K, n, k, steps, dtype, backend)
STEPS = [(1, 17, 3, 3, "float64", "sim"), (2, 30, 4, 3, "float64", "sim"), (3, 31, 2, 4, "float32", "sim"),
         (5, 23, 3, 3, "float64", "sim"), (5, 3, 1, 2, "float64", "sim"), (3, 200, 5, 3, "float64", "sim"),
         (2, 25, 3, 3, "float64", "process")]
TOL = {"float64": 1e-12, "float32": 1e-5}
TRAIN = {"K": 4, "rows": 50, "d": 50, "k": 5, "lr": 0.02, "steps": 150, "factor": 1.05}


def _vector(rng: np.random.Generator, n: int, kind: str, dtype: str) -> np.ndarray:
    if kind == "ties":
        return np.array([1.0, -2.0, 2.0, 0.5, -1.0, 2.0, -0.5, 1.0, 0.0, -2.0, 0.25, 1.0][:n], dtype=dtype)
    return rng.standard_normal(n).astype(dtype)


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (n, k, dt, kind) in enumerate(TOPK):
        p.add_in_order(Case(id=f"t{i}", fn="grader_topk", mode="call", label=f"topk_compress, n={n}, k={k} ({kind}), {dt}",
                            timeout=5, data={"k": k, "dtype": dt}), [("vec", _vector(rng, n, kind, dt)), ("=", k)])
    for i, (K, n, k, steps, dt, backend) in enumerate(STEPS):
        grads = [rng.standard_normal((steps, n)).astype(dt) for _ in range(K)]
        res0 = [(0.3 * rng.standard_normal(n)).astype(dt) for _ in range(K)]
        where = "simulator" if backend == "sim" else "2 real processes"
        case = Case(id=f"s{i}", fn="grader_ef_steps", label=f"K={K}, n={n}, k={k}, {steps} steps, {dt}, {where}",
                    world_size=K, backend=backend, timeout=30 if backend == "process" else 10,
                    data={"k": k, "dtype": dt, "grads": grads, "residuals": res0, "steps": steps, "n": n})
        p.add_in_order(case, [("grads", grads), ("residual", res0), ("=", k)])
    K, rows, d = TRAIN["K"], TRAIN["rows"], TRAIN["d"]
    Xs = [rng.standard_normal((rows, d)) for _ in range(K)]  # shards that disagree: each its own w*
    parts = [(A, A @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)) for A in Xs]
    case = Case(id="train", fn="grader_train", label=f"150 steps of least squares on K={K} disagreeing shards, k={TRAIN['k']}",
                world_size=K, timeout=40, data={"parts": parts})
    p.add_in_order(case, [("X", [a for a, _ in parts]), ("y", [b for _, b in parts]), ("=", K * rows),
                          ("w0", np.zeros(d)), ("=", TRAIN["k"]), ("=", TRAIN["lr"]), ("=", TRAIN["steps"])])
    return p


def topk(res: CaseResult):
    vec = res.shared("vec")
    k = res.case.data["k"]
    want = topk_decompress(*topk_compress(vec, k), vec.size)
    got = res.value(0, "top-k vector", dtype=vec.dtype, shape=vec.shape)
    if not np.array_equal(got, want):
        kept = int((got != 0).sum())
        raise Fail(f"the kept entries are wrong ({kept} non-zero where {int((want != 0).sum())} are expected): keep "
                   f"the k entries of largest |value|, ties to the lower index")
    return 1.0, ""


def _reference(res: CaseResult) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = res.case.data
    states = [{"residual": e.copy()} for e in data["residuals"]]
    avgs = [reference_compressed_allreduce([g[s] for g in data["grads"]], TopK(data["k"], True), states)
            for s in range(data["steps"])]
    return avgs, [st["residual"] for st in states]


def _rows(res: CaseResult, r: int) -> np.ndarray:
    data = res.case.data
    return res.value(r, "stack of averages and residual", dtype=data["dtype"], shape=(data["steps"] + 1, data["n"]))


def allreduce(res: CaseResult):
    avgs, _ = _reference(res)
    tol = TOL[res.case.data["dtype"]]
    for r in range(res.case.world_size):
        got = _rows(res, r)
        for s, want in enumerate(avgs):
            close(got[s], want, tol, tol * (1 + float(np.abs(want).max(initial=0))), f"rank {r}'s average at step {s + 1}")
    return 1.0, ""


def residual(res: CaseResult):
    _, residuals = _reference(res)
    tol = TOL[res.case.data["dtype"]]
    for r in range(res.case.world_size):
        want = residuals[r]
        close(_rows(res, r)[-1], want, tol, tol * (1 + float(np.abs(want).max(initial=0))),
              f"rank {r}'s residual after the last step (p - C(p), p = grad + residual)")
    return 1.0, ""


def correct_process(res: CaseResult):
    allreduce(res)
    residual(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """From the grader's counts: k pairs per rank and step, never a dense vector."""
    data = res.case.data
    K, k, steps = res.case.world_size, min(data["k"], data["n"]), data["steps"]
    # graded on every case that returned its stack: the bytes bound does not depend on the values being right
    graded_after(lambda: [_rows(res, r) for r in range(K)], "the returned stack")
    bound = steps * (K - 1) * k * (8 + np.dtype(data["dtype"]).itemsize)
    for r in range(K):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} B in {steps} steps, more than the {bound} B that k={k} (index, value) "
                       f"pairs to each of the other {K - 1} ranks take: send the compressed pairs, not dense vectors")
    return 1.0, ""


def training(res: CaseResult):
    parts = res.case.data["parts"]
    X, y = np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    best = float(np.mean((X @ np.linalg.lstsq(X, y, rcond=None)[0] - y) ** 2))
    w = res.value(0, "weights", dtype="float64", shape=(X.shape[1],))
    loss = float(np.mean((X @ w - y) ** 2))
    if not loss <= TRAIN["factor"] * best:
        raise Fail(f"after {TRAIN['steps']} steps the loss is {loss / best:.2f}x the least-squares optimum; error "
                   f"feedback reaches {TRAIN['factor']}x: carry the residual from step to step")
    return 1.0, ""


TESTS = [
    Test("topk", "topk_compress keeps the k largest |values|, ties to the lower index", select=lambda c: c.mode == "call",
         check=topk),
    Test("allreduce", "the average of every rank's top-k(grad + residual), on every rank, step after step",
         select=lambda c: c.fn == "grader_ef_steps" and c.backend == "sim", check=allreduce),
    Test("residual", "each rank keeps back p - C(p) for the next step",
         select=lambda c: c.fn == "grader_ef_steps" and c.backend == "sim", check=residual),
    Test("correct_process", "the same on 2 real processes", select=lambda c: c.backend == "process",
         check=correct_process),
    Test("traffic", "k (index, value) pairs per rank and step (the grader's byte counts)",
         select=lambda c: c.fn == "grader_ef_steps" and c.backend == "sim" and c.world_size > 1, check=traffic),
    Test("training", "150 steps with error feedback reach 1.05x the optimum where plain top-k stalls",
         select=lambda c: c.fn == "grader_train", check=training),
]
