"""From-scratch ring all-reduce on the process backend vs torch.distributed (gloo) all_reduce.

Both run in the same workers on the same 16 MiB float32 tensor (K = 2 processes), alternating,
median of repeats. Bus bandwidth = 2(K-1)/K * n / t. Target: ours >= 0.8x gloo's.
Usage: python benchmarks/bench_process_allreduce.py [--mib 16] [--K 2] [--repeats 15]
"""
from __future__ import annotations

import argparse

import numpy as np

from _common import machine, report
from scaleoutai import cluster


def worker(comm, n: int, repeats: int) -> dict:
    import time

    import torch
    import torch.distributed as dist

    from scaleoutai.collectives import ring_allreduce

    x = np.random.default_rng(comm.rank).standard_normal(n).astype(np.float32)
    ours, theirs = [], []
    for i in range(repeats + 2):  # two warm-up rounds
        comm.barrier()
        t = time.perf_counter()
        y = ring_allreduce(comm, x)
        t1 = time.perf_counter() - t
        tx = torch.from_numpy(x.copy())
        comm.barrier()
        t = time.perf_counter()
        dist.all_reduce(tx)
        t2 = time.perf_counter() - t
        if i >= 2:
            ours.append(t1)
            theirs.append(t2)
    assert np.allclose(y, tx.numpy(), rtol=1e-5, atol=1e-5)
    return {"ours": float(np.median(ours)), "gloo": float(np.median(theirs))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    n = int(a.mib * 2**20) // 4
    res = cluster.run(worker, a.K, backend="process", args=(n, a.repeats), timeout=600, quiet=True)
    ours = max(v["ours"] for v in res.values)
    gloo = max(v["gloo"] for v in res.values)
    bus = 2 * (a.K - 1) / a.K * 4 * n
    print(f"machine: {machine()}")
    print(f"K={a.K}, {a.mib:g} MiB float32: from-scratch ring {ours * 1e3:.1f} ms ({bus / ours / 1e9:.2f} GB/s bus), "
          f"gloo all_reduce {gloo * 1e3:.1f} ms ({bus / gloo / 1e9:.2f} GB/s bus)")
    ratio = gloo / ours
    report("bus bandwidth ratio ours/gloo", ratio, "x", ">= 0.8x", ratio >= 0.8)


if __name__ == "__main__":
    main()
