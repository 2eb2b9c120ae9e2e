"""Start-up cost of cluster.run(..., backend="process", world_size=2) for a trivial function.

The first call includes importing torch in this process; the figure is the median of the later calls
(a notebook pays the import once). Target: <= 3 s.
Usage: python benchmarks/bench_process_startup.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import machine, report
from scaleoutai import cluster


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    times = []
    for _ in range(a.repeats + 1):
        t = time.perf_counter()
        assert cluster.run(lambda comm: comm.rank, 2, backend="process", quiet=True).values == [0, 1]
        times.append(time.perf_counter() - t)
    print(f"machine: {machine()}")
    print(f"first call (imports torch here too) {times[0]:.2f} s; later calls: "
          + ", ".join(f"{t:.2f}" for t in times[1:]))
    med = float(np.median(times[1:]))
    report("cluster.run(process, K=2) trivial function, median", med, "s", "<= 3 s", med <= 3.0)


if __name__ == "__main__":
    main()
