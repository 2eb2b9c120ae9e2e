"""PageRank (Ch13) on a generated power-law graph: our Pregel supersteps on real processes, K = 1 and 2.

The graph is ``datasets.power_law_graph(n, m)`` (seeded; generation is not timed), owners by hashing
(``hash_partition``). Each run calls ``graph.pagerank`` for a fixed number of supersteps on
``cluster.run(backend="process")``; the time is measured inside the workers from a barrier after
start-up to a barrier after the last superstep (set-up of the routes included, process start-up not).
Every run's ranks are asserted equal to the single-machine power iteration (``reference_pagerank``,
timed too: the floor one core reaches). The simulator then predicts the same runs: its per-edge cost is
calibrated from the measured K = 1 time, its network is ``--alpha`` / ``--beta``, and its S_2 is printed
beside the measured one.
Usage: python benchmarks/bench_pagerank.py [--edges 100000] [--vertices 20000] [--iters 50] [--repeats 5] [--smoke]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _common import machine
from scaleoutai import cluster, datasets
from scaleoutai.ml import graph as G
from scaleoutai.ml import graph_partition as GP


def timed_pagerank(comm, edges, n, iters, parts):
    comm.barrier()
    t = time.perf_counter()
    ids, x, info = G.pagerank(comm, edges, n, iters=iters, parts=parts)
    comm.barrier()
    return ids, x, info, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--vertices", type=int, default=20_000)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=5e-5, help="simulated latency per message (s)")
    ap.add_argument("--beta", type=float, default=1e-9, help="simulated seconds per byte")
    ap.add_argument("--smoke", action="store_true", help="10,000 edges, 1 repeat: checks the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.edges, a.vertices, a.repeats = 10_000, 2_000, 1
    n = a.vertices
    edges = datasets.power_law_graph(n, a.edges, seed=0)
    print(f"# PageRank, {n} vertices, {len(edges)} edges, {a.iters} supersteps, hash owners; {machine()}")

    ref_times = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        ref, _ = G.reference_pagerank(edges, n, iters=a.iters)
        ref_times.append(time.perf_counter() - t)
    t_ref = statistics.median(ref_times)

    measured: dict[int, float] = {}
    for K in (1, 2):
        parts = GP.hash_partition(n, K)
        times = []
        for _ in range(a.repeats):
            res = cluster.run(timed_pagerank, K, args=(edges, n, a.iters, parts), backend="process",
                              timeout=600, quiet=True)
            err = np.abs(G.assemble(res.values, n) - ref).max()
            assert err < 1e-12, f"K={K}: max difference {err:.2e} from the power iteration"
            times.append(max(v[3] for v in res.values))
        measured[K] = statistics.median(times)
        cut = GP.edge_cut_metrics(edges, parts, K)
        print(f"ours, process backend, K={K}: median {measured[K]:.3f} s (runs {', '.join(f'{t:.3f}' for t in times)}); "
              f"cut fraction {cut['cut_fraction']:.3f}, edge balance {cut['edge_balance']:.3f}")
    print(f"single-machine power iteration (NumPy, one process): median {t_ref:.3f} s")
    s2 = measured[1] / measured[2]
    print(f"measured S_2 = {s2:.2f}, E_2 = {s2 / 2:.2f}; K = 1 is {measured[1] / t_ref:.2f}x the reference")
    overhead = (measured[2] - measured[1] / 2) / a.iters
    print(f"K = 2 spends {overhead * 1e3:.2f} ms per superstep beyond half the K = 1 work: one all-to-all and "
          f"one all-reduce, {len(edges) * cut['cut_fraction'] * 8 / 2 / 1e3:.0f} kB or less per rank")

    per_edge = measured[1] / (a.iters * len(edges))
    net = cluster.Network(alpha=a.alpha, beta=a.beta)
    sim = {}
    for K in (1, 2):
        res = cluster.run(G.pagerank, K, args=(edges, n),
                          kwargs=dict(iters=a.iters, parts=GP.hash_partition(n, K), seconds_per_edge=per_edge),
                          network=net, timeout=600)
        assert np.abs(G.assemble(res.values, n) - ref).max() < 1e-12
        sim[K] = res.sim_time
    print(f"simulator (per-edge cost {per_edge * 1e9:.1f} ns calibrated from K = 1, alpha {a.alpha:g} s, beta {a.beta:g} s/B): "
          f"T_1 {sim[1]:.3f} s, T_2 {sim[2]:.3f} s, predicted S_2 = {sim[1] / sim[2]:.2f}")


if __name__ == "__main__":
    main()
