"""CFR on Kuhn poker (Chapter 28): exploitability of the average policy against iterations, and the time per
iteration, for scaleoutai's vectorised CFR and OpenSpiel's CFRSolver, in one run.

Both use alternating updates and uniform averaging, so their exploitabilities should agree to rounding; the
figure that differs is time. Times exclude the exploitability evaluations (taken at the listed counts).
Usage: python benchmarks/bench_cfr.py [--quick] [--iterations 10 100 1000 10000]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _common import machine, report
from scaleoutai.agents import cfr as C


def ours(marks: list[int]) -> tuple[dict[int, float], float]:
    """Exploitability at each mark and seconds per iteration of our CFR."""
    regret, cum, policy = np.zeros((12, 2)), np.zeros((12, 2)), C.uniform_policy()
    curve, spent = {}, 0.0
    for t in range(1, max(marks) + 1):
        t0 = time.perf_counter()
        policy = C.cfr_iteration(regret, cum, policy)
        spent += time.perf_counter() - t0
        if t in marks:
            curve[t] = C.exploitability(C.average_policy(cum))
    return curve, spent / max(marks)


def openspiel(marks: list[int]) -> tuple[dict[int, float], float]:
    """The same for ``open_spiel.python.algorithms.cfr.CFRSolver`` on ``pyspiel.load_game("kuhn_poker")``."""
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    game = pyspiel.load_game("kuhn_poker")
    solver, curve, spent = cfr.CFRSolver(game), {}, 0.0
    for t in range(1, max(marks) + 1):
        t0 = time.perf_counter()
        solver.evaluate_and_update_policy()
        spent += time.perf_counter() - t0
        if t in marks:
            curve[t] = exploitability.exploitability(game, solver.average_policy())
    return curve, spent / max(marks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10, 100 and 1000 iterations")
    ap.add_argument("--iterations", type=int, nargs="+", default=[10, 100, 1000, 10000])
    a = ap.parse_args()
    marks = [10, 100, 1000] if a.quick else sorted(a.iterations)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    c1, s1 = ours(marks)
    c2, s2 = openspiel(marks)
    print("Kuhn poker, CFR with alternating updates; exploitability of the average policy (0 at equilibrium)")
    print(f"{'iterations':>10} {'scaleoutai':>12} {'OpenSpiel':>12} {'ratio':>8}")
    for t in marks:
        print(f"{t:>10} {c1[t]:>12.3e} {c2[t]:>12.3e} {c1[t] / c2[t]:>8.4f}")
    print(f"time per iteration: scaleoutai {s1 * 1e6:.0f} us, OpenSpiel {s2 * 1e6:.0f} us ({s2 / s1:.1f}x)")
    worst = max(abs(c1[t] / c2[t] - 1.0) for t in marks)
    report("largest relative gap in exploitability, ours vs OpenSpiel", worst, "", "< 1e-6", worst < 1e-6)
    report("OpenSpiel time / our time per iteration", s2 / s1, "x", ">= 1", s2 / s1 >= 1.0)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
