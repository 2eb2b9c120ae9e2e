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
# # Chapter 18. Elastic and fault-tolerant training
#
# The longer a job runs and the more machines it uses, the more certain it is that one of them fails
# before the end. Training survives by writing its state to disk now and then and by restarting from
# the last good copy, possibly on a different number of machines. This chapter makes checkpoints
# atomic, proves that a resumed run ends with exactly the weights of an uninterrupted one, re-shards
# optimizer state from $K$ to $K'$ ranks, crashes ranks on purpose on the simulator and under torchrun,
# measures how long recovery takes, and prices the checkpoint interval.
#
# **Prerequisites:** Chapter 2 (failure models: crash faults and what a survivor can know), Chapter 4
# (gather, all-gather, reduce-scatter and barriers), Chapter 15 (Data parallelism, DDP with
# `cluster.init()` and torchrun) and Chapter 16 (ZeRO: optimizer state sharded over $K$ ranks);
# background: momentum SGD and Adam, and what `fsync` and a file rename do on a POSIX file system.

# %% tags=["parameters"]
N_SAMPLES = 2000  # smoke: 200
SIZES = [16, 64, 64, 1]  # smoke: [8, 16, 1]
STEPS = 60  # smoke: 16
BATCH = 64  # smoke: 16
EVERY = 8  # smoke: 4
RESHARD = [(3, 3), (4, 2), (2, 5), (5, 8)]  # smoke: [(3, 3), (2, 5)]
DCP_RESHARD = (2, 3)
INTERVALS = [1, 2, 4, 8, 16, 32]  # smoke: [1, 2, 4, 8]
CRASH_POINTS = 6  # smoke: 2
DRILL_STEPS = 40  # smoke: 12
STEP_SECONDS = 0.05  # smoke: 0.02
SEED = 0

# %% [markdown]
# `SIZES` are the MLP's layer widths, trained for `STEPS` steps of global batch `BATCH` with momentum
# SGD; a checkpoint is written every `EVERY` steps. `RESHARD` lists $(K, K')$: crash on $K$ ranks,
# resume on $K'$; `DCP_RESHARD` is the $(K, K')$ of the `torch.distributed.checkpoint` run on real
# processes (save on $K$, load on $K'$). `INTERVALS` and `CRASH_POINTS` drive the checkpoint-frequency experiment;
# `DRILL_STEPS` and `STEP_SECONDS` (extra work per step) size the torchrun fault drill.
#
# ## 1. Motivation: which ceiling binds
#
# Here the ceiling is **reliability**. If one accelerator (with its host, links and power) fails on
# average once every $m$ hours, independently, a job on $K$ of them sees a failure every $m/K$ hours:

# %%
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.parallel import elastic
from scaleoutai.nn import flatten, mlp_backward, mlp_forward, mlp_init, mse_loss, unflatten

m_hours = 5 * 365 * 24  # one failure per device every 5 years
print(f"{'devices K':>10} {'mean time between failures of the job':>40}")
for n in (8, 512, 4096, 16384, 100_000):
    mtbf = m_hours / n
    print(f"{n:>10} {mtbf:>34.1f} h ({mtbf * 60:,.0f} min)")

# %% [markdown]
# A 16k-device run fails every few hours; a month-long run sees hundreds of failures. Without
# checkpoints none would finish. Three things must hold: the checkpoint on disk is never half-written,
# resuming reproduces the run exactly, and the job can restart on however many machines are left.
#
# ## 2. Core concepts
#
# **Checkpoint.** Everything the next step depends on: parameters, optimizer state (momentum, Adam
# moments and step count), the step number and the data position. Here the batch of step $s$ is a pure
# function of $(\text{seed}, s)$, so the step number *is* the data position, and training is a pure
# function $\text{state}_{s+1} = f(\text{state}_s, s)$: replaying steps $s, s+1, \dots$ from the
# checkpoint of step $s$ gives the uninterrupted result bit for bit.
#
# **Atomic write.** Write to a temporary file in the same directory, `flush` and `fsync` it, then
# `os.replace` it over the old name. A rename within a file system is atomic, so a crash at any instant
# leaves either the old checkpoint or the new one, never a mixture.
#
# **Re-sharding.** State split over $K$ ranks in `np.array_split` blocks becomes $K'$ blocks by
# concatenating and splitting again; nothing may be lost or reordered.
#
# **Checkpoint interval.** Writing costs $C$ seconds each time; a failure loses on average half an
# interval of work plus the restart time $R$. With mean time between failures $M$ and interval $\tau$,
# the overhead per unit of time is about $C/\tau + (\tau/2 + R)/M$, smallest at Young's
# $\tau^* = \sqrt{2CM}$.
#
# First the basic contract, on one process: train with checkpoints, die at step 7, resume.

# %%
rng = np.random.default_rng(SEED)
X = rng.standard_normal((N_SAMPLES, SIZES[0]))
Y = np.tanh(X @ rng.standard_normal((SIZES[0], SIZES[-1])))


def init_state():
    return {"w": flatten(mlp_init(SIZES, seed=SEED)), "mom": np.zeros(sum(
        v.size for v in mlp_init(SIZES, seed=SEED).values()))}


LIKE = mlp_init(SIZES, seed=SEED)


def sgd_step(state, s, lr=0.05, mu=0.9):
    """Momentum SGD on the batch of step s (drawn from rng([SEED, s]): replayable)."""
    idx = np.random.default_rng([SEED, s]).choice(N_SAMPLES, BATCH, replace=False)
    p = unflatten(state["w"], LIKE)
    y, cache = mlp_forward(p, X[idx])
    _, g = mlp_backward(p, cache, mse_loss(y, Y[idx])[1])
    mom = mu * state["mom"] + flatten(g)
    return {"w": state["w"] - lr * mom, "mom": mom}


class Crash(Exception):
    pass


def crashing_at(step):
    def step_fn(state, s):
        if s == step:
            raise Crash(f"node lost before step {s}")
        return sgd_step(state, s)
    return step_fn


work = Path(tempfile.mkdtemp(prefix="ch18-"))
ref, _ = elastic.train_with_checkpoints(sgd_step, init_state, STEPS, work / "ref", every=EVERY)
crash_step = STEPS // 2 + 1
try:
    elastic.train_with_checkpoints(crashing_at(crash_step), init_state, STEPS, work / "run", every=EVERY)
except Crash as exc:
    print("first attempt:", exc)
got, resumed = elastic.train_with_checkpoints(sgd_step, init_state, STEPS, work / "run", every=EVERY)
assert resumed == (crash_step // EVERY) * EVERY > 0
np.testing.assert_array_equal(got["w"], ref["w"])
np.testing.assert_array_equal(got["mom"], ref["mom"])
print(f"resumed from step {resumed}, redid {crash_step - resumed} steps; final weights equal the "
      f"uninterrupted run bit for bit; on disk: {sorted(os.listdir(work / 'run'))}")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# With $K$ data-parallel ranks the parameters are replicated but the optimizer state may be sharded
# (ZeRO-1, Chapter 16): rank $r$ holds block $r$ of the momentum. `elastic_train` runs exactly that:
# reduce-scatter of the gradient, momentum update on the own block, all-gather of the new weights.
# Every `EVERY` steps the momentum blocks are **gathered** to rank 0, which writes one checkpoint while
# the others wait at a **barrier**: a checkpoint on disk is always a state every rank reached. After a
# crash the whole group stops (a collective cannot finish without every member), a new group of $K'$
# ranks starts, each rank reads the newest checkpoint and takes block $r$ of `reshard(momentum, K')`.
# Production systems write in parallel instead (every rank its own shard, plus a metadata file, as
# `torch.distributed.checkpoint` does in section 5), which scales the write bandwidth with $K$.

# %%
full = np.arange(23.0)
for K_, K2 in RESHARD:
    shards = np.array_split(full, K_)
    new = elastic.reshard(shards, K2)
    np.testing.assert_array_equal(np.concatenate(new), full)
    assert [len(b) for b in new] == [len(b) for b in np.array_split(full, K2)]
    print(f"K={K_} -> K'={K2}: block sizes {[len(b) for b in shards]} -> {[len(b) for b in new]}")

# %% [markdown]
# ## 4. From scratch: crash, restart, re-shard, same weights
#
# Three functions of `scaleoutai.parallel.elastic` do the work. In `save_checkpoint` read the order of
# the atomic write: a temporary file in the same directory, `flush`, `fsync`, `os.replace`, then an
# `fsync` of the directory so that the rename itself survives a power cut. In `_worker` (the body of
# every rank) read the resume at the top, where the momentum from a checkpoint written by any $K$ is
# re-sharded with `reshard(ck["mom"], K)[r]`, and the checkpoint at the bottom: gather to rank 0, one
# write, a barrier. `elastic_train` is the supervisor: it runs the group, tells a crashed rank (restart
# on `K_after` ranks from the newest checkpoint) from a bug (raise at once).

# %%
from scaleoutai.notebooks import show

show(elastic.save_checkpoint, elastic._worker, elastic.elastic_train)

# %% [markdown]
# The reference is single-device momentum SGD on the same batches. Then each $(K, K')$ pair trains
# on the simulator three ways: uninterrupted on $K$; with a rank crashed mid-run (`cluster.Faults`:
# the rank stops when it tries to send its $n$-th message) and restarted on $K$; and restarted on $K'$.

# %%
def reference(n_steps, lr=0.05, mu=0.9):
    params = mlp_init(SIZES, seed=SEED)
    w, mom = flatten(params), np.zeros(sum(v.size for v in params.values()))
    for s in range(n_steps):
        idx = np.random.default_rng([SEED, s]).choice(N_SAMPLES, BATCH, replace=False)
        p = unflatten(w, params)
        y, cache = mlp_forward(p, X[idx])
        _, g = mlp_backward(p, cache, mse_loss(y, Y[idx])[1])
        mom = mu * mom + flatten(g)
        w = w - lr * mom
    return unflatten(w, params)


single = reference(STEPS)
for K_, K2 in RESHARD:
    crash = {K_ - 1: (K_ - 1) * STEPS + 1}  # the last rank, about half-way (2(K-1) messages per step)
    clean = elastic.elastic_train(X, Y, SIZES, STEPS, BATCH, str(work / f"clean{K_}{K2}"), every=EVERY, K=K_)
    same = elastic.elastic_train(X, Y, SIZES, STEPS, BATCH, str(work / f"same{K_}{K2}"), every=EVERY, K=K_,
                            faults=cluster.Faults(crash=crash))
    moved = elastic.elastic_train(X, Y, SIZES, STEPS, BATCH, str(work / f"moved{K_}{K2}"), every=EVERY, K=K_,
                             faults=cluster.Faults(crash=crash), K_after=K2)
    assert same.restarts == moved.restarts == 1 and same.resumed_from[1] > 0 and moved.world_sizes == [K_, K2]
    for k in single:
        np.testing.assert_array_equal(same.params[k], clean.params[k])  # same K: bit for bit
        np.testing.assert_allclose(moved.params[k], clean.params[k], rtol=1e-12, atol=1e-12)  # sums re-associated
        np.testing.assert_allclose(clean.params[k], single[k], rtol=1e-12, atol=1e-12)
    print(f"K={K_}: crashed ({moved.errors[0][:60]}...), resumed from step {moved.resumed_from[1]} "
          f"on K'={K2}: weights equal the uninterrupted run and the single device")

# %% [markdown]
# On the same $K$ the replay is the same computation in the same order, so the weights are *identical*.
# On $K' \neq K$ the gradient sums are added in a different order, so they agree to rounding
# ($10^{-12}$), not to the bit; that difference is inherent to elastic training.
#
# ## 5. The same task with production libraries
#
# ### `torch.distributed.checkpoint`: save on $K$ ranks, load on $K'$
#
# DCP saves a state dict from every rank in parallel: each rank writes the tensors (or shards of
# tensors) it owns to its own `.distcp` file, plus one `.metadata` file that records where every shard
# of every tensor sits in the global tensor. `dcp.load` fills a state dict *in place*, and the layout it
# fills may differ from the one that was saved: each rank reads exactly the byte ranges its new shards
# cover. That is re-sharding, done by the library.
#
# The state is our own: a from-scratch `elastic_train` on `DCP_RESHARD[0]` ranks stops half-way, and its
# newest checkpoint (weights `w`, replicated, and the ZeRO-1 momentum, sharded) is handed to
# `DCP_RESHARD[0]` gloo processes, which hold the momentum as a `DTensor` sharded along dimension 0
# (`Shard(0)`) over a 1-D device mesh and call `dcp.save`. Then a *new* group of `DCP_RESHARD[1]`
# processes builds an empty state dict with the momentum sharded over its own mesh and calls `dcp.load`.
# The notebook asserts that DCP wrote one file per saving rank, that every new rank received exactly its
# new block (`DTensor` cuts blocks like `torch.chunk`, ceil-sized, not like `np.array_split`), that the
# blocks put together equal the saved momentum bit for bit, and finally that our training, resumed
# from the state DCP loaded, ends with the weights of the uninterrupted run.

# %%
def dcp_save_worker(comm, path, w, mom, step):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (comm.size,))
    state = {"w": torch.from_numpy(w), "mom": distribute_tensor(torch.from_numpy(mom), mesh, [Shard(0)]),
             "step": torch.tensor([step])}
    t0 = time.perf_counter()
    dcp.save(state, checkpoint_id=path)
    return {"backend": dist.get_backend(), "world": dist.get_world_size(), "t_save": time.perf_counter() - t0,
            "local": state["mom"].to_local().numpy().copy()}


def dcp_load_worker(comm, path, n_w, n_mom):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (comm.size,))
    state = {"w": torch.zeros(n_w, dtype=torch.float64),  # an empty state in the new layout
             "mom": distribute_tensor(torch.zeros(n_mom, dtype=torch.float64), mesh, [Shard(0)]),
             "step": torch.tensor([-1])}
    t0 = time.perf_counter()
    dcp.load(state, checkpoint_id=path)
    return {"backend": dist.get_backend(), "world": dist.get_world_size(), "t_load": time.perf_counter() - t0,
            "w": state["w"].numpy().copy(), "local": state["mom"].to_local().numpy().copy(),
            "step": int(state["step"][0])}


K_save, K_load = DCP_RESHARD
half = elastic.elastic_train(X, Y, SIZES, STEPS // 2, BATCH, str(work / "dcp-src"), every=EVERY, K=K_save)
assert half.restarts == 0 and half.world_sizes == [K_save]
step_ck, ck = elastic.latest_checkpoint(work / "dcp-src")
assert 0 < step_ck < STEPS and len(ck["mom"]) == K_save
mom_full = np.concatenate(ck["mom"])
t0 = time.perf_counter()
saved = cluster.run(dcp_save_worker, K_save, backend="process", timeout=120, quiet=True,
                    args=(str(work / "dcp"), ck["w"], mom_full, step_ck))
loaded = cluster.run(dcp_load_worker, K_load, backend="process", timeout=120, quiet=True,
                     args=(str(work / "dcp"), len(ck["w"]), len(mom_full)))
wall_dcp = time.perf_counter() - t0
files = sorted(os.listdir(work / "dcp"))
assert [(v["backend"], v["world"]) for v in saved.values] == [("gloo", K_save)] * K_save
assert [(v["backend"], v["world"]) for v in loaded.values] == [("gloo", K_load)] * K_load
assert ".metadata" in files and len([f for f in files if f.endswith(".distcp")]) == K_save  # one file per rank
np.testing.assert_array_equal(np.concatenate([v["local"] for v in saved.values]), mom_full)
chunk = -(-len(mom_full) // K_load)  # torch.chunk: ceil-sized blocks, the last ones shorter (or empty)
want = [max(0, min(chunk, len(mom_full) - r * chunk)) for r in range(K_load)]
assert [len(v["local"]) for v in loaded.values] == want
np.testing.assert_array_equal(np.concatenate([v["local"] for v in loaded.values]), mom_full)
for v in loaded.values:
    np.testing.assert_array_equal(v["w"], ck["w"])
    assert v["step"] == step_ck
print(f"from-scratch checkpoint of step {step_ck} (K = {K_save}, momentum blocks {[len(b) for b in ck['mom']]})")
print(f"dcp.save on {K_save} gloo ranks ({max(v['t_save'] for v in saved.values) * 1e3:.1f} ms) wrote {files}")
print(f"dcp.load on {K_load} ranks ({max(v['t_load'] for v in loaded.values) * 1e3:.1f} ms): momentum blocks "
      f"{[len(v['local']) for v in loaded.values]} (np.array_split would give "
      f"{[len(b) for b in elastic.reshard(ck['mom'], K_load)]}); every tensor equals the saved one bit for bit "
      f"({wall_dcp:.1f} s for both process groups)")

# resume our training on K' ranks from the state DCP re-sharded, and finish the run
resumed_dir = work / "dcp-resumed"
resumed_dir.mkdir()
elastic.save_checkpoint(elastic.checkpoint_path(resumed_dir, step_ck),
                        {"w": loaded.values[0]["w"], "mom": [v["local"] for v in loaded.values], "K": K_load})
after = elastic.elastic_train(X, Y, SIZES, STEPS, BATCH, str(resumed_dir), every=EVERY, K=K_load)
assert after.resumed_from == [step_ck] and after.world_sizes == [K_load]
for k in single:
    np.testing.assert_allclose(after.params[k], single[k], rtol=1e-12, atol=1e-12)
print(f"elastic_train resumed at step {step_ck} on K' = {K_load} ranks from the DCP-loaded state and ended "
      f"with the weights of the uninterrupted single-device run (rtol 1e-12)")

# %% [markdown]
# ### torchrun elastic: the fault drill
#
# `examples/fault_drill.py` is a complete fault-tolerant training script: `cluster.init()`, from-scratch
# DDP (Chapter 15) with Adam, an atomic checkpoint every few steps written by rank 0 behind a barrier,
# resume from the newest checkpoint at start-up, and an injected crash: rank 1 calls `os._exit(1)` once,
# half-way (a marker file records that it has crashed). torchrun's agent notices the dead worker, stops
# the group and, with `--max-restarts=1`, starts it again; the script resumes from its checkpoint.
#
# One practical detail: since torch 2.5 torchrun shares its rendezvous store with the workers, and after
# a restart the new gloo group can read the old group's addresses and fail (intermittently: a race)
# with "connectFullMesh ... Connection refused". `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` gives each round a fresh store.

# %%
import scaleoutai

sys.path.insert(0, str(Path(scaleoutai.__file__).resolve().parents[2] / "examples"))  # src/scaleoutai -> repo
import fault_drill  # noqa: E402

drill = work / "drill"
cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=1",
       str(Path(fault_drill.__file__)), "--ckpt-dir", str(drill / "ckpt"), "--out", str(drill / "final.npz"),
       "--crash-marker", str(drill / "crashed"), "--steps", str(DRILL_STEPS), "--every", "4",
       "--step-seconds", str(STEP_SECONDS)]
env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
print("$", " ".join(cmd[2:]).replace(sys.executable, "python"))
t0 = time.perf_counter()
proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
wall_drill = time.perf_counter() - t0
assert proc.returncode == 0, proc.stderr[-3000:]
events = [(int(r), int(a), e, int(s), float(t)) for r, a, e, s, t in
          re.findall(r"^drill rank=(\d+) attempt=(\d+) event=(\w+) step=(\d+) t=([\d.]+)", proc.stdout, re.M)]
for ev in events:
    if ev[2] in ("crash", "resume", "final") or (ev[2] == "checkpoint"):
        print(f"  rank {ev[0]} attempt {ev[1]}: {ev[2]:<10} step {ev[3]}")
with np.load(drill / "final.npz") as z:
    final = {k: z[k] for k in z.files}
expected = fault_drill.reference(DRILL_STEPS, 16, [8, 16, 1], 0, 0.01)
for k in expected:
    np.testing.assert_allclose(final[k], expected[k], rtol=1e-12, atol=1e-12)
assert int(final["attempt"]) == 1 and int(final["resumed_from"]) > 0
print(f"torchrun restarted the group once; it resumed from step {int(final['resumed_from'])} and its final "
      f"weights equal single-device Adam ({wall_drill:.1f} s in all)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Torn checkpoints.** The worst time to die is while writing the checkpoint. Below, a child process
# writes half of a checkpoint's bytes and then dies without cleanup (`os._exit`, as a power cut or the
# kernel's OOM killer would), once with the naive in-place writer and once with the atomic one.

# %%
KILL_MID_WRITE = textwrap.dedent("""
    import io, os, sys
    import numpy as np
    from scaleoutai.parallel import elastic
    real = np.savez
    def torn(f, **arrays):
        buf = io.BytesIO(); real(buf, **arrays)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2]); f.flush()
        os._exit(9)
    np.savez = torn
    save = elastic.save_checkpoint if sys.argv[2] == "atomic" else elastic.save_checkpoint_naive
    save(sys.argv[1], {"w": np.full(1000, 2.0), "step": 8})
""")
for writer in ("naive", "atomic"):
    d = work / f"torn-{writer}"
    d.mkdir()
    elastic.save_checkpoint(elastic.checkpoint_path(d, 4), {"w": np.full(1000, 1.0), "step": 4})
    elastic.save_checkpoint(elastic.checkpoint_path(d, 8), {"w": np.full(1000, 1.5), "step": 8})
    proc = subprocess.run([sys.executable, "-c", KILL_MID_WRITE, elastic.checkpoint_path(d, 8), writer], timeout=60)
    assert proc.returncode == 9
    try:
        step8 = f"loads, w = {elastic.load_checkpoint(elastic.checkpoint_path(d, 8))['w'][0]}"
    except ValueError as exc:
        step8 = f"ValueError: {str(exc)[:70]}..."
    step, state = elastic.latest_checkpoint(d)
    print(f"{writer:>6} writer killed mid-write: ckpt-8 {step8}\n        newest readable checkpoint: step {step}; "
          f"files {sorted(os.listdir(d))}")
    assert step == (8 if writer == "atomic" else 4)

# %% [markdown]
# The naive writer destroyed the newest checkpoint, and the job silently lost four more steps (worse:
# with only one checkpoint kept, it would have lost everything). The atomic writer left a stray temp
# file and an intact `ckpt-8`. Other failure modes worth a drill:
#
# * **A bug is not a crash.** Restarting a job that fails deterministically just burns the restart
#   budget. `elastic_train` restarts only on crashed ranks and re-raises anything else.
# * **Non-replayable data order.** If the batch of step $s$ depends on how many steps ran in this
#   process (a global RNG advanced since start-up), the resumed run trains on different data.
# * **Split brain on resume.** Ranks that read different checkpoint directories resume from different
#   steps; the drill all-gathers the resume step and refuses to start if the ranks disagree.

# %%
try:
    elastic.elastic_train(X, Y, [SIZES[0] + 1, *SIZES[1:]], STEPS, BATCH, str(work / "bug"), every=EVERY, K=2)
    raise AssertionError("a deterministic bug must be raised, not retried")
except cluster.RankError as exc:
    assert not isinstance(exc.__cause__, cluster.PeerCrashedError)  # a real error, not a lost peer
    print(f"a shape bug is raised at once, not retried: {str(exc).splitlines()[0][:100]}")

# %% [markdown]
# ## 7. Evaluation: time to recover and the cost of checkpoint frequency
#
# **Time to recover**, measured on the drill's log: from the crash to the moment the restarted group
# has again completed as many steps as the old one had, split into the restart itself (torchrun
# detects the failure, kills the survivors, starts new processes, they rendezvous and load the
# checkpoint) and the steps redone since the last checkpoint.

# %%
t_crash = next(t for r, a, e, s, t in events if e == "crash")
crash_at = next(s for r, a, e, s, t in events if e == "crash")
t_resume = min(t for r, a, e, s, t in events if e == "resume" and a == 1)
resume_at = next(s for r, a, e, s, t in events if e == "resume" and a == 1)
t_back = next(t for r, a, e, s, t in events if e == "done" and a == 1 and s == crash_at)
done0 = sorted((s, t) for r, a, e, s, t in events if e == "done" and a == 0)
t_step = float(np.median(np.diff([t for _, t in done0])))
restart, redo = t_resume - t_crash, t_back - t_resume
print(f"crash before step {crash_at}, last checkpoint at step {resume_at}: {crash_at - resume_at} steps lost")
print(f"time to recover {t_back - t_crash:.2f} s = restart {restart:.2f} s + redoing {crash_at - resume_at} steps "
      f"{redo:.2f} s (a step takes {t_step * 1e3:.0f} ms)")
assert crash_at - resume_at < 4 and t_back > t_resume > t_crash

# %% [markdown]
# **Checkpoint frequency.** Now vary the interval on one process: for each interval, crash the run
# at `CRASH_POINTS` different steps, resume, and measure the wall time of everything (all writes, the
# lost steps and the redo) against an uninterrupted run without checkpoints. Our MLP step takes a
# fraction of a millisecond while a write with `fsync` takes milliseconds, so each step gets
# `STEP_SECONDS / 4` of extra "compute" to put the two on a comparable footing. Frequent checkpoints
# waste time writing; rare ones waste time redoing.

# %%
def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def slow_step(state, s):
    """A step with STEP_SECONDS / 4 of extra 'compute', so steps cost about as much as a write."""
    time.sleep(STEP_SECONDS / 4)
    return sgd_step(state, s)


def slow_crashing_at(step):
    def step_fn(state, s):
        if s == step:
            raise Crash(f"node lost before step {s}")
        return slow_step(state, s)
    return step_fn


def plain_run():
    state = init_state()
    for s in range(STEPS):
        state = slow_step(state, s)
    return state


t_plain, final_state = min(timed(plain_run) for _ in range(3))  # no checkpoints, no crash
step_time = t_plain / STEPS
crash_rng = np.random.default_rng(SEED)
crashes = crash_rng.integers(1, STEPS, size=CRASH_POINTS)
rows = []
for every in INTERVALS:
    overheads, lost = [], []
    for c in crashes:
        d = work / f"freq-{every}-{c}"
        t_a = time.perf_counter()
        try:
            elastic.train_with_checkpoints(slow_crashing_at(int(c)), init_state, STEPS, d, every=every)
        except Crash:
            pass
        _, resumed = elastic.train_with_checkpoints(slow_step, init_state, STEPS, d, every=every)
        overheads.append(time.perf_counter() - t_a - t_plain)
        lost.append(int(c) - resumed)
    rows.append((every, float(np.mean(lost)), float(np.median(overheads))))
print(f"a step takes {step_time * 1e3:.2f} ms; uninterrupted run {t_plain * 1e3:.1f} ms")
print(f"{'interval':>9} {'steps lost (mean)':>18} {'overhead per crash (ms)':>24}")
for every, l_, o in rows:
    assert l_ < every
    print(f"{every:>9} {l_:>18.1f} {o * 1e3:>24.1f}")

# %% [markdown]
# Steps lost stay below the interval (on average about half of it). To turn this into the choice of
# interval for a real job, measure the write cost $C$ and plug in a failure rate: the expected overhead
# per hour is $C/\tau + (\tau/2 + R)/M$ with $R$ the measured restart time from the drill.

# %%
t_write, _ = timed(lambda: elastic.save_checkpoint(work / "probe.npz", final_state))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot([r[0] for r in rows], [r[2] * 1e3 for r in rows], "o-")
axes[0].set(xscale="log", xlabel="checkpoint interval (steps)", ylabel="overhead per crashed run (ms)",
            title="Measured: write cost vs redone steps")
C, M = 60.0, 3600.0 * 2.7  # a large model: 60 s per checkpoint, a failure every 2.7 h (16k devices)
tau = np.logspace(1, 4.5, 200)
overhead = C / tau + (tau / 2 + restart) / M
tau_star = np.sqrt(2 * C * M)
axes[1].plot(tau / 60, 100 * overhead)
axes[1].axvline(tau_star / 60, color="k", ls=":", label=fr"$\tau^*=\sqrt{{2CM}}$ = {tau_star / 60:.0f} min")
axes[1].set(xscale="log", xlabel="interval (min)", ylabel="time lost (%)", title="Model: C = 60 s, M = 2.7 h")
axes[1].legend()
plt.show()
lost_pct = 100 * (C / tau_star + (tau_star / 2 + restart) / M)
print(f"here a checkpoint write (with fsync) takes {t_write * 1e3:.1f} ms, {t_write / step_time:.1f} steps' worth;"
      f" at the 16k-device scale tau* = {tau_star / 60:.0f} min costs {lost_pct:.1f}% of the run")

# %% [markdown]
# The cost curve is flat near its minimum, so the interval need not be exact, but checkpointing every
# step or once a day are both expensive. Making $C$ small (asynchronous checkpoints that copy to host
# memory and write in the background, sharded writes as in DCP) moves $\tau^*$ down and the overhead
# with it. The dollar cost follows directly: at $K$ devices and $P$ dollars per device-hour, the
# overhead fraction times $K \cdot P$ times the run's hours.
#
# ## 8. Exercises
#
# 1. **Asynchronous checkpoints.** Write a checkpointer that copies the state and writes it from a
#    background thread. Measure how much of $C$ disappears from the step time; what must the next
#    checkpoint wait for?
# 2. **Keep-$n$.** `train_with_checkpoints(keep=2)` deletes old files. Construct a failure sequence in
#    which `keep=1` loses all progress with the naive writer but not with the atomic one.
# 3. **Elastic shrink.** Run the fault drill with `--max-restarts=0` and `--nproc-per-node=2`, then
#    restart it by hand on 1 process. Which parts of the script make that work?
# 4. **Young vs Daly.** Derive $\tau^* = \sqrt{2CM}$ from the overhead model and compare with the
#    measured optimum of section 7 by plugging in the measured $C$ and a made-up $M$.
# 5. **Lab 18** (`labs/lab18-resumable-training`). Replace the gathered checkpoint with a sharded one:
#    each rank writes its own shard atomically and sends rank 0 a sha256, a manifest written last commits
#    it, and a restart on K' ranks reads only the old shards its block overlaps, rejects damaged ones and
#    ends bit for bit on the uninterrupted run, on the simulator and on 2 real processes.
#
# ## 9. Research directions
#
# - **Checkpoints that do not stall training.** A synchronous checkpoint stops every accelerator for
#   $C$ seconds, and $C$ grows with the model. Snapshotting to host memory and persisting in the
#   background, or keeping copies in peers' memory, shrinks the stall, but how often one can checkpoint
#   without slowing training, and what consistency a background copy guarantees, depend on the model
#   and the storage and are still being worked out.
#   - Mohan, Phanishayee and Chidambaram, "CheckFreq: Frequent, Fine-Grained DNN Checkpointing", FAST,
#     2021. Splits a checkpoint into a snapshot pipelined with the next iteration and a background
#     persist, and tunes the interval online from measured costs.
#   - Wang et al., "Gemini: Fast Failure Recovery in Distributed Training with In-Memory Checkpoints",
#     SOSP, 2023. Checkpoints to the CPU memory of other machines, placed so that most failures leave a
#     copy, and interleaves the traffic with training's own communication.
# - **Smaller checkpoints and the right interval.** For models with huge embedding tables or optimizer
#   state a full checkpoint is terabytes; writing only what changed, or a compressed copy, changes the
#   cost $C$ in Young's $\tau^* = \sqrt{2CM}$, while the failure rate $M$ itself varies over a job's
#   life. Choosing what to save and when, with error bounds on what a lossy checkpoint does to training,
#   is open.
#   - Eisenman et al., "Check-N-Run: A Checkpointing System for Training Deep Learning Recommendation
#     Models", NSDI, 2022. Saves only the embedding rows modified since the last checkpoint and
#     quantizes them, cutting checkpoint size and write bandwidth by large factors.
#   - Young, "A First Order Approximation to the Optimum Checkpoint Interval", Communications of the
#     ACM, 1974. Derives the $\sqrt{2CM}$ interval used in Section 7 from the expected time lost to
#     checkpoints and to failures.
# - **Training through failures without a full restart.** Restarting the whole group from a checkpoint
#   costs every rank the lost work plus the restart time $R$. Keeping redundant computation or
#   precomputed alternative layouts lets a job continue on the survivors, at a price in throughput that
#   is only worth paying above some failure rate; where that crossover lies at large scale is not known.
#   - Thorpe et al., "Bamboo: Making Preemptible Instances Resilient for Affordable Training of Large
#     DNNs", NSDI, 2023. Runs redundant pipeline-stage computation in the bubbles so that a preempted
#     node's work can be taken over by its neighbour without rolling back.
#   - Jang et al., "Oobleck: Resilient Distributed Training of Large Models Using Pipeline Templates",
#     SOSP, 2023. Precomputes pipeline templates for different node counts and re-instantiates from the
#     surviving replicas' state, so that recovery needs no checkpoint reload.
# - **Changing $K$ without changing the model.** Re-sharding keeps the state exact, but an elastic job
#   must also decide what happens to the batch: keeping $B$ fixed changes each worker's $b = B/K$, and
#   letting $B = K b$ change alters the training trajectory and the right learning rate. Schedulers
#   that resize jobs while keeping their statistical efficiency are still young.
#   - Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep Learning", OSDI,
#     2021. Adapts each job's resources, batch size and learning rate together to maximise goodput, a
#     product of throughput and statistical efficiency.
#   - Athlur et al., "Varuna: Scalable, Low-cost Training of Massive Deep Learning Models", EuroSys,
#     2022. Trains large models on preemptible cloud VMs and reshapes the pipeline and data-parallel
#     layout as machines come and go.
#
# ## What's next
#
# Chapter 19 (Foundation-model training) puts Part IV together: data, tensor, pipeline and expert
# parallelism composed on one device mesh, a memory model for parameters, gradients, optimizer state and
# activations, and the scaling laws and MFU that decide how large a run should be. Every one of those
# runs is long enough to fail many times, so it relies on the sharded, re-shardable checkpoints of this
# chapter; Chapter 35 (Reliable and secure distributed AI) returns to failures that are not crashes,
# such as corrupted checkpoints and Byzantine workers.
