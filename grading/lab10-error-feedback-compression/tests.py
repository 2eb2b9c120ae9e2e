"""Lab 10: top-k compression with error feedback. The references are the course library's
(``scaleoutai.ml.compression``), run here in the grader; the student's sandbox cannot import them."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after
from scaleoutai.ml.compression import TopK, reference_compressed_allreduce, topk_compress, topk_decompress

UNIMPORTABLE = ("scaleoutai.ml",)  # the course's answer
WIDE = 70_000  # beyond 2**16: an int16 or uint16 index wraps
TOPK = [(12, 3, "float64", "ties"), (9, 0, "float64", "k = 0"), (5, 8, "float32", "k > n"),
        (40, 7, "float32", "random"), (1, 1, "float64", "n = 1"), (6, 2, "float64", "ties, negative first"),
        (6, 2, "float32", "ties, positive first"), (7, 7, "float64", "k = n"),
        (300, 37, "float32", "integer values, ties everywhere"), (WIDE, 5, "float32", "large entries beyond 2**16")]
# (K, n, k, steps, dtype, backend, data): data "normal", "integers" (integer-valued, ties everywhere) or "wide"
# (the largest entries at indices beyond 2**16)
STEPS = [(1, 17, 3, 3, "float64", "sim", "normal"), (2, 30, 4, 3, "float64", "sim", "normal"),
         (3, 31, 2, 4, "float32", "sim", "normal"), (5, 23, 3, 3, "float64", "sim", "normal"),
         (5, 3, 1, 2, "float64", "sim", "normal"), (3, 200, 5, 3, "float64", "sim", "normal"),
         (3, 40, 6, 3, "float64", "sim", "integers"), (3, 10, 0, 2, "float32", "sim", "normal"),
         (2, 4, 6, 2, "float64", "sim", "normal"), (2, WIDE, 3, 2, "float32", "sim", "wide"),
         (2, 25, 3, 3, "float64", "process", "normal")]
RANDOM_STEPS = 3  # property cases: random K, n, k (0 to n + 2), dtype and data from the plan's rng
TOL = {"float64": 1e-12, "float32": 1e-5}
TRAIN = {"K": 4, "rows": 50, "d": 50, "k": 5, "lr": 0.02, "steps": 150, "factor": 1.05}


def _vector(rng: np.random.Generator, n: int, kind: str, dtype: str) -> np.ndarray:
    if kind == "ties":
        return np.array([1.0, -2.0, 2.0, 0.5, -1.0, 2.0, -0.5, 1.0, 0.0, -2.0, 0.25, 1.0][:n], dtype=dtype)
    if kind.startswith("ties, "):  # two tied pairs; the lower index holds the negative (or the positive) entry
        sign = -1.0 if "negative" in kind else 1.0
        return np.array([0.5, sign * 2, -sign * 2, 1.0, sign * 2, -sign * 2][:n], dtype=dtype)
    if kind.startswith("integer"):
        return rng.integers(-3, 4, n).astype(dtype)
    vec = rng.standard_normal(n).astype(dtype)
    if kind.startswith("large"):
        vec[rng.choice(np.arange(1 << 16, n), size=8, replace=False)] = 10 + rng.random(8).astype(dtype)
    return vec


def _grads(rng: np.random.Generator, K: int, n: int, steps: int, dt: str, data: str):
    """Each rank's gradients of every step and its first residual."""
    if data == "integers":  # integer-valued: every p = g + e ties, so the tie rule decides what is sent
        return ([rng.integers(-3, 4, (steps, n)).astype(dt) for _ in range(K)],
                [rng.integers(-1, 2, n).astype(dt) for _ in range(K)])
    grads = [rng.standard_normal((steps, n)).astype(dt) for _ in range(K)]
    if data == "wide":
        for g in grads:
            g[:, rng.choice(np.arange(1 << 16, n), size=4, replace=False)] += 10
    return grads, [(0.3 * rng.standard_normal(n)).astype(dt) for _ in range(K)]


def _random_steps(rng: np.random.Generator) -> tuple:
    n = int(rng.integers(1, 41))
    return (int(rng.integers(1, 6)), n, int(rng.integers(0, n + 3)), int(rng.integers(2, 4)),
            str(rng.choice(["float32", "float64"])), "sim", str(rng.choice(["normal", "integers"])))


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (n, k, dt, kind) in enumerate(TOPK):
        p.add_in_order(Case(id=f"t{i}", fn="grader_topk", mode="call", label=f"topk_compress, n={n}, k={k} ({kind}), {dt}",
                            timeout=5, data={"k": k, "dtype": dt}), [("vec", _vector(rng, n, kind, dt)), ("=", k)])
    for i, (K, n, k, steps, dt, backend, kind) in enumerate(STEPS + [_random_steps(rng) for _ in range(RANDOM_STEPS)]):
        grads, res0 = _grads(rng, K, n, steps, dt, kind)
        where = "simulator" if backend == "sim" else "2 real processes"
        what = {"normal": "", "integers": ", integer-valued (ties)", "wide": ", large entries beyond 2**16"}[kind]
        case = Case(id=f"s{i}", fn="grader_ef_steps", label=f"K={K}, n={n}, k={k}, {steps} steps, {dt}{what}, {where}",
                    world_size=K, backend=backend, timeout=30 if backend == "process" else 10,
                    data={"k": k, "dtype": dt, "grads": grads, "residuals": res0, "steps": steps, "n": n,
                          "kind": kind})
        p.add_in_order(case, [("grads", grads), ("residual", res0), ("=", k)])
    K, rows, d = TRAIN["K"], TRAIN["rows"], TRAIN["d"]
    Xs = [rng.standard_normal((rows, d)) for _ in range(K)]  # shards that disagree: each its own w*
    parts = [(A, A @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)) for A in Xs]
    case = Case(id="train", fn="grader_train", label=f"150 steps of least squares on K={K} disagreeing shards, k={TRAIN['k']}",
                world_size=K, timeout=40, data={"parts": parts})
    p.add_in_order(case, [("X", [a for a, _ in parts]), ("y", [b for _, b in parts]), ("=", K * rows),
                          ("w0", np.zeros(d)), ("=", TRAIN["k"]), ("=", TRAIN["lr"]), ("=", TRAIN["steps"])])
    return p


def _kept_wrong(got: np.ndarray, want: np.ndarray, vec: np.ndarray) -> str:
    """What is wrong with a top-k vector: the count, ties broken the other way, or other entries."""
    kept, expected = int((got != 0).sum()), int((want != 0).sum())
    if kept != expected:
        return f"{kept} entries kept where {expected} are expected (k = 0 keeps none, k >= n keeps all)"
    mag = np.abs(vec.astype(np.float64))
    if np.array_equal(np.sort(mag[got != 0]), np.sort(mag[want != 0])):
        return ("the right magnitudes but the wrong entries among equal |values|: break ties by the lower index "
                "(a stable sort)")
    if vec.size > 1 << 15:
        return f"the wrong entries are kept (n={vec.size} is beyond 2**15: is the index type too narrow?)"
    return "the wrong entries are kept: keep the k entries of largest |value|, ties to the lower index"


def topk(res: CaseResult):
    vec = res.shared("vec")
    k = res.case.data["k"]
    want = topk_decompress(*topk_compress(vec, k), vec.size)
    got = res.value(0, "top-k vector", dtype=vec.dtype, shape=vec.shape)
    if not np.array_equal(got, want):
        raise Fail(_kept_wrong(got, want, vec))
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


HINTS = {"integers": " (integer-valued data: equal |values| everywhere, so ties go to the lower index)",
         "wide": " (the largest entries sit beyond index 2**16: is an index type too narrow?)", "normal": ""}


def _close(res: CaseResult, got: np.ndarray, want: np.ndarray, what: str) -> None:
    """close() at the case's dtype tolerance; the message names what the case's data exercises."""
    tol = TOL[res.case.data["dtype"]]
    try:
        close(got, want, tol, tol * (1 + float(np.abs(want).max(initial=0))), what)
    except Fail as exc:
        raise Fail(f"{exc}{HINTS[res.case.data['kind']]}") from None


def allreduce(res: CaseResult):
    avgs, _ = _reference(res)
    for r in range(res.case.world_size):
        got = _rows(res, r)
        for s, want in enumerate(avgs):
            _close(res, got[s], want, f"rank {r}'s average at step {s + 1}")
    return 1.0, ""


def residual(res: CaseResult):
    _, residuals = _reference(res)
    for r in range(res.case.world_size):
        _close(res, _rows(res, r)[-1], residuals[r], f"rank {r}'s residual after the last step (p - C(p), "
               f"p = grad + residual)")
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
    # k pairs to each other rank and step, in at most two messages (indices, values), each with its envelope
    bound = steps * (K - 1) * (k * (8 + np.dtype(data["dtype"]).itemsize) + 2 * envelope_bytes(1))
    for r in range(K):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} B in {steps} steps, more than the {bound} B that k={k} (index, value) "
                       f"pairs to each of the other {K - 1} ranks take (two messages per rank and step, headers "
                       f"included): send the compressed pairs, not dense vectors")
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
