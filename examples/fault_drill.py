"""Fault drill (Chapter 18): data-parallel training that survives a crashed rank under torchrun.

    python -m torch.distributed.run --standalone --nproc-per-node=2 --max-restarts=1 \\
        examples/fault_drill.py --ckpt-dir /tmp/drill/ckpt --out /tmp/drill/final.npz \\
        --crash-marker /tmp/drill/crashed --steps 12 --every 4

Every rank holds the whole MLP and a shard of each global batch (Ch15 DDP from scratch: local gradient,
bucketed ring all-reduce, Adam). Every ``--every`` steps rank 0 writes an atomic checkpoint (parameters
and Adam state); the others wait at a barrier, so a checkpoint on disk is always a state every rank
reached. At start-up every rank resumes from the newest checkpoint. With ``--crash-marker`` rank
``--crash-rank`` kills itself with ``os._exit(1)`` before step ``--crash-step`` unless the marker file
exists (it writes the marker first, so it crashes only once). torchrun sees the dead rank, stops the
group and, with --max-restarts >= 1, starts it again; the new group resumes from the checkpoint.
Training is a pure function of (state, step), so the final weights equal an uninterrupted run's.

One log line per event on stdout: ``drill rank=R attempt=A event=E step=S t=UNIX_TIME``
(events: start, resume, crash, done, checkpoint, final); the restart count A is torchrun's
TORCHELASTIC_RESTART_COUNT.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def log(rank: int, attempt: int, event: str, step: int, **extra: object) -> None:
    more = "".join(f" {k}={v}" for k, v in extra.items())
    # one write with its newline: both ranks share torchrun's stdout, and print() writes the text and the
    # newline separately, so two ranks could splice their lines
    print(f"drill rank={rank} attempt={attempt} event={event} step={step} t={time.time():.6f}{more}\n",
          end="", flush=True)


def make_batches(steps: int, batch: int, sizes: list[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Global batch of step s: rows drawn by rng([seed, s]) from a fixed synthetic regression set."""
    rng = np.random.default_rng(seed)
    n = max(4 * batch, 64)
    X = rng.standard_normal((n, sizes[0]))
    Y = np.tanh(X @ rng.standard_normal((sizes[0], sizes[-1])))
    idx = [np.random.default_rng([seed, s]).choice(n, batch, replace=False) for s in range(steps)]
    return [(X[i], Y[i]) for i in idx]


def reference(steps: int, batch: int, sizes: list[int], seed: int, lr: float) -> dict[str, np.ndarray]:
    """The single-device answer: full-batch Adam on the same batches (what the drill must reproduce)."""
    from scaleoutai.parallel.ddp import reference_train
    from scaleoutai.nn import mlp_init

    params, _ = reference_train(make_batches(steps, batch, sizes, seed), mlp_init(sizes, seed=seed), steps, lr,
                             optimizer="adam")
    return params


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt-dir", required=True, help="shared directory for checkpoints")
    p.add_argument("--out", required=True, help="rank 0 writes the final weights here (.npz)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=4, help="checkpoint interval in steps")
    p.add_argument("--batch", type=int, default=16, help="global batch B")
    p.add_argument("--sizes", default="8,16,1", help="MLP layer widths, comma-separated")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--crash-marker", default=os.environ.get("DRILL_CRASH_MARKER"),
                   help="inject one crash unless this file exists (default: $DRILL_CRASH_MARKER; none: no crash)")
    p.add_argument("--crash-rank", type=int, default=1)
    p.add_argument("--crash-step", type=int, default=None, help="crash before this step (default steps // 2)")
    p.add_argument("--step-seconds", type=float, default=0.0, help="extra compute per step (sleep), for timing")
    a = p.parse_args(argv)
    if a.steps < 1 or a.every < 1 or a.batch < 1:
        p.error(f"--steps, --every and --batch must be >= 1, got {a.steps}, {a.every}, {a.batch}")
    a.sizes = [int(s) for s in a.sizes.split(",")]
    a.crash_step = a.steps // 2 if a.crash_step is None else a.crash_step
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    from scaleoutai import cluster
    from scaleoutai.collectives import all_gather
    from scaleoutai.parallel.ddp import bucketed_ddp_step, local_gradient
    from scaleoutai.parallel.elastic import checkpoint_path, latest_checkpoint, save_checkpoint
    from scaleoutai.nn import adam_init, adam_step, mlp_init

    comm = cluster.init(timeout=60.0)
    K, r = comm.size, comm.rank
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log(r, attempt, "start", 0, world=K)
    batches = make_batches(a.steps, a.batch, a.sizes, a.seed)
    os.makedirs(a.ckpt_dir, exist_ok=True)
    found = latest_checkpoint(a.ckpt_dir)  # a shared directory: every rank reads the same newest file
    if found:
        start, ck = found
        params, adam = ck["params"], ck["adam"]
        adam["t"] = int(adam["t"])
    else:
        start, params = 0, mlp_init(a.sizes, seed=a.seed)
        adam = adam_init(params)
    starts = all_gather(comm, np.array([start]))
    if len(set(starts.tolist())) != 1:  # a rank saw another directory: resuming would silently diverge
        print(f"drill: ranks disagree on the resume step {starts.tolist()}; is --ckpt-dir shared?", file=sys.stderr)
        return 1
    log(r, attempt, "resume", start)
    for s in range(start, a.steps):
        if (a.crash_marker and r == a.crash_rank and s == a.crash_step and not os.path.exists(a.crash_marker)):
            with open(a.crash_marker, "w") as f:
                f.write(f"crashed before step {s}\n")
            log(r, attempt, "crash", s)
            os._exit(1)  # fail-stop: no cleanup, no goodbye to the peers
        X, Y = batches[s]
        x, y = np.array_split(X, K)[r], np.array_split(Y, K)[r]
        _, g = local_gradient(params, x, y, len(X))
        g = bucketed_ddp_step(comm, g, bucket_bytes=1 << 16)
        adam_step(params, g, adam, a.lr)
        if a.step_seconds:
            time.sleep(a.step_seconds)
        if r == 0:
            log(r, attempt, "done", s + 1)
        if (s + 1) % a.every == 0 or s + 1 == a.steps:
            if r == 0:
                save_checkpoint(checkpoint_path(a.ckpt_dir, s + 1), {"params": params, "adam": adam, "step": s + 1})
                log(r, attempt, "checkpoint", s + 1)
            comm.barrier()  # nobody runs ahead of a checkpoint that is not on disk yet
    if r == 0:
        save_checkpoint(a.out, {**params, "resumed_from": start, "attempt": attempt})
        log(r, attempt, "final", a.steps, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
