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
# # Chapter 30. Multi-agent reinforcement learning
#
# Chapter 20 scaled one agent's learning out over many actors; the environment still had a single
# decision maker. Here several agents act in one environment at the same time, each from its own
# observation, and each one's reward depends on what all of them do. Chapter 28 computed the equilibria
# of such games when the payoffs are known; this chapter lets the agents *learn* them from play. We build
# three families on the communicator, each agent a rank so its messages are counted: independent
# Q-learners, a centralised critic that trains decentralised actors (the COMA recipe), and self-play
# in a zero-sum game, where what converges (the average) and what does not (the last iterate) differ.
# PettingZoo, the standard multi-agent environment API, then checks our environments and hosts an
# MPE2 particle world on which our learners must beat random agents.
#
# **Prerequisites:** Chapter 20 (Distributed reinforcement learning: actors, learners, policy gradients,
# `scaleoutai.parallel.rl`), Chapter 28 (Game theory: Nash equilibria, no-regret learning, exploitability),
# and Chapter 4 for the communicator. Background: tabular Q-learning and REINFORCE.

# %% tags=["parameters"]
SEEDS = 8  # smoke: 4
IQL_STEPS = 400  # smoke: 200
PP_STEPS = 3000  # smoke: 800
PP_SIZE = 5
COMA_AGENTS = 3
COMA_STEPS = 150  # smoke: 60
SP_ROUNDS = 3000  # smoke: 800
MPE_EPISODES = 80  # smoke: 60
KS = [1, 2, 3, 5]
SEED = 0

# %% [markdown]
# `SEEDS` independent runs give every learning curve its confidence band; `IQL_STEPS` and `PP_STEPS` are
# the batched steps of independent Q-learning on the climbing game and on the `PP_SIZE` x `PP_SIZE`
# predator-prey torus; `COMA_AGENTS` and `COMA_STEPS` size the centralised-critic experiment, `SP_ROUNDS`
# the self-play rounds, `MPE_EPISODES` the training episodes on MPE2, and `KS` the world sizes of the
# equality checks.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling is the **joint action space** and where decisions can be taken. A single controller for
# $n$ agents with $A$ actions each must choose among $A^n$ joint actions, and it needs every agent's
# observation at every step, over links that robots, vehicles or trading agents do not have. Letting each
# agent decide from its own observation keeps the policy at $n A$ outputs and the decision local, at the
# price that every agent now learns in a world that the others keep changing.

# %%
import time
from functools import partial

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import marl
from scaleoutai.agents import marl_envs as me
from scaleoutai.agents import marl_selfplay as sp

for n in (2, 4, 8, 16):
    print(f"n = {n:>2} agents, A = 5 actions: {5 ** n:>15,} joint actions for one controller, "
          f"{5 * n:>3} outputs for n local policies")


def band(ax, curves, label, smooth=1, x=None):
    """Mean over seeds with a 95% confidence band (normal approximation) of a (seeds, steps) array."""
    c = np.asarray(curves, dtype=float)
    if smooth > 1:
        k = np.ones(smooth) / smooth
        c = np.array([np.convolve(row, k, mode="valid") for row in c])
    m, half = c.mean(axis=0), 1.96 * c.std(axis=0, ddof=1) / np.sqrt(len(c))
    x = np.arange(len(m)) if x is None else x[:len(m)]
    ax.plot(x, m, label=label)
    ax.fill_between(x, m - half, m + half, alpha=0.25)


# %% [markdown]
# ## 2. Core concepts
#
# **Markov games.** $n$ agents; in state $s$ agent $i$ sees its observation $o_i$, picks $a_i$, and
# receives $r_i(s, a_1, \dots, a_n)$. A *cooperative* game gives every agent the same reward; a
# *zero-sum* game gives two players opposite ones. A matrix game is the one-state case.
#
# **Independent learners.** Each agent runs single-agent Q-learning on its own $(o_i, a_i, r_i, o_i')$,
# treating the others as part of the environment. Cheap and fully decentralised, but that environment is
# not stationary (the others learn too), so the convergence guarantees of Q-learning are gone. The
# **climbing game** (Claus and Boutilier 1998) shows the typical failure: the optimum (a, a) = 11 sits next
# to two -30 penalties, so while the partner still explores, action a looks bad on average and both
# settle on a safer cell (*relative overgeneralisation*).

# %%
climb = me.climbing_game()
print("climbing game, the shared reward (rows: agent 0, columns: agent 1)")
print(climb.payoffs[0])
print("payoff of each action against a uniformly exploring partner:", climb.payoffs[0].mean(axis=1))

# %% [markdown]
# **Centralised training, decentralised execution (CTDE).** While training (in a simulator) a critic may
# see everything: the joint observation $s$ and the joint action $a$. Each actor $\pi_i(a_i \mid o_i)$ still
# uses only its own observation, so at execution the critic is thrown away. COMA (Foerster et al. 2018)
# gives agent $i$ the counterfactual advantage
# $A_i = Q(s, a) - \sum_{b} \pi_i(b \mid o_i)\, Q(s, (a_{-i}, b))$: how much better its action was than
# its own average, *with the others' actions held fixed*. With an exact critic the others' choices and
# any windfall that no one controls cancel, which is the credit-assignment problem solved.
#
# **Self-play.** Two copies of one learning rule play each other. In a two-player zero-sum game, if both
# have no regret, their *time-averaged* policies approach a Nash equilibrium; the policies themselves
# need not. The measure is exploitability (NashConv): what best responses to the current pair would
# gain, 0 exactly at an equilibrium (Chapter 28).
#
# ## 3. The distribution and communication pattern
#
# Every protocol uses one pattern. Rank 0 hosts the environment and steps $M$ copies of it at once (the
# keyword `E` of `marl`'s functions; $E$ itself is reserved for parallel efficiency); the
# $n$ agents are spread over the $K$ ranks in contiguous blocks (`collectives.block_bounds`, so $K > n$
# leaves ranks idle). Per step the host sends rank $r$ one block with its agents' observations (and the
# last rewards and executed actions), and receives their actions: no receive-from-any is needed, because
# an agent rank only ever waits for the host and the host polls the agent ranks in order. Independent
# learners exchange nothing with each other; COMA adds a second message, the advantages, per step.
# The timeline shows three steps of predator-prey on $K = 3$ ranks: rank 0 hosts the game and predator 0,
# rank 1 is predator 1, and rank 2 has no agent (two agents over three ranks), so it only idles.

# %%
pp = me.PredatorPrey(PP_SIZE, horizon=30)
net = cluster.Network(alpha=1e-4, beta=1e-8)
traced = cluster.run(marl.train_iql, 3, args=(pp, 3), kwargs=dict(E=64), trace=True, network=net, timeout=60)
cluster.plot_timeline(traced, title="independent Q-learning, 3 steps: rank 0 hosts the game and predator 0, "
                      "rank 1 is predator 1")
plt.show()
M = 64  # host -> agent: a (4, 1, M) float64 block per step; agent -> host: (1, M) int64 actions
print(f"agent rank 1 received {traced.stats[1].bytes_received} B and sent {traced.stats[1].bytes_sent} B")
assert traced.stats[1].bytes_received == 4 * 4 * 8 * M and traced.stats[1].bytes_sent == 3 * 8 * M
assert traced.stats[1].messages_received == 3 + 1  # the last message carries the final rewards only

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# **Independent Q-learners.** `train_iql` is the whole protocol for one rank: the host branch steps the
# environment and substitutes a fallback action for any agent it did not hear from; the agent branch
# learns from the executed action the host echoes back, then acts. `QLearner` updates a batch of $M$
# transitions at once: each visited cell moves $\eta$ of the way to the mean of its targets.

# %%
from scaleoutai.notebooks import show

show(marl.train_iql, marl.QLearner)

# %% [markdown]
# The check: for every $K$ in `KS` (two agents, so $K = 3$ and $K = 5$ have idle ranks) the curve and
# the Q-tables equal the one-machine loop `reference_iql` bit for bit, on the climbing game and on
# predator-prey.

# %%
for env, steps in [(climb, 100), (me.PredatorPrey(4, 12), 100)]:
    want = marl.reference_iql(env, steps, E=16, seed=SEED)
    for K in KS:
        got, _ = marl.run_iql(env, K, steps, E=16, seed=SEED)
        assert np.array_equal(got["curve"], want["curve"]), K
        assert all(np.array_equal(got["Q"][i], want["Q"][i]) for i in range(2)), K
print(f"independent Q-learning equals the reference for K in {KS}")

# %% [markdown]
# **Learning curves.** `SEEDS` runs on the climbing game (32 plays per step, $\epsilon$ decaying from 1 to
# 0.05) and on predator-prey (64 copies). The band is a 95% confidence interval of the mean over seeds.
# After training we read off the greedy joint action.

# %%
t0 = time.perf_counter()
climb_runs = [marl.reference_iql(climb, IQL_STEPS, E=32, seed=s) for s in range(SEEDS)]
finals = [float(marl.evaluate(climb, list(r["Q"].values()), 4)[0]) for r in climb_runs]
pp_runs = [marl.reference_iql(pp, PP_STEPS, E=64, lr=0.2, gamma=0.9, seed=s) for s in range(SEEDS)]
pp_greedy = [marl.evaluate(pp, list(r["Q"].values()), 200)[0] for r in pp_runs]
pp_random = marl.evaluate(pp, None, 200)[0]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
band(axes[0], [r["curve"][:, 0] for r in climb_runs], "independent Q-learners", smooth=10)
axes[0].axhline(11, ls=":", c="k", label="optimum (a, a) = 11")
axes[0].set(xlabel="step", ylabel="mean reward per play", title="climbing game")
band(axes[1], [r["curve"][:, 0] * 30 for r in pp_runs], "independent Q-learners", smooth=50)
axes[1].axhline(pp_random * 30, ls=":", c="k", label="random predators")
axes[1].set(xlabel="step", ylabel="captures per 30 steps per copy", title=f"predator-prey, {PP_SIZE}x{PP_SIZE} torus")
for ax in axes:
    ax.legend()
plt.tight_layout()
plt.show()
print(f"climbing game, greedy joint reward per seed: {finals}  ({time.perf_counter() - t0:.1f} s)")
print(f"predator-prey captures per step: learned {np.mean(pp_greedy):.3f}, random {pp_random:.3f}")
assert 11.0 not in finals and np.mean(finals) >= 5  # a safe cell, never the optimum
assert min(pp_greedy) > 3 * pp_random

# %% [markdown]
# Every seed ends on a shadowed cell (7, 6 or 5), never on the optimum 11: the penalties next to it are
# paid while the partner still explores, and independent learners cannot tell the partner's exploration
# from the value of their own action. On predator-prey, where a capture needs both predators next to
# the prey, independent learners do coordinate well enough to capture several times more often than
# random predators.
#
# **A centralised critic with decentralised actors.** `train_coma` keeps the actors on their ranks and
# the critic on the host. The game is `SignalGame`: each of $n$ agents sees a private bit $s_i$ and
# should answer it, the team reward is the fraction that do plus a windfall proportional to
# $\sum_i s_i$ that nobody controls. The critic is a table over the joint $(s, a)$, so it is exact but
# only for a few agents; `counterfactual_advantages` is the COMA formula.

# %%
show(marl.train_coma, marl.counterfactual_advantages)

# %%
sig = me.SignalGame(COMA_AGENTS, 2, 2, bonus=1.0)
for baseline in ("counterfactual", "mean"):
    want = marl.reference_coma(sig, 30, E=16, baseline=baseline, seed=SEED)
    for K in KS + [COMA_AGENTS + 3]:
        got, _ = marl.run_coma(sig, K, 30, E=16, baseline=baseline, seed=SEED)
        assert np.array_equal(got["curve"], want["curve"]), (baseline, K)
        assert all(np.array_equal(got["theta"][i], want["theta"][i]) for i in range(COMA_AGENTS))
print(f"COMA and shared-reward REINFORCE equal their references for K in {KS + [COMA_AGENTS + 3]}")

# %% [markdown]
# **What the counterfactual buys.** Give the critic the true $Q$ and measure the variance of each agent's
# advantage at the uniform policy, against the shared reward minus its mean (REINFORCE with a baseline).
# Both have the same expected policy gradient; the counterfactual one has no noise from the other agents
# or from the windfall, and the gap grows with $n$.

# %%
rng = np.random.default_rng(SEED)
var_rows = []
for n in range(1, 6):
    g = me.SignalGame(n, 2, 2, bonus=1.0)
    critic = marl.Critic(n, 2, 2)
    S = (np.arange(2 ** n)[None] >> np.arange(n)[:, None]) & 1  # every joint signal / joint action
    for s in range(2 ** n):
        critic.Q[s] = g.team_reward(np.repeat(S[:, [s]], 2 ** n, axis=1), S)
    obs, act = rng.integers(0, 2, (n, 4000)), rng.integers(0, 2, (n, 4000))
    cf = marl.counterfactual_advantages(critic, obs, act, np.full((n, 4000, 2), 0.5))
    r = g.team_reward(obs, act)
    var_rows.append((n, float((cf[0] * 2 * (act[0] - 0.5)).var()), float(((r - r.mean()) * 2 * (act[0] - 0.5)).var())))
for n, v_cf, v_mean in var_rows:
    print(f"n = {n}: variance of agent 0's gradient sample, counterfactual {v_cf:.4f}, shared reward {v_mean:.4f}")
assert all(v_cf < v_mean for _, v_cf, v_mean in var_rows[1:])

# %% [markdown]
# With a *learned* critic the picture is more mixed: the critic must first be fitted, and its table has
# $2^n \cdot 2^n$ cells. The curves compare COMA with a learned critic against shared-reward REINFORCE
# over `SEEDS` seeds.

# %%
coma_curves = {b: [marl.reference_coma(sig, COMA_STEPS, E=16, lr=1.0, baseline=b, seed=s)["curve"]
                   for s in range(SEEDS)] for b in ("counterfactual", "mean")}
fig, ax = plt.subplots(figsize=(7, 4))
for b, label in (("counterfactual", "COMA, learned joint critic"), ("mean", "shared reward, mean baseline")):
    band(ax, np.array(coma_curves[b]) - 0.5, label, smooth=5)  # minus the expected windfall
ax.set(xlabel="step", ylabel="fraction of agents answering their signal", title=f"SignalGame, n = {COMA_AGENTS}")
ax.legend()
plt.show()
end = {b: float(np.mean([c[-10:] for c in cs])) - 0.5 for b, cs in coma_curves.items()}
print(f"final fraction answered: {end}")
assert min(end.values()) > 0.8

# %% [markdown]
# On so small a game both reach the optimum. COMA starts a little slower, while its critic is still being
# fitted, and the two then coincide: with three agents the others' noise is small enough for a batch of
# 16 plays to average it out. The counterfactual pays off where the critic generalises (a network over
# many agents, as in the COMA paper) and where the others' noise is large; exercise 3 explores this.
#
# **Self-play.** `train_self_play` puts the two players on ranks; a referee on rank 0 forwards each play
# (the mixed strategy, or `samples` sampled actions) to the other player. `Hedge` is multiplicative
# weights; with `optimistic=True` it counts the last payoff twice.

# %%
show(sp.train_self_play, sp.Hedge)

# %%
rps = me.rock_paper_scissors()
start = [[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]
for samples in (0, 8):
    want = sp.reference_self_play(rps, 200, lr=0.05, samples=samples, start=start, seed=SEED)
    for K in KS:
        got, _ = sp.run_self_play(rps, K, 200, lr=0.05, samples=samples, start=start, seed=SEED)
        assert all(np.array_equal(got["policies"][i], want["policies"][i]) for i in range(2)), (samples, K)
runs = {"Hedge": sp.reference_self_play(rps, SP_ROUNDS, lr=0.05, start=start),
        "optimistic Hedge": sp.reference_self_play(rps, SP_ROUNDS, lr=0.05, start=start, optimistic=True)}
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for name, out in runs.items():
    x, y = out["policies"][0], out["policies"][1]
    last = [sp.exploitability(rps, x[t], y[t]) for t in range(SP_ROUNDS)]
    t_ = np.arange(1, SP_ROUNDS + 1)[:, None]
    avg_x, avg_y = np.cumsum(x, 0) / t_, np.cumsum(y, 0) / t_
    avg = [sp.exploitability(rps, avg_x[t], avg_y[t]) for t in range(SP_ROUNDS)]
    axes[0].semilogy(last, label=f"{name}: last iterate")
    axes[0].semilogy(avg, "--", label=f"{name}: average policy")
    axes[1].plot(x[:, 0], x[:, 1], lw=0.8, label=f"{name}: player 0, last iterate")
axes[1].plot(avg_x[:, 0], avg_x[:, 1], "k--", lw=1, label="Hedge: player 0, average")
axes[1].plot([1 / 3], [1 / 3], "r*", ms=12, label="Nash (1/3, 1/3, 1/3)")
axes[0].set(xlabel="round", ylabel="exploitability", title="rock-paper-scissors self-play")
axes[1].set(xlabel="P(rock)", ylabel="P(paper)", title="player 0's policy")
axes[0].legend(fontsize=8)
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()
h = runs["Hedge"]
e_last = sp.exploitability(rps, h["policies"][0][-1], h["policies"][1][-1])
e_avg = sp.exploitability(rps, h["average"][0], h["average"][1])
o = runs["optimistic Hedge"]
e_opt = sp.exploitability(rps, o["policies"][0][-1], o["policies"][1][-1])
print(f"after {SP_ROUNDS} rounds: Hedge last {e_last:.3f}, Hedge average {e_avg:.4f}, optimistic last {e_opt:.4f}")
assert e_avg < 0.1 < e_last and e_opt < e_last

# %% [markdown]
# Plain Hedge spirals outwards: its last iterate gets *more* exploitable, yet its average closes in on the
# uniform equilibrium. Optimistic Hedge, which anticipates the opponent's next move by counting the last
# payoff twice, converges in the last iterate as well.
#
# ## 5. The same task with a production library: PettingZoo and MPE2
#
# PettingZoo (Terry et al. 2021) is the multi-agent counterpart of Gymnasium: a `ParallelEnv` takes a dict
# of actions per step and returns dicts of observations, rewards, terminations and truncations; an `AECEnv`
# has the agents act in turn. `as_pettingzoo` wraps each of our environments as a `ParallelEnv`;
# PettingZoo's own `parallel_to_aec` turns it into an AEC environment. PettingZoo's API tests must pass on
# both forms.

# %%
import warnings

import pettingzoo
from mpe2 import simple_spread_v3
from pettingzoo.test import api_test, parallel_api_test
from pettingzoo.utils import parallel_to_aec

print(f"PettingZoo {pettingzoo.__version__}")
for env in (climb, me.SignalGame(3, bonus=1.0), me.PredatorPrey(PP_SIZE, 20), rps):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Observation numpy array is all zeros")  # a stateless game
        parallel_api_test(me.as_pettingzoo(env, 25), num_cycles=200)
        api_test(parallel_to_aec(me.as_pettingzoo(env, 25)), num_cycles=200)

# %% [markdown]
# **Independent learners on MPE2.** `simple_spread_v3` with two agents and two landmarks: each agent
# sees its velocity, its position and the offsets to the landmarks and to the other agent, and both are
# rewarded with minus the sum over landmarks of the distance to the nearest agent. Our independent
# Q-learners each see a coarse version of their *own* observation (the direction of the nearest landmark,
# ahead of the agent's velocity: 9 states) and nothing else. `play_parallel_env` drives any PettingZoo
# `ParallelEnv`. The baseline is uniformly random agents, evaluated on the same episode seeds.

# %%
show(me.play_parallel_env)

# %%
mpe = simple_spread_v3.parallel_env(N=2, max_cycles=25, local_ratio=0.0)
feats = partial(me.spread_features, n_landmarks=2)
t0 = time.perf_counter()
train_curves, greedy = [], []
for s in range(SEEDS):
    learners = {a: me.BinnedQLearner(feats, 9, mpe.action_space(a).n, lr=0.1, gamma=0.5) for a in mpe.possible_agents}
    train_curves.append(me.play_parallel_env(mpe, learners, MPE_EPISODES, seed=s))
    greedy.append(me.play_parallel_env(mpe, learners, 20, seed=1000, learn=False, eps=(0.0, 0.0, 1.0)).mean())
random_return = me.play_parallel_env(mpe, None, 20, seed=1000).mean()
mpe.close()
fig, ax = plt.subplots(figsize=(7, 4))
band(ax, train_curves, "independent Q-learners (training, with exploration)", smooth=10)
ax.axhline(random_return, ls=":", c="k", label="random agents")
ax.axhline(np.mean(greedy), ls="--", c="g", label="learned, greedy")
ax.set(xlabel="episode", ylabel="team return", title="MPE2 simple_spread_v3, N = 2")
ax.legend()
plt.show()
print(f"team return: random {random_return:.1f}, learned greedy {np.mean(greedy):.1f} "
      f"(per seed {np.round(greedy, 1)})  ({time.perf_counter() - t0:.1f} s)")
assert np.mean(greedy) > random_return + 5

# %% [markdown]
# On average the learners cover the landmarks clearly better than random agents, but far from perfectly,
# and the seeds differ a lot: two states that look alike to an agent (its 9 coarse states alias many real
# ones) can need different moves, and a wrong greedy move repeated in such a state sends the agent away for
# good. Nor do they divide the landmarks between them: each heads for its own nearest landmark, often the
# same one. That is the independent learners' blind spot again, now in a continuous world.
#
# ## 6. Failure modes and fault tolerance
#
# **A crashed agent.** `cluster.Faults(crash={1: 200})` stops rank 1, predator 1, at its 201st message. The
# host notices on its next receive (`PeerCrashedError`) and from then on plays uniformly random moves for
# that predator, so the team plays on with a useless teammate; the surviving predator's Q-table is
# returned, the dead one's is not.

# %%
steps6 = min(PP_STEPS, 1500)
healthy, _ = marl.run_iql(pp, 3, steps6, E=64, lr=0.2, gamma=0.9, seed=SEED, timeout=300)
crashed, res = marl.run_iql(pp, 3, steps6, E=64, lr=0.2, gamma=0.9, seed=SEED, timeout=300,
                            faults=cluster.Faults(crash={1: 200}))
print(f"dead ranks {crashed['dead']}; Q-tables returned for agents {sorted(crashed['Q'])}; "
      f"rank 1 ended as {res.values[1]!r}")
assert crashed["dead"] == [1] and sorted(crashed["Q"]) == [0]
fig, ax = plt.subplots(figsize=(7, 4))
k = np.ones(50) / 50
ax.plot(np.convolve(healthy["curve"][:, 0], k, "valid") * 30, label="both predators learn")
ax.plot(np.convolve(crashed["curve"][:, 0], k, "valid") * 30, label="predator 1's rank crashes at step 200")
ax.set(xlabel="step", ylabel="captures per 30 steps per copy", title="a crashed agent rank")
ax.legend()
plt.show()
assert crashed["curve"][-300:, 0].mean() < healthy["curve"][-300:, 0].mean()

# %% [markdown]
# **Lost messages.** With `Faults(loss=p)` each message is lost with chance $p$. A lost observation
# makes the agent answer with a sentinel and skip its next update; a lost action makes the host play the
# fallback, and since the host echoes the *executed* action, no learner ever credits itself with a move
# it did not make. Nothing deadlocks, and on this task learning hardly suffers even at 40% loss: a lost
# message costs one update or turns one move into a random one, and Q-learning is off-policy, so a
# random move is still useful experience.

# %%
loss_rates = [0.0, 0.05, 0.2, 0.4]
lossy = {}
for p in loss_rates:
    out, _ = marl.run_iql(pp, 3, steps6, E=64, lr=0.2, gamma=0.9, seed=SEED, timeout=300,
                          faults=cluster.Faults(loss=p, seed=SEED) if p else None)
    lossy[p] = marl.evaluate(pp, [out["Q"][0], out["Q"][1]], 200)[0]
for p, v in lossy.items():
    print(f"loss {p:4.2f}: greedy captures per step {v:.3f}")
assert all(v > 0.8 * lossy[0.0] and v > 3 * pp_random for v in lossy.values())

# %% [markdown]
# ## 7. Evaluation: messages, time and sample efficiency
#
# Per step the host sends one block per agent rank and receives one, so messages grow with the number of
# agent ranks, and the bytes with the number of agents that do not live on the host (times $M$). On the
# simulator's alpha-beta clock the host handles the ranks one after another: the time per step grows
# with the number of agent ranks, as for any star. The table runs `SignalGame` with 4 agents.

# %%
sig4 = me.SignalGame(4, 2, 2)
net = cluster.Network(alpha=5e-5, beta=1e-9)
rows = []
for K in (1, 2, 3, 5, 8):
    out, res = marl.run_coma(sig4, K, 20, E=256, seed=SEED, network=net)
    msgs = sum(s.messages_sent for s in res.stats)
    nbytes = sum(s.bytes_sent for s in res.stats)
    rows.append((K, msgs / 20, nbytes / 20, res.sim_time / 20))
print(" K  messages/step  bytes/step  simulated s/step")
for K, m, b, t in rows:
    print(f"{K:>2}  {m:>13.0f}  {b:>10.0f}  {t:>16.2e}")
assert rows[0][1] == 0 and rows[1][1] == 3 and rows[-1][1] == 3 * 3  # 3 messages per agent rank (K = 8: 3 busy)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot([r[0] for r in rows], [r[3] * 1e3 for r in rows], "o-")
ax.set(xlabel="ranks K", ylabel="simulated ms per step", title="COMA on 4 agents: the host is a star")
plt.show()

# %% [markdown]
# **Sample efficiency.** $M$ copies per step let one message carry $M$ observations, which is how the
# protocol amortises the per-message latency $\alpha$. For a fixed number of plays, though, more copies
# per step mean fewer updates. Does learning suffer? The plot holds the plays fixed and varies $M$.

# %%
plays, last = 16 * PP_STEPS, {}
fig, ax = plt.subplots(figsize=(7, 4))
for e in (8, 32, 128):
    curves = [marl.reference_iql(pp, plays // e, E=e, lr=0.2, gamma=0.9, seed=s)["curve"][:, 0]
              for s in range(min(SEEDS, 4))]
    band(ax, [c * 30 for c in curves], f"M = {e}", smooth=max(1, 1600 // e), x=np.arange(len(curves[0])) * e)
    last[e] = float(np.mean([c[-len(c) // 10:].mean() for c in curves]))
ax.set(xlabel="plays (steps x M)", ylabel="captures per 30 steps", title="predator-prey: copies per step")
ax.legend()
plt.show()
print("captures per step over the last tenth:", {e: round(v, 3) for e, v in last.items()})
assert max(last.values()) < 1.25 * min(last.values())

# %% [markdown]
# The curves lie on top of each other: per play, the batched update loses nothing on this task (each
# cell moves to the mean of its targets, and the exploration schedule follows the fraction of training
# done), so in this range $M$ can grow to amortise $\alpha$ at no cost in samples. With far larger
# batches per step, or with function approximation, that need not hold.

# %% [markdown]
# ## 8. Exercises
#
# 1. **Lenient learners.** Make `QLearner` optimistic on the climbing game: ignore negative TD errors with
#    a probability that decays over time (Panait, Tuyls and Luke 2008) or use two learning rates
#    (hysteretic Q-learning, Matignon et al. 2007). How many seeds now reach (a, a) = 11?
# 2. **Penalty game.** Run independent learners on `penalty_game(k)` for k from 0 to -100. When do they
#    miscoordinate between the two optimal equilibria, and what does a shared tie-breaking seed change?
# 3. **Where the counterfactual pays.** Replace the table critic by a linear one,
#    $Q(s, a) = \sum_i w_i[o_i, a_i]$, and compare COMA with shared-reward REINFORCE for $n$ = 8, 32, 64
#    agents of `SignalGame` with a large windfall. How many steps does the critic need before it helps?
# 4. **Parameter sharing.** Let all predators share one Q-table (their observations are already
#    relative). Implement it as an all-reduce of the tables every step and count the bytes.
# 5. **Sampled self-play.** With `samples` = 1, 8 and 64, how does the average policy's exploitability after
#    `SP_ROUNDS` rounds scale? Fit the exponent.
# 6. **Dividing the landmarks.** On MPE2 `simple_spread_v3`, give each agent a feature for "the other
#    agent is nearer to my nearest landmark" and retrain. Does the team return approach the hand-coded
#    policy that sends each agent to a different landmark?
#
# ## 9. Research directions
#
# - **Value factorisation for cooperative teams.** Decompose the joint $Q$ into per-agent utilities so that
#   greedy decentralised actions are jointly greedy; which decompositions are expressive enough, and how
#   to escape relative overgeneralisation, is still open.
#   - Rashid, Samvelyan, de Witt, Farquhar, Foerster and Whiteson, "QMIX: Monotonic Value Function
#     Factorisation for Deep Multi-Agent Reinforcement Learning", ICML, 2018. A monotonic mixing network.
#   - Son, Kim, Kang, Hostallero and Yi, "QTRAN: Learning to Factorize with Transformation for Cooperative
#     Multi-Agent Reinforcement Learning", ICML, 2019. Factorisations beyond monotonicity.
# - **Credit assignment at scale.** Counterfactual baselines need a critic that can evaluate the
#   alternatives of every agent; with hundreds of agents, mean-field and difference-reward approximations
#   trade bias for tractability.
#   - Foerster, Farquhar, Afouras, Nardelli and Whiteson, "Counterfactual Multi-Agent Policy Gradients",
#     AAAI, 2018. COMA, the recipe of Section 4.
#   - Yang, Luo, Li, Zhou, Zhang and Wang, "Mean Field Multi-Agent Reinforcement Learning", ICML, 2018.
#     Each agent responds to the mean action of its neighbours.
#   - Zhong, Kuba, Feng, Hu, Ji and Yang, "Heterogeneous-Agent Reinforcement Learning", JMLR, 2024.
#     Sequential per-agent policy updates with a monotonic-improvement guarantee, without assuming that
#     agents share parameters.
# - **Last-iterate convergence in games.** No-regret averages converge, but the policies deployed are the
#   last iterates; optimistic and extragradient methods converge in zero-sum games, and what holds in
#   general-sum or sampled settings is active research.
#   - Daskalakis and Panageas, "Last-Iterate Convergence: Zero-Sum Games and Constrained Min-Max
#     Optimization", ITCS, 2019. Optimistic multiplicative weights converge in the last iterate.
#   - Bailey and Piliouras, "Multiplicative Weights Update in Zero-Sum Games", ACM EC, 2018. Why plain
#     Hedge spirals away from the equilibrium.
# - **Population-based self-play.** Self-play against only the latest self cycles in non-transitive
#   games; training against a growing population of past and exploiter policies, and measuring progress
#   without a fixed opponent, remain open problems.
#   - Lanctot, Zambaldi, Gruslys, Lazaridou, Tuyls, Perolat, Silver and Graepel, "A Unified
#     Game-Theoretic Approach to Multiagent Reinforcement Learning", NeurIPS, 2017. PSRO.
#   - Vinyals et al., "Grandmaster level in StarCraft II using multi-agent reinforcement learning",
#     Nature, 2019. League training at scale.
# - **Benchmarks and evaluation.** Results in MARL swing with implementation details and seeds; standard
#   environments and statistically careful reporting are themselves a research topic.
#   - Terry et al., "PettingZoo: Gym for Multi-Agent Reinforcement Learning", NeurIPS Datasets and
#     Benchmarks, 2021. The API of Section 5.
#   - Agarwal, Schwarzer, Castro, Courville and Bellemare, "Deep Reinforcement Learning at the Edge of the
#     Statistical Precipice", NeurIPS, 2021. Confidence intervals over few seeds, as our bands.
#   - Ellis et al., "SMACv2: An Improved Benchmark for Cooperative Multi-Agent Reinforcement Learning",
#     NeurIPS Datasets and Benchmarks, 2023. Shows open-loop policies score well on the original SMAC and
#     replaces it with procedurally generated scenarios that need closed-loop play.
#   - Rutherford et al., "JaxMARL: Multi-Agent RL Environments and Algorithms in JAX", NeurIPS Datasets and
#     Benchmarks, 2024. Vectorised environments and baselines on accelerators, making many seeds per
#     configuration affordable.
#
# ## What's next
#
# Chapter 31 (Swarm intelligence) takes the number of agents from a handful to hundreds and drops learning
# altogether: boids, particle swarm optimisation and consensus on graphs show how simple local rules,
# applied by every agent to its neighbours only, produce coordinated behaviour of the whole swarm.
