"""Distributed scheduling study: the (load, policy, seed) grid split over K ranks (Chapter 41).

    scaleout run distributed.py --workers 2 -- --jobs 1000 --seeds 4 --loads 0.7,0.9
    scaleout capstone sweep distributed.py --baseline baseline.py --workers 1,2 -- --jobs 1000 --seeds 4 --loads 0.7,0.9

Rank r of K simulates cells r, r + K, ... of the grid (``problem.my_cells``) and sends its metric rows to
rank 0, which assembles the table: an embarrassingly parallel parameter sweep with one gather. The
communicator is the course's (``cluster.init()``: torch.distributed, gloo on CPU). Afterwards rank 0
reruns the whole grid on one machine (outside the timed region) and checks the table exactly.
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
    grid = problem.make_grid(args)
    problem.warm_up(args)
    with capstone.track(comm, experiment=args.experiment, params=problem.params(args),
                        problem="cluster-scheduling") as run:
        mine = problem.rows_array(problem.run_cells(grid, problem.my_cells(len(grid), comm.rank, comm.size), args))
        # the gather is part of the job: the table is only useful on one machine
        if comm.rank:
            comm.send(mine, 0)
        else:
            parts = [mine] + [comm.recv(src) for src in range(1, comm.size)]
        run.log_items(len(grid) * args.jobs)  # simulated jobs
    sent = comm.stats.bytes_sent
    if comm.rank:
        comm.send(np.array([sent, len(mine)], dtype=np.int64), 0)
        return 0
    meta = [np.array([sent, len(mine)])] + [comm.recv(src) for src in range(1, comm.size)]
    got = problem.rows_array(np.concatenate([p.reshape(-1, len(problem.ROW_FIELDS)) for p in parts]))
    table, logged = problem.summary(got, args)
    run.log_metrics({"cells": len(got), "illegal_schedules": int((got[:, -1] > 0).sum()),
                     "gather_bytes_sent": float(sum(m[0] for m in meta)),
                     "max_cells_per_rank": float(max(m[1] for m in meta)), **logged})
    print(f"K={comm.size}: {len(got)} of {len(grid)} cells x {args.jobs} jobs\n{table}")
    status = 0
    if not args.no_check:
        ref = problem.rows_array(problem.run_cells(grid, range(len(grid)), args))
        ok, detail = problem.compare(got, ref)
        run.set_tag("scaleout.verified", str(ok).lower())
        print(f"K={comm.size}: {detail} ({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
