"""Simulator throughput: a ring all-reduce on the simulator against a plain NumPy loop doing the same work.

The floor performs, with no communicator, exactly the chunk work of the ring: per message one copy (the
payload a send takes) and one addition or copy into the output. Both run in this one process, so their
ratio holds across machines; the per-message overhead is (simulator - floor) / messages.
Targets (issue 13): K = 256 with 2^20 float32 per rank within 1.5x of the floor, K = 1024 with 2^16
within 2x; and the K = 256 run within 2 s.
Usage: python benchmarks/bench_sim_ring.py [--repeats 2]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine, report
from scaleoutai import cluster
from scaleoutai.collectives import block_bounds, ring_allreduce
from scaleoutai.perf import collective_time


def worker(comm, n: int) -> float:
    x = np.full(n, comm.rank, dtype=np.float32)
    return float(ring_allreduce(comm, x)[-1])


def numpy_floor(K: int, n: int) -> float:
    """Seconds for the ring's chunk additions and copies, rank after rank, in one loop."""
    xs = [np.full(n, r, np.float32) for r in range(K)]
    outs = [np.empty(n, np.float32) for _ in range(K)]
    blk = [slice(a, b) for a, b in block_bounds(n, K)]
    t = time.perf_counter()
    for s in range(K - 1):  # reduce-scatter
        for r in range(K):
            src, i = (r - 1) % K, (r - s - 2) % K
            sent = (xs[src] if s == 0 else outs[src])[blk[(src - s - 1) % K]].copy()
            np.add(sent, xs[r][blk[i]], out=outs[r][blk[i]])
    for s in range(K - 1):  # all-gather
        for r in range(K):
            src = (r - 1) % K
            outs[r][blk[(r - s - 1) % K]] = outs[src][blk[(src - s) % K]].copy()
    return time.perf_counter() - t


def simulated(K: int, n: int, net: cluster.Network) -> tuple[float, cluster.RunResult]:
    t = time.perf_counter()
    res = cluster.run(worker, K, args=(n,), network=net, timeout=900)
    elapsed = time.perf_counter() - t
    assert all(v == K * (K - 1) / 2 for v in res.values)
    return elapsed, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    net = cluster.Network(alpha=1e-5, beta=1e-9)
    print(f"machine: {machine()}")
    for K, n, target in ((256, 1 << 20, 1.5), (1024, 1 << 16, 2.0)):
        floor = min(numpy_floor(K, n) for _ in range(a.repeats))
        runs = [simulated(K, n, net) for _ in range(a.repeats)]
        best, res = min(runs, key=lambda r: r[0])
        messages = 2 * (K - 1) * K
        model = collective_time("ring_allreduce", 4 * n, K, net.alpha, net.beta)
        assert abs(res.sim_time - model) <= 1e-9 * model
        print(f"K={K}, n={n} float32 per rank, {messages} messages: simulator "
              + ", ".join(f"{t:.2f} s" for t, _ in runs) + f"; NumPy floor {floor:.2f} s; "
              f"overhead {(best - floor) / messages * 1e6:.1f} us per message; simulated time = model")
        report(f"simulator / NumPy floor at K={K}", best / floor, "x", f"<= {target}x", best / floor <= target)
        if K == 256:
            report("sim ring all-reduce wall time at K=256 (best of runs)", best, "s", "<= 2 s", best <= 2.0)


if __name__ == "__main__":
    main()
