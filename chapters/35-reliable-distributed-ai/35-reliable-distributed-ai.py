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
# # Chapter 35. Reliable and secure distributed AI
#
# Every earlier chapter trusted its machines to be honest when they answered at all: Chapter 2's
# crash faults stop a process, Chapter 18 restarts training from the last checkpoint. At scale that
# trust breaks in three places. A worker can send a wrong gradient (a silently corrupting core, a
# bug, or in federated learning a client that wants to poison the model), and one wrong vector moves
# the mean anywhere. A checkpoint can come back from storage damaged, truncated, swapped or
# deliberately edited, and a restart then resumes from garbage. And a data set trained on again and
# again under differential privacy leaks a little more with every run. This chapter builds a defence
# for each: Byzantine-robust aggregation (coordinate-wise median, trimmed mean, Krum and multi-Krum)
# against four attacks over the communicator, sharded checkpoints with a signed manifest of content
# hashes, and a privacy ledger that composes runs in Renyi DP and refuses the run that would exceed
# the budget, checked against Opacus.
#
# **Prerequisites:** Chapter 2 (Distributed-systems concepts: crash and Byzantine failure models, f of
# K faulty), Chapter 14 (Federated and decentralized learning: a server that averages updates, DP-SGD
# and its Renyi accountant), Chapter 18 (Elastic and fault-tolerant training: atomic checkpoints and
# restarts), and Chapter 4 for the communicator.

# %% tags=["parameters"]
K = 10  # smoke: 7
F = 3  # smoke: 2
N_SAMPLES = 4000  # smoke: 1500
STEPS = 150  # smoke: 40
SEEDS = [0, 1, 2]  # smoke: [0]
KS = [1, 2, 3, 5, 7, 9]  # smoke: [1, 3, 5]
P_TIME = 100_000  # smoke: 20_000
LR = 0.1
BATCH = 32
DELTA = 1e-5
EPS_BUDGET = 8.0
SEED = 0

# %% [markdown]
# `K` workers train together, `F` of them Byzantine; the rules are told to tolerate $f$ = `F`.
# `N_SAMPLES` generated examples (20 features, 10 classes) are split over the workers, `STEPS`
# steps of SGD with learning rate $\eta$ = `LR` and `BATCH` examples per worker per step run for each
# rule, attack and seed in `SEEDS`. `KS` are the world sizes of the checks, `P_TIME` the gradient length
# of Section 7's timings; `DELTA` and `EPS_BUDGET` are the $\delta$ and the $\varepsilon$ budget of the
# privacy ledger.
#
# ## 1. Motivation: which ceiling binds
#
# Here the ceiling is trust, and it falls as $K$ grows. If each machine independently misbehaves in a
# step with a small probability $p$, a job on $K$ machines sees at least one misbehaving machine with
# probability $1 - (1 - p)^K$, which tends to 1. Fleet studies of silent data corruption report
# defective cores at roughly one in a thousand machines, and a federation of phones should expect
# some clients to lie. One flipped exponent bit in one of $K$ gradients is enough to wreck the average:

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster, datasets, nn
from scaleoutai.collectives import block_bounds
from scaleoutai.infra import integrity
from scaleoutai.infra import reliability as rl
from scaleoutai.infra import robust_agg

for p in (1e-4, 1e-3):
    print(f"p = {p:g}: P(at least one bad machine) = " + ", ".join(
        f"K={k}: {1 - (1 - p) ** k:.3f}" for k in (8, 1024, 16384)))
rng = np.random.default_rng(SEED)
grads = rng.uniform(0.6, 0.9, size=(K, 5))  # K honest gradients, every entry in [0.6, 0.9]
bits = grads.view(np.uint64).copy()
bits[3, 2] ^= np.uint64(1) << np.uint64(62)  # the top exponent bit of one number of one worker flips
bad = bits.view(np.float64)
print(f"the flipped number: {grads[3, 2]:.3f} -> {bad[3, 2]:.3g}")
print(f"mean of the K gradients, coordinate 2:   {bad.mean(axis=0)[2]:.3g}")
print(f"median of the K gradients, coordinate 2: {rl.coordinate_median(bad)[2]:.3f}")
assert abs(bad.mean(axis=0)[2]) > 1e6 and 0.6 <= rl.coordinate_median(bad)[2] <= 0.9

# %% [markdown]
# ## 2. Core concepts
#
# **The Byzantine model** (Chapter 2): up to $f$ of the $K$ workers may send anything, know the honest
# gradients, and collude. The server is trusted. A rule is robust for $f$ if what $f$ attackers can do
# to the aggregate is bounded by the spread of the honest vectors, whatever they send.
#
# - **Coordinate-wise median** (Yin et al. 2018): per coordinate, the middle of the $K$ values. With
#   $f < K/2$ the middle is surrounded by honest values on both sides, so it stays inside the honest range.
# - **Trimmed mean** (Yin et al. 2018): per coordinate, drop the $f$ smallest and $f$ largest values and
#   average the $K - 2f$ left: also inside the honest range when $2f < K$, and less noisy than the median.
# - **Krum** (Blanchard et al. 2017): score each vector by the sum of its squared distances to its
#   $K - f - 2$ nearest other vectors and pick the lowest score; needs $K > 2f + 2$. Whatever the attackers
#   send, the choice lies within $\sqrt{K-f-2}\,\Delta$ of an honest vector, $\Delta$ the largest distance
#   between two honest vectors. **Multi-Krum** averages the $m$ best-scored vectors ($m = 1$ is Krum,
#   $m = K$ the mean), trading some robustness for less noise.
#
# The attacks are the standard ones: **sign flip** (send $-4$ times the honest mean), **Gaussian** (send
# large noise, $\sigma = 100$), **a little is enough** (ALIE, Baruch et al. 2019: send $\mu - z\,s$ per
# coordinate, the honest mean shifted by $z$ honest standard deviations, small enough to look honest) and
# **inner-product manipulation** (IPM, Xie et al. 2020: send $-\kappa$ times the honest mean, so that the
# aggregate's inner product with the true gradient shrinks or turns negative).
#
# The picture below puts $K - f$ honest 2-D gradients and $f$ attackers' vectors side by side, and marks
# where each rule lands.

# %%
def picture(ax, attack, K_=K, f=F, seed=SEED):
    r = np.random.default_rng(seed)
    honest = r.normal([1.0, 0.5], 0.4, size=(K_ - f, 2))
    byz = robust_agg.attack_vectors(attack, honest, f, r)
    V = np.concatenate([honest, byz])
    ax.scatter(*honest.T, c="tab:blue", s=20, label="honest")
    ax.scatter(*byz.T, c="tab:red", marker="x", s=60, label="attackers")
    for rule, mk in zip(rl.RULES, "o^sDP"):
        ax.scatter(*rl.aggregate(V, rule, f), marker=mk, s=90, facecolors="none", edgecolors="k", label=rule)
    ax.scatter(*honest.mean(axis=0), marker="*", s=150, c="tab:green", label="honest mean")
    ax.set(title=f"{attack}, K={K_}, f={f}")


fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
for ax, attack in zip(axes, robust_agg.ATTACKS):
    picture(ax, attack)
axes[0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Sign flip drags the mean to the attackers' side while the robust rules stay with the honest cloud;
# ALIE and IPM hide close to it, which is their point.
#
# **Integrity.** A sha256 digest identifies the bytes of a shard: any change of any bit changes it.
# A digest alone does not stop an attacker who can write both the shard and the list of digests; an
# HMAC (a hash keyed by a secret that the storage never sees) over the manifest does. The manifest is
# written last and atomically (Chapter 18), so it is also the commit point of a sharded checkpoint.
#
# **Privacy across runs.** Renyi DP of order $\lambda$ (we write $\lambda$ for the Renyi order, since
# $\alpha$ is the per-message latency here) adds up over steps and over runs on the same data; the
# conversion to $(\varepsilon, \delta)$ happens once, at the end, which costs far less than adding the
# $\varepsilon$ of each run.
#
# ## 3. The distribution and communication pattern
#
# With a trusted server (rank 0), each worker sends its $P$-number gradient to the server, which stacks
# the $K$ vectors in rank order, applies the rule, and sends the aggregate back: $K - 1$ messages in and
# $K - 1$ out at the server, one each way elsewhere, as for a plain parameter server (Chapter 11). The
# robust rule only changes the server's arithmetic: $O(K P)$ for the mean, $O(K P \log K)$ for the
# median and the trimmed mean (a sort per coordinate), $O(K^2 P)$ for Krum's pairwise distances.
# Without a server, $K - 1$ pairwise exchanges give every rank all $K$ vectors and each applies the rule
# itself; Section 6 shows what an attacker can do to that. The timeline traces one step of each.

# %%
net = cluster.Network(alpha=1e-4, beta=1e-8)
P_DEMO = 10_000
V_demo = np.random.default_rng(SEED).standard_normal((K, P_DEMO))
fig, axes = plt.subplots(1, 2, figsize=(14, 3.5))
for ax, root, name in ((axes[0], 0, "server on rank 0"), (axes[1], None, "no server (pairwise exchange)")):
    traced = cluster.run(lambda c: rl.robust_aggregate(c, V_demo[c.rank], "krum", F, root=root), K, network=net,
                         trace=True, timeout=60)
    cluster.plot_timeline(traced, ax=ax, title=f"one aggregation, {name}")
    sent = [s.messages_sent for s in traced.stats]
    print(f"{name}: messages sent per rank {sent}, simulated time {traced.sim_time * 1e3:.2f} ms")
    assert sent == ([K - 1] + [1] * (K - 1) if root == 0 else [K - 1] * K)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# **The rules.** Each takes the $(K, P)$ stack, computes in float64 and returns the input's dtype; an
# entry that is not a finite number is read as $+\infty$, so it is trimmed like any outlier.

# %%
from scaleoutai.notebooks import show

show(robust_agg.coordinate_median, robust_agg.trimmed_mean, robust_agg.krum_scores, robust_agg.multi_krum)

# %% [markdown]
# **Over the communicator.** `robust_aggregate` is the server step of Section 3; `train_byzantine` is
# data-parallel SGD around it, where the attacker ranks are omniscient: they read every honest shard,
# recompute the honest gradients and send their row of the attack.

# %%
show(rl.robust_aggregate, rl.train_byzantine)

# %% [markdown]
# The checks: for every $K$ in `KS`, every rule and every $f$ where the rule is defined, every rank's
# aggregate over the communicator (server and serverless) equals the rule applied on one machine;
# under each attack, median and trimmed mean stay in the honest range and Krum within its bound.

# %%
check = np.random.default_rng(SEED + 1)
runs = 0
for K_ in KS:
    for rule in rl.RULES:
        limit = {"mean": K_ - 1, "median": (K_ - 1) // 2, "trimmed_mean": (K_ - 1) // 2}.get(rule, (K_ - 3) // 2)
        for f in range(limit + 1):
            V = check.standard_normal((K_, 9))
            want = rl.aggregate(V, rule, f)
            for root in (0, None):
                res = cluster.run(lambda c: rl.robust_aggregate(c, V[c.rank], rule, f, root=root), K_, timeout=30)
                assert all(np.array_equal(v, want) for v in res.values), (K_, rule, f, root)
                runs += 1
for attack in robust_agg.ATTACKS:
    for K_ in range(3, 10):
        f = (K_ - 3) // 2
        honest = check.standard_normal((K_ - f, 6))
        V = np.concatenate([honest, robust_agg.attack_vectors(attack, honest, f, check)])
        for rule in ("median", "trimmed_mean"):
            got = rl.aggregate(V, rule, f)
            assert np.all((honest.min(0) - 1e-12 <= got) & (got <= honest.max(0) + 1e-12))
        diam = max(np.linalg.norm(a - b) for a in honest for b in honest)
        assert np.linalg.norm(honest - rl.krum(V, f), axis=1).min() <= np.sqrt(K_ - f - 2) * diam + 1e-9
print(f"{runs} distributed aggregations equal the one-machine rules; the bounds hold under all four attacks")

# %% [markdown]
# **Training under attack.** $K$ workers hold uneven shards of a 10-class problem and train a small MLP
# ($P$ parameters) with each rule; the last $f$ ranks attack. First the distributed run must equal the
# one-machine reference bit for bit, then the curves: test accuracy against the step, one panel per
# attack, the mean over the seeds with the band from lowest to highest.

# %%
X_all, y_all = datasets.classification(N_SAMPLES + 2000, 20, classes=10, separation=3.0, seed=SEED)
X, y, X_test, y_test = X_all[:N_SAMPLES], y_all[:N_SAMPLES], X_all[N_SAMPLES:], y_all[N_SAMPLES:]
shards = [(X[lo:hi], y[lo:hi]) for lo, hi in block_bounds(N_SAMPLES - 7, K)]  # 7 rows short: uneven shards
like = nn.mlp_init([20, 32, 10], seed=SEED)
w0 = nn.flatten(like)
attackers = tuple(range(K - F, K))
opts = dict(lr=LR, f=F, attackers=attackers, batch_size=BATCH)
for rule, attack in (("krum", "alie"), ("trimmed_mean", "sign_flip"), ("median", "ipm")):
    want = rl.reference_byzantine_training(w0, like, shards, 5, rule=rule, attack=attack, seed=SEED, **opts)
    got, _ = rl.run_byzantine(w0, like, shards, steps=5, rule=rule, attack=attack, seed=SEED, **opts)
    assert np.array_equal(got, want)
print(f"P = {w0.size} parameters; train_byzantine over K = {K} ranks equals the reference bit for bit")

every = max(1, STEPS // 15)
ATTACK_LIST = ["none"] + list(robust_agg.ATTACKS)
curves = {}  # (attack, rule) -> (seeds, checkpoints) test accuracy
t0 = time.perf_counter()
for attack in ATTACK_LIST:
    for rule in rl.RULES:
        rows = []
        for s in SEEDS:
            hist = rl.reference_byzantine_training(w0, like, shards, STEPS, rule=rule, seed=s,
                                                   attack=attack, **opts)
            rows.append([rl.accuracy(w, like, X_test, y_test) for w in hist[::every]])
        curves[attack, rule] = np.array(rows)
train_seconds = time.perf_counter() - t0
xs = np.arange(0, STEPS + 1, every)
fig, axes = plt.subplots(1, len(ATTACK_LIST), figsize=(19, 3.6), sharey=True)
for ax, attack in zip(axes, ATTACK_LIST):
    for rule in rl.RULES:
        c = curves[attack, rule]
        ax.plot(xs, c.mean(0), label=rule)
        ax.fill_between(xs, c.min(0), c.max(0), alpha=0.2)
    ax.set(title=f"attack: {attack}", xlabel="step")
axes[0].set_ylabel("test accuracy")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
final = {k: float(v[:, -1].mean()) for k, v in curves.items()}
print(f"{len(curves) * len(SEEDS)} runs of {STEPS} steps in {train_seconds:.1f} s; final test accuracy:")
print(f"{'attack':>10} " + " ".join(f"{r:>12}" for r in rl.RULES))
for attack in ATTACK_LIST:
    print(f"{attack:>10} " + " ".join(f"{final[attack, r]:>12.3f}" for r in rl.RULES))

# %% [markdown]
# Read the table by columns. The mean falls to the loud attacks: sign flip with $f$ of $K$ reverses its
# step and large noise swamps it; the quiet attacks (ALIE, IPM) move it little here, since they are built
# to slip past the robust rules rather than to beat a mean. Median and trimmed mean shrug off the noise but
# lose accuracy to the attacks that all push one way (sign flip, IPM): $f$ values on one side shift the
# middle of every coordinate. Krum is unmoved by loud attacks and is the most fragile to IPM: the $f$
# attackers send the **same** small vector, so their distances to each other are zero, their Krum scores
# the lowest, and Krum picks an attacker every step. ALIE costs little on this easy problem; its damage
# shows where the honest gradients' spread is large next to their mean, as in deep networks. No rule
# wins every column, which is why Section 9's open problems exist.

# %%
assert final["sign_flip", "mean"] < 0.3 < final["sign_flip", "krum"]
assert final["ipm", "krum"] < final["ipm", "trimmed_mean"]
assert min(final["none", r] for r in rl.RULES) > 0.5

# %% [markdown]
# **Checkpoint integrity.** `write_sharded_checkpoint` writes every shard atomically and then the
# signed manifest; `load_sharded_checkpoint` checks the manifest's HMAC, then every shard's size and
# sha256. Over the communicator, `save_sharded` has rank $r$ write shard $r$ and report its digest to
# rank 0, which commits the manifest once every shard is on disk.

# %%
show(integrity.write_sharded_checkpoint, integrity.read_manifest, integrity._verified_bytes, integrity.save_sharded)

# %%
import os
import tempfile

KEY = os.urandom(32)  # kept apart from the storage, e.g. in the job's secret store
ckpt_root = tempfile.mkdtemp(prefix="ch35-ckpt-")
w_final = rl.reference_byzantine_training(w0, like, shards, 3, rule="median", seed=SEED, **opts)[-1]
parts = np.array_split(w_final, K)  # the model sharded over K ranks
cluster.run(lambda c: rl.save_sharded(c, rl.step_folder(ckpt_root, 100), parts[c.rank], KEY, {"step": 100}), K,
            timeout=60)
back = cluster.run(lambda c: rl.load_sharded(c, rl.step_folder(ckpt_root, 100), KEY), K, timeout=60)
assert all(np.array_equal(back.values[r], parts[r]) for r in range(K))
manifest = (rl.step_folder(ckpt_root, 100) / "MANIFEST.json").read_text()
print(f"{K} shards written by {K} ranks and verified on load; the manifest starts:\n" + manifest[:400])

# %% [markdown]
# **The privacy ledger.** One data set, several DP-SGD runs: a pretraining run, a fine-tuning run and a
# hyperparameter sweep. The per-step RDP of the subsampled Gaussian is the formula of Chapter 14,
# implemented again here (parts of the library never import each other) and checked against it.

# %%
show(rl.rdp_subsampled_gaussian, rl.PrivacyLedger.charge)

# %%
from scaleoutai.ml import privacy as pv

for q, sigma in ((0.01, 1.0), (0.05, 0.8), (0.2, 2.0)):
    for lam in (2, 16, 128):
        ours, theirs = rl.rdp_subsampled_gaussian(q, sigma, lam), pv.rdp_step(q, sigma, lam)
        assert abs(ours - theirs) <= 1e-12 * theirs, (q, sigma, lam)
RUNS = [("pretrain", 256 / 60_000, 0.9, 10_000), ("finetune", 512 / 60_000, 1.0, 3000)]
RUNS += [(f"sweep, trial {i}", 256 / 60_000, 0.7, 4000) for i in range(1, 5)]  # (name, q, sigma, steps)
ledger = rl.PrivacyLedger(EPS_BUDGET, DELTA)
for name, q, sigma, steps in RUNS:
    try:
        eps = ledger.charge(name, q, sigma, steps)
        print(f"charged {name:>15}: epsilon so far {eps:.3f} of {EPS_BUDGET:g} (adding epsilons would say "
              f"{ledger.naive_spent():.3f})")
    except rl.BudgetExceeded as err:
        print(f"refused {name:>15}: {err}")
refused = [r[0] for r in RUNS if r[0] not in [x["name"] for x in ledger.runs]]
assert ledger.spent() <= EPS_BUDGET and refused, "the budget must run out during the sweep"

# %% [markdown]
# ## 5. The same task with a production library: Opacus and the robust rules elsewhere
#
# **Opacus's RDP accountant** keeps a history of (noise multiplier, sample rate, steps) and composes it
# exactly as the ledger does. Given the same runs and our integer orders, its $\varepsilon$ must equal
# ours; with its own default orders (fractional ones included) it finds a slightly smaller one.

# %%
import warnings

from opacus.accountants import RDPAccountant

acc = RDPAccountant()
acc.history = [(r["sigma"], r["q"], r["steps"]) for r in ledger.runs]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the "optimal order is the largest alpha" notice
    eps_opacus = acc.get_epsilon(DELTA, alphas=list(rl.ORDERS))
    eps_opacus_default = acc.get_epsilon(DELTA)
assert abs(ledger.spent() - eps_opacus) <= 1e-6 * eps_opacus
print(f"{len(ledger.runs)} runs: ledger epsilon {ledger.spent():.6f}, Opacus {eps_opacus:.6f} at the same orders "
      f"({eps_opacus_default:.4f} with its default orders)")

# %% [markdown]
# **A robust aggregator from a library.** Flower ships `FedMedian`, `FedTrimmedAvg` and `Krum`
# strategies, but Flower does not install into this course's pinned environment (Chapter 14 says why),
# and the research suites (Blades, ByzPy) are not part of it either; the cell checks that none of them is
# importable. So our rules stand alone, and the check below holds them against the two building blocks
# production code would use: `torch.median` (the lower middle value, equal to ours for odd $K$) and
# `scipy.stats.trim_mean` (which cuts `int(p K)` values from each end: $p = (f + 1/2)/K$ cuts exactly $f$).

# %%
import importlib.util

import torch
from scipy.stats import trim_mean

missing = {name: importlib.util.find_spec(name) is None for name in ("flwr", "blades", "byzpy")}
print("not installed in the pinned environment:", [n for n, gone in missing.items() if gone])
check = np.random.default_rng(SEED + 2)
for K_ in (1, 3, 5, 7, 9):
    V = check.standard_normal((K_, 1000))
    assert np.array_equal(rl.coordinate_median(V), torch.median(torch.tensor(V), dim=0).values.numpy())
    for f in range((K_ - 1) // 2 + 1):
        assert np.allclose(rl.trimmed_mean(V, f), trim_mean(V, (f + 0.5) / K_, axis=0), rtol=0, atol=1e-12)
print("median == torch.median (odd K) and trimmed mean == scipy.stats.trim_mean for K = 1, 3, 5, 7, 9")

# %% [markdown]
# The manifest's digests are plain sha256 of the shard files, so the standard tool can check them too.

# %%
import hashlib
import json
import shutil
import subprocess

folder = rl.step_folder(ckpt_root, 100)
entries = json.loads((folder / "MANIFEST.json").read_text())["shards"]
if shutil.which("sha256sum"):
    out = subprocess.run(["sha256sum"] + [e["name"] for e in entries], cwd=folder, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0::2] == [e["sha256"] for e in entries]
    print(f"sha256sum agrees with the manifest on all {len(entries)} shards")
else:
    print("skip: no sha256sum program here; hashlib's digests are the same function")
assert hashlib.sha256((folder / entries[0]["name"]).read_bytes()).hexdigest() == entries[0]["sha256"]

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **More attackers than the rule assumes.** Every guarantee holds for at most $f$ attackers. The sweep
# below keeps the honest vectors fixed, turns more and more workers into sign-flip attackers, and
# measures each rule's distance to the honest mean (the rules are told $f$ = `F`). The mean breaks at
# the first attacker; the trimmed mean and multi-Krum as soon as the attackers outnumber the $f$ they
# leave out; the median and Krum, which never average, hold against this attack until about $K/2$.

# %%
sweep = np.random.default_rng(SEED + 3)
honest_all = sweep.standard_normal((K, 50)) * 0.3 + 1.0
dist = {rule: [] for rule in rl.RULES}
for n_byz in range(K):
    honest = honest_all[:K - n_byz]
    V = np.concatenate([honest, robust_agg.sign_flip(honest, n_byz, sweep, scale=20.0)])
    for rule in rl.RULES:
        dist[rule].append(np.linalg.norm(rl.aggregate(V, rule, F) - honest.mean(axis=0)))
plt.figure(figsize=(7, 3.5))
for rule, d in dist.items():
    plt.semilogy(range(K), np.maximum(d, 1e-3), marker="o", label=rule)
plt.axvline(F, ls=":", c="k")
plt.axvline(K / 2, ls="--", c="gray")
plt.xlabel("number of attackers (dotted: f assumed, dashed: K/2)")
plt.ylabel("distance to the honest mean")
plt.legend(fontsize=8)
plt.show()
assert dist["median"][F] < 5 < 50 < dist["median"][K - 1] and dist["mean"][1] > 10
assert dist["trimmed_mean"][F] < 5 < 20 < dist["trimmed_mean"][F + 1]

# %% [markdown]
# **Equivocation without a server.** In the serverless exchange an attacker can send a different lie to
# each peer. The honest ranks then aggregate different stacks and end with different models (a
# consensus problem, Chapter 2), although each one's median still lies in the honest range.

# %%
liar, d = K - 1, 4
honest_v = np.random.default_rng(SEED + 4).standard_normal((K, d))


def equivocating_step(comm):
    r = comm.rank
    got = [None] * comm.size
    got[r] = honest_v[r]
    for s in range(1, comm.size):
        dst, src = (r + s) % comm.size, (r - s) % comm.size
        mine = np.full(d, 50.0 if dst % 2 else -50.0) if r == liar else honest_v[r]  # one lie per peer
        got[src] = comm.sendrecv(mine, dst, src)
    return rl.coordinate_median(np.stack(got))


outs = cluster.run(equivocating_step, K, timeout=30).values[:liar]
spread = max(np.abs(a - b).max() for a in outs for b in outs)
lo, hi = honest_v[:liar].min(0), honest_v[:liar].max(0)
assert spread > 0 and all(np.all((lo <= o) & (o <= hi)) for o in outs)
print(f"honest ranks disagree by up to {spread:.3f} per coordinate; each median is still in the honest range")

# %% [markdown]
# **A worker that crashes** is not Byzantine but still stops the server, which waits for every rank in
# turn: its receive raises `PeerCrashedError` and the step fails with the crashed rank named. Exercise 2
# makes the server treat a missing vector as one of the $f$.

# %%
try:
    cluster.run(lambda c: rl.robust_aggregate(c, V_demo[c.rank], "median", F), K,
                faults=cluster.Faults(crash={K - 1: 0}), timeout=30)
    raise AssertionError("the crash must surface")
except cluster.RankError as err:
    print("the step failed:", err.summary)
    assert "crashed" in err.summary

# %% [markdown]
# **Damaged checkpoints.** Each kind of damage below is done to a fresh copy of the checkpoint of
# Section 4, and each load must be refused with the shard named. The last one rewrites a shard *and*
# its digest in the manifest: only the HMAC catches it.

# %%
import io


def damaged(kind):
    dst = tempfile.mkdtemp(prefix="bad-", dir=ckpt_root)  # removed with ckpt_root at the end
    shutil.copytree(folder, dst, dirs_exist_ok=True)
    shard = lambda i: os.path.join(dst, integrity.shard_name(i))  # noqa: E731
    if kind == "bit flip":
        data = bytearray(open(shard(2), "rb").read())
        data[-3] ^= 0x10
        open(shard(2), "wb").write(bytes(data))
    elif kind == "truncated":
        data = open(shard(1), "rb").read()
        open(shard(1), "wb").write(data[:len(data) // 2])
    elif kind == "swapped":
        a, b = open(shard(0), "rb").read(), open(shard(5), "rb").read()
        open(shard(0), "wb").write(b)
        open(shard(5), "wb").write(a)
    elif kind == "forged":
        buf = io.BytesIO()
        np.save(buf, np.zeros_like(parts[4]))
        payload = buf.getvalue()
        open(shard(4), "wb").write(payload)
        m = json.loads(open(os.path.join(dst, "MANIFEST.json")).read())
        m["shards"][4].update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
        open(os.path.join(dst, "MANIFEST.json"), "w").write(json.dumps(m))
    return dst


for kind in ("bit flip", "truncated", "swapped", "forged"):
    try:
        rl.load_sharded_checkpoint(damaged(kind), KEY)
        raise AssertionError(f"a {kind} checkpoint was accepted")
    except rl.IntegrityError as err:
        print(f"{kind:>10}: refused: {str(err).split(': ', 1)[1]}")

# %% [markdown]
# **A crash during a save.** Rank 2 dies before it reports its digest: rank 0 never writes the manifest,
# the new step is never committed, and `latest_verified` falls back to step 100.

# %%
w_next = parts
try:
    cluster.run(lambda c: rl.save_sharded(c, rl.step_folder(ckpt_root, 200), w_next[c.rank], KEY, {"step": 200}), K,
                faults=cluster.Faults(crash={2: 0}), timeout=60)
    raise AssertionError("the crash must surface")
except cluster.RankError as err:
    print("save of step 200 failed:", err.summary)
step, loaded, meta, why = rl.latest_verified(ckpt_root, KEY)
assert step == 100 and meta == {"step": 100} and all(np.array_equal(a, b) for a, b in zip(loaded, parts))
print(f"restart from step {step}; refused newer: {why}")

# %% [markdown]
# **A ledger edited by hand.** The ledger is saved with an HMAC too; deleting a run from the file to
# free budget is caught on load.

# %%
ledger_path = os.path.join(ckpt_root, "ledger.json")
ledger.save(ledger_path, KEY)
data = json.loads(open(ledger_path).read())
data["runs"] = data["runs"][:1]
open(ledger_path, "w").write(json.dumps(data))
try:
    rl.PrivacyLedger.load(ledger_path, KEY)
    raise AssertionError("an edited ledger was accepted")
except rl.IntegrityError as err:
    print("refused:", err)

# %% [markdown]
# ## 7. Evaluation: the price of robustness
#
# **Server arithmetic.** Robust rules cost the server more than a mean: the median and the trimmed mean
# sort every coordinate, Krum computes $K^2$ distances of $P$ numbers. The measured times (median of 5)
# for $P$ = `P_TIME` numbers per gradient:

# %%
from scaleoutai import perf

ks = [4, 8, 16, 32]
times = {rule: [] for rule in rl.RULES}
for K_ in ks:
    V = np.random.default_rng(SEED).standard_normal((K_, P_TIME))
    for rule in rl.RULES:
        f = (K_ - 3) // 2
        times[rule].append(perf.measure(rl.aggregate, V, rule, f, warmup=1, repeats=5).median)
print(f"{'K':>4} " + " ".join(f"{r:>13}" for r in rl.RULES))
for i, K_ in enumerate(ks):
    print(f"{K_:>4} " + " ".join(f"{times[r][i] * 1e3:>10.1f} ms" for r in rl.RULES))
plt.figure(figsize=(6, 3.5))
for rule in rl.RULES:
    plt.loglog(ks, times[rule], marker="o", label=rule)
plt.xlabel("K")
plt.ylabel("server seconds per step")
plt.title(f"aggregation time, P = {P_TIME}")
plt.legend(fontsize=8)
plt.show()
growth = times["krum"][-1] / times["krum"][0]
print(f"Krum from K={ks[0]} to K={ks[-1]}: {growth:.1f}x (K^2 predicts {(ks[-1] / ks[0]) ** 2:.0f}x, "
      f"the mean {times['mean'][-1] / times['mean'][0]:.1f}x)")

# %% [markdown]
# **Accuracy without attackers** is the other price: the robust rules throw honest information away.
# From Section 4's curves, the accuracy each rule reaches with no attack, against the mean:

# %%
for rule in rl.RULES:
    print(f"{rule:>12}: {final['none', rule]:.3f} (mean: {final['none', 'mean']:.3f})")

# %% [markdown]
# **Bytes.** The server pattern moves $2(K-1)P$ numbers through the server per step and the serverless
# exchange $(K-1)P$ through every rank, with the server's link the bottleneck in the first case; the
# simulated step times with this chapter's network ($\alpha$ = 0.1 ms, $\beta$ = 10 ns per byte):

# %%
for K_ in KS:
    if K_ < 2:
        continue
    t = {}
    for root in (0, None):
        res = cluster.run(lambda c: rl.robust_aggregate(c, V_demo[c.rank % K], "median", 0, root=root), K_,
                          network=net, timeout=60)
        t[root] = res.sim_time
    print(f"K={K_}: server {t[0] * 1e3:.2f} ms, serverless {t[None] * 1e3:.2f} ms per step ({P_DEMO} float64)")

# %% [markdown]
# **Privacy.** Composition in RDP across runs against adding each run's $\varepsilon$, as runs of the
# sweep accumulate on the same data:

# %%
comp, naive = [], []
demo = rl.PrivacyLedger(1e9, DELTA)
for i in range(10):
    demo.charge(f"trial {i}", 256 / 60_000, 1.0, 2000)
    comp.append(demo.spent())
    naive.append(demo.naive_spent())
plt.figure(figsize=(6, 3.5))
plt.plot(range(1, 11), comp, marker="o", label="RDP composition (ledger)")
plt.plot(range(1, 11), naive, marker="s", label="sum of per-run epsilons")
plt.xlabel("runs on the same data")
plt.ylabel(f"epsilon at delta = {DELTA:g}")
plt.legend()
plt.show()
print(f"after 10 runs: {comp[-1]:.2f} by RDP composition, {naive[-1]:.2f} by adding epsilons")
assert comp[-1] < naive[-1] / 2

# %% [markdown]
# **Integrity.** Hashing costs one pass over the bytes; measured here against writing them:

# %%
blob = np.random.default_rng(SEED).standard_normal(4_000_000).tobytes()  # 32 MB
t_hash = perf.measure(lambda: hashlib.sha256(blob).hexdigest(), repeats=3).median
t_write = perf.measure(lambda: integrity.atomic_write(os.path.join(ckpt_root, "blob.bin"), blob), repeats=3).median
print(f"sha256: {len(blob) / t_hash / 1e6:.0f} MB/s; atomic write with fsync: {len(blob) / t_write / 1e6:.0f} MB/s "
      f"on this machine")
shutil.rmtree(ckpt_root)

# %% [markdown]
# ## 8. Exercises
#
# 1. **Bucketing.** Average random groups of $s$ workers before the robust rule (Karimireddy et al. 2022).
#    With $K = 10$ a bucket of $s \ge 2$ needs $f \le 2$ (a majority of honest buckets): rerun Section 4's
#    curves with $f = 2$, $s = 2$ and the Dirichlet label skew of Chapter 14. Which rule gains most?
# 2. **Crashes as Byzantine.** Make the server of `robust_aggregate` catch `PeerCrashedError`, aggregate the
#    vectors that arrived, and count each missing one as one of the $f$. What $f$ is left for attackers?
# 3. **Krum's blind spot.** Show with a 2-D picture why $f$ identical vectors win Krum, then write a defence
#    (for example, reject duplicates, or use centered clipping) and rerun the IPM column.
# 4. **Stronger ALIE.** Sweep $z$ from 0.5 to 5 and plot the final accuracy per rule. Does any rule break,
#    and for which $z$ does Krum pick the attacker's vector (derive the bound)?
# 5. **Ledger policy.** Given a budget $\varepsilon = 8$ and a sweep of 20 trials, choose $\sigma$ so that
#    every trial fits (`max_steps`, `epsilon_with`). Compare with splitting the budget evenly in $\varepsilon$.
# 6. **Lab 35** (`labs/lab35-robust-aggregation`): a rule this chapter does not build, the weighted
#    geometric median by smoothed Weiszfeld steps, run as a server protocol in which workers send only
#    weighted sums (so it could sit behind Chapter 14's secure aggregation), graded against attackers the
#    grader controls and against the breakdown bound you derive.
#
# ## 9. Research directions
#
# - **Robustness with heterogeneous data.** The rules assume honest gradients that agree; with non-IID
#   workers an honest minority looks like an attacker, and the rules both lose accuracy and let biased
#   attacks through. Momentum, bucketing and clipping restore guarantees under assumptions that are
#   still being weakened.
#   - Karimireddy, He and Jaggi, "Byzantine-Robust Learning on Heterogeneous Datasets via Bucketing",
#     ICLR, 2022. Random bucketing turns a rule for IID workers into one for heterogeneous workers.
#   - Karimireddy, He and Jaggi, "Learning from History for Byzantine Robust Optimization", ICML, 2021.
#     Centered clipping with worker momentum, and why memoryless rules fail against time-coupled attacks.
#   - Allouah, Farhadkhani, Guerraoui, Gupta, Pinot and Stephan, "Fixing by Mixing: A Recipe for Optimal
#     Byzantine ML under Heterogeneity", AISTATS, 2023. Averaging each input with its nearest neighbours
#     before any robust rule makes that rule optimally resilient under heterogeneous data.
# - **Attacks that stay inside the honest spread.** Every rule here bounds the damage by the honest
#   spread, so attacks that hide inside it accumulate bias. Tight lower bounds and defences in high
#   dimension are open.
#   - Baruch, Baruch and Goldberg, "A Little Is Enough: Circumventing Defenses For Distributed
#     Learning", NeurIPS, 2019. The ALIE attack against median, trimmed mean and Krum.
#   - Xie, Koyejo and Gupta, "Fall of Empires: Breaking Byzantine-tolerant SGD by Inner Product
#     Manipulation", UAI, 2020. The IPM attack and why Krum picks colluding vectors.
#   - El Mhamdi, Guerraoui and Rouault, "The Hidden Vulnerability of Distributed Learning in Byzantium",
#     ICML, 2018. Bulyan: a rule on top of Krum and the trimmed mean against high-dimensional leeway.
# - **Silent data corruption in the fleet.** Defective cores compute wrong answers without an error,
#   and the rules above were not designed for them; detection by replicated computation or checksums of
#   gradients at acceptable cost is active work.
#   - Hochschild, Turner, Mogul, Govindaraju, Ranganathan, Culler and Vahdat, "Cores that don't count",
#     HotOS, 2021. Mercurial cores at fleet scale.
#   - Blanchard, El Mhamdi, Guerraoui and Stainer, "Machine Learning with Adversaries: Byzantine Tolerant
#     Gradient Descent", NeurIPS, 2017. Krum and the first formal robustness condition for SGD.
#   - He et al., "Understanding and Mitigating Hardware Failures in Deep Learning Training Systems", ISCA,
#     2023. Fault injection into an accelerator design shows how logic faults propagate into training;
#     lightweight software checks of a few dozen lines mitigate the harmful ones.
#   - Dubey et al., "The Llama 3 Herd of Models", arXiv preprint, 2024. Its infrastructure section counts
#     the interruptions of a pretraining run on about 16,000 GPUs by root cause, and how the team kept the
#     effective training time high despite them.
# - **Tight privacy accounting across many runs.** RDP with integer orders is loose for few steps, and
#   hyperparameter search on private data leaks through the choice of the best run itself.
#   - Balle, Barthe, Gaboardi, Hsu and Sato, "Hypothesis Testing Interpretations and Renyi Differential
#     Privacy", AISTATS, 2020. The RDP-to-$(\varepsilon, \delta)$ conversion the ledger and Opacus use.
#   - Gopi, Lee and Wutschitz, "Numerical Composition of Differential Privacy", NeurIPS, 2021. The PRV
#     accountant, near-exact composition of many steps.
#   - Papernot and Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR, 2022. What the
#     choice of the best of many private runs costs.
# - **Integrity of the model supply chain.** Hashes and signatures prove that bytes were not changed,
#   not that they were trained honestly; attesting what data and code produced a checkpoint is open.
#   - Gu, Dolan-Gavitt and Garg, "BadNets: Identifying Vulnerabilities in the Machine Learning Model
#     Supply Chain", arXiv preprint, 2017. Backdoored models that pass every accuracy check.
#   - Carlini et al., "Poisoning Web-Scale Training Datasets is Practical", arXiv preprint, 2023. Buying
#     expired domains listed in URL-based datasets, or editing pages just before a snapshot, would poison
#     popular training sets cheaply; content hashes are the first defence.
#
# ## What's next
#
# Part VIII puts the pieces together, starting with Chapter 36 (Web-scale text processing and
# distributed RAG), which composes Chapters 6, 8 and 25. Chapter 37 (Federated medical AI) reuses this
# chapter's robust aggregation and privacy ledger with Chapter 14's federated training.
