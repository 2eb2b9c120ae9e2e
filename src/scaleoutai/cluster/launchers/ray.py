"""Scale "ray": the script inside Ray Train's TorchTrainer, K workers (Appendix B).

Ray Train starts K worker actors and sets up one torch.distributed group across them (gloo on CPU,
nccl with GPUs); each worker runs the script with ``runpy`` and the script's ``cluster.init()`` finds
that group already initialised. Each rank's output is captured and handed to a small collector actor,
then printed by the driver as ``[rank r] ...``, so it reaches the terminal on a remote cluster too.

The driver runs in its own process (``python -m scaleoutai.cluster.launchers.ray JOB.json``), so a
timeout ends Ray cleanly without touching the caller's process. ``address``: an existing cluster
("ray://head:10001" or "auto"); default ``RAY_ADDRESS`` or a private local Ray.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Mapping, Sequence

from .local import run_group


def run_ray(script: str, workers: int, gpus: bool, script_args: Sequence[str], env: Mapping[str, str],
            extra_env: Mapping[str, str], timeout: float | None, address: str | None = None) -> int:
    """Start the driver process; return its exit status (0 when every rank's script exited 0)."""
    job = {"script": os.path.abspath(script), "args": list(script_args), "workers": workers, "gpus": gpus,
           "env": dict(extra_env), "address": address or env.get("RAY_ADDRESS") or None, "timeout": timeout}
    with tempfile.TemporaryDirectory(prefix="scaleout-ray-") as tmp:
        path = os.path.join(tmp, "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        cmd = [sys.executable, "-m", "scaleoutai.cluster.launchers.ray", path]
        # The driver enforces ``timeout`` itself and shuts Ray down; this backstop only catches a hang.
        backstop = None if timeout is None else timeout + 60
        return run_group([cmd], [{**env, "PYTHONUNBUFFERED": "1"}], [None], backstop)


def _train_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: run the script as ``__main__`` with its argv, capture what it prints."""
    import contextlib
    import io
    import runpy
    import traceback

    import ray
    import ray.train

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    os.environ.update(config["env"])
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(ctx.get_local_rank())})
    script = config["script"]
    if not os.path.exists(script):  # a remote node without the file: run the source the driver sent
        script = os.path.join(tempfile.mkdtemp(), os.path.basename(script))
        with open(script, "w") as f:
            f.write(config["source"])
    buf, status = io.StringIO(), 0
    argv, path = sys.argv, list(sys.path)
    try:
        sys.argv = [script, *config["args"]]
        sys.path.insert(0, os.path.dirname(script))
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                code = exc.code
                status = code if isinstance(code, int) else (0 if code is None else 1)
                if code is not None and not isinstance(code, int):
                    print(code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                status = 1
    finally:
        sys.argv, sys.path[:] = argv, path
        ray.get(config["collector"].put.remote(rank, buf.getvalue(), status))
    if status:
        raise RuntimeError(f"rank {rank}: the script exited with status {status}")


def _drive(job: dict[str, Any]) -> int:
    import logging
    import threading

    import ray
    import ray.train
    from ray.train.torch import TorchTrainer

    timeout = job["timeout"]
    if timeout is not None:
        def _expire() -> None:
            print(f"scaleout run: timed out after {timeout:g} s; stopping Ray", file=sys.stderr, flush=True)
            ray.shutdown()
            os._exit(124)
        timer = threading.Timer(timeout, _expire)
        timer.daemon = True
        timer.start()
    local = job["address"] is None
    for attempt in (1, 2):  # a local Ray gives its raylet a fixed 30 s to start: a busy laptop can miss it
        try:
            # "local", not None: a bare ray.init() joins whatever cluster /tmp/ray/ray_current_cluster names
            ray.init(address="local" if local else job["address"], num_cpus=job["workers"] + 1 if local else None,
                     log_to_driver=False, include_dashboard=False, logging_level=logging.WARNING,
                     object_store_memory=100 * 2**20 if local else None)
            break
        except Exception as exc:
            ray.shutdown()
            if attempt == 2 or not local:
                raise
            print(f"scaleout run: Ray did not start ({exc}); trying once more", file=sys.stderr, flush=True)

    @ray.remote(num_cpus=0)
    class Collector:
        def __init__(self) -> None:
            self.outputs: dict[int, tuple[str, int]] = {}

        def put(self, rank: int, text: str, status: int) -> None:
            self.outputs[rank] = (text, status)

        def get(self) -> dict[int, tuple[str, int]]:
            return self.outputs

    collector = Collector.remote()
    with open(job["script"]) as f:
        source = f.read()
    storage = tempfile.mkdtemp(prefix="scaleout-ray-train-")
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"script": job["script"], "source": source, "args": job["args"], "env": job["env"],
                           "collector": collector},
        scaling_config=ray.train.ScalingConfig(num_workers=job["workers"], use_gpu=job["gpus"]),
        run_config=ray.train.RunConfig(
            name="scaleout", storage_path=storage, failure_config=ray.train.FailureConfig(max_failures=0),
            # Ray Train tees print() into its logger as well; we capture the script's output ourselves.
            worker_runtime_env={"env_vars": {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", **job["env"]}}))
    error = None
    try:
        trainer.fit()
    except Exception as exc:  # TrainingFailedError and friends: report, print what the ranks said
        error = exc
    outputs = ray.get(collector.get.remote())
    for rank in sorted(outputs):
        for line in outputs[rank][0].splitlines():
            print(f"[rank {rank}] {line}")
    statuses = [outputs[r][1] for r in sorted(outputs)]
    status = next((s for s in statuses if s), 0)
    if error is not None and not status:
        status = 1
    if error is not None:
        print(f"scaleout run: Ray Train failed: {str(error).splitlines()[0] if str(error) else type(error).__name__}",
              file=sys.stderr)
    sys.stdout.flush()
    ray.shutdown()
    shutil.rmtree(storage, ignore_errors=True)
    return status


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.exit(_drive(json.load(f)))
