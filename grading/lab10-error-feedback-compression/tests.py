"""Lab 10: 1-bit scaled sign compression with error feedback (EF-SignSGD). The references are written
here, in the grader; the course library has no sign compressor, and its top-k, QSGD and PowerSGD
(``scaleoutai.ml``) are unimportable in the student's sandbox."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after

UNIMPORTABLE = ("scaleoutai.ml",)  # the course's compressors (top-k with error feedback: the old answer)
ASKS = ("the lab asks for 1-bit scaled sign compression: every coordinate is one bit (1 for p_i >= 0) and all "
        "share the scale ||p||_1 / d")
# hand-built vectors: (name, values); each is graded as packed bytes and as C(p)
VECTORS = [("all zeros", [0.0] * 8), ("negative zeros", [-0.0, 0.0, -1.0, 1.0, -0.0, 3.0, -2.0]),
           ("all equal", [2.5] * 5), ("all equal, negative", [-1.5] * 11), ("d = 1, negative", [-3.0]),
           ("d = 1, zero", [0.0]), ("empty, d = 0", []), ("alternating signs, d = 16", [1.0, -1.0] * 8),
           ("integers with zeros and ties, d = 13", [0, 2, -2, 0, 1, -1, 3, 0, -3, 2, 0, -2, 1])]
RANDOM_VECTORS = [(9, "float64"), (64, "float32"), (1000, "float32"), (77, "float64")]
# (K, d, steps, dtype, backend, data): data "normal" or "integers" (integer-valued p: zeros and ties)
STEPS = [(1, 17, 3, "float64", "sim", "normal"), (2, 30, 3, "float64", "sim", "normal"),
         (3, 31, 4, "float32", "sim", "normal"), (5, 23, 3, "float64", "sim", "normal"),
         (7, 64, 3, "float32", "sim", "normal"), (5, 3, 2, "float64", "sim", "normal"),
         (3, 40, 3, "float64", "sim", "integers"), (2, 200, 3, "float32", "sim", "normal"),
         (2, 25, 3, "float64", "process", "normal")]
RANDOM_STEPS = 3  # property cases: random K, d, steps, dtype and data from the plan's rng
TOL = {"float64": 1e-12, "float32": 1e-5}
TRAIN = {"K": 4, "rows": 50, "d": 50, "lr": 0.02, "steps": 150, "ef": 1.05, "plain": 1.1}


def reference(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(packed bytes, C(p)) of the lab's compressor, in p's dtype."""
    d = p.size
    scale = (np.abs(p).sum(dtype=p.dtype) / p.dtype.type(d)) if d else p.dtype.type(0)
    plus = p >= 0
    return np.packbits(plus), np.where(plus, scale, -scale).astype(p.dtype)


def _random_steps(rng: np.random.Generator) -> tuple:
    return (int(rng.integers(1, 7)), int(rng.integers(1, 90)), int(rng.integers(2, 4)),
            str(rng.choice(["float32", "float64"])), "sim", str(rng.choice(["normal", "integers"])))


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    vecs = [(name, np.array(v, dtype=("float64", "float32")[i % 2])) for i, (name, v) in enumerate(VECTORS)]
    vecs += [(f"random, d = {d}", rng.standard_normal(d).astype(dt)) for d, dt in RANDOM_VECTORS]
    for i, (name, vec) in enumerate(vecs):
        for fn, what in (("grader_bits", "sign_compress's bytes"), ("grader_compressor", "C(p)")):
            p.add_in_order(Case(id=f"{fn[7]}{i}", fn=fn, mode="call", label=f"{what}, {name}, {vec.dtype}", timeout=5,
                                data={"dtype": str(vec.dtype)}), [("p", vec)])
    for i, (K, d, steps, dt, backend, kind) in enumerate(STEPS + [_random_steps(rng) for _ in range(RANDOM_STEPS)]):
        if kind == "integers":  # integer-valued p = g + e on the first step: zeros and equal |values|
            grads = [rng.integers(-3, 4, (steps, d)).astype(dt) for _ in range(K)]
            res0 = [rng.integers(-1, 2, d).astype(dt) for _ in range(K)]
        else:
            grads = [rng.standard_normal((steps, d)).astype(dt) for _ in range(K)]
            res0 = [(0.3 * rng.standard_normal(d)).astype(dt) for _ in range(K)]
        where = "simulator" if backend == "sim" else "2 real processes"
        case = Case(id=f"s{i}", fn="grader_ef_steps", world_size=K, backend=backend,
                    label=f"K={K}, d={d}, {steps} steps, {dt}{', integer-valued' if kind == 'integers' else ''}, {where}",
                    timeout=30 if backend == "process" else 10,
                    data={"dtype": dt, "grads": grads, "residuals": res0, "steps": steps, "d": d})
        p.add_in_order(case, [("grads", grads), ("residual", res0)])
    K, rows, d = TRAIN["K"], TRAIN["rows"], TRAIN["d"]
    Xs = [rng.standard_normal((rows, d)) for _ in range(K)]  # shards that disagree: each its own w*
    parts = [(A, A @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)) for A in Xs]
    for feedback in (1, 0):
        label = f"{TRAIN['steps']} steps of least squares on K={K} disagreeing shards, " + \
            ("with error feedback" if feedback else "without error feedback (residual zeroed every step)")
        case = Case(id=f"train{feedback}", fn="grader_train", label=label, world_size=K, timeout=40,
                    data={"parts": parts, "feedback": feedback})
        p.add_in_order(case, [("X", [a for a, _ in parts]), ("y", [b for _, b in parts]), ("=", K * rows),
                              ("w0", np.zeros(d)), ("=", TRAIN["lr"]), ("=", TRAIN["steps"]), ("=", feedback)])
    return p


def _vec(res: CaseResult) -> np.ndarray:
    return res.shared("p")


def bits(res: CaseResult):
    vec = _vec(res)
    want, _ = reference(vec)
    got = res.value(0, "packed sign bits", shape=None)
    if got.dtype != np.uint8:
        raise Fail(f"the bits come back as {got.dtype}, not uint8 bytes: {ASKS}, packed 8 to a byte")
    if got.shape != want.shape:
        raise Fail(f"{got.size} bytes for d={vec.size} signs; ceil(d/8) = {want.size} bytes hold them, 8 per byte")
    if np.array_equal(got, want):
        return 1.0, ""
    if np.array_equal(got, np.packbits(vec >= 0, bitorder="little")):
        raise Fail("the bits are in the wrong order within each byte: coordinate 0 is the most significant bit")
    if np.array_equal(got, np.packbits(vec > 0)) or np.array_equal(got, np.packbits(~np.signbit(vec))):
        raise Fail("a zero or negative zero got the wrong bit: sign(0) = sign(-0.0) = +1 (bit 1), since p_i >= 0")
    if np.array_equal(got, np.packbits(vec < 0)):
        raise Fail("the bits are inverted: 1 stands for p_i >= 0, 0 for p_i < 0")
    raise Fail(f"{int(np.unpackbits(got ^ want).sum())} bits differ from the signs of p (1 for p_i >= 0, "
               f"coordinate 0 in the top bit, padding bits 0)")


def compressor(res: CaseResult):
    vec = _vec(res)
    _, want = reference(vec)
    got = res.value(0, "C(p)", dtype=vec.dtype, shape=vec.shape)
    if vec.size and np.count_nonzero(got) and len(np.unique(np.abs(got[got != 0]))) > 1 or \
            (np.count_nonzero(vec) and np.count_nonzero(got) < min(vec.size, np.count_nonzero(want))):
        raise Fail(f"C(p) is not one magnitude times a sign on every coordinate: {ASKS}; top-k or a sparse or "
                   f"rounded vector does not")
    tol = TOL[res.case.data["dtype"]]
    l1 = float(np.abs(vec.astype(np.float64)).sum()) / max(vec.size, 1)
    if l1 == 0 and np.count_nonzero(got):
        raise Fail("C(p) of a zero vector is not zero: the scale ||p||_1 / d is 0 there")
    if vec.size and np.count_nonzero(got) and not np.isclose(float(np.abs(got).max()), l1, rtol=10 * tol, atol=0):
        raise Fail(f"the magnitude of C(p) is not ||p||_1 / d (it is {float(np.abs(got).max()) / max(l1, 1e-300):.3g} "
                   f"times that): scale the signs by the mean of |p_i|")
    if not np.array_equal(np.signbit(got) & (got != 0), np.signbit(want) & (want != 0)):
        raise Fail("C(p) has the wrong sign on some coordinates: + where p_i >= 0 (zero and -0.0 included), - where "
                   "p_i < 0; are the bits decoded in the order they were packed?")
    close(got, want, tol, tol * (1 + float(np.abs(want).max(initial=0))), "C(p)")
    return 1.0, ""


def contraction(res: CaseResult):
    """The delta identity ||C(p) - p||^2 = ||p||^2 - ||p||_1^2 / d on the student's C(p)."""
    vec = _vec(res).astype(np.float64)
    got = res.value(0, "C(p)", shape=vec.shape).astype(np.float64)
    if vec.size == 0:
        return 1.0, ""
    err, sq = float(np.sum((got - vec) ** 2)), float(np.sum(vec ** 2))
    want = sq - float(np.abs(vec).sum()) ** 2 / vec.size
    if not abs(err - want) <= 10 * TOL[res.case.data["dtype"]] * (1 + sq):
        raise Fail(f"||C(p) - p||^2 is {err / max(sq, 1e-300):.4g} ||p||^2 where the scaled sign compressor gives "
                   f"(1 - ||p||_1^2 / (d ||p||^2)) ||p||^2 = {want / max(sq, 1e-300):.4g} ||p||^2: only the scale "
                   f"||p||_1 / d makes C a delta-approximate compressor")
    return 1.0, ""


def _reference(res: CaseResult) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = res.case.data
    residuals, avgs = [e.copy() for e in data["residuals"]], []
    for s in range(data["steps"]):
        total = np.zeros(data["d"], dtype=data["dtype"])
        for q, g in enumerate(data["grads"]):
            p = g[s] + residuals[q]
            c = reference(p)[1]
            residuals[q], total = p - c, total + c
        avgs.append(total / total.dtype.type(len(residuals)))
    return avgs, residuals


def _rows(res: CaseResult, r: int) -> np.ndarray:
    data = res.case.data
    return res.value(r, "stack of averages and residual", dtype=data["dtype"], shape=(data["steps"] + 1, data["d"]))


def _close(res: CaseResult, got: np.ndarray, want: np.ndarray, what: str) -> None:
    tol = TOL[res.case.data["dtype"]]
    close(got, want, tol, tol * (1 + float(np.abs(want).max(initial=0))), what)


def allreduce(res: CaseResult):
    avgs, _ = _reference(res)
    K = res.case.world_size
    for r in range(K):
        got = _rows(res, r)
        for s, want in enumerate(avgs):
            if K == 1 and s == 0 and np.count_nonzero(got[0]) < min(want.size, np.count_nonzero(want)):
                raise Fail(f"rank 0's average at step 1 is sparse: {ASKS}; the course's top-k does not")
            _close(res, got[s], want, f"rank {r}'s average at step {s + 1}")
    return 1.0, ""


def residual(res: CaseResult):
    _, residuals = _reference(res)
    for r in range(res.case.world_size):
        _close(res, _rows(res, r)[-1], residuals[r], f"rank {r}'s residual after the last step (p - C(p), "
               f"p = grad + residual, C(p) = (||p||_1 / d) sign(p))")
    return 1.0, ""


def correct_process(res: CaseResult):
    allreduce(res)
    residual(res)
    return 1.0, ""


def traffic(res: CaseResult):
    """From the grader's counts: one frame of ceil(d/8) bytes and a scale per hop, never a coordinate's byte."""
    data = res.case.data
    K, d, steps = res.case.world_size, data["d"], data["steps"]
    # graded on every case that returned its stack: the bound does not depend on the values being right
    graded_after(lambda: [_rows(res, r) for r in range(K)], "the returned stack")
    bound = steps * (K - 1) * (-(-d // 8) + 8 + envelope_bytes(1))
    for r in range(K):
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} B in {steps} steps, more than the {bound} B that one frame of "
                       f"ceil(d/8) = {-(-d // 8)} bytes of bits and an 8-byte scale per hop of the all-gather take "
                       f"(header included): pack 8 signs per byte and send bits and scale in one message")
    return 1.0, ""


def training(res: CaseResult):
    parts, feedback = res.case.data["parts"], res.case.data["feedback"]
    X, y = np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    best = float(np.mean((X @ np.linalg.lstsq(X, y, rcond=None)[0] - y) ** 2))
    w = res.value(0, "weights", dtype="float64", shape=(X.shape[1],))
    loss = float(np.mean((X @ w - y) ** 2))
    if feedback and not loss <= TRAIN["ef"] * best:
        raise Fail(f"after {TRAIN['steps']} steps the loss is {loss / best:.2f}x the least-squares optimum; "
                   f"EF-SignSGD reaches {TRAIN['ef']}x: add the residual before compressing and keep p - C(p)")
    if not feedback and not loss > TRAIN["plain"] * best:
        raise Fail(f"with the residual zeroed every step the loss still reaches {loss / best:.2f}x the optimum: "
                   f"plain signSGD stalls above {TRAIN['plain']}x on disagreeing shards; is every gradient really "
                   f"compressed to scaled signs ({ASKS})?")
    return 1.0, ""


_steps = lambda c: c.fn == "grader_ef_steps" and c.backend == "sim"  # noqa: E731
TESTS = [
    Test("bits", "sign_compress packs the signs 8 per byte (1 for p >= 0, coordinate 0 in the top bit)",
         select=lambda c: c.fn == "grader_bits", check=bits),
    Test("compressor", "C(p) = (||p||_1 / d) sign(p) exactly, in p's dtype", select=lambda c: c.fn == "grader_compressor",
         check=compressor),
    Test("contraction", "||C(p) - p||^2 = (1 - ||p||_1^2 / (d ||p||^2)) ||p||^2: a delta-approximate compressor",
         select=lambda c: c.fn == "grader_compressor", check=contraction),
    Test("allreduce", "the average of every rank's C(grad + residual), on every rank, step after step",
         select=_steps, check=allreduce),
    Test("residual", "each rank keeps back p - C(p) for the next step", select=_steps, check=residual),
    Test("correct_process", "the same on 2 real processes", select=lambda c: c.backend == "process",
         check=correct_process),
    Test("traffic", "ceil(d/8) bytes and one scale per rank and hop (the grader's byte counts)",
         select=lambda c: _steps(c) and c.world_size > 1, check=traffic),
    Test("training", "with error feedback 150 steps reach 1.05x the optimum; without, the same compressor stalls",
         select=lambda c: c.fn == "grader_train", check=training),
]
