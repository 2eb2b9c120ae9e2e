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
# # Chapter 21. Distributed hyperparameter optimization
#
# Every model in this book has knobs that training does not learn: the learning rate $\eta$, the
# momentum, the batch size $b$, the width. Finding good values means training the model many times,
# and that is the most naturally parallel workload in machine learning: trials are independent, so
# $K-1$ workers can run $K-1$ of them at once with nothing to exchange but a configuration going out
# and a score coming back. The interesting part is not the parallelism but the **scheduling**: most
# trials are bad, and the best tuners spot them early and stop them. This chapter builds random search,
# successive halving, its asynchronous version ASHA and population-based training (PBT) on one small
# scheduler API, runs them with a distributed driver on the simulated cluster, measures why ASHA's lack
# of barriers matters, and then does the same search with Ray Tune.
#
# **Prerequisites:** Chapter 3 (speedup $S_p$, efficiency $E_p$, stragglers and critical paths),
# Chapter 4 (point-to-point `send`/`recv` on the simulated cluster), Chapter 5 (evaluation discipline
# and cost) and Chapter 20 (Ray actors); background: what a learning rate, an epoch and a learning curve
# are, and the basics of early stopping.

# %% tags=["parameters"]
KS = [2, 3, 5, 8]  # smoke: [2, 3, 5]
N_TRIALS = 81  # smoke: 27
REDUCTION = 3
MIN_R = 1
MAX_R = 27
RANDOM_TRIALS = 20  # smoke: 10
PBT_POPULATION = 8  # smoke: 6
PBT_GENERATIONS = 12  # smoke: 6
PBT_INTERVAL = 3
TUNE_SAMPLES = 27  # smoke: 9
TUNE_MAX_T = 27  # smoke: 9
SEED = 0

# %% [markdown]
# `KS` are world sizes: rank 0 schedules, ranks $1..K-1$ evaluate. `N_TRIALS` configurations enter
# successive halving and ASHA, trained on resources (think epochs) from `MIN_R` to `MAX_R` with
# reduction factor $\rho$ = `REDUCTION` (the Hyperband and ASHA papers write it $\eta$; in this book
# $\eta$ is only ever a learning rate). `RANDOM_TRIALS` is the random-search budget, `PBT_*` the PBT population, generations and
# steps per generation, and `TUNE_*` the size of the Ray Tune run.
#
# ## 1. Motivation: which ceiling binds
#
# One trial is one full training run. A search over $n$ configurations trained for $R$ epochs each costs
# $n \cdot R$ epochs of compute: tuning routinely costs ten to a hundred times the final training run.
# Two ceilings bind. The **total compute** $n R$ is cut by *early stopping*: most configurations reveal
# themselves as bad after a few epochs. The **wall-clock time** is cut by *parallelism*: with $K-1$
# workers the makespan of $n$ independent trials approaches $nR/(K-1)$. The two interact: early
# stopping creates trials of very different lengths, and a scheduler that waits for all of them at a
# barrier gives back much of the parallel speedup. That interaction is this chapter's subject.
#
# Our objective has a known optimum so that every result can be checked. `curve_score` is a synthetic
# learning curve over two hyperparameters, the learning rate and the momentum:
# $\text{score}(c, r) = q(c) - e^{-r/10}$ with quality
# $q(c) = 1 - \tfrac14(\log_{10}\text{lr} + 2)^2 - (\text{momentum} - 0.9)^2$,
# best at lr $= 10^{-2}$, momentum $= 0.9$. The score grows with the resource $r$ and the ranking of
# configurations is the same at every $r$, which is the assumption early stopping relies on.

# %%
import logging
import os
import shutil
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, perf
from scaleoutai.parallel import hpo

print("search space:", hpo.CURVE_SPACE, " optimum:", hpo.CURVE_OPTIMUM)
lrs = np.logspace(-4, 0, 200)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for m in (0.0, 0.5, 0.9):
    axes[0].plot(lrs, [hpo.curve_quality({"lr": lr, "momentum": m}) for lr in lrs], label=f"momentum {m}")
axes[0].set(xscale="log", xlabel="learning rate", ylabel="quality q(c)", title="The objective")
axes[0].legend(fontsize=8)
rs = np.arange(1, MAX_R + 1)
for c in ({"lr": 1e-2, "momentum": 0.9}, {"lr": 1e-3, "momentum": 0.5}, {"lr": 0.3, "momentum": 0.2}):
    axes[1].plot(rs, [hpo.curve_score(c, r) for r in rs], label=f"lr={c['lr']}, m={c['momentum']}")
axes[1].set(xlabel="resource r (epochs)", ylabel="score", title="Learning curves keep their order")
axes[1].legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 2. Core concepts
#
# **Random search** samples $n$ configurations (log-uniform for scale parameters like the learning
# rate) and trains each to $R$. It is the baseline every tuner must beat, and a strong one: it wastes no
# thought, but it wastes compute on every bad trial.
#
# **Successive halving (SH)** uses rungs $r_k = r_{min}\,\rho^k$, $k = 0..s$. All $n$ trials train to
# $r_0$; the top $\lfloor n/\rho\rfloor$ continue to $r_1$, and so on. The total work is about
# $(s+1)\, n\, r_0$ instead of $n R$. Synchronous SH waits for every trial of a rung before promoting:
# **one barrier per rung**.
#
# **ASHA** (asynchronous successive halving) drops the barrier. Whenever a worker is free it promotes
# the best trial that sits in the top $\lfloor n_k/\rho\rfloor$ of the $n_k$ results seen so far at rung
# $k$ (checking the highest rung first); if none qualifies it starts a new trial. It promotes on
# partial information, so it can promote a trial that later turns out not to be in the top fraction.
#
# **PBT** (population-based training) trains a population for a few steps at a time; a member in the
# bottom quantile copies the weights and hyperparameters of a member of the top quantile (*exploit*)
# and perturbs the hyperparameters (*explore*). It tunes a *schedule* of hyperparameters in one
# population's worth of compute.
#
# All four share one small API: `next_job()` hands out a `Job` (trial, rung, config, $r_{from}$,
# $r_{to}$, state) or `None`, `on_result(...)` records a score and returns a decision, `best()` reports
# the winner. The rungs and budgets for our parameters:

# %%
rungs = hpo.rung_resources(MIN_R, MAX_R, REDUCTION)
n_k = [N_TRIALS]
for _ in rungs[1:]:
    n_k.append(max(1, n_k[-1] // REDUCTION))
sh_work = sum(n * (r - (rungs[k - 1] if k else 0)) for k, (n, r) in enumerate(zip(n_k, rungs)))
print(f"rungs r_k = {rungs}; trials per rung n_k = {n_k}")
print(f"successive halving: {sh_work:g} epochs for {N_TRIALS} trials; "
      f"training all {N_TRIALS} to R={MAX_R}: {N_TRIALS * MAX_R:g} epochs ({N_TRIALS * MAX_R / sh_work:.1f}x more)")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# `hpo_run` is a **coordinator-worker** (scatter-gather) pattern. Rank 0 owns the scheduler; ranks
# $1..K-1$ own nothing but a trainable. Each job is one message out (trial, rung, $r_{from}$, $r_{to}$,
# the configuration and, for PBT, the model state to resume from) and one message back (the score and
# the new state). Workers never talk to each other, and there is no collective: the communication is
# $O(\text{jobs})$ small messages, negligible next to training. A worker spends
# `comm.compute(time_per_unit * (r_to - r_from))` simulated seconds on a job.
#
# The driver is asynchronous in the ASHA sense: a worker gets its next job as soon as it reports.
# Synchronous SH is the *same* driver with a scheduler whose `next_job()` returns `None` until the rung
# is complete, so the barrier is visible as idle workers. For reproducibility rank 0 takes completions
# in order of their virtual finish times (start + cost), the order the simulator's clocks produce, so
# every run has a single-process twin, `run_serial`, with $K-1$ virtual workers.
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# ### The two promotion rules
#
# The whole difference between successive halving and ASHA fits in three methods of
# `scaleoutai.parallel.hpo` (the library's argument `eta` is our reduction factor $\rho$). In
# `ASHA.promotable` read the cutoff: the top `len(scores[k]) // eta` of the results seen *so far* at
# rung $k$, so the set grows as results arrive. `ASHA.next_job` is the promotion decision: scan the
# rungs from the highest down, promote the best trial not yet promoted, and only if none qualifies
# start a new trial. `SuccessiveHalving.on_result` is the barrier: it promotes nothing until the last
# result of the rung is in, then queues the top $\lfloor n_k/\rho\rfloor$ all at once.

# %%
from scaleoutai.notebooks import show

show(hpo.ASHA.promotable, hpo.ASHA.next_job, hpo.SuccessiveHalving.on_result)

# %% [markdown]
# ### The distributed driver equals its serial reference
#
# For every scheduler and every $K$ we run the driver on the simulator and compare its complete
# history (every completion: time, worker, trial, rung, resource, score, decision) and its winner with
# `run_serial`. PBT runs on its own objective, the toy problem from the PBT paper (`toy_trainable`:
# gradient ascent on a surrogate whose hyperparameters $h_0, h_1$ decide how fast it reaches the true
# optimum 1.2), because it needs a trainable with state to copy.

# %%
def schedulers():
    return {
        "random search": lambda: hpo.RandomSearch(hpo.CURVE_SPACE, RANDOM_TRIALS, MAX_R, seed=SEED),
        "successive halving": lambda: hpo.SuccessiveHalving(hpo.CURVE_SPACE, N_TRIALS, REDUCTION, MIN_R, MAX_R, seed=SEED),
        "ASHA": lambda: hpo.ASHA(hpo.CURVE_SPACE, REDUCTION, MIN_R, MAX_R, N_TRIALS, seed=SEED),
        "PBT": lambda: hpo.PBT(hpo.TOY_SPACE, PBT_POPULATION, PBT_GENERATIONS, PBT_INTERVAL, seed=SEED,
                               init_state=[0.9, 0.9]),
    }


t0 = time.perf_counter()
results = {}
for name, make in schedulers().items():
    trainable = hpo.toy_trainable if name == "PBT" else hpo.curve_trainable
    for K in KS:
        sched = make()
        res = cluster.run(hpo.hpo_run, K, args=(sched, trainable), timeout=120)
        ref = hpo.run_serial(make(), K - 1, trainable)
        out = res.values[0]
        assert out["history"] == ref["history"] and out["best"] == ref["best"], (name, K)
        assert sum(v["jobs"] for v in res.values[1:]) == len(ref["history"])
        assert out["makespan"] <= res.sim_time < out["makespan"] + 0.01  # virtual times are the sim's clocks
        results[name, K] = (out, sched)
print(f"4 schedulers x K in {KS}: every simulator run equals run_serial ({time.perf_counter() - t0:.1f} s)")

# %% [markdown]
# ### Who found what
#
# The three curve schedulers search the same space with the same seed (SH and ASHA even sample the same
# $n$ configurations). We check that ASHA finds the best configuration it sampled and that it lies in
# the optimum's neighbourhood, and compare the compute each method spent:

# %%
def in_optimum_region(config):
    return (abs(np.log10(config["lr"]) + 2) < 0.6 and abs(config["momentum"] - 0.9) < 0.3
            and hpo.curve_quality(config) > 0.9)


K = KS[-1]
print(f"{'scheduler':>20} {'best trial':>11} {'lr':>9} {'momentum':>9} {'q(best)':>8} {'epochs':>7} "
      f"{'makespan':>9}   (K={K})")
for name in ("random search", "successive halving", "ASHA"):
    out, sched = results[name, K]
    t, cfg, score = out["best"]
    work = sum(r_to - (rungs[rung - 1] if rung else 0.0) for _, _, _, rung, r_to, _, _ in out["history"])
    print(f"{name:>20} {t:>11} {cfg['lr']:>9.4f} {cfg['momentum']:>9.3f} {hpo.curve_quality(cfg):>8.3f} "
          f"{work:>7g} {out['makespan']:>9g}")
asha_out, asha = results["ASHA", K]
quality = {t: hpo.curve_quality(c) for t, c in asha.configs.items()}
assert asha_out["best"][0] == max(quality, key=quality.get)  # the best configuration it sampled ...
assert in_optimum_region(asha_out["best"][1])                 # ... and it is near lr = 0.01, momentum = 0.9
assert results["successive halving", K][0]["best"][0] == asha_out["best"][0]
for K_ in KS:  # the winner does not depend on how many workers ran the search
    assert results["ASHA", K_][0]["best"][0] == asha_out["best"][0]
print(f"ASHA's winner is in the optimum region for every K: lr={asha_out['best'][1]['lr']:.4f}, "
      f"momentum={asha_out['best'][1]['momentum']:.3f}")

# %% [markdown]
# ### ASHA's promotions, trial by trial
#
# Each row of the diagram is one trial; a bar reaches the largest resource the trial was trained to.
# Most trials stop at $r_0$, a few climb a rung, one or two reach $R$. Colour is the hidden quality
# $q(c)$: the trials that climb are the bright ones. The right panel shows the same run in time: each
# job is a bar on its worker's lane, which is what an idle-free schedule looks like.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.4]})
reached = {}
for _, _, trial, rung, r_to, _, _ in asha_out["history"]:
    reached[trial] = max(reached.get(trial, 0), r_to)
order = sorted(reached)
cmap = plt.get_cmap("viridis")
qs = np.array([quality[t] for t in order])
norm = plt.Normalize(qs.min(), 1.0)
axes[0].barh(order, [reached[t] for t in order], color=cmap(norm(qs)), height=0.8)
for r in rungs:
    axes[0].axvline(r, color="grey", lw=0.6, ls=":")
axes[0].set(xscale="log", xlabel="resource reached (log scale)", ylabel="trial (in start order)",
            title=f"ASHA promotions (K={K}, $\\rho$={REDUCTION})")
plt.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes[0], label="quality q(c)")
for end, worker, trial, rung, r_to, _, _ in asha_out["history"]:
    r_from = rungs[rung - 1] if rung else 0.0
    axes[1].barh(worker, r_to - r_from, left=end - (r_to - r_from), color=cmap(norm(quality[trial])),
                 edgecolor="k", lw=0.3)
axes[1].set(xlabel="simulated time", ylabel="worker rank", title="ASHA jobs on the workers")
plt.tight_layout()
plt.show()
assert sum(1 for t in reached if reached[t] == rungs[-1]) >= 1
assert np.mean([quality[t] for t in reached if reached[t] > rungs[0]]) > np.mean(qs)  # climbers are better

# %% [markdown]
# ### Population-based training
#
# PBT's population starts with random $(h_0, h_1)$ and the same weights. The plot shows each member's
# score after every generation; a marker shows an exploit (the member copied a better one's weights and
# perturbed hyperparameters). Against the same population with exploitation switched off
# (`quantile=0`, i.e. plain parallel training), PBT lifts the whole population:

# %%
pbt_out, pbt = results["PBT", K]
alone = hpo.PBT(hpo.TOY_SPACE, PBT_POPULATION, PBT_GENERATIONS, PBT_INTERVAL, quantile=0.0, seed=SEED,
                init_state=[0.9, 0.9])
alone_out = hpo.run_serial(alone, K - 1, hpo.toy_trainable)
fig, ax = plt.subplots(figsize=(7, 3.6))
for m in range(PBT_POPULATION):
    pts = [(g, s) for t, g, s in pbt.results if t == m]
    ax.plot(*zip(*pts), "-", lw=1, color=f"C{m % 10}")
for m, g, src in pbt.exploits:
    ax.plot(g, dict(((gg, ss) for t, gg, ss in pbt.results if t == m))[g], "kx")
ax.axhline(1.2, color="k", ls=":", lw=1, label="optimum 1.2")
ax.set(xlabel="generation", ylabel="true objective Q", title=f"PBT: {len(pbt.exploits)} exploits (x)")
ax.legend(fontsize=8)
plt.show()


def final_mean(s):
    last = {t: sc for t, _, sc in s.results}
    return float(np.mean(list(last.values())))


print(f"PBT: best {pbt_out['best'][2]:.3f}, population mean {final_mean(pbt):.3f}; "
      f"without exploit: best {alone_out['best'][2]:.3f}, mean {final_mean(alone):.3f}")
assert len(pbt.exploits) > 0 and alone.exploits == []
assert final_mean(pbt) > final_mean(alone) and pbt_out["best"][2] >= alone_out["best"][2]

# %% [markdown]
# ## 5. The same task with a production library: Ray Tune
#
# Ray Tune runs each trial as a Ray actor and ships ASHA as `ASHAScheduler`. A **function trainable**
# is a plain function that trains and calls `tune.report({...})` after each epoch; the scheduler reads
# the reported metric at each rung milestone and stops the trial (by raising inside `report`) if it
# falls below the rung's cutoff. We give Tune exactly the configurations our ASHA sampled
# (`points_to_evaluate`) so the two schedulers choose among the same candidates, and compare winners.
# Tune writes its results under `storage_path`, here a temporary directory. Starting Ray is the slow
# part on a small machine; we time it separately.

# %%
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no CSV/JSON/TensorBoard files per trial
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the classic reporter honours verbose=0
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.basic_variant import BasicVariantGenerator

ours = hpo.ASHA(hpo.CURVE_SPACE, REDUCTION, MIN_R, TUNE_MAX_T, TUNE_SAMPLES, seed=SEED)
ours_out = hpo.run_serial(ours, 2)
candidates = [ours.configs[t] for t in range(TUNE_SAMPLES)]


def trainable(config):
    for r in range(1, TUNE_MAX_T + 1):  # one "epoch" per report
        tune.report({"score": hpo.curve_score(config, r), "epoch": r})


t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
         object_store_memory=100 * 2**20)
ray_startup = time.perf_counter() - t0
storage = tempfile.mkdtemp(prefix="ch21-tune-")
try:
    t1 = time.perf_counter()
    tuner = tune.Tuner(
        trainable,
        param_space={"lr": tune.loguniform(1e-4, 1.0), "momentum": tune.uniform(0.0, 0.99)},
        tune_config=tune.TuneConfig(
            scheduler=ASHAScheduler(time_attr="epoch", max_t=TUNE_MAX_T, grace_period=MIN_R, reduction_factor=REDUCTION),
            search_alg=BasicVariantGenerator(points_to_evaluate=candidates, random_state=SEED),
            num_samples=TUNE_SAMPLES, metric="score", mode="max", reuse_actors=True),
        run_config=tune.RunConfig(storage_path=storage, name="asha-curve", verbose=0))
    grid = tuner.fit()
    tune_seconds = time.perf_counter() - t1
    best = grid.get_best_result()
    tune_epochs = {tuple(sorted(r.config.items())): r.metrics["epoch"] for r in grid}
finally:
    ray.shutdown()
    shutil.rmtree(storage, ignore_errors=True)
assert grid.num_errors == 0 and len(tune_epochs) == TUNE_SAMPLES
print(f"Ray start-up {ray_startup:.1f} s; Tune ran {TUNE_SAMPLES} trials in {tune_seconds:.1f} s")
print(f"Tune ASHA best: lr={best.config['lr']:.4f}, momentum={best.config['momentum']:.3f}, "
      f"score {best.metrics['score']:.4f} at epoch {best.metrics['epoch']}")
print(f"our ASHA best:  lr={ours_out['best'][1]['lr']:.4f}, momentum={ours_out['best'][1]['momentum']:.3f}, "
      f"score {ours_out['best'][2]:.4f}")
assert in_optimum_region(best.config) and in_optimum_region(ours_out["best"][1])
np.testing.assert_allclose([best.config["lr"], best.config["momentum"]],
                           [ours_out["best"][1]["lr"], ours_out["best"][1]["momentum"]], rtol=1e-12)
ours_reached = {}
for _, _, trial, _, r_to, _, _ in ours_out["history"]:
    ours_reached[trial] = max(ours_reached.get(trial, 0), r_to)
print(f"epochs spent: Tune {sum(tune_epochs.values()):g}, ours {sum(ours_reached.values()):g} "
      f"(training every candidate to the end: {TUNE_SAMPLES * TUNE_MAX_T})")
assert max(sum(tune_epochs.values()), sum(ours_reached.values())) < TUNE_SAMPLES * TUNE_MAX_T  # both stop early

# %% [markdown]
# Both pick the same winner. They spend different amounts of compute because they implement two
# readings of the same rule: Tune's ASHA decides at each milestone whether *this* trial may continue
# (stop-or-continue against the results seen so far; the first trials to reach a rung face little
# competition and carry on), while ours pauses every trial at its rung and decides, whenever a worker
# is free, which paused trial to promote. Both stay below training every candidate to the end (asserted).
#
# ## 6. Failure modes and fault tolerance
#
# **A worker crash.** Our driver assumes every worker answers. If one dies, rank 0 blocks on its
# `recv`, the simulator notices the peer has crashed, and the whole search fails:

# %%
try:
    cluster.run(hpo.hpo_run, 3, args=(schedulers()["ASHA"](),), faults=cluster.Faults(crash={2: 2}), timeout=60)
    raise AssertionError("the driver cannot survive a dead worker")
except cluster.RankError as err:
    print(f"{type(err).__name__} on rank {err.rank}: {str(err).splitlines()[0][:120]}")

# %% [markdown]
# Hyperparameter search tolerates failures far more cheaply than training does: a trial is
# independent, so the fix is to re-queue the lost job on another worker (from the trial's last
# state, for PBT and for promoted ASHA trials). Ray Tune does exactly that with
# `tune.RunConfig(failure_config=tune.FailureConfig(max_failures=n))`, restarting a failed trial from
# its last checkpoint. Two failure modes are specific to tuning:
#
# * **Wrong promotions.** ASHA promotes on partial information; a trial promoted early may not be in
#   the final top $1/\rho$. That costs compute, not correctness, and it is the price of no barrier.
# * **Learning curves that cross.** Early stopping assumes the ranking at $r_0$ predicts the ranking
#   at $R$. A small learning rate that starts slowly and finishes best is stopped early by SH and ASHA
#   alike; a larger $r_{min}$ or fewer rungs are the defence.
#
# **Stragglers.** A slow worker hurts the synchronous scheduler most: every rung barrier waits for the
# last job of the rung. Below, rank 1 computes 4 times slower than the others:

# %%
K = KS[-1]
strag = {}
for name in ("successive halving", "ASHA"):
    for slow in (None, {1: 4.0}):
        r_ = cluster.run(hpo.hpo_run, K, args=(schedulers()[name](),), timeout=120,
                         faults=cluster.Faults(slow=slow) if slow else None)
        strag[name, slow is not None] = r_.sim_time
        assert r_.values[0]["best"][0] == results[name, K][0]["best"][0]  # a straggler changes time, not the answer
    print(f"{name:>20}: makespan {strag[name, False]:7.1f} with uniform workers, "
          f"{strag[name, True]:7.1f} with one 4x straggler ({strag[name, True] / strag[name, False]:.2f}x)")
    assert strag[name, False] < strag[name, True] <= 4.0 * strag[name, False] + 1e-6  # slower, by at most 4x

# %% [markdown]
# Both slow down, by up to the straggler's factor (the ratios are printed above). The synchronous
# scheduler pays it in full, and much of what ASHA pays is a property of our driver, not of ASHA:
# it takes results in the order of their *predicted* finish times, which keeps every run reproducible
# (it always equals `run_serial`) but means rank 0 waits for the straggler's result even when a faster
# worker is already idle. A production driver takes whichever result arrives first (as Ray Tune does),
# at the cost of run-to-run reproducibility; then ASHA simply gives the straggler fewer jobs while SH
# still waits for it at every barrier. Exercise 3 asks you to build and measure that driver.
#
# ## 7. Evaluation: speedup, efficiency, cost
#
# The makespan of the search against the number of ranks $K$. The baseline is one worker running the
# same scheduler ($K=2$: a scheduler and one worker), $T_1$ = `run_serial` with one virtual worker.
# The jobs have very different costs (a rung-$k$ job costs $r_k - r_{k-1}$ units): at each SH barrier
# the workers that drew short jobs sit idle, while ASHA hands them new trials. Two lower bounds hold
# for any scheduler: the work divided by the workers, and the **critical path**: the winner must be
# trained to $R$ one job after another, so no number of workers finishes sooner than $R$. We also
# report the utilisation, work / (workers $\times$ makespan).

# %%
rows = []
for name in ("random search", "successive halving", "ASHA"):
    T1 = hpo.run_serial(schedulers()[name](), 1)["makespan"]
    for K_ in KS:
        Tk = results[name, K_][0]["makespan"]
        work = sum(r_to - (rungs[rung - 1] if rung else 0.0) for _, _, _, rung, r_to, _, _
                   in results[name, K_][0]["history"])
        assert Tk >= max(work / (K_ - 1), MAX_R) - 1e-9  # the two lower bounds
        rows.append((name, K_, Tk, perf.speedup(T1, Tk), perf.efficiency(T1, Tk, K_ - 1), work / ((K_ - 1) * Tk)))
print(f"{'scheduler':>20} {'K':>3} {'makespan':>9} {'S (vs 1 worker)':>16} {'E per worker':>13} {'utilisation':>12}")
for name, K_, Tk, S, E, U in rows:
    print(f"{name:>20} {K_:>3} {Tk:>9g} {S:>16.2f} {E:>13.2f} {U:>12.2f}")
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for name in ("random search", "successive halving", "ASHA"):
    ax.plot([K_ - 1 for n, K_, *_ in rows if n == name], [S for n, _, _, S, *_ in rows if n == name], "o-", label=name)
ax.plot([KS[0] - 1, KS[-1] - 1], [KS[0] - 1, KS[-1] - 1], "k:", label="ideal")
ax.set(xlabel="workers K-1", ylabel="speedup of the makespan", title="Parallel tuning")
ax.legend(fontsize=8)
plt.show()
K = KS[-1]
work_at = {name: sum(r_to - (rungs[rung - 1] if rung else 0.0) for _, _, _, rung, r_to, _, _
                     in results[name, K][0]["history"])
           for name in ("random search", "successive halving", "ASHA")}
print(f"work at K={K}: " + ", ".join(f"{n} {w:g} epochs" for n, w in work_at.items())
      + f"; random search does {work_at['random search'] / work_at['successive halving']:.1f}x the work of SH")
assert work_at["random search"] > 2 * work_at["successive halving"]        # no early stopping
assert work_at["ASHA"] >= work_at["successive halving"]                     # a few promotions SH would not make
assert all(E < 1 for n, K_, _, _, E, _ in rows if n != "random search" and K_ == K)  # below the ideal line
assert results["ASHA", K][0]["makespan"] <= results["successive halving", K][0]["makespan"]

# %% [markdown]
# Random search is embarrassingly parallel and stays close to the ideal line, up to the rounding of
# its trials over the workers, but it does more than twice the work of SH (the ratio is printed above). SH and ASHA do
# far less work, so they run into the critical path $R$ quickly: as workers are added their speedup
# falls below the ideal line, which is the ceiling that binds early-stopping searches. SH loses
# utilisation at each barrier, most when a rung's job count does not divide evenly among the workers;
# ASHA fills those gaps, partly with promotions SH would not have made (it does a little more work).
# With a single worker there are no gaps to fill and that extra work makes ASHA the slower of the two;
# at the largest $K$ of the sweep its makespan is no longer than SH's (asserted). The gap grows with
# the number of trials and with stragglers (Exercise 3).
#
# **Cost.** Billed per worker-hour, a search costs price $\times (K-1) \times T_K$: the cost is flat
# only while $E$ stays near 1. With ASHA that holds longer than with SH, which is why asynchronous
# schedulers became the default in production tuners. The price below is one GPU instance per worker,
# read from `capstone/prices.yaml` with its date.

# %%
from scaleoutai import capstone

gpu_worker = capstone.lookup("aws-g5.xlarge")  # one "unit" of resource = one minute of training (illustrative)
print(f"{gpu_worker.instance_type}: {gpu_worker.price_per_hour} USD per instance-hour ({gpu_worker.date})")
for name in ("successive halving", "ASHA"):
    costs = [perf.run_cost(gpu_worker.price_per_hour, K_ - 1, results[name, K_][0]["makespan"] * 60) for K_ in KS]
    assert all(c > 0 for c in costs)
    print(f"{name:>20}: cost USD " + ", ".join(f"K={K_}: {c:.2f}" for K_, c in zip(KS, costs)))

# %% [markdown]
# ## 8. Exercises
#
# 1. **Hyperband.** Run several SH brackets with different $(n, r_{min})$ trade-offs in parallel and
#    compare the best score per unit of compute with a single ASHA bracket.
# 2. **Crossing curves.** Write a trainable whose curves cross (slow starters finish best). How often
#    do SH and ASHA drop the true winner? How does the answer change with $r_{min}$ and $\rho$?
# 3. **First-come driver.** Change the driver to serve results in arrival order on real processes
#    (`backend="process"`), measure the makespan with a straggler, and explain why the history is no
#    longer reproducible.
# 4. **Fault-tolerant driver.** Catch a worker crash and re-queue its job on the survivors; check that
#    the search returns the same winner as a run without the crash.
# 5. **PBT on a real model.** Use PBT to tune the learning rate schedule of the Chapter 15 MLP and
#    compare the best final loss with a random search of the same compute.
# 6. **Lab 21** (`labs/lab21-asha-scheduler`): ASHA needs the maximum resource in advance. Build PASHA,
#    an ASHA whose top rung starts low and grows only while the ranking of the trials at the top still
#    changes against the rung below, and drive it from rank 0 over K workers. Every decision and the top
#    rung after every event are graded against a single-machine simulation, and the grader reads every message.
#
# ## 9. Research directions
#
# - **Early stopping when learning curves cross.** Successive halving, ASHA and Hyperband all assume
#   that the ranking at a small resource predicts the ranking at $R$; when slow starters finish best
#   they are stopped early and no amount of parallelism brings them back. Choosing $r_{min}$ and $\rho$
#   without knowing the curves, or predicting the final score from a partial curve, is still open, and
#   it decides how much of a cluster's tuning budget is wasted.
#   - Li, Jamieson, DeSalvo, Rostamizadeh and Talwalkar, "Hyperband: A Novel Bandit-Based Approach to
#     Hyperparameter Optimization", JMLR, 2018. Hedges over $r_{min}$ by running several successive
#     halving brackets with different trade-offs, within a log factor of the best single bracket.
#   - Domhan, Springenberg and Hutter, "Speeding up Automatic Hyperparameter Optimization of Deep Neural
#     Networks by Extrapolation of Learning Curves", IJCAI, 2015. Extrapolates partial learning curves
#     with a probabilistic model to stop runs that will not beat the best so far.
#   - Adriaensen, Rakotoarison, Müller and Hutter, "Efficient Bayesian Learning Curve Extrapolation using
#     Prior-Data Fitted Networks", NeurIPS, 2023. A transformer pretrained on synthetic curves returns the
#     posterior of a run's final score in one forward pass, cheap enough to drive early stopping.
#   - Kadra, Janowski, Wistuba and Grabocka, "Scaling Laws for Hyperparameter Optimization", NeurIPS,
#     2023. An ensemble of networks constrained to power-law learning curves decides which configurations
#     to pause and which to train further.
# - **Asynchronous promotion at massive parallelism.** ASHA removes the rung barrier by promoting on
#   partial information, so some promotions are wrong and the first trials to reach a rung face little
#   competition. How many wrong promotions a given $K$ causes, and how to bound the extra work as $K$
#   grows to thousands of workers, has no sharp answer yet.
#   - Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt, Recht and Talwalkar, "A System for Massively
#     Parallel Hyperparameter Tuning", MLSys, 2020. Introduces ASHA and shows it scales linearly with
#     the number of workers in distributed settings where synchronous successive halving stalls.
#   - Jamieson and Talwalkar, "Non-stochastic Best Arm Identification and Hyperparameter Optimization",
#     AISTATS, 2016. Casts successive halving as best-arm identification and analyses its budget.
# - **Model-based search that parallelizes.** Bayesian optimization picks each configuration from a
#   model of all previous results, which is inherently sequential; batching its proposals across $K$
#   workers without wasting them on near-duplicates, and combining it with early stopping, remain
#   active problems.
#   - Falkner, Klein and Hutter, "BOHB: Robust and Efficient Hyperparameter Optimization at Scale",
#     ICML, 2018. Replaces Hyperband's random sampling with a kernel-density model and runs it in
#     parallel, keeping Hyperband's anytime behaviour and Bayesian optimization's final performance.
#   - Snoek, Larochelle and Adams, "Practical Bayesian Optimization of Machine Learning Algorithms",
#     NeurIPS, 2012. Gaussian-process Bayesian optimization for ML hyperparameters, including a
#     Monte Carlo acquisition for proposing configurations while others are still running.
#   - Bischl et al., "Hyperparameter optimization: Foundations, algorithms, best practices, and open
#     challenges", WIREs Data Mining and Knowledge Discovery, 2023. A review of Bayesian optimization,
#     Hyperband and racing, with advice on evaluation protocol and on running the search in parallel.
# - **Tuning schedules, not constants.** PBT finds a hyperparameter *schedule* in one population's
#   compute, but the result depends on the population size, the exploit quantile and the perturbation,
#   and a run is hard to reproduce because it depends on the order of results. When PBT beats a fixed
#   schedule, and by how much, is mostly known from experiments rather than theory.
#   - Jaderberg et al., "Population Based Training of Neural Networks", arXiv, 2017. Exploit and explore
#     on a population trained in parallel, finding learning-rate and other schedules for RL, translation
#     and GANs.
#   - Bergstra and Bengio, "Random Search for Hyper-Parameter Optimization", JMLR, 2012. Shows random
#     search beats grid search when few hyperparameters matter: the baseline every scheduler here must beat.
#
# ## What's next
#
# Chapter 22 (Per-node inference efficiency) opens Part V: the tuned model now has to answer requests,
# and the first ceiling to lift is on one node. Tuning comes back twice later: Chapter 33 (Cluster
# scheduling) treats a search like this one as many small jobs competing for a shared cluster with
# gang scheduling and Ray placement groups, and the Chapter 41 capstone sweeps the number of workers
# and reports speedup, efficiency and cost exactly as Section 7 did here.
