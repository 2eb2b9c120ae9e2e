# %% [markdown]
# # Chapter 30 solutions: Multi-agent reinforcement learning
#
# Worked solutions to the exercises of `chapters/30-multi-agent-rl` (the instructor's manual, never in the
# student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import copy
import time

import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import marl
from scaleoutai.agents import marl_envs as me
from scaleoutai.agents import marl_selfplay as sp
from scaleoutai.collectives import ring_allreduce

T0 = time.perf_counter()


def train_loop(env, make, steps, E, seed, eps=(1.0, 0.05, 0.5)):
    """Independent learners in one loop, the random streams of marl.reference_iql; make(env) builds one."""
    env_rng, rngs, _ = marl._streams(seed, env.n_agents)
    env = copy.deepcopy(env)
    agents = [make(env) for _ in range(env.n_agents)]
    obs = env.reset(env_rng, E)
    for t in range(steps):
        acts = np.stack([ag.act(obs[i], marl.epsilon(t, steps, *eps), rngs[i]) for i, ag in enumerate(agents)])
        nxt, rew, done = env.step(acts, env_rng)
        for i, ag in enumerate(agents):
            ag.learn(obs[i], acts[i], rew[i], nxt[i], done.astype(np.float64))
        obs = nxt
    return [ag.Q for ag in agents]


# %% [markdown]
# ## Exercise 1 (coding): hysteretic learners on the climbing game
#
# **Answer.** All 8 seeds reach $(a, a) = 11$ with hysteretic Q-learning ($\eta = 0.1$ for positive TD
# errors, $\beta = 0.01$ for negative ones), against 0 of 8 for the plain learners. The reason is relative
# overgeneralisation: while the partner explores uniformly, action $a$ earns $(11 - 30 + 0)/3 < 0$ on
# average, so a learner that averages its TD errors ranks $a$ last. A hysteretic learner moves *up* fast
# and *down* slowly, so its estimate of $Q(a)$ tracks something close to the *maximum* over the partner's
# actions (the value of $a$ if the partner cooperates), 11, and $a$ wins. The price is optimism in
# stochastic games, where a lucky reward is also believed (hence $\beta > 0$, and lenient learners that
# decay their leniency over time). With $\beta = \eta$ it is plain Q-learning again: the refactor check
# below reproduces `reference_iql`'s tables bit for bit.

# %%
class HystereticQ(marl.QLearner):
    """Q-learning with two learning rates: lr for positive TD errors, beta (smaller) for negative ones."""

    def __init__(self, n_obs, n_actions, lr=0.1, gamma=0.95, beta=0.01):
        super().__init__(n_obs, n_actions, lr, gamma)
        self.beta = float(beta)

    def learn(self, o, a, r, o2, done):
        A = self.Q.shape[1]
        cell = o * A + a
        td = r + self.gamma * (1.0 - done) * self.Q[o2].max(axis=1) - self.Q.ravel()[cell]
        step = np.where(td > 0, self.lr * td, self.beta * td)  # each sample with its own rate
        total = np.bincount(cell, weights=step, minlength=self.Q.size)
        count = np.bincount(cell, minlength=total.size)
        seen = count > 0
        self.Q.ravel()[seen] += total[seen] / count[seen]


climb = me.climbing_game()
plain_again = train_loop(climb, lambda e: HystereticQ(e.n_obs, e.n_actions, 0.1, 0.95, beta=0.1), 100, 16, 0)
want = marl.reference_iql(climb, 100, E=16, seed=0)["Q"]
assert all(np.array_equal(plain_again[i], want[i]) for i in range(2))  # beta = lr is plain Q-learning
SEEDS = 8
hyst = [float(marl.evaluate(climb, train_loop(climb, lambda e: HystereticQ(e.n_obs, e.n_actions), 400, 32, s), 4)[0])
        for s in range(SEEDS)]
plain = [float(marl.evaluate(climb, list(marl.reference_iql(climb, 400, E=32, seed=s)["Q"].values()), 4)[0])
         for s in range(SEEDS)]
print(f"greedy joint reward per seed: hysteretic {hyst}, plain {plain}")
assert hyst.count(11.0) == SEEDS and plain.count(11.0) == 0

# %% [markdown]
# ## Exercise 2 (analysis): the penalty game
#
# **Answer.** With the chapter's schedule (400 steps, 32 plays, $\epsilon$ from 1 to 0.05) the learners
# end on one of the two optima (reward 10) for small penalties, $k \ge -10$, and on the safe $(b, b) = 2$ for
# large ones, $k \le -20$ (in longer sweeps an odd seed at $k = -20$ still finds 10): it is relative
# overgeneralisation again, since against a uniform partner action $a$ is worth $(10 + 0 + k)/3$, below
# $b$'s $2/3$ once $k < -8$, and the longer the partner explores the more that average shapes the tables.
# They *miscoordinate* (one plays $a$, the other $c$, reward $k$) in none of our runs. The two optimal
# equilibria are symmetric, so which one is found is decided by the early, exploratory steps: whichever of
# $a$ and $c$ happened to be played together more often gets the higher value for *both* agents, because the
# reward is shared and both agents saw the same joint plays. Miscoordination needs the two agents' tables
# to rank $a$ and $c$ differently at the end, which the shared experience prevents unless both are nearly
# tied. That is where the **tie-breaking** matters: with tables still at zero (or exactly tied), the greedy
# choice is a coin flip per agent, and independent coins miscoordinate half the time. A *shared*
# tie-breaking seed (both agents break ties with the same random numbers, a convention agreed before play)
# turns every tie into the same choice: the check below breaks all ties in a greedy evaluation of untrained
# (all-zero) tables, where independent coins miscoordinate in about $2/9$ of the plays on the penalty
# cells, and shared coins never do.

# %%
outcomes = {}
for k in (0, -10, -20, -50, -100):
    game = me.penalty_game(k)
    finals = [float(marl.evaluate(game, list(marl.reference_iql(game, 400, E=32, seed=s)["Q"].values()), 4)[0])
              for s in range(4)]
    outcomes[k] = finals
    assert k not in finals or k == 0  # never the miscoordinated cell (k = 0 is also worth 0)
print("greedy joint reward per seed:", outcomes)
assert all(x == 10.0 for x in outcomes[0] + outcomes[-10]) and all(x == 2.0 for x in outcomes[-100])

game, zeros, E = me.penalty_game(-50), [np.zeros((1, 3)), np.zeros((1, 3))], 20_000
obs = np.zeros(E, dtype=np.int64)
own = [np.random.default_rng([3, i]) for i in range(2)]  # each agent its own coin
shared = [np.random.default_rng([3, 9]) for _ in range(2)]  # the same seed for both
for name, coins, want_rate in (("independent", own, 2 / 9), ("shared", shared, 0.0)):
    acts = np.stack([marl._argmax_random_ties(zeros[i][obs], coins[i]) for i in range(2)])
    miss = float(np.mean((acts[0] == 0) & (acts[1] == 2) | (acts[0] == 2) & (acts[1] == 0)))
    assert abs(miss - want_rate) < 4 * np.sqrt(2 / 9 * 7 / 9 / E) + 1e-12
    print(f"{name} tie-breaking on tied tables: miscoordinated (a, c) or (c, a) in {miss:.3f} of plays")

# %% [markdown]
# ## Exercise 3 (analysis): a linear critic for many agents
#
# **Answer.** The team reward of `SignalGame` is additive over agents,
# $r = \frac1n\sum_i \bigl([a_i = s_i] + \mathrm{bonus}\, s_i/(m-1)\bigr)$, so the linear critic
# $Q(s, a) = \sum_i w_i[o_i, a_i]$ represents it *exactly*, with $n m A$ weights instead of $m^n A^n$. The
# counterfactual advantage of agent $i$ then only involves its own weights: every other term of $Q$ is
# the same in $Q(s, a)$ and in $Q(s, (a_{-i}, b))$ and cancels,
# $$A_i = w_i[o_i, a_i] - \sum_b \pi_i(b \mid o_i)\, w_i[o_i, b].$$
# Once the critic is fitted this has no noise at all from the other agents or the windfall, while the
# shared-reward advantage $r - \bar r$ carries the noise of $n - 1$ other agents and of the windfall.
#
# **How many steps the critic needs.** The critic has $n m A = 4n$ weights and learns them by a
# least-mean-squares rule from 16 plays per step, each play giving one equation for a sum of $n$ weights;
# the number of steps until its advantages line up with the true ones (correlation above 0.9) grows
# roughly linearly in $n$: about 20 steps at $n = 8$, about 80 at $n = 32$, and more than the 120-step run
# at $n = 64$. Before that the counterfactual advantages are mostly critic error and help nobody.
#
# **What we see.** At $n = 8$ COMA with the linear critic ends slightly ahead of shared-reward REINFORCE;
# at $n = 32$ and $64$, within 120 steps, the two are within 0.1 of each other and REINFORCE is a little
# ahead, because COMA spends most of the run waiting for its critic while REINFORCE's noisy but unbiased
# gradient (averaged over 16 plays, the windfall's mean removed by the batch baseline) already makes
# progress. The counterfactual pays only once the critic is fitted, so its advantage shows in longer runs,
# or with a critic that shares weights across agents (a per-agent table has nothing to generalise from).
#
# > Note for the instructor: the exercise suggests COMA wins at $n = 32, 64$ with a large windfall; with
# > the chapter's actor step sizes and a 120 to 150 step budget the linear critic is not ready in time and
# > the two methods tie. The expected answer is the critic's $O(n)$ fitting time, which the code measures.
#
# With the mean baseline the loop below equals the chapter's `reference_coma` bit for bit (the refactor
# check).

# %%
def linear_coma(game, steps, E=16, lr=1.0, critic_lr=0.5, baseline="linear", seed=0):
    """Softmax actors with a linear critic (counterfactual advantages) or the shared-reward baseline."""
    env_rng, rngs, _ = marl._streams(seed, game.n_agents)
    n = game.n_agents
    game = copy.deepcopy(game)
    actors = [marl.SoftmaxActor(game.n_obs, game.n_actions, lr) for _ in range(n)]
    w = np.zeros((n, game.n_obs, game.n_actions))
    obs, answered, quality = game.reset(env_rng, E), np.zeros(steps), np.zeros(steps)
    idx = np.arange(n)[:, None]
    for t in range(steps):
        plays = [actor.act(obs[i], rngs[i]) for i, actor in enumerate(actors)]
        acts, probs = np.stack([p[0] for p in plays]), np.stack([p[1] for p in plays])
        nxt, rew, _ = game.step(acts, env_rng)
        r = rew[0]
        if baseline == "linear":
            err = r - w[idx, obs, acts].sum(axis=0)  # (E,) the critic's residual
            cells = ((idx * game.n_obs + obs) * game.n_actions + acts).ravel()
            count = np.bincount(cells, minlength=w.size)
            total = np.bincount(cells, weights=np.broadcast_to(err, obs.shape).ravel(), minlength=w.size)
            seen = count > 0  # each visited weight takes its 1/n share of the mean residual
            w.ravel()[seen] += critic_lr * total[seen] / count[seen] / n
            mine = w[idx, obs, acts]  # (n, E)
            adv = mine - (probs * w[idx, obs]).sum(axis=2)
            true = ((acts == obs) - np.take_along_axis(probs, obs[..., None], axis=2)[..., 0]) / n
            quality[t] = np.corrcoef(adv.ravel(), true.ravel())[0, 1] if adv.std() > 0 else 0.0
        else:
            adv = np.broadcast_to(r - r.mean(), acts.shape).copy()
        for i in range(n):
            actors[i].learn(obs[i], acts[i], adv[i])
        answered[t] = (acts == obs).mean()
        obs = nxt
    return answered, [a.theta for a in actors], quality


sig = me.SignalGame(3, 2, 2, bonus=1.0)
mine_curve, mine_theta, _ = linear_coma(sig, 30, lr=0.5, baseline="mean")
ref = marl.reference_coma(sig, 30, E=16, lr=0.5, baseline="mean", seed=0)
assert all(np.array_equal(a, b) for a, b in zip(mine_theta, ref["theta"].values()))
readies, finals = {}, {}
print(f"{'n':>3} {'COMA linear, last 20':>21} {'REINFORCE, last 20':>19} {'steps to critic corr 0.9':>25}")
for n in (8, 32, 64):
    game = me.SignalGame(n, 2, 2, bonus=5.0)
    coma, _, quality = linear_coma(game, 120, baseline="linear", seed=0)
    rf = linear_coma(game, 120, baseline="mean", seed=0)[0]
    ready = int(np.argmax(quality > 0.9)) if (quality > 0.9).any() else None
    readies[n], finals[n] = ready, (coma[-20:].mean(), rf[-20:].mean())
    print(f"{n:>3} {coma[-20:].mean():>21.3f} {rf[-20:].mean():>19.3f} {str(ready):>25}")
assert readies[8] < readies[32] and (readies[64] is None or readies[64] > readies[32])  # O(n) steps to fit
assert finals[8][0] >= finals[8][1] - 0.02  # once the critic is ready early enough, COMA is at least as good
assert all(abs(c - r) < 0.1 for c, r in finals.values())  # within 120 steps, no clear win either way

# %% [markdown]
# ## Exercise 4 (coding): one Q-table shared by the predators
#
# **Answer.** The predators' observations are relative (prey offset, partner offset), so one table can
# serve both. Each rank owns one predator and a replica of the environment (same seed, so the replicas
# stay identical once the ranks swap actions with one `sendrecv` per step). The batched update of
# `QLearner` moves each visited cell by $\eta \cdot (\text{sum of TD errors}) / \text{count}$; with a shared
# table both sums and both counts must be added over the predators, so each step every rank all-reduces
# the vector [TD sums, counts] ($2 \cdot m^4 \cdot 5$ numbers) and applies the same update, keeping all
# replicas of the table identical. That equals a single `QLearner` learning from the concatenated batch
# of both predators (checked to rounding). Bytes: a ring all-reduce of $N$ float64 moves
# $2(K-1) N \cdot 8$ bytes over all ranks; here $K = 2$, $N = 6250$: 100 kB per step, plus the actions
# ($2 \cdot 8E$ bytes), against zero table traffic for independent learners. Sending only the touched
# cells (at most $2E$ of the 3125) would cut that by an order of magnitude. Sharing doubles each cell's
# experience, and on this task the shared table does at least as well as independent tables.

# %%
def shared_iql(comm, env, steps, E, lr=0.2, gamma=0.9, seed=0):
    """Predator comm.rank with one table shared by all-reducing the batched TD sums and counts."""
    env = copy.deepcopy(env)
    env_rng, rngs, _ = marl._streams(seed, env.n_agents)
    me_, other = comm.rank, 1 - comm.rank
    learner = marl.QLearner(env.n_obs, env.n_actions, lr, gamma)  # acts on the shared table
    Q = learner.Q
    obs = env.reset(env_rng, E)
    for t in range(steps):
        mine = learner.act(obs[me_], marl.epsilon(t, steps), rngs[me_])  # my own exploration stream
        theirs = comm.sendrecv(mine, other, other)
        acts = np.stack([mine, theirs] if me_ == 0 else [theirs, mine])
        nxt, rew, done = env.step(acts, env_rng)
        cell = obs[me_] * env.n_actions + mine
        td = rew[me_] + gamma * (1.0 - done) * Q[nxt[me_]].max(axis=1) - Q.ravel()[cell]
        local = np.concatenate([np.bincount(cell, weights=td, minlength=Q.size),
                                np.bincount(cell, minlength=Q.size).astype(np.float64)])
        total = ring_allreduce(comm, local)
        seen = total[Q.size:] > 0
        Q.ravel()[seen] += lr * total[:Q.size][seen] / total[Q.size:][seen]
        obs = nxt
    return Q


pp = me.PredatorPrey(5, horizon=30)
steps, E = 1000, 64
res = cluster.run(shared_iql, 2, args=(pp, steps, E), timeout=300)
Q0, Q1 = res.values
assert np.array_equal(Q0, Q1)  # the replicas never diverge
table_bytes = steps * 2 * (2 - 1) * (2 * Q0.size) * 8
assert sum(s.bytes_sent for s in res.stats) == table_bytes + steps * 2 * E * 8
shared_score = marl.evaluate(pp, [Q0, Q1], 200)[0]
indep = marl.reference_iql(pp, steps, E=E, lr=0.2, gamma=0.9, seed=0)
indep_score = marl.evaluate(pp, list(indep["Q"].values()), 200)[0]
random_score = marl.evaluate(pp, None, 200)[0]
print(f"captures per step: shared table {shared_score:.3f}, independent {indep_score:.3f}, random {random_score:.3f}; "
      f"{table_bytes / steps / 1e3:.0f} kB of table traffic per step")
assert shared_score > 3 * random_score and shared_score >= 0.9 * indep_score

# a check of the update itself: one shared step equals one QLearner on the concatenated batch
rng = np.random.default_rng(1)
o, a, r = rng.integers(0, pp.n_obs, (2, E)), rng.integers(0, 5, (2, E)), rng.random((2, E))
o2, done = rng.integers(0, pp.n_obs, (2, E)), (rng.random(E) < 0.1).astype(np.float64)
start = rng.random((pp.n_obs, 5))
single = marl.QLearner(pp.n_obs, 5, 0.2, 0.9)
single.Q = start.copy()
single.learn(o.ravel(), a.ravel(), r.ravel(), o2.ravel(), np.r_[done, done])
parts = []
for i in range(2):
    cell = o[i] * 5 + a[i]
    td = r[i] + 0.9 * (1 - done) * start[o2[i]].max(axis=1) - start.ravel()[cell]
    parts.append(np.concatenate([np.bincount(cell, weights=td, minlength=start.size),
                                 np.bincount(cell, minlength=start.size)]))
tot = parts[0] + parts[1]
upd = start.copy()
seen = tot[start.size:] > 0
upd.ravel()[seen] += 0.2 * tot[:start.size][seen] / tot[start.size:][seen]
assert np.allclose(upd, single.Q, atol=1e-12)

# %% [markdown]
# ## Exercise 5 (analysis): sampled self-play
#
# **Answer.** After 3000 rounds of Hedge self-play on rock-paper-scissors (lr 0.05), the exploitability of
# the average policy falls with the number of samples roughly as `samples`$^{-0.25}$ over 1, 8, 64, a
# much flatter law than the $-1/2$ one might guess. Derivation: the exploitability of the averages is at
# most the sum of the two players' average regrets, and Hedge's regret against payoff estimates with
# variance $\sigma^2/\text{samples}$ is about
# $$\frac{\ln n}{\eta T} + \frac{\eta}{2}\Bigl(G^2 + \frac{\sigma^2}{\text{samples}}\Bigr) + O\Bigl(\sqrt{\tfrac{1}{\text{samples}\,T}}\Bigr),$$
# a floor that does not depend on the samples plus a noise term that does. With 64 samples the run is
# already at the floor of exact (mixed-strategy) play, so the power law flattens: the fitted exponent mixes
# a $1/\text{samples}$ regime at small counts with the floor at large ones. The floor itself falls only
# with more rounds or a tuned $\eta \propto 1/\sqrt{T}$.

# %%
rps = me.rock_paper_scissors()
start = [[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]  # the chapter's starting policies
ROUNDS = 3000
expl = {}
for samples in (1, 8, 64):
    runs = [sp.reference_self_play(rps, ROUNDS, lr=0.05, samples=samples, start=start, seed=s)["average"]
            for s in range(4)]
    expl[samples] = float(np.mean([sp.exploitability(rps, r[0], r[1]) for r in runs]))
exact = sp.reference_self_play(rps, ROUNDS, lr=0.05, start=start)["average"]
floor = sp.exploitability(rps, exact[0], exact[1])
slope = np.polyfit(np.log(list(expl)), np.log(list(expl.values())), 1)[0]
print(f"exploitability of the average: {expl}; exact play {floor:.4f}; fitted exponent {slope:.2f}")
assert expl[1] > expl[8] > expl[64] and -0.5 < slope < -0.1
assert expl[64] < 2 * floor  # at 64 samples the noise term no longer dominates

# %% [markdown]
# ## Exercise 6 (analysis): dividing the landmarks on MPE2
#
# **Answer.** Add to each agent's coarse state one bit: "the other agent is nearer to my nearest
# landmark". A bit alone tells an agent *not* to go somewhere but not where to go, so the direction part of
# the state is computed towards the landmark the agent should take: its nearest one, unless the other agent
# is nearer to it, then the other landmark (18 states instead of 9). The hand-coded policy applies the same
# rule with the obvious move (the action along the larger component of the offset, ahead of the
# velocity). Both agents then always aim at different landmarks.
#
# Retrained independent learners with this state improve clearly on random agents, and they no longer pile
# onto one landmark, but with 50 episodes of training they stay well short of the hand-coded policy: the
# coarse states still alias many positions, and exploration late in training still costs. So the feature
# closes part of the gap the chapter saw, not all of it; what remains is the learners' sample efficiency,
# not the division of labour. (Two seeds and 50 episodes keep this check short; the chapter's 8 seeds and 80
# episodes give the same ordering.)

# %%
from mpe2 import simple_spread_v3  # noqa: E402

LEAD = 0.3


def assigned_offset(o, n_landmarks=2):
    """Offset to my landmark (my nearest, unless the other agent is nearer to it) and whether I deferred."""
    rel = np.asarray(o[4:4 + 2 * n_landmarks], dtype=np.float64).reshape(n_landmarks, 2)
    partner = np.asarray(o[4 + 2 * n_landmarks:6 + 2 * n_landmarks], dtype=np.float64)
    mine = int(np.argmin((rel ** 2).sum(axis=1)))
    defer = np.sum((rel[mine] - partner) ** 2) < np.sum(rel[mine] ** 2)
    return rel[1 - mine] if defer else rel[mine], int(defer)


def divided_features(o):
    """18 states: the sign pattern of the offset to my assigned landmark (ahead of the velocity), and the bit."""
    d, defer = assigned_offset(o)
    d = d - LEAD * np.asarray(o[:2])
    sx, sy = (np.sign(np.where(np.abs(d) < 0.05, 0.0, d)) + 1).astype(int)
    return int(defer * 9 + sx * 3 + sy)


class HandCoded:
    """Each agent heads for its assigned landmark: the move along the larger component of the offset."""

    def act(self, o, eps, rng):
        d = assigned_offset(o)[0] - LEAD * np.asarray(o[:2])
        if np.abs(d).max() < 0.05:
            return 0
        if abs(d[0]) >= abs(d[1]):
            return 2 if d[0] > 0 else 1
        return 4 if d[1] > 0 else 3

    def learn(self, *args):
        return None


mpe = simple_spread_v3.parallel_env(max_cycles=25, N=2, local_ratio=0.0)
try:
    learned = []
    for s in range(2):
        learners = {a: me.BinnedQLearner(divided_features, 18, 5, lr=0.1, gamma=0.5) for a in mpe.possible_agents}
        me.play_parallel_env(mpe, learners, 50, seed=s)
        learned.append(me.play_parallel_env(mpe, learners, 10, seed=1000, learn=False, eps=(0.0, 0.0, 1.0)).mean())
    hand = me.play_parallel_env(mpe, {a: HandCoded() for a in mpe.possible_agents}, 10, seed=1000,
                                learn=False).mean()
    rand = me.play_parallel_env(mpe, None, 10, seed=1000).mean()
finally:
    mpe.close()
print(f"team return: random {rand:.1f}, learned with the bit {np.mean(learned):.1f} (per seed "
      f"{np.round(learned, 1)}), hand-coded {hand:.1f}")
assert hand > np.mean(learned) > rand
print(f"whole file: {time.perf_counter() - T0:.1f} s")
