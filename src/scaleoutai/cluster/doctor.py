"""``scaleout doctor``: what this machine has for each scale, and what to install for the rest (App. B).

Each check is one row (scale, item, ok, detail, fix). Checks only look: they start no cluster, and a
slow or absent controller is reported rather than waited for (``scontrol ping`` has a timeout).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass


@dataclass
class Check:
    scale: str
    item: str
    ok: bool
    detail: str
    fix: str = ""


def _cores() -> Check:
    n = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else n
    return Check("local", "CPU cores", True, f"{usable} usable of {n}: local runs up to K={usable} "
                 "without oversubscription")


def _torch_checks() -> list[Check]:
    if importlib.util.find_spec("torch") is None:
        fix = "pip install torch==2.13.0 (then pip install -c environments/constraints.txt -e .)"
        return [Check("local", "torch", False, "not installed", fix)]
    import torch
    import torch.distributed as dist

    rows = [Check("local", "torch.distributed (gloo)", dist.is_available() and dist.is_gloo_available(),
                  f"torch {torch.__version__}", "a torch build with distributed support")]
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = ", ".join(sorted({torch.cuda.get_device_name(i) for i in range(n)})) if n else ""
    rows.append(Check("gpu", "CUDA GPUs", n > 0, f"{n} x {names}" if n else "none visible (CPU build or no driver)",
                      "a machine with NVIDIA GPUs and a CUDA build of torch (environments/gpu/README.md)"))
    nccl = dist.is_available() and dist.is_nccl_available()
    rows.append(Check("gpu", "NCCL", nccl, f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}" if nccl
                      else "not in this torch build", "the CUDA build of torch (environments/gpu/README.md)"))
    return rows


def _torchrun() -> Check:
    found = shutil.which("torchrun")
    ok = found is not None or importlib.util.find_spec("torch") is not None
    return Check("torchrun", "torchrun", ok, found or ("python -m torch.distributed.run" if ok else "missing"),
                 "pip install torch==2.13.0")


def _slurm() -> list[Check]:
    cmds = {c: shutil.which(c) for c in ("sbatch", "srun", "sinfo", "scontrol")}
    missing = [c for c, p in cmds.items() if p is None]
    rows = [Check("slurm", "Slurm commands", not missing, "sbatch, srun, sinfo, scontrol" if not missing
                  else f"missing {', '.join(missing)}",
                  "a login node of a Slurm cluster, or environments/slurm/install-ci.sh for a private one")]
    if missing:
        rows.append(Check("slurm", "controller", False, "no scontrol to ask", "see Slurm commands"))
        return rows
    try:
        res = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10)
        text = (res.stdout + res.stderr).strip().splitlines()
        ok = res.returncode == 0 and "UP" in (res.stdout or "")
        detail = text[0] if text else f"scontrol ping exited {res.returncode}"
    except subprocess.TimeoutExpired:
        ok, detail = False, "scontrol ping timed out after 10 s"
    conf = os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")
    rows.append(Check("slurm", "controller", ok, f"{detail} ({conf})",
                      "start slurmctld/slurmd, or set SLURM_CONF to your cluster's slurm.conf"))
    return rows


def _ray() -> Check:
    if importlib.util.find_spec("ray") is None:
        return Check("ray", "Ray Train", False, "not installed",
                     "pip install -c environments/constraints.txt -e '.[scale]'")
    from importlib.metadata import version

    addr = os.environ.get("RAY_ADDRESS")
    where = f"cluster at RAY_ADDRESS={addr}" if addr else "a local Ray starts on demand"
    spec = importlib.util.find_spec("ray")  # find_spec("ray.train") would import all of ray: slow
    ok = any(os.path.isdir(os.path.join(p, "train")) for p in (spec.submodule_search_locations or []))
    return Check("ray", "Ray Train", ok, f"ray {version('ray')}; {where}",
                 "pip install -c environments/constraints.txt 'ray[train]'")


def _mlflow() -> Check:
    uri = os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    if importlib.util.find_spec("mlflow") is None:
        return Check("capstone", "MLflow", False, f"not installed (store would be {uri})",
                     "pip install -c environments/constraints.txt -e '.[scale]'")
    from importlib.metadata import version

    return Check("capstone", "MLflow", True, f"mlflow {version('mlflow')}; store {uri}",
                 "set MLFLOW_TRACKING_URI for a tracking server (docker/compose.yaml runs one)")


def checks() -> list[Check]:
    """Every check, in table order."""
    return [_cores(), *_torch_checks(), _torchrun(), *_slurm(), _ray(), _mlflow()]


def format_table(rows: list[Check]) -> str:
    """Fixed-width table; the fix column only for what is missing."""
    head = ("scale", "item", "status", "detail", "to get it")
    body = [(r.scale, r.item, "ok" if r.ok else "missing", r.detail, "" if r.ok else r.fix) for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(4)]
    lines = []
    for row in [head, *body]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row[:4], widths)) + ("  " + row[4] if row[4] else ""))
    return "\n".join(lines)


def main(as_json: bool = False) -> int:
    """Print the table (or JSON); always exit 0: a missing scale is information, not an error."""
    rows = checks()
    print(json.dumps([asdict(r) for r in rows], indent=2) if as_json else format_table(rows))
    return 0
