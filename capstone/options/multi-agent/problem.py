"""Multi-agent option: a flock of boids split by space over K ranks, halo exchange and migration (Chapter 31).

The agents: n boids (Reynolds 1987) in a periodic box, ``agents.swarm.random_flock`` (one seed). Each step
boid i steers by its neighbours within ``--radius`` (separation, alignment, cohesion), its speed is
clamped and it moves (``agents.swarm.steer``: every neighbour sum adds the neighbours one at a time in
increasing id, so any candidate set that holds all of a boid's neighbours, in id order, gives the same
bits). Quality measure: the final positions and velocities of every boid equal one machine's, bit for bit;
the polarisation phi (1: the flock moves as one) is logged as the emergent behaviour.

A fair single machine: both scripts steer with the same cell list (``step_cells``): the box is cut into
vertical cells at least ``radius`` wide, and the boids of a cell consider only the boids of that cell and
its two neighbours as candidates (about 3 / C of the flock instead of all of it).

Distribution axis: data (space). Rank r of K owns the boids in vertical strip r (``my_boids``). Per step
it sends the boids within ``radius`` of its two edges to the adjacent strips (the halo: two sendrecv),
steers its own boids with the same cells over its boids plus the halo, then sends the boids that crossed
an edge to the new owner (migration: two sendrecv). The union of the K ranks' boids after each step equals
the single-machine flock exactly.
"""
from __future__ import annotations

import os

ROW_FIELDS = ("id", "x", "y", "vx", "vy")


def set_threads(threads: int) -> None:
    """One BLAS thread per process (before NumPy loads), so K processes use K cores."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def boids_params(args):
    from scaleoutai.agents.swarm import BoidsParams

    p = BoidsParams(radius=args.radius, r_sep=min(args.r_sep, args.radius), box=args.box, dt=args.dt)
    p.check()
    return p


def make_flock(args):
    """The initial flock as rows [id, x, y, vx, vy] in id order, the same bytes on every rank and at any K.

    Every rank regenerates it from the seed (outside the timed region) and keeps only its strip."""
    import numpy as np

    from scaleoutai.agents.swarm import random_flock

    X, V = random_flock(args.n, boids_params(args), seed=args.seed)
    return np.concatenate([np.arange(args.n, dtype=np.float64)[:, None], X, V], axis=1)  # ids < 2^53: exact


def n_cells(params) -> int:
    """Cells per side: as many as fit with width >= radius (slack for rounding at the edges); 1 below 3."""
    c = int(params.box // (params.radius * (1 + 1e-9)))
    return c if c >= 3 else 1


def step_cells(own, cand, params):
    """One step of the boids ``own`` (rows in id order) given candidates ``cand`` (rows in id order) that hold
    all their neighbours. Cell by cell: a cell's boids see only the candidates of that cell and the two
    adjacent ones (mod C), which still hold all their neighbours, so the bits equal a step over all of
    ``cand``. Returns the new rows of ``own``, same order."""
    import numpy as np

    from scaleoutai.agents.swarm import steer

    C = n_cells(params)
    out = own.copy()
    if not len(own):
        return out
    if C == 1:
        out[:, 1:3], out[:, 3:5] = steer(own[:, 1:3], own[:, 3:5], cand[:, 1:3], cand[:, 3:5], params)
        return out
    width = params.box / C
    cell_own = np.minimum((own[:, 1] // width).astype(np.int64), C - 1)
    cell_cand = np.minimum((cand[:, 1] // width).astype(np.int64), C - 1)
    for c in np.unique(cell_own):
        mine = cell_own == c
        near = (cell_cand == c) | (cell_cand == (c - 1) % C) | (cell_cand == (c + 1) % C)
        X, V = steer(own[mine, 1:3], own[mine, 3:5], cand[near, 1:3], cand[near, 3:5], params)
        out[mine, 1:3], out[mine, 3:5] = X, V
    return out


def single_step(rows, params):
    """The whole flock on one machine: every boid is a candidate (the cells keep it to 3 / C of them)."""
    return step_cells(rows, rows, params)


def run_single(rows, args):
    """``--steps`` steps of the whole flock on one machine; returns the final rows in id order."""
    params = boids_params(args)
    for _ in range(args.steps):
        rows = single_step(rows, params)
    return rows


def warm_up(rows, args) -> None:
    """Load the modules and take one step of the whole flock before the timed region (Chapter 5: warm up, then
    measure), so neither script times its first imports, first calls and first allocations."""
    import scaleoutai.agents.swarm  # noqa: F401

    single_step(rows, boids_params(args))


def strip_of(x, size: int, box: float):
    """The rank owning each x-coordinate: vertical strips of width box / K."""
    from scaleoutai.agents.swarm import strip_of as strips

    return strips(x, size, box)


def my_boids(rows, rank: int, size: int, box: float):
    """The boids this rank owns at the start: those in its strip (rows in id order)."""
    return rows[strip_of(rows[:, 1], size, box) == rank]


def check_strips(size: int, params) -> None:
    """The halo comes from the two adjacent strips only, and a boid crosses at most one edge per step."""
    width = params.box / size
    if size > 1 and (params.radius > width or params.dt * params.v_max >= width):
        raise SystemExit(f"strips of width box/K = {width:g} must be >= radius ({params.radius}) and > dt v_max "
                         f"({params.dt * params.v_max:g}): use fewer ranks or a bigger --box")


def _swap(comm, left, right):
    """Send ``left`` to rank - 1 and ``right`` to rank + 1 (mod K); receive what they send us (two sendrecv)."""
    K, r = comm.size, comm.rank
    return [comm.sendrecv(left, (r - 1) % K, (r + 1) % K), comm.sendrecv(right, (r + 1) % K, (r - 1) % K)]


def partition_step(comm, own, params):
    """One step on every rank: halo exchange, steer my boids (same cells), migrate the boids that crossed."""
    import numpy as np

    K, r = comm.size, comm.rank
    if K == 1:
        return step_cells(own, own, params)
    width = params.box / K
    lo, x, reach = r * width, own[:, 1], params.radius * (1 + 1e-9)  # slack: extra candidates add exact zeros
    halo = _swap(comm, own[x - lo < reach], own[lo + width - x < reach])  # 2 messages, ~(2 radius / box) n rows
    cand = np.concatenate([own] + halo)
    cand = cand[np.unique(cand[:, 0], return_index=True)[1]]  # id order, each boid once (K = 2 sends it twice)
    own = step_cells(own, cand, params)
    dest = strip_of(own[:, 1], K, params.box)
    moved = _swap(comm, own[dest == (r - 1) % K], own[(dest == (r + 1) % K) & (dest != (r - 1) % K)])
    own = np.concatenate([own[dest == r]] + moved)
    return own[np.argsort(own[:, 0], kind="stable")]


def run_partitioned(comm, rows, args):
    """``--steps`` steps of this rank's strip; returns the rows it owns at the end (id order)."""
    params = boids_params(args)
    own = my_boids(rows, comm.rank, comm.size, params.box)
    for _ in range(args.steps):
        own = partition_step(comm, own, params)
    return own


def polarisation(rows) -> float:
    from scaleoutai.agents.swarm import polarisation as phi

    return phi(rows[:, 3:5])


def compare(got, ref) -> tuple[bool, str]:
    """Exact comparison: every boid once, with bit-equal positions and velocities.

    Every neighbour sum adds the same neighbours in the same (id) order on one machine and on K ranks, and
    everything else is elementwise: no tolerance is needed."""
    import numpy as np

    if got.shape != ref.shape:
        return False, f"{len(got)} boids, the baseline has {len(ref)}"
    if not np.array_equal(got[:, 0], ref[:, 0]):
        return False, "the set of boid ids differs (a boid lost or duplicated)"
    err = float(np.max(np.abs(got[:, 1:] - ref[:, 1:]))) if len(got) else 0.0
    return err == 0.0, f"max |state - state_baseline| = {err:.3e}"


def add_arguments(parser) -> None:
    """The size knobs both scripts share (smoke runs: --n 4000 --steps 20)."""
    parser.add_argument("--n", type=int, default=10_000, help="boids (agents)")
    parser.add_argument("--steps", type=int, default=50, help="simulation steps")
    parser.add_argument("--box", type=float, default=40.0, help="side of the periodic box")
    parser.add_argument("--radius", type=float, default=1.0, help="neighbourhood radius (cells and halo width)")
    parser.add_argument("--r-sep", type=float, default=0.3, help="separation radius (<= radius)")
    parser.add_argument("--dt", type=float, default=0.2, help="time step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per process")
    parser.add_argument("--experiment", default=None, help="MLflow experiment (default $SCALEOUT_EXPERIMENT)")


def params(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
