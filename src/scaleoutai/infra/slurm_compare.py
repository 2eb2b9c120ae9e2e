"""Our backfill simulator against a real Slurm (Chapter 33, Section 5).

``BackfillSlurm`` is the private one-node cluster of Appendix B (``LocalSlurm``) with the conf a scheduling
experiment needs: the node declared with ``cpus`` CPUs (``SlurmdParameters=config_overrides``, so slurmd
does not drain a laptop that has fewer), CPUs as the consumable (``CR_CPU``, one task = one CPU), the
backfill scheduler re-planning every second (``bf_interval=1``, ``bf_resolution=1``), FIFO priority, and
finished jobs kept for ten minutes so ``scontrol show job`` can still report them.

``run_on_slurm`` submits a trace with every job held (the partition is DOWN while they queue, so Slurm
sees the whole set at once, as the simulator does at t = 0), releases them together, waits and reads the
start and end times back. The job of ``size`` s, ``runtime`` r and ``estimate`` e becomes
``sbatch -n s --time=e/60 --wrap "sleep r"`` (Slurm's time limit is in whole minutes).
"""
from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..cluster.launchers.slurm_local import LocalSlurm, unavailable_reason
from ..datasets import JobTrace
from .scheduling import make_trace

__all__ = ["BackfillSlurm", "SlurmRun", "run_on_slurm", "start_order", "order_agreement", "slurm_job_set",
           "unavailable_reason"]


class BackfillSlurm(LocalSlurm):
    """A private Slurm with ``SchedulerType=sched/backfill``, ``cpus`` CPUs and FIFO priority."""

    def __init__(self, cpus: int = 8, root: str | None = None, timeout: float = 90.0):
        if cpus < 1:
            raise ValueError(f"declare at least 1 CPU for the Slurm node, got {cpus}")
        super().__init__(root=root, timeout=timeout)
        self.cpus = cpus

    def _write_conf(self) -> None:
        super()._write_conf()
        swap = {
            "NodeName=": f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            "SchedulerParameters=": "SchedulerParameters=bf_interval=1,bf_resolution=1,sched_interval=1,"
                                    "sched_min_interval=0",
            "SelectTypeParameters=": "SelectTypeParameters=CR_CPU",
            "PartitionName=": "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO",
        }
        lines = [next((v for k, v in swap.items() if ln.startswith(k)), ln) for ln in self.conf.read_text().splitlines()]
        lines += ["SchedulerType=sched/backfill", "SlurmdParameters=config_overrides", "PriorityType=priority/basic",
                  "MinJobAge=600"]
        self.conf.write_text("\n".join(lines) + "\n")


@dataclass
class SlurmRun:
    """Start and end of each job in seconds after the first start (Slurm reports whole seconds)."""

    job_ids: list[str]
    start: np.ndarray
    end: np.ndarray
    wall_s: float


def slurm_job_set() -> JobTrace:
    """The chapter's small job set, 8 CPUs, all submitted at t = 0: rows (size, runtime s, estimate s).

    Job 0 takes 6 CPUs; job 1 (4 CPUs) is the blocked head, reserved at 120 s (job 0's limit); job 2
    (4 CPUs) can start beside it then. Job 3 (2 CPUs, 3-minute limit) fits the 2 idle CPUs now and, by
    its limit, overlaps the head's reservation only on the head's spare CPUs, so EASY backfills it; but
    those spare CPUs are job 2's, so conservative backfill (and Slurm) keep it waiting and start the
    short job 4 instead. FIFO, EASY and conservative give three different start orders.
    """
    rows = [(6, 6, 120), (4, 4, 60), (4, 5, 60), (2, 8, 180), (2, 3, 60)]
    return make_trace([(0, s, r, e) for s, r, e in rows])


def _sh(cmd: list[str], slurm: LocalSlurm) -> str:
    res = subprocess.run(cmd, env=slurm.env(), capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def run_on_slurm(trace: JobTrace, slurm: LocalSlurm, timeout: float = 60.0) -> SlurmRun:
    """Submit every job held, release them at once, wait for all to finish, read back start/end times."""
    if len(trace) == 0 or np.any(trace.submit != 0):
        raise ValueError("run_on_slurm replays a batch: give a non-empty trace with every submit = 0")
    if np.any(trace.estimate % 60) or np.any(trace.runtime != np.round(trace.runtime)):
        raise ValueError("Slurm time limits are whole minutes: use estimates that are multiples of 60 s "
                         "and whole-second runtimes")
    t0 = time.monotonic()
    _sh(["scontrol", "update", "PartitionName=debug", "State=DOWN"], slurm)
    ids = []
    for s, r, e in zip(trace.size, trace.runtime, trace.estimate):
        out = _sh(["sbatch", "--parsable", "-n", str(int(s)), f"--time={int(e) // 60}", "-o", "/dev/null",
                   "--wrap", f"sleep {int(r)}"], slurm)
        ids.append(out.strip().split(";")[0])
    _sh(["scontrol", "update", "PartitionName=debug", "State=UP"], slurm)
    deadline = time.monotonic() + timeout
    while _sh(["squeue", "-h", "-o", "%i"], slurm).strip():
        if time.monotonic() > deadline:
            _sh(["scancel", *ids], slurm)
            raise TimeoutError(f"the Slurm jobs had not all finished after {timeout:.0f} s")
        time.sleep(0.5)
    start, end = [], []
    for i in ids:
        info = _sh(["scontrol", "show", "job", "-o", i], slurm)
        st = re.search(r"StartTime=(\S+)", info).group(1)
        en = re.search(r"EndTime=(\S+)", info).group(1)
        start.append(datetime.fromisoformat(st).timestamp())
        end.append(datetime.fromisoformat(en).timestamp())
    s0 = min(start)
    return SlurmRun(ids, np.array(start) - s0, np.array(end) - s0, time.monotonic() - t0)


def start_order(start: np.ndarray) -> list[int]:
    """Jobs by start time, ties by job index (= submit order, as Slurm's FIFO priority breaks them)."""
    start = np.asarray(start, dtype=float)
    return [int(j) for j in np.lexsort((np.arange(len(start)), start))]


def order_agreement(a: np.ndarray, b: np.ndarray, tie: float = 0.0) -> float:
    """Fraction of job pairs that two schedules start in the same order (Kendall-style concordance);
    a pair that starts within ``tie`` seconds in either schedule counts as agreeing."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(a)
    if n != len(b):
        raise ValueError("compare two schedules of the same jobs")
    if n < 2:
        return 1.0
    i, j = np.triu_indices(n, 1)
    da, db = a[i] - a[j], b[i] - b[j]
    ok = (np.sign(da) == np.sign(db)) | (np.abs(da) <= tie) | (np.abs(db) <= tie)
    return float(ok.mean()) if len(ok) else 1.0
