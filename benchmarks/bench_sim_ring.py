"""Simulator throughput: ring all-reduce of 2^20 float32 per rank at K = 256 (target: <= 2 s).

Usage: python benchmarks/bench_sim_ring.py [--K 256] [--n 1048576] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine, report
from scaleoutai import cluster
from scaleoutai.collectives import ring_allreduce
from scaleoutai.perf import collective_time


def worker(comm, n: int) -> float:
    x = np.full(n, comm.rank, dtype=np.float32)
    return float(ring_allreduce(comm, x)[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, default=256)
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    net = cluster.Network(alpha=1e-5, beta=1e-9)
    times = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        res = cluster.run(worker, a.K, args=(a.n,), network=net, timeout=600)
        times.append(time.perf_counter() - t)
    assert all(v == a.K * (a.K - 1) / 2 for v in res.values)
    model = collective_time("ring_allreduce", 4 * a.n, a.K, net.alpha, net.beta)
    print(f"machine: {machine()}")
    print(f"K={a.K}, n={a.n} float32 per rank, {2 * (a.K - 1) * a.K} messages; runs: "
          + ", ".join(f"{t:.2f} s" for t in times))
    print(f"simulated time {res.sim_time * 1e3:.3f} ms = alpha-beta model {model * 1e3:.3f} ms")
    best = min(times)
    report("sim ring all-reduce wall time (best of runs)", best, "s", "<= 2 s", best <= 2.0)


if __name__ == "__main__":
    main()
