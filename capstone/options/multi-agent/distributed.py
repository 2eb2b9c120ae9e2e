"""Distributed flock: boids split into K vertical strips, halo exchange and migration every step (Chapter 41).

    scaleout run distributed.py --workers 2 -- --n 4000 --steps 20
    scaleout capstone sweep distributed.py --baseline baseline.py --workers 1,2 -- --n 4000 --steps 20

Per step each rank sends the boids near its two edges to the adjacent strips (the halo), steers its own
boids, and hands the boids that crossed an edge to their new owner (migration): four sendrecv per rank
per step on the course communicator (``cluster.init()``: torch.distributed, gloo on CPU), as in
Chapter 31. Afterwards rank 0 gathers the boids (outside the timed region) and checks them against the
single-machine run exactly: every boid once, bit-equal positions and velocities.
"""
from __future__ import annotations

import argparse
import sys

import problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with the baseline")
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy and torch load

    import numpy as np

    from scaleoutai import capstone, cluster

    comm = cluster.init()
    problem.check_strips(comm.size, problem.boids_params(args))
    rows = problem.make_flock(args)  # the initial flock from the seed: not timed
    problem.warm_up(rows, args)
    with capstone.track(comm, experiment=args.experiment, params=problem.params(args),
                        problem="boids-flock") as run:
        own = problem.run_partitioned(comm, rows, args)
        run.log_items(args.n * args.steps)  # agent-steps
    # every rank's boids to rank 0 (verification only, outside the timed region)
    sent = comm.stats.bytes_sent
    if comm.rank:
        comm.send(own, 0)
        comm.send(np.array([sent], dtype=np.int64), 0)
        return 0
    parts = [own] + [comm.recv(src) for src in range(1, comm.size)]
    meta = [np.array([sent])] + [comm.recv(src) for src in range(1, comm.size)]
    got = np.concatenate(parts)
    got = got[np.argsort(got[:, 0], kind="stable")]
    counts = [len(p) for p in parts]
    run.log_metrics({"polarisation_start": problem.polarisation(rows), "polarisation": problem.polarisation(got),
                     "halo_bytes_sent": float(sum(m[0] for m in meta)),
                     "imbalance": max(counts) / max(np.mean(counts), 1e-300)})  # max / mean boids per rank, at the end
    status = 0
    if not args.no_check:
        ref = problem.run_single(rows, args)
        ok, detail = problem.compare(got, ref)
        run.set_tag("scaleout.verified", str(ok).lower())
        print(f"K={comm.size}: {len(got)} boids after {args.steps} steps, boids per rank at the end {counts}; "
              f"{detail} ({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
