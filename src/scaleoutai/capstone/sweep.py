"""A scaling sweep: run one script at K = 1, 2, 4, ... workers, R repeats each, every run tracked (Ch 5, 41).

Repeats are interleaved (K=1, K=2, K=4, K=1, ...) so a slow drift of the machine spreads over every K
instead of biasing one. Each run gets the tracking settings through its environment (see ``tracking``);
a failed run is recorded and the sweep goes on, but the sweep then reports failure.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from . import tracking as tr
from ..errors import CapstoneError
from .prices import DEFAULT_INSTANCE_TYPE, load_prices
from .report import Row, aggregate, format_table, load_runs


@dataclass
class Trial:
    """One launch: K workers (0 = the single-machine baseline), its repeat, exit status and outer time."""

    workers: int
    repeat: int
    returncode: int | None = None
    seconds: float = 0.0
    tracked: bool = False

    @property
    def name(self) -> str:
        return f"{'baseline' if self.workers == 0 else 'K=' + str(self.workers)}#{self.repeat}"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.tracked


@dataclass
class SweepResult:
    experiment: str
    sweep_id: str
    uri: str
    trials: list[Trial] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    def table(self) -> str:
        return format_table(self.rows) if self.rows else "(no finished run)"


def absolute_uri(uri: str | None) -> str:
    """A sqlite URI made absolute, so every rank finds the same database whatever its working directory."""
    uri = uri or tr.tracking_uri()
    db = tr.sqlite_path(uri)
    return f"sqlite:///{db.resolve()}" if db is not None else uri


def parse_workers(text: str | Sequence[int]) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; each K a whole number >= 1."""
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        ks = [int(str(k).strip()) for k in items if str(k).strip()]
    except ValueError:
        raise CapstoneError(f"--workers {text!r}: give worker counts separated by commas, e.g. 1,2,4") from None
    if not ks or min(ks) < 1:
        raise CapstoneError(f"--workers {text!r}: every worker count must be >= 1, e.g. 1,2,4")
    return sorted(set(ks))


def _billed(scale: str, instance_type: str, k: int, nodes: int) -> int:
    if instance_type == DEFAULT_INSTANCE_TYPE:
        return 1
    return k if scale == "local" else nodes


def sweep(script: str | os.PathLike, workers: str | Sequence[int] = (1, 2, 4), scale: str = "local",
          experiment: str | None = None, instance_type: str = DEFAULT_INSTANCE_TYPE, repeats: int = 1,
          script_args: Sequence[str] = (), baseline: str | os.PathLike | None = None, uri: str | None = None,
          nodes: int = 1, gpus_per_node: int = 0, timeout: float | None = None, progress: bool = True,
          launcher: Callable[..., int] | None = None) -> SweepResult:
    """Launch ``script`` at each K (``repeats`` times, interleaved), tracked in ``experiment``.

    ``baseline``: a single-process script run first in each repeat and tagged as T_1. ``instance_type``
    prices the runs from capstone/prices.yaml; at the local scale a cloud type means "each process
    stands in for one such instance" (cost = price * K * T / 3600), ``local-laptop`` bills one laptop.
    """
    script = Path(script)
    if not script.is_file():
        raise CapstoneError(f"no script at {script}; give the path of a script that calls capstone.track")
    if baseline is not None and not Path(baseline).is_file():
        raise CapstoneError(f"no baseline script at {baseline}")
    if int(repeats) < 1:
        raise CapstoneError(f"--repeats {repeats}: need at least one run per K")
    ks = parse_workers(workers)
    load_prices().lookup(instance_type)  # fail before launching anything
    if launcher is None:
        from ..cluster.launchers import SCALES, run_script as launcher

        if scale not in SCALES:
            raise CapstoneError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    uri = absolute_uri(uri)
    experiment = experiment or script.stem
    result = SweepResult(experiment, uuid.uuid4().hex[:12], uri)
    plan = [Trial(k, r) for r in range(int(repeats))
            for k in ([0] if baseline is not None else []) + ks]
    from tqdm.auto import tqdm

    bar = tqdm(plan, desc=f"sweep {experiment}", unit="run", disable=not progress, file=sys.stderr)
    for trial in bar:
        bar.set_postfix_str(trial.name)
        k = max(1, trial.workers)
        env = {"MLFLOW_TRACKING_URI": uri, tr.ENV_EXPERIMENT: experiment, tr.ENV_SCALE: scale,
               tr.ENV_INSTANCE_TYPE: instance_type, tr.ENV_INSTANCES: str(_billed(scale, instance_type, k, nodes)),
               tr.ENV_SWEEP: result.sweep_id, tr.ENV_TRIAL: trial.name, tr.ENV_LAUNCH_TIME: repr(time.time())}
        start = time.perf_counter()
        try:
            if trial.workers == 0:
                proc = subprocess.run([sys.executable, str(baseline), *script_args], env={**os.environ, **env},
                                      timeout=timeout)
                trial.returncode = proc.returncode
            else:
                trial.returncode = int(launcher(str(script), scale=scale, workers=k, nodes=nodes,
                                                gpus_per_node=gpus_per_node, script_args=tuple(script_args),
                                                env=env, timeout=timeout))
        except subprocess.TimeoutExpired:
            trial.returncode = 124
        trial.seconds = time.perf_counter() - start
    bar.close()
    runs = load_runs(experiment, uri, sweep_id=result.sweep_id)
    seen = {r["trial"] for r in runs if r["status"] == "FINISHED"}
    for trial in plan:
        trial.tracked = trial.name in seen
    result.trials = plan
    # runs whose answer failed the baseline check are not timings: with none left the table stays empty
    # and the failures below say why, rather than aggregate() raising
    if any(r["status"] == "FINISHED" and r.get("verified") != "false" for r in runs):
        result.rows = aggregate(runs)
    return result


def describe_failures(result: SweepResult) -> list[str]:
    """One line per failed trial: which K, and whether it crashed or never called capstone.track."""
    lines = []
    for t in result.failed:
        why = (f"exit status {t.returncode}" if t.returncode != 0
               else "finished but logged no run (does the script call capstone.track?)")
        lines.append(f"{t.name}: {why}")
    return lines


def summary(result: SweepResult) -> str:
    """The table of K, T_p, S_p, E_p and cost, then the failures if any."""
    head = f"experiment {result.experiment} (sweep {result.sweep_id}) in {result.uri}"
    fails = describe_failures(result)
    tail = ("\nFAILED: " + "; ".join(fails)) if fails else ""
    return f"{head}\n{result.table()}{tail}"
