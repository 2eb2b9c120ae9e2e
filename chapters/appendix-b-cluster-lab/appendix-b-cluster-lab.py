# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Appendix B. Companion cluster lab
#
# One worker function, five scales. The function below is a ring all-reduce written with nothing but
# `comm.send` and `comm.recv`; the script `examples/allreduce_check.py` wraps it with
# `cluster.init()` and checks it against `torch.distributed.all_reduce`. We run it on the simulated
# cluster, on $K$ local processes, under torchrun with two agents that rendezvous like two machines,
# and, where this machine has them, on Slurm and Ray. Where a scale is missing, the cell prints the
# exact command to run on a machine that has it. The lab ends with the reproducibility checklist.

# %% tags=["parameters"]
WORKERS = 4  # smoke: 2
LENGTH = 10_007  # smoke: 1_001
RUN_RAY = True  # smoke: False
TIMEOUT = 300  # smoke: 120

# %%
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from scaleoutai import cluster
from scaleoutai.cluster.launchers import run_script
from scaleoutai.notebooks import find_repo_root

ROOT = Path(find_repo_root())
SCRIPT = str(ROOT / "examples" / "allreduce_check.py")
spec = importlib.util.spec_from_file_location("allreduce_check", SCRIPT)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
ring_allreduce = example.ring_allreduce  # the one worker function every scale runs

# %% [markdown]
# ## Scale 0: the simulated cluster
# Threads in this process with an $\alpha$-$\beta$ clock. The ring sends $2(K-1)$ messages per rank,
# each about $n/K$ elements: the whole rank sends $2\frac{K-1}{K}n$ elements, whatever $K$ is.

# %%
def worker(comm, length):
    x = np.random.default_rng(comm.rank).standard_normal(length)
    return ring_allreduce(comm, x)


reference = sum(np.random.default_rng(r).standard_normal(LENGTH) for r in range(WORKERS))
sim = cluster.run(worker, WORKERS, backend="sim", args=(LENGTH,), network=cluster.Network(alpha=1e-5, beta=1e-9))
for r in range(WORKERS):
    np.testing.assert_allclose(sim.values[r], reference, rtol=1e-12, atol=1e-9)
sent = [s.bytes_sent for s in sim.stats]
bound = 2 * (WORKERS - 1) / WORKERS * LENGTH * 8
print(f"sim: K={WORKERS}, every rank == single-machine sum; bytes sent per rank {sent} "
      f"(2(K-1)/K n = {bound:.0f} bytes, give or take the uneven chunks); makespan {sim.sim_time * 1e3:.3f} ms")
assert all(abs(b - bound) <= 2 * (WORKERS - 1) * 8 for b in sent)

# %% [markdown]
# ## Scale 1: local processes from a notebook cell
# The same function, now in $K$ OS processes over torch.distributed (gloo on loopback).

# %%
proc = cluster.run(worker, WORKERS, backend="process", args=(LENGTH,), timeout=TIMEOUT, quiet=True)
for r in range(WORKERS):
    np.testing.assert_allclose(proc.values[r], reference, rtol=1e-12, atol=1e-9)
assert [s.bytes_sent for s in proc.stats] == sent  # the same messages as the simulator counted
print(f"process backend: {WORKERS} ranks agree with the reference; wall time {proc.wall_time:.2f} s")

# %% [markdown]
# ## Scale 2: a script that calls `cluster.init()`, run by `scaleout run`
# From here on the unit is a script, as on a real cluster. `scaleout run --scale local` sets
# `RANK`, `WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT` for each of $K$ processes; the script's
# `cluster.init()` reads them. Each rank prints one line and exits non-zero on a mismatch.

# %%
print(f"$ scaleout run examples/allreduce_check.py --workers {WORKERS} -- --length {LENGTH}")
status = run_script(SCRIPT, scale="local", workers=WORKERS, script_args=["--length", str(LENGTH)], timeout=TIMEOUT)
assert status == 0, f"local run failed with status {status}"

# %% [markdown]
# ## Scale 3: torchrun, two agents as two machines
# On a cluster each machine runs one torchrun agent; the agents meet at a c10d rendezvous and the
# rendezvous hands out node ranks. Two agents on loopback do exactly that, minus the wire.
# With GPUs, `cluster.init()` picks NCCL and one rank per GPU.

# %%
per_agent = max(1, WORKERS // 2)
print(f"$ scaleout run examples/allreduce_check.py --scale torchrun --nodes 2 --workers {per_agent}")
status = run_script(SCRIPT, scale="torchrun", nodes=2, workers=per_agent, script_args=["--length", str(LENGTH)],
                    timeout=TIMEOUT)
assert status == 0, f"torchrun failed with status {status}"

import torch  # noqa: E402

if torch.cuda.is_available():
    g = torch.cuda.device_count()
    print(f"{g} GPU(s) here: running one rank per GPU over NCCL")
    assert run_script(SCRIPT, scale="torchrun", workers=g, gpus_per_node=g, timeout=TIMEOUT) == 0
else:
    print("skip GPU: no CUDA device here. On a GPU machine run:\n"
          "  scaleout run examples/allreduce_check.py --scale torchrun --workers G --gpus-per-node G")

# %% [markdown]
# ## What this machine has
# `scaleout doctor` is the same table from a terminal; the next two scales read it to decide whether
# to run or to print their command.

# %%
from scaleoutai.cluster.doctor import checks, format_table  # noqa: E402

rows = checks()
print(format_table(rows))
have = {(r.scale, r.item): r.ok for r in rows}

# %% [markdown]
# ## Scale 4: Slurm
# `scaleout run --scale slurm` renders `environments/slurm/sbatch.template`: one task per node,
# `srun` starts one torchrun agent per node, and the agents rendezvous on the allocation's first
# node. Here is the script for two nodes with four ranks each; it runs only where a controller answers.

# %%
assert run_script(SCRIPT, scale="slurm", nodes=2, workers=4, dry_run=True) == 0

if have[("slurm", "Slurm commands")] and have[("slurm", "controller")]:
    status = run_script(SCRIPT, scale="slurm", workers=min(WORKERS, 2), timeout=TIMEOUT)
    assert status == 0, f"slurm job failed with status {status}"
else:
    print("skip Slurm: no sbatch or no controller answering here. On a login node run:\n"
          "  scaleout run examples/allreduce_check.py --scale slurm --nodes 2 --workers 4\n"
          "(a private one-node Slurm for practice: environments/slurm/README.md)")

# %% [markdown]
# ## Scale 5: Ray
# Ray Train's `TorchTrainer` starts $K$ worker actors with one process group; the script runs in each
# of them and `cluster.init()` finds that group. Locally Ray starts a private cluster; set
# `RAY_ADDRESS` (or `--address`) to use one made with `ray up environments/cloud/ray-cluster-aws.yaml`.

# %%
ray_cmd = f"scaleout run examples/allreduce_check.py --scale ray --workers {WORKERS}"
if importlib.util.find_spec("ray") is None:
    print(f"skip Ray: not installed (pip install -c environments/constraints.txt -e '.[scale]'), then:\n  {ray_cmd}")
elif not RUN_RAY:
    print(f"skip Ray at this size (starting Ray takes longer than the smoke budget); run:\n  {ray_cmd}")
else:
    status = run_script(SCRIPT, scale="ray", workers=min(WORKERS, os.cpu_count() or 1), timeout=TIMEOUT)
    assert status == 0, f"Ray run failed with status {status}"

# %% [markdown]
# ## The reproducibility checklist
# A scaling result is only worth the work if someone else can get it again. With every result keep:
# 1. **Seeds**: every random generator's seed (here `--seed`, default 0, offset by the rank).
# 2. **Versions**: Python, torch, Ray, MLflow, and the full `pip freeze`; install from
#    `environments/constraints.txt` so the versions are the ones you report.
# 3. **Hardware**: CPU model and cores, GPUs and their driver, interconnect; nodes and $K$.
# 4. **Command lines**: the exact `scaleout run ...` (or `torchrun`/`sbatch`) line, with its arguments.
# 5. **Config files**: the rendered sbatch script, the Ray cluster YAML, environment variables set.
# 6. **Measurements**: wall time per repeat (not just the best), so $S_p$ and $E_p$ carry their spread.
#
# The cell below collects what a machine can say about itself.

# %%
import platform  # noqa: E402
from importlib.metadata import version  # noqa: E402

freeze = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, timeout=120).stdout
record = {
    "seeds": {"allreduce_check --seed": 0, "numpy per rank": "default_rng(seed + rank)"},
    "python": platform.python_version(),
    "torch": torch.__version__,
    "ray": version("ray") if importlib.util.find_spec("ray") else None,
    "mlflow": version("mlflow") if importlib.util.find_spec("mlflow") else None,
    "pip freeze lines": len(freeze.splitlines()),
    "hardware": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                 "cores": os.cpu_count(), "cuda devices": torch.cuda.device_count()},
    "commands": [f"scaleout run examples/allreduce_check.py --workers {WORKERS} -- --length {LENGTH}",
                 f"scaleout run examples/allreduce_check.py --scale torchrun --nodes 2 --workers {per_agent}"],
    "config files": ["environments/constraints.txt", "environments/slurm/sbatch.template",
                     "environments/cloud/ray-cluster-aws.yaml"],
}
for key, value in record.items():
    print(f"{key:>17}: {value}")
assert record["torch"] == "2.13.0" or record["torch"].startswith("2.13.0+"), "torch differs from the pinned 2.13.0"
assert all((ROOT / f).exists() for f in record["config files"])
