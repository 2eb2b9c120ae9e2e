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
# # Chapter 26. Fleet MLOps
#
# Chapters 22 to 25 made one model fast and served it from many replicas. A production fleet runs
# dozens of models, each retrained and redeployed every few days, on inputs that change under it. Two
# things go wrong more often than any server fails: a new version that is worse than the one it
# replaces, and a world that moves away from the data a model was trained on. This chapter builds the
# three tools that contain both: a **registry** whose aliases decide which version serves, a **staged
# rollout** that exposes a new version to a small share of traffic and rolls it back automatically, and
# **drift detectors** whose delay and false-alarm rate are measured, not assumed. MLflow's model
# registry and river's drift detectors run beside them.
#
# **Prerequisites:** Chapter 23 (Distributed inference: replicas behind a router), Chapter 5 (Evaluation
# discipline: measuring with noise) and Chapter 4 (all-reduce). Background: a two-proportion z-test and
# an empirical CDF.

# %% tags=["parameters"]
N_REQUESTS = 40_000  # smoke: 20_000
WINDOW = 400  # smoke: 300
STREAM = 12_000  # smoke: 6_000
TRIALS = 20  # smoke: 6
FLEET_K = [1, 2, 3, 5, 8]
RATE = 100.0  # requests per second reaching the service
REACTION_S = 30.0  # seconds from a rollback decision until every replica serves the champion again
SHARES = [0.02, 0.05, 0.1, 0.25, 0.5]
EXPOSURE_SEEDS = 5  # smoke: 3
CANARY_TRIALS = 20_000  # smoke: 4_000
CHECK_TRIALS = 100  # smoke: 60
SEED = 0

# %% [markdown]
# `N_REQUESTS` is the length of the request stream a rollout sees, `WINDOW` the number of candidate
# requests judged at each stage, `STREAM` the length of a monitored input stream with one change in
# its middle, `TRIALS` the number of independent streams behind each measured rate, and `FLEET_K` the
# replica counts of the fleet-wide drift statistic. `RATE` is the traffic (requests per second),
# `REACTION_S` the delay between a rollback decision and its effect, `SHARES` the first-stage traffic
# shares compared in Section 7, `EXPOSURE_SEEDS` the per-request rollouts behind each measured exposure,
# `CANARY_TRIALS` the rollouts drawn from the decision model behind each measured rate, and `CHECK_TRIALS`
# the per-request rollouts that check that model.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling here is not compute or bandwidth but **risk per deploy**. A fleet of $M$ models each
# redeployed every $d$ days ships $M/d$ versions a day; if a small share of them are bad and each bad
# one reaches all users until a person notices, the expected harm grows with the fleet. Staging every
# rollout caps how many requests a bad version can touch, and monitoring the inputs bounds how long a
# stale model serves unnoticed. Both have a price, measured below: requests exposed, detection delay
# and false alarms.

# %%
import logging
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets
from scaleoutai.notebooks import show
from scaleoutai.serving import drift, fleet

for models, days in ((10, 14), (50, 7), (200, 3)):
    print(f"{models:>4} models redeployed every {days:>2} days: {models / days:5.1f} deploys per day")

# %% [markdown]
# ## 2. Core concepts
#
# A **registry** stores every trained version of a model under a name, numbered 1, 2, 3, with its
# lineage. An **alias** such as `champion` or `canary` is a movable pointer to one version; replicas
# resolve `name@champion` when they load, so promoting or rolling back is one pointer move.
#
# A **canary rollout** routes a share $s$ of requests to the candidate and the rest to the champion,
# raising $s$ in stages. At each stage it compares the two error rates $\hat p_c$ and $\hat p_b$ over the
# same period, and rolls back if $\hat p_c - \hat p_b > \delta$ by more than noise: a one-sided
# two-proportion z-test. Traffic arrives at a **rate** $\lambda$ requests per second, so a stage of share $s$
# sends the candidate $s\lambda$ requests per second and a decision that needs $n$ candidate requests (the
# window) comes after $n / (s\lambda)$ seconds. A rollback is not instant: metrics are scraped, the
# analysis runs on an interval, the alias move reaches every replica. During that **reaction delay** $L$
# the candidate keeps its share. A bad version rolled back at its first stage therefore answers
# $$E[\text{exposed}] = n + s\lambda L \quad\text{requests, and serves for}\quad E[T] = \frac{n}{s\lambda} + L
# \quad\text{seconds.}$$
# The share trades users exposed against time to a decision. A **shadow rollout** sends a copy of
# every request to the candidate and answers with the champion, so no user sees the candidate; it
# doubles the compute and cannot measure effects that need the user to see the answer (clicks,
# conversions).
#
# **Drift** is a change in the input distribution (covariate shift) or in the relation between inputs
# and labels (concept drift). Two statistics compare a recent window with a reference sample: the
# **population stability index** $\mathrm{PSI} = \sum_i (p_i - q_i)\ln(p_i / q_i)$ over quantile bins of
# the reference, and the **Kolmogorov-Smirnov** distance $D = \sup_x |F_{\text{recent}}(x) -
# F_{\text{ref}}(x)|$. A detector is judged by two numbers that trade against each other: the
# **detection delay** after a real change and the **false-alarm rate** when nothing changed.

# %%
X, y = datasets.classification(N_REQUESTS, 5, classes=2, separation=100.0, seed=SEED)
w = np.linalg.lstsq(X, 2.0 * y - 1, rcond=None)[0]


def new_registry(candidate_noise=0.0, candidate_latency=5.0):
    """A champion (v1) and a candidate (v2) that differs only in label noise and latency."""
    reg = fleet.ModelRegistry()
    v1 = reg.register("churn", fleet.classifier_model(w, fail_rate=0.01))
    reg.set_alias("churn", "champion", v1)
    v2 = reg.register("churn", fleet.classifier_model(w, latency_ms=candidate_latency, fail_rate=0.01,
                                                      label_noise=candidate_noise))
    return reg, v2


reg, v2 = new_registry()
print("aliases:", reg.aliases("churn"), "| champion resolves to version", reg.get("churn", "champion").version)

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Every replica of the fleet resolves the alias and serves; the router splits traffic by the stage's
# share. The only fleet-wide communication is the decision: counts of requests and errors per version,
# and, for drift, a histogram of recent inputs per replica. Histograms add, so the fleet's PSI needs one
# all-reduce of `bins + 1` integers per replica, whatever the traffic: the reduction of Chapter 4 again.
# The plot shows the candidate's share of traffic over the stream for a rollout that passes every stage.

# %%
rep = fleet.rollout(reg, "churn", v2, X, y, window=WINDOW, seed=SEED)
assert rep.decision == "promoted", rep.reason
plt.figure(figsize=(8, 3))
plt.plot(rep.stage_of[: rep.events[-1][0] + 1], drawstyle="steps-post")
for i, what in rep.events:
    plt.axvline(i, color="grey", lw=0.5)
plt.gca().set(xlabel="request", ylabel="share to the candidate", title="a staged canary that passes")
plt.show()
print(rep.events, "| aliases after:", reg.aliases("churn"))

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# The registry is a list of versions per name and a dictionary of aliases, with a log of every change.
# The rollout is one loop over requests: route, serve, count, and at every `window` candidate requests
# decide. Read `_worse`, the test that keeps noise from rolling back a good version.

# %%
show(fleet.ModelRegistry.set_alias, fleet.rollout, fleet._worse)

# %% [markdown]
# The drift statistics: PSI from bin counts (so replicas can add their counts), its fleet-wide form
# with one all-reduce, and KS from two sorted samples.

# %%
show(drift.psi_from_counts, drift.fleet_psi, drift.ks_statistic)

# %% [markdown]
# Three checks against references. A bad candidate (20% of answers flipped) must be rolled back at the
# first stage; KS must equal the definition and `scipy.stats`; and the fleet's PSI over $K$ replicas
# must equal the PSI of all their traffic in one place, for every $K$, including replicas with no traffic.

# %%
from scipy import stats

reg_bad, v_bad = new_registry(candidate_noise=0.2)
bad = fleet.rollout(reg_bad, "churn", v_bad, X, y, window=WINDOW, seed=SEED)
assert bad.decision == "rolled_back" and reg_bad.aliases("churn") == {"champion": 1}
print(f"bad candidate: {bad.reason}; users exposed to it: {bad.exposed} of {N_REQUESTS}")

ref = np.random.default_rng(SEED).standard_normal(2000)
recent = datasets.shifted_stream(800, change_at=300, shift=0.4, seed=1)
assert abs(drift.ks_statistic(ref, recent) - stats.ks_2samp(ref, recent).statistic) < 1e-12
assert abs(drift.ks_statistic(ref[:200], recent[:100]) - drift.naive_ks(ref[:200], recent[:100])) < 1e-12


def fleet_window(comm, ref, stream):
    from scaleoutai.collectives import block_range
    lo, hi = block_range(len(stream), comm.size, comm.rank)
    return drift.fleet_psi(comm, ref, stream[lo:hi])


for K in FLEET_K + [len(recent) + 3]:
    res = cluster.run(fleet_window, K, args=(ref, recent), timeout=60)
    assert all(abs(v - drift.psi(ref, recent)) < 1e-12 for v in res.values)
print(f"fleet PSI = {drift.psi(ref, recent):.4f} for K in {FLEET_K + [len(recent) + 3]}: equal to one place")

# %% [markdown]
# ## 5. The same task with production libraries: MLflow's registry and river
#
# MLflow keeps versions and aliases in its tracking store (here an embedded sqlite file in a temporary
# folder). Each version below is a real MLflow `pyfunc` model holding the weights; the serving code loads
# `models:/churn@champion`. We mirror our rollout's decisions into MLflow's aliases and check that the
# model MLflow serves after each decision answers exactly as our champion does.

# %%
import contextlib
import io

import mlflow
from mlflow import MlflowClient

from scaleoutai.capstone import tracking

tracking.quiet_mlflow_logs()
logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
store = tempfile.mkdtemp(prefix="ch26-mlflow-")
mlflow.set_tracking_uri(f"sqlite:///{store}/mlflow.db")
# The experiment keeps its artifacts (the logged models) beside the database, not in ./mlruns of this folder.
_, fleet_id = tracking.open_experiment("fleet", mlflow.get_tracking_uri())
mlflow.set_experiment(experiment_id=fleet_id)
client = MlflowClient()


class LinearModel(mlflow.pyfunc.PythonModel):
    def __init__(self, w, flip=False):
        self.w, self.flip = np.asarray(w), flip

    def predict(self, context, model_input: np.ndarray, params=None):  # typed: MLflow asks for a hint
        pred = (np.asarray(model_input, dtype=float) @ self.w > 0).astype(int)
        return 1 - pred if self.flip else pred


t0 = time.perf_counter()
versions = {}
for label, model in (("good", LinearModel(w)), ("bad", LinearModel(w, flip=True))):
    # the registry prints "Successfully registered model ..." itself; the versions are printed below
    with mlflow.start_run(run_name=label), contextlib.redirect_stderr(io.StringIO()):
        info = mlflow.pyfunc.log_model(name="model", python_model=model, registered_model_name="churn")
    versions[label] = int(info.registered_model_version)
client.set_registered_model_alias("churn", "champion", versions["good"])
print(f"registered versions {versions} in {time.perf_counter() - t0:.1f} s")


def mirror(report, candidate):
    """Apply our rollout's decision to MLflow's aliases, as a deploy pipeline would."""
    client.set_registered_model_alias("churn", "canary", candidate)
    if report.decision == "promoted":
        client.set_registered_model_alias("churn", "champion", candidate)
    client.delete_registered_model_alias("churn", "canary")


# The flipped model is the bad candidate: our rollout rejects it and MLflow's champion must not move.
reg_m = fleet.ModelRegistry()
reg_m.set_alias("churn", "champion", reg_m.register("churn", fleet.classifier_model(w)))
v_flip = reg_m.register("churn", fleet.classifier_model(-w))
rep_flip = fleet.rollout(reg_m, "churn", v_flip, X, y, window=WINDOW, seed=SEED)
mirror(rep_flip, versions["bad"])
served = mlflow.pyfunc.load_model("models:/churn@champion")
probe = X[:500]
assert rep_flip.decision == "rolled_back"
assert client.get_registered_model("churn").aliases == {"champion": versions["good"]}
assert np.array_equal(served.predict(probe), (probe @ w > 0).astype(int))
print("after the bad candidate:", client.get_registered_model("churn").aliases, "| MLflow serves the good model")

# %% [markdown]
# river's `KSWIN` tests a sliding window against a sample of its own older values, and `ADWIN` cuts its
# window where two sub-windows' means differ. Both run on the same stream as our KS monitor; each must
# raise its first alarm after the change, and we compare the delays.

# %%
from river import drift as rdrift

x = datasets.shifted_stream(STREAM, change_at=STREAM // 2, shift=0.5, seed=SEED)
pos, vals, alarms = drift.DriftMonitor(ref, window=WINDOW, every=25, statistic="ks").scan(x)
ours = drift.detection_delay(pos, alarms, STREAM // 2)


def first_alarm(detector, stream):
    for i, v in enumerate(stream):
        detector.update(float(v))
        if detector.drift_detected:
            return i
    return None


river_delay = {}
for name, det in (("KSWIN", rdrift.KSWIN(alpha=0.001, window_size=WINDOW, stat_size=WINDOW // 4, seed=SEED)),
                  ("ADWIN", rdrift.ADWIN(delta=0.002))):
    hit = first_alarm(det, x[STREAM // 2 - 2 * WINDOW:])  # start close to the change: one alarm measured
    assert hit is not None, f"{name} never detected the shift"
    river_delay[name] = hit - 2 * WINDOW
print(f"detection delay in values after the change: ours (KS vs reference) {ours:.0f}, "
      + ", ".join(f"river {k} {v}" for k, v in river_delay.items()))
assert 0 < ours <= 2 * WINDOW

# %% [markdown]
# The detectors answer different questions: ours compares with a fixed reference (the training data),
# river's compare the stream with its own past, so they also fire on a change that the model was
# trained for, and never need the training sample.
#
# ## 6. Failure modes and fault tolerance
#
# **A slow candidate.** Correct answers, but a 10x latency tail: the error test passes and the p99
# budget rolls it back. **Shadow mode** catches the bad candidate of Section 4 with no user exposed.
# **Noise.** With $z$ too small an equal candidate is rolled back by chance: measured below, with intervals.

# %%
reg_slow, v_slow = new_registry(candidate_latency=50.0)
slow = fleet.rollout(reg_slow, "churn", v_slow, X, y, window=WINDOW, max_p99_ms=60.0, seed=SEED)
assert slow.decision == "rolled_back" and "p99" in slow.reason
reg_sh, v_sh = new_registry(candidate_noise=0.2)
shadow = fleet.rollout(reg_sh, "churn", v_sh, X, y, window=WINDOW, shadow=True, seed=SEED)
assert shadow.decision == "rolled_back" and shadow.exposed == 0
print(f"slow candidate: {slow.reason}; shadow: {shadow.reason}, users exposed {shadow.exposed}")

# %% [markdown]
# Rates of rare events need many trials: a rate near 1% measured from 20 rollouts is 0 or 5% and
# tells nothing. `canary_trials` draws the first stage's decision of many independent rollouts at once
# from the rollout's own model (until the $n$-th candidate request the champion serves a
# negative-binomial number of requests; both error counts are binomial; `_worse` decides), checked
# here against per-request rollouts, and each rate comes with its 95% **Wilson** interval. Below, an
# equal candidate with no margin ($\delta = 0$), so that $z$ alone sets the false-rollback rate.

# %%
show(fleet.canary_trials, fleet.wilson_interval)

# %%
p_champion = 0.01  # the champion's error rate: 1% failed requests, a classifier that is right on this data
assert abs(np.mean((X @ w > 0) != y)) < 1e-3
n_check = 0
for t in range(CHECK_TRIALS):
    reg_c, v_c = new_registry()
    n_check += fleet.rollout(reg_c, "churn", v_c, X, y, stages=(0.5,), window=WINDOW, max_error_increase=0.0,
                             z=1.0, seed=300 + t).decision == "rolled_back"
model_rate = fleet.canary_trials(p_champion, p_champion, 0.5, WINDOW, CANARY_TRIALS, max_error_increase=0.0,
                                 z=1.0, seed=SEED).rate
lo, hi = fleet.wilson_interval(n_check, CHECK_TRIALS, z=2.58)
assert lo <= model_rate <= hi, (n_check, model_rate)
print(f"z = 1, equal candidate: per-request rollouts roll back {n_check}/{CHECK_TRIALS} "
      f"(99% interval {lo:.3f}..{hi:.3f}); the decision model {model_rate:.3f}")

false_rollbacks = {}
for share in (0.05, 0.5):
    for z in (1.0, 1.64, 2.33, 3.0):
        ct = fleet.canary_trials(p_champion, p_champion, share, WINDOW, CANARY_TRIALS, max_error_increase=0.0,
                                 z=z, seed=SEED + 1)
        k = int(ct.rolled_back.sum())
        lo, hi = fleet.wilson_interval(k, CANARY_TRIALS)
        false_rollbacks[share, z] = (k / CANARY_TRIALS, lo, hi)
        print(f"share {share:.0%}, z = {z}: nominal alpha {stats.norm.sf(z):.4f}, measured "
              f"{k / CANARY_TRIALS:.4f} (95% interval {lo:.4f}..{hi:.4f})")
fr_5, fr_50, alpha = false_rollbacks[0.05, 2.33], false_rollbacks[0.5, 2.33], stats.norm.sf(2.33)
assert false_rollbacks[0.05, 1.0][0] > false_rollbacks[0.05, 3.0][0]
assert fr_5[1] > alpha and fr_50[0] < alpha  # the interval excludes the nominal level at 5%

# %% [markdown]
# At 1% errors a window of $n$ = `WINDOW` holds only a handful of candidate errors, too few for the
# normal approximation behind $z$. The intervals resolve what 20 trials could not: at $z = 2.33$
# (nominal $\alpha = 1\%$) the printed false-rollback rate misses 1% in both directions, above it at a
# 5% share, where the champion's large sample makes the test a one-sample test on a skewed count, and
# below it at 50%, where the champion's own noise enters the pooled error. An exact test (binomial
# or Fisher) or a larger window restores the level; the margin $\delta$ that `rollout` uses by default
# (2 points) makes it moot for equal versions, as Section 7 measures.

# %% [markdown]
# **Concept drift that input monitoring cannot see.** Below, the inputs keep their distribution but the
# labels of half the input space flip. PSI on the inputs stays near zero while the model's error rate jumps: only
# monitoring outputs against (delayed) labels catches it.

# %%
Xs, ys = X[:6000], y[:6000]  # the same distribution the model was fitted on
ys_drift = ys.copy()
ys_drift[3000:] = np.where(Xs[3000:, 0] > np.median(Xs[:, 0]), 1 - ys[3000:], ys[3000:])  # half the space flips
scores = Xs @ w
psi_inputs = drift.psi(scores[:3000], scores[3000:])
err_before = np.mean((scores[:3000] > 0) != ys_drift[:3000])
err_after = np.mean((scores[3000:] > 0) != ys_drift[3000:])
print(f"PSI of the model's inputs (scores) after the change: {psi_inputs:.4f}; "
      f"error rate {err_before:.3f} -> {err_after:.3f}")
assert psi_inputs < 0.05 and err_after > err_before + 0.2

# %% [markdown]
# ## 7. Evaluation: delay, false alarms, exposure and cost
#
# A drift threshold is a trade: lower thresholds detect sooner and alarm falsely more often. Over
# `TRIALS` streams with a change in the middle, the curve below gives both for KS and PSI at several
# thresholds.

# %%
half = STREAM // 2
curves = {}
for name, thresholds in (("ks", [0.04, 0.06, 0.08, 0.1, 0.14]), ("psi", [0.02, 0.05, 0.1, 0.2, 0.3])):
    pts = []
    for th in thresholds:
        d, f = [], []
        for t in range(TRIALS):
            xt = datasets.shifted_stream(STREAM, change_at=half, shift=0.3, seed=200 + t)
            p, _, a = drift.DriftMonitor(ref, window=WINDOW, every=50, statistic=name, threshold=th).scan(xt)
            d.append(drift.detection_delay(p, a, half))
            f.append(drift.false_alarm_rate(p, a, half))
        pts.append((th, float(np.median(d)), float(np.mean(f))))
    curves[name] = pts
fig, ax = plt.subplots(figsize=(6, 4))
for name, pts in curves.items():
    ax.plot([f for _, _, f in pts], [d for _, d, _ in pts], "o-", label=name.upper())
ax.set(xlabel="false-alarm rate (tests before the change)", ylabel="median detection delay (values)",
       title="drift detection: delay vs false alarms")
ax.legend()
plt.show()
for name, pts in curves.items():
    assert pts[0][1] <= pts[-1][1] and pts[0][2] >= pts[-1][2]  # lower threshold: sooner, more false alarms

# %% [markdown]
# **What the share buys.** A bad candidate (20% of answers flipped) rolled out at a first stage of
# share $s$, with traffic at `RATE` requests per second and a reaction delay of `REACTION_S` seconds:
# the left plot counts the requests it answers before the rollback takes effect, the middle one the
# seconds it serves, each measured over `EXPOSURE_SEEDS` per-request rollouts (mean and two standard
# errors) beside the model $n + s\lambda L$ and $n/(s\lambda) + L$. The right plot gives, from
# `CANARY_TRIALS` drawn rollouts per point with 95% Wilson intervals, the rate at which the default rule
# ($z = 2.33$, margin $\delta$ = 2 points) rolls back three candidates: the clearly bad one, a slightly
# bad one (5% errors against the champion's 1%) and an equal one.

# %%
show(fleet.canary_exposure)
X2, y2 = np.concatenate([X, X]), np.concatenate([y, y])  # the stream twice: a 2% stage needs n / 0.02 requests
exposure = {}  # share: (measured mean, standard error, model), and the same for seconds
serve_s = {}
for s in SHARES:
    e, t = [], []
    for seed in range(EXPOSURE_SEEDS):
        reg_e, v_e = new_registry(candidate_noise=0.2)
        r = fleet.rollout(reg_e, "churn", v_e, X2, y2, stages=(s,), window=WINDOW, rate=RATE, reaction_s=REACTION_S,
                          seed=seed)
        assert r.decision == "rolled_back" and "ended" not in r.reason, r.reason
        e.append(r.exposed)
        t.append(r.time_s)
    e_model, t_model = fleet.canary_exposure(s, WINDOW, RATE, REACTION_S)
    exposure[s] = (np.mean(e), np.std(e, ddof=1) / np.sqrt(len(e)), e_model)
    serve_s[s] = (np.mean(t), np.std(t, ddof=1) / np.sqrt(len(t)), t_model)
rates = {}
for label, p_c in (("clearly bad (21%)", 0.21), ("slightly bad (5%)", 0.05), ("equal (1%)", p_champion)):
    ks = [int(fleet.canary_trials(p_champion, p_c, s, WINDOW, CANARY_TRIALS, seed=SEED + 2).rolled_back.sum())
          for s in SHARES]
    lo, hi = fleet.wilson_interval(np.array(ks), np.full(len(ks), CANARY_TRIALS))
    rates[label] = (np.array(ks) / CANARY_TRIALS, lo, hi)

fig, axes = plt.subplots(1, 3, figsize=(15, 4))
grid = np.geomspace(SHARES[0], SHARES[-1], 50)
for ax, data, k, ylabel in ((axes[0], exposure, 0, "requests answered by the bad version"),
                            (axes[1], serve_s, 1, "seconds until the rollback took effect")):
    ax.plot(grid, [fleet.canary_exposure(g, WINDOW, RATE, REACTION_S)[k] for g in grid], "k-", label="model")
    ax.errorbar(SHARES, [data[s][0] for s in SHARES], yerr=[2 * data[s][1] for s in SHARES], fmt="o",
                label="per-request rollouts")
    ax.set(xscale="log", xlabel="first stage's share s", ylabel=ylabel)
    ax.legend()
axes[0].axhline(WINDOW, color="grey", ls=":", lw=1)
axes[0].set_title(f"exposure: n + s rate L (n = {WINDOW})")
axes[1].set(yscale="log", title="time: n / (s rate) + L")
for label, (r, lo, hi) in rates.items():
    axes[2].errorbar(SHARES, r, yerr=[r - lo, hi - r], fmt="o-", capsize=3, label=label)
axes[2].set(xscale="log", xlabel="first stage's share s", ylabel="rolled back (95% Wilson interval)",
            ylim=(-0.03, 1.03), title="detection and false rollback")
axes[2].legend(fontsize=8)
plt.show()
for s in SHARES:
    print(f"share {s:>4.0%}: exposed {exposure[s][0]:7.1f} +- {exposure[s][1]:5.1f} (model {exposure[s][2]:6.0f}), "
          f"serves {serve_s[s][0]:6.1f} s (model {serve_s[s][2]:6.1f}); rolled back: "
          + ", ".join(f"{label.split()[0]} {r[0][SHARES.index(s)]:.4f}" for label, r in rates.items()))
for s in SHARES:  # within 4 standard deviations of the model's own: Poisson requests, Gamma decision time
    assert abs(exposure[s][0] - exposure[s][2]) <= 4 * np.sqrt(s * RATE * REACTION_S / EXPOSURE_SEEDS) + 1, s
    assert abs(serve_s[s][0] - serve_s[s][2]) <= 4 * np.sqrt(WINDOW / EXPOSURE_SEEDS) / (s * RATE), s
assert all(exposure[a][0] < exposure[b][0] for a, b in zip(SHARES, SHARES[1:]))
assert all(serve_s[a][0] > serve_s[b][0] for a, b in zip(SHARES, SHARES[1:]))
assert rates["clearly bad (21%)"][1].min() > 0.999 and rates["equal (1%)"][2].max() < 0.001
slight = rates["slightly bad (5%)"][0]
s_star = WINDOW / (RATE * REACTION_S)
print(f"the two terms of the exposure are equal at s* = n / (rate L) = {s_star:.3f}; "
      f"a slightly bad version is caught {slight[0]:.0%} of the time at {SHARES[0]:.0%}, "
      f"{slight[-1]:.0%} at {SHARES[-1]:.0%}")

# %% [markdown]
# The share decides how many requests a bad version touches. Below $s^* = n/(\lambda L)$, printed
# above, the window dominates and exposure stays near $n$; above it the reaction delay dominates, and
# every request of those $L$ seconds at share $s$ reaches the bad version: the printed exposure grows
# several-fold from the smallest share to the largest, as the model says. Time runs the other way: at
# the smallest share the decision waits for $n$ requests trickling in at $s\lambda$ per second, minutes
# for a good version to pass one stage. The clearly bad version is caught every time at every share, and
# the equal one is never rolled back (the 2-point margin), both with intervals narrower than a tenth of
# a percent. The slightly bad version shows the third effect of the share: with a small share the
# champion's sample over the same period is large and its rate is known precisely, so the test has more
# power; at 50% the champion's sample is as small as the candidate's and the same candidate is caught
# far less often. Small first stages are cheaper, slower and more sensitive; the stages that follow
# only need to confirm. Shadow mode exposes nobody and doubles the serving compute while it runs; its
# price on the course's reference instance:

# %%
price = capstone.lookup("aws-c7i.xlarge")
req_per_s_per_instance = 200.0  # an assumed serving rate of one replica
hours = N_REQUESTS / req_per_s_per_instance / 3600
print(f"{N_REQUESTS} requests on {price.instance_type} at {price.price_per_hour} USD/h ({price.date}): "
      f"canary {hours * price.price_per_hour:.4f} USD, shadow {2 * hours * price.price_per_hour:.4f} USD")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Sequential testing.** The rollout tests once per window. Replace the fixed window with a sequential
#    probability ratio test that can decide after fewer requests when the candidate is very bad. How many
#    requests does a 20%-noise candidate reach now?
# 2. **Per-segment rollback.** Make the candidate worse only for the fifth of inputs with the largest $x_0$. Does the global
#    error test catch it? Add a per-segment test and measure its false rollbacks.
# 3. **Choose a threshold.** From the curve of Section 7, pick the KS threshold for a service that can
#    afford one false alarm a week when it tests every 50 requests at 100 requests per second.
# 4. **Fleet KS.** KS does not decompose over replicas as PSI does. Sketch the empirical CDF with a
#    fixed grid (or a quantile sketch) per replica, all-reduce the sketches, and bound the error of the
#    resulting $D$.
# 5. **Blue-green.** Add a rollout that switches all traffic at once and keeps the old version warm
#    for an instant rollback. Compare its exposure with the canary's for the bad candidate, with the
#    traffic rate and reaction delay of Section 7.
#
# ## 9. Research directions
#
# - **Detecting drift that matters.** Most input shifts do not change accuracy and some accuracy losses
#   come with no visible input shift (Section 6). Estimating a model's accuracy on unlabelled shifted
#   data, and alarming only when it falls, is open.
#   - Rabanser, Günnemann and Lipton, "Failing Loudly: An Empirical Study of Methods for Detecting
#     Dataset Shift", NeurIPS, 2019. Compares two-sample tests on learned representations.
#   - Garg et al., "Leveraging Unlabeled Data to Predict Out-of-Distribution Performance", ICLR, 2022.
#     Predicts accuracy under shift from confidence thresholds.
#   - Lu et al., "Characterizing Out-of-Distribution Error via Optimal Transport", NeurIPS, 2023. Shows
#     that confidence-based estimates understate error when the predicted label mix shifts, and corrects
#     for it with an optimal-transport distance to the training label distribution.
#   - Chen, Zaharia and Zou, "How Is ChatGPT's Behavior Changing over Time?", arXiv preprint, 2023. The
#     same hosted model name changed accuracy and output format within three months, so a fleet that calls
#     external models has to monitor them like any other drifting dependency.
# - **Safe deployment with few samples.** Canary decisions for rare failures need many requests; for
#   models that change behaviour in subtle, user-dependent ways the right test statistic is unclear.
#   - Sculley et al., "Hidden Technical Debt in Machine Learning Systems", NeurIPS, 2015. Why ML systems
#     accumulate deployment risk that ordinary software does not.
#   - Breck et al., "The ML Test Score: A Rubric for ML Production Readiness and Technical Debt
#     Reduction", IEEE Big Data, 2017. A checklist of monitoring and rollout tests.
# - **Adapting to drift.** Retraining on every alarm wastes compute and can chase noise; learning which
#   drifts to adapt to, and how fast, is studied in online and continual learning.
#   - Gama et al., "A Survey on Concept Drift Adaptation", ACM Computing Surveys, 2014.
#   - Bifet and Gavaldà, "Learning from Time-Changing Data with Adaptive Windowing", SDM, 2007. ADWIN,
#     the detector river runs in Section 5.
#   - Wang, Zhang, Su and Zhu, "A Comprehensive Survey of Continual Learning: Theory, Method and
#     Application", IEEE TPAMI, 2024. Frames updating a deployed model as a stability-plasticity trade-off
#     and maps the replay, regularisation and architecture methods that manage it.
#
# ## What's next
#
# Part V ends here: one model made efficient, replicated, served with continuous batching, retrieved
# from, and now run safely as a fleet. Part VI turns from models that answer requests to agents that act
# together: Chapter 27 (Distributed AI) starts with contract nets and distributed constraint
# satisfaction on Ray actors.
