"""Lab 4: recursive halving-doubling all-reduce (Rabenseifner) for any K, from send and recv."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)

FN = "halving_doubling_allreduce"
# (K, n, dtype) on the simulator: K = 1, powers of two and not (3, 5, 6, 7: the fold), uneven n, K > n (empty
# blocks), int64 values beyond 2**53 (exact only in an integer accumulator), and one property case whose K, n and
# dtype come from the plan's seeded rng. Exactly one K = 1 case and ten in all: tests/test_grading_security.py
# counts on both.
SIM = [(1, 7, "float64"), (2, 9, "float32"), (3, 11, "int64"), (5, 203, "float32"), (6, 101, "float64"),
       (6, 3, "float64"), (7, 2, "float32"), (8, 37, "int64 beyond 2**53"), (8, 5, "float64"), "random"]
PROCESS = [(2, 11, "float64")]
DTYPES = ("float32", "float64", "int64")
UNIMPORTABLE = ("scaleoutai.collectives", "scaleoutai.parallel", "mpi4py", "ray.util.collective")  # stubbed in the sandbox
FORBIDDEN_MODULES = ("torch.distributed", "scaleoutai.collectives", "scaleoutai.parallel", "mpi4py",
                     "ray.util.collective", "scaleoutai.cluster.")
FORBIDDEN_NAMES = ("all_reduce", "allreduce", "reduce_scatter", "all_gather", "_send", "_recv", "_w",
                   "isend", "irecv")
ALPHA, BETA = 1e-5, 1e-9  # the grader's simulated network (cluster.Network's defaults)
BEYOND = ("a ring takes 2(K-1) steps and recursive doubling sends the whole vector in each; the lab asks for "
          "recursive halving-doubling")
FOLD = "; in the fold, even rank r < 2R hands its vector to r + 1 and sits out"


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, spec in enumerate(SIM + PROCESS):
        backend = "process" if i >= len(SIM) else "sim"
        prefix = ""
        if spec == "random":
            K = int(rng.integers(3, 9))
            spec, prefix = (K, int(rng.integers(0, 6 * K + 1)), str(rng.choice(DTYPES))), "random case: "
        K, n, what = spec
        dtype = what.split()[0]
        if what.endswith("2**53"):  # |sum| < 2**62: exact in int64, not in a float64 accumulator
            xs = [rng.integers(-2**59, 2**59, size=n, dtype=np.int64) for _ in range(K)]
        else:
            xs = [(rng.standard_normal(n) * 100).astype(dtype) for _ in range(K)]
        label = f"{prefix}K={K}, n={n}, {what}, {'simulator' if backend == 'sim' else '2 real processes'}"
        case = Case(id=f"c{i:02d}", fn=FN, label=label, world_size=K, backend=backend,
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


def _layout(K: int) -> tuple[int, int, int]:
    P = 1 << (K.bit_length() - 1)
    return P, K - P, P.bit_length() - 1


def _real(v: int, R: int) -> int:
    return 2 * v + 1 if v < R else v + R


def schedules(K: int, n: int, r: int) -> list[list[tuple[int, int]]]:
    """The (peer, elements) of each send of rank r, in order: distances P/2 .. 1 while halving, or 1 .. P/2."""
    P, R, q = _layout(K)
    if r < 2 * R and r % 2 == 0:
        return [[(r + 1, n)]]
    v = r // 2 if r < 2 * R else r - R
    edges = np.concatenate([[0], np.cumsum([len(b) for b in np.array_split(np.empty(n), P)])])
    out = []
    for dists in ([P >> k for k in range(1, q + 1)], [1 << k for k in range(q)]):
        lo, hi, halving, kept = 0, P, [], []
        for d in dists:
            mid = (lo + hi) // 2
            give, (lo, hi) = ((lo, mid), (mid, hi)) if v & d else ((mid, hi), (lo, mid))
            halving.append((_real(v ^ d, R), int(edges[give[1]] - edges[give[0]])))
            kept.append((_real(v ^ d, R), int(edges[hi] - edges[lo]), d))
        doubling = [(peer, size) for peer, size, _ in reversed(kept)]
        out.append(halving + doubling + ([(r - 1, n)] if r < 2 * R else []))
    return out


def bandwidth(res: CaseResult):
    """From the grader's counts: at most 2 log2 P messages (+1 when folding) and the halving-doubling bytes."""
    c, K, n = res.case, res.case.world_size, res.case.data["n"]
    graded_after(lambda: _correct(res, res.per_rank("x")), "the sum")
    item, env = np.dtype(c.data["dtype"]).itemsize, envelope_bytes(1)
    P, R, q = _layout(K)
    for r in range(K):  # either rank of a fold pair may be the one that sits out: the schedule test says which
        s = res.stats(r)
        fold = r < 2 * R
        msgs = 2 * q + fold
        bound = msgs * env + item * (2 * (P - 1) * math.ceil(n / P) + fold * n)
        if s["messages_sent"] > msgs:
            raise Fail(f"rank {r} sent {s['messages_sent']} messages; recursive halving-doubling sends at most {msgs} "
                       f"here (2 log2 P = {2 * q} with P = {P}{', +1 to unfold' if fold else ''}); {BEYOND}")
        if s["bytes_sent"] > bound:
            raise Fail(f"rank {r} sent {s['bytes_sent'] / max(bound, 1):.2f}x the halving-doubling bytes "
                       f"({s['bytes_sent']} B; halving sends 1/2, 1/4, ..., 1/P of the vector and doubling the same "
                       f"back, at most {bound} B here with a {env} B header per message); {BEYOND}")
    return 1.0, ""


def latency(res: CaseResult):
    """From the grader's simulated clock: 2 log2 P steps of alpha (+2 for the fold), not 2(K-1)."""
    c, K, n = res.case, res.case.world_size, res.case.data["n"]
    graded_after(lambda: _correct(res, res.per_rank("x")), "the sum")
    P, R, q = _layout(K)
    steps = 2 * q + 2 * (R > 0)
    t = res.meta.get("sim_time")
    if not isinstance(t, (int, float)) or not math.isfinite(t):
        raise Fail("the simulated time did not come back")
    allowed = (steps + 0.5) * ALPHA + steps * (n * np.dtype(c.data["dtype"]).itemsize + envelope_bytes(1)) * BETA
    if t > allowed:
        raise Fail(f"the all-reduce took {t / ALPHA:.1f} latencies (alpha = {ALPHA * 1e6:g} us) of simulated time; "
                   f"halving-doubling needs {steps} steps here (2 log2 P = {2 * q}"
                   f"{' + fold + unfold' if R else ''}), each exchange a step in which both partners send; "
                   f"{BEYOND}")
    return 1.0, ""


def schedule(res: CaseResult):
    """Graded from the grader's trace: each rank's sends go to the partners the schedule names, in order,
    each carrying exactly the blocks it names (np.array_split of the vector into P blocks)."""
    K, n = res.case.world_size, res.case.data["n"]
    graded_after(lambda: _correct(res, res.per_rank("x")), "the sum")
    bad = forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"use only comm.send and comm.recv; found {', '.join(bad[:4])}")
    item, env = np.dtype(res.case.data["dtype"]).itemsize, envelope_bytes(1)
    sends = sorted((e for e in res.trace if e.kind == "send"), key=lambda e: e.start)
    for r in range(K):
        mine = [(e.peer, e.nbytes) for e in sends if e.rank == r]
        options = [[(peer, m * item + env) for peer, m in s] for s in schedules(K, n, r)]
        if mine in options:
            continue
        want = options[0]
        if len(mine) != len(want):
            raise Fail(f"rank {r} sent {len(mine)} messages; in recursive halving-doubling it sends {len(want)} here "
                       f"({'its vector to rank ' + str(r + 1) + ' in the fold' if len(want) == 1 else '2 log2 P'}"
                       f"{' + 1 to unfold' if len(want) % 2 and len(want) > 1 else ''}{FOLD if r < 2 * _layout(K)[1] else ''}); {BEYOND}")
        i = next(j for j in range(len(want)) if all(mine[j] != o[j] for o in options))
        if all(mine[i][0] != o[i][0] for o in options):
            raise Fail(f"rank {r}'s message {i + 1} went to rank {mine[i][0]}, not to the partner of the schedule "
                       f"({FOLD.lstrip('; ')}; then virtual rank v exchanges with v XOR 2^j); {BEYOND}")
        raise Fail(f"rank {r}'s message {i + 1} (to rank {mine[i][0]}) has {mine[i][1]} B; the schedule sends "
                   f"the half of the block range the rank gives away (blocks of np.array_split(x, P)), "
                   f"{' or '.join(str(o[i][1]) for o in options if o[i][0] == mine[i][0])} B here with the "
                   f"{env} B header")
    return 1.0, ""


TESTS = [
    Test("correct_sim", f"{FN} is correct on the simulator (K = 1-8, uneven n, n < K, exact int64 sums)",
         select=lambda c: c.backend == "sim", check=correct),
    Test("correct_process", f"{FN} is correct on 2 real processes",
         select=lambda c: c.backend == "process", check=correct),
    Test("bandwidth", "bandwidth: at most 2 log2 P messages (+1 when folding) and 2(P-1) ceil(n/P) values per rank",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=bandwidth),
    Test("latency", "latency: the simulated time is 2 log2 P steps (+2 to fold), not a ring's 2(K-1)",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=latency),
    Test("schedule", "uses only send and recv, in the halving-doubling schedule (partners and block sizes from the "
         "grader's trace)", select=lambda c: c.backend == "sim" and c.world_size > 1, check=schedule),
]
