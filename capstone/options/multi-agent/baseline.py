"""Single-machine baseline of the flock: the T_1 of S_p = T_1 / T_p (Chapter 41).

    python baseline.py --n 4000 --steps 20
The same boids, the same cell list and the same steps in one process: no halo, no migration.
Every run is tracked (MLflow, this process) and tagged as the baseline.
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

    rows = problem.make_flock(args)  # the initial flock from the seed: not timed
    problem.warm_up(rows, args)
    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem="boids-flock", baseline=True) as run:
        final = problem.run_single(rows, args)
        run.log_items(args.n * args.steps)  # agent-steps
    phi = problem.polarisation(final)
    run.log_metrics({"polarisation_start": problem.polarisation(rows), "polarisation": phi})
    print(f"baseline: {args.n} boids, {args.steps} steps, polarisation {problem.polarisation(rows):.3f} -> {phi:.3f}")


if __name__ == "__main__":
    main()
