"""One communicator, five scales (DESIGN.md). ``cluster.run`` for the simulator and local processes,
``cluster.init`` inside a process started by torchrun, srun or Ray Train.

    res = cluster.run(worker, world_size=4, backend="sim")     # or backend="process"
    res.values[r], res.stats[r].bytes_sent, res.sim_time
"""
from __future__ import annotations

from typing import Any, Callable

from .core import (ClusterError, Comm, Communicator, DeadlockError, Faults, MessageLostError, Network, PeerCrashedError,
                   RankCrashed, RankError, RankStats, RunResult, RunTimeout, TraceEvent, check_run_args)
from .launch import init

BACKENDS = ("sim", "process")

__all__ = ["run", "init", "Network", "Faults", "RunResult", "RankStats", "TraceEvent", "Comm", "Communicator",
           "ClusterError", "RankError", "RankCrashed", "PeerCrashedError", "MessageLostError", "DeadlockError",
           "RunTimeout", "BACKENDS", "plot_timeline"]


def run(fn: Callable[..., Any], world_size: int, backend: str = "sim", args: tuple = (),
        kwargs: dict | None = None, network: Network | None = None, faults: Faults | None = None,
        timeout: float = 300.0, trace: bool = False, quiet: bool = False) -> RunResult:
    """Call ``fn(comm, *args, **kwargs)`` on ``world_size`` ranks and gather what each returns.

    backend "sim": one greenlet per rank with an alpha-beta clock (``network``), deterministic, deadlock detection.
    backend "process": real processes over torch.distributed (gloo); ``quiet`` hides their output.
    Any rank's exception ends the run and is raised here as RankError with that rank's traceback.
    """
    world_size = check_run_args(fn, world_size, timeout)
    kwargs = dict(kwargs or {})
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra arguments for fn, got {type(args).__name__}")
    if network is not None and not isinstance(network, Network):
        raise TypeError("network must be cluster.Network(alpha=..., beta=...)")
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError("faults must be cluster.Faults(crash={rank: n}, slow={rank: factor}, drop={rank: {n}}, loss=p)")
    if backend == "sim":
        from .sim import run_sim

        return run_sim(fn, world_size, tuple(args), kwargs, network, faults, timeout, trace)
    if backend == "process":
        if network is not None:
            raise ValueError("network= models the simulator's links; real processes use the real network")
        if faults is not None and faults.lossy:
            raise ValueError("Faults(drop=..., loss=...) loses messages on the simulator's links; "
                             "real processes use real links: run with backend='sim'")
        from .spawn import run_process

        return run_process(fn, world_size, tuple(args), kwargs, faults, timeout, trace, quiet)
    raise ValueError(f"unknown backend {backend!r}: choose one of {BACKENDS} "
                     f"(GPUs, Slurm and Ray start scripts that call cluster.init())")


def plot_timeline(result: RunResult, ax: Any = None, title: str | None = None) -> Any:
    """Draw the trace of a run (``trace=True``) as one lane per rank: sends and receives over time."""
    from .trace import plot_timeline as _plot

    return _plot(result, ax=ax, title=title)
