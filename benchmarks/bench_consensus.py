"""Swarm intelligence (Chapter 31): consensus iterations vs the algebraic-connectivity prediction, and PSO ours
vs pyswarms, in one run.

Consensus: x_{t+1} = x_t - gamma L x_t with gamma = 1/(d_max + 1) on a ring, a 2-D torus and a random
geometric graph (pi r^2 n = 2 log n) as the number of nodes n grows, each node a rank of the simulator; we
count the iterations until ||x_t - xbar|| / ||x_0 - xbar|| <= 1e-6 and compare with the bound
ceil(log 1e-6 / log(1 - gamma lambda_2)), fit the late rate per step and compare with 1 - gamma lambda_2.
PSO: our global-best swarm and pyswarms' GlobalBestPSO (same constriction coefficients, clipping at the
bounds) on sphere, Rastrigin, Rosenbrock and Ackley: median best cost over seeds and microseconds per
iteration, measured in the same run; one run per function is first checked equal bit for bit.
Usage: python benchmarks/bench_consensus.py [--sizes 16 36 64 100 144] [--seeds 10] [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _common import machine
from scaleoutai.agents import swarm_consensus as sc
from scaleoutai.agents import swarm_pso as ps


def consensus(sizes: list[int]) -> None:
    print(f"{'graph':>10} {'n':>4} {'lambda_2':>9} {'iters':>6} {'bound':>6} {'iters/bound':>11} {'rate':>9} "
          f"{'1-g*lambda_2':>12} {'messages':>10} {'wall s':>7}")
    for name in ("ring", "torus", "geometric"):
        for n in sizes:
            nb = sc.graph(name, n, seed=0)
            gamma = 1 / (1 + max(map(len, nb)))
            bound = sc.predicted_iterations(nb, gamma, 1e-6)
            rho = sc.predicted_rate(nb, gamma)
            X0 = np.random.default_rng(n).standard_normal((n, 1))
            t0 = time.perf_counter()
            path, res = sc.run_consensus(X0, nb, gamma, int(bound), timeout=3600)
            wall = time.perf_counter() - t0
            err = sc.disagreement(path)
            it = sc.iterations_to(err, 1e-6)
            assert it is not None and it <= bound and np.all(err <= rho ** np.arange(len(err)) * (1 + 1e-9) + 1e-14)
            late = sc.reference_consensus(X0, nb, gamma, int(sc.predicted_iterations(nb, gamma, 1e-12)))
            rate = sc.measured_rate(sc.disagreement(late))
            msgs = sum(s.messages_sent for s in res.stats)
            print(f"{name:>10} {n:>4} {sc.algebraic_connectivity(nb):>9.5f} {it:>6} {bound:>6.0f} {it / bound:>11.2f} "
                  f"{rate:>9.5f} {rho:>12.5f} {msgs:>10,} {wall:>7.2f}")


def pso(particles: int, d: int, iters: int, seeds: int) -> None:
    from pyswarms.single import GlobalBestPSO

    params = ps.PSOParams()
    print(f"\nPSO: {particles} particles, d = {d}, {iters} iterations, {seeds} seeds, w = {params.w}, "
          f"c1 = c2 = {params.c1}")
    print(f"{'function':>10} {'ours median':>12} {'pyswarms median':>15} {'ratio':>6} {'ours us/it':>10} "
          f"{'pyswarms us/it':>14} {'speed ratio':>11}")
    for name, f in ps.FUNCTIONS.items():
        b = ps.BOUNDS[name]
        lo, hi = -b * np.ones(d), b * np.ones(d)
        np.random.seed(99)
        opt = GlobalBestPSO(particles, d, params.options(), bounds=(lo, hi), bh_strategy="nearest")
        cost, _ = opt.optimize(f, iters, verbose=False)
        same = ps.reference_pso(f, particles, d, b, iters, params, rng=ps.pyswarms_stream(99, particles, d, b, params))
        assert same["cost"] == cost, name  # the same draws give the same run, bit for bit
        ours, theirs, t_ours, t_theirs = [], [], 0.0, 0.0
        for s in range(seeds):
            t0 = time.perf_counter()
            ours.append(ps.reference_pso(f, particles, d, b, iters, params, seed=s)["cost"])
            t1 = time.perf_counter()
            np.random.seed(1000 + s)
            opt = GlobalBestPSO(particles, d, params.options(), bounds=(lo, hi), bh_strategy="nearest")
            theirs.append(opt.optimize(f, iters, verbose=False)[0])
            t2 = time.perf_counter()
            t_ours, t_theirs = t_ours + t1 - t0, t_theirs + t2 - t1
        mo, mt = np.median(ours), np.median(theirs)
        uo, ut = t_ours / seeds / iters * 1e6, t_theirs / seeds / iters * 1e6
        print(f"{name:>10} {mo:>12.3g} {mt:>15.3g} {mo / mt:>6.2f} {uo:>10.0f} {ut:>14.0f} {ut / uo:>10.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 36, 64, 100, 144])
    ap.add_argument("--particles", type=int, default=40)
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="n = 16, 36; 3 seeds of 100 iterations: checks it runs")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.iters, a.seeds = [16, 36], 100, 3
    print(machine())
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    consensus(a.sizes)
    pso(a.particles, a.dim, a.iters, a.seeds)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s; load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
