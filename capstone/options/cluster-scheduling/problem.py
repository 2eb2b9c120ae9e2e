"""Cluster-scheduling option: a policy study replayed over a grid of seeded job traces (Chapter 33).

One *cell* of the grid is (offered load, scheduling policy, trace seed): generate the synthetic trace
``datasets.job_trace(jobs, capacity, load, seed)`` (Lublin-Feitelson style: rigid jobs, log-uniform
runtimes, over-estimated time limits, Poisson arrivals), replay it through the discrete-event simulator
of ``infra.scheduling`` (FIFO, EASY backfill, conservative backfill) or ``infra.sched_policies`` (gang:
time-sliced co-scheduling), and score the schedule with ``infra.sched_metrics.metrics`` (waits, bounded
slowdown, utilisation, fragmentation, Jain's fairness over users) and ``violations`` (its legality).

Distribution axis: cluster (a parameter sweep). The cells are independent simulations: rank r of K runs
cells r, r + K, r + 2K, ... (``my_cells``, cyclic so that every rank gets a share of every load and
policy), and the ranks send their metric rows to rank 0, which assembles the table. Each simulation is
deterministic (seeded trace, event loop with fixed tie-breaking), so the table equals one machine's
bit for bit.
"""
from __future__ import annotations

import os

METRICS = ("makespan", "mean_wait", "p95_wait", "max_wait", "mean_response", "mean_bsld",
           "utilisation", "fragmentation", "jain_users_bsld")
# one row per cell: where it sits in the grid, then its metrics, then how many invariants it broke
ROW_FIELDS = ("cell", "load", "seed", "policy", *METRICS, "violations")


def set_threads(threads: int) -> None:
    """One BLAS thread per process (before NumPy loads), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def policies(args) -> list[str]:
    return [p.strip() for p in args.policies.split(",") if p.strip()]


def loads(args) -> list[float]:
    return [float(x) for x in args.loads.split(",") if x.strip()]


def make_grid(args) -> list[tuple[float, str, int]]:
    """Every cell (load, policy, seed), in a fixed order: load, then policy, then seed varies fastest.
    The same list on every rank and at any K (it is only the arguments)."""
    from scaleoutai.infra.scheduling import POLICIES

    pols = policies(args)
    unknown = [p for p in pols if p not in POLICIES + ("gang",)]
    if unknown:
        raise SystemExit(f"unknown policies {unknown}: use some of {POLICIES + ('gang',)}")
    return [(ld, p, args.seed + s) for ld in loads(args) for p in pols for s in range(args.seeds)]


def my_cells(n: int, rank: int, size: int) -> range:
    """This rank's share of the n cells: cyclic (r, r + K, ...), so each rank gets every load and policy.
    (Blocks would give the last rank all the high-load cells, where conservative backfill is slowest.)"""
    return range(rank, n, size)


def run_cell(i: int, cell: tuple[float, str, int], args) -> list[float]:
    """One simulation: build the trace from its seed, replay it under the policy, score the schedule."""
    from scaleoutai.datasets import job_trace
    from scaleoutai.infra.sched_metrics import metrics, violations
    from scaleoutai.infra.scheduling import simulate

    load, policy, seed = cell
    trace = job_trace(args.jobs, capacity=args.capacity, load=load, seed=seed)
    kw = {"mpl": args.mpl} if policy == "gang" else {}
    sched = simulate(trace, args.capacity, policy, **kw)
    m = metrics(trace, sched, tau=args.tau)
    return [float(i), load, float(seed), float(policies(args).index(policy)),
            *(m[k] for k in METRICS), float(len(violations(trace, sched)))]


def run_cells(grid, idx, args) -> list[list[float]]:
    """The rows of the cells ``idx`` of the grid, in that order."""
    return [run_cell(i, grid[i], args) for i in idx]


def warm_up(args) -> None:
    """Load the modules and run one tiny simulation per policy before the timed region (Chapter 5)."""
    import argparse

    import scaleoutai.collectives  # noqa: F401

    small = argparse.Namespace(**{**vars(args), "jobs": 50})
    for p in policies(args):
        run_cell(0, (loads(args)[0], p, args.seed), small)


def rows_array(rows):
    """Rows as one (n, len(ROW_FIELDS)) float64 array sorted by cell index: what a rank sends to rank 0.
    Cell indices, seeds and policy ids are small integers, exact in float64."""
    import numpy as np

    arr = np.array(rows, dtype=np.float64).reshape(-1, len(ROW_FIELDS))
    return arr[np.argsort(arr[:, 0], kind="stable")] if len(arr) else arr


def compare(got, ref) -> tuple[bool, str]:
    """Exact comparison: the same cells with bit-equal metrics, and no cell that broke an invariant.

    Each cell is a deterministic computation from its arguments (seeded trace, event loop with fixed
    tie-breaking, the same NumPy reductions) and runs whole on one rank: no tolerance is needed."""
    import numpy as np

    if got.shape != ref.shape:
        return False, f"{len(got)} cells, the baseline has {len(ref)}"
    if not np.array_equal(got[:, :4], ref[:, :4]):
        return False, f"{int(np.sum(np.any(got[:, :4] != ref[:, :4], axis=1)))} cells differ in load, policy or seed"
    bad = int(np.sum(np.any(got != ref, axis=1)))
    illegal = int(np.sum(got[:, -1] > 0))
    detail = f"{bad} of {len(got)} cells differ from the baseline, {illegal} illegal schedules"
    return bad == 0 and illegal == 0, detail


def summary(arr, args) -> tuple[str, dict[str, float]]:
    """The table (load x policy, means over seeds) as text, and per-policy means over all cells to log."""
    import numpy as np

    col = {f: k for k, f in enumerate(ROW_FIELDS)}
    pols = policies(args)
    lines = [f"{'load':>5} {'policy':<13} {'mean wait h':>11} {'p95 wait h':>10} {'mean bsld':>10} "
             f"{'util':>6} {'frag':>6} {'jain':>6}"]
    logged: dict[str, float] = {}
    for ld in loads(args):
        for k, p in enumerate(pols):
            sel = arr[(arr[:, col["load"]] == ld) & (arr[:, col["policy"]] == k)]
            if not len(sel):
                continue
            mean = sel.mean(axis=0)
            lines.append(f"{ld:>5.2f} {p:<13} {mean[col['mean_wait']] / 3600:>11.2f} "
                         f"{mean[col['p95_wait']] / 3600:>10.2f} {mean[col['mean_bsld']]:>10.1f} "
                         f"{mean[col['utilisation']]:>6.3f} {mean[col['fragmentation']]:>6.3f} "
                         f"{mean[col['jain_users_bsld']]:>6.3f}")
    for k, p in enumerate(pols):
        sel = arr[arr[:, col["policy"]] == k]
        if len(sel):
            for m in ("mean_wait", "mean_bsld", "utilisation"):
                logged[f"{p}_{m}"] = float(sel[:, col[m]].mean())
    return "\n".join(lines), logged


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --jobs 1000 --seeds 4 --loads 0.7,0.9)."""
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per trace")
    parser.add_argument("--seeds", type=int, default=8, help="trace seeds per (load, policy)")
    parser.add_argument("--loads", default="0.5,0.7,0.85,0.95", help="offered loads, comma-separated")
    parser.add_argument("--policies", default="fifo,easy,conservative,gang",
                        help="scheduling policies, comma-separated (fifo, easy, conservative, gang)")
    parser.add_argument("--capacity", type=int, default=128, help="nodes in the simulated machine")
    parser.add_argument("--mpl", type=int, default=4, help="gang scheduling: rows of the Ousterhout matrix")
    parser.add_argument("--tau", type=float, default=10.0, help="bounded slowdown threshold in seconds")
    parser.add_argument("--seed", type=int, default=0, help="first trace seed")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
