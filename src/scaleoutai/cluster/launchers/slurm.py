"""Scale "slurm": render environments/slurm/sbatch.template, submit it, stream the job's output.

The rendered script asks for N nodes with one task each; ``srun`` starts one torchrun agent per node
and the agents rendezvous (c10d) on the allocation's first node (Appendix B). ``sbatch --wait`` blocks
until the job ends and exits with the job's status; meanwhile the job's output file is followed, so
output reaches the terminal as it is written. ``dry_run`` prints the script and submits nothing.
"""
from __future__ import annotations

import os
import shlex
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

from .local import TIMEOUT_STATUS

TEMPLATE = Path(__file__).resolve().parents[4] / "environments" / "slurm" / "sbatch.template"


class SbatchTemplate(string.Template):
    """``@{name}`` placeholders, so bash's own ``$VAR`` and ``${VAR}`` stay as they are."""

    delimiter = "@"


def render_sbatch(script: str, nodes: int = 1, nproc_per_node: int = 2, gpus_per_node: int = 0,
                  script_args: Sequence[str] = (), env: Mapping[str, str] | None = None, max_restarts: int = 0,
                  job_name: str = "scaleout", time_limit: str = "00:30:00", output: str = "slurm-%j.out",
                  partition: str | None = None, python: str = sys.executable,
                  template: str | os.PathLike | None = None) -> str:
    """The sbatch script as text; ``env`` becomes ``export`` lines seen by every rank."""
    directives = []
    if gpus_per_node:
        directives.append(f"#SBATCH --gpus-per-node={gpus_per_node}")
    if partition:
        directives.append(f"#SBATCH --partition={partition}")
    exports = [f"export {k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    text = Path(template or TEMPLATE).read_text()
    return SbatchTemplate(text).substitute(
        job_name=job_name, nodes=nodes, cpus_per_task=max(nproc_per_node, 1), time_limit=time_limit,
        output=output, extra_directives="\n".join(directives), exports="\n".join(exports),
        python=shlex.quote(python), nproc_per_node=nproc_per_node, max_restarts=max_restarts,
        script=shlex.quote(os.path.abspath(script)),
        script_args="".join(" " + shlex.quote(a) for a in script_args))


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sbatch-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def _follow(path: Path, pos: int) -> int:
    """Print what the job appended to its output file since byte ``pos``; return the new position."""
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            chunk = f.read()
    except FileNotFoundError:
        return pos
    if chunk:
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
    return pos + len(chunk)


def submit_and_wait(sbatch_script: Path, job_dir: Path, env: Mapping[str, str], timeout: float | None) -> int:
    """``sbatch --parsable --wait``; follow the output file; return the job's exit status."""
    proc = subprocess.Popen(["sbatch", "--parsable", "--wait", f"--chdir={job_dir}", str(sbatch_script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=dict(env), text=True, start_new_session=True)
    job_id = (proc.stdout.readline() if proc.stdout else "").strip().split(";")[0]
    if not job_id:
        proc.wait(timeout=60)
        err = proc.stderr.read().strip() if proc.stderr else ""
        print(f"scaleout run: sbatch refused the job: {err or 'no job id'}", file=sys.stderr)
        return proc.returncode or 1
    print(f"scaleout run: submitted slurm job {job_id}", file=sys.stderr)
    out = job_dir / f"slurm-{job_id}.out"
    pos, t0 = 0, time.monotonic()
    while proc.poll() is None:
        pos = _follow(out, pos)
        if timeout is not None and time.monotonic() - t0 > timeout:
            subprocess.run(["scancel", job_id], env=dict(env), timeout=30, check=False)
            proc.kill()
            proc.wait()
            print(f"scaleout run: timed out after {timeout:g} s; cancelled slurm job {job_id}", file=sys.stderr)
            return TIMEOUT_STATUS
        time.sleep(0.2)
    time.sleep(0.2)  # the output file can trail the job's end on a network file system
    _follow(out, pos)
    status = proc.returncode
    print(f"scaleout run: slurm job {job_id} exited with status {status}; output in {out}", file=sys.stderr)
    return status


def run_slurm(script: str, nodes: int, nproc_per_node: int, gpus_per_node: int, script_args: Sequence[str],
              env: Mapping[str, str], extra_env: Mapping[str, str], dry_run: bool, timeout: float | None,
              max_restarts: int = 0, job_dir: str | None = None, partition: str | None = None,
              time_limit: str = "00:30:00") -> int:
    """Render the sbatch script; print it (dry run) or submit it from ``job_dir`` (default ./slurm-jobs)."""
    text = render_sbatch(script, nodes, nproc_per_node, gpus_per_node, script_args, extra_env, max_restarts,
                         job_name=Path(script).stem, time_limit=time_limit, partition=partition)
    if dry_run:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    folder = Path(job_dir or "slurm-jobs").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{Path(script).stem}.sbatch"
    _write_atomic(path, text)
    return submit_and_wait(path, folder, env, timeout)
