"""Single-machine baseline of the stream pipeline: the T_1 of S_p = T_1 / T_p (Chapter 41).

    python baseline.py --n 100000
The same micro-batches through the same window operator in one process: no shuffle, no all-reduce.
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

    events = problem.make_stream(args)  # the replayed source: not timed (see problem.make_stream)
    problem.warm_up(events, args)
    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem="stream-windows", baseline=True) as run:
        rows, dropped = problem.run_stream(events, args, problem.single_step)
        run.log_items(args.n)
    run.log_metrics({"windows_emitted": len(rows), "late_pairs_dropped": dropped})
    print(f"baseline: {args.n} events, {len(rows)} (window, key) rows emitted, {dropped} late pairs dropped")


if __name__ == "__main__":
    main()
