"""Single-machine baseline of the federated study: all C clients simulated in one process (T_1).

    python baseline.py --n 4000 --clients 8 --rounds 8
``federated.reference_fedavg``: the same clients, seeds and rounds, one after another. Tracked in
MLflow and tagged as the baseline; it logs the accuracy curve and the rounds to the target too.
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
    from scaleoutai.ml import federated as fd

    from scaleoutai import datasets, nn  # noqa: F401  (imports outside the timed region)

    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem="fedavg-dirichlet", baseline=True) as run:
        shards, test, like, w0 = problem.make_clients(args)
        w, history = fd.reference_fedavg(w0, like, shards, **problem.options(args))
        run.log_items(args.n * args.epochs * args.rounds)  # sample-epochs of client training
    curve = problem.accuracy_curve(history, like, test)
    hit = problem.log_study(run, curve, args.target, history)
    print(f"baseline: C={args.clients} alpha={args.alpha:g}: accuracy {curve[0]:.3f} -> {curve[-1]:.3f}, "
          f"rounds to {args.target:g}: {hit}")


if __name__ == "__main__":
    main()
