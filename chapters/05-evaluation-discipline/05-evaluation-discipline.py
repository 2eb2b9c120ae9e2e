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
# # Chapter 5. Evaluation discipline
#
# A scale-out claim is a measurement, and a measurement without its spread, its baseline, its
# cost and the recipe to repeat it is an anecdote. This chapter builds the discipline the rest of
# the book relies on: a timing harness (warm-up, repeats, median, interquartile range, confidence
# interval), a scaling sweep that reports speedup $S_p$ and efficiency $E_p$ against an honest
# baseline, the cost of every configuration, experiment tracking in MLflow, and a reproducibility
# checklist filled in for this very run.
#
# **Prerequisites:** Chapter 3 (Performance models: $S_p$, $E_p$, the $\alpha$-$\beta$ model and
# stragglers) and Chapter 4 (Communication primitives: the ring all-reduce on the simulator and on real
# processes). Background: the median and percentiles, what a confidence interval says, and the basics of
# git.

# %% tags=["parameters"]
N = 200_000  # smoke: 40_000
D = 128  # smoke: 96
M = 64  # smoke: 32
STEPS = 20  # smoke: 5
PROCESS_K = [1, 2, 3, 4]  # smoke: [1, 2]
K_MAX = 64  # smoke: 16
REPEATS = 9  # smoke: 5
VECTOR_N = 4_000_000  # smoke: 1_000_000
ALPHA = 20e-6  # simulated latency per message (s)
BETA = 1 / 1.25e9  # simulated seconds per byte (10 Gbit/s)
INSTANCE_TYPE = "aws-c7i.xlarge"
SEED = 0
TIMEOUT_S = 300  # smoke: 120

# %% [markdown]
# ## 1. Motivation: you only know which ceiling binds by measuring
#
# Chapter 3's models predict which ceiling binds (compute, memory bandwidth or the network); a
# measurement is how you find out whether they were right. Measurements on a real machine are
# noisy: caches, frequency scaling, other processes (this notebook shares two cores with other
# work), the first-call costs of lazy initialisation. The discipline below makes the noise
# visible instead of pretending it is not there, and it makes every number traceable to the
# configuration that produced it.

# %%
import hashlib
import importlib.metadata as md
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, collectives, perf

rng = np.random.default_rng(SEED)
WORK = Path(tempfile.mkdtemp(prefix="ch05-"))  # everything this run writes: MLflow store, config
print("scratch folder:", WORK)

# %% [markdown]
# ## 2. Core concepts: the timing harness
#
# `perf.measure(fn, warmup=w, repeats=r)` calls `fn` $w$ times untimed, then $r$ times timed with
# `time.perf_counter`, and returns a `Timing`: the **median** (robust to the rare slow outlier),
# the **IQR** (the spread of the middle half), the sample standard deviation, and a 95%
# **bootstrap confidence interval** of the median.
#
# Why warm up? The first call often pays one-off costs that are not the steady state: lazy
# imports, JIT compilation, thread-pool start-up, and (shown here) **first touch** of memory: an
# array from `np.empty` has no physical pages until it is written, so the first call that writes
# it takes a page fault per 4 KiB page; later calls reuse the same pages.

# %%
x, y = rng.standard_normal(VECTOR_N), rng.standard_normal(VECTOR_N)
out = np.empty(VECTOR_N)  # allocated, never touched: no physical pages yet


def vector_add():
    np.add(x, y, out=out)


cold = perf.measure(vector_add, warmup=0, repeats=REPEATS)
warm = perf.measure(vector_add, warmup=1, repeats=REPEATS)
np.testing.assert_array_equal(out, x + y)
print(f"without warm-up: {cold}; first call {cold.times[0] * 1e3:.2f} ms = "
      f"{cold.times[0] / cold.median:.1f} x the median")
print(f"with warm-up:    {warm}; 95% CI of the median {warm.ci95[0] * 1e3:.2f} .. {warm.ci95[1] * 1e3:.2f} ms")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(range(1, REPEATS + 1), np.array(cold.times) * 1e3, "o-", label="no warm-up")
ax.plot(range(1, REPEATS + 1), np.array(warm.times) * 1e3, "s-", label="after 1 warm-up call")
ax.axhspan(warm.ci95[0] * 1e3, warm.ci95[1] * 1e3, color="C1", alpha=0.15, label="95% CI of the median")
ax.set_xlabel("repeat")
ax.set_ylabel("time (ms)")
ax.set_title(f"vector add of {VECTOR_N:,} float64")
ax.legend(fontsize="small")

# %% [markdown]
# The summary statistics are simple enough to recompute from the raw times, and we do, to be sure
# we know what the harness reports: the median, the IQR from the 25th and 75th percentiles, and
# the percentile bootstrap: resample the repeats with replacement 2000 times (seed 0), take each
# resample's median, and keep the middle 95% of those medians.

# %%
t = np.array(warm.times)
assert warm.median == np.median(t)
assert warm.iqr == np.percentile(t, 75) - np.percentile(t, 25)
boot_rng = np.random.default_rng(0)
boot_medians = np.median(t[boot_rng.integers(0, t.size, size=(2000, t.size))], axis=1)
assert warm.ci95 == tuple(np.percentile(boot_medians, [2.5, 97.5]))
assert warm.ci95[0] <= warm.median <= warm.ci95[1]
print("median, IQR and bootstrap CI recomputed from scratch: identical")

# %% [markdown]
# ## 3. The distribution and communication pattern: a data-parallel gradient
#
# The workload we sweep is the gradient step of a multi-output linear model $\hat Y = X W$ with
# $X \in \mathbb{R}^{N \times D}$, $W \in \mathbb{R}^{D \times M}$ and squared loss: the gradient
# $G = \frac{1}{N} X^\top (X W - Y)$ is a sum over rows, so $K$ workers each holding $N/K$ rows
# compute partial sums and one all-reduce of the $D \times M$ gradient gives every worker the full
# $G$ (Chapter 1). Per step a worker does $4 (N/K) D M$ FLOP and moves $8 D M$ bytes through a ring
# all-reduce: with $M = 64$ outputs the local work is a matrix product, compute-bound, so adding
# cores should help, as long as the all-reduce stays cheap next to it. We time both parts.
#
# The data are generated in chunks of rows, each from its own seed, so every worker builds exactly
# its shard and the union of the shards is the single-machine dataset, for any $K$.

# %%
CHUNK = 1000


def make_shard(n, d, m, seed, rank=0, size=1):
    """Rows of the (X, Y) dataset owned by ``rank`` of ``size``: whole chunks, split as evenly as possible."""
    chunks = np.array_split(np.arange(-(-n // CHUNK)), size)[rank]
    w_true = np.random.default_rng([seed, 10**9]).standard_normal((d, m))
    xs, ys = [np.empty((0, d))], [np.empty((0, m))]
    for c in chunks:
        r = np.random.default_rng([seed, int(c)])
        xc = r.standard_normal((min(CHUNK, n - c * CHUNK), d))
        xs.append(xc)
        ys.append(xc @ w_true + 0.1 * r.standard_normal((len(xc), m)))
    return np.concatenate(xs), np.concatenate(ys)


def train(comm, n, d, m, steps, seed, lr=0.5, track_uri=None, instance_type=None):
    """Full-batch gradient descent, data-parallel over comm.size workers; per-step times from inside."""
    X, Y = make_shard(n, d, m, seed, comm.rank, comm.size)
    W = np.zeros((d, m))
    step_times, comm_times = [], []

    def loop():
        nonlocal W
        for _ in range(steps):
            t0 = time.perf_counter()
            local = X.T @ (X @ W - Y)
            t1 = time.perf_counter()
            G = collectives.ring_allreduce(comm, local.ravel()).reshape(d, m) / n
            W = W - lr * G
            t2 = time.perf_counter()
            step_times.append(t2 - t0)
            comm_times.append(t2 - t1)

    if track_uri is None:
        loop()
    else:
        from scaleoutai import capstone

        with capstone.track(comm, experiment="ch05-measured", uri=track_uri, instance_type=instance_type,
                            params={"n": n, "d": d, "m": m, "steps": steps, "seed": seed},
                            problem="linear regression, data-parallel gradient descent") as run:
            loop()
            run.log_items(n * steps)
            run.log_metric("step_time", float(np.median(step_times)))
    return W, step_times, comm_times


def reference(n, d, m, steps, seed, lr=0.5):
    X, Y = make_shard(n, d, m, seed)
    W = np.zeros((d, m))
    for _ in range(steps):
        W = W - lr * X.T @ (X @ W - Y) / n
    return W


# Correctness first: sharded training equals single-machine training, on the simulator, for several K,
# uneven shards (3 500 rows = 4 chunks, the last one short) and more workers than chunks (K = 5, 8).
small = dict(n=3 * CHUNK + 500, d=12, m=5, steps=3, seed=SEED)
W_ref = reference(**small)
for K in (1, 2, 3, 5, 8):
    res = cluster.run(train, K, kwargs=small, timeout=60)
    for W_k, _, _ in res.values:
        np.testing.assert_allclose(W_k, W_ref, rtol=1e-10, atol=1e-12)
print("data-parallel gradient descent equals the single-machine reference for K = 1, 2, 3, 5, 8")

# %% [markdown]
# ## 4. From scratch: a scaling sweep on real processes
#
# Now the measurement. Each K runs as K operating-system processes (`backend="process"`, gloo
# over loopback). Two choices make the numbers honest:
#
# * **one BLAS thread per process** (`OMP_NUM_THREADS=1` and friends, set before the processes
#   start), so that K processes use K cores and $S_p$ measures distribution, not threading;
# * **time inside the workers**, per step, after a barrier: process start-up, imports and data
#   generation are not part of the step, and we report the median step time of rank 0 (after the
#   all-reduce every rank leaves the step together).
#
# Every point is also tracked in MLflow with `capstone.track(comm, ...)`: rank 0 opens a run in an
# sqlite store in the scratch folder, and the context manager times the body between two barriers
# and logs wall time, throughput and cost. We create the store once up front: its schema migration
# takes seconds and should not land inside a worker.
#
# The harness and the tracker are short; read them before trusting their numbers. In `perf.measure`
# note the untimed warm-up calls and that every repeat is kept; `Timing` computes the median, the IQR
# and the percentile bootstrap of the median from those raw times (seed 0, so the interval repeats);
# `capstone.track` puts a barrier on each side of the timed body, so every rank's clock starts and
# stops together, and marks a run that raised as FAILED.

# %%
from scaleoutai.notebooks import show

show(perf.measure, perf.Timing, capstone.track)

# %%
from scaleoutai.capstone.tracking import open_experiment

URI = f"sqlite:///{WORK / 'mlflow.db'}"
t0 = time.perf_counter()
open_experiment("ch05-measured", URI)
print(f"MLflow sqlite store created in {time.perf_counter() - t0:.1f} s: {URI}")

threads_before = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
os.environ.update({v: "1" for v in threads_before})
measured, launch_wall, W_by_K = {}, {}, {}
try:
    for K in PROCESS_K:
        res = cluster.run(train, K, backend="process", kwargs=dict(n=N, d=D, m=M, steps=STEPS, seed=SEED,
                          track_uri=URI, instance_type=INSTANCE_TYPE), timeout=TIMEOUT_S, quiet=True)
        W_by_K[K], steps_rank0, comm_rank0 = res.values[0]
        measured[K] = perf.Timing(tuple(steps_rank0))
        launch_wall[K] = res.wall_time
        comm_share = np.median(comm_rank0) / measured[K].median
        print(f"K = {K}: step {measured[K]}, all-reduce {comm_share:.0%} of it; "
              f"whole run seen from the notebook {res.wall_time:.1f} s")
finally:
    for v, old in threads_before.items():
        if old is None:
            os.environ.pop(v, None)
        else:
            os.environ[v] = old

for K in PROCESS_K[1:]:  # a fast wrong answer is not a speedup
    np.testing.assert_allclose(W_by_K[K], W_by_K[PROCESS_K[0]], rtol=1e-9, atol=1e-12)
T_measured = {K: t.median for K, t in measured.items()}
print(f"{os.cpu_count()} cores on this machine; weights agree across K")

# %% [markdown]
# Do not be surprised if $S_K$ falls well short of $K$ here, even below 1. The K processes share this
# machine's cores with the notebook kernel (and, in CI, with other jobs); once K exceeds the free cores
# they take turns. And the all-reduce share printed above counts the gloo messages *and* the wait for
# the other ranks: whenever one process is descheduled, its partners idle in `recv` (Chapter 3's
# straggler). That is the point of measuring: the model of Chapter 3 said the step is compute-bound,
# the measurement says how much of it the network and the neighbours take. The next cell says which K
# of this sweep had a core each.

# %% tags=["slide"]
cores = os.cpu_count() or 1
for K in PROCESS_K:
    fits = "one core per process" if K <= cores else f"{K} processes on {cores} cores: oversubscribed"
    print(f"K = {K}: S_K = {T_measured[PROCESS_K[0]] / T_measured[K]:.2f} ({fits})")
#
# ### The "what if" curve: the same step on the simulated cluster
#
# A few processes on one machine say nothing about 64 machines. The simulator extends the
# sweep with a model calibrated on the measurement: the one-worker step's compute time
# $T_1$ is split evenly, $T_1/K$ per worker via `comm.compute`, followed by a real ring all-reduce
# of the $D \cdot M$ gradient over an $\alpha$-$\beta$ network. The simulator's step time must
# equal the closed form $T_1/K + 2(K-1)(\alpha + \frac{8DM}{K}\beta)$ exactly.

# %%
T1 = T_measured[1]
grad_bytes = D * M * 8
Ks = [int(k) for k in 2 ** np.arange(0, int(np.log2(K_MAX)) + 1)]
assert all((D * M) % K == 0 for K in Ks), "D * M must split evenly over every K for the closed form"


def sim_step(comm, t1, floats):
    comm.compute(t1 / comm.size)
    return collectives.ring_allreduce(comm, np.ones(floats))[0]


net = cluster.Network(alpha=ALPHA, beta=BETA)
simulated = {}
for K in Ks:
    res = cluster.run(sim_step, K, args=(T1, D * M), network=net, timeout=120)
    assert all(v == K for v in res.values)
    closed = T1 / K + perf.collective_time("ring_allreduce", grad_bytes, K, ALPHA, BETA)
    np.testing.assert_allclose(res.sim_time, closed, rtol=1e-12)
    simulated[K] = res.sim_time
print(f"simulated step time equals T1/K + ring all-reduce for K = {Ks}")

# %% [markdown]
# ## 5. The same task with a production library: MLflow tracking
#
# The measured runs are already in MLflow (logged from inside the workers by `capstone.track`).
# We log the simulated points too, straight through the `mlflow` API into a second experiment, so
# both sweeps can be queried the same way; then `mlflow.search_runs` reads everything back as a
# table. Nothing here is held in notebook variables alone: the store is the record.

# %%
import mlflow

mlflow.set_tracking_uri(URI)
price = capstone.load_prices().lookup(INSTANCE_TYPE)
mlflow.set_experiment(experiment_id=capstone.open_experiment("ch05-whatif", URI)[1])  # created once, quietly
for K, t_step in simulated.items():
    with mlflow.start_run(run_name=f"sim K={K}"):
        mlflow.log_params({"world_size": K, "backend": "sim", "alpha": ALPHA, "beta": BETA, "t1": T1,
                           "instance_type": INSTANCE_TYPE, "price_per_hour": price.price_per_hour})
        mlflow.log_metrics({"step_time": t_step, "speedup": T1 / t_step, "efficiency": T1 / t_step / K,
                            "cost_per_1000_steps": perf.run_cost(price.price_per_hour, K, 1000 * t_step)})

runs = mlflow.search_runs(experiment_names=["ch05-measured"])
cols = ["params.world_size", "params.backend", "params.instances", "metrics.step_time", "metrics.wall_time",
        "metrics.throughput", "metrics.cost", "params.cpu_model"]
print(runs[cols].sort_values("params.world_size").to_string(index=False))
assert sorted(runs["params.world_size"].astype(int)) == sorted(PROCESS_K) and set(runs["status"]) == {"FINISHED"}
for _, r in runs.iterrows():
    assert r["metrics.step_time"] == T_measured[int(r["params.world_size"])]
whatif = mlflow.search_runs(experiment_names=["ch05-whatif"])
assert len(whatif) == len(Ks)
whatif = whatif.assign(K=whatif["params.world_size"].astype(int)).sort_values("K")
print(whatif[["K", "metrics.step_time", "metrics.speedup", "metrics.efficiency", "metrics.cost_per_1000_steps"]]
      .to_string(index=False))

# %% [markdown]
# ## 6. Failure modes of an evaluation
#
# * **Timing the wrong thing.** Seen from the notebook, a process run also pays for starting
#   Python, importing libraries and generating data; the printout above shows the whole run taking
#   seconds while a step takes milliseconds. Time inside the workers, between barriers.
# * **No warm-up, one repeat.** The first call above was slower than the steady state; a single
#   timing of it would be wrong by that factor, with no error bar to warn you.
# * **Oversubscription.** Without one BLAS thread per process, K = 1 already uses every core and
#   K = 2 fights over them: the "speedup" then measures thread contention.
# * **A silent failure.** A run that raised must not look like a fast run. `capstone.track` marks it
#   FAILED in MLflow with the error, as the check below shows; a report must filter on the status.

# %% tags=["slide-code"]
try:
    with capstone.track(None, experiment="ch05-failures", uri=URI, startup_time=0.0):
        raise FloatingPointError("loss is NaN at step 3")
except FloatingPointError:
    pass
failed = mlflow.search_runs(experiment_names=["ch05-failures"])
assert list(failed["status"]) == ["FAILED"]
print("failed run recorded as", failed["status"][0], "with", failed["tags.scaleout.error"][0])
print("launch overhead seen from the notebook: " + ", ".join(
    f"K = {K}: {launch_wall[K]:.1f} s for {STEPS} steps of {T_measured[K] * 1e3:.1f} ms" for K in PROCESS_K))

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency and cost
#
# `perf.scaling_table` turns {K: time} into $S_p$ and $E_p$ against the K = 1 run, and
# `perf.plot_scaling` draws them. The cost of a step on K instances billed at $c$ per hour is
# $C_K = c \cdot K \cdot T_K / 3600$ (`perf.run_cost`); relative to one worker,
# $C_K / C_1 = K T_K / T_1 = 1/E_K$: **efficiency is cost**. An $E_p$ of 50% doubles the bill.
# Prices come from `capstone/prices.yaml`, dated and sourced.

# %%
tables = {"measured (process backend)": perf.scaling_table(T_measured),
          "what-if (simulator)": perf.scaling_table(simulated)}
for name, rows in tables.items():
    print(name)
    print(f"  {'K':>3} {'T_K (ms)':>10} {'S_K':>7} {'E_K':>6} {'USD / 1000 steps':>17}")
    for r in rows:
        cost = perf.run_cost(price.price_per_hour, r["p"], 1000 * r["time"])
        cost1 = perf.run_cost(price.price_per_hour, rows[0]["p"], 1000 * rows[0]["time"])
        np.testing.assert_allclose(cost / cost1, 1 / r["efficiency"], rtol=1e-12)
        r["cost"] = cost
        print(f"  {r['p']:3d} {r['time'] * 1e3:10.2f} {r['speedup']:7.2f} {r['efficiency']:6.2f} {cost:17.5f}")
print(f"priced at {price.instance_type}: {price.price_per_hour} USD/h per instance ({price.date}; {price.source})")

fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
perf.plot_scaling(T_measured, ax=axes[0], title=f"measured on {os.cpu_count()} cores")
perf.plot_scaling(simulated, ax=axes[1], title="simulated what-if")
for (name, rows), marker in zip(tables.items(), "os"):
    c = [r["cost"] for r in rows]
    s = [r["speedup"] for r in rows]
    axes[2].plot(c, s, marker + "-", label=name)
    for r in rows:
        axes[2].annotate(f"K={r['p']}", (r["cost"], r["speedup"]), fontsize=7, xytext=(3, 3),
                         textcoords="offset points")
axes[2].set_xscale("log")
axes[2].set_yscale("log", base=2)
axes[2].set_xlabel("cost per 1000 steps (USD)")
axes[2].set_ylabel("speedup $S_K$")
axes[2].set_title("speedup against cost")
axes[2].legend(fontsize="small")
plt.tight_layout()

# %% [markdown]
# Read the right panel from left to right: each step up in K buys speedup for money. While
# $E_K \approx 1$ the points move straight up (faster at the same cost); once the all-reduce's
# latency term $2(K-1)\alpha$ catches up with the shrinking compute $T_1/K$, they bend to the right
# (more money, little speed) and finally backwards in speed. The cheapest K that meets your
# deadline is the answer; beyond the knee, more machines are a donation.
#
# ### The reproducibility checklist, filled in for this run
#
# Every measured claim should come with the recipe to repeat it (Appendix B). The checklist below
# is generated, not typed: seeds, exact parameters (written to a config file with its hash),
# software versions, hardware, the command that reruns this notebook, and the code version.

# %%
import torch

PARAMS = {k: globals()[k] for k in ("N", "D", "M", "STEPS", "PROCESS_K", "K_MAX", "REPEATS", "VECTOR_N",
                                    "ALPHA", "BETA", "INSTANCE_TYPE", "SEED", "TIMEOUT_S")}
config = WORK / "config.json"
tmp = config.with_suffix(".json.tmp")
tmp.write_text(json.dumps(PARAMS, indent=2, sort_keys=True))
os.replace(tmp, config)  # never a half-written config
digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16]

source = Path("05-evaluation-discipline.py")
smoke = False
if source.is_file():
    from scaleoutai.notebooks import smoke_parameters

    smoke = all(PARAMS[k] == v for k, v in smoke_parameters(source).items())
command = f"{Path(sys.executable).name} -m scaleoutai.cli notebooks run 05-evaluation-discipline" + (
    " --smoke" if smoke else "")
try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            timeout=10).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True,
                           text=True, timeout=10).stdout.strip()
    code_version = f"git {commit}" + (" + uncommitted changes" if dirty else "") if commit else "not a git checkout"
except (OSError, subprocess.TimeoutExpired):
    code_version = "git not available"
hw = capstone.hardware()
versions = {p: md.version(p) for p in ("scaleout-ai", "numpy", "torch", "mlflow", "matplotlib")}

checklist = {
    "seeds": f"SEED = {SEED} (data chunks seeded by [SEED, chunk]); bootstrap seed 0",
    "parameters": f"{config} (sha256 {digest}): " + ", ".join(f"{k}={v}" for k, v in PARAMS.items()),
    "software": f"Python {platform.python_version()}, " + ", ".join(f"{k} {v}" for k, v in versions.items()),
    "hardware": f"{hw['cpu_model']}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
                f"torch threads {torch.get_num_threads()}, GPU {hw['gpu']} x {hw['gpu_count']}",
    "threads per worker": "OMP/MKL/OPENBLAS_NUM_THREADS = 1 in the process sweep",
    "timing method": f"perf.measure / in-worker perf_counter, warm-up 1, median of {REPEATS} "
                     f"(process sweep: median of {STEPS} steps)",
    "baseline": f"K = {PROCESS_K[0]} run of the same program (T_1 = {T1 * 1e3:.2f} ms per step)",
    "correctness check": "sharded weights == single-machine weights (rtol 1e-10 on the simulator, 1e-9 across K)",
    "tracking": f"{URI} (experiments ch05-measured, ch05-whatif, ch05-failures)",
    "prices": f"{price.instance_type} {price.price_per_hour} USD/h, dated {price.date}",
    "command": command,
    "code version": code_version,
}
for item, value in checklist.items():
    assert value, f"checklist item {item!r} is empty"
    print(f"[x] {item:18s} {value}")

# Each item is checked against this run, not only filled in:
assert json.loads(config.read_text()) == json.loads(json.dumps(PARAMS))                 # parameters ...
assert hashlib.sha256(config.read_bytes()).hexdigest()[:16] == digest                   # ... and their hash
again = cluster.run(sim_step, Ks[-1], args=(T1, D * M), network=net, timeout=120)      # seeds: a rerun repeats
assert again.sim_time == simulated[Ks[-1]]
assert np.array_equal(make_shard(N, D, M, SEED, 0, 1)[0], make_shard(N, D, M, SEED, 0, 1)[0])
from scaleoutai.notebooks import find_repo_root

pins = dict(line.split("==", 1) for line in (find_repo_root() / "environments" / "constraints.txt").read_text()
            .splitlines() if "==" in line and not line.lstrip().startswith("#"))
for pkg in ("numpy", "torch", "mlflow", "matplotlib"):                                  # software: the pins
    assert versions[pkg].split("+")[0] == pins[pkg].strip(), (pkg, versions[pkg], pins[pkg])
assert torch.__version__.split("+")[0] == versions["torch"].split("+")[0]               # software versions
assert versions["numpy"] == np.__version__
assert T1 == T_measured[PROCESS_K[0]] > 0                                                # the baseline
assert all(np.allclose(W_by_K[K], W_by_K[PROCESS_K[0]], rtol=1e-9, atol=1e-12) for K in PROCESS_K)  # correctness
assert len(mlflow.search_runs(experiment_names=["ch05-measured"])) == len(PROCESS_K)    # tracking
assert price == capstone.load_prices().lookup(INSTANCE_TYPE)                            # prices
print("checklist: parameters, hash, seeded rerun, versions, baseline, correctness, tracking and price verified")

# %% [markdown]
# ## 8. Exercises
#
# 1. **How many repeats?** Time the vector add with 3, 10 and 30 repeats and plot the width of the
#    bootstrap CI against the number of repeats. Does it shrink like $1/\sqrt{r}$? What does a CI
#    that does not shrink tell you about the machine?
# 2. **Weak scaling.** Change the sweep so each worker keeps $N/K$ fixed as K grows (the Gustafson
#    view of Chapter 3, $B = K b$ with fixed $b$). Plot the step time; what should it be ideally?
# 3. **Find the knee.** For the simulated sweep, derive the K that minimises the step time
#    $T_1/K + 2(K-1)(\alpha + 8DM\beta/K)$ and the K that minimises cost subject to a deadline of
#    $T_1/8$. Check both against the MLflow table.
# 4. **Oversubscribe on purpose.** Rerun the process sweep without setting `OMP_NUM_THREADS=1`.
#    Record both sweeps in MLflow with a tag for the thread setting and compare $E_2$.
# 5. **Reproduce a colleague's run.** Give someone your config file and the command from the
#    checklist. Which of their numbers should match yours exactly, and which only within the CI?
#
# ## 9. Research directions
#
# - **Benchmarks that stay valid on shared, noisy machines.** Clouds and clusters are shared, and the
#   same job varies from run to run by tens of percent. How many repeats a claim needs, which statistic
#   to report, and how to separate the system's variance from the algorithm's are not settled practice.
#   - Hoefler and Belli, "Scientific Benchmarking of Parallel Computing Systems: Twelve Ways to Tell the
#     Masses when Reporting Performance Results", SC, 2015. Rules for reporting parallel performance,
#     from choosing the baseline to confidence intervals of the median.
#   - Mytkowicz, Diwan, Hauswirth and Sweeney, "Producing Wrong Data Without Doing Anything Obviously
#     Wrong!", ASPLOS, 2009. Shows that the link order or the size of the environment can swing a
#     measurement more than the effect being studied.
#   - Henning, Vogel, Perez-Wohlfeil, Ertl and Rabiser, "When Should I Run My Application Benchmark?:
#     Studying Cloud Performance Variability for the Case of Stream Processing Applications", FSE
#     Companion, 2025. Repeats one distributed benchmark for months across cloud regions and finds
#     run-to-run variation smaller than folklore holds, but with daily and weekly patterns.
# - **Time to quality, not throughput.** A larger $K$ buys throughput, but larger global batches may need
#   more steps to reach the same accuracy, so samples per second can rise while time to a target falls
#   behind. Benchmarks that measure the end-to-end time to a quality target, fairly across very different
#   systems, are still being designed.
#   - Mattson et al., "MLPerf Training Benchmark", MLSys, 2020. Time to a quality target as the metric,
#     and the rules that keep submissions comparable.
#   - Coleman et al., "DAWNBench: An End-to-End Deep Learning Benchmark and Competition", NeurIPS ML
#     Systems Workshop, 2017. The first benchmark to rank systems by time and cost to a target accuracy.
#   - Dahl et al., "Benchmarking Neural Network Training Algorithms", arXiv preprint, 2023. AlgoPerf: time
#     to a validation target on fixed hardware over several workloads, with tuning budgets and held-out
#     workload variants that keep comparisons of training algorithms fair.
# - **Reproducibility across scales.** A distributed run adds in a different order from a single machine,
#   so bitwise reproduction across $K$ is rarely possible. What a run must record to be repeatable, and
#   which differences are within tolerance, is still being worked out by venues and tools.
#   - Pineau et al., "Improving Reproducibility in Machine Learning Research (A Report from the NeurIPS
#     2019 Reproducibility Program)", Journal of Machine Learning Research, 2021. The checklist and code
#     policy of a large venue, and what they changed.
#   - Zaharia et al., "Accelerating the Machine Learning Lifecycle with MLflow", IEEE Data Engineering
#     Bulletin, 2018. The tracking design this chapter uses to keep every measured run queryable.
#   - Yuan et al., "Understanding and Mitigating Numerical Sources of Nondeterminism in LLM Inference",
#     NeurIPS, 2025. Shows that the batch size, the GPU count and the GPU type change a model's outputs and
#     its benchmark accuracy through floating-point reduction order alone, and that fp32 arithmetic largely
#     removes the effect.
#
# ## What's next
#
# Part II begins with Chapter 6 (MapReduce): the data itself is distributed, and the same discipline
# measures a shuffle instead of an all-reduce. Readers on the deep-learning path jump to Chapter 15
# (Data parallelism), where the sweep of Section 4 becomes the first scaling study of a neural network,
# and every path ends in Chapter 41 (Capstone), whose report is built from exactly these measurements.
