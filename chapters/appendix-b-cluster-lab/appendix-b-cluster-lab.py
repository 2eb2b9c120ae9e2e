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
# on a private Ray cluster, and on Slurm and GPUs where this machine has them. Where one of those two
# is missing, the cell prints the exact command to run on a machine that has it. The lab ends with the reproducibility checklist,
# asserted item by item where the notebook can measure it.
#
# **Prerequisites:** Chapter 4 (Communication primitives: the ring all-reduce over `send`/`recv` and its
# $\alpha$-$\beta$ cost), Chapter 3 (Performance models) and Chapter 5 (Evaluation discipline: timing
# and the reproducibility checklist); background: running commands in a shell, environment variables,
# and what an OS process and a TCP port are.

# %% tags=["parameters"]
WORKERS = 4  # smoke: 2
LENGTH = 10_007  # smoke: 1_001
TIMEOUT = 300  # smoke: 120
# CI's smoke run shows the Ray Train command only: tests/test_launchers_ray.py runs that launch
RUN_RAY = True  # smoke: False

# %%
import contextlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
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
# ## 1. Motivation: which ceiling each scale lifts
#
# A distributed program is usually written on a laptop and run on machines its author never logs into.
# If every scale needs its own version of the program, the version that was tested is never the one
# that runs. The rule of this lab is therefore one script, unchanged, at every scale; only the launcher
# around it changes. Each step up lifts one ceiling and adds one cost:
#
# - **The simulator** lifts no ceiling at all: it runs $K$ ranks as coroutines (greenlets, one switch per
#   blocking receive) in one thread with an $\alpha$-$\beta$ clock, so it is deterministic, detects deadlocks and counts every byte. It is where a protocol is
#   shown to be correct.
# - **Local processes** lift the one-interpreter ceiling: $K$ processes use $K$ cores and talk over a
#   real transport (gloo on loopback), so serialisation and real message passing enter.
# - **A script under `scaleout run`** lifts the notebook ceiling: the unit becomes a file started by a
#   launcher, which is what every cluster runs.
# - **torchrun** lifts the one-machine ceiling: agents on different nodes meet at a rendezvous, and
#   with GPUs each rank gets its own device (NCCL).
# - **Slurm** lifts the ceiling of machines you own: a shared cluster's scheduler hands out nodes.
# - **Ray** lifts the ceiling of a fixed allocation: a Ray cluster on cloud instances grows and shrinks.
#
# The price of every step is start-up time and new ways to fail, which Sections 6 and 7 measure.

# %% [markdown]
# ## 2. Core concepts: communicator, launcher, rendezvous
#
# - **Communicator.** The object a worker talks through: `comm.rank`, `comm.size`, `send(array, dst)`,
#   `recv(src)`, `barrier()` and `stats` (messages and bytes sent). Every backend offers the same one,
#   so the ring all-reduce above runs unchanged on threads and on processes.
# - **World size $K$ and rank.** $K$ processes cooperate on one job; each has a rank in $0..K-1$. On a
#   cluster, $K$ = nodes $\times$ ranks per node, and each rank also has a *local rank* on its node (the
#   GPU it uses).
# - **Launcher.** The program that starts the $K$ processes and gives each its identity through
#   environment variables: `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`. `scaleout
#   run --scale local`, torchrun, `srun` and Ray Train are launchers; they differ in where the processes
#   run and who chooses the machines.
# - **Rendezvous.** How processes that start independently find each other: all connect to one address
#   (`MASTER_ADDR:MASTER_PORT`, or torchrun's c10d endpoint), which hands out ranks and waits until all
#   $K$ have arrived. Only then can messages flow.
# - **`cluster.init()`.** The script's side of the contract: it reads those variables, joins the group
#   (gloo on CPU, NCCL when it sees a GPU) and returns the communicator. Started with plain `python`,
#   it finds no variables and returns a world of one, so the same file runs everywhere.
#
# Here is the environment the local launcher gives rank 1 of a world of two: the whole contract.

# %%
from scaleoutai.cluster.launchers.local import TIMEOUT_STATUS, rank_env, run_group, run_local  # noqa: E402

contract = rank_env({}, rank=1, local_rank=1, world=2, local_world=2, addr="127.0.0.1", port=29500)
for key, value in contract.items():
    print(f"{key:>17} = {value}")
assert {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} <= set(contract)  # what cluster.init() needs
assert contract["RANK"] == "1" and contract["WORLD_SIZE"] == "2"

# %% [markdown]
# ## 3. The distribution pattern: one ring, three scales on one machine
#
# The pattern is Chapter 4's ring all-reduce: a reduce-scatter then an all-gather, each $K-1$ steps in
# which every rank sends one chunk to its right neighbour and receives one from its left. A rank sends
# $2(K-1)$ messages of about $n/K$ elements each for a vector of $n$ elements: $2\frac{K-1}{K}n$
# elements in all, whatever $K$ is. The byte counts are a fingerprint of the pattern: every scale below
# must send exactly the bytes the simulator counts.
#
# ### Scale 0: the simulated cluster
# Threads in this process with an $\alpha$-$\beta$ clock.

# %%
def worker(comm, length):
    x = np.random.default_rng(comm.rank).standard_normal(length)
    return ring_allreduce(comm, x)


def sim_bytes(k):
    """Bytes each rank sends in the ring all-reduce of LENGTH float64 values over k simulated ranks."""
    return [s.bytes_sent for s in cluster.run(worker, k, backend="sim", args=(LENGTH,)).stats]


reference = sum(np.random.default_rng(r).standard_normal(LENGTH) for r in range(WORKERS))
sim = cluster.run(worker, WORKERS, backend="sim", args=(LENGTH,), network=cluster.Network(alpha=1e-5, beta=1e-9))
for r in range(WORKERS):
    np.testing.assert_allclose(sim.values[r], reference, rtol=1e-12, atol=1e-9)
sent = [s.bytes_sent for s in sim.stats]
bound = 2 * (WORKERS - 1) / WORKERS * LENGTH * 8
print(f"sim: K={WORKERS}, every rank == single-machine sum; bytes sent per rank {sent} "
      f"(2(K-1)/K n = {bound:.0f} bytes, give or take the uneven chunks); makespan {sim.sim_time * 1e3:.3f} ms")
assert all(abs(b - bound) <= 2 * (WORKERS - 1) * 8 for b in sent)
assert all(s.messages_sent == 2 * (WORKERS - 1) for s in sim.stats)

# %% [markdown]
# ### Scale 1: local processes from a notebook cell
# The same function, now in $K$ OS processes over torch.distributed (gloo on loopback).

# %%
proc = cluster.run(worker, WORKERS, backend="process", args=(LENGTH,), timeout=TIMEOUT, quiet=True)
for r in range(WORKERS):
    np.testing.assert_allclose(proc.values[r], reference, rtol=1e-12, atol=1e-9)
assert [s.bytes_sent for s in proc.stats] == sent  # the same messages as the simulator counted
print(f"process backend: {WORKERS} ranks agree with the reference; wall time {proc.wall_time:.2f} s")

# %% [markdown]
# ### Scale 2: a script that calls `cluster.init()`, run by `scaleout run`
# From here on the unit is a script, as on a real cluster. `scaleout run --scale local` sets
# `RANK`, `WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT` for each of $K$ processes; the script's
# `cluster.init()` reads them. Each rank prints one line and exits non-zero on a mismatch.
#
# A launcher's output is all we get back from a cluster, so the helper below keeps it while showing it,
# and `check_ranks` reads the one line per rank: the world size each rank saw, that every rank from $0$
# to $K-1$ reported, that its ring sum equals torch's `all_reduce`, and that it sent exactly the bytes
# the simulator counts for that $K$. Every run is also recorded for the checklist of Section 8.

# %%
class Tee(io.TextIOBase):
    """Write to several streams: the cell's output and a buffer we can check."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
        return len(text)

    def flush(self):
        for s in self.streams:
            s.flush()


def command_line(script, scale="local", workers=2, nodes=1, gpus_per_node=0, script_args=(), dry_run=False,
                 **_):
    """The `scaleout run` line that does what run_script(script, ...) does."""
    opts = f"--scale {scale} --nodes {nodes} --workers {workers}"
    opts += f" --gpus-per-node {gpus_per_node}" if gpus_per_node else ""
    opts += " --dry-run" if dry_run else ""
    tail = f" -- {shlex.join(script_args)}" if script_args else ""
    where = Path(script).resolve()
    shown = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    return f"scaleout run {shown} {opts}{tail}"


RUNS = []  # every launch of this notebook: label, command, exit status, seconds


def launch(label, script=SCRIPT, **kwargs):
    """run_script with its output shown and kept; returns (status, output, seconds)."""
    out = io.StringIO()
    print(f"$ {command_line(script, **kwargs)}")
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(Tee(sys.stdout, out)), contextlib.redirect_stderr(Tee(sys.stderr, out)):
        status = run_script(script, **kwargs)
    seconds = time.perf_counter() - t0
    RUNS.append({"label": label, "command": command_line(script, **kwargs), "status": status, "seconds": seconds})
    return status, out.getvalue(), seconds


RANK_LINE = re.compile(r"rank (\d+)/(\d+) on (\S+) pid \d+: ring allreduce (==|!=) torch all_reduce "
                       r"\(n=(\d+), \w+, max err \S+, sent (\d+) B in (\d+) msgs\) (OK|MISMATCH)")


def check_ranks(output, world):
    """Assert one OK line from each rank 0..world-1, all in a world of that size, with the simulator's bytes."""
    lines = [m.groups() for m in RANK_LINE.finditer(output)]
    ranks = sorted(int(g[0]) for g in lines)
    assert ranks == list(range(world)), f"expected ranks 0..{world - 1}, got {ranks}"
    assert all(int(g[1]) == world and int(g[4]) == LENGTH and g[3] == "==" and g[7] == "OK" for g in lines)
    by_rank = {int(g[0]): int(g[5]) for g in lines}
    expected = sim_bytes(world)
    assert [by_rank[r] for r in range(world)] == expected, (by_rank, expected)
    assert all(int(g[6]) == 2 * (world - 1) for g in lines)
    return sorted({g[2] for g in lines})  # the hosts the ranks ran on


status, out, t_local = launch("scaleout run local", scale="local", workers=WORKERS, script_args=["--length", str(LENGTH)],
                              timeout=TIMEOUT)
assert status == 0, f"local run failed with status {status}"
hosts = check_ranks(out, WORKERS)
print(f"-> {WORKERS} ranks on {hosts}, each == torch all_reduce, bytes == simulator's, in {t_local:.2f} s")

# %% [markdown]
# The same file with plain `python` and no launcher: `cluster.init()` finds no variables and makes a
# world of one, in which the ring sends nothing.

# %%
t0 = time.perf_counter()
single = subprocess.run([sys.executable, SCRIPT, "--length", str(LENGTH)], capture_output=True, text=True,
                        timeout=TIMEOUT, env={k: v for k, v in os.environ.items()
                                              if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")})
t_single = time.perf_counter() - t0
print(f"$ python examples/allreduce_check.py --length {LENGTH}\n{single.stdout}{single.stderr}", end="")
assert single.returncode == 0
check_ranks(single.stdout, 1)

# %% [markdown]
# ## 4. A minimal from-scratch implementation: the local launcher
#
# A launcher is small. Read `run_local` first: it picks one free port for the rendezvous and starts the
# same command $K$ times, each with the environment `rank_env` builds (the five variables of Section 2).
# `run_group` is the supervisor every launcher in the library shares, torchrun, Ray and Slurm included:
# it starts each process in its own session, relays its output line by line with a `[rank r]` prefix,
# and polls. The first process that exits non-zero makes it kill every process group and return that
# status (fail fast, no orphans); passing `timeout` makes it kill all and return 124, the status of
# coreutils `timeout`. On the other side, `cluster.init` reads the variables, refuses a half-set
# environment, chooses NCCL when the process sees a GPU, and falls back to a world of one.

# %%
from scaleoutai.notebooks import show  # noqa: E402

show(run_local, rank_env, run_group, cluster.init)

# %% [markdown]
# `run_group` does not care what it starts. Two copies of a one-line program, each with its own
# `rank_env`, show that the contract is only environment variables and a port.

# %%
probe = [sys.executable, "-c", "import os; print('I am rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], "
                               "'meeting at', os.environ['MASTER_ADDR'] + ':' + os.environ['MASTER_PORT'])"]
buf = io.StringIO()
with contextlib.redirect_stdout(Tee(sys.stdout, buf)):
    status = run_group([probe] * WORKERS, [rank_env(os.environ, r, r, WORKERS, WORKERS, "127.0.0.1", 29500)
                                           for r in range(WORKERS)], list(range(WORKERS)), timeout=TIMEOUT)
assert status == 0
said = sorted(re.findall(rf"\[rank (\d+)\] I am rank (\d+) of {WORKERS} meeting at 127\.0\.0\.1:29500", buf.getvalue()))
assert [(int(a), int(b)) for a, b in said] == [(r, r) for r in range(WORKERS)]  # each label is its own RANK

# %% [markdown]
# ## 5. The same task with production launchers: torchrun, Slurm, Ray
#
# ### Scale 3: torchrun, two agents as two machines
# On a cluster each machine runs one torchrun agent; the agents meet at a c10d rendezvous and the
# rendezvous hands out node ranks. Two agents on loopback do exactly that, minus the wire.
# With GPUs, `cluster.init()` picks NCCL and one rank per GPU. The check is the same as for the local
# launcher: every rank of the world of 2 agents $\times$ their ranks reported, agreed with torch, and sent
# the simulator's bytes.

# %%
import torch  # noqa: E402

per_agent = max(1, WORKERS // 2)
status, out, t_torchrun = launch("torchrun, 2 agents", scale="torchrun", nodes=2, workers=per_agent,
                                 script_args=["--length", str(LENGTH)], timeout=TIMEOUT)
assert status == 0, f"torchrun failed with status {status}"
check_ranks(out, 2 * per_agent)
print(f"-> torchrun: world size {2 * per_agent} from 2 agents x {per_agent}, each rank == torch all_reduce, "
      f"bytes == simulator's, in {t_torchrun:.2f} s")

if torch.cuda.is_available():
    g = torch.cuda.device_count()
    print(f"{g} GPU(s) here: running one rank per GPU over NCCL")
    status, out, _ = launch("torchrun, one rank per GPU", scale="torchrun", workers=g, gpus_per_node=g,
                            script_args=["--length", str(LENGTH)], timeout=TIMEOUT)
    assert status == 0, f"GPU torchrun failed with status {status}"
    check_ranks(out, g)
else:
    print("skip GPU: no CUDA device here. On a GPU machine run:\n"
          "  scaleout run examples/allreduce_check.py --scale torchrun --workers G --gpus-per-node G")

# %% [markdown]
# The next two scales need software this machine may lack. `scaleout doctor` (the same table from a
# terminal, shown whole in Section 7) decides whether each runs or prints its command.

# %%
from scaleoutai.cluster.doctor import checks, format_table  # noqa: E402

rows = checks()
have = {(r.scale, r.item): r.ok for r in rows}
for (scale, item), ok in have.items():
    if scale in ("slurm", "ray"):
        print(f"{scale:>6} {item:<16} {'ok' if ok else 'missing'}")

# %% [markdown]
# ### Scale 4: Slurm
# `scaleout run --scale slurm` renders `environments/slurm/sbatch.template`: one task per node,
# `srun` starts one torchrun agent per node, and the agents rendezvous on the allocation's first
# node. Here is the script for two nodes with four ranks each. It then runs for real on one node: on the
# site's Slurm where a controller answers, else on a private one-node Slurm (`LocalSlurm`: its own munge
# key, `slurmctld` and `slurmd` on free ports in a temporary folder, stopped when the cell ends) where
# the Slurm daemons are installed and the notebook runs as root, as in the course's CI.

# %%
status, sbatch_text, _ = launch("slurm dry run", scale="slurm", nodes=2, workers=4, dry_run=True)
assert status == 0
for needed in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "srun", "--nproc-per-node=4",
               "--rdzv-backend=c10d", os.path.abspath(SCRIPT)):
    assert needed in sbatch_text, f"the rendered sbatch script lacks {needed!r}"

from scaleoutai.cluster.launchers.slurm_local import LocalSlurm, unavailable_reason

k_slurm = min(WORKERS, 2)
slurm_args = dict(scale="slurm", workers=k_slurm, script_args=["--length", str(LENGTH)], timeout=TIMEOUT,
                  job_dir=tempfile.mkdtemp(prefix="appendix-b-slurm-"))
if have[("slurm", "Slurm commands")] and have[("slurm", "controller")]:  # a site Slurm answers
    status, out, t_slurm = launch("slurm, 1 node", **slurm_args)
elif unavailable_reason() is None:  # no site Slurm, but its daemons are installed: start a private one
    with LocalSlurm(timeout=90) as private:  # munged, slurmctld, slurmd in a temp folder; stopped on exit
        status, out, t_slurm = launch("slurm, private 1-node cluster", env={"SLURM_CONF": str(private.conf)},
                                      **slurm_args)
else:
    status = None
    print(f"skip the Slurm job: {unavailable_reason()}. On a login node run:\n"
          "  scaleout run examples/allreduce_check.py --scale slurm --nodes 2 --workers 4\n"
          "(a private one-node Slurm for practice: environments/slurm/README.md)")
if status is not None:
    assert status == 0, f"slurm job failed with status {status}"
    check_ranks(out, k_slurm)

# %% [markdown]
# ### Scale 5: Ray
# Ray Train's `TorchTrainer` starts $K$ worker actors with one process group; the script runs in each
# of them and `cluster.init()` finds that group. Locally Ray starts a private cluster; set
# `RAY_ADDRESS` (or `--address`) to use one made with `ray up environments/cloud/ray-cluster-aws.yaml`.

# %%
k_ray = min(WORKERS, os.cpu_count() or 1)  # one Ray session for this notebook; it ends with the run
status, out, t_ray = launch("Ray Train", scale="ray", workers=k_ray, script_args=["--length", str(LENGTH)],
                            timeout=TIMEOUT, dry_run=not RUN_RAY)
assert status == 0, f"Ray run failed with status {status}"
if RUN_RAY:
    check_ranks(out, k_ray)
else:
    assert f"ScalingConfig(num_workers={k_ray})" in out

# %% [markdown]
# ## 6. Failure modes: a crashed rank, a hung group
#
# On a cluster the worst failure is the quiet one: one rank dies, the others wait in a `recv` for a
# message that never comes, and the job holds its nodes until the allocation's time limit. The library's
# launchers fail fast instead. Below, the last rank of a real `cluster.init()` script raises while the
# others wait for it in `recv`. The group must end with a non-zero status well before any timeout, the
# failed rank's traceback must reach us under its `[rank r]` prefix, and every process (each printed
# its process id first) must be gone. Read the output closely: the waiting ranks fail too, with
# "Connection reset by peer", and the supervisor names whichever exit it saw first, which need not be
# the cause. On a real cluster, look for the earliest traceback, not the last line.

# %%
BROKEN = """
import os
print(f"rank {os.environ['RANK']} has pid {os.getpid()}", flush=True)
from scaleoutai import cluster
comm = cluster.init(timeout=60)
last = comm.size - 1
if comm.rank == last:
    raise RuntimeError(f"rank {comm.rank}: shard file is corrupt (failure injected by Appendix B)")
comm.recv(last)  # waits for a message the failed rank will never send
print(f"rank {comm.rank} finished")
"""
HANG = "import os, time\nprint(f\"rank {os.environ['RANK']} has pid {os.getpid()}\", flush=True)\ntime.sleep(600)\n"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pids(output):
    return {int(r): int(p) for r, p in re.findall(r"rank (\d+) has pid (\d+)", output)}


tmp = tempfile.mkdtemp(prefix="appendix-b-")
broken, hang = Path(tmp, "broken.py"), Path(tmp, "hang.py")
broken.write_text(BROKEN)
hang.write_text(HANG)
status, out, t_crash = launch("crash injected", script=str(broken), scale="local", workers=WORKERS, timeout=TIMEOUT)
last = WORKERS - 1
assert status == 1, status  # an uncaught exception's exit status, not a timeout's 124
# the failed rank's traceback reached us, under its own prefix (torch adds its "[rankN]:" inside)
assert re.search(rf"^\[rank {last}\] .*Traceback \(most recent call last\)", out, re.M)
assert re.search(rf"^\[rank {last}\] .*RuntimeError: rank {last}: shard file is corrupt", out, re.M)
assert re.search(r"rank \d+ exited with status 1; stopped the others", out)
assert "finished" not in out and len(pids(out)) == WORKERS
assert not any(alive(p) for p in pids(out).values())  # no orphan left waiting in recv
print(f"-> crash: status {status} after {t_crash:.2f} s; rank {last}'s traceback above; no process left")

# %% [markdown]
# A crash is the easy case: the process exits. A rank that hangs (a deadlock, a stuck filesystem, a
# dead peer behind a firewall) never exits, and only a timeout ends it. With `timeout`, the supervisor
# kills every rank, says which were still running, and returns 124.

# %%
TIMEOUT_DEMO = 4.0
status, out, t_hang = launch("hang, timed out", script=str(hang), scale="local", workers=WORKERS, timeout=TIMEOUT_DEMO)
shutil.rmtree(tmp)
assert status == TIMEOUT_STATUS == 124
assert f"timed out after {TIMEOUT_DEMO:g} s; killed {', '.join(map(str, range(WORKERS)))}" in out
assert len(pids(out)) == WORKERS and not any(alive(p) for p in pids(out).values())
print(f"-> hang: status {status} after {t_hang:.2f} s (timeout {TIMEOUT_DEMO:g} s); every rank killed")

# %% [markdown]
# ## 7. Evaluation: what this machine has, and what each scale costs to start
#
# `scaleout doctor` is this table from a terminal: for each scale, what it needs and whether this machine
# has it.

# %%
print(format_table(rows))
assert have[("local", "torch.distributed (gloo)")] and have[("torchrun", "torchrun")]  # what ran above

# %% [markdown]
# At this size the all-reduce itself takes milliseconds, so the wall time of each run is almost all
# start-up: importing torch in every process, the rendezvous, and for torchrun an extra agent process per
# node. The chart shows what each step up the ladder of Section 1 costs before the first message is
# sent, measured in this run (one run each, so read the order of magnitude, not the digits). The simulator
# bar is the wall time of the coroutines, not the simulated makespan.

# %%
timings = {"simulator (coroutines)": sim.wall_time, "cluster.run, processes": proc.wall_time,
           "python script.py (K=1)": t_single}
timings.update({r["label"]: r["seconds"] for r in RUNS
                if r["status"] == 0 and "allreduce_check" in r["command"] and "--dry-run" not in r["command"]})
for label, seconds in timings.items():
    print(f"{label:>28}: {seconds:8.3f} s")
assert all(s > 0 for s in timings.values())

fig, ax = plt.subplots(figsize=(7, 0.5 * len(timings) + 1))
ax.barh(list(timings), list(timings.values()), color="tab:blue")
for y, s in enumerate(timings.values()):
    ax.text(s, y, f" {s:.2g} s", va="center")
ax.set_xscale("log")
ax.invert_yaxis()
ax.set_xlabel("wall time of one all-reduce run, s (log scale)")
ax.set_title(f"Time to start and run each scale: K={WORKERS}, n={LENGTH}, {os.cpu_count()} cores")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Exercises and the reproducibility checklist
#
# ### Exercises
#
# 1. Run the torchrun scale with three agents (`nodes=3`). Predict each rank's bytes sent from the
#    simulator before you look, then check with `check_ranks`.
# 2. Run the script with `--dtype int64` at every scale you have. Why can the check then demand exact
#    equality with torch's `all_reduce`, and why can it not for `float64`?
# 3. Start a private one-node Slurm (`environments/slurm/README.md`) and re-run this notebook: the Slurm
#    cell now submits a job. Which bar does it add to the chart of Section 7, and why is it the longest?
# 4. Give the crashing script of Section 6 to torchrun with `max_restarts=1`. What does the agent do, and
#    why would a real training script need a checkpoint to benefit (Chapter 18)?
# 5. Time the local scale for $K = 1, 2, 4, 8$ with three repeats each. Where does start-up stop being
#    negligible next to a 10 s job, and what does that mean for short jobs on a shared cluster?
#
# ### The reproducibility checklist
# A scaling result is only worth the work if someone else can get it again. With every result keep:
# 1. **Seeds**: every random generator's seed (here `--seed`, default 0, offset by the rank).
# 2. **Versions**: Python, torch, Ray, MLflow, and the full `pip freeze`; install from
#    `environments/constraints.txt` so the versions are the ones you report.
# 3. **Hardware**: CPU model and cores, GPUs and their driver, interconnect; nodes and $K$.
# 4. **Command lines**: the exact `scaleout run ...` (or `torchrun`/`sbatch`) line, with its arguments.
# 5. **Config files**: the rendered sbatch script, the Ray cluster YAML, environment variables set.
# 6. **Measurements**: wall time per repeat (not just the best), so $S_p$ and $E_p$ carry their spread.
#
# The cell below collects what this run can say about itself and asserts each item it can check: the
# seeded run repeats bit for bit, every installed package matches its pin (the installed list is read
# from the package metadata, which is what `pip freeze` prints), the commands are the ones that ran
# and succeeded, the config files exist, and every measurement was taken.

# %%
import platform  # noqa: E402
from importlib.metadata import distributions  # noqa: E402


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


again = cluster.run(worker, WORKERS, backend="sim", args=(LENGTH,), network=cluster.Network(alpha=1e-5, beta=1e-9))
assert all(np.array_equal(a, b) for a, b in zip(again.values, sim.values)) and again.sim_time == sim.sim_time

installed = {norm(d.metadata["Name"]): d.version for d in distributions()}
pins = {norm(k): v for k, v in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)",
                                          (ROOT / "environments" / "constraints.txt").read_text(), re.M)}
off_pin = {k: (installed[k], v) for k, v in pins.items() if k in installed and installed[k].split("+")[0] != v}
ran = [r for r in RUNS if "allreduce_check" in r["command"]]
record = {
    "seeds": {"allreduce_check --seed": 0, "numpy per rank": "default_rng(seed + rank)"},
    "python": platform.python_version(),
    "torch": torch.__version__,
    "ray": installed.get("ray"),
    "mlflow": installed.get("mlflow"),
    "packages (freeze)": len(installed),
    "hardware": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                 "cores": os.cpu_count(), "cuda devices": torch.cuda.device_count()},
    "commands": [r["command"] for r in ran],
    "config files": ["environments/constraints.txt", "environments/slurm/sbatch.template",
                     "environments/cloud/ray-cluster-aws.yaml"],
    "wall times (s)": {r["label"]: round(r["seconds"], 3) for r in ran},
}
for key, value in record.items():
    print(f"{key:>17}: {value}")
assert not off_pin, f"installed versions differ from environments/constraints.txt: {off_pin}"
assert torch.__version__.split("+")[0] == pins["torch"]
assert record["hardware"]["cores"] >= 1 and record["packages (freeze)"] > 0
assert ran and all(r["status"] == 0 for r in ran) and all(c.startswith("scaleout run examples/") for c in record["commands"])
assert all((ROOT / f).exists() for f in record["config files"]) and "#SBATCH" in sbatch_text
assert all(s > 0 for s in record["wall times (s)"].values())

# %% [markdown]
# ## 9. Research directions
#
# - **One job description for every resource manager.** The same script needs a different wrapper for
#   Slurm, Kubernetes, Ray and a cloud's batch service, and the contract between launcher and program
#   (a few environment variables and a rendezvous address) is a convention rather than a standard.
#   Describing a distributed job once, with its resources, placement and failure policy, so that any
#   manager can run it, is still open, and it decides how portable a result is.
#   - Yoo, Jette and Grondona, "SLURM: Simple Linux Utility for Resource Management", Job Scheduling
#     Strategies for Parallel Processing (JSSPP), 2003. The design of the resource manager behind the
#     Slurm scale: a controller, node daemons, and jobs whose steps `srun` launches.
#   - Moritz et al., "Ray: A Distributed Framework for Emerging AI Applications", OSDI, 2018. Tasks and
#     actors over a shared object store with a distributed scheduler; the substrate of the Ray scale.
#   - Yang et al., "SkyPilot: An Intercloud Broker for Sky Computing", NSDI, 2023. A job is described once
#     with its resource needs and placed on whichever cloud or region has the capacity at the lowest price,
#     failing over when capacity disappears.
# - **Scheduling learning jobs on shared clusters.** A training job needs all its ranks at once (gang
#   scheduling), prefers them close together, and runs for days, while a cluster serves many users.
#   Placement, fairness and preemption policies that keep utilisation high without starving large jobs
#   are an active area, and the measurements behind them come from few operators.
#   - Verma et al., "Large-scale cluster management at Google with Borg", EuroSys, 2015. Describes a
#     production cluster manager: admission, packing, priorities and what a decade of operation taught.
#   - Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning", OSDI, 2018. Exploits
#     the iterative structure of training to time-slice and migrate jobs on a GPU cluster.
#   - Hu et al., "Characterization of Large Language Model Development in the Datacenter", NSDI, 2024. A
#     six-month trace of a GPU datacentre used for LLM development: job sizes, utilisation, and how often
#     and why jobs fail.
# - **Start-up and membership at large $K$.** Section 7 shows start-up dominating small jobs; at
#   thousands of ranks the rendezvous, the import of the software stack on every node and the creation
#   of communicators take minutes, and on preemptible machines membership changes during the run.
#   Starting, resizing and recovering a group in time independent of $K$ is not solved.
#   - Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB, 2020.
#     The design of torch.distributed's data parallelism and what it costs to set up and synchronise.
#   - Thorpe et al., "Bamboo: Making Preemptible Instances Resilient for Affordable Training of Large
#     DNNs", NSDI, 2023. Keeps training going on cheap preemptible instances by redundant computation
#     instead of restarts.
#   - Jang, Yang, Zhang, Jin and Chowdhury, "Oobleck: Resilient Distributed Training of Large Models Using
#     Pipeline Templates", SOSP, 2023. Precomputes pipeline templates so that after up to $f$ simultaneous
#     failures the remaining nodes are regrouped into new pipelines without a restart.
# - **Reproducible software environments on clusters.** A pinned constraints file fixes Python packages
#   but not compilers, MPI, CUDA or drivers, and the same versions built differently can change results.
#   Environments that are exact, portable across clusters and cheap to rebuild remain hard.
#   - Gamblin et al., "The Spack Package Manager: Bringing Order to HPC Software Chaos", SC, 2015. A
#     package manager for HPC that records how each dependency was built, not only its version.
#   - Kurtzer, Sochat and Bauer, "Singularity: Scientific containers for mobility of compute", PLOS ONE,
#     2017. Containers that run unprivileged on shared HPC clusters, so an environment moves as one file.
#
# ## What's next
#
# Chapter 41 (Capstone) asks for a single-machine baseline, a distributed version and a reproducibility
# package: this lab is where its scripts run at the scales you report, and the checklist above is the one
# your package must satisfy. To understand the ring every scale ran here, and its cost, go back to
# Chapter 4 (Communication primitives) in Part I; Chapter 18 (Elastic and fault-tolerant training) takes
# the crashed rank of Section 6 further with torchrun restarts and checkpoints, and Chapter 33 (Cluster
# scheduling) looks at Slurm from the scheduler's side.
