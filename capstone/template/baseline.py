"""Single-machine baseline of the template problem: the T_1 of S_p = T_1 / T_p (Chapter 41).

    python capstone/template/baseline.py --n 20000 --steps 20
Every run is tracked (MLflow, rank 0 = this process) and tagged as the baseline.
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

    params = {k: v for k, v in vars(args).items() if k != "experiment"}
    with capstone.track(None, experiment=args.experiment, params=params, problem="logreg-gd",
                        baseline=True) as run:
        X, y = problem.make_shard(args.n, args.d, args.seed)
        w, losses = problem.fit(X, y, args.n, args.steps, args.lr)
        run.log_items(args.n * args.steps)
    run.log_metric("final_loss", float(losses[-1]))
    print(f"baseline: n={args.n} d={args.d} steps={args.steps} loss {losses[0]:.4f} -> {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
