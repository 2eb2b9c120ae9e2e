"""Lab 23: context-parallel prefill with causal ring attention. Each rank is handed its chunk of the prompt and
the block weights; the grader checks every rank's rows against its own one-machine run of the block stack
(nn.block_forward, layer after layer, in float64), the running softmax on its own (any split of the keys, any
merge order, empty pieces, scores in the thousands), and, from its own trace, the causal ring: per layer,
rank r < K - 1 sends exactly r + 1 messages, all to r + 1, the (2, B, T_o, d) blocks of ranks r, ..., 0 in
that order, and the last rank sends none."""
from __future__ import annotations

import numpy as np

from scaleoutai import nn
from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after

# (K, B, chunk sizes, d, heads, d_ff, layers, dtype, Wq scale, note)
FORWARD = [(1, 2, [7], 8, 2, 16, 2, "float64", 1, ""), (2, 2, [5, 4], 8, 2, 16, 2, "float32", 1, ""),
           (3, 1, [4, 3, 3], 12, 3, 20, 2, "float64", 1, ", T = 10 not divisible by K"),
           (5, 2, [3, 3, 3, 2, 2], 8, 2, 16, 1, "float32", 1, ", T = 13 not divisible by K"),
           (4, 1, [1, 2, 4, 5], 8, 4, 16, 2, "float64", 1, ", chunks 1:2:4:5"),
           (8, 1, [3, 3, 3, 3, 2, 2, 2, 2], 8, 2, 8, 1, "float64", 1, ", T = 20 not divisible by K"),
           (3, 2, [6, 1, 2], 16, 1, 16, 1, "float32", 1, ", one head")]
TINY = [(5, 1, [1, 1, 1, 0, 0], 8, 2, 16, 1, "float64", 1, ": K > T, the last chunks empty"),
        (4, 2, [0, 3, 0, 3], 8, 2, 16, 2, "float64", 1, ": empty chunks first and in the middle"),
        (3, 1, [0, 1, 0], 8, 2, 16, 1, "float32", 1, ": T = 1"),
        (6, 1, [2, 0, 0, 1, 0, 1], 8, 4, 16, 1, "float32", 1, ": K > T, empty chunks between full ones")]
STABLE = [(3, 1, [3, 4, 2], 8, 2, 16, 1, "float64", 2000, ": scores in the thousands (exp overflows float64)"),
          (2, 1, [4, 3], 8, 2, 16, 1, "float32", 300, ": scores in the hundreds (exp overflows float32)")]
PROCESS = [(2, 1, [4, 5], 8, 2, 16, 1, "float64", 1, "")]
# pieces: (B, T, Tq, d, heads, cuts, order, dtype, q scale, note); the causal piece has index len(cuts) + 1
PIECES = [(1, 8, 3, 8, 2, [2], [2, 0, 1], "float64", 1, "two whole pieces, merged causal piece first"),
          (2, 9, 4, 8, 2, [1, 3], [0, 1, 2, 3], "float32", 1, "three whole pieces in order"),
          (1, 7, 2, 4, 1, [0, 0, 2], [1, 0, 3, 2, 4], "float64", 1, "two empty pieces merged first"),
          (1, 5, 5, 8, 4, [], [0, 1], "float64", 1, "only the causal piece and an empty one before it"),
          (1, 6, 0, 8, 2, [3], [1, 0, 2], "float64", 1, "no queries at all"),
          (1, 9, 3, 8, 2, [4], [2, 1, 0], "float64", 3000, "scores in the thousands (exp overflows float64)"),
          (2, 8, 2, 8, 2, [3], [1, 2, 0], "float32", 400, "scores in the hundreds (exp overflows float32)")]
RANDOM = 3  # seeded random cases: K, chunk sizes (empty ones too), B, L, heads, dtype drawn; graded on everything
UNIMPORTABLE = ("scaleoutai.serving", "scaleoutai.parallel", "scaleoutai.collectives")  # TP inference, TP, rings
RTOL = {"float32": 1e-4, "float64": 1e-9}
ASKS = ("the lab asks for the causal ring: per layer rank r sends the (2, B, T_o, d) key/value blocks of ranks r, "
        "r-1, ..., 0 to rank r+1 only, and the last rank sends nothing; gathering the prompt on every rank (the "
        "chapter's all-reduce) or a ring of K-1 hops for every rank is not it")


def _add_spmd(p: Plan, rng: np.random.Generator, cid: str, kind: str, spec) -> None:
    K, B, sizes, d, H, dff, L, dtype, scale, note = spec
    blocks = [nn.block_init(d, H, dff, seed=int(rng.integers(1 << 30))) for _ in range(L)]
    for b in blocks:
        b["Wq"] = b["Wq"] * scale
    flat = np.concatenate([nn.flatten(b) for b in blocks]).astype(dtype)
    x = rng.standard_normal((B, sum(sizes), d)).astype(dtype)
    ends = np.cumsum([0] + list(sizes))
    backend = "process" if kind == "process" else "sim"
    label = (f"K={K}, B={B}, chunks {list(sizes)}, d={d}, {H} head{'s' * (H > 1)}, {L} layer{'s' * (L > 1)}, {dtype}, "
             f"{'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_cp", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 10,
                data={"kind": kind, "sizes": list(sizes), "B": B, "d": d, "H": H, "dff": dff, "L": L, "dtype": dtype,
                      "x": x, "flat": flat})
    p.add_in_order(case, [("x", [x[:, ends[r]:ends[r + 1]] for r in range(K)]), ("flat", flat),
                          ("=", d), ("=", H), ("=", dff), ("=", L)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (B, T, Tq, d, H, cuts, order, dtype, scale, note) in enumerate(PIECES):
        q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((B, Tq, d), (B, T, d), (B, T, d)))
        q = (q * scale).astype(dtype)
        case = Case(id=f"a{i}", fn="attend_pieces", mode="call", timeout=5,
                    label=f"attend_pieces: B={B}, T={T}, {Tq} queries, {H} heads, cuts {cuts}, {dtype}: {note}",
                    data={"kind": "pieces", "H": H, "dtype": dtype, "q": q, "k": k, "v": v})
        p.add_in_order(case, [("q", q), ("k", k), ("v", v), ("=", H), ("=", cuts), ("=", order)])
    for kind, specs in (("forward", FORWARD), ("tiny", TINY), ("stable", STABLE), ("process", PROCESS)):
        for i, spec in enumerate(specs):
            _add_spmd(p, rng, f"{kind[0]}{i}", kind, spec)
    for i in range(RANDOM):
        K = int(rng.integers(2, 8))
        sizes = [int(s) for s in rng.integers(0, 5, size=K)]
        sizes[int(rng.integers(K))] += 1  # at least one position
        H = int(rng.choice([1, 2, 4]))
        _add_spmd(p, rng, f"r{i}", "random", (K, int(rng.integers(1, 3)), sizes, 4 * H, H, 12, int(rng.integers(1, 3)),
                                              ("float32", "float64", "float32")[i], 1, ": seeded random case"))
    return p


def _dense(q, k, v, H):
    B, Tq, d = q.shape
    T, dh = k.shape[1], d // H
    heads = lambda a, n: a.astype(np.float64).reshape(B, n, H, dh).transpose(0, 2, 1, 3)  # noqa: E731
    s = heads(q, Tq) @ heads(k, T).transpose(0, 1, 3, 2) / np.sqrt(dh)
    visible = np.arange(T)[None, :] - np.arange(T - Tq, T)[:, None] <= 0  # key position <= query position
    s = np.where(visible, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True)) if Tq else s
    return (w / w.sum(-1, keepdims=True) @ heads(v, T)).transpose(0, 2, 1, 3).reshape(B, Tq, d)


def pieces(res: CaseResult):
    c = res.case.data
    want = _dense(c["q"], c["k"], c["v"], c["H"])
    got = res.value(0, "merged attention", dtype=c["dtype"], shape=want.shape)
    if not np.isfinite(got).all():
        raise Fail(f"{int((~np.isfinite(got)).sum())} of {got.size} outputs are inf or NaN: every exp in the running "
                   "softmax is exp(s - m) with m the running maximum, and an empty piece (m = -inf) must merge as zero")
    close(got, want, RTOL[c["dtype"]], RTOL[c["dtype"]], "the attention merged from the pieces' partials")
    return 1.0, ""


def _reference(res: CaseResult) -> np.ndarray:
    c = res.case.data
    like = nn.block_init(c["d"], c["H"], c["dff"])
    per_block = len(c["flat"]) // c["L"]
    y = c["x"].astype(np.float64)
    for i in range(c["L"]):
        weights = c["flat"][i * per_block:(i + 1) * per_block].astype(np.float64)
        y, _ = nn.block_forward(nn.unflatten(weights, like), y, c["H"])
    return y


def _values(res: CaseResult) -> None:
    c = res.case.data
    want, ends = _reference(res), np.cumsum([0] + c["sizes"])
    tol = RTOL[c["dtype"]]
    for r in range(res.case.world_size):
        rows = want[:, ends[r]:ends[r + 1]]
        got = res.value(r, "rows of the block stack", dtype=c["dtype"], shape=rows.shape)
        if not np.isfinite(got).all():
            raise Fail(f"rank {r}'s rows hold {int((~np.isfinite(got)).sum())} inf or NaN values: fold each block in "
                       "with exp(s - m) against the running maximum m")
        close(got, rows, tol, tol * max(1.0, float(np.abs(want).max(initial=0))), f"rank {r}'s rows")


def values(res: CaseResult):
    _values(res)
    return 1.0, ""


def _sends(res: CaseResult, r: int) -> list:
    return [e for e in res.trace if e.rank == r and e.kind == "send"]


def _ring(res: CaseResult) -> None:
    K, L = res.case.world_size, res.case.data["L"]
    for r in range(K):
        sends = _sends(res, r)
        want = L * (r + 1) if r < K - 1 else 0
        peers = sorted({e.peer for e in sends})
        if any(pr != r + 1 for pr in peers):
            raise Fail(f"rank {r} sent to rank(s) {peers}; in the causal ring a rank sends only to its right "
                       f"neighbour r+1{' and the last rank sends nothing' if r == K - 1 else ''}: {ASKS}")
        if len(sends) != want:
            raise Fail(f"rank {r} sent {len(sends)} messages over {L} layer(s); the causal ring sends exactly "
                       f"{want} (r + 1 = {r + 1} per layer: its own block and the {r} it received, each as one "
                       f"(2, B, T_o, d) array): {ASKS}")


def ring(res: CaseResult):
    graded_after(lambda: _values(res), "every rank's rows")
    _ring(res)
    return 1.0, ""


def _payload(res: CaseResult) -> None:
    c = res.case.data
    item, K = np.dtype(c["dtype"]).itemsize, res.case.world_size
    for r in range(K - 1):
        want = [2 * c["B"] * c["sizes"][o] * c["d"] * item + envelope_bytes(4) for o in range(r, -1, -1)] * c["L"]
        got = [e.nbytes for e in _sends(res, r)]
        if got != want:
            j = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            wide = " (in float64: send the blocks in the activations' dtype)" if got[j] - 40 == 2 * (want[j] - 40) \
                else ""
            raise Fail(f"rank {r}'s message {j} carried {got[j]} B where the causal ring's carries {want[j]} B (one "
                       f"array np.stack([k, v]) of shape (2, B, T_o, d), the blocks of ranks r, r-1, ..., 0 in that "
                       f"order, plus one header){wide}")


def payload(res: CaseResult):
    graded_after(lambda: _values(res), "every rank's rows")
    graded_after(lambda: _ring(res), "the ring's messages")
    _payload(res)
    return 1.0, ""


def everything(res: CaseResult):
    _values(res)
    _ring(res)
    _payload(res)
    return 1.0, ""


TRAFFIC = lambda c: c.data["kind"] in ("forward", "tiny", "stable") and c.world_size > 1  # noqa: E731
TESTS = [
    Test("pieces", "the running softmax: any split of the keys, merged in any order, empty pieces and scores in the "
         "thousands equal one softmax", select=lambda c: c.data["kind"] == "pieces", check=pieces),
    Test("forward", "every rank's rows equal one machine's block stack (K = 1, 2, 3, 4, 5, 8, uneven chunks, float32 "
         "and float64)", select=lambda c: c.data["kind"] == "forward", check=values),
    Test("tiny", "empty chunks anywhere, K > T and T = 1", select=lambda c: c.data["kind"] == "tiny", check=values),
    Test("stable", "scores in the thousands stay finite and right", select=lambda c: c.data["kind"] == "stable",
         check=values),
    Test("correct_process", "the rows are right on 2 real processes", select=lambda c: c.data["kind"] == "process",
         check=values),
    Test("ring", "the causal ring (the grader's trace): r + 1 messages per rank and layer, all to r + 1, none from the "
         "last rank", select=TRAFFIC, check=ring),
    Test("payload", "every message is one (2, B, T_o, d) block in the activations' dtype, the blocks of r, r-1, ..., 0 "
         "in order (the grader's byte counts)", select=TRAFFIC, check=payload),
    Test("random", "seeded random cases: rows, ring and bytes", select=lambda c: c.data["kind"] == "random",
         check=everything),
]
