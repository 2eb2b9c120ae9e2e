"""Single-machine baseline of the training benchmark: full-batch Adam in one process (T_1).

    python baseline.py --strategy ddp --steps 10 --hidden 128 --batch 256
``--strategy`` picks the engine the distributed run is compared with: torch Adam on one device for
ddp and fsdp, the course's NumPy MLP and Adam (``parallel.ddp.reference_train``) for zero1-3. Tracked in
MLflow and tagged as the baseline; logs step time, state bytes and peak memory like the distributed run.
"""
from __future__ import annotations

import argparse
import statistics
import time

import problem


def train_single(args, on_step=None):
    """(params, losses) of the single-machine run of the engine ``args.strategy`` uses."""
    batches = problem.make_batches(args)
    params0 = problem.init_params(args)
    if args.strategy in problem.TORCH_STRATEGIES:
        model = problem.torch_model(params0)
        losses = problem.torch_train(model, batches, args, on_step=on_step)
        return problem.torch_params(model), losses, problem.torch_state_bytes(model)
    from scaleoutai import nn

    params, losses = problem.numpy_reference(batches, params0, args)
    state = 4 * nn.flatten(params).nbytes  # params + grads + Adam m and v, as zero.held_bytes counts them
    return params, list(losses), state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    problem.add_arguments(parser)
    args = parser.parse_args()
    problem.set_threads(args.threads)  # before NumPy and torch load

    import torch

    from scaleoutai import capstone

    torch.set_num_threads(args.threads)
    problem.warm_up(args.strategy)  # one-time imports, outside the timed region
    stamps = []
    with capstone.track(None, experiment=args.experiment, params=problem.params(args),
                        problem=f"train-{args.strategy}", baseline=True) as run:
        t0 = time.perf_counter()
        params, losses, state = train_single(args, on_step=lambda s: stamps.append(time.perf_counter()))
        run.log_items(args.batch * args.steps)  # samples processed
    steps = [b - a for a, b in zip([t0] + stamps[:-1], stamps)]
    run.log_metrics({"final_loss": losses[-1], "state_bytes_per_rank": state, "peak_rss_mb_max": problem.peak_rss_mb(),
                     **({"step_time_median": statistics.median(steps)} if steps else {})})
    print(f"baseline ({args.strategy} engine): loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"state {state / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
