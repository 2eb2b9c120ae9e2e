"""Distributed constraint satisfaction (Chapter 27): messages and rounds to a proper 3-colouring for
asynchronous backtracking (ABT) and the distributed breakout algorithm (DBA) as the graph grows.

Graphs: ``planted_graph(n, 3, degree, seed)``, random graphs with a hidden 3-colouring and average
degree ``degree`` (4.0 by default; near 4.7 the random 3-colouring problem is hardest). Counts are the
protocols' logical messages and synchronous rounds; they do not depend on how the agents are placed
on ranks (tests/test_agents_dai.py checks the ranks' runs against these one-machine rounds), so the
one-machine reference is run here. Medians over seeds; a run that hits ``--max-rounds`` counts as
unsolved and enters the median with the cap (a lower bound).
Usage: python benchmarks/bench_dcsp.py [--quick] [--seeds 15] [--degree 4.0]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _common import machine
from scaleoutai.agents import dai_csp as cs
from scaleoutai.agents import dai_rounds as dr


def measure(n: int, degree: float, seeds: int, max_rounds: int) -> dict[str, dict[str, float]]:
    """Median messages and rounds of ABT and DBA over ``seeds`` planted graphs of n nodes."""
    rows: dict[str, list[tuple[int, int, bool]]] = {"abt": [], "dba": []}
    for s in range(seeds):
        nb = cs.planted_graph(n, 3, degree, seed=s)
        runs = (("abt", dr.reference_abt(nb, 3, max_rounds)), ("dba", dr.reference_dba(nb, 3, max_rounds, seed=s)))
        for algo, rec in runs:
            solved = rec["status"] == "solved"
            assert not solved or cs.is_proper(nb, rec["colours"], 3)
            assert rec["status"] != "unsatisfiable"  # planted: a colouring exists
            rows[algo].append((rec["messages"], rec["rounds"], solved))
    return {algo: {"messages": float(np.median([m for m, _, _ in r])), "rounds": float(np.median([x for _, x, _ in r])),
                   "solved": sum(ok for _, _, ok in r)} for algo, r in rows.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="n = 10, 20, 30 and 3 seeds")
    ap.add_argument("--seeds", type=int, default=15)
    ap.add_argument("--degree", type=float, default=4.0)
    ap.add_argument("--max-rounds", type=int, default=20_000)
    a = ap.parse_args()
    sizes, seeds = ([10, 20, 30], 3) if a.quick else ([10, 20, 40, 60, 80], a.seeds)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    print(f"3-colouring of planted random graphs, average degree {a.degree}, medians over {seeds} seeds")
    print(f"{'n':>4} {'ABT msgs':>10} {'ABT rounds':>10} {'DBA msgs':>10} {'DBA rounds':>10} "
          f"{'DBA/ABT msgs':>12} {'solved A/D':>10} {'time (s)':>8}")
    for n in sizes:
        t = time.perf_counter()
        m = measure(n, a.degree, seeds, a.max_rounds)
        A, D = m["abt"], m["dba"]
        print(f"{n:>4} {A['messages']:>10.0f} {A['rounds']:>10.0f} {D['messages']:>10.0f} {D['rounds']:>10.0f} "
              f"{D['messages'] / A['messages']:>12.2f} {A['solved']:>4}/{D['solved']:<5} "
              f"{time.perf_counter() - t:>8.1f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
