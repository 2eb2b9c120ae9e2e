"""Gradient compression on 2 real processes: bytes per step and time to a target loss, and our PowerSGD
step beside torch DDP's powerSGD_hook step (same run, same processes).

Part 1: full-batch training of the course MLP (classification, float64) with ``train_compressed_sgd`` for
dense, top-k (1% of P) with and without error feedback, QSGD (s = 16) and PowerSGD (r = 2) with and
without EF. Bytes per step are the communicator's count for rank 0; the target is 1.1x the dense run's
final loss; time to target = wall time of the run x (first step at or below target) / steps.
Part 2: a Linear(IN, OUT) float32 layer: median time of a DDP step (forward, backward with the
PowerSGD hook, rank r, EF, warm start) vs a plain torch backward plus our ``compressed_allreduce``.
Usage: python benchmarks/bench_compression.py [--quick] [--steps 200] [--repeats 20]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine, report
from scaleoutai import cluster, datasets
from scaleoutai.ml import compression as cp
from scaleoutai.ml import optimization as opt


def train(comm, X, y, model, w0, steps, lr, comp):  # noqa: ANN001
    comm.barrier()
    t0 = time.perf_counter()
    w, ws = cp.train_compressed_sgd(comm, X, y, model, w0, steps, lr, comp)
    return ws, time.perf_counter() - t0


def hook_vs_ours(comm, n_in, n_out, rank, repeats):  # noqa: ANN001
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    x, yt = torch.randn(256, n_in), torch.randn(256, n_out)
    ddp, twin = DDP(torch.nn.Linear(n_in, n_out)), torch.nn.Linear(n_in, n_out)
    state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=rank, start_powerSGD_iter=2,
                             use_error_feedback=True, warm_start=True)
    ddp.register_comm_hook(state, ps.powerSGD_hook)
    ours, our_state = cp.PowerSGD(rank, ((n_out, n_in), (n_out,)), error_feedback=True), {}
    t_torch, t_ours = [], []
    for i in range(repeats + 3):
        comm.barrier()
        t = time.perf_counter()
        ddp.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), yt).backward()
        t_torch.append(time.perf_counter() - t)
        comm.barrier()
        t = time.perf_counter()
        twin.zero_grad()
        torch.nn.functional.mse_loss(twin(x), yt).backward()
        g = np.concatenate([twin.weight.grad.numpy().ravel(), twin.bias.grad.numpy()])
        cp.compressed_allreduce(comm, g, ours, our_state)
        t_ours.append(time.perf_counter() - t)
    assert state.iter == repeats + 3
    return float(np.median(t_torch[3:])), float(np.median(t_ours[3:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and repeats (CI smoke)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    steps, repeats = (40, 5) if a.quick else (a.steps, a.repeats)
    print(machine())
    X, y = datasets.classification(2000, 64, classes=10, separation=2.5, seed=0)
    model = opt.mlp_model([64, 64, 10])
    w0 = model.init(seed=0)
    P = len(w0)
    shapes = tuple(model.shapes())
    runs = {"dense": cp.Dense(), "top-k 1%": cp.TopK(P // 100), "top-k 1% + EF": cp.TopK(P // 100, True),
            "QSGD s=16": cp.QSGD(16), "PowerSGD r=2": cp.PowerSGD(2, shapes),
            "PowerSGD r=2 + EF": cp.PowerSGD(2, shapes, True)}
    results = {}
    for name, comp in runs.items():
        res = cluster.run(train, 2, backend="process", args=(X, y, model, w0, steps, 0.1, comp), timeout=600)
        ws, wall = res.values[0]
        results[name] = ([model.loss(w, X, y) for w in ws], wall, res.stats[0].bytes_sent / steps)
    target = 1.1 * results["dense"][0][-1]
    print(f"K = 2 processes, MLP with P = {P}, {steps} full-batch steps, target loss {target:.4f} (1.1x dense)")
    print(f"{'method':>18} {'B/step':>8} {'x fewer':>8} {'final loss':>10} {'steps to target':>15} {'s to target':>11}")
    dense_bytes = results["dense"][2]
    for name, (losses, wall, per_step) in results.items():
        hit = next((i for i, v in enumerate(losses) if v <= target), None)
        secs = f"{wall * hit / steps:11.3f}" if hit is not None else f"{'never':>11}"
        print(f"{name:>18} {per_step:8.0f} {dense_bytes / per_step:8.1f} {losses[-1]:10.4f} "
              f"{hit if hit is not None else 'never':>15} {secs}")
    n_in, n_out, r = 512, 256, 4
    res = cluster.run(hook_vs_ours, 2, backend="process", args=(n_in, n_out, r, repeats), timeout=600)
    t_torch, t_ours = res.values[0]
    print(f"PowerSGD step on Linear({n_in}, {n_out}), r = {r}, EF, warm start, 2 processes: torch DDP hook "
          f"{t_torch * 1e3:.2f} ms, ours {t_ours * 1e3:.2f} ms (ours / torch = {t_ours / t_torch:.2f})")
    report("ours / torch PowerSGD step time", t_ours / t_torch, "x", "<= 3", t_ours / t_torch <= 3)


if __name__ == "__main__":
    main()
