"""Distributed federated study: FedAvg with the server on rank 0 and the clients on ranks 1..K-1 (Ch 41).

    scaleout run distributed.py --workers 3 -- --n 4000 --clients 8 --rounds 8
    scaleout capstone sweep distributed.py --baseline baseline.py --workers 1,2,3 -- --n 4000 --clients 8 --rounds 8

``federated.train_fedavg`` on the course communicator (``cluster.init()``: torch.distributed point to
point, gloo on CPU), exactly as Chapter 14 runs it. K = 1 hosts every client on the server; K = 2 puts
them all on rank 1 (so S_2 <= 1: the server only aggregates); from K = 3 the clients train in parallel.
Afterwards rank 0 reruns the single-process simulation (outside the timed region) and demands the same
weights bit for bit.
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
    from scaleoutai.ml import federated as fd

    comm = cluster.init()
    from scaleoutai import datasets, nn  # noqa: F401  (imports outside the timed region)

    with capstone.track(comm, experiment=args.experiment, params=problem.params(args),
                        problem="fedavg-dirichlet") as run:
        shards, test, like, w0 = problem.make_clients(args)
        w, history = fd.train_fedavg(comm, w0, like, shards, **problem.options(args))
        run.log_items(args.n * args.epochs * args.rounds)
    if comm.rank != 0:
        return 0
    curve = problem.accuracy_curve(history, like, test)
    hit = problem.log_study(run, curve, args.target, history)
    run.log_metric("server_bytes_sent", comm.stats.bytes_sent)
    run.log_metric("server_bytes_received", comm.stats.bytes_received)
    status = 0
    if not args.no_check:
        w_ref, hist_ref = fd.reference_fedavg(w0, like, shards, **problem.options(args))
        err = float(np.max(np.abs(w - w_ref)))
        same_reports = [h["reported"] for h in history] == [h["reported"] for h in hist_ref]
        ok = bool(np.array_equal(w, w_ref)) and same_reports  # bit for bit: tolerance 0
        run.set_tag("scaleout.verified", str(ok).lower())
        run.log_metric("max_abs_error_vs_baseline", err)
        print(f"K={comm.size}: accuracy {curve[-1]:.3f}, rounds to {args.target:g}: {hit}; "
              f"max |w - w_baseline| = {err:.2e} ({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
