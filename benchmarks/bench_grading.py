"""Benchmark: grade N lab04 submissions with full isolation and --jobs J; print seconds in all.

    python benchmarks/bench_grading.py --n 100 --jobs 2        # the README figure (target: <= 180 s)

Submissions: the reference solution, a naive gather-broadcast (fails the bandwidth test) and one that
returns its input (fails correctness), in rotation, so every check path is exercised.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

NAIVE = '''
import numpy as np

def ring_allreduce(comm, x):
    if comm.rank == 0:
        total = x.copy()
        for src in range(1, comm.size):
            total = total + comm.recv(src)
        for dst in range(1, comm.size):
            comm.send(total, dst)
        return total
    comm.send(x, 0)
    return comm.recv(0)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from grading_helpers import RING, WRONG, notebook

    from scaleoutai.grading.labs import find_lab
    from scaleoutai.grading.runner import grade_batch

    with tempfile.TemporaryDirectory() as tmp:
        subs, out = Path(tmp) / "subs", Path(tmp) / "out"
        kinds = [RING, RING, RING, NAIVE, WRONG]
        for i in range(args.n):
            notebook(subs / f"student{i:03d}" / "lab04.ipynb", kinds[i % len(kinds)])
        t0 = time.perf_counter()
        summary = grade_batch(find_lab("lab04", ROOT), [subs], out, jobs=args.jobs)
        seconds = time.perf_counter() - t0
        scores = [json.loads(f.read_text())["score"] for f in out.glob("*/results.json")]
    print(f"graded {summary.graded} lab04 submissions with --jobs {args.jobs} on {os.cpu_count()} cores "
          f"({summary.failed} failed to run) in {seconds:.1f} s ({seconds / max(1, args.n):.2f} s each); "
          f"scores: {sorted(set(scores))}")


if __name__ == "__main__":
    main()
