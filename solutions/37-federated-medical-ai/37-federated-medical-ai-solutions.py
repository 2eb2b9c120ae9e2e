# %% [markdown]
# # Chapter 37 solutions: Federated medical AI
#
# Worked solutions to the exercises of `chapters/37-federated-medical-ai` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.
#
# The federation is the chapter's: six sites of 2000 down to 60 training patients (400 held out each),
# a logistic model on eight standardised measurements, 12 rounds of one local epoch, learning rate 0.3,
# batch 64, seed 0. The one-machine `reference_sites` (which the chapter proves equal to the distributed
# `train_sites` bit for bit) runs every variant, so each variant is a different local update or rule.

# %%
import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import nn
from scaleoutai.cases import clinical_fl as cf
from scaleoutai.datasets import clinical
from scaleoutai.infra import dp_budget as db
from scaleoutai.infra import robust_agg
from scaleoutai.ml import federated as fd
from scaleoutai.ml import privacy as pv

SIZES, HELD_OUT, ROUNDS, SEED = [2000, 1000, 500, 250, 120, 60], 400, 12, 0
S = len(SIZES)
raw = clinical.clinical_sites([m + HELD_OUT for m in SIZES], seed=SEED)
raw_tr, raw_te = clinical.clinical_split(raw, [HELD_OUT / (m + HELD_OUT) for m in SIZES], seed=SEED)
train = [(cf.standardise(X), y) for X, y in raw_tr]
test = [(cf.standardise(X), y) for X, y in raw_te]
like = nn.mlp_init([len(clinical.FEATURES), 2], seed=SEED)
w0 = nn.flatten(like)
LR, BATCH = 0.3, 64


def plain_update(w, X, y, t, k, mu=0.0):
    return fd.client_update(w, like, X, y, 1, LR, BATCH, [SEED, t, k, 3], mu)


w_fed, _ = cf.reference_sites(w0, train, ROUNDS, plain_update)
ev_fed = cf.evaluate_sites(w_fed, like, test)

# %% [markdown]
# ## Exercise 1 (coding): a private intercept per site
#
# **Answer.** The weights $W$ are federated, and each site keeps its own bias $b^{(k)}$: in round $t$
# site $k$ starts from the global $W_t$ with *its* bias, trains one epoch, keeps the new bias and sends
# the model (the coordinator's average of the biases is simply never used). At evaluation each site uses
# $W$ with its own bias. The intercept is exactly what absorbs the label-prior shift (prevalence from
# 0.10 to 0.40): for a logistic model the bias's gradient is $\sum_i (p_i - y_i)$, so a bias trained on a
# site drives the mean predicted risk towards that site's prevalence, which the shared intercept cannot do
# for six prevalences at once. Calibration error falls at the sites whose prevalence is far from the
# pooled one; the ranking of patients within a site (AUROC) is unchanged by a per-site shift of every
# score, except through the slightly different $W$ training takes.
#
# Checks: (1) the mean predicted risk on each site's training patients is closer to its prevalence with
# the private bias than with the shared model, on average over sites (the score equation above);
# (2) the expected calibration error (ECE), averaged over sites, falls; (3) a single site's AUROC with
# its own bias equals the AUROC of the *same* $W$ with any other bias (a common shift of the logit
# does not change the order), so the only AUROC change is through $W$.

# %%
def with_bias(w, b):
    p = nn.unflatten(w, like)
    p["b0"] = np.array(b, dtype=p["b0"].dtype)
    return nn.flatten(p)


own_bias = {k: nn.unflatten(w0, like)["b0"].copy() for k in range(S)}


def personal_update(w, X, y, t, k):
    """Start from the global W with this site's own bias; keep the trained bias for the next round."""
    w_k = plain_update(with_bias(w, own_bias[k]), X, y, t, k)
    own_bias[k] = nn.unflatten(w_k, like)["b0"].copy()
    return w_k


w_pers, _ = cf.reference_sites(w0, train, ROUNDS, personal_update)
rows = []
for k in range(S):
    shared = cf.evaluate_sites(w_fed, like, [test[k]])["sites"][0]
    mine = cf.evaluate_sites(with_bias(w_pers, own_bias[k]), like, [test[k]])["sites"][0]
    other = cf.evaluate_sites(with_bias(w_pers, own_bias[(k + 1) % S]), like, [test[k]])["sites"][0]
    assert abs(mine["auroc"] - other["auroc"]) < 1e-12            # a common logit shift keeps the order
    Xk, yk = train[k]
    gap_shared = abs(cf.risk_scores(w_fed, like, Xk).mean() - yk.mean())
    gap_mine = abs(cf.risk_scores(with_bias(w_pers, own_bias[k]), like, Xk).mean() - yk.mean())
    rows.append((shared["ece"], mine["ece"], gap_shared, gap_mine, shared["auroc"], mine["auroc"], yk.mean()))
rows = np.array(rows)
print(f"{'site':>4} {'prev':>5} {'ECE shared':>10} {'ECE own b':>9} {'AUROC shared':>12} {'AUROC own b':>11}")
for k in range(S):
    print(f"{k:>4} {rows[k, 6]:5.2f} {rows[k, 0]:10.3f} {rows[k, 1]:9.3f} {rows[k, 4]:12.3f} {rows[k, 5]:11.3f}")
assert rows[:, 3].mean() < rows[:, 2].mean()                      # mean risk closer to each prevalence
assert rows[:, 1].mean() < rows[:, 0].mean()                      # calibration better on average
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.bar(np.arange(S) - 0.2, rows[:, 0], 0.4, label="shared intercept")
ax.bar(np.arange(S) + 0.2, rows[:, 1], 0.4, label="own intercept")
ax.set(xlabel="site", ylabel="calibration error (ECE)")
ax.legend()
plt.close(fig)

# %% [markdown]
# ## Exercise 2 (analysis): an expected batch of 32 patients at every site
#
# **Answer.** With an expected batch of 32, site $k$ samples at $q_k = 32 / n_k$: from 0.016 at the
# 2000-patient site to 0.53 at the 60-patient one. Privacy amplification by subsampling is roughly
# proportional to $q$, so **the small sites now spend by far the most $\varepsilon$**, the smallest one about
# 40 times more than the largest, over the same rounds and noise (printed below; the
# $\varepsilon$ rises monotonically as $n_k$ falls).
#
# A budget-fair schedule gives every site the same budget, here the $\varepsilon$ the chapter's study
# spent at the common $q = 0.05$ ($\sigma = 1.2$, 12 rounds of 10 steps), and lets site $k$ take part in
# the largest number of rounds $r_k$ whose $\varepsilon$ fits (`epsilon_from_rdp` of the RDP curve of
# $10 r_k$ steps, searched round by round). Budget 3.0 gives $r_k = (12, 12, 6, 1, 0, 0)$: the two smallest
# sites cannot afford a single round at $q \ge 0.27$, site 3 one round, site 2 half the rounds. The cost in
# AUROC is small on this problem: about one point pooled (0.783 to 0.773) and a fraction of a point at the
# worst site, because the large sites carry most of the signal and the model is shared (the small sites
# are still *served*: they are evaluated on the federated model). Every site's ledger is charged for
# exactly the rounds it took part in, and none overspends. The alternative that keeps everyone in is to
# raise $\sigma$ at the small sites, or cap $q_k$ (a smaller batch there), trading their gradient noise for
# participation.

# %%
SIGMA, STEPS, C_CLIP, DP_LR, DELTA = 1.2, 10, 1.0, 0.5, 1e-5
q_k = [32 / m for m in SIZES]


def eps_for(q, rounds):
    return db.epsilon_from_rdp(db.rdp_curve(q, SIGMA, rounds * STEPS), db.ORDERS, DELTA)[0] if rounds else 0.0


eps_fixed = [eps_for(q, ROUNDS) for q in q_k]
assert all(a < b for a, b in zip(eps_fixed, eps_fixed[1:]))       # smaller site, larger q, more epsilon
budget = eps_for(0.05, ROUNDS)
r_k = [max(r for r in range(ROUNDS + 1) if eps_for(q, r) <= budget) for q in q_k]
print("sampling rate per site:", np.round(q_k, 3).tolist())
print("epsilon with every site in all 12 rounds:", np.round(eps_fixed, 2).tolist(), f"(budget {budget:.2f})")
print("rounds each site may join under the budget:", r_k)


def dp_update_q(w, X, y, t, k):
    p = pv.train_dp_sgd(nn.unflatten(w, like), X, y, C_CLIP, SIGMA, q_k[k], STEPS, DP_LR, seed=[SEED, t, k, 5])
    return nn.flatten(p)


skip = {(k, t) for k in range(S) for t in range(r_k[k], ROUNDS)}
w_fixed, _ = cf.reference_sites(w0, train, ROUNDS, dp_update_q)
w_fair, hist_fair = cf.reference_sites(w0, train, ROUNDS, dp_update_q, lost=skip)
for k in range(S):
    ledger = db.PrivacyLedger(budget, DELTA)
    for h in hist_fair:
        if k in h["reported"]:
            ledger.charge(f"round {h['round']}", q_k[k], SIGMA, STEPS)   # raises if it would overspend
    assert len(ledger.runs) == r_k[k] and ledger.spent() <= budget
ev_fixed, ev_fair = cf.evaluate_sites(w_fixed, like, test), cf.evaluate_sites(w_fair, like, test)
print(f"fixed batch, all rounds: pooled AUROC {ev_fixed['pooled']['auroc']:.3f}, worst site {ev_fixed['worst_auroc']:.3f}")
print(f"budget-fair schedule:    pooled AUROC {ev_fair['pooled']['auroc']:.3f}, worst site {ev_fair['worst_auroc']:.3f}")

# %% [markdown]
# ## Exercise 3 (analysis): two faulty sites out of six
#
# **Which rules are defined.** With $K = 6$ sites and $f = 2$: the coordinate-wise median needs
# $f \le (K-1)/2 = 2.5$ (defined); the trimmed mean needs $2f < K$, $4 < 6$ (defined, it averages the middle
# two values); Krum and multi-Krum need $K > 2f + 2 = 6$ (**not** defined: `check_f` refuses). The mean is
# defined but not robust.
#
# **Which survive.** Faults: the chapter's broken pipeline ($-10\times$ the update) at two sites. With
# sites 1 and 4 faulty, the median and the trimmed mean stay close to the clean run: in every
# coordinate at most two of the six values are wrong, and both rules keep values from the middle of
# the four honest ones. The weighted mean follows the broken sites. With the two *largest* sites (0 and
# 1) faulty the robust rules still survive in the same sense (they are unweighted, so they do not care
# how many patients a faulty site holds), but they now aggregate only the four smallest sites (1,930
# patients against 3,000 lost), so the clean-data quality they can reach is slightly lower (0.780 against
# 0.783 here). The weighted mean ends below a coin in both cases (the broken sites' $-10\times$ updates
# dominate the weighted sum either way).

# %%
for rule in ("krum", "multi_krum"):
    try:
        robust_agg.check_f(rule, S, 2)
        raise AssertionError(f"{rule} must refuse f = 2 of 6")
    except ValueError:
        pass
for rule in ("median", "trimmed_mean"):
    robust_agg.check_f(rule, S, 2)                                  # defined: no exception


def rule_fn(rule, f):
    return cf.weighted_mean if rule == "mean" else (lambda D, m: robust_agg.aggregate(D, rule, f))


broken = lambda w, w_k: w - 10.0 * (w_k - w)  # noqa: E731
res3 = {}
for name, bad in (("clean", ()), ("sites 1 and 4", (1, 4)), ("sites 0 and 1", (0, 1))):
    for rule in ("mean", "median", "trimmed_mean"):
        w_r, _ = cf.reference_sites(w0, train, ROUNDS, plain_update, combine=rule_fn(rule, 2),
                                    corrupt={k: broken for k in bad})
        res3[name, rule] = cf.evaluate_sites(w_r, like, test)["pooled"]["auroc"]
    print(f"{name:>14}: " + ", ".join(f"{r} {res3[name, r]:.3f}" for r in ("mean", "median", "trimmed_mean")))
for name in ("sites 1 and 4", "sites 0 and 1"):
    assert res3[name, "mean"] < 0.6
    for rule in ("median", "trimmed_mean"):
        assert res3[name, rule] > res3["clean", rule] - 0.02, (name, rule)

# %% [markdown]
# ## Exercise 4 (analysis): FedProx on the covariate shift
#
# **Answer: no, not measurably.** The proximal term $\frac{\mu}{2}\lVert v - w_t\rVert^2$ limits how far a
# site's local model drifts from the global one *within a round*. Here each round is a single local
# epoch with a convex model, so drift is small to begin with, and the term cannot change where
# the federation converges: at a fixed point $v = w_t$ the proximal gradient vanishes, so FedProx and
# FedAvg share their fixed points, and the worst site's AUROC is set by how well one shared logistic
# model fits six shifted populations (covariate shift and instrument offsets), which is a model
# limitation, not an optimisation one. Large $\mu$ only slows training (every local step is pulled back).
# The sweep below shows the worst-site AUROC moving by well under a point for $\mu$ up to 0.1, and
# `mu = 0` reproduces FedAvg exactly.

# %%
worst = {}
for mu in (0.0, 0.01, 0.1, 1.0):
    w_mu, _ = cf.reference_sites(w0, train, ROUNDS, lambda w, X, y, t, k, mu=mu: plain_update(w, X, y, t, k, mu))
    if mu == 0.0:
        assert np.array_equal(w_mu, w_fed)
    worst[mu] = cf.evaluate_sites(w_mu, like, test)["worst_auroc"]
print("worst-site AUROC by mu:", {m: round(v, 4) for m, v in worst.items()})
assert abs(worst[0.01] - worst[0.0]) < 0.01 and abs(worst[0.1] - worst[0.0]) < 0.01

# %% [markdown]
# ## Exercise 5 (conceptual): a norm bound on masked updates
#
# **The sketch.** Secure aggregation shows the coordinator only $\sum_k u_k$, so it cannot inspect any
# $u_k$. Two pieces restore a guarantee. (1) *Clipping at the site*: an honest site scales its update
# to $\lVert u_k\rVert \le B$ before masking. (2) *A zero-knowledge proof* that it did: the site commits to
# its encoded integer vector (Pedersen commitments, which are additively homomorphic, so the commitments
# can be checked to match the masked shares that are summed) and attaches a proof that the committed
# vector has $\sum_j u_{kj}^2 \le B^2$ (a range proof on the squared norm, as in RoFL, EIFFeL or ACORN).
# The coordinator verifies every proof, drops the sites whose proof fails (dropout handling in the
# masking protocol already copes with a missing site), and learns nothing beyond validity and the sum.
# Costs: proof generation grows with $P$ (cheap for this chapter's $P = 18$, heavy for a large model),
# and the bound $B$ must be agreed in advance.
#
# **Against the broken pipeline.** Its update is $-10\times$ an honest one, so its norm is ten times an
# honest norm: with $B$ set near the honest norms the site cannot produce a valid proof and is excluded,
# or, if the site's own software clips before masking, its influence on the weighted mean shrinks to at
# most $\frac{n_k}{N}(B + \lVert u_k^{\text{honest}}\rVert)$. That stops *magnitude* attacks, not
# *direction*: a sign flip at honest scale ($-1\times$), or flipped labels, produce updates within the
# bound and pass; a norm proof bounds the damage but cannot say which way an update should point. The
# cell illustrates the bound on round 0 of the chapter's federation.

# %%
D0 = np.stack([plain_update(w0, X, y, 0, k) - w0 for k, (X, y) in enumerate(train)])
n0 = np.array(SIZES, dtype=float)
B = float(np.linalg.norm(D0, axis=1).max())                        # the largest honest norm
bad0 = D0.copy()
bad0[1] = -10.0 * D0[1]
clipped = bad0.copy()
clipped[1] *= min(1.0, B / np.linalg.norm(bad0[1]))
honest_mean = cf.weighted_mean(D0, n0)
shift_raw = np.linalg.norm(cf.weighted_mean(bad0, n0) - honest_mean)
shift_clip = np.linalg.norm(cf.weighted_mean(clipped, n0) - honest_mean)
bound = n0[1] / n0.sum() * (B + np.linalg.norm(D0[1]))
assert shift_clip <= bound + 1e-12 < shift_raw
print(f"round 0: the broken site moves the mean by {shift_raw:.3f}; clipped to B = {B:.3f} it moves it by "
      f"{shift_clip:.3f} (bound {bound:.3f})")
