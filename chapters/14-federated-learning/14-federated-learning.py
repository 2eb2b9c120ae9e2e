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
# # Chapter 14. Federated and decentralized learning
#
# Every chapter of Part III so far moved data or gradients freely between machines that one operator
# owns. Federated learning drops that assumption: the data stays where it was produced (phones,
# hospitals, banks), and only models travel. A server sends the model to the clients, each trains on
# its own examples for a while, and the server averages what comes back, weighted by how many
# examples each client holds. This chapter builds FedAvg and FedProx on the communicator, measures
# what label skew across clients does to them, replaces the server by gossip between neighbours,
# adds differential privacy twice (per example with DP-SGD, then per client with DP-FedAvg, with one
# accountant that agrees with Opacus), and hides each client's update from the server with double
# masks whose seeds are Shamir-shared, so that the sum stays exact when clients drop out, even
# during the recovery itself.
#
# **Prerequisites:** Chapter 10 (Distributed optimization: synchronous and local SGD, the averaging
# of models), Chapter 11 (Parameter servers: a server that owns the model and clients that push to it),
# and Chapter 4 for the communicator. Background: softmax regression and an MLP trained with SGD.

# %% tags=["parameters"]
N_SAMPLES = 6000  # smoke: 2400
CLIENTS = 20  # smoke: 10
ROUNDS = 20  # smoke: 6
LOCAL_EPOCHS = 5  # smoke: 3
DIRICHLET = [100.0, 1.0, 0.1]
MU = 1.0
P_DROP = 0.3
KS = [1, 2, 3, 5, 8, 12]  # smoke: [1, 2, 3, 5, 8]
GOSSIP_KS = [16, 36, 64]  # smoke: [16, 36]
GOSSIP_STEPS = 80  # smoke: 40
DP_STEPS = 600  # smoke: 100
SIGMAS = [0.7, 1.0, 2.0]
DP_CLIENTS = [50, 200]
DP_ROUNDS = 40  # smoke: 15
Q_CLIENTS = 0.1
CLIENT_SIGMAS = [0.5, 1.0, 2.0, 4.0]
RAY_CLIENTS = 4  # smoke: 2
SEED = 0

# %% [markdown]
# `N_SAMPLES` generated examples (20 features, 10 classes) are spread over `CLIENTS` clients;
# `ROUNDS` rounds of FedAvg run `LOCAL_EPOCHS` local epochs each. `DIRICHLET` are the label-skew
# concentrations $\alpha_{\mathrm{Dir}}$ (large: every client sees every class; small: each sees a
# few), `MU` the FedProx coefficient $\mu$, `P_DROP` the chance that a client fails to report in a
# round, `KS` the world sizes of the checks, `GOSSIP_KS` the graph sizes for gossip, `DP_STEPS` the
# DP-SGD steps and `SIGMAS` its noise multipliers $\sigma$; `DP_CLIENTS` are the federations of
# DP-FedAvg, which runs `DP_ROUNDS` rounds sampling each client with probability `Q_CLIENTS` under the
# noise multipliers `CLIENT_SIGMAS`.
#
# ## 1. Motivation: which ceiling binds
#
# The binding ceiling is not compute or memory but permission and uplink. Medical records, keyboards'
# typed text and bank transactions may not leave their owner, by law or by contract, and even where
# they may, a billion phones hold far more than any link could carry. The model is small by comparison:
# moving it is the cheaper and often the only allowed direction.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, collectives, datasets, nn, perf
from scaleoutai.ml import dp_fedavg as dp
from scaleoutai.ml import federated as fd
from scaleoutai.ml import gossip as gs
from scaleoutai.ml import privacy as pv
from scaleoutai.ml import secure_agg as sa
from scaleoutai.ml import shamir as sh

phones, data_per_phone, model_params = 1e9, 1e9, 5e6  # a billion phones with 1 GB each; a 5 M-parameter model
print(f"all the data:          {phones * data_per_phone / 1e18:.1f} EB")
print(f"one model per client:  {model_params * 4 / 1e6:.0f} MB (float32), "
      f"{data_per_phone / (model_params * 4):.0f}x less than the client's data, and it may leave the phone")

# %% [markdown]
# ## 2. Core concepts
#
# **FedAvg** (McMahan et al. 2017). Client $k$ holds $n_k$ examples. In round $t$ the server sends $w_t$
# to the selected clients; each runs $E$ epochs of SGD from $w_t$ on its own data and returns $w_t^k$;
# the server sets $w_{t+1} = \sum_k n_k w_t^k / \sum_k n_k$ over the clients that reported. With
# $E = 1$ and one full-batch step this is synchronous SGD on the union of the data (Chapter 10); more
# local work per round saves rounds, at the price of **client drift** when the clients' data differ.
#
# **Non-IID clients.** Real clients do not see the same distribution. The standard benchmark draws, for
# each class, the shares of the clients from a Dirichlet($\alpha_{\mathrm{Dir}}$) distribution. Below,
# each row is a client and each column a class; the colour is the number of its examples.

# %%
X_all, y_all = datasets.classification(N_SAMPLES + 2000, 20, classes=10, separation=3.0, seed=SEED)
X, y, X_test, y_test = X_all[:N_SAMPLES], y_all[:N_SAMPLES], X_all[N_SAMPLES:], y_all[N_SAMPLES:]
splits = {a: fd.dirichlet_split(y, CLIENTS, a, seed=SEED + 1) for a in DIRICHLET}
for a, parts in splits.items():
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(N_SAMPLES))  # each example exactly once
fig, axes = plt.subplots(1, len(DIRICHLET), figsize=(12, 3.5))
for ax, (a, parts) in zip(axes, splits.items()):
    ax.imshow(fd.label_histogram(y, parts, 10), aspect="auto", cmap="viridis")
    ax.set(title=f"alpha_Dir = {a:g}", xlabel="class", ylabel="client")
plt.tight_layout()
plt.show()
sizes = [len(p) for p in splits[min(DIRICHLET)]]
print(f"alpha_Dir = {min(DIRICHLET):g}: client sizes from {min(sizes)} to {max(sizes)} examples")

# %% [markdown]
# **FedProx** (Li et al. 2020) adds $\frac{\mu}{2}\lVert v - w_t\rVert^2$ to each client's loss, so
# local steps are pulled back towards the global model and drift less. **Gossip** removes the server:
# each node averages with its neighbours through a doubly stochastic matrix $W$. **DP-SGD** bounds
# what one example can change by clipping its gradient and hides it with Gaussian noise: a guarantee
# per example, for a trainer that holds the pooled data. **DP-FedAvg** does the same per client:
# each client's whole model update is clipped, the noise is added to the sum, and the guarantee
# covers everything one client contributed. **Secure aggregation** lets the server learn the sum of
# the updates and nothing else, even when clients drop out of the protocol.
#
# ## 3. The distribution and communication pattern
#
# FedAvg is a star: per round the server sends $P$ numbers to each selected client and receives $P$
# numbers plus the count $n_k$ from each one that reports, so a round moves about $2P$ per client and
# never a training example. In the library, rank 0 is the server and clients $0..C-1$ live on ranks
# $1..K-1$, a contiguous block each (`block_range`); a rank trains its clients one after another, so
# $K-1 > C$ leaves some ranks idle and $K = 1$ runs everything on the server. The timeline shows two
# rounds with 4 client ranks: the model goes out, local training runs in parallel, the models come back.

# %%
like = nn.mlp_init([20, 32, 10], seed=SEED)
w0 = nn.flatten(like)
P = w0.size
shards = {a: [(X[p], y[p]) for p in parts] for a, parts in splits.items()}
iid, skew = max(DIRICHLET), min(DIRICHLET)
opts = dict(epochs=LOCAL_EPOCHS, lr=0.1, batch_size=32, seed=SEED)
traced = cluster.run(fd.train_fedavg, 5, args=(w0, like, shards[iid][:8]), kwargs=dict(rounds=2, **opts,
                     seconds_per_sample=2e-6), trace=True, network=cluster.Network(alpha=1e-3, beta=1e-8))
cluster.plot_timeline(traced, title="FedAvg, 2 rounds: rank 0 is the server, ranks 1-4 host 2 clients each")
plt.show()
print(f"P = {P} parameters; the server sent {traced.stats[0].bytes_sent} B = 2 rounds x 4 ranks x {P} x 8 B")
assert traced.stats[0].bytes_sent == 2 * 4 * P * 8

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `train_fedavg` is the whole protocol, one function per rank. Read the client branch first (receive
# $w_t$, train each of its clients that reports, send the rows $(k, n_k)$ and the models), then the
# server branch: it sends $w_t$ to every rank hosting a selected client, takes what arrives, treats a
# crashed rank as a rank whose clients never report, and aggregates in client order.

# %%
from scaleoutai.notebooks import show

show(fd.train_fedavg, fd.weighted_average, fd.client_update)

# %% [markdown]
# The check: for every $K$ in `KS` and for $K - 1$ larger than the number of clients, with dropout,
# the server's model equals the one-machine FedAvg bit for bit (the same sums in the same order); one
# full-batch local step per round equals synchronous SGD on the union of the data.

# %%
few = shards[skew][:6]
want, _ = fd.reference_fedavg(w0, like, few, 2, p_drop=P_DROP, **opts)
for K in KS + [len(few) + 3]:
    got, _, _ = fd.run_fedavg(w0, like, few, K, rounds=2, p_drop=P_DROP, **opts)
    assert np.array_equal(got, want), K
one, _, _ = fd.run_fedavg(w0, like, few, 3, rounds=1, epochs=1, lr=0.3, batch_size=0)
Xu, yu = np.concatenate([s[0] for s in few]), np.concatenate([s[1] for s in few])
logits, cache = nn.mlp_forward(like, Xu)
g = nn.flatten(nn.mlp_backward(like, cache, nn.softmax_cross_entropy(logits, yu)[1])[1])
assert np.allclose(one, w0 - 0.3 * g, rtol=0, atol=1e-12)
print(f"FedAvg equals the reference for K in {KS + [len(few) + 3]}; E = 1 full batch equals sync SGD")

# %% [markdown]
# **Label skew and FedProx.** The same rounds on the IID split and on the skewed ones, and FedProx on
# the most skewed. `spread` is $\sum_k n_k \lVert w_t^k - w_{t+1}\rVert^2 / \sum_k n_k$: how far the
# clients' models wander from their average, the drift that FedProx is designed to reduce.

# %%
curves, drift = {}, {}
t0 = time.perf_counter()
for a in DIRICHLET:
    _, hist = fd.reference_fedavg(w0, like, shards[a], ROUNDS, keep_models=True, **opts)
    curves[f"FedAvg, alpha_Dir = {a:g}"] = [fd.accuracy(h["w"], like, X_test, y_test) for h in hist]
    drift[f"FedAvg, alpha_Dir = {a:g}"] = [h["spread"] for h in hist]
_, hist = fd.reference_fedavg(w0, like, shards[skew], ROUNDS, keep_models=True, mu=MU, **opts)
curves[f"FedProx mu = {MU:g}, alpha_Dir = {skew:g}"] = [fd.accuracy(h["w"], like, X_test, y_test) for h in hist]
drift[f"FedProx mu = {MU:g}, alpha_Dir = {skew:g}"] = [h["spread"] for h in hist]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for name, acc in curves.items():
    axes[0].plot(range(1, ROUNDS + 1), acc, "o-", ms=3, label=name)
    axes[1].semilogy(range(1, ROUNDS + 1), drift[name], "o-", ms=3, label=name)
axes[0].set(xlabel="round", ylabel="test accuracy", title="accuracy per round")
axes[1].set(xlabel="round", ylabel="client spread", title="client drift")
axes[0].legend()
plt.tight_layout()
plt.show()
first = {n: round(c[0], 3) for n, c in curves.items()}
print(f"after round 1: {first}  ({time.perf_counter() - t0:.1f} s)")
prox, avg = f"FedProx mu = {MU:g}, alpha_Dir = {skew:g}", f"FedAvg, alpha_Dir = {skew:g}"
assert curves[f"FedAvg, alpha_Dir = {iid:g}"][0] > curves[avg][0]  # skew costs accuracy early
assert np.mean(drift[prox]) < 0.5 * np.mean(drift[avg])  # the proximal term halves the drift or better

# %% [markdown]
# Skew costs most in the first rounds, when each client pulls the model towards its own few classes;
# averaging over many clients repairs much of it later. The proximal term cuts the drift by a large
# factor, but on this problem it also slows progress: $\mu$ trades drift against local progress.
#
# **Gossip averaging.** `gossip_average` replaces the server by neighbours: one `sendrecv` with each
# neighbour per step, and the Metropolis weights $W_{ij} = 1/(1 + \max(d_i, d_j))$.

# %%
show(gs.gossip_average, gs.metropolis_weights)

# %% [markdown]
# Every rank's value equals the one-machine iteration $W^t x_0$, the mean is preserved, and the
# disagreement $\lVert X_t - \bar x\rVert / \lVert X_0 - \bar x\rVert$ falls at the rate $|\lambda_2|^t$,
# set by the spectral gap $1 - |\lambda_2(W)|$ (dashed lines: the prediction).

# %%
for K in (1, 2, 3, 5, 8):
    X0 = np.random.default_rng(K).standard_normal((K, 4))
    for name in ("ring", "torus", "complete"):
        got, _ = gs.run_gossip(X0, gs.topology(name, K), 10)
        assert np.array_equal(got, gs.reference_gossip(X0, gs.topology(name, K), 10)), (name, K)
fig, ax = plt.subplots(figsize=(8, 4.5))
rates = []
for ci, name in enumerate(("ring", "torus", "complete")):
    for li, K in enumerate(GOSSIP_KS):
        nb = gs.topology(name, K)
        lam = gs.second_eigenvalue(gs.metropolis_weights(nb))
        X0 = np.random.default_rng(0).standard_normal((K, 16))
        path, _ = gs.run_gossip(X0, nb, GOSSIP_STEPS, trajectory=True)
        err = np.array([gs.consensus_error(Xt, X0) for Xt in path])
        t = np.arange(1, GOSSIP_STEPS + 1)
        assert np.all(err <= lam ** t * (1 + 1e-9) + 1e-12) and np.allclose(path[-1].mean(0), X0.mean(0))
        keep = err > 1e-13
        ax.semilogy(t[keep], err[keep], color=f"C{ci}", ls=["-", "-.", ":"][li], label=f"{name}, K = {K}")
        ax.semilogy(t, lam ** t, color=f"C{ci}", ls="--", lw=0.7)
        late = slice(GOSSIP_STEPS // 2, GOSSIP_STEPS)
        measured = np.exp(np.polyfit(t[late], np.log(err[late]), 1)[0]) if keep[late].all() else np.nan
        rates.append((name, K, 1 - lam, lam, measured))
ax.set(xlabel="gossip step t", ylabel="disagreement left", ylim=(1e-13, 2), title="gossip: measured vs |lambda_2|^t")
ax.legend(fontsize=7, ncol=2)
plt.show()
print(f"{'graph':>9} {'K':>3} {'gap':>7} {'|lambda_2|':>10} {'measured rate':>13}  (nan: exact to 1e-13 early)")
for name, K, gap, lam, measured in rates:
    print(f"{name:>9} {K:>3} {gap:>7.4f} {lam:>10.4f} {measured:>13.4f}")
    if name == "ring":
        assert abs(measured - lam) < 0.02  # the slowest mode dominates: rate = |lambda_2|

# %% [markdown]
# A ring's gap shrinks as $1/K^2$, so its rounds to a given accuracy grow as $K^2$; a torus's as $1/K$;
# the complete graph mixes in one step, but every node talks to all $K - 1$ others.
#
# **DP-SGD.** The gradient of each example is clipped to norm $C$, the clipped gradients are summed,
# noise of standard deviation $\sigma C$ is added once, and the sum is divided by the expected batch.
# The accountant adds the Renyi divergence of each step (integer orders $\alpha_{\mathrm{R}}$ of the
# Poisson-subsampled Gaussian mechanism) and converts to $(\varepsilon, \delta)$.

# %%
show(pv.clip_per_example, pv.dp_sgd_gradient, pv.rdp_step)

# %%
DELTA = 1e-5
X_dp, y_dp = X, y
q = 64 / len(X_dp)  # expected batch of 64
steps_grid = np.unique(np.geomspace(10, 10 * DP_STEPS, 8).astype(int))
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for s in SIGMAS:
    axes[0].plot(steps_grid, [pv.epsilon(q, s, T, DELTA) for T in steps_grid], "o-", ms=3, label=f"sigma = {s:g}")
axes[0].set(xscale="log", yscale="log", xlabel="steps", ylabel="epsilon", title=f"epsilon at delta = {DELTA:g}, q = {q:.4f}")
axes[0].legend()
small = nn.mlp_init([20, 10], seed=SEED)
acc_of = lambda p: float(np.mean(np.argmax(nn.mlp_forward(p, X_test)[0], axis=1) == y_test))  # noqa: E731
points = []
for s in [0.5] + SIGMAS + [4.0]:
    trained = pv.train_dp_sgd(small, X_dp, y_dp, C=1.0, sigma=s, q=q, steps=DP_STEPS, lr=0.5, seed=SEED)
    points.append((pv.epsilon(q, s, DP_STEPS, DELTA), acc_of(trained)))
clean = pv.train_dp_sgd(small, X_dp, y_dp, C=1e6, sigma=0.0, q=q, steps=DP_STEPS, lr=0.5, seed=SEED)
axes[1].plot(*zip(*points), "o-", label="DP-SGD, C = 1")
axes[1].axhline(acc_of(clean), color="k", ls="--", label="no clipping, no noise")
axes[1].set(xscale="log", xlabel="epsilon", ylabel="test accuracy", title=f"{DP_STEPS} steps of softmax regression")
axes[1].legend()
plt.tight_layout()
plt.show()
print("(epsilon, accuracy):", [(round(e, 2), round(a, 3)) for e, a in points])
assert points[0][0] > points[-1][0] and acc_of(clean) >= points[-1][1] - 0.01

# %% [markdown]
# That is **central** DP: one trainer holds every example of the pooled data and protects each one.
# It says nothing about a client that holds hundreds of examples, and a federation's server never
# holds the examples at all.
#
# **Client-level DP: DP-FedAvg** (McMahan et al. 2018). The unit to protect is the client, with all
# its data. In round $t$ each of the $N$ clients is sampled independently with probability $q$; each
# sampled client $k \in S_t$ trains from $w_t$ as in FedAvg and clips its model delta
# $\Delta_k = w_t^k - w_t$ to norm $C$ before it leaves; the server adds the noise once, to the sum,
# and divides by the expected number of clients $qN$, a fixed denominator (one that counted the
# clients who took part would itself depend on who took part):
#
# $$w_{t+1} = w_t + \frac{1}{qN}\Big(\sum_{k \in S_t} \Delta_k \min\big(1, \tfrac{C}{\lVert \Delta_k\rVert}\big)
#   + \mathcal{N}(0, \sigma^2 C^2 I)\Big).$$
#
# The invariant: adding or removing one client moves the sum by at most $C$, whatever its data. Each
# round is then the subsampled Gaussian mechanism of a DP-SGD step with clients in place of examples,
# so the same accountant gives each client's $(\varepsilon, \delta)$, with $q$ the client sampling
# rate and the rounds as steps.

# %%
show(dp.train_dp_fedavg, dp.clip_update, dp.noisy_sum_update)

# %% [markdown]
# The checks: with $q = 1$, $C = \infty$ and $\sigma = 0$ a round is FedAvg with equal client weights
# and the denominator $N$, bit for bit; the communicator version equals the one-machine definition,
# noise included, for every $K$; and a client with an enormous update moves the aggregate by at most
# $C/(qN)$. Then the trade-off: test accuracy against each client's $\varepsilon$ for federations of
# `DP_CLIENTS` clients drawn from the same data (a softmax regression, as for DP-SGD).

# %%
dp_opts = dict(epochs=1, lr=0.5, batch_size=32, seed=SEED)
w_eq = w0.copy()
for t in range(2):  # FedAvg, every client weighted 1, the fixed denominator N = len(few)
    deltas = [fd.client_update(w_eq, like, *few[k], 1, 0.5, 32, [SEED, t, k, 3]) - w_eq for k in range(len(few))]
    w_eq = w_eq + sum(deltas, np.zeros(P)) / len(few)
got, _, _ = dp.run_dp_fedavg(w0, like, few, 4, rounds=2, q=1.0, C=np.inf, sigma=0.0, **dp_opts)
assert np.array_equal(got, w_eq)
feds = {n: [(X[p], y[p]) for p in fd.dirichlet_split(y, n, iid, seed=SEED + 2)] for n in DP_CLIENTS}
N_big, C_CLIENT, w_small = max(DP_CLIENTS), 0.5, nn.flatten(small)
want, _ = dp.reference_dp_fedavg(w_small, small, feds[N_big], 2, q=Q_CLIENTS, C=C_CLIENT, sigma=1.0, **dp_opts)
for K in (1, 3, 6):
    got, _, _ = dp.run_dp_fedavg(w_small, small, feds[N_big], K, rounds=2, q=Q_CLIENTS, C=C_CLIENT, sigma=1.0,
                                 **dp_opts)
    assert np.array_equal(got, want), K
N_few = min(DP_CLIENTS)
(Xh, yh), rest = feds[N_few][0], feds[N_few][1:]
one = dict(q=1.0, C=C_CLIENT, sigma=0.0, **dp_opts)  # every client, no noise: the clip alone bounds client 0
moved = (dp.reference_dp_fedavg(w_small, small, [(Xh * 1e4, yh)] + rest, 1, **one)[0]
         - dp.reference_dp_fedavg(w_small, small, [(Xh[:0], yh[:0])] + rest, 1, **one)[0])
assert np.linalg.norm(moved) <= C_CLIENT / N_few * (1 + 1e-9)
print(f"q = 1, C = inf, sigma = 0: FedAvg with the fixed denominator, bit for bit; K in (1, 3, 6) equal the "
      f"reference; a client with 1e4-times inputs moved the model by {np.linalg.norm(moved):.5f} <= C/(qN) = "
      f"{C_CLIENT / N_few:.5f}")

t0 = time.perf_counter()
fig, ax = plt.subplots(figsize=(7, 4))
client_acc, eps_of = {}, {s: pv.epsilon(Q_CLIENTS, s, DP_ROUNDS, DELTA) for s in CLIENT_SIGMAS}
for n in DP_CLIENTS:
    clean, _ = dp.reference_dp_fedavg(w_small, small, feds[n], DP_ROUNDS, q=Q_CLIENTS, C=C_CLIENT, sigma=0.0,
                                      **dp_opts)
    pts = []
    for s in CLIENT_SIGMAS:
        w_dp, _ = dp.reference_dp_fedavg(w_small, small, feds[n], DP_ROUNDS, q=Q_CLIENTS, C=C_CLIENT, sigma=s,
                                         **dp_opts)
        pts.append((eps_of[s], fd.accuracy(w_dp, small, X_test, y_test)))
    client_acc[n] = pts
    line, = ax.plot(*zip(*pts), "o-", label=f"N = {n} clients, qN = {Q_CLIENTS * n:g}")
    ax.axhline(fd.accuracy(clean, small, X_test, y_test), color=line.get_color(), ls="--", lw=0.8)
ax.set(xscale="log", xlabel="epsilon per client", ylabel="test accuracy",
       title=f"DP-FedAvg, {DP_ROUNDS} rounds, q = {Q_CLIENTS:g}, C = {C_CLIENT:g} (dashed: sigma = 0)")
ax.legend()
plt.show()
for n, pts in client_acc.items():
    print(f"N = {n:>3}: (epsilon, accuracy) {[(round(e, 2), round(a, 3)) for e, a in pts]}")
print(f"({time.perf_counter() - t0:.1f} s)")
eps_c = [e for e, _ in client_acc[N_big]]
assert all(a > b for a, b in zip(eps_c, eps_c[1:]))  # more noise, smaller epsilon
small_fed, big_fed = client_acc[min(DP_CLIENTS)], client_acc[N_big]
assert all(big_fed[i][1] > small_fed[i][1] + 0.05 for i, s in enumerate(CLIENT_SIGMAS) if s >= 2)

# %% [markdown]
# At the same $\varepsilon$ the larger federation is far more accurate: the noise on the average has
# standard deviation $\sigma C / (qN)$ per coordinate, while each client's clipped signal stays of
# order $C$, so more clients per round buy privacy with computation rather than accuracy, the
# observation that made DP-FedAvg practical for keyboards with millions of users.
#
# **Secure aggregation** (Bonawitz et al. 2017). DP-FedAvg's server still sees each clipped delta.
# With secure aggregation it sees only their sum. Values are fixed point in $\mathbb{Z}_{2^{32}}$
# (16 fractional bits), so every cancellation below is exact. Client $i$ holds a seed $s_{ij}$ shared
# with each other client $j$ and a self-mask seed $b_i$ of its own, and sends
#
# $$y_i = \mathrm{enc}(x_i) + \mathrm{PRG}(b_i) + \sum_{j > i} \mathrm{PRG}(s_{ij})
#   - \sum_{j < i} \mathrm{PRG}(s_{ij}) \pmod{2^{32}}.$$
#
# The pair masks cancel in $\sum_i y_i$; the self-masks do not, so before sending $y_i$ each client
# splits $b_i$, and the list of its pair seeds, into $t$-of-$n$ Shamir shares, one per client. A share
# is the value at $x = j$ of a random polynomial of degree $t - 1$ over $\mathbb{F}_p$
# ($p = 2^{61} - 1$) whose constant term is the secret: any $t$ shares give the secret back by
# Lagrange interpolation at 0, and $t - 1$ shares are uniformly distributed, whatever the secret.

# %%
show(sh.split, sh.reconstruct)
seed_words = sa.self_seed(0, 1)
shares_demo = sh.split(sh.words_to_field(seed_words), 5, 3, np.random.default_rng(SEED))
assert np.array_equal(sh.field_to_words(sh.reconstruct([4, 1, 5], shares_demo[[3, 0, 4]], 3)), seed_words)
print(f"a 256-bit seed = {len(sh.words_to_field(seed_words))} field elements; 3 of its 5 shares rebuild it")

# %% [markdown]
# After the deadline the server knows who sent $y_i$ (the survivors $U$) and who did not (the dropped
# $D$). It asks every survivor for its shares of $b_j$ for $j \in U$, to remove the self-masks, and of
# the pair seeds of $j \in D$, to remove the masks that the dropped clients left in the survivors'
# vectors: for one client, never both. The invariant is that the server never holds $t$ shares of both
# secrets of one client, so an honest client's $x_i$ is never exposed, even when its vector arrives
# after it was declared dropped (for a server that follows the protocol; against one that tells
# different clients different lists, the full protocol adds a consistency round and signatures).
# Here the seeds come from a seeded generator where the real protocol runs a key agreement, and the
# shares travel as counted messages to their client where it encrypts them and relays them through
# the server. Read the client first, then the server.

# %%
show(sa.secure_client, sa.secure_aggregate)

# %%
updates = [fd.client_update(w0, like, *shards[iid][k], 1, 0.1, 32, k) - w0 for k in range(6)]
out, _ = sa.run_secure_aggregation(updates)
assert np.array_equal(out["sum"], sa.reference_secure_sum(updates, range(6)))
assert np.abs(out["value"] - np.sum(updates, axis=0)).max() <= 6 * 2.0 ** -17
seen = out["seen"][1].astype(np.float64)
corr = np.corrcoef(seen, sa.encode(updates[0]).view(np.int32))[0, 1]
assert all(not (a >= 4 and b >= 4) for a, b in out["shares"].values())  # t = 4 of n = 6 by default
print(f"sum of 6 masked updates exact in Z_2^32; the server's view of client 0 correlates {corr:+.3f} with its "
      f"update; shares the server holds per client (self seed, pair seeds): {out['shares']}")

# %% [markdown]
# ## 5. The same task with a production library: Opacus and Ray actors
#
# **Opacus** wraps a torch model, optimizer and data loader: `make_private` computes per-sample gradients
# with hooks, clips them and adds the noise inside the optimizer. With the noise off, its gradient for
# a batch must equal ours; its RDP accountant, asked at our integer orders, must give our $\varepsilon$.

# %%
import warnings

import torch
from opacus import PrivacyEngine

C_CLIP, BATCH = 0.5, 32
tmodel = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)).double()
with torch.no_grad():
    for i, lin in enumerate([tmodel[0], tmodel[2]]):
        lin.weight.copy_(torch.tensor(like[f"W{i}"].T))
        lin.bias.copy_(torch.tensor(like[f"b{i}"]))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(X[:256]), torch.tensor(y[:256])),
                                     batch_size=BATCH)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the secure-RNG and full-backward-hook notices
    engine = PrivacyEngine(accountant="rdp")
    pmodel, popt, ploader = engine.make_private(module=tmodel, optimizer=torch.optim.SGD(tmodel.parameters(), lr=0.0),
                                                data_loader=loader, noise_multiplier=0.0, max_grad_norm=C_CLIP,
                                                poisson_sampling=False)
    xb, yb = next(iter(ploader))
    popt.zero_grad()
    torch.nn.functional.cross_entropy(pmodel(xb), yb).backward()
    popt.step()
ours = pv.dp_sgd_gradient(like, xb.numpy(), yb.numpy(), C_CLIP, 0.0, BATCH, np.random.default_rng(0))
lins = [m for m in pmodel._module if isinstance(m, torch.nn.Linear)]
gap = max(max(np.abs(ours[f"W{i}"] - m.weight.grad.numpy().T).max(), np.abs(ours[f"b{i}"] - m.bias.grad.numpy()).max())
          for i, m in enumerate(lins))
assert gap < 1e-12
engine.accountant.history = [(1.0, BATCH / 256, 200)]  # 200 steps at sigma = 1, q = 1/8
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    eps_opacus = engine.accountant.get_epsilon(DELTA, alphas=list(pv.ORDERS))
    eps_default = engine.accountant.get_epsilon(DELTA)
eps_ours = pv.epsilon(BATCH / 256, 1.0, 200, DELTA)
assert abs(eps_ours - eps_opacus) <= 1e-6 * eps_opacus
print(f"Opacus clipped gradient == ours (max gap {gap:.1e}); epsilon: ours {eps_ours:.6f}, Opacus {eps_opacus:.6f} "
      f"(with its fractional orders too: {eps_default:.4f})")

# %% [markdown]
# **FedAvg on Ray actors.** Flower, the usual federated framework, does not install into this course's
# pinned environment (its current release needs older protobuf, packaging and fastapi, and an older
# Ray for simulation), so the production run uses Ray directly: each client is a Ray actor that holds
# its own data and trains in torch (autograd and `torch.optim.SGD`, batches in the library's order);
# the driver collects and averages. A client that goes offline in a round answers `None` (a deployment
# would wait with a deadline, `ray.wait(refs, timeout=...)`, and treat the late ones the same way). The
# result must equal our FedAvg.

# %%
import logging

warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
logging.getLogger("ray").setLevel(logging.ERROR)
import ray  # noqa: E402


def torch_client_update(w, X_k, y_k, epochs, lr, batch_size, seed):
    params = {k: torch.tensor(v, requires_grad=True) for k, v in nn.unflatten(w, like).items()}
    opt = torch.optim.SGD(list(params.values()), lr=lr)
    Xt, yt, rng = torch.tensor(X_k), torch.tensor(y_k), np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(len(X_k))
        for lo in range(0, len(X_k), batch_size):
            rows = torch.tensor(order[lo:lo + batch_size])
            logits = torch.relu(Xt[rows] @ params["W0"] + params["b0"]) @ params["W1"] + params["b1"]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(logits, yt[rows]).backward()
            opt.step()
    return len(X_k), nn.flatten({k: v.detach().numpy() for k, v in params.items()})


t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
try:
    startup = time.perf_counter() - t0

    @ray.remote(num_cpus=0)
    class Client:
        def __init__(self, X_k, y_k):
            self.X, self.y = X_k, y_k

        def train(self, w, k, t, drop):
            if drop:
                return None  # this client went offline in round t
            return torch_client_update(w, self.X, self.y, LOCAL_EPOCHS, 0.1, 32, [SEED, t, k, 3])

    ray_shards = shards[skew][:RAY_CLIENTS]
    actors = [Client.remote(Xk, yk) for Xk, yk in ray_shards]
    ray.get([a.__ray_ready__.remote() for a in actors])
    t0 = time.perf_counter()
    w_ray, ray_reported = w0.copy(), []
    for t in range(3):
        refs = [a.train.remote(w_ray, k, t, fd.drops(k, t, P_DROP, SEED)) for k, a in enumerate(actors)]
        answers = ray.get(refs, timeout=120)
        got = [a for a in answers if a is not None]  # client order, like the library's server
        ray_reported.append([k for k, a in enumerate(answers) if a is not None])
        if got:
            w_ray = np.average(np.stack([m for _, m in got]), axis=0, weights=[n for n, _ in got])
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
ours_w, ours_hist = fd.reference_fedavg(w0, like, ray_shards, 3, p_drop=P_DROP, **opts)
assert ray_reported == [h["reported"] for h in ours_hist], (ray_reported, ours_hist)
assert np.allclose(w_ray, ours_w, rtol=0, atol=1e-9)
print(f"Ray actors (torch) == our FedAvg to {np.abs(w_ray - ours_w).max():.1e}; reported per round {ray_reported} "
      f"(Ray start-up {startup:.1f} s, 3 rounds {ray_seconds:.1f} s)")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Clients that do not report.** The aggregate is the weighted average of the clients that reported,
# exactly, and the rule for a round where nobody reports is to keep $w_t$ (averaging zero models would
# destroy it). A crashed client rank is excluded from then on.

# %%
K = 5
w_drop, hist, _ = fd.run_fedavg(w0, like, few, K, rounds=1, p_drop=0.5, **opts)
rep = hist[0]["reported"]
models = [fd.client_update(w0, like, *few[k], LOCAL_EPOCHS, 0.1, 32, [SEED, 0, k, 3]) for k in rep]
assert np.allclose(w_drop, np.average(models, axis=0, weights=[len(few[k][0]) for k in rep]), rtol=0, atol=1e-12)
w_none, hist_none, _ = fd.run_fedavg(w0, like, few, K, rounds=2, p_drop=1.0, **opts)
assert np.array_equal(w_none, w0) and all(h["reported"] == [] for h in hist_none)
w_crash, hist_crash, res = fd.run_fedavg(w0, like, few, K, rounds=2, faults=cluster.Faults(crash={2: 0}), **opts)
lost = tuple(collectives.worker_range(len(few), K, 2))
assert np.array_equal(w_crash, fd.reference_fedavg(w0, like, few, 2, never_report=lost, **opts)[0])
print(f"p_drop = 0.5: clients {rep} of {len(few)} reported, aggregate exact; all dropped: model kept; "
      f"rank 2 crashed: its clients {list(lost)} excluded, {[h['reported'] for h in hist_crash]}")

# %% [markdown]
# **A client that sends garbage.** FedAvg trusts every update. One client that reports NaN (a bug, an
# overflow) makes the global model NaN; one that reports a scaled update (a poisoning attack)
# drags the average wherever it likes, in proportion to the $n_k$ it claims.

# %%
def fedavg_with(bad):
    w = w0.copy()
    for t in range(3):
        reps = [(len(Xk), fd.client_update(w, like, Xk, yk, LOCAL_EPOCHS, 0.1, 32, [SEED, t, k, 3]))
                for k, (Xk, yk) in enumerate(shards[iid])]
        n0, m0 = reps[0]
        reps[0] = (n0, bad(w, m0))
        w = fd.weighted_average([m for _, m in reps], [n for n, _ in reps])
    return w


honest = fedavg_with(lambda w, m: m)
nan_client = fedavg_with(lambda w, m: np.full_like(m, np.nan))
poisoned = fedavg_with(lambda w, m: w - 30.0 * (m - w))  # boosted update in the opposite direction
for name, w in (("honest", honest), ("one NaN client", nan_client), ("one poisoned client", poisoned)):
    acc = fd.accuracy(w, like, X_test, y_test) if np.all(np.isfinite(w)) else float("nan")
    print(f"{name:>20}: test accuracy {acc:.3f}")
assert np.isnan(nan_client).all() and fd.accuracy(poisoned, like, X_test, y_test) < fd.accuracy(honest, like, X_test, y_test) - 0.1

# %% [markdown]
# Robust aggregation (coordinate-wise median, trimmed mean, Krum) limits what one client can do;
# Exercise 3 builds one.
#
# **Secure aggregation with dropout.** A client that has sent its seeds and shares and then crashes
# before its masked vector leaves its pair masks in everyone else's vectors. The survivors hand the
# server their shares of its pair seeds (and of the survivors' self-mask seeds), and the server
# removes every mask: the survivors' sum is exact. Survivors may also drop *during* this recovery:
# any $t$ answers suffice (here $n = 6$ clients and $t = 4$). With fewer than $t$ the masks cannot be
# removed, and the server says so instead of returning a wrong sum.

# %%
n_sa = len(updates)
t_sa = sa.default_threshold(n_sa)
setup = lambda r: (n_sa - r) + (n_sa - 1)  # noqa: E731  a client's sends before its vector: seeds, then shares
rank = 3  # client 2 crashes as it sends its masked vector
out, res = sa.run_secure_aggregation(updates, faults=cluster.Faults(crash={rank: setup(rank)}))
survivors = [0, 1, 3, 4, 5]
assert out["dropped"] == [rank] and np.array_equal(out["sum"], sa.reference_secure_sum(updates, survivors))
naive = np.zeros(P, np.uint32)
for v in out["seen"].values():
    naive = naive + v
# rank 6 sends its vector, then crashes on its answer: 4 = t survivors still answer
out_one, _ = sa.run_secure_aggregation(updates, faults=cluster.Faults(crash={rank: setup(rank), 6: setup(6) + 1}))
assert out_one["responders"] == [1, 2, 4, 5] and np.array_equal(out_one["sum"], out["sum"])
try:  # ranks 2 and 6 crash on their answers: 3 < t answer, the round is lost, and the error says why
    sa.run_secure_aggregation(updates, faults=cluster.Faults(crash={rank: setup(rank), 2: setup(2) + 1,
                                                                    6: setup(6) + 1}))
    raise AssertionError("3 < t answers must not unmask the sum")
except cluster.RankError as exc:
    print("fewer than t answers:", str(exc).strip().splitlines()[-1])
print(f"client on rank {rank} dropped: survivors' sum exact after recovery, also when rank 6 drops during it; "
      f"without recovery the error would be {np.abs(sa.decode(naive) - sa.decode(out['sum'])).max():.3g}")

# %% [markdown]
# **A late vector.** Client 2 was declared dropped, so the server rebuilt its pair seeds. If its vector
# arrives now, removing those pair masks still leaves $\mathrm{PRG}(b_2)$ on it, and the server never
# asked for shares of $b_2$: the late vector stays as unreadable as any masked vector.

# %%
seeds_3 = {j: sa.pair_seed(0, min(rank, j), max(rank, j)) for j in range(1, n_sa + 1) if j != rank}
y_late = sa.mask(sa.encode(updates[rank - 1]), rank, seeds_3, sa.self_seed(0, rank))
best = y_late.copy()
for j, seed_j in out["pair_seeds"][rank].items():  # the most the server can do: remove rank 3's pair masks
    best = best - sa.prg(seed_j, P) if j > rank else best + sa.prg(seed_j, P)
assert rank not in out["self_seeds"] and np.array_equal(best - sa.encode(updates[rank - 1]),
                                                         sa.prg(sa.self_seed(0, rank), P))
late_corr = np.corrcoef(sa.decode(best), updates[rank - 1])[0, 1]
print(f"late vector of rank {rank} after removing its pair masks: correlation {late_corr:+.3f} with its update")

# %% [markdown]
# ## 7. Evaluation: bytes, rounds, time and cost
#
# Per round the server sends $P$ numbers to each rank that hosts a selected client and receives, per
# reporting client, $P$ numbers and 16 bytes of $(k, n_k)$. Client compute is charged on the simulator
# at `SECONDS_PER_SAMPLE` per example and epoch, and the network is a slow uplink ($\alpha$ = 50 ms,
# 10 MB/s). Speedup $S_K$ and efficiency $E_K$ count the $K - 1$ client ranks against one rank that
# trains every client itself.

# %%
SECONDS_PER_SAMPLE = 2e-4
net = cluster.Network(alpha=5e-2, beta=1e-7)
times, sent = {}, {}
for K in KS:
    res = cluster.run(fd.train_fedavg, K, args=(w0, like, shards[iid]), network=net, timeout=300,
                      kwargs=dict(rounds=2, **opts, seconds_per_sample=SECONDS_PER_SAMPLE))
    times[K] = res.sim_time / 2
    sent[K] = sum(s.bytes_sent for s in res.stats) / 2
    if K > 1:
        assert sent[K] == (K - 1) * P * 8 + CLIENTS * (P * 8 + 16)  # down to each rank, up per client
table = perf.scaling_table(times)
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'K':>3} {'round (s)':>9} {'S_K':>6} {'E_K':>5} {'MB per round':>12} {'USD per 100 rounds':>18}")
for row in table:
    cost = perf.run_cost(price.price_per_hour, row["p"], 100 * row["time"])
    print(f"{row['p']:>3} {row['time']:>9.3f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} "
          f"{sent[row['p']] / 1e6:>12.3f} {cost:>18.4f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")

target = 0.8
rounds_to = {n: next((i + 1 for i, a in enumerate(c) if a >= target), None) for n, c in curves.items()}
print(f"rounds to {target:.0%} test accuracy: {rounds_to}")
print(f"bytes to reach it with {CLIENTS} clients: "
      + ", ".join(f"{n}: {r * CLIENTS * 2 * P * 4 / 1e6:.1f} MB" for n, r in rounds_to.items() if r))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
perf.plot_scaling(times, ax=axes[0], title="FedAvg round time on the simulator")
names = list(rounds_to)
axes[1].bar(range(len(names)), [rounds_to[n] or ROUNDS + 1 for n in names])
axes[1].set(xticks=range(len(names)), ylabel=f"rounds to {target:.0%}", title="rounds to target accuracy")
axes[1].set_xticklabels([n.replace(", ", "\n") for n in names], fontsize=7)
plt.tight_layout()
plt.show()
assert table[-1]["speedup"] > 1.0

# %% [markdown]
# The speedup is the parallelism of local training, capped by the most loaded client rank (clients are
# uneven) and by the server, which sends and receives every model through one link: the uplink
# bytes grow with the number of clients, not with $K$. On real federations the round time is set by
# the slowest client that the server waits for, which is why deadlines and over-selection exist.
#
# ## 8. Exercises
#
# 1. **Local epochs.** Sweep $E \in \{1, 2, 5, 10, 20\}$ at $\alpha_{\mathrm{Dir}} = 0.1$ and plot
#    rounds to 80% against $E$. Where does more local work stop saving rounds?
# 2. **Partial participation.** Run with `fraction=0.2` (a new random fifth of the clients each round).
#    How does the accuracy curve's noise change, and what is the expected uplink per round?
# 3. **Robust aggregation.** Write a coordinate-wise median and a trimmed mean of the reported models.
#    Re-run the NaN and poisoned clients of Section 6. What do you lose on honest, skewed clients?
# 4. **Gossip SGD.** Interleave one local SGD step with one gossip step (D-PSGD, Lian et al. 2017) on a
#    ring and a torus of 16 nodes, with the skewed split. Compare with FedAvg at equal bytes.
# 5. **Privacy budget.** With `sigma_for_epsilon`, find the noise for $\varepsilon = 1, 3, 8$ at
#    $\delta = 10^{-5}$ and 1000 steps, and plot test accuracy against $\varepsilon$.
# 6. **Lab 14** (`labs/lab14-fedavg-dropout`): SCAFFOLD, whose control variates correct the client
#    drift that FedAvg shows on non-IID clients, over the communicator while the grader drops clients.
#
# ## 9. Research directions
#
# - **Heterogeneous clients.** Label skew, different amounts of data and different hardware make the
#   local objectives disagree, and the average of local optima is not the global optimum. Which
#   corrections (proximal terms, control variates, server momentum) provably remove the drift without
#   slowing convergence on IID data is still being settled.
#   - McMahan, Moore, Ramage, Hampson and Aguera y Arcas, "Communication-Efficient Learning of Deep
#     Networks from Decentralized Data", AISTATS, 2017. FedAvg and the first study of non-IID clients.
#   - Li, Sahu, Zaheer, Sanjabi, Talwalkar and Smith, "Federated Optimization in Heterogeneous
#     Networks", MLSys, 2020. FedProx and its convergence under partial work and heterogeneity.
#   - Kairouz, McMahan et al., "Advances and Open Problems in Federated Learning", Foundations and
#     Trends in Machine Learning, 2021. The survey of the field's open problems.
# - **Decentralized training.** Without a server, the topology sets both the bytes per step and the
#   rate of consensus. Choosing graphs that change over time, and bounding the error when steps are
#   compressed or nodes are slow, are open.
#   - Koloskova, Loizou, Boreiri, Jaggi and Stich, "A Unified Theory of Decentralized SGD with Changing
#     Topology and Local Updates", ICML, 2020. Rates that depend on the spectral gap of the mixing matrix.
# - **Privacy at a useful accuracy.** DP-SGD's noise costs accuracy, and the accountant's bound may be
#   loose. Tighter accounting, auditing a trained model to measure the leak, client-level guarantees
#   without uniform client sampling (real devices check in when they are idle and charging), and
#   private training of large models are active.
#   - Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar and Zhang, "Deep Learning with Differential
#     Privacy", CCS, 2016. DP-SGD with per-example clipping and the moments accountant.
#   - Mironov, Talwar and Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism", arXiv
#     preprint, 2019. The RDP bound the accountant of Section 4 computes.
#   - McMahan, Ramage, Talwar and Zhang, "Learning Differentially Private Recurrent Language Models",
#     ICLR, 2018. DP-FedAvg: user-level DP by sampling clients, clipping their updates and noising the
#     sum with a fixed denominator, as built in Section 4.
#   - Xu, Zhang, Andrew, Choquette-Choo, Kairouz, McMahan, Rosenstock and Zhang, "Federated Learning of
#     Gboard Language Models with Differential Privacy", ACL (Industry Track), 2023. Client-level DP in
#     production keyboards with DP-FTRL, which needs no uniform client sampling, and adaptive clipping;
#     two of the models also used secure aggregation.
#   - Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS, 2023. Inserts
#     many canary examples independently and obtains, from a single training run, an empirical lower bound
#     on the privacy loss of DP-SGD, central or federated.
# - **Secure aggregation at scale.** Pairwise masks cost every client work proportional to the number
#   of clients, and dropout recovery needs rounds of its own. Protocols with fewer rounds and
#   logarithmic neighbourhoods, and combining them with differential privacy, are current work.
#   - Bonawitz, Ivanov, Kreuter, Marcedone, McMahan, Patel, Ramage, Segal and Seth, "Practical Secure
#     Aggregation for Privacy-Preserving Machine Learning", CCS, 2017. Pairwise masks, secret-shared
#     keys and double masking for dropout: the protocol of Section 4, there with key agreement,
#     encryption of the shares and a version secure against a malicious server.
#   - Ma, Woods, Angel, Polychroniadou and Rabin, "Flamingo: Multi-Round Single-Server Secure Aggregation
#     with Applications to Private Federated Learning", IEEE S&P, 2023. Reuses pairwise secrets across
#     training rounds and adds a light dropout-recovery step, cutting the rounds of interaction per sum.
#   - Bell, Gascon, Lepoint, Li, Meiklejohn, Raykova and Yun, "ACORN: Input Validation for Secure
#     Aggregation", USENIX Security, 2023. A faster secure aggregation that also lets the server check
#     that each hidden input meets a norm bound, the check a clipped DP-FedAvg update needs.
# - **Federated fine-tuning of large language models.** Clients can neither hold nor send a model of
#   billions of parameters, so federated LLM training exchanges only small adapters (low-rank or other
#   parameter-efficient updates). How adapters of different ranks aggregate, how non-IID instruction data
#   biases the result, and what the adapters leak are open.
#   - Ye et al., "OpenFedLLM: Training Large Language Models on Decentralized Private Data via Federated
#     Learning", KDD, 2024. Federated instruction tuning and value alignment with seven FL algorithms over
#     parameter-efficient adapters, with benchmarks where the federated model beats every client training
#     alone.
#   - Kuang et al., "FederatedScope-LLM: A Comprehensive Package for Fine-tuning Large Language Models in
#     Federated Learning", KDD, 2024. A package and benchmark for federated parameter-efficient fine-tuning
#     that accounts for the communication and computation each client can afford.
#
# ## What's next
#
# Part IV starts with Chapter 15 (Data parallelism): the clients become GPUs in one data centre, the
# data may move freely, and the averaging of models becomes an all-reduce of gradients after every
# step, bucketed and overlapped with the backward pass.
