"""Data-parallel efficiency E_2 = T_1 / (2 T_2) of from-scratch bucketed DDP on local processes (Chapter 15).

A float32 MLP (default widths 1024-2048-1024, Psi = 4.2 M, a 16 MiB gradient) at global batches
B = 1024, 2048, 4096 (26 to 103 GFLOP per step: compute grows with B, the all-reduce does not) is trained
with ``ddp.train_ddp`` (bucketed ring all-reduce over the process backend) on K = 2
processes, each on b = B / 2 samples, and with ``ddp.reference_train`` on 1 process on the full batch B.
Both runs give every process the same BLAS thread count, cores // K, so the single process is not
handed the cores the K processes share (fair per-worker comparison). T is the median time of ``steps``
training steps (barriers around each timed call), min over ``rounds`` alternating rounds of T_1 and T_2.
The final parameters of the two runs must agree (float32, rtol = atol = 1e-4).
Target: E_2 >= 0.8 at the largest batch (the compute-bound point); every batch is printed.
Usage: python benchmarks/bench_ddp_efficiency.py [--sizes 1024,2048,1024] [--batches 1024,2048,4096] [--K 2]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from _common import machine, report
from scaleoutai import cluster


def worker(comm, sizes: list[int], batches: list[int], steps: int, repeats: int, bucket_bytes: int) -> dict:
    """{batch: (median seconds per step, final params on rank 0)} and the BLAS thread count."""
    import numpy as np
    from threadpoolctl import threadpool_info

    from scaleoutai import perf
    from scaleoutai.parallel import ddp
    from scaleoutai import nn

    p0 = nn.mlp_init(sizes, seed=1, dtype=np.float32)
    out = {}
    for batch in batches:
        rng = np.random.default_rng(batch)  # every rank builds the same global batch
        data = [(rng.standard_normal((batch, sizes[0])).astype(np.float32),
                 rng.standard_normal((batch, sizes[-1])).astype(np.float32))]
        result = {}

        def train():
            comm.barrier()
            if comm.size == 1:
                result["params"] = ddp.reference_train(data, p0, steps, 1e-3)[0]
            else:
                result["params"] = ddp.train_ddp(comm, data, p0, steps, 1e-3, bucket_bytes=bucket_bytes)[0]
            comm.barrier()

        t = perf.measure(train, warmup=1, repeats=repeats)
        out[batch] = (t.median / steps, result["params"] if comm.rank == 0 else None)
    threads = max((i.get("num_threads", 0) for i in threadpool_info()), default=0)
    return {"steps": out, "threads": threads}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048,1024", help="MLP layer widths, comma-separated")
    ap.add_argument("--batches", default="1024,2048,4096", help="global batches B, comma-separated")
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="training steps per timed call")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="alternating T_1 / T_K rounds; best of each kept")
    ap.add_argument("--bucket-mib", type=float, default=4.0)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    batches = sorted(int(b) for b in a.batches.split(","))
    threads = max(1, (os.cpu_count() or 1) // a.K)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)  # worker_env keeps these: same per-process threads for K = 1 and K
    args = (sizes, batches, a.steps, a.repeats, int(a.bucket_mib * 2**20))
    t1 = dict.fromkeys(batches, float("inf"))
    tk = dict.fromkeys(batches, float("inf"))
    for _ in range(a.rounds):
        r1 = cluster.run(worker, 1, backend="process", args=args, timeout=900, quiet=True)
        rk = cluster.run(worker, a.K, backend="process", args=args, timeout=900, quiet=True)
        for b in batches:
            t1[b] = min(t1[b], r1.values[0]["steps"][b][0])
            tk[b] = min(tk[b], max(v["steps"][b][0] for v in rk.values))
    for b in batches:
        want, got = r1.values[0]["steps"][b][1], rk.values[0]["steps"][b][1]
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4)
    psi = sum(int(np.prod(v.shape)) for v in r1.values[0]["steps"][batches[0]][1].values())
    print(f"machine: {machine()}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"MLP {sizes} (Psi = {psi:,}, {4 * psi / 2**20:.1f} MiB float32 gradient, ring all-reduce in "
          f"{a.bucket_mib:g} MiB buckets), {r1.values[0]['threads']} BLAS thread(s) per process for K = 1 and "
          f"K = {a.K}; parameters of both runs agree (rtol 1e-4)")
    print(f"{'B':>6} {'GFLOP/step':>10} {'T_1 ms':>8} {'T_' + str(a.K) + ' ms':>8} {'S':>5} {'E':>5}")
    for b in batches:
        flops = 6 * b * psi
        print(f"{b:>6} {flops / 1e9:>10.1f} {t1[b] * 1e3:>8.1f} {tk[b] * 1e3:>8.1f} {t1[b] / tk[b]:>5.2f} "
              f"{t1[b] / (a.K * tk[b]):>5.2f}")
    b = batches[-1]
    eff = t1[b] / (a.K * tk[b])
    report(f"E_{a.K} = T_1 / ({a.K} T_{a.K}) at B = {b}", eff, "", ">= 0.8", eff >= 0.8)


if __name__ == "__main__":
    main()
