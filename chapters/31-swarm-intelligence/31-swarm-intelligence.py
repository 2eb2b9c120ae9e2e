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
# # Chapter 31. Swarm intelligence
#
# The agents of Chapters 27 to 30 were few and clever: they bid, negotiated and learned. A swarm is the
# opposite: many simple agents, each following a fixed local rule and talking only to those nearby, with
# no leader and no global view, whose collective behaviour is more than any agent computes. This chapter
# builds four swarms on the communicator. **Boids** flock from three steering rules; split over ranks by
# space, each rank exchanges a thin halo with its two neighbours and the result equals the one-machine
# flock bit for bit. **Particle swarm optimisation** searches a function with particles that remember
# their own best and follow the swarm's; sub-swarms on ranks swap their best every few iterations (the
# island model). **Average consensus** makes every node of a graph agree on the mean by repeatedly
# moving towards its neighbours; how fast is predicted by one number, the algebraic connectivity of the
# graph's Laplacian, and we measure it. **Ant colony optimisation** finds short travelling-salesman tours
# with ants that follow and lay pheromone; colonies on ranks swap their best tour, and every tour is checked
# against the exact optimum. pyswarms runs beside our PSO, and one of its runs is retraced exactly.
#
# **Prerequisites:** Chapter 14 (Federated and decentralized learning: gossip averaging, mixing matrices
# and the spectral gap), Chapter 27 (Distributed AI: agents as ranks, messages counted, crashes from
# `cluster.Faults`), and Chapter 4 for the communicator. Background: eigenvalues of a symmetric matrix.

# %% tags=["parameters"]
N_BOIDS = 300  # smoke: 80
BOID_STEPS = 500  # smoke: 150
BOX = 12.0  # smoke: 8.0
STRIP_KS = [1, 2, 3, 5, 8]  # smoke: [1, 2, 3, 5]
PARTICLES = 40  # smoke: 24
DIM = 10  # smoke: 5
ITERS = 300  # smoke: 80
SEEDS = 10  # smoke: 5
ISLANDS = 4
EVERY = 10
GRAPH_SIZES = [16, 36, 64, 100]  # smoke: [16, 36]
LOSS = [0.01, 0.03, 0.1]  # smoke: [0.03, 0.1]
CITIES = 14  # smoke: 9
ANTS = 12
ACO_ITERS = 150  # smoke: 20
ACO_SEEDS = 8  # smoke: 2
COLONY_KS = [2, 3, 5, 7]  # smoke: [3, 7]
TSP_SIZES = [6, 7, 8, 9, 10, 11]  # smoke: [7, 11]
SEED = 0

# %% [markdown]
# `N_BOIDS` boids fly `BOID_STEPS` steps in a periodic box of side `BOX`, split over each world size in
# `STRIP_KS`. PSO runs `PARTICLES` particles in `DIM` dimensions for `ITERS` iterations over `SEEDS`
# seeds; the island model uses `ISLANDS` sub-swarms that migrate every `EVERY` iterations. Consensus
# runs on graphs of `GRAPH_SIZES` nodes, with message-loss rates `LOSS`. Ant colony optimisation tours
# `CITIES` random cities with `ANTS` ants in all, split over colonies, for `ACO_ITERS` iterations over
# `ACO_SEEDS` instances; the checks of Section 4 run colonies for each $K$ in `COLONY_KS` and instances of
# each size in `TSP_SIZES`.
#
# ## 1. Motivation: which ceiling binds
#
# A swarm of drones, sensors or robots could be run by a central controller that hears every agent and
# commands each one. The binding ceilings are the controller's link and its existence: every tick it
# must receive and send one message per agent, so its load grows with the swarm while each agent's
# radio reaches only a few metres, and when it fails every agent is lost at once. A local rule costs
# each agent a message per neighbour, whatever the size of the swarm, and nothing fails as a whole.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import swarm as sw
from scaleoutai.agents import swarm_aco as sa, tsp
from scaleoutai.agents import swarm_consensus as sc
from scaleoutai.agents import swarm_pso as ps

ticks_per_s, msg_bytes, neighbours = 20, 64, 6  # 20 Hz control, a 64-byte state, 6 radio neighbours
print(f"{'agents':>9} {'controller link (MB/s)':>23} {'per agent, local rule (kB/s)':>29}")
for n in (100, 10_000, 1_000_000):
    central = 2 * n * ticks_per_s * msg_bytes / 1e6  # in and out, all through one node
    local = 2 * neighbours * ticks_per_s * msg_bytes / 1e3
    print(f"{n:>9,} {central:>23.2f} {local:>29.2f}")

# %% [markdown]
# The controller's link grows linearly with the swarm; the local rule stays at 15 kB/s per agent. The
# question of this chapter is what local rules can achieve, and how fast.
#
# ## 2. Core concepts
#
# **Boids** (Reynolds 1987). Boid $i$ sees the boids within a radius $r$ and steers by three rules:
# *separation* (move away from those closer than $r_{\mathrm{sep}}$), *alignment* (match the mean
# velocity of its neighbours) and *cohesion* (move towards their mean position):
#
# $$v_i \leftarrow v_i - w_s \sum_{|d_{ij}| < r_{\mathrm{sep}}} d_{ij} + w_a (\bar v_{N(i)} - v_i) + w_c \bar d_{N(i)},$$
#
# with $d_{ij} = x_j - x_i$ taken the short way round the periodic box; the speed is then clamped to
# $[v_{\min}, v_{\max}]$. The **polarisation** (Vicsek's order parameter)
# $v_a = \lVert \sum_i v_i/\lVert v_i\rVert \rVert / n$
# measures order: about $1/\sqrt{n}$ for random headings, 1 when the flock moves as one.

# %%
flock = sw.BoidsParams(box=BOX, radius=1.5)
X0, V0 = sw.random_flock(N_BOIDS, flock, seed=SEED)
snap_at = [0, BOID_STEPS // 4, BOID_STEPS]
snaps, v_a = {0: (X0, V0)}, [sw.polarisation(V0)]
t0 = time.perf_counter()
Xs, Vs = X0, V0
for t in range(1, BOID_STEPS + 1):
    Xs, Vs = sw.boids_step(Xs, Vs, flock)  # what reference_boids does, keeping snapshots on the way
    v_a.append(sw.polarisation(Vs))
    if t in snap_at:
        snaps[t] = (Xs, Vs)
boid_seconds = time.perf_counter() - t0
fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
for ax, t in zip(axes, snap_at):
    Xt, Vt = snaps[t]
    ax.quiver(Xt[:, 0], Xt[:, 1], Vt[:, 0], Vt[:, 1], np.arctan2(Vt[:, 1], Vt[:, 0]), cmap="hsv", scale=12)
    ax.set(xlim=(0, BOX), ylim=(0, BOX), aspect="equal", title=f"step {t}, v_a = {sw.polarisation(Vt):.2f}")
axes[3].plot(v_a)
axes[3].set(xlabel="step", ylabel="polarisation v_a", ylim=(0, 1.02), title="order from local rules")
plt.tight_layout()
plt.show()
print(f"{N_BOIDS} boids, {BOID_STEPS} steps in {boid_seconds:.1f} s; v_a {v_a[0]:.2f} -> {v_a[-1]:.2f}")
assert v_a[0] < 0.3 and v_a[-1] > 0.8

# %% [markdown]
# **Particle swarm optimisation** (Kennedy and Eberhart 1995). Particle $i$ has a position $x_i$, a
# velocity $v_i$ and the best point it has seen, $p_i$; the swarm knows its best point $g$. With fresh
# $r_1, r_2 \sim U[0, 1)$ per coordinate,
#
# $$v_i \leftarrow \omega\, v_i + c_1 r_1 (p_i - x_i) + c_2 r_2 (g - x_i), \qquad x_i \leftarrow x_i + v_i .$$
#
# The inertia weight $\omega$ (Shi and Eberhart 1998; not $w$, which the course keeps for model weights)
# trades exploration against convergence; Clerc and Kennedy's **constriction** sets $\omega = \chi$,
# $c_k = \chi \varphi_k$ with
# $\chi = 2 / |2 - \varphi - \sqrt{\varphi^2 - 4\varphi}|$, $\varphi = \varphi_1 + \varphi_2 > 4$, which
# keeps the swarm from exploding without a velocity clamp. The benchmark functions are the sphere (one
# bowl), Rastrigin (a grid of local minima), Rosenbrock (a curved valley) and Ackley (a flat plateau
# with a narrow hole), each with minimum 0.

# %%
cons = ps.constriction()
print(f"constriction (phi1 = phi2 = 2.05): omega = chi = {cons.w:.6f}, c1 = c2 = {cons.c1:.6f}")
g = np.linspace(-5.12, 5.12, 201)
G1, G2 = np.meshgrid(g, g)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
for ax, (name, f) in zip(axes, ps.FUNCTIONS.items()):
    b = ps.BOUNDS[name] if name != "ackley" else 5.0
    Z = f(np.column_stack([G1.ravel(), G2.ravel()]) * b / 5.12).reshape(G1.shape)
    ax.contourf(G1 * b / 5.12, G2 * b / 5.12, np.log1p(Z), levels=30, cmap="viridis")
    ax.set(title=name if name != "ackley" else "ackley (centre of its box)", aspect="equal")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Ant colony optimisation** (Dorigo, Maniezzo and Colorni 1996). The travelling-salesman problem: $n$
# cities with distances $D_{ij}$, find the shortest closed tour through all of them. Real ants find short
# paths to food without a map: each lays pheromone where it walks and prefers paths that carry more of it,
# and a shorter path, walked more often per hour, gathers more. Artificial ants build a tour $\sigma$ (a
# permutation of the cities) one city at a time; from city $i$ an ant moves to an unvisited city $j$ with
# probability (the **random-proportional rule**)
#
# $$p_{ij} = \frac{\tau_{ij}^{\,\mu}\, D_{ij}^{-\nu}}{\sum_{l \text{ unvisited}} \tau_{il}^{\,\mu}\, D_{il}^{-\nu}},$$
#
# where the pheromone $\tau_{ij}$ is the colony's memory of edge $ij$ and $\mu$, $\nu$ weigh memory against
# greed for short edges (the literature writes them $\alpha$ and $\beta$, with $\eta = 1/D$: letters this
# book keeps for the network model and the learning rate). After an iteration of $m$ ants, every trail
# evaporates at rate $\xi$ and ants deposit $1/\ell(\sigma)$ on each edge of their tour, $\ell(\sigma)$ being its
# length. In **Ant System** every ant deposits; a few early tours then gather so much pheromone that every
# ant follows them (stagnation). **MAX-MIN Ant System** (Stuetzle and Hoos 2000) lets one ant deposit, the
# iteration's best $\sigma^{\mathrm{ib}}$ (every few iterations the best so far, of length $\ell_{\mathrm{bs}}$),
# and clamps every trail:
#
# $$\tau_{ij} \leftarrow \min\Big(\tau_{\max}, \max\Big(\tau_{\min},
# (1 - \xi)\,\tau_{ij} + \frac{[ij \in \sigma^{\mathrm{ib}}]}{\ell(\sigma^{\mathrm{ib}})}\Big)\Big),
# \qquad \tau_{\max} = \frac{1}{\xi\, \ell_{\mathrm{bs}}}, \qquad
# \tau_{\min} = \tau_{\max} \frac{1 - p_{\mathrm{best}}^{1/n}}{(n/2 - 1)\, p_{\mathrm{best}}^{1/n}} .$$
#
# $\tau_{\max}$ is where a trail ends if the best tour deposits on it every iteration; $\tau_{\min}$ is set so
# that once the trails have converged an ant still rebuilds the best tour only with probability about
# $p_{\mathrm{best}}$: no edge is ever impossible, so the search never freezes. Each ant's tour is then
# shortened by **2-opt** (remove two edges and reconnect the two paths the other way, while that helps),
# the local search that makes ant colonies competitive. The reference is exact: the dynamic program of Held
# and Karp (1962) finds the optimum in $O(2^n n^2)$ time, comfortable up to $n \approx 16$.

# %%
xy, Dtsp = tsp.euclidean_instance(CITIES, seed=SEED)
t0 = time.perf_counter()
opt_len, opt_tour = tsp.reference_tsp(Dtsp)
hk_seconds = time.perf_counter() - t0
assert np.array_equal(tsp.held_karp(Dtsp[:8, :8])[1], tsp.brute_force_tsp(Dtsp[:8, :8])[1])  # vs every tour
nn = tsp.nearest_neighbour_tour(Dtsp)
tours = {"nearest neighbour": nn, "+ 2-opt": tsp.two_opt(nn, Dtsp), "Held-Karp optimum": opt_tour}
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
for ax, (name, t) in zip(axes, tours.items()):
    c = np.append(t, t[0])
    ax.plot(xy[c, 0], xy[c, 1], "o-", ms=4)
    ax.set(title=f"{name}: length {tsp.tour_length(t, Dtsp):.3f}", aspect="equal", xticks=[], yticks=[])
plt.tight_layout()
plt.show()
lo, hi = sa.tau_bounds(tsp.tour_length(nn, Dtsp), CITIES, sa.ACOParams())
print(f"{CITIES} cities: Held-Karp in {hk_seconds:.2f} s; first trail bounds tau_min = {lo:.4f}, tau_max = {hi:.4f}")
assert opt_len <= tsp.tour_length(tours["+ 2-opt"], Dtsp) <= tsp.tour_length(nn, Dtsp)

# %% [markdown]
# **Average consensus through the Laplacian.** Node $i$ of an undirected graph with $n$ nodes holds
# $x_i$; the **Laplacian** $\mathbf{L} = D - A$ has the degrees on its diagonal and $-1$ per edge. One
# step is
#
# $$x_{t+1} = x_t - \gamma \mathbf{L} x_t, \qquad x_i \leftarrow x_i + \gamma \sum_{j \in N(i)} (x_j - x_i).$$
#
# Because $\mathbf{1}^\top \mathbf{L} = 0$, every step keeps the sum, so the only fixed point reachable
# is everyone at the mean. $\mathbf{L}$ is symmetric with eigenvalues $0 = \lambda_1 < \lambda_2 \le
# \dots \le \lambda_n$ on a connected graph, and the disagreement shrinks as
# $\rho^t$ with $\rho = \max(|1 - \gamma\lambda_2|, |1 - \gamma\lambda_n|)$. Any step $\gamma < 1/d_{\max}$
# converges ($\lambda_n \le 2 d_{\max}$), and for $\gamma \le \gamma^\star = 2/(\lambda_2 + \lambda_n)$
# the rate is $1 - \gamma\lambda_2$: the **algebraic connectivity** $\lambda_2$ (Fiedler 1973) sets the
# speed; $\gamma^\star$ gives the best constant rate $(\lambda_n - \lambda_2)/(\lambda_n + \lambda_2)$.
# $I - \gamma\mathbf{L}$ is a symmetric, doubly stochastic mixing matrix, so this is gossip in the sense
# of Chapter 14 with a particular choice of weights; there the Metropolis weights were the choice, and
# below we compare the two on the same graphs.

# %%
families = ["ring", "torus", "geometric", "erdos_renyi", "complete"]
print(f"{'graph':>12} {'n':>4} {'d_max':>5} {'lambda_2':>9} {'lambda_n':>9} {'gamma*':>7} {'rho at 1/(d_max+1)':>19} "
      f"{'rho*':>7}")
for name in families:
    nb = sc.graph(name, 36, seed=SEED)
    lam, dmax = sc.spectrum(nb), max(map(len, nb))
    print(f"{name:>12} {36:>4} {dmax:>5} {lam[1]:>9.4f} {lam[-1]:>9.4f} {sc.optimal_step(nb):>7.4f} "
          f"{sc.predicted_rate(nb, 1 / (dmax + 1)):>19.4f} {sc.predicted_rate(nb, sc.optimal_step(nb)):>7.4f}")

# %% [markdown]
# The ring's $\lambda_2 = 2 - 2\cos(2\pi/n)$ is tiny, so it is slow; the random graphs sit between it
# and the complete graph, whose $\lambda_2 = \lambda_n = n$ lets $\gamma = 1/n$ reach the mean in one step.
#
# ## 3. The distribution and communication pattern
#
# All three swarms talk only to neighbours, and each rank knows whom it waits for (the communicator has
# no receive-from-any):
#
# - **Boids over strips.** Rank $k$ owns the boids in the vertical strip $[k\,\mathrm{box}/K,
#   (k+1)\,\mathrm{box}/K)$. Per step it sends the boids within $r$ of its left edge to rank $k-1$ and
#   those within $r$ of its right edge to rank $k+1$ (two `sendrecv`, the **halo**), applies the rules to
#   its own boids, then hands the boids that crossed a border to the neighbour that now owns them (two
#   more `sendrecv`, **migration**). Four messages per rank per step; the bytes follow the boids near
#   the borders, not the flock.
# - **PSO islands.** Rank $k$ runs a sub-swarm; every $M$ iterations it sends $[\,\text{best cost},
#   g\,]$ ($d + 1$ numbers) to rank $k+1$ (ring: $K$ messages per migration) or to everyone
#   ($K(K-1)$ messages), and adopts a strictly better incoming best.
# - **Consensus.** Node $i$ is rank $i$; per step one `sendrecv` with each neighbour, so $2|E|$ messages.
# - **Ant colonies.** Rank $k$ runs a colony of $m/K$ ants with a pheromone matrix of its own. Every $M$
#   iterations the colonies exchange their best tour: $n$ city numbers (int64) and its length, $8(n+1)$ bytes.
#   Over a ring each colony sends one message to its successor ($K$ messages). All-to-all uses collectives:
#   a MINLOC all-reduce finds the least (length, rank), as two tree all-reduces of 8 bytes ($4(K-1)$
#   messages), and the winner broadcasts its $8n$-byte tour down a tree ($K-1$ messages): $5(K-1)$ messages,
#   $(K-1)(32 + 8n)$ bytes. The pheromone matrix ($8n^2$ bytes) never travels, and no message grows with the
#   number of ants.
#
# The timeline shows three islands migrating over a ring every 5 iterations (the iterations themselves
# are not charged as compute here, so only the messages take simulated time).

# %%
traced = cluster.run(ps.train_pso, 3, args=(ps.rastrigin, 30, 4, 5.12, 15), kwargs=dict(every=5, seed=SEED),
                     trace=True, network=cluster.Network(alpha=1e-3, beta=1e-8))
cluster.plot_timeline(traced, title="3 PSO islands, ring migration every 5 iterations")
plt.show()
print("messages per rank:", [s.messages_sent for s in traced.stats], "= 15 // 5 migrations x 1 successor")
assert [s.messages_sent for s in traced.stats] == [3, 3, 3]

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# **Boids.** `steer` applies the three rules to a set of boids given candidate neighbours; `train_boids`
# is the rank's loop: halo, rules, migration. The trick that makes the split exact is in `steer`: every
# sum over neighbours adds them one at a time in increasing id, from a padded neighbour table, so a
# candidate that is not a neighbour contributes nothing and the bits do not depend on which extra
# candidates a rank happens to hold.

# %%
from scaleoutai.notebooks import show

show(sw.steer, sw.train_boids)

# %% [markdown]
# The check: for every $K$ in `STRIP_KS`, and for more strips than boids, the split flock equals the
# one-machine flock bit for bit after many steps, and each boid ends on the rank of its strip.

# %%
check_steps = min(BOID_STEPS, 120)
want = sw.reference_boids(X0, V0, check_steps, flock)
strip_msgs = {}
for K in STRIP_KS:
    got, res = sw.run_boids(X0, V0, check_steps, K, flock)
    assert np.array_equal(got["X"], want["X"]) and np.array_equal(got["V"], want["V"]), K
    assert np.array_equal(got["owner"], sw.strip_of(want["X"][:, 0], K, flock.box))
    strip_msgs[K] = (sum(s.messages_sent for s in res.stats), sum(s.bytes_sent for s in res.stats))
few = sw.random_flock(5, flock, seed=1)
got, _ = sw.run_boids(*few, 30, max(STRIP_KS), flock)
assert np.array_equal(got["X"], sw.reference_boids(*few, 30, flock)["X"])
print(f"strips equal the reference after {check_steps} steps for K in {STRIP_KS} (and 5 boids on "
      f"{max(STRIP_KS)} strips); messages, bytes: {strip_msgs}")

# %% [markdown]
# **PSO.** `pso_step` is one iteration of one swarm (evaluate, update the bests, move, clip to the box);
# `train_pso` runs island `comm.rank` and migrates. Each island draws from its own stream, a pure
# function of (seed, island), so the island model on one machine and the ranks agree exactly.

# %%
show(ps.pso_step, ps.train_pso)

# %%
for name, f in ps.FUNCTIONS.items():
    b = ps.BOUNDS[name]
    one, res = ps.run_pso(f, 17, DIM, b, 40, 1, seed=SEED)
    assert np.array_equal(one["history"], ps.reference_pso(f, 17, DIM, b, 40, seed=SEED)["history"])
    for K in (2, 3, 5, 30):  # 23 particles: uneven sub-swarms; 30 islands: some hold no particle and relay
        for topology in ("ring", "all"):
            want_i = ps.reference_pso_islands(f, 23, DIM, b, 40, K, every=7, topology=topology, seed=SEED)
            got_i, res = ps.run_pso(f, 23, DIM, b, 40, K, every=7, topology=topology, seed=SEED)
            assert np.array_equal(got_i["history"], want_i["history"]) and got_i["cost"] == want_i["cost"]
            assert sum(s.messages_sent for s in res.stats) == ps.migration_messages(K, 40, 7, topology)
print("one island == the reference swarm; K islands == the island-model reference, bit for bit, for "
      "K in (2, 3, 5, 30), ring and all-to-all; messages == iters // M x (K or K(K-1))")

# %% [markdown]
# **Ant colonies.** `construct_tours` moves all $m$ ants of a colony one city at a time together: per
# ant, the weights $\tau^{\mu} D^{-\nu}$ of the unvisited cities are summed cumulatively and a uniform draw
# into the sum picks the next city. `mmas_update` is the pheromone update above, and `train_aco` is a
# colony's loop with its exchange. A cycle can be written from any city in either direction, so every tour
# is stored one way (from city 0, the smaller neighbour second): the same cycle has the same bits on every
# colony, and "found the optimum" is an equality of integer arrays, not a tolerance.

# %%
show(sa.construct_tours, sa.mmas_update, sa.train_aco)

# %% [markdown]
# The checks: one colony on one rank is the single-machine `aco`; $K$ colonies on ranks are the lock-step
# reference for every $K$ in `COLONY_KS`, including more colonies than ants (those relay tours they did not
# find); the messages and bytes are the formulas of Section 3; the trails never leave
# $[\tau_{\min}, \tau_{\max}]$; and with 2-opt the colonies reach the Held-Karp optimum on an instance of
# every size in `TSP_SIZES`.

# %%
_, Dc = tsp.euclidean_instance(9, seed=SEED + 1)
no_ls = sa.ACOParams(local_search=False)
one = sa.aco(Dc, 7, 20, no_ls, seed=SEED)
got, _ = sa.run_aco(Dc, 7, 20, 1, 4, params=no_ls, seed=SEED)
assert np.array_equal(got["history"], one["history"]) and np.array_equal(got["tour"], one["tour"])
b = one["bounds"]  # per iteration: tau_min, tau_max, smallest and largest trail
assert np.all(b[:, 0] <= b[:, 2]) and np.all(b[:, 3] <= b[:, 1])
for K in COLONY_KS:  # 7 colonies for 5 ants: two colonies have none
    for topology in ("ring", "all"):
        want = sa.reference_aco_colonies(Dc, 5, 8, K, 4, topology, no_ls, seed=SEED)
        got, res = sa.run_aco(Dc, 5, 8, K, 4, topology, no_ls, seed=SEED)
        assert np.array_equal(got["history"], want["history"]) and np.array_equal(got["tour"], want["tour"])
        assert sum(s.messages_sent for s in res.stats) == 8 // 4 * sa.exchange_messages(K, topology)
        assert sum(s.bytes_sent for s in res.stats) == 8 // 4 * sa.exchange_bytes(9, K, topology)
for n in TSP_SIZES:
    _, Dn = tsp.euclidean_instance(n, seed=n)
    best, tour = tsp.reference_tsp(Dn)
    got, _ = sa.run_aco(Dn, 8, 6, 4, 3, "all", seed=SEED)
    assert np.array_equal(got["tour"], tour) and got["length"] == best, n
print(f"1 colony == aco; K colonies == the lock-step reference for K in {COLONY_KS}, ring and all-to-all; messages "
      f"and bytes == Section 3; trails inside [tau_min, tau_max]; Held-Karp optimum found for n in {TSP_SIZES}")

# %% [markdown]
# **Consensus.** `consensus_average` is the rank's loop: one `sendrecv` per neighbour, then the
# Laplacian step, adding the neighbours in increasing rank as the reference does.

# %%
show(sc.consensus_average)

# %%
for n in (1, 2, 3, 5, 8, 13):
    for name in families:
        nb = sc.graph(name, n, seed=n)
        Xc = np.random.default_rng(n).standard_normal((n, 2))
        gamma = 1 / (1 + max(map(len, nb)))
        path, res = sc.run_consensus(Xc, nb, gamma, 20)
        assert np.array_equal(path, sc.reference_consensus(Xc, nb, gamma, 20)), (name, n)
        assert np.allclose(path[-1].mean(0), Xc.mean(0), rtol=0, atol=1e-12)
        assert sum(s.messages_sent for s in res.stats) == 20 * sum(map(len, nb))
print("consensus on ranks == the Laplacian iteration for n in (1, 2, 3, 5, 8, 13) on every family; mean kept")

# %% [markdown]
# **Measured against predicted.** On each family with 36 nodes we run to a disagreement of $10^{-12}$,
# with $\gamma = 1/(d_{\max}+1)$ (safely below $1/d_{\max}$) and with $\gamma^\star$, and fit the
# measured factor per step late in the run (disagreement between $10^{-7}$ and $10^{-11}$), when the
# faster modes have died. Dashed lines: $\rho^t$. Chapter 14's Metropolis gossip on the same graph is
# in the table for comparison (its rate is $|\lambda_2(W)|$).

# %%
from scaleoutai.ml import gossip as gs  # Chapter 14, for comparison only

fig, ax = plt.subplots(figsize=(9, 4.5))
rows = []
for ci, name in enumerate(families[:4]):
    nb = sc.graph(name, 36, seed=SEED)
    Xc = np.random.default_rng(SEED).standard_normal((36, 1))
    for gi, gamma in enumerate((1 / (1 + max(map(len, nb))), sc.optimal_step(nb))):
        rho = sc.predicted_rate(nb, gamma)
        steps = int(min(4000, sc.predicted_iterations(nb, gamma, 1e-12)))
        err = sc.disagreement(sc.reference_consensus(Xc, nb, gamma, steps))
        assert np.all(err <= rho ** np.arange(steps + 1) * (1 + 1e-9) + 1e-14)
        measured = sc.measured_rate(err)
        assert abs(measured - rho) < 0.02 * rho, (name, gamma)
        t = np.arange(steps + 1)
        ax.semilogy(t, err, color=f"C{ci}", ls=["-", ":"][gi], label=f"{name}, gamma = {gamma:.3f}")
        ax.semilogy(t, rho ** t, color=f"C{ci}", ls="--", lw=0.6)
        metro = gs.second_eigenvalue(gs.metropolis_weights(nb))
        if name in ("ring", "torus") and gi == 0:
            assert abs(metro - rho) < 1e-9  # regular graph: Metropolis is I - L / (d + 1)
        rows.append((name, gamma, sc.algebraic_connectivity(nb), rho, measured, metro))
ax.set(xscale="log", ylim=(1e-13, 2), xlabel="step t", ylabel="disagreement left",
       title="Laplacian consensus, n = 36: measured (solid, dotted) vs rho^t (dashed)")
ax.legend(fontsize=7)
plt.show()
print(f"{'graph':>12} {'gamma':>6} {'lambda_2':>8} {'1-gamma*lambda_2':>16} {'measured':>9} "
      f"{'Metropolis |lambda_2(W)|':>24}")
for name, gamma, lam2, rho, measured, metro in rows:
    print(f"{name:>12} {gamma:>6.3f} {lam2:>8.4f} {rho:>16.5f} {measured:>9.5f} {metro:>24.5f}")

# %% [markdown]
# The fit matches $1 - \gamma\lambda_2$ to within 2% everywhere: the slowest eigenvector of
# $\mathbf{L}$, the Fiedler vector, is what is left after the fast modes die. On regular graphs the
# Metropolis weights are $I - \mathbf{L}/(d+1)$, the first choice of $\gamma$, so Chapter 14's rate is
# the same number; on irregular graphs (geometric, Erdos-Renyi) they differ, and neither is optimal
# for every graph: the fastest symmetric weights come from a semidefinite program (Exercise 3).
#
# ## 5. The same task with a production library: pyswarms
#
# pyswarms implements PSO with a global-best (`GlobalBestPSO`, star topology) and a local-best
# (`LocalBestPSO`, each particle follows the best of its $k$ nearest particles) optimizer over
# `pyswarms.backend` operators. It draws from NumPy's global legacy generator, in the order positions,
# velocities, then $r_1$ and $r_2$ per iteration, which is the order our `init_swarm` and `pso_step`
# use. One detail: its constructor builds the swarm twice (base class and subclass both call `reset()`)
# and keeps the second, so `pyswarms_stream` draws and discards one swarm too. With the same seed, the
# same hyperparameters and clipping at the bounds (`bh_strategy="nearest"`), our reference must retrace
# its whole run, bit for bit.

# %%
import os
import tempfile
from pathlib import Path

# Every pyswarms optimizer configures logging when it is built: by default it adds a `report.log` in the
# working directory (this chapter's folder). LOG_CFG points it at a configuration of our own instead.
_log_cfg = Path(tempfile.mkdtemp(prefix="ch31-pyswarms-")) / "logging.yaml"
_log_cfg.write_text("version: 1\ndisable_existing_loggers: false\nhandlers:\n  console: {class: logging.StreamHandler, "
                    "level: WARNING}\nroot: {handlers: [console], level: WARNING}\n")
os.environ["LOG_CFG"] = str(_log_cfg)

import pyswarms
from pyswarms.single import GlobalBestPSO, LocalBestPSO

params = ps.PSOParams()
for name, f in ps.FUNCTIONS.items():
    b = ps.BOUNDS[name]
    lo, hi = -b * np.ones(DIM), b * np.ones(DIM)
    for vmax in (None, 0.2 * b):
        p_v = ps.PSOParams(vmax=vmax)
        np.random.seed(SEED + 7)
        opt = GlobalBestPSO(PARTICLES, DIM, p_v.options(), bounds=(lo, hi), bh_strategy="nearest",
                            velocity_clamp=None if vmax is None else (-vmax, vmax))
        cost, pos = opt.optimize(f, ITERS, verbose=False)
        stream = ps.pyswarms_stream(SEED + 7, PARTICLES, DIM, b, p_v)  # after the swarm pyswarms discards
        ours = ps.reference_pso(f, PARTICLES, DIM, b, ITERS, p_v, rng=stream)
        assert cost == ours["cost"] and np.array_equal(pos, ours["position"])
        assert np.array_equal(np.asarray(opt.cost_history), ours["history"])
print(f"pyswarms {pyswarms.__version__} GlobalBestPSO retraced bit for bit on 4 functions, with and without a "
      f"velocity clamp ({ITERS} iterations, {PARTICLES} particles, d = {DIM})")

# %% [markdown]
# With different seeds the two draw different numbers, so the fair comparison is statistical: the best
# cost reached over `SEEDS` seeds, and the time per iteration. Our global-best swarm and the island
# model (4 sub-swarms, ring migration every `EVERY` iterations, one machine) run beside pyswarms'
# global and local best (k = 4 nearest particles), all with the constriction coefficients.

# %%
runs = {k: {name: [] for name in ps.FUNCTIONS} for k in ("ours gbest", "ours islands", "pyswarms gbest",
                                                         "pyswarms lbest")}
secs = {k: 0.0 for k in runs}
for name, f in ps.FUNCTIONS.items():
    b = ps.BOUNDS[name]
    lo, hi = -b * np.ones(DIM), b * np.ones(DIM)
    for s in range(SEEDS):
        t0 = time.perf_counter()
        runs["ours gbest"][name].append(ps.reference_pso(f, PARTICLES, DIM, b, ITERS, params, seed=s)["cost"])
        t1 = time.perf_counter()
        runs["ours islands"][name].append(ps.reference_pso_islands(f, PARTICLES, DIM, b, ITERS, ISLANDS, EVERY,
                                                                   params=params, seed=s)["cost"])
        t2 = time.perf_counter()
        np.random.seed(1000 + s)
        gb = GlobalBestPSO(PARTICLES, DIM, params.options(), bounds=(lo, hi), bh_strategy="nearest")
        runs["pyswarms gbest"][name].append(gb.optimize(f, ITERS, verbose=False)[0])
        t3 = time.perf_counter()
        np.random.seed(1000 + s)
        lb = LocalBestPSO(PARTICLES, DIM, {**params.options(), "k": 4, "p": 2}, bounds=(lo, hi), bh_strategy="nearest")
        runs["pyswarms lbest"][name].append(lb.optimize(f, ITERS, verbose=False)[0])
        t4 = time.perf_counter()
        for k, dt in zip(runs, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            secs[k] += dt
fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
for ax, name in zip(axes, ps.FUNCTIONS):
    ax.boxplot([np.maximum(runs[k][name], 1e-300) for k in runs], showfliers=True)
    ax.set(yscale="log", title=name, ylabel="best cost")
    ax.set_xticks(range(1, len(runs) + 1), [k.replace(" ", "\n") for k in runs], fontsize=7)
plt.tight_layout()
plt.show()
print(f"{'':>15}" + "".join(f"{k:>16}" for k in runs))
for name in ps.FUNCTIONS:
    print(f"{name + ' median':>15}" + "".join(f"{np.median(runs[k][name]):>16.3g}" for k in runs))
per_iter = {k: secs[k] / (len(ps.FUNCTIONS) * SEEDS * ITERS) * 1e6 for k in runs}
print(f"{'us / iteration':>15}" + "".join(f"{per_iter[k]:>16.0f}" for k in runs))
for name in ps.FUNCTIONS:  # same algorithm, other random numbers: the medians agree within a factor of 10
    ratio = np.median(runs["ours gbest"][name]) / np.median(runs["pyswarms gbest"][name])
    assert 0.1 < ratio < 10, (name, ratio)

# %% [markdown]
# Global-best ours and pyswarms' reach the same quality: they are the same algorithm (retraced bit for
# bit above), fed other random numbers. Ours is faster per iteration because pyswarms stores the
# positions and velocities of every iteration in its history and goes through its handler objects each
# step. The island model on one machine pays NumPy's per-call overhead once per sub-swarm, so it is
# slower per iteration here; on ranks the sub-swarms run side by side. Local best and islands trade
# speed of convergence on the single bowl (sphere) for diversity, which is what they are for on
# multimodal functions, where a swarm that follows one leader can settle in a wrong basin. The spread
# over seeds is as large as most gaps between the methods: report distributions, not single runs.
#
# **Ant colonies have no production library here.** None installs into the course's pinned environment and
# runs: scikit-opt 0.6.6 installs, but its `ACA_TSP` calls `np.int`, which NumPy removed in 1.24; acopy 0.7.0
# would downgrade networkx to 2.x and click to 7. So the ant colonies are checked against something better
# than a library: the exact optimum, by Held-Karp, itself checked against enumerating every tour.
#
# ## 6. Failure modes and fault tolerance
#
# **Lost messages in consensus.** The sum is kept only if both ends of every edge apply the same
# exchange. When $j$'s value to $i$ is lost, $i$ either skips $j$'s term this step (`skip`) or reuses
# $j$'s last value (`stale`); $j$, which did receive $i$'s value, does not know, so the edge moves mass
# one way. The nodes still agree, but on a value that has wandered from the true mean by a random walk
# whose size grows, roughly, with the loss rate.

# %%
nb = sc.graph("torus", 36)
gamma = 1 / 5
Xc = np.random.default_rng(SEED).standard_normal((36, 1))
clean, _ = sc.run_consensus(Xc, nb, gamma, 300)
assert abs(clean[-1].mean() - Xc.mean()) < 1e-12
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
drift = {}
for on_loss, ls in (("skip", "-"), ("stale", ":")):
    for li, p_loss in enumerate(LOSS):
        ends = []
        for s in range(5):
            path, _ = sc.run_consensus(Xc, nb, gamma, 300, on_loss, faults=cluster.Faults(loss=p_loss, seed=s))
            ends.append(path[-1].mean() - Xc.mean())
            assert np.ptp(path[-1]) < 1e-6  # agreement is still reached
            if s == 0:
                axes[0].plot(path.mean(axis=(1, 2)) - Xc.mean(), color=f"C{li}", ls=ls,
                             label=f"{on_loss}, loss {p_loss:g}")
        drift[(on_loss, p_loss)] = float(np.sqrt(np.mean(np.square(ends))))
axes[0].set(xlabel="step", ylabel="mean(x_t) - mean(x_0)", title="the mean drifts under message loss")
axes[0].legend(fontsize=7)
for on_loss, marker in (("skip", "o-"), ("stale", "s:")):
    axes[1].plot(LOSS, [drift[(on_loss, p)] for p in LOSS], marker, label=on_loss)
axes[1].set(xscale="log", yscale="log", xlabel="loss rate", ylabel="RMS error of the agreed value (5 seeds)")
axes[1].legend()
plt.tight_layout()
plt.show()
print({k: round(v, 5) for k, v in drift.items()})
assert drift[("skip", max(LOSS))] > drift[("skip", min(LOSS))] > 1e-6

# %% [markdown]
# Push-sum (Kempe, Dobra and Gehrke 2003) fixes this for directed or lossy links by sending a weight
# with each value and never letting mass vanish; with acknowledgements and retransmission the edge
# stays symmetric at the cost of a round trip. Exercise 2 builds the first.
#
# **A crashed island.** An island that crashes stops sending; its ring successor gets a
# `PeerCrashedError` at the next migration, stops waiting for it and continues alone. Lost migration
# messages are skipped. The search still finishes, with the best of the survivors.

# %%
f, b = ps.rastrigin, ps.BOUNDS["rastrigin"]
healthy, _ = ps.run_pso(f, PARTICLES, DIM, b, ITERS, ISLANDS, EVERY, seed=SEED)
crashed, res = ps.run_pso(f, PARTICLES, DIM, b, ITERS, ISLANDS, EVERY, seed=SEED,
                          faults=cluster.Faults(crash={1: 2}), timeout=60)
lossy, _ = ps.run_pso(f, PARTICLES, DIM, b, ITERS, ISLANDS, EVERY, topology="all", seed=SEED,
                      faults=cluster.Faults(loss=0.3, seed=SEED))
assert isinstance(res.values[1], BaseException) and crashed["island"] != 1
print(f"Rastrigin best: healthy {healthy['cost']:.3f}; island 1 crashed after 2 migrations {crashed['cost']:.3f} "
      f"({res.values[1]}); 30% of migrations lost {lossy['cost']:.3f}")

# %% [markdown]
# **Boids** have no failure to tolerate in this model: a boid that stops is an obstacle the others
# avoid. A crashed strip rank, though, loses its boids, and a strip owner is a single point of failure
# the flock itself did not have; replicating the halo (each boid's state on two ranks) is Exercise 4.
#
# ## 7. Evaluation: iterations, rates and messages
#
# **Consensus time as the graph grows.** Iterations to a disagreement of $10^{-6}$ with
# $\gamma = 1/(d_{\max}+1)$, measured on the ranks (simulator) and predicted by
# $\lceil \log 10^{-6} / \log(1 - \gamma\lambda_2) \rceil$ (an upper bound: the start has components
# along faster modes too). A ring's $\lambda_2 \approx (2\pi/n)^2$ makes it grow as $n^2$; a torus's as
# $n$. A random geometric graph at twice its connectivity threshold is a different animal: its
# $\lambda_2$ is small already at small $n$ (a few long, thin links join its regions), and its largest
# degree, which caps $\gamma$, grows with $n$.

# %%
fam3 = ["ring", "torus", "geometric"]
table = []
for name in fam3:
    for n in GRAPH_SIZES:
        nb = sc.graph(name, n, seed=SEED)
        gamma = 1 / (1 + max(map(len, nb)))
        pred = sc.predicted_iterations(nb, gamma, 1e-6)
        Xc = np.random.default_rng(SEED).standard_normal((n, 1))
        t0 = time.perf_counter()
        path, res = sc.run_consensus(Xc, nb, gamma, int(pred), timeout=600)
        wall = time.perf_counter() - t0
        it = sc.iterations_to(sc.disagreement(path), 1e-6)
        assert it is not None and it <= pred
        table.append((name, n, sc.algebraic_connectivity(nb), pred, it, sum(s.messages_sent for s in res.stats), wall))
fig, ax = plt.subplots(figsize=(7, 4.2))
for ci, name in enumerate(fam3):
    r = [row for row in table if row[0] == name]
    ax.loglog([x[1] for x in r], [x[4] for x in r], "o-", color=f"C{ci}", label=f"{name}, measured")
    ax.loglog([x[1] for x in r], [x[3] for x in r], "--", color=f"C{ci}", label=f"{name}, predicted bound")
ax.set(xlabel="nodes n", ylabel="iterations to 1e-6", title="consensus iterations vs graph size")
ax.legend(fontsize=7)
plt.show()
print(f"{'graph':>10} {'n':>4} {'lambda_2':>9} {'predicted':>9} {'measured':>8} {'messages':>10} {'sim wall (s)':>12}")
for name, n, lam2, pred, it, msgs, wall in table:
    print(f"{name:>10} {n:>4} {lam2:>9.5f} {pred:>9.0f} {it:>8} {msgs:>10,} {wall:>12.2f}")

# %% [markdown]
# The measured count stays under the bound; how far under depends on how little of the start lies along
# the slowest eigenvector (the Fiedler vector) and how close the next eigenvalues are. The messages are
# $2|E|$ per step times the steps: on a ring of 100 nodes two million messages are spent waiting for
# information to travel around a cycle whose diameter is 50, while a torus of 100 nodes needs 70,000.
# Topology, not the number of nodes, sets the cost of agreement.
#
# **Boids: what a strip exchanges.** Messages and bytes per step from Section 4's check: four messages
# per rank per step, and bytes that follow the boids near a border.

# %%
print(f"{'K':>3} {'messages/step':>13} {'bytes/step':>10} {'bytes/step per boid':>19}")
for K, (msgs, byts) in strip_msgs.items():
    print(f"{K:>3} {msgs / check_steps:>13.0f} {byts / check_steps:>10.0f} {byts / check_steps / N_BOIDS:>19.1f}")
    assert msgs == (0 if K == 1 else 4 * K * check_steps)

# %% [markdown]
# Each rank's work per step is its own boids against its candidates, so the simulated speedup follows
# the largest strip; a flock that gathers in one strip (as a polarised flock does) unbalances the
# ranks, which is why real swarm simulators re-cut the space as the flock moves.
#
# **Ant colonies: one colony or several, with the same ants.** `ANTS` ants as one colony, or split into
# $K = 2$ and $4$ colonies that pass their best tour around a ring every 5 iterations, on `ACO_SEEDS`
# random instances of `CITIES` cities, without 2-opt (which finds these optima almost at once), beside
# `naive_aco`, Ant System with every ant depositing and no bounds. Left: the gap between the best tour so
# far and the Held-Karp optimum, averaged over the instances. Right: what the exchange costs per iteration,
# from the formulas of Section 3 and as the simulator counted it.

# %%
ACO_KS, ACO_EVERY = (1, 2, 4), 5
gaps, aco_msgs, aco_bytes = {K: [] for K in (*ACO_KS, "AS")}, {}, {}
t0 = time.perf_counter()
for s in range(ACO_SEEDS):
    _, Ds = tsp.euclidean_instance(CITIES, seed=100 + s)
    best, _ = tsp.reference_tsp(Ds)
    for K in ACO_KS:
        got, res = sa.run_aco(Ds, ANTS, ACO_ITERS, K, ACO_EVERY, "ring", no_ls, seed=s)
        assert np.all(got["history"] >= best)  # no tour beats the optimum
        gaps[K].append(100 * (got["history"] / best - 1))
        aco_msgs[K] = sum(st.messages_sent for st in res.stats)
        aco_bytes[K] = sum(st.bytes_sent for st in res.stats)
        assert aco_msgs[K] == ACO_ITERS // ACO_EVERY * sa.exchange_messages(K, "ring")
        assert aco_bytes[K] == ACO_ITERS // ACO_EVERY * sa.exchange_bytes(CITIES, K, "ring")
    gaps["AS"].append(100 * (sa.naive_aco(Ds, ANTS, ACO_ITERS, no_ls, seed=s)["history"] / best - 1))
aco_seconds = time.perf_counter() - t0
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for K in ACO_KS:
    axes[0].plot(np.arange(1, ACO_ITERS + 1), np.mean(gaps[K], axis=0), label=f"K = {K}, {ANTS // K} ants each")
axes[0].plot(np.arange(1, ACO_ITERS + 1), np.mean(gaps["AS"], axis=0), "k:", label=f"Ant System, {ANTS} ants")
axes[0].set(xscale="log", xlabel="iteration", ylabel="gap to the optimum (%), mean",
            title=f"MAX-MIN ant colonies, {CITIES} cities, {ANTS} ants in all")
axes[0].legend()
Ks = np.arange(1, 9)
for topology, marker in (("ring", "o-"), ("all", "s--")):
    axes[1].plot(Ks, [sa.exchange_messages(K, topology) / ACO_EVERY for K in Ks], marker, label=f"{topology} (formula)")
axes[1].plot(ACO_KS, [aco_msgs[K] / ACO_ITERS for K in ACO_KS], "k*", ms=11, label="ring, measured")
axes[1].set(xlabel="colonies K", ylabel="messages per iteration", title=f"exchange every {ACO_EVERY} iterations")
axes[1].legend()
plt.tight_layout()
plt.show()
print(f"{'K':>2} {'final gap % (mean)':>18} {'instances solved':>16} {'mean first iteration at optimum':>31} "
      f"{'messages/iter':>13} {'bytes/exchange':>14}")
for K in gaps:
    g = np.array(gaps[K])
    first = [int(np.argmax(row <= 0)) + 1 for row in g if row[-1] <= 0]
    cost = (f"{aco_msgs[K] / ACO_ITERS:>13.2f} {sa.exchange_bytes(CITIES, K, 'ring'):>14}" if K != "AS"
            else f"{'(one colony)':>28}")
    print(f"{K:>2} {g[:, -1].mean():>18.3f} {len(first):>9} of {len(g):<4} "
          f"{np.mean(first) if first else float('nan'):>31.1f} {cost}")
print(f"{len(gaps) * ACO_SEEDS} runs in {aco_seconds:.1f} s")
assert all(np.mean(gaps[K], axis=0)[-1] < 5 for K in gaps)

# %% [markdown]
# Every curve falls to within a few per cent of the optimum, and the table says on how many instances
# each setting found it exactly. On instances this small the naive Ant System does as well: its weakness,
# trails that converge on an early tour and stop the search, shows on instances of hundreds of cities,
# where MAX-MIN's bounds pay (Stuetzle and Hoos 2000). Splitting the ants has two opposite effects: a colony of fewer ants learns
# its trails from fewer tours per iteration, and $K$ colonies with their own trails explore $K$ regions at
# once, the diversity that the ring then spreads. Which wins depends on the instance and the budget, so, as
# with the PSO islands, compare distributions over instances, not one run. The price is small: a tour is
# $8(n+1)$ bytes whatever the number of ants, and the ring sends $K/M$ messages per iteration, while the
# all-to-all exchange sends $5(K-1)/M$ through its collectives. Exercise 6 sweeps $M$ and the topology.
#
# ## 8. Exercises
#
# 1. **Ring versus small world.** Add $m$ random chords to a ring of 100 nodes (Watts and Strogatz) and
#    plot $\lambda_2$ and the measured iterations to $10^{-6}$ against $m$. How many chords halve the time?
# 2. **Push-sum.** Write push-sum consensus over the communicator (each node halves its value and its
#    weight and keeps one half, sends the other to a neighbour) and show that its estimate stays
#    unbiased under the message loss of Section 6 when a lost half is resent.
# 3. **Fastest mixing.** For the random geometric graph of 36 nodes, find the symmetric weights with
#    the smallest second eigenvalue modulus (Xiao and Boyd 2004; a small semidefinite program with
#    cvxpy, or a subgradient method) and compare with $\gamma^\star$ and with Metropolis.
# 4. **Boids with a replicated halo.** Keep each boid's state on its owner and on the neighbour strip, so
#    that a crashed strip rank can be taken over. What does it cost in bytes per step?
# 5. **Migration interval.** Sweep $M \in \{1, 5, 20, 100, \infty\}$ for 8 islands on Rastrigin and Ackley
#    with 5 seeds each, and plot the median best cost and the messages. Where is the sweet spot?
# 6. **What colonies should exchange, and how often.** For $K = 4$ colonies of 3 ants on 12-city instances
#    without 2-opt, sweep the exchange interval $M \in \{1, 5, 20, \infty\}$ for the ring and the
#    all-to-all exchange: on how many of 6 instances do the colonies reach the Held-Karp optimum within 40
#    iterations, how soon, and for how many bytes? Then estimate the bytes per exchange if colonies swapped
#    their whole pheromone matrices instead of tours, and argue what that would do to their diversity.
#
# ## 9. Research directions
#
# - **Consensus under real networks.** The analysis above assumes a fixed graph, synchronous steps and
#   no loss. Time-varying graphs, asynchronous updates, quantised values and unreliable links each
#   change the rate or the fixed point; tight rates for their combination are open.
#   - Olfati-Saber, Fax and Murray, "Consensus and Cooperation in Networked Multi-Agent Systems",
#     Proceedings of the IEEE, 2007. The Laplacian dynamics, the role of lambda_2, switching topologies.
#   - Xiao and Boyd, "Fast Linear Iterations for Distributed Averaging", Systems and Control Letters,
#     2004. The optimal step and the fastest-mixing weights as a convex problem.
#   - Kempe, Dobra and Gehrke, "Gossip-Based Computation of Aggregate Information", FOCS, 2003. Push-sum.
#   - de Vos, Farhadkhani, Guerraoui, Kermarrec, Pires and Sharma, "Epidemic Learning: Boosting
#     Decentralized Learning with Randomized Communication", NeurIPS, 2023. Each node sends to a fresh
#     random set of peers every round; the changing graph gives better convergence bounds than static
#     and earlier dynamic topologies.
# - **Which graph to build.** Where agents can choose their links (robot formations, overlay networks),
#   maximising $\lambda_2$ under a budget of edges or of radio power is a hard combinatorial problem with
#   good relaxations but few guarantees.
#   - Fiedler, "Algebraic Connectivity of Graphs", Czechoslovak Mathematical Journal, 1973. The
#     definition and its bounds in terms of the graph's structure.
#   - Takezawa, Sato, Bao, Niwa and Yamada, "Beyond Exponential Graph: Communication-Efficient Topologies
#     for Decentralized Learning via Finite-time Convergence", NeurIPS, 2023. A topology with small
#     maximum degree on which all nodes reach exact consensus after finitely many rounds.
# - **Theory of particle swarms.** Stability regions of $(\omega, c_1, c_2)$ are known for simplified models,
#   but when PSO converges to a local optimum, and how to set topology and migration for a given
#   function, remain mostly empirical.
#   - Clerc and Kennedy, "The Particle Swarm: Explosion, Stability, and Convergence in a
#     Multidimensional Complex Space", IEEE Transactions on Evolutionary Computation, 2002. Constriction.
#   - Kennedy and Eberhart, "Particle Swarm Optimization", IEEE International Conference on Neural
#     Networks, 1995. The original algorithm.
# - **From boids to physical swarms.** Flocking rules assume instant, perfect sensing; real drones see
#   with delay and noise and collide. Guarantees of cohesion and collision avoidance for such swarms,
#   and rules learned rather than designed, are active areas.
#   - Reynolds, "Flocks, Herds, and Schools: A Distributed Behavioral Model", SIGGRAPH, 1987. Boids.
#   - Vicsek, Czirok, Ben-Jacob, Cohen and Shochet, "Novel Type of Phase Transition in a System of
#     Self-Driven Particles", Physical Review Letters, 1995. The polarisation order parameter and its
#     transition with noise.
#   - Brambati, Celani, Gherardi and Ginelli, "Learning to flock in open space by avoiding collisions and
#     staying together", arXiv preprint, 2025. Agents trained with multi-agent RL on a local cost alone
#     discover Vicsek-like alignment and cohesive flocks.
# - **Colonies at scale: what to exchange, and when.** Section 7 exchanged best tours on a fixed ring every
#   $M$ iterations. Whether to send tours, trail rows or whole pheromone matrices, to whom, and how often,
#   is still chosen by trial per problem; a rule that sets $M$ and the topology from the bytes a link can
#   carry and the diversity the colonies keep is open. A student can start from `run_aco`: measure the
#   iterations to the optimum against bytes for every pair of topology and $M$ (Exercise 6), then add an
#   adaptive $M$ that exchanges only when a colony's best has not improved for a while.
#   - Middendorf, Reischle and Schmeck, "Multi Colony Ant Algorithms", Journal of Heuristics, 2002. Colonies
#     on processors that exchange best solutions; the island model of `train_aco`.
#   - Stuetzle and Hoos, "MAX-MIN Ant System", Future Generation Computer Systems, 2000. The trail limits
#     and the single depositing ant used here.
# - **Learned heuristics and language-model swarms.** Neural solvers and LLMs now design what ACO's authors
#   tuned by hand: the heuristic $D^{-\nu}$, the prior over tours, even the update rule. How much of their gain
#   survives when colonies run distributed, with a byte budget per exchange, and whether an LLM agent can
#   be a swarm member at all at a swarm's message rates, are open. A student can start by replacing
#   $D^{-\nu}$ in `construct_tours` with a learned edge score (for example from a small regression on
#   optimal tours of Held-Karp instances) and measuring the iterations to the optimum.
#   - Ye, Wang, Cao, Liang and Li, "DeepACO: Neural-enhanced Ant Systems for Combinatorial Optimization",
#     NeurIPS, 2023. A graph neural network learns the heuristic matrix across instances; for this chapter,
#     the colonies' $D^{-\nu}$ becomes a trained model, evaluated once per instance before any ant walks.
#   - Kim, Choi, Kim, Son, Park and Bengio, "Ant Colony Sampling with GFlowNets for Combinatorial
#     Optimization", AISTATS, 2025. A GFlowNet learns a prior over many good tours that ACO then refines:
#     diversity comes from the learned prior, not only from separate colonies as in Section 7.
#   - Ye, Wang, Cao, Berto, Hua, Kim, Park and Song, "ReEvo: Large Language Models as Hyper-Heuristics with
#     Reflective Evolution", arXiv:2402.01145, 2024. An LLM writes and refines the heuristic code itself,
#     ACO's among others: the part of `construct_tours` a person chose here becomes the output of a search.
#   - Rahman, Schranz and Hayat, "LLM-Powered Swarms: A New Frontier or a Conceptual Stretch?",
#     arXiv:2506.14496, 2025. Boids and ACO with an LLM call per agent decision: the behaviour can be
#     emulated, but their LLM boids needed about 300 times the computation time of the classical ones: a
#     cost per agent and per step that Section 1's local rules exist to avoid.
#   - Strobel, Dorigo and Fritz, "LLM2Swarm: Robot Swarms that Responsively Reason, Plan, and Collaborate
#     through LLMs", arXiv:2410.11387, 2024. LLMs synthesise robot controllers, or run on every robot and
#     talk in natural language: the local rule of this chapter written, or replaced, by a language model.
#
# ## What's next
#
# Chapter 32 (Agent orchestration) returns to few, capable agents: a planner hands tasks of a graph to
# worker agents that call tools, and the questions become retries with idempotency keys, timeouts, and
# checkpointing a long run so that it resumes after a crash.
