"""Distributed training benchmark: one MLP trained with DDP, FSDP2 or ZeRO-1/2/3 over K ranks (Chapter 41).

    scaleout run distributed.py --workers 2 -- --strategy fsdp --steps 10 --hidden 128 --batch 256
    scaleout capstone sweep distributed.py --baseline baseline.py --workers 1,2 --experiment train-zero2 \
        -- --strategy zero2 --steps 10 --hidden 128 --batch 256

ddp and fsdp are PyTorch's own (DistributedDataParallel; FSDP2 ``fully_shard`` on a 1-D CPU DeviceMesh),
over the gloo group ``cluster.init()`` creates. zero1-3 are ``scaleoutai.parallel.zero`` on the course
communicator that ``cluster.init()`` returns (its collectives are sends and receives over the same gloo
group), as Chapter 16 runs them. Per run: median step time, bytes per step, the state bytes each rank
holds, and peak RSS over the ranks. Afterwards rank 0 retrains on one process with the same engine
(outside the timed region) and checks the weights to a stated tolerance.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import problem

RTOL, ATOL = 1e-9, 1e-9  # float64: only the order of the gradient sums differs from one machine


def train_torch(comm, args, batches, params0, on_step):
    """ddp or fsdp on the gloo group; returns (full params, loss shares, state bytes, bytes/step model)."""
    import torch

    K = comm.size
    model = problem.torch_model(params0)
    P = sum(p.numel() for p in model.parameters())
    if args.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model)  # gradients averaged over K in ~25 MB buckets during backward
        sent = 2 * (K - 1) / K * P * 8  # ring all-reduce of P float64 per step, per rank
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (K,))
        for mod in model:
            if isinstance(mod, torch.nn.Linear):
                fully_shard(mod, mesh=mesh)
        fully_shard(model, mesh=mesh)
        sent = 3 * (K - 1) / K * P * 8  # all-gather (forward), all-gather (backward), reduce-scatter
    losses = problem.torch_train(model, batches, args, comm.rank, K, on_step)
    inner = model.module if args.strategy == "ddp" else model
    state = problem.torch_state_bytes(inner)
    return problem.torch_params(inner), losses, state, sent


def train_zero(comm, args, batches, params0, on_step):
    """ZeRO stage 1-3 with the course's collectives; returns the same four things (bytes measured)."""
    from scaleoutai.parallel import zero

    st = zero.zero_init(comm, params0, problem.zero_stage(args.strategy))
    losses = []
    before = comm.stats.bytes_sent
    for s in range(args.steps):
        X, Y = batches[s % len(batches)]
        x, y = problem.my_rows(X, comm.rank, comm.size), problem.my_rows(Y, comm.rank, comm.size)
        losses.append(zero.zero_step(comm, st, x, y, len(X), args.lr))
        on_step(s)
    sent = (comm.stats.bytes_sent - before) / max(1, args.steps)
    held = zero.held_bytes(st)["total"]
    return zero.zero_full_params(comm, st), losses, held, sent


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
    train = train_torch if args.strategy in problem.TORCH_STRATEGIES else train_zero
    problem.warm_up(args.strategy)  # one-time imports, outside the timed region
    stamps = []
    with capstone.track(comm, experiment=args.experiment, params=problem.params(args),
                        problem=f"train-{args.strategy}") as run:
        t0 = time.perf_counter()
        batches, params0 = problem.make_batches(args), problem.init_params(args)
        params, shares, state, sent = train(comm, args, batches, params0,
                                            lambda s: stamps.append(time.perf_counter()))
        run.log_items(args.batch * args.steps)
    # after the timed region: global losses, the largest state and peak memory over the ranks
    losses = torch.tensor(shares, dtype=torch.float64)
    dist.all_reduce(losses)
    worst = torch.tensor([float(state), problem.peak_rss_mb(), float(sent)], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    steps = [b - a for a, b in zip([t0] + stamps[:-1], stamps)]
    run.log_metrics({"final_loss": float(losses[-1]), "state_bytes_per_rank": float(worst[0]),
                     "peak_rss_mb_max": float(worst[1]), "bytes_sent_per_step_per_rank": float(worst[2]),
                     "step_time_median": statistics.median(steps)})
    run.set_tag("scaleout.bytes", "measured" if args.strategy.startswith("zero") else "model: ring/FSDP formula")
    status = 0
    if comm.rank == 0 and not args.no_check:
        from baseline import train_single

        ref, ref_losses, _ = train_single(args)
        ok, err = problem.compare(params, ref, RTOL, ATOL)
        ok = ok and bool(np.allclose(losses.numpy(), ref_losses, rtol=RTOL, atol=ATOL))
        run.set_tag("scaleout.verified", str(ok).lower())
        run.log_metric("max_abs_error_vs_baseline", err)
        print(f"K={comm.size} {args.strategy}: loss {float(losses[0]):.4f} -> {float(losses[-1]):.4f}, state "
              f"{float(worst[0]) / 2**20:.2f} MiB/rank; max |w - w_baseline| = {err:.2e} "
              f"({'matches' if ok else 'DIFFERS from'} the baseline)")
        status = 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
