"""Performance models and evaluation discipline (Chapters 3 and 5).

    speedup, efficiency, amdahl_speedup, gustafson_speedup, karp_flatt     S_p, E_p and their laws
    straggler_step_time, expected_max_normal                               synchronous steps wait for the slowest
    collective_time, collective_bytes_per_rank, COLLECTIVES, crossover_bytes, fit_alpha_beta
    roofline, ridge_point, plot_roofline
    measure -> Timing                                                      warm-up, repeats, median, CI
    scaling_table, plot_scaling, run_cost                                  scaling sweeps and their cost
    hardware (a submodule): Accelerator rows (A10G, L4, A100, H100, H200), decode_step_seconds   the one GPU table
    numerics (a submodule): naive_sum, pairwise_sum, kahan_sum, tree_sum    floating-point sums vs math.fsum (App. A)

NumPy only at import; matplotlib loads inside the plotting functions.
"""
from __future__ import annotations

from .alphabeta import (COLLECTIVES, AlphaBetaFit, collective_bytes_per_rank, collective_time, crossover_bytes,
                        fit_alpha_beta)
from .models import (amdahl_speedup, efficiency, expected_max_normal, gustafson_speedup, karp_flatt, ridge_point,
                     roofline, run_cost, scaling_table, speedup, straggler_step_time)
from .plots import plot_roofline, plot_scaling
from .native import native_stderr
from .timing import Timing, measure

__all__ = ["speedup", "efficiency", "amdahl_speedup", "gustafson_speedup", "karp_flatt", "straggler_step_time",
           "expected_max_normal", "COLLECTIVES", "collective_time", "collective_bytes_per_rank", "crossover_bytes",
           "AlphaBetaFit", "fit_alpha_beta", "roofline", "ridge_point", "plot_roofline", "Timing", "measure",
           "scaling_table", "plot_scaling", "run_cost", "native_stderr"]
