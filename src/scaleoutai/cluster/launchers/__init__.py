"""``run_script``: the same script at every scale (Appendix B). The script calls ``cluster.init()``.

    run_script("examples/allreduce_check.py", scale="local", workers=4)     # 4 processes here
    run_script(..., scale="torchrun", nodes=2, workers=1)                    # 2 torchrun agents, c10d
    run_script(..., scale="slurm", nodes=2, dry_run=True)                    # print the sbatch script
    run_script(..., scale="ray", workers=2)                                  # Ray Train TorchTrainer
    run_script(..., scale="k8s", nodes=2, dry_run=True)                      # print the Indexed Job YAML
    run_script(..., scale="k8s", nodes=2)            # kubectl apply: its status; the Job runs on in the cluster

World size = nodes x workers (ranks per node); ``local`` and ``ray`` count only K = workers x nodes.
Output streams to stdout; the return value is the exit status (0 success, 124 timeout).
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from ...errors import UserError

SCALES = ("local", "torchrun", "slurm", "ray", "k8s")

__all__ = ["run_script", "SCALES"]


def _check(script: str, scale: str, workers: int, nodes: int, gpus_per_node: int, timeout: float | None,
           k8s_options: Mapping[str, str | None] | None = None) -> None:
    if scale not in SCALES:
        raise UserError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    if not os.path.isfile(script):
        raise UserError(f"no script at {script!r}: give the path of a Python file that calls cluster.init()")
    for name, value, low in (("workers", workers, 1), ("nodes", nodes, 1), ("gpus_per_node", gpus_per_node, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise UserError(f"{name} must be a whole number >= {low}, got {value!r}")
    if scale == "local" and nodes != 1:
        raise UserError("scale 'local' runs on this machine only: use --nodes 1, or --scale torchrun to "
                        "emulate several nodes with one torchrun agent each")
    if timeout is not None and not timeout > 0:
        raise UserError(f"timeout must be a positive number of seconds, got {timeout!r}")
    given = [name for name, value in (k8s_options or {}).items() if value is not None]
    if scale != "k8s" and given:
        raise UserError(f"--{given[0]} applies to --scale k8s only")


def run_script(script: str, scale: str = "local", workers: int = 2, nodes: int = 1, gpus_per_node: int = 0,
               script_args: Sequence[str] = (), env: Mapping[str, str] | None = None, dry_run: bool = False,
               timeout: float | None = None, *, max_restarts: int = 0, address: str | None = None,
               job_dir: str | None = None, partition: str | None = None, image: str | None = None,
               namespace: str | None = None) -> int:
    """Run ``script`` at ``scale`` with ``workers`` ranks per node on ``nodes`` nodes; return its exit status.

    ``env`` entries reach every rank's environment. ``dry_run`` prints what would run (for slurm, the
    sbatch script) and starts nothing. ``max_restarts``: torchrun/slurm elastic restarts. ``address``:
    an existing Ray cluster. ``job_dir``: where slurm writes the script and the output (./slurm-jobs).
    ``image``, ``namespace``: k8s only (the container image, the namespace; dry run: the manifests).
    """
    _check(script, scale, workers, nodes, gpus_per_node, timeout, {"image": image, "namespace": namespace})
    extra = {str(k): str(v) for k, v in (env or {}).items()}
    full = {**os.environ, **extra}
    args = [str(a) for a in script_args]
    if dry_run and scale not in ("slurm", "k8s"):
        print(describe(script, scale, workers, nodes, gpus_per_node, args, max_restarts, address))
        return 0
    if scale == "local":
        from .local import run_local

        return run_local(script, workers, args, full, timeout)
    if scale == "torchrun":
        from .torchrun import run_torchrun

        return run_torchrun(script, nodes, workers, args, full, timeout, max_restarts)
    if scale == "slurm":
        from .slurm import run_slurm

        return run_slurm(script, nodes, workers, gpus_per_node, args, full, extra, dry_run, timeout,
                         max_restarts, job_dir, partition)
    if scale == "k8s":
        from .k8s import run_k8s

        return run_k8s(script, nodes, workers, gpus_per_node, args, extra, dry_run, timeout, max_restarts,
                       image, namespace)
    from .ray import run_ray

    return run_ray(script, workers * nodes, gpus_per_node > 0, args, full, extra, timeout, address)


def describe(script: str, scale: str, workers: int, nodes: int, gpus_per_node: int, args: Sequence[str],
             max_restarts: int = 0, address: str | None = None) -> str:
    """The command a person would type for this scale (what ``--dry-run`` prints)."""
    import shlex
    import sys

    tail = " ".join(shlex.quote(a) for a in [script, *args])
    if scale == "local":
        return (f"# {workers} processes with RANK=0..{workers - 1} WORLD_SIZE={workers} "
                f"MASTER_ADDR=127.0.0.1 MASTER_PORT=<free>\n{shlex.quote(sys.executable)} {tail}")
    if scale == "torchrun":
        return (f"# on each of {nodes} node(s):\ntorchrun --nnodes={nodes} --nproc-per-node={workers} "
                f"--rdzv-backend=c10d --rdzv-endpoint=HEAD_NODE:29500 --max-restarts={max_restarts} {tail}")
    gpu = f", use_gpu=True" if gpus_per_node else ""
    return (f"# Ray Train on {address or 'RAY_ADDRESS or a local Ray'}:\n"
            f"TorchTrainer(run {tail}, ScalingConfig(num_workers={workers * nodes}{gpu}))")
