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
# # Chapter 37. Federated medical AI
#
# Six hospitals want one risk model for an adverse outcome. Each holds the records of its own
# patients, and none may hand them to the others: the data-use agreements, the ethics boards and the
# privacy law all say so. The hospitals also differ in every way a statistician fears: a teaching
# hospital with thousands of patients beside a rural clinic with sixty, referral centres that see far
# sicker patients than a suburban practice, older and younger populations, and lab instruments that
# are calibrated a little differently. This case study puts the tools of Chapter 14 (federated
# averaging, DP-SGD, secure aggregation) and Chapter 35 (robust aggregation, a privacy ledger) together
# on such a federation, and asks the questions a clinical consortium asks: does the federated model
# match the one we may not build, is it good at *every* hospital, what does privacy cost, and what
# happens when one site sends garbage or goes offline.
#
# **Prerequisites:** Chapter 14 (Federated and decentralized learning: FedAvg, DP-SGD and its accountant,
# secure aggregation by masking) and Chapter 35 (Reliable and secure distributed AI: Byzantine-robust
# aggregation, the differential-privacy ledger). Background: logistic regression and the ROC curve.

# %% tags=["parameters"]
SIZES = [2000, 1000, 500, 250, 120, 60]
TEST_PER_SITE = 400
ROUNDS = 12  # smoke: 8
LOCAL_EPOCHS = 1
SEEDS = [0, 1, 2]  # smoke: [0, 1]
SIGMAS = [0.6, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]  # smoke: [1.0, 4.0, 16.0]
DP_SIGMA = 1.2
DP_Q = 0.05
DP_STEPS = 10
DELTA = 1e-5
KS = [1, 2, 3, 4, 5, 7]  # smoke: [1, 2, 4, 7]
SECONDS_PER_SAMPLE = 1e-3
INSTANCE_TYPE = "aws-c7i.xlarge"
SEED = 0

# %% [markdown]
# `SIZES` are the training patients of each site (the federation's sizes span a factor of 33), and
# every site also keeps `TEST_PER_SITE` patients apart to measure the model on its own population.
# Federated training runs `ROUNDS` rounds of `LOCAL_EPOCHS` local epochs; the failure curves repeat for
# every seed in `SEEDS`. DP-SGD runs `DP_STEPS` steps per round at sampling rate $q$ = `DP_Q` with noise
# multiplier $\sigma$ = `DP_SIGMA` (and each of `SIGMAS` for the privacy-utility curve), at
# $\delta$ = `DELTA`. `KS` are the world sizes of the scaling curve, where each site's training is
# charged `SECONDS_PER_SAMPLE` of simulated compute per patient and epoch (what a mid-size model on
# notes or images would cost, not this chapter's tiny logistic model), priced as `INSTANCE_TYPE`.
#
# ## 1. Motivation: which ceiling binds
#
# Nothing here is large: a few thousand patients and eight measurements each fit on a phone. The
# ceiling that binds is permission. The records may not leave their hospital, so the only
# data a hospital may train on alone is its own, and a small hospital's own data measures badly. The
# standard error of an AUROC estimate (Hanley and McNeil 1982) depends on how many positive and
# negative patients there are; at the smallest site it is so wide that the site cannot even tell a
# good model from a mediocre one, let alone train one.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, nn, perf
from scaleoutai.cases import clinical_fl as cf
from scaleoutai.datasets import clinical
from scaleoutai.infra import dp_budget as db
from scaleoutai.infra import robust_agg
from scaleoutai.ml import federated as fd
from scaleoutai.ml import privacy as pv
from scaleoutai.ml import secure_agg as sa

S = len(SIZES)
raw = clinical.clinical_sites([n + TEST_PER_SITE for n in SIZES], seed=SEED)
raw_train, raw_test = clinical.clinical_split(raw, [TEST_PER_SITE / (n + TEST_PER_SITE) for n in SIZES], seed=SEED)


def hanley_mcneil_se(a, n_pos, n_neg):
    """Standard error of an AUROC a estimated from n_pos positives and n_neg negatives."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return np.sqrt((a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg))


print(f"{'site':>4} {'train':>6} {'events':>6} {'prevalence':>10} {'SE of AUROC 0.8 on its own data':>32}")
for k, (X, y) in enumerate(raw_train):
    print(f"{k:>4} {len(y):>6} {int(y.sum()):>6} {y.mean():>10.2f} {hanley_mcneil_se(0.8, y.sum(), len(y) - y.sum()):>32.3f}")
y_all = np.concatenate([y for _, y in raw_train])
print(f"pooled {len(y_all):>4} {int(y_all.sum()):>6} {y_all.mean():>10.2f} "
      f"{hanley_mcneil_se(0.8, y_all.sum(), len(y_all) - y_all.sum()):>32.3f}")

# %% [markdown]
# ## 2. Core concepts
#
# **Site skew.** `datasets.clinical` draws every site's patients from one physiology and labels them
# with one logistic risk on the *true* values, and then makes the sites differ in four ways: the
# prevalence of the outcome (a referral centre's patient mix; site $k$ has exactly
# $\mathrm{round}(\pi_k n_k)$ events, $\pi_k$ from 0.10 to 0.40), the age, BMI and glucose of its
# population (covariate shift), a fixed offset per lab instrument (the model sees the *measured*
# values), and its size. The three panels show the label prior, the age mix and the instrument
# offsets; each is a reason why a model trained at one hospital transfers imperfectly to another.

# %%
profiles = clinical.clinical_profiles(S, seed=SEED)
fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
axes[0].bar(range(S), [y.mean() for _, y in raw_train], color="C3")
axes[0].set(xlabel="site", ylabel="prevalence", title="patient mix: the label prior")
for k, (X, _) in enumerate(raw_train):
    axes[1].hist(X[:, 0], bins=30, histtype="step", density=True, label=f"site {k}")
axes[1].set(xlabel="age (years)", title="covariate shift: age")
axes[1].legend(fontsize=7)
width = 0.35
for j, (name, col) in enumerate((("glucose", 2), ("systolic_bp", 1))):
    axes[2].bar(np.arange(S) + j * width, [p["offsets"][col] for p in profiles], width,
                label=f"{name} ({clinical.UNITS[col]})")
axes[2].axhline(0, color="k", lw=0.5)
axes[2].set(xlabel="site", title="instrument offset per site", xticks=range(S))
axes[2].legend(fontsize=7)
plt.tight_layout()
plt.show()
prev = [float(y.mean()) for _, y in raw_train]
assert max(prev) - min(prev) > 0.25  # the stated label-prior spread: 0.10 to 0.40

# %% [markdown]
# **Cross-silo federated learning.** Chapter 14's clients were many and unreliable (phones); here
# they are few institutions with reliable machines, sizeable data sets and legal agreements, every
# one of which takes part in every round. That changes the design: no client sampling, no need to
# tolerate half the clients vanishing, but every site matters, and so does the worst one.
#
# **Three models to compare.** The *centralised* model pools every record: the yardstick that privacy
# forbids. A *local* model trains on one site alone: what each hospital can do by itself. The
# *federated* model trains by FedAvg: models travel, records stay. A consortium judges them on each
# site's own held-out patients, by the AUROC (the chance that a random patient with the event scores
# above a random one without, so it does not move with the prevalence), by accuracy at a threshold of
# 1/2 (which does), and by calibration (whether a predicted 30% risk comes true 30% of the time).
#
# On top of FedAvg sit three protections: **DP-SGD** inside each site (a patient's record changes
# what the site sends by a bounded, noise-hidden amount, and a per-site **privacy ledger** adds up
# what every study on that site's data has spent), **secure aggregation** (the coordinator learns only
# the sum of the sites' updates), and **robust aggregation** (a broken site cannot drag the model
# anywhere it likes). The last two pull against each other, as Section 6 shows.
#
# ## 3. The distribution and communication pattern
#
# A star, as in Chapter 14: rank 0 is the consortium's coordinator and holds no patients; site $k$
# lives on rank $k + 1$. Per round the coordinator sends the model ($P$ numbers) to each site, and
# each site answers with one message, $[k, n_k, w_k]$; with $P$ = 18 for a logistic model on eight
# features the round is dominated by the wide-area latency, not by bytes. Before any training the
# sites standardise their measurements with *agreed* reference ranges (`cf.standardise`, creatinine on
# a log scale) rather than with their own means, which would be one more thing to share.

# %%
train = [(cf.standardise(X), y) for X, y in raw_train]
test = [(cf.standardise(X), y) for X, y in raw_test]
like = nn.mlp_init([len(clinical.FEATURES), 2], seed=SEED)  # logistic regression: two outputs, softmax
w0 = nn.flatten(like)
P = w0.size
LR, BATCH = 0.3, 64


def sgd_update(w, X, y, t, k):
    """What a site does in round t: LOCAL_EPOCHS of mini-batch SGD from w (Chapter 14's client update)."""
    return fd.client_update(w, like, X, y, LOCAL_EPOCHS, LR, BATCH, [SEED, t, k, 3])


wan = cluster.Network(alpha=3e-2, beta=8e-8)  # 30 ms latency, 100 Mbit/s between hospitals
traced = cluster.run(cf.train_sites, S + 1, args=(w0, train, 2, sgd_update), trace=True, network=wan,
                     kwargs=dict(seconds_per_sample=SECONDS_PER_SAMPLE * LOCAL_EPOCHS))
cluster.plot_timeline(traced, title="2 rounds: rank 0 coordinates, ranks 1-6 are the hospitals")
plt.show()
assert traced.stats[0].bytes_sent == 2 * S * P * 8  # the model to each site, twice
assert all(traced.stats[k + 1].bytes_sent == 2 * (2 + P) * 8 for k in range(S))  # one report per round
print(f"P = {P}; per round the coordinator sends {S * P * 8} B and receives {S * (2 + P) * 8} B; "
      f"the largest site's training dominates the round time")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `train_sites` is the protocol, one function per rank. The local update and the server's rule are
# arguments, so the same loop runs Chapter 14's SGD or DP-SGD at the sites and Chapter 35's robust
# rules at the coordinator. The coordinator knows whom it waits for (each live rank, in rank order),
# treats a crashed rank as gone for good and a lost report as a site that missed one round. `auroc`
# is the Mann-Whitney form of the area under the ROC curve, with tied scores sharing their rank.

# %%
from scaleoutai.notebooks import show

show(cf.train_sites, cf.auroc)

# %% [markdown]
# The checks: for several world sizes (one rank hosting everything, blocks of sites per rank, one
# site per rank, and more ranks than sites) the distributed run equals the one-machine reference bit
# for bit, and with the weighted mean it is FedAvg (Chapter 14's `reference_fedavg`) to rounding. The
# fast AUROC equals its pairwise definition.

# %%
want, want_hist = cf.reference_sites(w0, train, 3, sgd_update)
for K in (1, 2, 3, 5, S + 1, S + 3):
    got, hist, _ = cf.run_sites(w0, train, 3, sgd_update, K=K)
    assert np.array_equal(got, want) and hist == want_hist, K
fedavg_ref, _ = fd.reference_fedavg(w0, like, train, 3, epochs=LOCAL_EPOCHS, lr=LR, batch_size=BATCH, seed=SEED)
assert np.allclose(want, fedavg_ref, rtol=0, atol=1e-12)
scores = cf.risk_scores(want, like, test[5][0])
assert abs(cf.auroc(scores, test[5][1]) - cf.naive_auroc(scores, test[5][1])) <= 1e-12
print(f"train_sites == reference for K in {[1, 2, 3, 5, S + 1, S + 3]}; == FedAvg to 1e-12; auroc == pairwise")

# %% [markdown]
# **Centralised, local, federated.** The centralised model runs 30 epochs of the same SGD on the
# pooled records; each local model 30 epochs on its site; the federated model `ROUNDS` rounds of
# FedAvg through Chapter 14's `run_fedavg`, one site per rank. Every model is scored on every
# site's held-out patients.

# %%
EPOCHS_ALONE = 30
X_pool, y_pool = np.concatenate([X for X, _ in train]), np.concatenate([y for _, y in train])
w_central = fd.client_update(w0, like, X_pool, y_pool, EPOCHS_ALONE, LR, BATCH, [SEED, 1])
w_local = [fd.client_update(w0, like, X, y, EPOCHS_ALONE, LR, BATCH, [SEED, 2, k]) for k, (X, y) in enumerate(train)]
w_fed, fed_hist, _ = fd.run_fedavg(w0, like, train, S + 1, rounds=ROUNDS, epochs=LOCAL_EPOCHS, lr=LR,
                                   batch_size=BATCH, seed=SEED)
ev_central, ev_fed = cf.evaluate_sites(w_central, like, test), cf.evaluate_sites(w_fed, like, test)
local_own = [cf.evaluate_sites(w_local[k], like, [test[k]])["sites"][0] for k in range(S)]
print(f"{'site':>4} {'n':>5} {'local AUROC':>11} {'central AUROC':>13} {'federated AUROC':>15} {'federated acc':>13}")
for k in range(S):
    print(f"{k:>4} {SIZES[k]:>5} {local_own[k]['auroc']:>11.3f} {ev_central['sites'][k]['auroc']:>13.3f} "
          f"{ev_fed['sites'][k]['auroc']:>15.3f} {ev_fed['sites'][k]['accuracy']:>13.3f}")
print(f"pooled test: central AUROC {ev_central['pooled']['auroc']:.3f}, federated {ev_fed['pooled']['auroc']:.3f}; "
      f"worst site: local {min(r['auroc'] for r in local_own):.3f}, federated {ev_fed['worst_auroc']:.3f}")
assert abs(ev_fed["pooled"]["auroc"] - ev_central["pooled"]["auroc"]) < 0.01  # federation loses (almost) nothing
assert ev_fed["sites"][S - 1]["auroc"] > local_own[S - 1]["auroc"]  # and the smallest site gains most
assert ev_fed["worst_auroc"] > min(r["auroc"] for r in local_own)

# %% [markdown]
# The federated model is as good as the forbidden pooled one. The two largest hospitals do about as
# well alone (their own data suffice, and their own model fits their own instruments); the four
# smaller ones gain, and the smallest gains most. Large hospitals therefore join for other reasons
# (validation on others' patients, a shared model for referrals), and a consortium should say so.
# Notice too that the pooled model is not the best model for every site: it ignores that site 1's
# instruments read differently, which its local model has learned.
#
# **DP-SGD at every site, and its ledger.** Each round a site runs `DP_STEPS` steps of DP-SGD
# (Chapter 14: per-example clipping to norm $C$, Gaussian noise $\sigma C$, Poisson batches of rate
# $q$) from the global model. A record sits in one site only, so each site keeps its own ledger
# (Chapter 35) and charges it for every round it took part in; RDP adds over rounds and over studies.

# %%
C_CLIP, DP_LR = 1.0, 0.5


def dp_update(sigma):
    def update(w, X, y, t, k):
        return nn.flatten(pv.train_dp_sgd(nn.unflatten(w, like), X, y, C_CLIP, sigma, DP_Q, DP_STEPS, DP_LR,
                                          seed=[SEED, t, k, 5]))
    return update


show(pv.dp_sgd_gradient, db.PrivacyLedger.charge)

# %%
EPS_BUDGET = 1.5 * db.epsilon_from_rdp(db.rdp_curve(DP_Q, DP_SIGMA, ROUNDS * DP_STEPS), db.ORDERS, DELTA)[0]
w_dp, dp_hist, _ = cf.run_sites(w0, train, ROUNDS, dp_update(DP_SIGMA))
ledgers = [db.PrivacyLedger(EPS_BUDGET, DELTA) for _ in range(S)]
for h in dp_hist:
    for k in h["reported"]:
        ledgers[k].charge(f"study 1, round {h['round']}", DP_Q, DP_SIGMA, DP_STEPS)
ev_dp = cf.evaluate_sites(w_dp, like, test)
eps_study1 = ledgers[0].spent()
print(f"DP FedAvg (sigma = {DP_SIGMA}): pooled AUROC {ev_dp['pooled']['auroc']:.3f} (no DP "
      f"{ev_fed['pooled']['auroc']:.3f}), worst site {ev_dp['worst_auroc']:.3f}; each site spent eps = "
      f"{eps_study1:.2f} of {EPS_BUDGET:.2f} at delta = {DELTA:g} (adding per-round eps would claim "
      f"{ledgers[0].naive_spent():.0f})")
assert all(abs(L.spent() - eps_study1) < 1e-12 for L in ledgers)  # same q, sigma, rounds at every site
assert ev_dp["pooled"]["auroc"] > ev_fed["pooled"]["auroc"] - 0.02

# %% [markdown]
# **Secure aggregation.** With `secure_sum`, each site sends $[n_k (w_k - w_t), n_k]$ through Chapter
# 14's secure aggregation (pairwise and self masks, fresh every round, with Shamir-shared recovery of a
# site that drops): every vector the coordinator receives is uniform noise in $\mathbb{Z}_{2^{32}}$, and
# only the sum of all of them decodes, to the weighted mean.

# %%
secure = lambda comm, x, t: sa.secure_aggregate(comm, x, session=1000 * SEED + t)  # noqa: E731
w_sec, sec_hist, _ = cf.run_sites(w0, train, ROUNDS, sgd_update, secure_sum=secure)
w_plain, _ = cf.reference_sites(w0, train, ROUNDS, sgd_update)
words = np.concatenate([v for h in sec_hist for v in h["masked"].values()])
top = np.bincount(words >> np.uint32(28), minlength=16)  # the top 4 bits of every word the coordinator saw
chi2 = float(((top - len(words) / 16) ** 2 / (len(words) / 16)).sum())
upd = np.concatenate([sa.encode(sgd_update(w0, *train[k], 0, k) - w0).view(np.int32) for k in range(S)])
seen0 = np.concatenate([sec_hist[0]["masked"][k][:P].view(np.int32) for k in range(S)])
print(f"secure FedAvg == plain FedAvg to {np.abs(w_sec - w_plain).max():.1e}; {len(words)} masked words, "
      f"chi-square of their top 4 bits {chi2:.1f} (15 degrees of freedom; 37.7 is the 0.1% cut); "
      f"round-0 correlation with the true updates {np.corrcoef(seen0, upd)[0, 1]:+.3f}")
assert np.abs(w_sec - w_plain).max() < 1e-6 and chi2 < 37.7

# %% [markdown]
# ## 5. The same task with a production library: Opacus and scikit-learn
#
# Flower, the usual federated-learning framework, does not install into this course's pinned
# environment (its releases need protobuf older than the version Ray and MLflow pin here), so the
# federation above runs on our communicator, and the production checks are on the parts that carry the
# guarantees. **Opacus**'s `RDPAccountant`, given the same per-site history (noise multiplier, sampling
# rate, steps per round, for every round), must report the ledger's $\varepsilon$ at the same integer
# orders.

# %%
import warnings

import torch
from opacus import PrivacyEngine
from opacus.accountants import RDPAccountant

torch.set_num_threads(1)  # tensors of 18 numbers: extra threads only spin (20x slower on a busy 2-core machine)
acc = RDPAccountant()
acc.history = [(r["sigma"], r["q"], r["steps"]) for r in ledgers[0].runs]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    eps_opacus = acc.get_epsilon(DELTA, alphas=list(db.ORDERS))
assert abs(eps_opacus - ledgers[0].spent()) <= 1e-6 * eps_opacus
print(f"site 0, {len(ledgers[0].runs)} rounds: ledger eps {ledgers[0].spent():.6f}, Opacus {eps_opacus:.6f}")

# %% [markdown]
# Opacus's `PrivacyEngine` runs DP-SGD inside a torch optimizer. On one batch of site 3's patients, with
# the learning rate at zero so the model stays put, its noise-free gradient must equal ours, and the
# noise it adds, over many steps, must have the same statistics as ours: mean zero and standard
# deviation $\sigma C / b$ per coordinate for a batch of $b$.

# %%
B_OP, REPS = 32, 300
Xb, yb = train[3][0][:B_OP], train[3][1][:B_OP]
params = nn.unflatten(w0, like)
clean = nn.flatten(pv.dp_sgd_gradient(params, Xb, yb, C_CLIP, 0.0, B_OP, np.random.default_rng(0)))


# Opacus hooks the model; our inputs need no gradient, which torch reports on every backward pass
warnings.filterwarnings("ignore", message="Full backward hook is firing")


def opacus_grads(sigma, reps):
    torch.manual_seed(SEED)
    lin = torch.nn.Linear(len(clinical.FEATURES), 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(params["W0"].T))
        lin.bias.copy_(torch.tensor(params["b0"]))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(Xb), torch.tensor(yb)),
                                         batch_size=B_OP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the secure-RNG notice
        model, opt, ploader = PrivacyEngine(accountant="rdp").make_private(
            module=lin, optimizer=torch.optim.SGD(lin.parameters(), lr=0.0), data_loader=loader,
            noise_multiplier=sigma, max_grad_norm=C_CLIP, poisson_sampling=False)
    xb_t, yb_t = next(iter(ploader))
    out = []
    for _ in range(reps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb_t), yb_t).backward()
        opt.step()
        out.append(np.concatenate([lin.weight.grad.numpy().T.ravel(), lin.bias.grad.numpy()]))
    return np.array(out)


assert np.abs(opacus_grads(0.0, 1)[0] - clean).max() < 1e-12
rng = np.random.default_rng(SEED)
ours = np.array([nn.flatten(pv.dp_sgd_gradient(params, Xb, yb, C_CLIP, DP_SIGMA, B_OP, rng)) for _ in range(REPS)])
theirs = opacus_grads(DP_SIGMA, REPS)
unit = DP_SIGMA * C_CLIP / B_OP
z_ours, z_theirs = (ours - clean) / unit, (theirs - clean) / unit
print(f"noise / (sigma C / b) over {z_ours.size} coordinates: ours mean {z_ours.mean():+.3f} std {z_ours.std():.3f}; "
      f"Opacus mean {z_theirs.mean():+.3f} std {z_theirs.std():.3f}")
for z in (z_ours, z_theirs):
    assert abs(z.mean()) < 0.06 and abs(z.std() - 1) < 0.05

# %% [markdown]
# **scikit-learn**'s `LogisticRegression` (L-BFGS, essentially unregularised) on the pooled records is
# the centralised yardstick: our SGD-trained centralised model must agree with it on the test
# patients, and `roc_auc_score` must agree with our AUROC.

# %%
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

X_test_all, y_test_all = np.concatenate([X for X, _ in test]), np.concatenate([y for _, y in test])
skl = LogisticRegression(C=1e6, max_iter=2000).fit(X_pool, y_pool)
p_skl = skl.predict_proba(X_test_all)[:, 1]
p_ours = cf.risk_scores(w_central, like, X_test_all)
acc_skl, acc_ours = float(np.mean((p_skl > 0.5) == y_test_all)), ev_central["pooled"]["accuracy"]
auc_skl = roc_auc_score(y_test_all, p_skl)
assert abs(cf.auroc(p_skl, y_test_all) - auc_skl) <= 1e-12 and abs(cf.auroc(p_ours, y_test_all) - roc_auc_score(y_test_all, p_ours)) <= 1e-12
assert abs(acc_ours - acc_skl) <= 0.01 and abs(ev_central["pooled"]["auroc"] - auc_skl) <= 0.005
print(f"pooled test patients: scikit-learn accuracy {acc_skl:.4f}, AUROC {auc_skl:.4f}; ours {acc_ours:.4f}, "
      f"{ev_central['pooled']['auroc']:.4f}; federated {ev_fed['pooled']['accuracy']:.4f}, {ev_fed['pooled']['auroc']:.4f}")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A faulty site.** Two realistic faults at site 1: a *broken pipeline* that sends its update
# sign-flipped and scaled by 10 (a unit conversion gone wrong, or an attacker), and an *export bug*
# that flips every label of that site. FedAvg's weighted mean against the robust rules of Chapter 35,
# told to tolerate $f$ = 1 faulty site of six, over every seed in `SEEDS` (each seed a new draw of the
# patients and of the SGD order). The band is the range over seeds; the dashed line is the clean run.

# %%
def rule_fn(rule):
    return cf.weighted_mean if rule == "mean" else (lambda D, n: robust_agg.aggregate(D, rule, 1))


def federation(seed):
    r_train, r_test = clinical.clinical_split(clinical.clinical_sites([n + TEST_PER_SITE for n in SIZES], seed=seed),
                                              [TEST_PER_SITE / (n + TEST_PER_SITE) for n in SIZES], seed=seed)
    return [(cf.standardise(X), y) for X, y in r_train], [(cf.standardise(X), y) for X, y in r_test]


def update_for(seed):
    return lambda w, X, y, t, k: fd.client_update(w, like, X, y, LOCAL_EPOCHS, LR, BATCH, [seed, t, k, 3])


RULES = ["mean", "median", "trimmed_mean", "krum"]
FAULTS = {"broken pipeline (-10x update)": "scaled", "flipped labels": "labels"}
t0 = time.perf_counter()
curves = {(a, r): [] for a in list(FAULTS) + ["clean"] for r in RULES}
for seed in SEEDS:
    tr, te = federation(seed)
    for attack in list(FAULTS) + ["clean"]:
        kind = FAULTS.get(attack)
        sites = [(X, 1 - y) if (kind == "labels" and k == 1) else (X, y) for k, (X, y) in enumerate(tr)]
        corrupt = {1: lambda w, w_k: w - 10.0 * (w_k - w)} if kind == "scaled" else None
        for rule in RULES:
            _, hist, _ = cf.run_sites(w0, sites, ROUNDS, update_for(seed), combine=rule_fn(rule), corrupt=corrupt,
                                      keep_models=True)
            curves[attack, rule].append([cf.evaluate_sites(h["w"], like, te)["pooled"]["auroc"] for h in hist])
fig, axes = plt.subplots(1, len(FAULTS), figsize=(13, 4), sharey=True)
for ax, attack in zip(axes, FAULTS):
    for i, rule in enumerate(RULES):
        c = np.array(curves[attack, rule])
        ax.plot(range(1, ROUNDS + 1), c.mean(0), color=f"C{i}", label=rule)
        ax.fill_between(range(1, ROUNDS + 1), c.min(0), c.max(0), color=f"C{i}", alpha=0.2)
        ax.plot(range(1, ROUNDS + 1), np.mean(curves["clean", rule], axis=0), color=f"C{i}", ls="--", lw=0.8)
    ax.set(title=f"site 1: {attack}", xlabel="round", ylabel="pooled test AUROC", ylim=(0, 1))
axes[0].legend()
plt.tight_layout()
plt.show()
final = {k: float(np.mean([c[-1] for c in v])) for k, v in curves.items()}
for attack in list(FAULTS) + ["clean"]:
    print(f"{attack:>30}: " + ", ".join(f"{r} {final[attack, r]:.3f}" for r in RULES))
print(f"({len(SEEDS)} seeds x {len(curves)} runs in {time.perf_counter() - t0:.1f} s)")
clean_auc = final["clean", "mean"]
assert final["broken pipeline (-10x update)", "mean"] < 0.6  # the mean follows the broken site
assert final["flipped labels", "mean"] < clean_auc - 0.005
for attack in FAULTS:
    for rule in ("median", "trimmed_mean"):
        assert final[attack, rule] > clean_auc - 0.01, (attack, rule)  # the robust rules survive

# %% [markdown]
# The weighted mean follows the broken pipeline to a model worse than a coin; flipped labels cost
# it less, because their update points the wrong way but is no larger than an honest one. The median
# and the trimmed mean shrug off both. Krum survives too, but lands lower even on clean data: it keeps
# one site's update each round, and with sites this different no single site is the federation.
#
# **Secure aggregation cannot help here.** Masking hides each update, so the coordinator cannot tell
# which site is broken and no robust rule can run on what it sees: only the sum.

# %%
wide = lambda comm, x, t: sa.secure_aggregate(comm, x, frac_bits=8, session=t)  # noqa: E731  (room for huge updates)
w_blind, _, _ = cf.run_sites(w0, train, 3, sgd_update, secure_sum=wide, corrupt={1: lambda w, w_k: w - 10.0 * (w_k - w)})
auc_blind = cf.evaluate_sites(w_blind, like, test)["pooled"]["auroc"]
print(f"secure aggregation with the broken pipeline, 3 rounds: pooled AUROC {auc_blind:.3f}")
assert auc_blind < 0.6

# %% [markdown]
# **A site that goes offline.** Site 2's server crashes halfway through training (`Faults(crash=...)`:
# rank 3 stops at its report of round `ROUNDS // 2`). The coordinator's receive raises
# `PeerCrashedError`, the site is excluded from then on, and the run completes with exactly the
# model of a federation that lost that site at that round. A lossy link (`Faults(loss=0.1)`: one
# report or model in ten lost) costs a site one round each time, never the run.

# %%
half = ROUNDS // 2
w_crash, crash_hist, _ = cf.run_sites(w0, train, ROUNDS, sgd_update, faults=cluster.Faults(crash={3: half}))
w_want, want_hist = cf.reference_sites(w0, train, ROUNDS, sgd_update, crashed={2: half})
assert np.array_equal(w_crash, w_want) and crash_hist == want_hist and crash_hist[-1]["dead"] == [2]
w_lossy, lossy_hist, _ = cf.run_sites(w0, train, ROUNDS, sgd_update, faults=cluster.Faults(loss=0.1, seed=SEED))
lost = {(k, h["round"]) for h in lossy_hist for k in range(S) if k not in h["reported"]}
assert np.array_equal(w_lossy, cf.reference_sites(w0, train, ROUNDS, sgd_update, lost=lost)[0]) and lost
for name, w in (("no fault", w_plain), ("site 2 crashed", w_crash), (f"{len(lost)} reports lost", w_lossy)):
    ev = cf.evaluate_sites(w, like, test)
    print(f"{name:>16}: pooled AUROC {ev['pooled']['auroc']:.3f}, site 2 {ev['sites'][2]['auroc']:.3f}")

# %% [markdown]
# **The privacy budget runs out.** Each site's ledger was sized at 1.5 times one study's
# $\varepsilon$. A second study on the same records fits (RDP composition is tighter than adding the
# two $\varepsilon$s), a third would overspend, and the ledger refuses it before any step runs.

# %%
for k in range(S):
    ledgers[k].charge("study 2", DP_Q, DP_SIGMA, ROUNDS * DP_STEPS)
print(f"after two studies: eps {ledgers[0].spent():.2f} of {EPS_BUDGET:.2f} (adding the two: {2 * eps_study1:.2f})")
try:
    ledgers[0].charge("study 3", DP_Q, DP_SIGMA, ROUNDS * DP_STEPS)
    raise AssertionError("a third study must not fit in the budget")
except db.BudgetExceeded as exc:
    print("refused:", str(exc)[:150], "...")
assert len(ledgers[0].runs) == len(dp_hist) + 1

# %% [markdown]
# ## 7. Evaluation: speed, cost, privacy and fairness
#
# **Speedup, efficiency and cost against $K$.** The time of a round on the simulator's clock:
# every site's compute is charged at `SECONDS_PER_SAMPLE` per patient and epoch, the links are the WAN
# of Section 3, and $K$ ranks host the six sites in contiguous blocks ($K = 1$: the coordinator trains
# every site itself, the single-machine baseline $T_1$). The work is far too small to time on this
# 2-core machine, so the clock is simulated, and said so. Every run is tracked in MLflow with
# `capstone.track` (rank 0 logs; the simulated makespan is logged as `sim_time`), then read back.

# %%
import tempfile
from pathlib import Path

from scaleoutai import capstone
from scaleoutai.capstone.tracking import open_experiment

WORK = Path(tempfile.mkdtemp(prefix="ch37-"))
URI = f"sqlite:///{WORK}/mlflow.db"
EXPERIMENT = "ch37-federated-scaling"
open_experiment(EXPERIMENT, URI)
price = capstone.lookup(INSTANCE_TYPE)


def tracked_fedavg(comm, rounds):
    with capstone.track(comm, experiment=EXPERIMENT, uri=URI, instance_type=INSTANCE_TYPE, startup_time=0.0,
                        baseline=comm.size == 1, params={"sites": S, "rounds": rounds, "clock": "simulated"},
                        problem="FedAvg over hospital sites") as run:
        w, _ = fd.train_fedavg(comm, w0, like, train, rounds, epochs=LOCAL_EPOCHS, lr=LR, batch_size=BATCH,
                               seed=SEED, seconds_per_sample=SECONDS_PER_SAMPLE)
        comm.barrier()  # rank 0's clock is now the makespan
        sim = comm.clock / rounds
        run.log_metrics({"sim_time": sim, "sim_cost": perf.run_cost(price.price_per_hour, comm.size, sim)})
    return w


w_two, _ = fd.reference_fedavg(w0, like, train, 2, epochs=LOCAL_EPOCHS, lr=LR, batch_size=BATCH, seed=SEED)
for K in KS:
    res = cluster.run(tracked_fedavg, K, args=(2,), network=wan, timeout=300)
    assert np.array_equal(res.values[0], w_two), K  # the same model at every K
runs = capstone.load_runs(EXPERIMENT, URI)
assert len(runs) == len(KS) and all(r["status"] == "FINISHED" for r in runs)
times = {int(r["world_size"]): r["sim_time"] for r in runs}
table = perf.scaling_table(times)
bound = sum(SIZES) / max(SIZES)  # a round waits for the largest site
print(f"{'K':>3} {'round (s, sim)':>14} {'S_K':>5} {'E_K':>5} {'cost per round':>14}")
for row in table:
    print(f"{row['p']:>3} {row['time']:>14.3f} {row['speedup']:>5.2f} {row['efficiency']:>5.2f} "
          f"{perf.run_cost(price.price_per_hour, row['p'], row['time']):>14.2e}")
print(f"read back from MLflow: {len(runs)} runs; priced as {price.instance_type} per rank ({price.date}); "
      f"load-balance bound sum n_k / max n_k = {bound:.2f}")
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
perf.plot_scaling(times, ax=axes[0], title="FedAvg round on the simulator")
axes[0].axhline(bound, color="k", ls=":")  # the largest-site bound
axes[1].plot([r["p"] for r in table], [perf.run_cost(price.price_per_hour, r["p"], r["time"]) for r in table], "o-")
axes[1].set(xlabel="K ranks", ylabel="cost per round", title=f"cost on {price.instance_type}")
plt.tight_layout()
plt.show()
assert table[-1]["speedup"] <= bound + 1e-9 and table[-1]["speedup"] > 1.5

# %% [markdown]
# Two ceilings show. A round waits for the largest hospital, which holds half the patients, so the
# speedup can never pass $\sum_k n_k / \max_k n_k$ = 1.97 (the dotted line) however many ranks
# there are; and the coordinator sends the model to the sites one after another through one port, so
# each extra site adds a WAN latency to the round (at $K$ = 2 the round is even slower than on one
# machine: the same work plus two latencies). Efficiency falls roughly as $1/K$. In a real federation
# each hospital brings its own machine, so the question is less what $K$ costs than whose hardware
# sets the pace; the remedies are the ones of Chapter 14 (deadlines, asynchronous rounds).
#
# **Privacy against utility.** The same DP FedAvg for every $\sigma$ in `SIGMAS`: the $\varepsilon$
# each site spends and the pooled and worst-site AUROC of the model. The line is the non-private
# federated model.

# %%
points = []
for sigma in SIGMAS:
    w_s, _, _ = cf.run_sites(w0, train, ROUNDS, dp_update(sigma))
    ev = cf.evaluate_sites(w_s, like, test)
    eps = db.epsilon_from_rdp(db.rdp_curve(DP_Q, sigma, ROUNDS * DP_STEPS), db.ORDERS, DELTA)[0]
    points.append((eps, ev["pooled"]["auroc"], ev["worst_auroc"]))
points.sort()
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label="pooled AUROC")
ax.plot([p[0] for p in points], [p[2] for p in points], "s--", label="worst site AUROC")
ax.axhline(ev_fed["pooled"]["auroc"], color="k", lw=0.8, label="no DP (pooled)")
ax.set(xscale="log", xlabel=f"epsilon per site (delta = {DELTA:g})", ylabel="AUROC", title="privacy against utility")
ax.legend()
plt.show()
print("(epsilon, pooled AUROC, worst site):", [tuple(round(v, 3) for v in p) for p in points])
assert points[0][1] < points[-1][1]  # the most private model is the least accurate

# %% [markdown]
# Down to $\varepsilon \approx 0.5$ privacy is nearly free here: eight features, a linear model and
# thousands of patients leave plenty of signal above the noise. Below it the AUROC falls off fast.
#
# **Fairness: every site, and the worst.** A consortium signs off on the worst hospital, not on the
# average. Per site, the AUROC of each model on that site's held-out patients, and the calibration
# error of the federated model against the site's prevalence.

# %%
w_median, _ = cf.reference_sites(w0, train, ROUNDS, sgd_update, combine=rule_fn("median"))
models = {"local (own site)": None, "centralised": w_central, "FedAvg": w_fed, f"FedAvg + DP (sigma {DP_SIGMA})": w_dp,
          "FedAvg, median rule": w_median}
view = {name: ([r["auroc"] for r in local_own] if w is None else [r["auroc"] for r in cf.evaluate_sites(w, like, test)["sites"]])
        for name, w in models.items()}
fig, axes = plt.subplots(1, 2, figsize=(13, 4))
for i, (name, aucs) in enumerate(view.items()):
    axes[0].bar(np.arange(S) + i * 0.16, aucs, 0.16, label=f"{name} (worst {min(aucs):.3f})")
axes[0].set(xlabel="site", ylabel="AUROC on the site's patients", ylim=(0.6, 0.95), title="per-site AUROC")
axes[0].legend(fontsize=7)
ece = [r["ece"] for r in ev_fed["sites"]]
axes[1].plot([r["prevalence"] for r in ev_fed["sites"]], ece, "o-")
axes[1].set(xlabel="site prevalence", ylabel="calibration error (ECE)", title="FedAvg calibration by site")
plt.tight_layout()
plt.show()
for name, aucs in view.items():
    print(f"{name:>26}: worst site {int(np.argmin(aucs))} at {min(aucs):.3f}, mean {np.mean(aucs):.3f}")
assert min(view["FedAvg"]) > min(view["local (own site)"])
assert np.corrcoef([r["prevalence"] for r in ev_fed["sites"]], ece)[0, 1] > 0.5  # miscalibrated where the prior differs

# %% [markdown]
# The federated model lifts the worst site over what that site can do alone. Its AUROC is good
# everywhere, but its calibration is not: it learned the federation's overall prevalence, dominated
# by the large low-prevalence hospital, and so under-predicts risk at the referral centres. A
# deployed model would recalibrate per site (one intercept per hospital, learned locally), which
# the AUROC alone would never have shown to be needed.
#
# ## 8. Exercises
#
# 1. **Per-site intercepts.** Give each site its own intercept, trained locally and never shared, and
#    the rest by FedAvg (a first step towards personalised federated learning). Plot the calibration
#    error by site before and after.
# 2. **Privacy where it is scarce.** Fix each site's expected batch at 32 patients instead of a
#    common $q$. Which sites now spend the most $\varepsilon$, and what does a budget-fair schedule
#    (fewer rounds for small sites) cost in AUROC?
# 3. **Two faulty sites.** Make sites 1 and 4 faulty with $f$ = 2. Which rules are still defined for
#    six sites, and which survive? Repeat with the faulty sites being the two largest.
# 4. **FedProx on the skew.** Rerun the federation with `mu` > 0 (Chapter 14). Does the proximal term
#    change the worst site's AUROC on this covariate shift?
# 5. **Secure and robust.** Sketch how a coordinator could check a norm bound on each masked update
#    without seeing it (hint: clipping at the site and a zero-knowledge proof), and what this
#    would have done against the broken pipeline.
#
# ## 9. Research directions
#
# - **Robustness and secure aggregation together.** Masking hides exactly what robust rules need.
#   Protocols that compute a median or a norm check under encryption, or that bound each update's
#   norm with a proof, are an active line of work with real costs.
#   - So, Guler and Avestimehr, "Byzantine-Resilient Secure Federated Learning", IEEE Journal on
#     Selected Areas in Communications, 2021. Distances between masked updates, computed securely.
#   - Bonawitz, Ivanov, Kreuter, Marcedone, McMahan, Patel, Ramage, Segal and Seth, "Practical Secure
#     Aggregation for Privacy-Preserving Machine Learning", CCS, 2017. The masking protocol of Chapter 14.
#   - Rathee, Shen, Wagh and Popa, "ELSA: Secure Aggregation for Federated Learning with Malicious
#     Actors", IEEE S&P, 2023. Two servers aggregate secret-shared updates; privacy holds if one server
#     is honest, malicious clients are defended against, and it runs far faster than earlier such designs.
# - **Heterogeneous sites and fairness.** One global model is rarely best for every hospital. How to
#   personalise (per-site layers, clustering sites, local fine-tuning) without losing what the
#   federation gives the small sites, and how to guarantee the worst site, are open.
#   - Li, Sanjabi, Beirami and Smith, "Fair Resource Allocation in Federated Learning", ICLR, 2020.
#     q-FFL: weighting sites by their loss to lift the worst.
#   - Li, Jiang, Zhang, Kamp and Dou, "FedBN: Federated Learning on Non-IID Features via Local Batch
#     Normalization", ICLR, 2021. Keeping site-specific normalisation local against feature shift.
# - **Federated medicine in practice.** Real consortia meet label definitions that differ between
#   sites, missing values, and regulators. Evidence from deployed federations, and how to validate a
#   federated model, are still accumulating.
#   - Rieke, Hancox, Li, Milletari, Roth, Albarqouni et al., "The future of digital health with
#     federated learning", npj Digital Medicine, 2020. The case, the obstacles and the open questions.
#   - Dayan, Roth, Zhong et al., "Federated learning for predicting clinical outcomes in patients with
#     COVID-19", Nature Medicine, 2021. Twenty institutions across the world, and what it took.
#   - Ogier du Terrail et al., "Federated learning for predicting histological response to neoadjuvant
#     chemotherapy in triple-negative breast cancer", Nature Medicine, 2023. Whole-slide images stay at each
#     hospital, and collaborative training improves on models trained at a single site for a rare cancer.
# - **Privacy accounting for a federation.** Record-level DP per site, as here, is not patient-level
#   DP when a patient visits several hospitals, nor site-level DP when a hospital's participation is
#   itself sensitive. User-level and tighter accounting for many studies remain open.
#   - McMahan, Ramage, Talwar and Zhang, "Learning Differentially Private Recurrent Language Models",
#     ICLR, 2018. DP-FedAvg with user-level guarantees.
#   - Xu, Zhang, Andrew, Choquette-Choo, Kairouz, McMahan, Rosenstock and Zhang, "Federated Learning of
#     Gboard Language Models with Differential Privacy", ACL Industry Track, 2023. Formal DP guarantees
#     for deployed keyboard models without uniform client sampling, and the clipping and participation
#     choices that made the trade-off acceptable.
#
# ## What's next
#
# Chapter 38 (recommendation) moves from six hospitals to millions of users: the data is again
# spread and skewed, but the model is dominated by huge embedding tables, and the question becomes
# how to shard them.
