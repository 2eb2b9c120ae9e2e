"""Lab 4: ring all-reduce from send and recv."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)

# (K, n, dtype) on the simulator: K = 1, uneven n, n < K, K > n twice over (K=7, n=2: padding to a multiple of K
# must wrap round x more than once), int64 values beyond 2**53 (exact only in an integer accumulator), and one
# property case whose K, n and dtype come from the plan's seeded rng. Exactly one K = 1 case and ten in all:
# tests/test_grading_security.py counts on both.
SIM = [(1, 7, "float64"), (2, 10, "float32"), (3, 11, "int64"), (3, 2, "float32"), (5, 13, "float32"),
       (5, 101, "float64"), (7, 2, "float64"), (8, 37, "int64 beyond 2**53"), (8, 5, "float64"), "random"]
PROCESS = [(2, 11, "float64")]
DTYPES = ("float32", "float64", "int64")
UNIMPORTABLE = ("scaleoutai.collectives", "scaleoutai.parallel", "mpi4py", "ray.util.collective")  # stubbed in the sandbox
FORBIDDEN_MODULES = ("torch.distributed", "scaleoutai.collectives", "mpi4py", "ray.util.collective",
                     "scaleoutai.cluster.")
FORBIDDEN_NAMES = ("all_reduce", "allreduce", "reduce_scatter", "all_gather", "_send", "_recv", "_w",
                   "isend", "irecv")


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(SIM + PROCESS):
        backend = "process" if i >= len(SIM) else "sim"
        prefix = ""
        if spec == "random":
            K = int(rng.integers(2, 9))
            spec, prefix = (K, int(rng.integers(1, 4 * K + 1)), str(rng.choice(DTYPES))), "random case: "
        K, n, what = spec
        dtype = what.split()[0]
        if what.endswith("2**53"):  # |sum| < 2**62: exact in int64, not in a float64 accumulator
            xs = [rng.integers(-2**59, 2**59, size=n, dtype=np.int64) for _ in range(K)]
        else:
            xs = [(rng.standard_normal(n) * 100).astype(dtype) for _ in range(K)]
        label = f"{prefix}K={K}, n={n}, {what}, {'simulator' if backend == 'sim' else '2 real processes'}"
        case = Case(id=f"c{i:02d}", fn="ring_allreduce", label=label, world_size=K, backend=backend,
                    timeout=20 if backend == "process" else 8, data={"n": n, "dtype": dtype})
        p.add(case, per_rank={"x": xs})
    return p


def _correct(res: CaseResult, xs: list[np.ndarray]) -> None:
    c = res.case
    dt = np.dtype(c.data["dtype"])
    if dt.kind == "i":  # integer sums are exact: compare in int64, never through float64
        ref = np.sum(np.array(xs, dtype=np.int64), axis=0)
        for r in range(c.world_size):
            got = res.value(r, "result", dtype=dt, shape=(c.data["n"],))
            bad = int(np.count_nonzero(got.astype(np.int64) != ref))
            err = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max(initial=0))
            if bad and err <= 1e-12 * float(np.abs(ref).max()):  # off in the last bits only: rounded somewhere
                raise Fail(f"rank {r}'s sum is wrong in {bad} of {ref.size} entries by a rounding error: integer sums "
                           f"must be exact (add in the input's integer dtype, not through float64)")
            if bad:
                raise Fail(f"rank {r}'s sum is wrong in {bad} of {ref.size} entries (largest error {err:.3g}; "
                           f"integer sums must be exact)")
        return
    ref = np.sum(np.array(xs, dtype=np.float64), axis=0)
    tol = 4 * c.world_size * np.finfo(dt).eps * float(np.abs(xs).sum(axis=0).max(initial=1))
    for r in range(c.world_size):
        got = res.value(r, "result", dtype=dt, shape=(c.data["n"],))
        close(got, ref, 0.0, tol, f"rank {r}'s sum")


def correct(res: CaseResult):
    _correct(res, res.per_rank("x"))
    return 1.0, ""


def bandwidth(res: CaseResult):
    c, K, n = res.case, res.case.world_size, res.case.data["n"]
    graded_after(lambda: _correct(res, res.per_rank("x")), "the sum")
    item = np.dtype(c.data["dtype"]).itemsize
    bound = 2 * (K - 1) * (math.ceil(n / K) * item + envelope_bytes(1))  # one header per message
    for r in range(K):
        s = res.stats(r)
        if s["messages_sent"] > 2 * (K - 1):
            raise Fail(f"rank {r} sent {s['messages_sent']} messages; a ring sends 2(K-1) = {2 * (K - 1)}")
        if s["bytes_sent"] > bound:
            raise Fail(f"rank {r} sent {s['bytes_sent'] / max(bound, 1):.1f}x the bandwidth-optimal bytes "
                       f"({s['bytes_sent']} B; a ring sends at most 2(K-1) messages of ceil(n/K)*itemsize B plus a "
                       f"{envelope_bytes(1)} B header = {bound} B)")
    return 1.0, ""


def send_recv_only(res: CaseResult):
    """Graded from the grader's trace: every message goes to the right neighbour and carries one chunk."""
    K, n = res.case.world_size, res.case.data["n"]
    graded_after(lambda: _correct(res, res.per_rank("x")), "the sum")
    bad = forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"use only comm.send and comm.recv; found {', '.join(bad[:4])}")
    item = np.dtype(res.case.data["dtype"]).itemsize
    sizes = {(n // K) * item + envelope_bytes(1), math.ceil(n / K) * item + envelope_bytes(1)}
    sends = [e for e in res.trace if e.kind == "send"]
    for r in range(K):
        mine = [e for e in sends if e.rank == r]
        if len(mine) != 2 * (K - 1):
            raise Fail(f"rank {r} sent {len(mine)} messages; a ring sends exactly 2(K-1) = {2 * (K - 1)}")
        wrong = [e for e in mine if e.peer != (r + 1) % K]
        if wrong:
            raise Fail(f"rank {r} sent to rank {wrong[0].peer}; in a ring every message goes to the right "
                       f"neighbour (r+1) mod K = {(r + 1) % K}")
        odd = [e.nbytes for e in mine if e.nbytes not in sizes]
        if odd:
            raise Fail(f"rank {r} sent a message of {odd[0]} B; each ring step carries one of the K chunks "
                       f"({sorted(sizes)} B here with the {envelope_bytes(1)} B header), not the whole vector")
    return 1.0, ""


TESTS = [
    Test("correct_sim", "ring_allreduce is correct on the simulator (K = 1-8, uneven n, n < K, exact int64 sums)",
         select=lambda c: c.backend == "sim", check=correct),
    Test("correct_process", "ring_allreduce is correct on 2 real processes",
         select=lambda c: c.backend == "process", check=correct),
    Test("bandwidth", "bandwidth-optimal: 2(K-1) messages and at most 2(K-1)*ceil(n/K) values per rank",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=bandwidth),
    Test("send_recv_only", "uses only send and recv, round the ring, one chunk per message (the grader's trace)",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=send_recv_only),
]
