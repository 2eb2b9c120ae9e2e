"""Distributed version of the template problem: data-parallel gradient descent over K ranks (Chapter 41).

    scaleout run capstone/template/distributed.py --workers 2 -- --n 20000 --steps 20
    scaleout capstone sweep capstone/template/distributed.py --baseline capstone/template/baseline.py \
        --workers 1,2 -- --n 20000 --steps 20

Each rank builds only its shard, computes its gradient sum, and one torch.distributed all_reduce per
step (gloo on CPU) adds the shards up. Afterwards rank 0 checks the weights against the
single-machine baseline (outside the timed region) and records the verdict on the run.
"""
from __future__ import annotations

import argparse
import sys

import problem

RTOL, ATOL = 1e-9, 1e-12  # only the order of float additions differs from the baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with the baseline")
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy and torch load

    import numpy as np
    import torch
    import torch.distributed as dist

    from scaleoutai import capstone, cluster

    torch.set_num_threads(args.threads)
    comm = cluster.init()

    def allreduce(buf: np.ndarray) -> None:
        dist.all_reduce(torch.from_numpy(buf))  # shares memory with buf: summed in place

    params = {k: v for k, v in vars(args).items() if k not in ("experiment", "no_check")}
    with capstone.track(comm, experiment=args.experiment, params=params, problem="logreg-gd") as run:
        X, y = problem.make_shard(args.n, args.d, args.seed, comm.rank, comm.size)
        w, losses = problem.fit(X, y, args.n, args.steps, args.lr, allreduce)
        run.log_items(args.n * args.steps)
    run.log_metric("final_loss", float(losses[-1]))
    status = 0
    if comm.rank == 0 and not args.no_check:
        Xr, yr = problem.make_shard(args.n, args.d, args.seed)
        w_ref, _ = problem.fit(Xr, yr, args.n, args.steps, args.lr)
        err = float(np.max(np.abs(w - w_ref)))
        ok = bool(np.allclose(w, w_ref, rtol=RTOL, atol=ATOL))
        run.set_tag("scaleout.verified", str(ok).lower())
        run.log_metric("max_abs_error_vs_baseline", err)
        print(f"K={comm.size}: max |w - w_baseline| = {err:.2e} ({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
