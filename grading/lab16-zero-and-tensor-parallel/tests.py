"""Lab 16: ZeRO++ weights: sharded Adam with exact master shards and an int8, block-scaled all-gather."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)
from scaleoutai.nn import adam_update

# (K, Psi, steps, dtype, backend, qblock, data): Psi < K leaves ranks without a shard; qblock need not divide a
# shard; data "mixed" draws parameters of size 1e-3 to 10, "zeros" makes the first 2 blocks of rank 0 zero for
# good (scale 0), "tiny" uses gradients of 1e-7 so that eps sits where Adam's formula puts it
ZERO = [(1, 40, 3, "float64", "sim", 8, "plain"), (2, 70, 3, "float64", "sim", 8, "mixed"),
        (3, 100, 3, "float32", "sim", 7, "mixed"), (4, 130, 2, "float64", "sim", 16, "mixed"),
        (5, 3, 2, "float64", "sim", 4, "plain"), (6, 200, 2, "float32", "sim", 8, "plain"),
        (2, 90, 3, "float64", "process", 8, "mixed"), (3, 96, 2, "float64", "sim", 8, "zeros"),
        (7, 250, 2, "float32", "sim", 5, "mixed"), (3, 60, 3, "float64", "sim", 6, "tiny"),
        (8, 5, 2, "float32", "sim", 3, "plain")]
RANDOM = 3  # property cases: random K, Psi, steps, qblock, dtype and data from the seeded rng
LR = 0.01
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4)}  # master: (rtol, atol per unit of max|expected|)
GRID = {"float64": 1e-6, "float32": 1e-3}  # weights: tolerance in units of the block's scale (and tie window)
UNIMPORTABLE = ("scaleoutai.parallel", "scaleoutai.serving", "scaleoutai.ml")  # ZeRO/DDP/TP, int8 weights, QSGD
FORBIDDEN_MODULES = UNIMPORTABLE + ("torch.distributed", "mpi4py", "ray.util.collective")
FORBIDDEN_NAMES = ("zero_step", "train_zero", "zero_full_params", "quantize_int8", "naive_quantize_int8",
                   "qsgd_quantize")
ASK = ("the lab asks for the int8 weights every rank receives (codes times their block's scale, ZeRO++ qwZ); "
       "a full-precision all-gather like the course's ZeRO does not quantize them")


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, row in enumerate(ZERO):
        _add(p, rng, f"z{i}", *row)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))  # after the fixed cases: their inputs stay put
    for i in range(RANDOM):
        _add(p, prop, f"rz{i}", int(prop.integers(1, 8)), int(prop.integers(1, 120)), int(prop.integers(1, 4)),
             str(prop.choice(["float32", "float64"])), "sim", int(prop.integers(1, 20)),
             str(prop.choice(["plain", "mixed"])), "random case, ")
    return p


def _add(p: Plan, rng: np.random.Generator, cid: str, K: int, psi: int, steps: int, dt: str, backend: str,
         qblock: int, data: str, tag: str = "") -> None:
    more = ", more ranks than parameters" if K > psi else ", uneven shards" if psi % K else ""
    more += {"mixed": ", parameters from 1e-3 to 10", "zeros": ", blocks of zeros",
             "tiny": ", gradients of size 1e-07"}.get(data, "")
    where = "simulator" if backend == "sim" else "2 real processes"
    case = Case(id=cid, fn="grader_qwz_adam", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8,
                label=f"{tag}K={K}, Psi={psi}, qblock={qblock}, {steps} steps, {dt}{more}, {where}",
                data={"psi": psi, "steps": steps, "dtype": dt, "qblock": qblock, "record_messages": True})
    p0 = rng.normal(0.0, 1.0, size=psi)
    if data == "mixed":
        p0 *= 10.0 ** rng.uniform(-3, 1, size=psi)
    grads = [(1e-7 if data == "tiny" else 1.0) * rng.standard_normal((steps, psi)) for _ in range(K)]
    if data == "zeros":
        p0[:2 * qblock] = 0.0
        for g in grads:
            g[:, :2 * qblock] = 0.0
    p.add_in_order(case, [("p0", p0.astype(dt)), ("grads", [g.astype(dt) for g in grads]), ("=", LR),
                          ("=", qblock)])


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


def _blocks(res: CaseResult):
    """(start, stop, owner) of every quantization block: blocks of qblock inside each rank's shard."""
    K, psi, qb = res.case.world_size, res.case.data["psi"], res.case.data["qblock"]
    for r, b in enumerate(np.array_split(np.arange(psi), K)):
        for j in range(0, b.size, qb):
            yield int(b[0]) + j, int(b[0]) + min(j + qb, b.size), r


def _codes(p: np.ndarray, res: CaseResult) -> tuple[np.ndarray, np.ndarray]:
    """The grader's int8 codes (as floats, ties rounded to even) and the scale of each value's block."""
    codes, scale = np.zeros_like(p), np.zeros_like(p)
    for lo, hi, _ in _blocks(res):
        s = np.abs(p[lo:hi]).max() / 127
        scale[lo:hi] = s
        if s > 0:
            codes[lo:hi] = np.rint(p[lo:hi] / s)
    return codes, scale


def _values(res: CaseResult, r: int) -> tuple[np.ndarray, np.ndarray, float]:
    psi, K = res.case.data["psi"], res.case.world_size
    n = len(np.array_split(np.arange(psi), K)[r])
    got = res.value(r, "weights, master shard and state count", dtype=res.case.data["dtype"], shape=(psi + n + 1,))
    return got[:psi], got[psi:psi + n], float(got[-1])


def _master(res: CaseResult) -> None:
    c, ref = res.case, _adam_steps(res)[-1]
    rtol, scale = TOL[c.data["dtype"]]
    for r, b in enumerate(np.array_split(np.arange(c.data["psi"]), c.world_size)):
        close(_values(res, r)[1], ref[b], rtol, scale * (1 + float(np.abs(ref).max())),
              f"rank {r}'s master shard after {c.data['steps']} Adam steps")


def master(res: CaseResult):
    _master(res)
    return 1.0, ""


def weights(res: CaseResult):
    c, ref = res.case, _adam_steps(res)[-1]
    codes, scale = _codes(ref, res)
    tol = GRID[c.data["dtype"]]
    rtol, atol = TOL[c.data["dtype"]]
    u = np.divide(ref, scale, out=np.zeros_like(ref), where=scale > 0)
    tie = np.abs(np.abs(u - np.floor(u)) - 0.5) < tol
    other = np.where(u - np.floor(u) < 0.5, np.floor(u) + 1, np.floor(u))  # the other neighbour of a tie
    for r in range(c.world_size):
        w = _values(res, r)[0].astype(np.float64)
        if not np.all(np.isfinite(w)):
            raise Fail(f"rank {r}'s weights hold NaN or inf in {int((~np.isfinite(w)).sum())} entries: a block of "
                       f"zeros has scale 0 and codes 0; do not divide by its scale")
        err = np.abs(w - codes * scale)
        ok = (err <= tol * scale) | (tie & (np.abs(w - other * scale) <= tol * scale))
        if ok.all():
            continue
        if np.all(np.abs(w - ref) <= atol * (1 + np.abs(ref).max()) + rtol * np.abs(ref)):
            raise Fail(f"rank {r}'s weights are the exact parameters: {ASK}")
        half = np.divide(np.abs(w - ref), scale / 2, out=np.full_like(w, np.inf), where=scale > 0)
        half = np.where((scale == 0) & (w == 0), 0.0, half)
        raise Fail(f"rank {r}'s weights differ from the int8 quantization of the parameters in {int((~ok).sum())} "
                   f"of {w.size} entries (error up to {float(half.max()):.3g} times the bound s_j/2 of the block): "
                   f"quantize each shard in blocks of qblock values, scale max|block|/127, codes rounded to the "
                   f"nearest integer, and dequantize with the scale of the block")
    return 1.0, ""


def memory(res: CaseResult):
    K, psi = res.case.world_size, res.case.data["psi"]
    graded_after(lambda: _master(res), "the master shard")
    hi, lo = 3 * math.ceil(psi / K), 3 * (psi // K)
    for r in range(K):
        held = _values(res, r)[2]
        if held > hi:
            raise Fail(f"rank {r}'s state holds {held:g} floating-point values, {held / max(hi, 1):.1f}x what "
                       f"ZeRO++ keeps: the master shard, m and v of its own block only, at most 3*ceil(Psi/K) = {hi} "
                       f"(the full weights are rebuilt by the all-gather every step)")
        if held < lo:
            raise Fail(f"rank {r}'s state holds {held:g} floating-point values, fewer than the 3*floor(Psi/K) = {lo} "
                       f"that an exact master shard, m and v need: keep them in the state dict as arrays")
    return 1.0, ""


def int8_wire(res: CaseResult):
    """After each step s the owner of a shard must itself send that shard's codes as an int8 array (the
    grader's codes from its own Adam, up to one level at a tie): a packed buffer or a ring that forwards
    other shards too is fine, a float all-gather or int16 codes are not."""
    c, K, psi = res.case, res.case.world_size, res.case.data["psi"]
    graded_after(lambda: _master(res), "the master shard")
    sent: list[list[np.ndarray]] = [[] for _ in range(K)]
    for src, _dst, payload in res.messages:
        x = np.asarray(payload)
        if 0 <= int(src) < K and x.dtype == np.int8 and 0 < x.size and len(sent[int(src)]) < 64 * K * c.data["steps"]:
            sent[int(src)].append(x.astype(np.float64).ravel())
    for s, p in enumerate(_adam_steps(res)):
        codes, _ = _codes(p, res)
        for r, b in enumerate(np.array_split(np.arange(psi), K)):
            if b.size and not any(_carries(x, codes[b]) for x in sent[r]):
                raise Fail(f"after step {s + 1}, rank {r} never sent the int8 codes of its shard "
                           f"({int(b[0])}..{int(b[-1])}) as an int8 array: {ASK}")
    return 1.0, ""


def _carries(x: np.ndarray, want: np.ndarray) -> bool:
    """Whether ``want`` occurs in ``x`` as a contiguous run, each code within one level (a tie)."""
    n = want.size
    if x.size < n:
        return False
    windows = np.lib.stride_tricks.sliding_window_view(x, n)
    return bool(np.any(np.all(np.abs(windows - want) <= 1, axis=1)))


def bytes_sent(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _master(res), "the master shard")
    item, n = np.dtype(c.data["dtype"]).itemsize, math.ceil(c.data["psi"] / K)
    per_step = (K - 1) * (n * item + n + math.ceil(n / c.data["qblock"]) * item + 3 * envelope_bytes(1))
    bound = c.data["steps"] * per_step
    for r in range(K):
        got = res.stats(r)["bytes_sent"]
        if got > bound:
            raise Fail(f"rank {r} sent {got} bytes, {got / bound:.1f}x the bound of {bound} (per step a "
                       f"reduce-scatter of the gradients, an all-gather of 1-byte codes and of one scale per "
                       f"block, {3 * (K - 1)} headers); {ASK}")
    return 1.0, ""


def own_code(res: CaseResult):
    graded_after(lambda: _master(res), "the master shard")
    bad = forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"write the quantization and ZeRO++ yourself (scaleoutai.collectives and scaleoutai.nn are "
                   f"fine); found {', '.join(bad[:4])}")
    return 1.0, ""


def _is(backend: str = "sim", multi: bool = False):
    return lambda c: c.backend == backend and (c.world_size > 1 or not multi)


TESTS = [
    Test("master_sim", "every master shard equals Adam (K = 1-8, Psi < K, float32 and float64)", select=_is(),
         check=master),
    Test("master_process", "every master shard equals Adam on 2 real processes", select=_is("process"),
         check=master),
    Test("weights_sim", "every rank's weights are the int8 block quantization of Adam's parameters (zero blocks, "
         "mixed sizes, qblock not dividing a shard)", select=_is(), check=weights),
    Test("weights_process", "the int8 weights on 2 real processes", select=_is("process"), check=weights),
    Test("memory", "the state holds the master shard, m and v of this rank's block only", select=_is(multi=True),
         check=memory),
    Test("int8_wire", "after every step each owner sends its shard's codes as int8 (recorded messages)",
         select=_is(multi=True), check=int8_wire),
    Test("bytes", "at most a reduce-scatter plus an all-gather of int8 codes and block scales per step",
         select=_is(multi=True), check=bytes_sent),
    Test("own_code", "the quantization and ZeRO++ are your own (no scaleoutai.parallel/serving/ml)",
         select=_is(multi=True), check=own_code),
]
