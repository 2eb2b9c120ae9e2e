"""Lab 16: ZeRO-sharded Adam equals Adam; a tensor-parallel MLP equals the dense one."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)
from scaleoutai.nn import adam_update, gelu

# (K, Psi, steps, dtype, backend[, gradient scale]); Psi < K leaves some ranks without a block (K = 6, Psi = 2:
# most of them); gradients of 1e-7 make sqrt(v_hat) comparable with eps, so eps sits where the formula puts it
ZERO = [(1, 10, 3, "float64", "sim"), (2, 10, 3, "float64", "sim"), (3, 11, 4, "float32", "sim"),
        (5, 23, 3, "float64", "sim"), (5, 3, 2, "float64", "sim"), (4, 18, 3, "float32", "sim"),
        (2, 13, 3, "float64", "process"), (6, 2, 2, "float64", "sim"), (3, 12, 3, "float64", "sim", 1e-7),
        (7, 30, 2, "float32", "sim")]
# (K, x shape, d_ff, dtype, backend); d_ff < K leaves some ranks without columns
TP = [(1, (4, 6), 8, "float64", "sim"), (2, (5, 6), 8, "float64", "sim"), (3, (4, 5), 7, "float32", "sim"),
      (5, (3, 4), 12, "float64", "sim"), (8, (2, 4), 6, "float64", "sim"), (3, (2, 3, 4), 9, "float64", "sim"),
      (2, (4, 6), 10, "float64", "process"), (7, (1, 3), 3, "float64", "sim"), (6, (3, 5), 10, "float32", "sim")]
RANDOM = 2  # property cases of each part: random K, sizes, steps and dtype from the seeded rng
LR = 0.01
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4)}  # (rtol, atol per unit of max|expected|)
UNIMPORTABLE = ("scaleoutai.parallel.zero", "scaleoutai.parallel.tensor", "scaleoutai.parallel.ddp")  # the answers
FORBIDDEN_MODULES = ("scaleoutai.parallel.zero", "scaleoutai.parallel.tensor", "scaleoutai.parallel.ddp",
                     "torch.distributed", "mpi4py", "ray.util.collective")
FORBIDDEN_NAMES = ("zero_step", "train_zero", "zero_full_params", "row_parallel_forward",
                   "column_parallel_forward", "all_reduce")


def _where(backend: str) -> str:
    return "simulator" if backend == "sim" else "2 real processes"


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, row in enumerate(ZERO):
        _add_zero(p, rng, f"z{i}", *row)
    for i, row in enumerate(TP):
        _add_tp(p, rng, f"m{i}", *row)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))  # after the fixed cases: their inputs stay put
    for i in range(RANDOM):
        dt = str(prop.choice(["float32", "float64"]))
        _add_zero(p, prop, f"rz{i}", int(prop.integers(1, 8)), int(prop.integers(1, 25)), int(prop.integers(1, 4)), dt,
                  "sim", 1.0, "random case, ")
        dt = str(prop.choice(["float32", "float64"]))
        shape = tuple(int(v) for v in prop.integers(1, 6, size=int(prop.integers(2, 4))))
        _add_tp(p, prop, f"rm{i}", int(prop.integers(1, 8)), shape, int(prop.integers(1, 12)), dt, "sim",
                "random case, ")
    return p


def _add_zero(p: Plan, rng: np.random.Generator, cid: str, K: int, psi: int, steps: int, dt: str, backend: str,
              scale: float = 1.0, tag: str = "") -> None:
    more = ", more ranks than elements" if K > psi else ", uneven blocks" if psi % K else ""
    more += f", gradients of size {scale:g}" if scale != 1.0 else ""
    case = Case(id=cid, fn="grader_zero_adam", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8, label=f"{tag}ZeRO-2, K={K}, Psi={psi}, {steps} steps, "
                f"{dt}{more}, {_where(backend)}", data={"psi": psi, "steps": steps, "dtype": dt, "kind": "zero",
                                                         "record_messages": True})
    grads = [(scale * rng.standard_normal((steps, psi))).astype(dt) for _ in range(K)]
    p.add_in_order(case, [("p0", rng.standard_normal(psi).astype(dt)), ("grads", grads), ("=", LR)])


def _add_tp(p: Plan, rng: np.random.Generator, cid: str, K: int, shape: tuple, d_ff: int, dt: str, backend: str,
            tag: str = "") -> None:
    d = shape[-1]
    more = ", more ranks than columns" if K > d_ff else ", uneven columns" if d_ff % K else ""
    more += ", fewer outputs than ranks" if int(np.prod(shape)) < K else ""
    case = Case(id=cid, fn="megatron_mlp_forward", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8, label=f"{tag}Megatron MLP, K={K}, x of shape {shape}, "
                f"d_ff={d_ff}, {dt}{more}, {_where(backend)}", data={"shape": shape, "dtype": dt, "kind": "tp"})
    x = rng.standard_normal(shape).astype(dt)
    W1 = (rng.standard_normal((d, d_ff)) / np.sqrt(d)).astype(dt)
    b1 = (0.5 * rng.standard_normal(d_ff)).astype(dt)
    W2 = (rng.standard_normal((d_ff, d)) / np.sqrt(d_ff)).astype(dt)
    b2 = (0.5 * rng.standard_normal(d)).astype(dt)
    cols = [c for c in np.array_split(np.arange(d_ff), K)]  # rank r's columns
    p.add_in_order(case, [("x", x), ("W1", [W1[:, c].copy() for c in cols]), ("b1", [b1[c].copy() for c in cols]),
                   ("W2", [W2[c].copy() for c in cols]), ("b2", b2)])
    case.data["full"] = (W1, b1, W2)


def _adam_steps(res: CaseResult) -> list[np.ndarray]:
    """The parameters after each Adam step on the summed gradients, on one machine, in float64."""
    p = res.shared("p0").astype(np.float64)
    grads = np.sum(np.array(res.per_rank("grads"), dtype=np.float64), axis=0)
    m, v = np.zeros_like(p), np.zeros_like(p)
    out = []
    for s, g in enumerate(grads):
        adam_update(p, g, m, v, s + 1, LR)
        out.append(p.copy())
    return out


def _adam(res: CaseResult) -> np.ndarray:
    return _adam_steps(res)[-1]


def _zero_values(res: CaseResult, r: int) -> tuple[np.ndarray, float]:
    psi = res.case.data["psi"]
    got = res.value(r, "parameters (followed by the state count)", dtype=res.case.data["dtype"], shape=(psi + 1,))
    return got[:psi], float(got[psi])


def _correct(res: CaseResult) -> None:
    c = res.case
    rtol, scale = TOL[c.data["dtype"]]
    if c.data["kind"] == "zero":
        ref = _adam(res)
        for r in range(c.world_size):
            close(_zero_values(res, r)[0], ref, rtol, scale * (1 + float(np.abs(ref).max())),
                  f"rank {r}'s parameters after {c.data['steps']} Adam steps")
    else:
        W1, b1, W2 = c.data["full"]
        x, b2 = res.shared("x").astype(np.float64), res.shared("b2").astype(np.float64)
        ref = gelu(x @ W1.astype(np.float64) + b1) @ W2.astype(np.float64) + b2
        for r in range(c.world_size):
            got = res.value(r, "output y", dtype=c.data["dtype"], shape=ref.shape)
            close(got, ref, rtol, scale * (1 + float(np.abs(ref).max())), f"rank {r}'s output y")


def correct(res: CaseResult):
    _correct(res)
    return 1.0, ""


def zero_memory(res: CaseResult):
    K, psi = res.case.world_size, res.case.data["psi"]
    graded_after(lambda: _correct(res), "the result")
    _parameters_on_the_wire(res)
    hi, lo = 2 * math.ceil(psi / K), 2 * (psi // K)
    for r in range(K):
        held = _zero_values(res, r)[1]
        if held > hi:
            raise Fail(f"rank {r}'s state holds {held:g} floating-point values, {held / max(hi, 1):.1f}x what ZeRO "
                       f"keeps: m and v for its own block only, at most 2*ceil(Psi/K) = {hi}")
        if held < lo:
            raise Fail(f"rank {r}'s state holds {held:g} floating-point values, fewer than the 2*floor(Psi/K) = {lo} "
                       f"that m and v of its block need: keep the moments in the state dict as arrays")
    return 1.0, ""


def _parameters_on_the_wire(res: CaseResult) -> None:
    """ZeRO-2's all-gather moves updated parameter blocks: after each step s, the rank that owns a block
    (rank r owns block r of np.array_split) must itself send that block with the values of the
    parameters after step s (the grader's recorded messages against its own Adam, in float64). Plain
    data parallelism moves only gradient sums, and a rank that gathers everything and updates it all
    sends blocks it does not own, whatever state either reports."""
    c, K, psi = res.case, res.case.world_size, res.case.data["psi"]
    rtol, scale = TOL[c.data["dtype"]]
    sent: list[list[np.ndarray]] = [[] for _ in range(K)]
    cap = 64 * K * c.data["steps"]
    for src, _dst, payload in res.messages:
        x = np.asarray(payload)
        # an all-gather message holds at most Psi values; the cap bounds the grader's work, not the student's
        if 0 <= int(src) < K and x.dtype.kind in "biuf" and 0 < x.size <= psi and len(sent[int(src)]) < cap:
            sent[int(src)].append(x.astype(np.float64).ravel())
    for s, p in enumerate(_adam_steps(res)):
        atol = scale * (1 + float(np.abs(p).max()))
        for r, b in enumerate(np.array_split(np.arange(psi), K)):
            if b.size and not any(_carries(x, p[b], atol, rtol) for x in sent[r]):
                raise Fail(f"after step {s + 1}, rank {r} never sent the updated parameters of the block it owns "
                           f"({int(b[0])}..{int(b[-1])}): in ZeRO-2 each rank applies Adam to its own block and "
                           f"all-gathers the parameters it updated, not gradient sums (all-reducing the gradients "
                           f"and updating every parameter everywhere is plain data parallelism)")


def _carries(x: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> bool:
    """Whether ``want`` occurs in the payload ``x`` as a contiguous run (a block, or part of a larger message)."""
    n = want.size
    if x.size < n:
        return False
    windows = np.lib.stride_tricks.sliding_window_view(x, n)
    return bool(np.any(np.all(np.abs(windows - want) <= atol + rtol * np.abs(want), axis=1)))


def _bytes(res: CaseResult, bound_values: int, messages: int, check_count: bool, what: str) -> None:
    """At most ``bound_values`` values and one 1-D message header per allowed message (``messages``) per rank."""
    item = np.dtype(res.case.data["dtype"]).itemsize
    bound = bound_values * item + messages * envelope_bytes(1)
    for r in range(res.case.world_size):
        s = res.stats(r)
        if check_count and s["messages_sent"] > messages:
            raise Fail(f"rank {r} sent {s['messages_sent']} messages; one ring all-reduce sends "
                       f"2(K-1) = {messages}")
        if s["bytes_sent"] > bound:
            raise Fail(f"rank {r} sent {s['bytes_sent']} bytes, {s['bytes_sent'] / bound:.1f}x the bound of {bound} "
                       f"bytes ({what}, plus a {envelope_bytes(1)}-byte header per message)")


def zero_bytes(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _correct(res), "the result")
    bound = c.data["steps"] * 2 * (K - 1) * math.ceil(c.data["psi"] / K)
    _bytes(res, bound, c.data["steps"] * 2 * (K - 1), False, "per step a reduce-scatter and an all-gather send 2(K-1)*ceil(Psi/K) values; "
           "all-reducing the gradients costs more")
    return 1.0, ""


def tp_bytes(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _correct(res), "the result")
    n = int(np.prod(c.data["shape"]))
    _bytes(res, 2 * (K - 1) * math.ceil(n / K), 2 * (K - 1), True,
           "one ring all-reduce of the T x d partial outputs; move activations, not weights")
    return 1.0, ""


def own_code(res: CaseResult):
    graded_after(lambda: _correct(res), "the result")
    bad = forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"write ZeRO and the Megatron MLP yourself (scaleoutai.collectives and "
                   f"scaleoutai.nn are fine); found {', '.join(bad[:4])}")
    return 1.0, ""


def _is(kind: str, backend: str = "sim", multi: bool = False):
    return lambda c: c.data["kind"] == kind and c.backend == backend and (c.world_size > 1 or not multi)


TESTS = [
    Test("zero_sim", "ZeRO-2 Adam equals Adam on every rank (K = 1, 2, 3, 4, 5, Psi < K)",
         select=_is("zero"), check=correct),
    Test("zero_process", "ZeRO-2 Adam equals Adam on 2 real processes", select=_is("zero", "process"), check=correct),
    Test("zero_memory", "ZeRO-2 keeps 1/K of the optimizer state and all-gathers updated parameters (on the wire)",
         select=_is("zero", multi=True),
         check=zero_memory),
    Test("zero_bytes", "ZeRO-2 sends at most a reduce-scatter plus an all-gather per step",
         select=_is("zero", multi=True), check=zero_bytes),
    Test("tp_sim", "the Megatron MLP equals the dense MLP on every rank (K = 1, 2, 3, 5, 8 > d_ff)",
         select=_is("tp"), check=correct),
    Test("tp_process", "the Megatron MLP equals the dense MLP on 2 real processes", select=_is("tp", "process"),
         check=correct),
    Test("tp_bytes", "the Megatron MLP uses one all-reduce of activations", select=_is("tp", multi=True),
         check=tp_bytes),
    Test("own_code", "ZeRO and the MLP are your own (no scaleoutai.parallel.zero/tensor, no torch.distributed)",
         select=_is("zero", multi=True), check=own_code),
]
