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
# # Chapter 39. Robotics swarms
#
# Chapter 31 built swarms of points that flock and agree; Chapter 30 trained agents that learn to
# coordinate. A swarm of robots needs both, under the constraints of hardware: each robot has a radio
# that reaches a few metres and loses packets, a processor that computes its own move, and it may
# simply stop. This case study gives a swarm two jobs. In **coverage** the robots spread over an arena
# so that the places that matter most are near a robot (Lloyd's algorithm on a density, each robot
# computing its own Voronoi cell from what its radio hears). In **formation** they hold a shape while a
# leader walks to a goal (consensus on relative positions). Both run on the communicator with one
# robot per rank (or a block of robots per rank) and equal the centralised planner bit for bit; then
# we lose messages, crash robots, measure the control period against the swarm size, and ask whether a
# policy learned with the independent Q-learners of Chapter 30 covers an arena as well as Lloyd's rule.
#
# **Prerequisites:** Chapter 30 (Multi-agent RL: independent learners, the environment on a host rank,
# PettingZoo's parallel API), Chapter 31 (Swarm intelligence: local rules, boids, Laplacian consensus and
# the algebraic connectivity), and Chapter 4 for the communicator. Background: Voronoi diagrams, centroids.

# %% tags=["parameters"]
N_ROBOTS = 48  # smoke: 24
SIDE = 12.0  # smoke: 8.5
GRID = 48  # smoke: 36
COVER_STEPS = 60  # smoke: 25
FORM_ROBOTS = 12
FORM_STEPS = 300
KS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 48]  # smoke: [1, 2, 3, 5, 8, 24]
CHECK_STEPS = 20  # smoke: 10
LOSS = [0.0, 0.2, 0.4, 0.6]  # smoke: [0.0, 0.3, 0.6]
LOSS_SEEDS = 4  # smoke: 2
SWARM_SIZES = [16, 36, 64, 100]  # smoke: [16, 36]
GRID_M = 6
IQL_STEPS = 3000  # smoke: 400
INSTANCE_TYPE = "aws-c7i.xlarge"
SEED = 0

# %% [markdown]
# `N_ROBOTS` robots cover a square arena of side `SIDE` whose importance density lives on a `GRID` x
# `GRID` grid, for `COVER_STEPS` steps; `FORM_ROBOTS` robots hold a formation for `FORM_STEPS` steps.
# `KS` are the world sizes of the checks (`CHECK_STEPS` steps each) and of the scaling curve, `LOSS` the
# message-loss rates (each over
# `LOSS_SEEDS` seeds), `SWARM_SIZES` the swarms of the size sweep (the arena grows with them), `GRID_M`
# the side of the gridworld the learners train on for `IQL_STEPS` steps, and `INSTANCE_TYPE` the priced
# machine of the cost curve.
#
# ## 1. Motivation: which ceiling binds
#
# A central planner would hear every robot, compute every move and send it back. Two ceilings bind
# before its processor does. The **radio**: a robot's link reaches metres, not the whole arena, so
# most robots cannot reach the planner without relaying through others, and the planner's own radio
# must carry $2n$ messages per control tick. The **single point of failure**: when the planner stops,
# every robot stops. A local rule needs a robot to hear only its neighbours, whatever $n$ is. The
# arithmetic below assumes a 10 Hz control loop, 16-byte positions and a radio that takes 1 ms per
# packet: the planner's radio is saturated near 50 robots, while the local rule's load stays flat.

# %%
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, perf
from scaleoutai.agents import marl, marl_envs
from scaleoutai.agents import swarm_consensus as sc
from scaleoutai.cases import robotics as rb
from scaleoutai.cases import robotics_grid as rg
from scaleoutai.datasets import arenas, is_connected

tick_hz, per_packet_s, neighbours = 10, 1e-3, 8
print(f"{'robots':>7} {'planner radio busy (%)':>23} {'one robot, local rule (%)':>26}")
for n in (10, 50, 200, 1000):
    central = 2 * n * tick_hz * per_packet_s * 100  # every position in, every command out
    local = 2 * neighbours * tick_hz * per_packet_s * 100
    print(f"{n:>7} {central:>23.0f} {local:>26.0f}")

# %% [markdown]
# Above 100 % the planner cannot keep up at all; the robots' own radios stay at 16 % busy for any swarm
# size. The rest of the chapter asks what the local rules achieve, at what price in messages, and how
# gracefully they degrade when the radio loses packets.
#
# ## 2. Core concepts
#
# **The arena.** A square of side $L$ cut into grid cells $q$, each with an importance $\phi(q) \ge 0$
# (a floor plus a few bumps: where intruders come from, where the crop is ill) that sums to 1 and is 0
# on obstacles. `datasets.arenas` generates it from a seed, with start positions and formation shapes.
#
# **Coverage.** Robot $i$ at $x_i$ can sense the disc of radius $R = r/2$, where $r$ is the radio range.
# The coverage cost sums, over the cells, the importance times the squared distance to the nearest
# robot, capped at $R^2$ (a cell nobody senses costs the cap):
#
# $$H(x) = \sum_q \phi(q) \min\big(\min_i \lVert q - x_i\rVert^2, R^2\big).$$
#
# Robot $i$ owns the cells of its disc nearer to it than to any other robot (its range-limited Voronoi
# cell, ties to the lower id) and moves towards their weighted centroid $c_i$ (Lloyd 1982; Cortes et al.
# 2004 and 2005). Moving along $[x_i, c_i]$ lowers $\sum_{q \in V_i} \phi(q) \lVert q - x_i\rVert^2$,
# and reassigning cells to their nearest robot lowers it again, so **$H$ never increases**. Our robots
# also move at most `speed` per step and stay within the **tether** $D$ of their home (their start: a
# charging pad); a step that stops short on the segment keeps the guarantee.

# %%
where = arenas.arena(G=GRID, side=SIDE, bumps=3, obstacles=2, seed=SEED)
homes = arenas.start_positions(N_ROBOTS, where, "drop", seed=SEED)
params = rb.CoverageParams(radio=3.0, tether=0.75, speed=0.25, gain=1.0)
cover = rb.Coverage(where, homes, params, seconds=5e-3)
t0 = time.perf_counter()
ref_cover = rb.reference_coverage(cover, COVER_STEPS)
planner_s = time.perf_counter() - t0
H = np.array([rb.coverage_cost(X, where, params) for X in ref_cover])
assert np.all(np.diff(H) <= 1e-15)  # Lloyd never loses ground


def owners(X, R):
    """Owner of each grid cell (-1: no robot within R), from scipy's k-d tree."""
    from scipy.spatial import cKDTree

    d, idx = cKDTree(X).query(where.points())
    return np.where(d <= R, idx, -1).reshape(where.G, where.G)


fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
ext = (0, SIDE, 0, SIDE)
for ax, X, name in ((axes[0], ref_cover[0], "start"), (axes[1], ref_cover[-1], f"after {COVER_STEPS} steps")):
    own = owners(X, params.radio / 2).astype(float)
    own[own < 0] = np.nan
    ax.imshow(where.density, origin="lower", extent=ext, cmap="Greys")
    ax.imshow(np.mod(own * 7, 20), origin="lower", extent=ext, cmap="tab20", alpha=0.35)
    ax.contour(where.obstacle, levels=[0.5], colors="k", extent=ext)
    ax.plot(X[:, 0], X[:, 1], "k.", ms=6)
    ax.set(title=f"{name}: H = {rb.coverage_cost(X, where, params):.3f}", aspect="equal")
axes[2].plot(H, "o-", ms=3)
axes[2].set(xlabel="step", ylabel="coverage cost H", title="H never increases")
plt.tight_layout()
plt.show()
print(f"{N_ROBOTS} robots: H {H[0]:.4f} -> {H[-1]:.4f} in {COVER_STEPS} steps "
      f"(centralised planner, {planner_s:.2f} s on one core)")

# %% [markdown]
# Grey is the importance, colour the cells each robot owns, white the cells no robot senses. The robots
# spread out of each other's discs and drift towards the bumps as far as their tethers allow.
#
# **Formation.** Robots $i$ hold target offsets $z_i$ (a wedge, a circle). Follower $i$ moves by
#
# $$u_i = \gamma \sum_{j \in N(i)} \big((x_j - x_i) - (z_j - z_i)\big),$$
#
# which is Chapter 31's Laplacian consensus applied to $x_i - z_i$: all $x_i - z_i$ agree, that is, the
# robots stand in the shape. A leader that knows the goal walks to it and never listens, so the
# followers converge to the leader's frame at a rate set by the graph (on a connected graph the error
# goes to 0 once the leader stops). The **formation error** is the RMS distance from the shape after
# removing the centroids, $\sqrt{\frac1n \sum_i \lVert (x_i - \bar x) - (z_i - \bar z)\rVert^2}$.

# %%
Z = arenas.formation_shape(FORM_ROBOTS, "wedge", spacing=1.0)
form_nb = rb.candidates(Z, 2.1)  # who hears whom in formation: two slots along each arm, and across
fparams = rb.FormationParams(gamma=0.8 / (1 + max(map(len, form_nb))), speed=0.25)
dock = arenas.start_positions(FORM_ROBOTS, where, "dock", seed=SEED)
goal = np.array([0.75 * SIDE, 0.6 * SIDE])
form = rb.Formation(Z, form_nb, goal, fparams)
assert is_connected(form_nb)
ref_form = rb.reference_swarm(form, dock, FORM_STEPS)
err = np.array([rb.formation_error(X, Z) for X in ref_form])
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
ax = axes[0]
ax.imshow(where.obstacle, origin="lower", extent=ext, cmap="Greys", alpha=0.4)
for i in range(FORM_ROBOTS):
    ax.plot(ref_form[:, i, 0], ref_form[:, i, 1], lw=0.7, color="C0" if i else "C3")
for a, b in ((i, j) for i in range(FORM_ROBOTS) for j in form_nb[i] if i < j):
    ax.plot(*ref_form[-1][[a, b]].T, "k-", lw=0.6)
ax.plot(*ref_form[-1].T, "ko", ms=4)
ax.plot(*goal, "r*", ms=12)
ax.set(aspect="equal", title="wedge from the dock (leader in red, star: the goal of its centre)")
axes[1].semilogy(err)
axes[1].set(xlabel="step", ylabel="formation error", title="the formation forms, then follows the leader")
plt.tight_layout()
plt.show()
lam2 = sc.algebraic_connectivity(form_nb)
print(f"wedge graph: d_max = {max(map(len, form_nb))}, lambda_2 = {lam2:.3f}; gamma = {fparams.gamma:.3f}; "
      f"error {err[0]:.2f} -> {err[-1]:.2e}")
assert err[-1] < 1e-2 * err[0] and np.linalg.norm(ref_form[-1].mean(0) - goal) < 0.05

# %% [markdown]
# The robots leave the dock in a clump, sort themselves into the wedge while the leader is still
# walking, and arrive in formation. Obstacles are ignored here (a real swarm adds a repulsive term); the
# graph's algebraic connectivity $\lambda_2$ from Chapter 31 sets how fast the shape is restored.
#
# ## 3. The distribution and communication pattern
#
# The $n$ robots live on $K$ ranks in contiguous blocks (`collectives.block_bounds`): $K = n$ is the
# deployed swarm, one processor per robot; $K < n$ simulates several robots per machine; $K = 1$ is the
# centralised planner. A robot needs the positions of its neighbours every step, and there is no
# receive-from-any, so each rank must know **whom it waits for** without asking. The neighbour lists are
# therefore fixed for the run:
#
# * formation: the formation graph (who hears whom in the shape);
# * coverage: the **candidates** $\lVert h_i - h_j\rVert < r + 2D$ from the homes. A robot stays within
#   $D$ of its home, so two robots within radio range $r$ are always candidates, and only robots within
#   $r$ can own a cell of $i$'s disc: the list is complete for the whole run. It is a Verlet neighbour
#   list (Verlet 1967) whose skin is the tether.
#
# Per step, rank $r$ does one `sendrecv` with each peer rank, in increasing rank, carrying the positions
# of its robots that neighbour one of the peer's (`exchange_plan`); then it moves its robots. With one
# robot per rank a message is one 16-byte position. A wider tether buys freedom of movement with
# messages:

# %%
print(f"{'tether D':>9} {'candidates per robot':>21}")
for D in (0.0, 0.5, 0.75, 1.5, 3.0):
    nb = rb.candidates(homes, params.radio + 2 * D)
    print(f"{D:>9.2f} {np.mean([len(r) for r in nb]):>21.1f}")
plan = rb.exchange_plan(cover.nb, 4)
traced = cluster.run(rb.train_swarm, 4, args=(cover, homes, 2), trace=True,
                     network=cluster.Network(alpha=1e-3, beta=1e-6))
cluster.plot_timeline(traced, title="coverage, 2 steps, 4 ranks: exchange with each peer, then compute")
plt.show()
print("rank 0's peers and the robots it sends to each:", [(q, s.tolist()) for q, s, _ in plan[0]])

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `train_swarm` is the whole protocol, one function per rank, for either task: the exchange with each
# peer (a lost message keeps the last known positions, a crashed peer's robots are dropped), then the
# task's rule for each robot it owns. `Coverage.move` computes each robot's cell from its own position
# and the candidates' (`_own_cell`), then steps towards the centroid. `reference_swarm` runs the same
# rules on one machine and replays the radio of $K$ ranks, losses included.

# %%
from scaleoutai.notebooks import show

show(rb.train_swarm, rb.exchange_plan, rb.Coverage, rb.reference_swarm)

# %% [markdown]
# The checks: for every $K$ in `KS` and for more ranks than robots, the distributed coverage equals the
# per-robot rules on one machine bit for bit (every rank sees exact positions when nothing is lost), and
# those equal the vectorised centralised planner to rounding; the formation likewise.

# %%
per_robot = rb.reference_swarm(cover, homes, COVER_STEPS)
assert np.allclose(per_robot, ref_cover, rtol=0, atol=1e-12)
for K in KS + [N_ROBOTS + 5]:
    path, res = rb.run_swarm(cover, homes, CHECK_STEPS, K, timeout=300)
    assert np.array_equal(path, per_robot[:CHECK_STEPS + 1]), K
    fpath, _ = rb.run_swarm(form, dock, 2 * CHECK_STEPS, min(K, FORM_ROBOTS + 3), timeout=300)
    assert np.array_equal(fpath, ref_form[:2 * CHECK_STEPS + 1]), K
print(f"coverage and formation equal the centralised planner for K in {KS + [N_ROBOTS + 5]}")

# %% [markdown]
# ## 5. The same task with production libraries: scipy.spatial and PettingZoo
#
# The chapter table names no production library for this case, so we check our geometry against
# **scipy.spatial** and our learning environment against **PettingZoo**. First, the neighbour lists:
# `cKDTree.query_pairs` finds the same candidate pairs, and the k-d tree's nearest robot for every grid
# cell is the owner Lloyd's step uses.

# %%
import scipy
from scipy.spatial import ConvexHull, Voronoi, cKDTree

reach = params.radio + 2 * params.tether
pairs = cKDTree(homes).query_pairs(reach * (1 - 1e-12))
ours = {(i, j) for i in range(N_ROBOTS) for j in cover.nb[i] if i < j}
assert ours == pairs
X = ref_cover[-1]
d2 = ((where.points()[:, None, :] - X[None]) ** 2).sum(-1)
near_ours = np.argmin(d2, axis=1)
dist, near_kd = cKDTree(X).query(where.points())
tied = np.sort(d2, axis=1)[:, 1] - d2.min(axis=1) < 1e-12
assert np.array_equal(near_ours[~tied], near_kd[~tied])
print(f"scipy {scipy.__version__}: {len(pairs)} candidate pairs agree; nearest robot agrees on "
      f"{(~tied).sum()} of {len(tied)} cells ({tied.sum()} exact ties)")

# %% [markdown]
# Second, the cells themselves. With a uniform importance and a range that covers the arena, a robot's
# cell is its full Voronoi cell clipped to the square. scipy's `Voronoi` does not clip, so we mirror the
# robots across the four walls: every original robot's region is then bounded and equals its clipped
# cell. The polygon centroids must match the grid centroids one Lloyd step moves to, within the grid's
# resolution.

# %%
flat = arenas.arena(G=GRID, side=SIDE, bumps=0, obstacles=0, floor=1.0, seed=SEED)
wide = rb.CoverageParams(radio=4 * SIDE, tether=2 * SIDE, speed=2 * SIDE, gain=1.0)
to_centroid = rb.lloyd_step(homes, rb.Coverage(flat, homes, wide))
mirrored = np.concatenate([homes, homes * [-1, 1], homes * [1, -1], [2 * SIDE, 0] + homes * [-1, 1],
                           [0, 2 * SIDE] + homes * [1, -1]])
vor = Voronoi(mirrored)
poly_c = np.empty_like(homes)
for i in range(N_ROBOTS):
    V = vor.vertices[vor.regions[vor.point_region[i]]]
    V = V[ConvexHull(V).vertices]
    x, y = V[:, 0], V[:, 1]
    cross = x * np.roll(y, -1) - np.roll(x, -1) * y
    poly_c[i] = [((x + np.roll(x, -1)) * cross).sum(), ((y + np.roll(y, -1)) * cross).sum()] / (3 * cross.sum())
gap = np.abs(to_centroid - poly_c).max()
print(f"Voronoi polygon centroids vs grid centroids: max gap {gap:.4f} (grid cell {flat.h:.3f})")
assert gap < flat.h

# %% [markdown]
# **Learned policies.** Chapter 30 trained independent Q-learners on environments with a fixed
# contract; `robotics_grid.CoverageGrid` follows it: $n$ robots on a coarse `GRID_M` x `GRID_M` version
# of the same arena, five moves, a shared reward equal to the importance covered this step (each robot
# covers its 3 x 3 block), and an observation of a robot's own cell plus the direction to its nearest
# robot. Wrapped by `marl_envs.as_pettingzoo`, it must pass PettingZoo's own `parallel_api_test`.

# %%
import pettingzoo
from pettingzoo.test import parallel_api_test

coarse = arenas.coarsen(where, GRID_M)
env = rg.CoverageGrid(coarse, n_agents=3, horizon=20, start="drop")
parallel_api_test(marl_envs.as_pettingzoo(env, max_cycles=20, name="coverage"), num_cycles=100)
print(f"PettingZoo {pettingzoo.__version__}: parallel_api_test passed on CoverageGrid "
      f"({env.n_agents} robots, {env.n_obs} observations, {env.n_actions} actions)")

# %% [markdown]
# The learners train on the communicator exactly as in Chapter 30: the environment on rank 0, one robot's
# learner on each other rank. A short run first equals the one-machine loop bit for bit; then the full
# training.

# %%
short, _ = marl.run_iql(env, 3, 50, E=16, seed=SEED, timeout=120)
want = marl.reference_iql(env, 50, E=16, seed=SEED)
assert all(np.array_equal(short["Q"][i], want["Q"][i]) for i in range(3))
t0 = time.perf_counter()
learned, res_iql = marl.run_iql(env, 3, IQL_STEPS, E=32, lr=0.2, gamma=0.9, seed=SEED, timeout=600)
iql_s = time.perf_counter() - t0
tables = [learned["Q"][i] for i in range(3)]
curve = learned["curve"].mean(axis=1)
k = max(1, IQL_STEPS // 20)
plt.figure(figsize=(7, 3.6))
plt.plot(np.convolve(curve, np.ones(k) / k, mode="valid"))
plt.xlabel("training step")
plt.ylabel("covered importance (moving mean)")
plt.title("independent Q-learners on the coverage gridworld")
plt.show()
print(f"{IQL_STEPS} steps x 32 copies in {iql_s:.1f} s; {sum(s.messages_sent for s in res_iql.stats):,} messages")

# %% [markdown]
# The same starts and seeds then score each policy: uniformly random moves, the boids separation rule
# (step away from the nearest robot), Lloyd's rule on the grid (step towards the centroid of one's grid
# Voronoi cell) and the learned tables played greedily.

# %%
rules = {"random": rg.random_rule, "separation (boids)": rg.dispersion_rule, "Lloyd": rg.lloyd_rule,
         "learned (IQL)": rg.table_rule(tables)}
scores = {name: [rg.evaluate_rule(env, rule, 100, 32, seed=s) for s in range(3)] for name, rule in rules.items()}
plt.figure(figsize=(7, 3.6))
plt.bar(list(scores), [np.mean(v) for v in scores.values()], yerr=[np.std(v) for v in scores.values()], capsize=4)
plt.ylabel("covered importance per step")
plt.title("hand-written rules vs learned policies, same arena and seeds")
plt.show()
for name, v in scores.items():
    print(f"{name:>20}: {np.mean(v):.3f} +- {np.std(v):.3f}")
assert np.mean(scores["Lloyd"]) > np.mean(scores["random"]) + 0.1
assert np.mean(scores["learned (IQL)"]) > np.mean(scores["random"])

# %% [markdown]
# Lloyd's rule wins clearly and needs no training; the learned tables beat random moves but stay behind
# it. The learners see only their own cell and one direction, a table per robot, and a shared reward in
# which the others' moves are noise (Chapter 30's credit-assignment problem): a richer observation and a
# centralised critic narrow the gap, at the price of far more training. Hand-written rules with a
# guarantee remain the baseline a learned swarm policy has to beat.
#
# ## 6. Failure modes and fault tolerance
#
# **A lossy radio.** With `cluster.Faults(loss=..., seed=...)` each message is lost with that chance; the
# receiver's `recv` raises `MessageLostError` when the message was due, and the robot keeps using the
# last position it heard. The lossy runs equal `reference_swarm` replaying the same losses (the
# simulator draws one number per send from a generator seeded by the seed and the sender's rank). Then
# the sweep: final coverage cost and formation error against the loss rate, over `LOSS_SEEDS` seeds.

# %%
for K in (2, 5, N_ROBOTS):
    lp, _ = rb.run_swarm(cover, homes, CHECK_STEPS, K, faults=cluster.Faults(loss=0.3, seed=K), timeout=300)
    assert np.array_equal(lp, rb.reference_swarm(cover, homes, CHECK_STEPS, K=K, loss=0.3, seed=K))
cover_at, form_at = {}, {}
t0 = time.perf_counter()
for p_loss in LOSS:
    for s in range(LOSS_SEEDS):
        faults = cluster.Faults(loss=p_loss, seed=s) if p_loss > 0 else None
        path, _ = rb.run_swarm(cover, homes, COVER_STEPS, N_ROBOTS, faults=faults, timeout=300)
        cover_at.setdefault(p_loss, []).append(rb.coverage_cost(path[-1], where, params))
        fpath, _ = rb.run_swarm(form, dock, FORM_STEPS, FORM_ROBOTS, faults=faults, timeout=300)
        form_at.setdefault(p_loss, []).append(rb.formation_error(fpath[-1], Z))
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, data, name in ((axes[0], cover_at, "final coverage cost H"), (axes[1], form_at, "final formation error")):
    ax.errorbar(LOSS, [np.mean(data[p]) for p in LOSS], yerr=[np.std(data[p]) for p in LOSS], fmt="o-", capsize=4)
    ax.set(xlabel="message loss rate", ylabel=name, title=f"{name} vs loss ({LOSS_SEEDS} seeds)")
axes[0].axhline(H[0], ls=":", color="grey", label="at the start")
axes[0].legend()
plt.tight_layout()
plt.show()
for p in LOSS:
    print(f"loss {p:.1f}: H {np.mean(cover_at[p]):.4f} +- {np.std(cover_at[p]):.4f}, "
          f"formation error {np.mean(form_at[p]):.2e}   ({time.perf_counter() - t0:.0f} s so far)")
assert all(np.mean(cover_at[p]) < H[0] for p in LOSS)  # still far better than no coverage control
assert np.mean(cover_at[max(LOSS)]) < H[-1] * 1.1  # graceful: within 10 % of the loss-free result

# %% [markdown]
# Coverage barely notices: a stale neighbour position shifts a cell boundary a little, and the next
# message corrects it. Formation suffers more, because a follower that works from an old position of
# its neighbour keeps correcting towards where the neighbour was, and the errors compound along the
# chain from the leader; it still converges (no message is needed once everyone is in place) but later.
#
# **A crashed robot.** `Faults(crash={r: n})` stops robot $r$ at its $(n+1)$-th send; its neighbours'
# next `recv` raises `PeerCrashedError`, they drop it, and their cells grow into the area it covered.
# The crashed robot is the one in the densest place, and it dies when the swarm has converged.

# %%
settled = ref_cover[-1]
victim = int(np.argmax([rb.coverage_cost(np.delete(settled, i, 0), where, params) for i in range(N_ROBOTS)]))
recover = rb.Coverage(where, homes, params)
path, res = rb.run_swarm(recover, homes, COVER_STEPS + 30, N_ROBOTS, timeout=300,
                         faults=cluster.Faults(crash={victim: COVER_STEPS * len(cover.nb[victim])}))
alive = np.delete(np.arange(N_ROBOTS), victim)
assert isinstance(res.values[victim], BaseException) and np.isnan(path[:, victim]).all()
H_alive = [rb.coverage_cost(X[alive], where, params) for X in path]
with_victim = rb.coverage_cost(settled, where, params)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
own = owners(path[-1, alive], params.radio / 2).astype(float)
own[own < 0] = np.nan
axes[0].imshow(where.density, origin="lower", extent=ext, cmap="Greys")
axes[0].imshow(np.mod(own * 7, 20), origin="lower", extent=ext, cmap="tab20", alpha=0.35)
axes[0].plot(*path[-1, alive].T, "k.", ms=6)
axes[0].plot(*settled[victim], "rx", ms=12, mew=3)
axes[0].set(aspect="equal", title="after the crash (red x): neighbours moved in")
axes[1].plot(range(COVER_STEPS, COVER_STEPS + 31), H_alive[COVER_STEPS:], "o-", ms=3, label="survivors")
axes[1].axhline(with_victim, color="grey", ls=":", label="before the crash, all robots")
axes[1].set(xlabel="step", ylabel="coverage cost H", title="the survivors re-cover")
axes[1].legend()
plt.tight_layout()
plt.show()
print(f"robot {victim} crashed at step {COVER_STEPS}: H {with_victim:.4f} -> {H_alive[COVER_STEPS]:.4f} "
      f"(hole) -> {H_alive[-1]:.4f} after 30 steps of re-covering")
assert H_alive[-1] < H_alive[COVER_STEPS + 1] and np.all(np.diff(H_alive[COVER_STEPS + 1:]) <= 1e-12)

# %% [markdown]
# The cost jumps when the robot's area is left uncovered, then falls as the neighbours' cells grow into
# it, monotonically again once the crash is known. The tether limits how far they can follow: part of
# the hole stays open, which is the price of the fixed candidate lists (Exercise 3 rebuilds them).
#
# ## 7. Evaluation: control period, speedup, cost and locality
#
# **Speedup vs K.** Time here is the simulator's alpha-beta clock, not this machine's: a robot's cell
# computation is charged 5 ms of compute per step (`comm.compute`), and the radio costs $\alpha$ = 1 ms
# per message and $\beta$ = 1 us per byte. $T_1$ is the centralised planner (one processor, all $n$
# robots, no messages); $T_K$ is the makespan of the same run on $K$ processors. Every point is logged
# to MLflow with `capstone.track` from inside the ranks (wall time of the simulation, plus the simulated
# time as a metric), then read back.

# %%
WORK = Path(tempfile.mkdtemp(prefix="ch39-"))
URI = f"sqlite:///{WORK / 'mlflow.db'}"
EXPERIMENT = "ch39-coverage"
radio = cluster.Network(alpha=1e-3, beta=1e-6)
price = capstone.lookup(INSTANCE_TYPE)


def tracked_swarm(comm, task, X0, steps, uri):
    """One tracked run: the swarm on every rank, the simulated makespan logged from rank 0."""
    with capstone.track(comm, experiment=EXPERIMENT, uri=uri, instance_type=INSTANCE_TYPE, startup_time=0.0,
                        params={"robots": len(X0), "steps": steps, "clock": "simulated"}) as run:
        out = rb.train_swarm(comm, task, X0, steps)
        comm.barrier()
        run.log_metrics({"sim_time": comm.clock,
                         "sim_cost": perf.run_cost(price.price_per_hour, comm.size, comm.clock)})
    return out


with capstone.track(None, experiment=EXPERIMENT, uri=URI, instance_type=INSTANCE_TYPE, startup_time=0.0,
                    baseline=True, params={"robots": N_ROBOTS, "steps": COVER_STEPS, "clock": "simulated"}) as run:
    base = rb.reference_coverage(cover, COVER_STEPS)
    T1 = COVER_STEPS * N_ROBOTS * cover.seconds  # one processor computes every robot's move
    run.log_metrics({"sim_time": T1, "sim_cost": perf.run_cost(price.price_per_hour, 1, T1)})
sim = {}
for K in KS:
    res = cluster.run(tracked_swarm, K, args=(cover, homes, COVER_STEPS, URI), network=radio, timeout=600)
    sim[K] = res.sim_time
runs = capstone.load_runs(EXPERIMENT, uri=URI)
assert len(runs) == len(KS) + 1 and all(r["status"] == "FINISHED" for r in runs)
logged = {int(r["world_size"]): r["sim_time"] for r in runs if r["role"] != "baseline"}
assert all(abs(logged[K] - sim[K]) < 1e-12 for K in KS)
Ks = np.array(KS)
TK = np.array([logged[K] for K in KS])
S, E = T1 / TK, T1 / TK / Ks
cost = np.array([perf.run_cost(price.price_per_hour, K, t) for K, t in zip(KS, TK)])
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
axes[0].plot(Ks, S, "o-", label="measured (simulated)")
axes[0].plot(Ks, Ks, "k:", label="ideal")
axes[0].set(xlabel="K processors", ylabel="speedup S_p = T_1 / T_p", title="control step, speedup")
axes[0].legend()
axes[1].plot(Ks, E, "o-")
axes[1].set(xlabel="K processors", ylabel="efficiency E_p", ylim=(0, 1.05), title="efficiency")
axes[2].plot(TK / COVER_STEPS * 1e3, cost * 1e6, "o-")
for K, t, c in zip(KS, TK, cost):
    axes[2].annotate(f"K={K}", (t / COVER_STEPS * 1e3, c * 1e6), fontsize=7)
axes[2].set(xlabel="control period (ms per step)", ylabel="cost of the run (micro-USD)",
            title=f"time vs cost ({INSTANCE_TYPE})")
plt.tight_layout()
plt.show()
print(f"{'K':>3} {'T_K (s)':>8} {'ms/step':>8} {'S_p':>6} {'E_p':>5}   price {price.price_per_hour} USD/h "
      f"({price.source[:40]}..., {price.date})")
for K, t, s, e in zip(KS, TK, S, E):
    print(f"{K:>3} {t:>8.3f} {t / COVER_STEPS * 1e3:>8.1f} {s:>6.2f} {e:>5.2f}")
assert S[-1] > 1 and np.all(E <= 1 + 1e-9)

# %% [markdown]
# The speedup follows the ideal line while compute dominates, then bends over and stops growing: each
# rank pays one message per peer rank per step, and once the blocks are smaller than a robot's candidate
# list almost every candidate lives on another rank, so the messages grow while the compute saved
# shrinks. The deployed swarm ($K = n$) is not the fastest configuration per step: its control period is
# set by the radio (a millisecond per candidate) rather than by the processor (5 ms per robot). The cost
# of a run grows with $K$ for the same reason. A swarm pays for its robustness and its locality, not for
# speed; what locality buys is a control period bounded by a robot's neighbourhood, not by $n$, which the
# next sweep shows.
#
# **Quality and locality vs swarm size.** The arena grows with the swarm so that the density of robots
# $\rho = n / L^2$ stays the same; one robot per rank. The coverage improvement $H_T / H_0$ should stay
# flat, and the messages per robot per step should stay below the candidates of a robot far from the
# walls, $\pi \rho (r + 2D)^2$ on average, whatever $n$: a local rule does the same job at any size.

# %%
sizes = []
for n in SWARM_SIZES:
    side = SIDE * np.sqrt(n / N_ROBOTS)
    w_n = arenas.arena(G=GRID, side=side, bumps=max(1, n // 16), obstacles=max(1, n // 24), seed=SEED)
    h_n = arenas.start_positions(n, w_n, "drop", seed=SEED)
    task = rb.Coverage(w_n, h_n, params, seconds=cover.seconds)
    path, res = rb.run_swarm(task, h_n, COVER_STEPS, n, network=radio, timeout=600)
    msgs = np.array([s.messages_sent for s in res.stats]) / COVER_STEPS
    ratio = rb.coverage_cost(path[-1], w_n, params) / rb.coverage_cost(path[0], w_n, params)
    sizes.append((n, ratio, msgs.mean(), msgs.max(), res.sim_time / COVER_STEPS))
interior = np.pi * N_ROBOTS / SIDE ** 2 * (params.radio + 2 * params.tether) ** 2
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
axes[0].plot([s[0] for s in sizes], [s[1] for s in sizes], "o-")
axes[0].set(xlabel="robots n", ylabel="H_T / H_0", ylim=(0, 1.05), title="coverage gained vs swarm size")
axes[1].plot([s[0] for s in sizes], [s[2] for s in sizes], "o-", label="mean")
axes[1].plot([s[0] for s in sizes], [s[3] for s in sizes], "s:", label="max")
axes[1].plot([s[0] for s in sizes], [s[0] - 1 for s in sizes], "k--", lw=0.8, label="all-to-all (n - 1)")
axes[1].axhline(interior, color="grey", ls=":", label="interior robot, pi rho (r + 2D)^2")
axes[1].set(xlabel="robots n", ylabel="messages per robot per step", title="locality")
axes[1].legend()
plt.tight_layout()
plt.show()
print(f"{'n':>4} {'H_T/H_0':>8} {'msgs/robot/step':>16} {'max':>5} {'ms/step':>8}   (interior: {interior:.1f})")
for n, ratio, mean, mx, per in sizes:
    print(f"{n:>4} {ratio:>8.3f} {mean:>16.1f} {mx:>5.0f} {per * 1e3:>8.1f}")
assert all(s[2] < 1.1 * interior and s[3] < 2 * interior for s in sizes)  # set by the neighbourhood, not by n
assert max(s[1] for s in sizes) - min(s[1] for s in sizes) < 0.15

# %% [markdown]
# The mean messages per robot per step creep up towards the interior value from below: a robot near a
# wall has fewer candidates, and the share of such robots falls as the arena grows. They never pass it,
# however many robots there are beyond the radio's reach, while an all-to-all planner grows as $n$. The
# control period follows the busiest robot, the one with the most candidates (a local crowd), not the
# swarm size; the coverage gained per robot is the same at every size.
#
# ## 8. Exercises
#
# 1. **The price of the skin.** Sweep the tether $D$ from 0 to 3 for `N_ROBOTS` robots: plot the final
#    coverage cost and the messages per robot per step. Where does a wider tether stop paying?
# 2. **Obstacle-aware coverage.** Replace the Euclidean distance in `_own_cell` by the geodesic distance
#    around obstacles (a breadth-first search on the grid from each robot) and compare the cells near an
#    obstacle's corner. Does $H$ still never increase?
# 3. **Rebuilding the lists.** Drop the tether: every $M$ steps, rebuild the candidate lists with an
#    all-gather of positions (Chapter 4) and a skin of $2 M$ `speed`. Measure messages per robot per step
#    against $n$ and $M$, and decide what a lost all-gather message must do so that no rank deadlocks.
# 4. **A better learner.** Train Chapter 30's centralised critic (COMA-style) or independent learners with
#    a richer observation (the direction to the two nearest robots and to the densest unowned cell) and
#    close the gap to Lloyd's rule. How many training steps does it take?
# 5. **Formation under loss.** Implement the "assume in formation" estimate (a neighbour whose message is
#    lost is taken to stand at its slot relative to me) and compare it with the last known position.
#
# ## 9. Research directions
#
# - **Coverage with guarantees under real sensing and communication.** Lloyd-type coverage is proven for
#   exact positions, known densities and reliable links; guarantees under packet loss, delays, unknown or
#   time-varying densities and non-convex arenas are partial.
#   - Cortes, Martinez, Karatas and Bullo, "Coverage Control for Mobile Sensing Networks", IEEE
#     Transactions on Robotics and Automation, 2004. The gradient of H and the distributed Lloyd law.
#   - Cortes, Martinez and Bullo, "Spatially-Distributed Coverage Optimization and Control with
#     Limited-Range Interactions", ESAIM: Control, Optimisation and Calculus of Variations, 2005. The
#     range-limited cells used here.
#   - Schwager, Rus and Slotine, "Decentralized, Adaptive Coverage Control for Networked Robots",
#     International Journal of Robotics Research, 2009. Learning the density while covering it.
#   - Durham, Carli, Frasca and Bullo, "Discrete Partitioning and Coverage Control for Gossiping Robots",
#     IEEE Transactions on Robotics, 2012. Pairwise gossip instead of synchronous neighbour exchange.
#   - Agarwal, Muthukrishnan, Gosrich, Kumar and Ribeiro, "LPAC: Learnable Perception-Action-Communication
#     Loops with Applications to Coverage Control", arXiv preprint, 2024. A graph neural network learns
#     what robots tell their neighbours and beats Lloyd-based coverage when the density is unknown.
# - **Formation and consensus over lossy, changing graphs.** Convergence of formation control when links
#   come and go with the robots' positions and lose packets is understood for special cases; rates and
#   robustness margins for the general case are open.
#   - Olfati-Saber, Fax and Murray, "Consensus and Cooperation in Networked Multi-Agent Systems",
#     Proceedings of the IEEE, 2007. Consensus on switching graphs and formation as consensus.
# - **Learned swarm policies that beat designed ones.** Deep multi-agent RL can learn swarm behaviour,
#   but matching designed controllers with guarantees, and transferring from simulation to hardware,
#   remain open.
#   - Huttenrauch, Sosic and Neumann, "Deep Reinforcement Learning for Swarm Systems", Journal of Machine
#     Learning Research, 2019. Mean-embedding observations for large swarms.
#   - Brambilla, Ferrante, Birattari and Dorigo, "Swarm Robotics: A Review from the Swarm Engineering
#     Perspective", Swarm Intelligence, 2013. Design methods and their gaps.
#   - Huang, Yang, Krupani, Şenbaşlar, Batra and Sukhatme, "Collision Avoidance and Navigation for a
#     Quadrotor Swarm Using End-to-end Deep Reinforcement Learning", arXiv preprint, 2023. Attention over
#     neighbours and obstacles, trained in simulation, transferred zero-shot to small real quadrotors.
# - **Language as the coordination layer.** Robots that plan together by exchanging natural language can
#   take on new tasks without new code, but the dialogue is slow, unverified and hard to bound in time.
#   - Mandi, Jain and Song, "RoCo: Dialectic Multi-Robot Collaboration with Large Language Models", arXiv
#     preprint, 2023. Each arm is driven by a language model that negotiates sub-tasks and waypoints with
#     the others, with collision checks fed back into the dialogue.
# - **Scaling physical swarms.** A thousand robots show that local rules scale, and that the failure of a
#   few and the drift of many dominate at that size.
#   - Rubenstein, Cornejo and Nagpal, "Programmable Self-Assembly in a Thousand-Robot Swarm", Science,
#     2014. Shape formation with the Kilobot swarm.
#   - Lloyd, "Least Squares Quantization in PCM", IEEE Transactions on Information Theory, 1982. The
#     centroid iteration itself.
#   - Verlet, "Computer Experiments on Classical Fluids. I. Thermodynamical Properties of Lennard-Jones
#     Molecules", Physical Review, 1967. Neighbour lists with a skin.
#
# ## What's next
#
# Chapter 40 (Agentic applications) turns from robots to software agents: LLM-driven agents that plan,
# call tools and hand work to each other, where the questions of this chapter (whom to wait for, what a
# lost message or a crashed agent does to the whole) come back at the level of a workflow.
