"""Lab 33: online EASY backfill over CPUs and GPUs, jobs killed at their limit, driven by a controller over
K login nodes. The grader recomputes every schedule with its own simulator (written here from scratch: it
re-derives the running set, the free CPUs and GPUs and the head's reservation at every event), checks the
legality of the student's start times itself, and reads the controller's protocol from its own trace."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, envelope_bytes, graded_after

UNIMPORTABLE = ("scaleoutai.infra",)  # the chapter's FIFO / EASY / conservative simulators
ASKS = ("the lab asks for EASY over two resources (the head's shadow time and extra CPUs AND GPUs), with a job "
        "ending at s + min(runtime, limit): the chapter's one-resource EASY, whose jobs end at their runtime, "
        "is not it")


def shadow(t, c, g, lim, start, end, head, C, G):
    """(S, extra CPUs, extra GPUs) for `head` at time t given the jobs running then; S = t if it fits now."""
    run = np.flatnonzero((start <= t) & (end > t))
    have = np.array([C - c[run].sum(), G - g[run].sum()])
    need = np.array([c[head], g[head]])
    if (need <= have).all():
        return t, *(have - need)
    ends = start[run] + lim[run]
    for when in np.unique(ends):
        gone = run[ends <= when]
        have = np.array([C - c[run].sum() + c[gone].sum(), G - g[run].sum() + g[gone].sum()])
        if (need <= have).all():
            return when, *(have - need)
    return math.inf, 0, 0


def reference(C, G, sub, c, g, lim, run):
    """The grader's EASY over two resources: every quantity re-derived from the start times so far."""
    n = len(sub)
    start, end = np.full(n, np.inf), np.full(n, np.inf)
    t = -math.inf
    while True:
        later = np.concatenate([sub[sub > t], end[np.isfinite(end) & (end > t)]])
        if not later.size:
            return start
        t = later.min()
        waiting = [j for j in range(n) if sub[j] <= t and start[j] == np.inf]  # rows are in (submit, id) order
        while waiting:
            j = waiting[0]
            live = (start <= t) & (end > t)
            if c[j] > C - c[live].sum() or g[j] > G - g[live].sum():
                break
            start[j], end[j] = t, t + min(run[j], lim[j])
            waiting.pop(0)
        if not waiting:
            continue
        S, xc, xg = shadow(t, c, g, lim, start, end, waiting[0], C, G)
        for j in waiting[1:]:
            live = (start <= t) & (end > t)
            if c[j] > C - c[live].sum() or g[j] > G - g[live].sum():
                continue
            if t + lim[j] <= S:
                start[j], end[j] = t, t + min(run[j], lim[j])
            elif c[j] <= xc and g[j] <= xg:
                xc, xg = xc - c[j], xg - g[j]
                start[j], end[j] = t, t + min(run[j], lim[j])


def violations(C, G, sub, c, g, lim, run, start) -> list[str]:
    """Every broken rule of a schedule, as sentences (the grader's own check of the student's starts)."""
    if not np.isfinite(start).all():
        return [f"{int((~np.isfinite(start)).sum())} of {len(start)} jobs never started"]
    out, end = [], start + np.minimum(run, lim)
    if (start < sub).any():
        out.append(f"{int((start < sub).sum())} jobs started before they were submitted")
    for name, use, cap in (("CPUs", c, C), ("GPUs", g, G)):
        worst = max((use[(start <= t) & (end > t)].sum() for t in start), default=0)
        if worst > cap:
            out.append(f"{worst} {name} in use at once on a machine of {cap}")
    late = 0
    for t in np.unique(np.concatenate([sub, start, end])):
        waiting = np.flatnonzero((sub <= t) & (start > t))
        if waiting.size:
            S = shadow(t, c, g, lim, start, end, waiting[0], C, G)[0]
            late += bool(start[waiting[0]] > S)
    if late:
        out.append(f"at {late} events the queue's head later started after its reservation (the shadow time "
                   f"by the running jobs' limits, CPUs and GPUs both)")
    return out


def trace(rng, n, C, G, times, gpu_share, kill_share, slack=4.0):
    """Rows (submit, c, g, l) in submission order and the true runtimes; times 'int' (ties everywhere) or 'float'."""
    if times == "burst":  # jobs arrive in bursts with a few limits: many limit ends tie at the shadow time
        sub = np.sort(rng.integers(0, n // 6 + 1, n) * 6)
        lim = rng.choice([4, 8, 12], n)
        run = np.maximum(1, lim - rng.integers(0, 3, n))
    elif times == "int":
        sub = np.sort(rng.integers(0, 3 * n + 1, n))
        run = rng.integers(1, 13, n)
        lim = run + rng.integers(0, 9, n)
        short = rng.random(n) < kill_share
        lim[short] = np.maximum(1, run[short] - rng.integers(1, 6, short.sum()))
    else:
        sub = np.sort(rng.uniform(0, 20 * n, n))
        run = rng.uniform(5, 200, n)
        lim = run * rng.uniform(1, slack, n)
        short = rng.random(n) < kill_share
        lim[short] = run[short] * rng.uniform(0.2, 0.95, short.sum())
    c = rng.integers(1, max(1, C) + 1, n) if C < 4 else np.minimum(C, rng.geometric(3.0 / C, n))
    g = np.where(rng.random(n) < gpu_share, rng.integers(0, G + 1, n), 0)
    dtype = np.float64 if times == "float" else np.int64
    return np.stack([sub, c, g, lim], axis=1).astype(dtype), run.astype(dtype)


# (label, n, C, G, times, gpu share, kill share): "one" one resource, limits >= runtimes, float times
CALLS = {
    "one": [(0, 8, 2, "float", 0, 0), (1, 4, 1, "float", 0, 0), (40, 1, 0, "float", 0, 0), (60, 16, 2, "float", 0, 0),
            (100, 64, 4, "float", 0, 0)],
    "two": [(50, 8, 4, "int", 0.7, 0), (80, 16, 8, "int", 0.8, 0), (60, 3, 2, "int", 0.9, 0),
            (120, 32, 8, "int", 0.6, 0), (70, 16, 4, "float", 0.7, 0), (150, 64, 8, "float", 0.5, 0),
            (40, 4, 1, "int", 1.0, 0), (1, 4, 2, "int", 1.0, 0), (60, 8, 4, "burst", 0.7, 0),
            (90, 16, 4, "burst", 0.8, 0)],
    "kills": [(60, 8, 1, "float", 0, 0.3), (100, 32, 1, "float", 0, 0.2), (80, 4, 1, "float", 0, 0.5)],
}
NOTE = {"one": "one resource (no GPU asked), limits >= runtimes", "two": "CPUs and GPUs",
        "kills": "one resource, some jobs run past their limit (killed there) and most end early"}
# (K, n, C, G, times, gpu share, kill share, backend)
CLUSTER = [(1, 30, 8, 4, "burst", 0.7, 0.2, "sim"), (2, 40, 16, 4, "float", 0.6, 0.2, "sim"),
           (3, 50, 8, 2, "int", 0.8, 0.2, "sim"), (5, 60, 32, 8, "float", 0.6, 0.15, "sim"),
           (8, 5, 4, 2, "int", 0.8, 0.3, "sim"), (4, 0, 4, 2, "int", 0.5, 0.0, "sim"),
           (2, 30, 8, 4, "int", 0.7, 0.2, "process")]
PROPERTY = 4  # seeded random: 2 replays, 2 clusters, every parameter drawn


def _call(p: Plan, cid: str, kind: str, spec: tuple, rng, note: str = "") -> None:
    n, C, G, times, gshare, kshare = spec
    jobs, run = trace(rng, n, C, G, times, gshare, kshare)
    label = f"{n} jobs, {C} CPUs, {G} GPUs, {times} times, {NOTE[kind]}{note}"
    case = Case(id=cid, fn="replay", label=label, mode="call", timeout=10, data={"kind": kind, "C": C, "G": G})
    p.add_in_order(case, [("=", C), ("=", G), ("jobs", jobs), ("runtimes", run)])


def _cluster(p: Plan, cid: str, spec: tuple, rng, note: str = "") -> None:
    K, n, C, G, times, gshare, kshare, backend = spec
    jobs, run = trace(rng, n, C, G, times, gshare, kshare)
    owners = rng.integers(0, K, n) if n else np.zeros(0, int)
    if K > 2 and n > 2 * K:
        owners[owners == K - 1] = 0  # one login node without jobs, one with twice its share
    tables = [np.column_stack([np.flatnonzero(owners == r), jobs[owners == r]]).astype(jobs.dtype) for r in range(K)]
    label = (f"K={K}, {n} jobs ({min(map(len, tables))}..{max(map(len, tables))} per rank), {C} CPUs, {G} GPUs, "
             f"{times} times, some killed, {'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="easy_cluster", label=label, world_size=K, backend=backend,
                timeout=30 if backend == "process" else 15,
                data={"kind": "cluster", "C": C, "G": G, "jobs": jobs, "run": run, "owners": owners,
                      "record_messages": backend == "sim"})
    p.add_in_order(case, [("=", C), ("=", G), ("jobs", tables),
                          ("runtimes", [run[owners == r] for r in range(K)])])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for kind, specs in CALLS.items():
        for i, spec in enumerate(specs):
            _call(p, f"{kind}{i}", kind, spec, rng)
    for i, spec in enumerate(CLUSTER):
        _cluster(p, f"k{i}", spec, rng)
    for i in range(PROPERTY):
        n, C, G = int(rng.integers(2, 90)), int(rng.integers(1, 40)), int(rng.integers(1, 9))
        times = ("burst", "float", "int", "float")[i]
        if i < 2:
            _call(p, f"p{i}", "two", (n, C, G, times, 0.7, 0), rng, ", seeded random case")
        else:
            _cluster(p, f"p{i}", (int(rng.integers(2, 7)), n, C, G, times, 0.7, 0.2, "sim"), rng,
                     ", seeded random case")
    return p


def _inputs(res: CaseResult):
    d = res.case.data
    if d["kind"] == "cluster":
        jobs, run = d["jobs"], d["run"]
    else:
        jobs, run = res.shared("jobs"), res.shared("runtimes")
    jobs, run = jobs.astype(np.float64).reshape(-1, 4), run.astype(np.float64)
    return d["C"], d["G"], jobs[:, 0], jobs[:, 1], jobs[:, 2], jobs[:, 3], run


def _starts(res: CaseResult) -> np.ndarray:
    c = res.case
    if c.data["kind"] != "cluster":
        return res.value(0, "start times", dtype=np.float64, shape=(len(res.shared("jobs")),))
    owners, out = c.data["owners"], np.full(len(c.data["owners"]), np.nan)
    for r in range(c.world_size):
        out[owners == r] = res.value(r, f"rank {r}'s start times", dtype=np.float64, shape=(int((owners == r).sum()),))
    return out


def _same(res: CaseResult) -> None:
    C, G, sub, c, g, lim, run = _inputs(res)
    got, want = _starts(res), reference(C, G, sub, c, g, lim, run)
    bad = got != want
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        how = "later" if got[j] > want[j] else "earlier" if got[j] < want[j] else "never"
        hint = ""
        if res.case.data["kind"] == "kills":
            hint = " (a job ends at s + min(runtime, limit): one that reaches its limit is killed there)"
        elif res.case.data["kind"] in ("two", "cluster"):
            hint = f" ({ASKS}; at the shadow time every job whose limit ends by then counts as released)"
        raise Fail(f"{int(bad.sum())} of {bad.size} start times differ from EASY's; the first, job {j} in submission "
                   f"order, starts {how} than EASY starts it{hint}")


def starts(res: CaseResult):
    _same(res)
    return 1.0, ""


def legal(res: CaseResult):
    C, G, sub, c, g, lim, run = _inputs(res)
    got = _starts(res)
    bad = violations(C, G, sub, c, g, lim, run, np.where(np.isnan(got), np.inf, got))
    if bad:
        raise Fail("; ".join(bad))
    return 1.0, ""


def protocol(res: CaseResult):
    """From the grader's trace and recorded messages: the table, one start and one end per job, one stop."""
    graded_after(lambda: _same(res), "every start time")
    d, K = res.case.data, res.case.world_size
    C, G, sub, c, g, lim, run = _inputs(res)
    start = _starts(res)
    for r in range(1, K):
        mine = np.flatnonzero(d["owners"] == r)
        up = [a for s, t, a in res.messages if s == r and t == 0]
        down = [a for s, t, a in res.messages if s == 0 and t == r]
        if any(s == r and t != 0 for s, t, _ in res.messages):
            raise Fail(f"rank {r} sent to another login node: they talk to the controller (rank 0) only")
        if not up or up[0].size != 5 * len(mine) or up[0].nbytes != 40 * len(mine):
            raise Fail(f"rank {r}'s first message is not its job table of {len(mine)} rows of 5 numbers (id, submit, "
                       f"c, g, l): the controller is given no runtime, only limits")
        if len(up) != len(mine) + 1 or len(down) != len(mine) + 1:
            raise Fail(f"rank {r} sent {len(up)} and received {len(down)} messages for its {len(mine)} jobs; the lab's "
                       f"protocol is the table, then one start [id, t] and one end per job, then one stop")
        for a in down[:-1]:
            if a.size != 2 or a.nbytes != 16:
                raise Fail(f"the controller sent rank {r} a start of {a.size} numbers; a start is [id, t] in float64")
        seen = {int(a[0]): a[1] for a in down[:-1]}
        if sorted(seen) != mine.tolist() or any(seen[j] != start[j] for j in mine):
            raise Fail(f"the controller's starts to rank {r} are not one [id, t] per job of rank {r} with its start")
        ends = [a.reshape(-1)[0] if a.size == 1 and a.nbytes == 8 else np.nan for a in up[1:]]
        order = [int(a[0]) for a in down[:-1]]
        want = [start[j] + min(run[j], lim[j]) for j in order]
        if ends != want:
            raise Fail(f"rank {r}'s replies are not one float64 [t + min(runtime, limit)] per start, in start order "
                       f"(a job past its limit is killed at s + l)")
        if down[-1].size != 2 or down[-1][0] >= 0:
            raise Fail(f"the controller's last message to rank {r} is not the stop [-1, -1]")
    for r in range(1, K):
        sent = res.stats(r)["bytes_sent"]
        n_r = int((d["owners"] == r).sum())
        if sent != 40 * n_r + envelope_bytes(2) + n_r * (8 + envelope_bytes(1)):
            raise Fail(f"rank {r} sent {sent} B by the grader's count, not its table and one 8-byte end per job")
    return 1.0, ""


SIM = lambda c: c.data["kind"] == "cluster" and c.backend == "sim" and c.world_size > 1  # noqa: E731
TESTS = [
    Test("one_resource", "replay: EASY start times with no GPU asked and limits >= runtimes (empty, one-job traces)",
         select=lambda c: c.data["kind"] == "one", check=starts),
    Test("two_resources", "replay: EASY start times over CPUs and GPUs, integer times (ties) and float times",
         select=lambda c: c.data["kind"] == "two", check=starts),
    Test("kills", "replay: start times when jobs end early or are killed at their limit",
         select=lambda c: c.data["kind"] == "kills", check=starts),
    Test("legal", "every schedule is legal: no start before submission, CPUs and GPUs within capacity, the head "
         "never later than its reservation (the grader's own check)", select=lambda c: True, check=legal),
    Test("cluster", "easy_cluster: every rank's start times for K = 1, 2, 3, 5, 8 (ranks without jobs), 2 processes",
         select=lambda c: c.data["kind"] == "cluster", check=starts),
    Test("protocol", "the controller's messages: a table without runtimes, one start and one end per job, one stop "
         "(the grader's trace)", select=SIM, check=protocol),
]
