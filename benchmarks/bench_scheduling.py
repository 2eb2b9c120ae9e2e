"""Cluster scheduling (Chapter 33): our backfill simulator against a real Slurm, and the policies on a
10,000-job generated trace.

Part 1 (needs root and slurm-wlm; skipped with the reason otherwise): the chapter's 5-job set on a
private one-node Slurm (8 CPUs, sched/backfill, bf_interval=1), start order and waits compared with our
FIFO, EASY and conservative backfill (pairwise start-order agreement; mean |start difference|).
Part 2: ``datasets.job_trace(N, capacity=128, load)``; per policy, the simulator's speed (jobs per second,
best of ``--repeat``), utilisation, mean wait, mean bounded slowdown (tau = 10 s), fragmentation.
Usage: python benchmarks/bench_scheduling.py [--quick] [--jobs 10000] [--load 0.85] [--no-slurm]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _common import machine
from scaleoutai import datasets
from scaleoutai.infra import sched_metrics as sm
from scaleoutai.infra import scheduling as sc
from scaleoutai.infra import slurm_compare as sl


def slurm_part() -> None:
    why = sl.unavailable_reason()
    if why:
        print(f"Slurm comparison skipped: {why}")
        return
    tr = sl.slurm_job_set()
    t0 = time.perf_counter()
    with sl.BackfillSlurm(cpus=8) as slurm:
        up = time.perf_counter() - t0
        run = sl.run_on_slurm(tr, slurm, timeout=60)
    print(f"Slurm 22.05 sched/backfill, 8 CPUs: up in {up:.1f} s, 5 jobs in {run.wall_s:.1f} s; "
          f"starts {run.start.astype(int).tolist()} order {sl.start_order(run.start)}, "
          f"mean wait {run.start.mean():.1f} s")
    for policy in ("fifo", "easy", "conservative"):
        s = sc.simulate(tr, 8, policy)
        same = sl.start_order(s.start) == sl.start_order(run.start)
        print(f"  ours {policy:12s} starts {s.start.astype(int).tolist()} order {sl.start_order(s.start)} "
              f"same order: {'yes' if same else 'no '}  pairwise agreement {sl.order_agreement(s.start, run.start):.2f}"
              f"  mean wait {s.start.mean():.1f} s  mean |start - Slurm| {np.abs(s.start - run.start).mean():.1f} s")


def policy_part(n: int, load: float, repeat: int) -> None:
    tr = datasets.job_trace(n, capacity=128, load=load, seed=1)
    print(f"\n{n} jobs, 128 nodes, offered load {load}, seed 1")
    print(f"{'policy':12s} {'jobs/s':>9s} {'util':>5s} {'mean wait h':>11s} {'mean bsld':>10s} {'frag':>5s}")
    for policy in ("fifo", "easy", "conservative", "gang"):
        best = np.inf
        for _ in range(repeat if policy != "conservative" else 1):
            t0 = time.perf_counter()
            s = sc.simulate(tr, 128, policy)
            best = min(best, time.perf_counter() - t0)
        assert sm.violations(tr, s) == [], policy
        m = sm.metrics(tr, s)
        print(f"{policy:12s} {n / best:9.0f} {m['utilisation']:5.2f} {m['mean_wait'] / 3600:11.1f} "
              f"{m['mean_bsld']:10.1f} {m['fragmentation']:5.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 jobs, one repeat")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--load", type=float, default=0.85)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-slurm", action="store_true")
    a = ap.parse_args()
    n, repeat = (2000, 1) if a.quick else (a.jobs, a.repeat)
    print(machine(), f"| load average {os.getloadavg()[0]:.2f}")
    if not a.no_slurm:
        slurm_part()
    policy_part(n, a.load, repeat)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
