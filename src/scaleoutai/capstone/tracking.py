"""Track one run of a capstone (or Chapter 5) experiment in MLflow, from rank 0 only (Chapter 41).

    with capstone.track(comm, experiment="logreg", params={"n": n}, problem="logistic regression") as run:
        ...                          # the timed work, on every rank
        run.log_items(n * steps)     # throughput = items / wall_time
        run.log_artifact("w.npy")

Every rank calls ``track`` with the same arguments; rank 0 opens the MLflow run, the others get a
no-op object with the same methods. All ranks meet at a barrier before and after the body, so
``wall_time`` is the makespan of the distributed work, without MLflow's own start-up. Metrics:
wall_time T_p, startup_time (launch to ``track``), throughput (items / T_p) and
cost = price_per_hour * instances * T_p / 3600. A body that raises leaves a FAILED run.

The store is ``MLFLOW_TRACKING_URI`` when set (a tracking server for multi-node runs), else an embedded
sqlite file ``sqlite:///mlflow.db`` in the working directory. ``scaleout capstone sweep`` passes the
experiment, scale, instance type and launch time through the SCALEOUT_* variables below.
"""
from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import CapstoneError
from .prices import DEFAULT_INSTANCE_TYPE, Price, load_prices
from ..cluster import Comm

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "capstone"
ENV_EXPERIMENT = "SCALEOUT_EXPERIMENT"
ENV_SCALE = "SCALEOUT_SCALE"
ENV_INSTANCE_TYPE = "SCALEOUT_INSTANCE_TYPE"
ENV_INSTANCES = "SCALEOUT_INSTANCES"        # billed instances; default: see billed_instances()
ENV_LAUNCH_TIME = "SCALEOUT_LAUNCH_TIME"    # time.time() when the launcher started the run
ENV_SWEEP = "SCALEOUT_SWEEP_ID"
ENV_TRIAL = "SCALEOUT_TRIAL"
RESERVED = ("problem", "scale", "world_size", "nodes", "backend", "instance_type", "instances",
            "price_per_hour", "price_source", "price_date", "cpu_model", "cpu_cores", "gpu", "gpu_count",
            "hostname", "python", "command")


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` or the embedded sqlite store in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative to cwd, or absolute with four slashes)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def hardware() -> dict[str, Any]:
    """CPU model and cores, GPU name and count, host: what a reader needs to reproduce a timing."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus: list[str] = []
    torch = sys.modules.get("torch")  # never import torch just to look: it costs seconds
    if torch is not None and torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    elif shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            gpus = [g.strip() for g in out.stdout.splitlines() if g.strip()] if out.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            gpus = []
    return {"cpu_model": cpu, "cpu_cores": os.cpu_count() or 1, "gpu": gpus[0] if gpus else "none",
            "gpu_count": len(gpus), "hostname": socket.gethostname(), "python": platform.python_version()}


def billed_instances(scale: str, instance_type: str, world_size: int) -> int:
    """How many instances a run pays for: $SCALEOUT_INSTANCES, else one laptop for ``local-laptop``,
    one instance per process when local processes stand in for cloud instances, else one per node."""
    if os.environ.get(ENV_INSTANCES):
        return int(os.environ[ENV_INSTANCES])
    if instance_type == DEFAULT_INSTANCE_TYPE:
        return 1
    if scale == "local":
        return world_size
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world_size) or world_size)
    return max(1, world_size // max(1, per_node))


def _backend(comm: Comm) -> str:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return str(dist.get_backend())
    return str(getattr(comm, "backend", "none")) if comm is not None else "none"


def _startup_time(t_enter: float) -> float:
    launched = os.environ.get(ENV_LAUNCH_TIME)
    if launched:
        return max(0.0, t_enter - float(launched))
    import psutil

    return max(0.0, t_enter - psutil.Process().create_time())


class NullRun:
    """What ranks other than 0 get: the same methods, doing nothing."""

    active = False
    run_id: str | None = None

    def __init__(self) -> None:
        self.items = 0

    def log_items(self, n: int) -> None:
        self.items += int(n)

    def log_metric(self, name: str, value: float, step: int | None = None) -> None: ...

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...

    def log_param(self, name: str, value: Any) -> None: ...

    def log_params(self, params: dict[str, Any]) -> None: ...

    def set_tag(self, name: str, value: Any) -> None: ...

    def log_artifact(self, path: str | os.PathLike) -> None: ...


class Run(NullRun):
    """Rank 0's handle on its MLflow run (``run_id``); metrics, params, tags and files go there."""

    active = True

    def __init__(self, client: Any, run_id: str, params: dict[str, Any]) -> None:
        super().__init__()
        self.client, self.run_id, self.params = client, run_id, params

    def log_metric(self, name: str, value: float, step: int | None = None) -> None:
        self.client.log_metric(self.run_id, name, float(value), step=step or 0)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step or 0) for k, v in metrics.items()])

    def log_param(self, name: str, value: Any) -> None:
        self.client.log_param(self.run_id, name, value)

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def set_tag(self, name: str, value: Any) -> None:
        self.client.set_tag(self.run_id, name, str(value))

    def log_artifact(self, path: str | os.PathLike) -> None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"log_artifact: no file or folder at {path}")
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path=path.name)
        else:
            self.client.log_artifact(self.run_id, str(path))


def quiet_mlflow_logs() -> None:
    """Hide the sqlite store's migration chatter (INFO lines on every fresh database)."""
    import logging

    for name in ("alembic", "mlflow.store.db.utils"):
        logging.getLogger(name).setLevel(logging.WARNING)


def open_experiment(name: str, uri: str) -> tuple[Any, str]:
    """(MlflowClient, experiment id), creating the experiment; a sqlite store keeps its artifacts in
    ``mlartifacts/`` beside the database, so every rank and every working directory finds them."""
    import mlflow
    from mlflow.exceptions import MlflowException

    quiet_mlflow_logs()
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return client, exp.experiment_id
    db = sqlite_path(uri)
    location = (db.resolve().parent / "mlartifacts" / name).as_uri() if db is not None else None
    try:
        return client, client.create_experiment(name, artifact_location=location)
    except MlflowException:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return client, exp.experiment_id


def _start(comm: Comm, rank: int, size: int, experiment: str, params: dict[str, Any], problem: str | None,
           baseline: bool, run_name: str | None, tags: dict[str, Any] | None, uri: str, scale: str,
           price: Price, startup: float) -> Run:
    client, exp_id = open_experiment(experiment, uri)
    instances = billed_instances(scale, price.instance_type, size)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", size) or size)
    logged = {"problem": problem or Path(sys.argv[0]).stem, "scale": scale, "world_size": size,
              "nodes": max(1, size // max(1, per_node)), "backend": _backend(comm),
              "instance_type": price.instance_type, "instances": instances,
              "price_per_hour": price.price_per_hour, "price_source": price.source, "price_date": price.date,
              **hardware(), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:500]}
    logged.update(params)
    all_tags = {"scaleout.role": "baseline" if baseline else "distributed",
                "scaleout.sweep": os.environ.get(ENV_SWEEP, ""), "scaleout.trial": os.environ.get(ENV_TRIAL, "")}
    all_tags.update({k: str(v) for k, v in (tags or {}).items()})
    name = run_name or f"{'baseline' if baseline else 'K=' + str(size)}-{scale}"
    mlrun = client.create_run(exp_id, run_name=name, tags=all_tags)
    run = Run(client, mlrun.info.run_id, logged)
    run.log_params(logged)
    run.log_metric("startup_time", startup)
    return run


def _finish(run: Run, status: str, wall: float, exc: BaseException | None) -> None:
    from ..perf import run_cost

    metrics = {"wall_time": wall}
    if run.items:
        metrics["throughput"] = run.items / wall if wall > 0 else float("nan")
        metrics["items"] = run.items
    metrics["cost"] = run_cost(float(run.params["price_per_hour"]), int(run.params["instances"]), wall)
    run.log_metrics(metrics)
    if exc is not None:
        run.set_tag("scaleout.error", f"{type(exc).__name__}: {exc}"[:1000])
    run.client.set_terminated(run.run_id, status=status)


@contextmanager
def track(comm: Comm = None, experiment: str | None = None, params: dict[str, Any] | None = None,
          problem: str | None = None, *, baseline: bool = False, items: int | None = None,
          startup_time: float | None = None, run_name: str | None = None, tags: dict[str, Any] | None = None,
          scale: str | None = None, instance_type: str | None = None, uri: str | None = None,
          prices: str | os.PathLike | None = None) -> Iterator[NullRun]:
    """Time the body on every rank and record it as one MLflow run from rank 0 (Chapter 41).

    ``comm``: the communicator (None: a single process, e.g. the baseline). ``baseline=True`` tags the
    run as the single-machine baseline T_1 of the speedup S_p = T_1 / T_p. ``items`` (or
    ``run.log_items``) gives throughput. Scale and instance type default to $SCALEOUT_SCALE and
    $SCALEOUT_INSTANCE_TYPE (else "local" and "local-laptop"); the experiment to $SCALEOUT_EXPERIMENT.
    """
    t_enter = time.time()
    rank = comm.rank if comm is not None else int(os.environ.get("RANK", "0"))
    size = comm.size if comm is not None else 1
    params = dict(params or {})
    clash = sorted(set(params) & set(RESERVED))
    if clash:
        raise CapstoneError(f"track(params=...) may not set {clash}: track logs them itself")
    experiment = experiment or os.environ.get(ENV_EXPERIMENT) or DEFAULT_EXPERIMENT
    scale = scale or os.environ.get(ENV_SCALE) or "local"
    # Every rank reads the price, so a bad instance type fails on all ranks alike instead of hanging.
    price = load_prices(prices).lookup(instance_type or os.environ.get(ENV_INSTANCE_TYPE) or DEFAULT_INSTANCE_TYPE)
    startup = float(startup_time) if startup_time is not None else _startup_time(t_enter)
    run: NullRun = NullRun()
    if rank == 0:
        run = _start(comm, rank, size, experiment, params, problem, baseline, run_name, tags,
                     uri or tracking_uri(), scale, price, startup)
    if items:
        run.log_items(items)
    if comm is not None and size > 1:
        comm.barrier()
    t0 = time.perf_counter()
    try:
        yield run
        if comm is not None and size > 1:
            comm.barrier()  # T_p is the makespan: rank 0 waits for the slowest rank
    except BaseException as exc:
        if isinstance(run, Run):
            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
            _finish(run, status, time.perf_counter() - t0, exc)
        raise
    if isinstance(run, Run):
        _finish(run, "FINISHED", time.perf_counter() - t0, None)
