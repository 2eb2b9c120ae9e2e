"""Single-machine baseline of the scheduling study: the T_1 of S_p = T_1 / T_p (Chapter 41).

    python baseline.py --jobs 1000 --seeds 4 --loads 0.7,0.9
Every cell of the (load, policy, seed) grid in one process, one after the other: the same simulations,
the same metrics. Every run is tracked (MLflow, this process) and tagged as the baseline.
"""
from __future__ import annotations

import argparse

import problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy loads

    from scaleoutai import capstone

    grid = problem.make_grid(args)
    problem.warm_up(args)
    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem="cluster-scheduling", baseline=True) as run:
        rows = problem.run_cells(grid, range(len(grid)), args)
        run.log_items(len(grid) * args.jobs)  # simulated jobs
    arr = problem.rows_array(rows)
    table, logged = problem.summary(arr, args)
    run.log_metrics({"cells": len(grid), "illegal_schedules": int((arr[:, -1] > 0).sum()), **logged})
    print(f"baseline: {len(grid)} cells x {args.jobs} jobs simulated\n{table}")


if __name__ == "__main__":
    main()
