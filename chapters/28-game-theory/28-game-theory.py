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
# # Chapter 28. Game theory
#
# Chapter 27's agents shared one goal: a contractor bid honestly, a colouring agent changed colour to
# help the whole graph. Drop that assumption and every agent maximises its own payoff, which depends on
# what the others do. The question is no longer "what is the best plan" but "which joint behaviour is
# stable when nobody can be told what to do", and the answer is the Nash equilibrium. This chapter
# computes equilibria of two-player games exactly (support enumeration, vertex enumeration,
# Lemke-Howson) and checks them against nashpy, learns them with fictitious play and regret matching,
# runs regret matching as a protocol in which each player is a rank that only exchanges its mixed
# strategy, and solves a small poker game with counterfactual regret minimisation (CFR) beside
# OpenSpiel's solver.
#
# **Prerequisites:** Chapter 27 (Distributed AI: agents as ranks, protocols in which each agent knows
# whom it waits for) and Chapter 4 for the communicator. Background: basic probability (expectations
# over independent choices) and linear programming (polytopes, vertices, pivoting).

# %% tags=["parameters"]
LEARN_ITERS = 4000  # smoke: 800
CFR_MARKS = [10, 30, 100, 300, 1000, 3000]  # smoke: [10, 30, 100, 300]
PLAYERS = [1, 2, 3, 5, 8]  # smoke: [1, 2, 3, 5]
RANDOM_GAMES = 6  # smoke: 3
ENUM_SIZES = [2, 3, 4, 5, 6, 7]  # smoke: [2, 3, 4, 5]
LOSSES = [0.0, 0.05, 0.2, 0.5]
SEED = 0

# %% [markdown]
# `LEARN_ITERS` is the number of rounds $T$ of fictitious play and regret matching, `CFR_MARKS` the
# iteration counts at which CFR's exploitability is measured (the last one is the run's length),
# `PLAYERS` the numbers of players (and ranks) of the protocol checks, `RANDOM_GAMES` how many seeded
# random games are compared with nashpy, `ENUM_SIZES` the game sizes $n \times n$ of the enumeration
# cost study, and `LOSSES` the message-loss rates of Section 6.
#
# ## 1. Motivation: which ceiling binds
#
# When agents are self-interested, the binding ceiling is not a machine's FLOPs but **incentives and
# information**. No coordinator can impose a joint plan, so a prediction of what the agents will do must
# be a point from which nobody wants to move alone. Computing such a point is itself hard: even for two
# players the obvious method tries every pair of supports, and their number grows as
# $\binom{2n}{n} \approx 4^n/\sqrt{\pi n}$ for $n$ actions each. For games with hidden information
# (poker, negotiation, security) the game tree is the obstacle: the strategy of a player is a choice at
# every *information set*, and heads-up limit Texas hold'em has about $3 \times 10^{14}$ of them. Solving
# it took CFR run on a cluster for weeks, which is why this chapter belongs in a book about scaling out.

# %%
import time
from math import comb

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import cfr as C
from scaleoutai.agents import equilibria as eq
from scaleoutai.agents import games as g
from scaleoutai.notebooks import show

print(f"{'n':>3} {'support pairs (same size)':>26} {'all support pairs':>20}")
for n in (2, 5, 10, 20, 40):
    print(f"{n:>3} {comb(2 * n, n) - 1:>26.3g} {(2 ** n - 1) ** 2:>20.3g}")
print(f"Kuhn poker: {len(C.INFOSETS)} information sets; heads-up limit hold'em: about 3.2e14")

# %% [markdown]
# ## 2. Core concepts
#
# **Normal-form game.** $M$ players (a local symbol: $N$ is the dataset size throughout the course);
# player $i$ has $n_i$ actions and a payoff $u_i(a_1, \dots, a_M)$. The library stores the payoffs as
# one tensor of shape $(M, n_1, \dots, n_M)$; a two-player (bimatrix) game is the pair $(A, B)$ of row
# and column payoffs.
# A **mixed strategy** $s_i$ is a probability vector over the actions; the players randomise
# independently, so player $i$'s value of its action $a$ is
# $u_i(a, s_{-i}) = \sum_{a_{-i}} u_i(a, a_{-i}) \prod_{j \ne i} s_j(a_j)$.
#
# **Best response and Nash equilibrium.** A best response to $s_{-i}$ is any strategy that maximises
# $s_i \cdot u_i(\cdot, s_{-i})$; it can always be pure. $s$ is a **Nash equilibrium** when every $s_i$
# is a best response to the others (Nash 1950: every finite game has one). The gap
#
# $$\mathrm{NashConv}(s) = \sum_i \big(\max_a u_i(a, s_{-i}) - u_i(s)\big) \ge 0$$
#
# is what all players together would gain by deviating alone; it is zero exactly at an equilibrium,
# and OpenSpiel's **exploitability** is $\mathrm{NashConv}/M$. In a two-player zero-sum game ($B = -A$)
# NashConv is the duality gap of the minimax linear program, and every equilibrium pays the game's value.
#
# **Supports and indifference.** In an equilibrium every action a player uses pays the same (otherwise
# it would move weight to the better one), and no unused action pays more. For a guess of the two
# supports these are linear equations; support enumeration solves them for every pair. Battle of the
# sexes has three equilibria: the two pure ones and a mixed one where each player makes the other
# indifferent. The picture shows the best-response correspondences; the equilibria are where they cross.

# %%
A_bos, B_bos = g.battle_of_the_sexes()
U_bos = g.bimatrix(A_bos, B_bos)
grid = np.linspace(0, 1, 201)  # x = P(row plays 0), y = P(column plays 0)
def best_x(y):  # the row player's best P(action 0) against y; nan where it is indifferent (any x is best)
    b = set(g.best_responses(U_bos, [np.array([1.0, 0.0]), np.array([y, 1 - y])], 0).tolist())
    return 1.0 if b == {0} else 0.0 if b == {1} else np.nan

def best_y(x):
    b = set(g.best_responses(U_bos, [np.array([x, 1 - x]), np.array([1.0, 0.0])], 1).tolist())
    return 1.0 if b == {0} else 0.0 if b == {1} else np.nan

fig, ax = plt.subplots(figsize=(4.5, 4.5))
bx, by = np.array([best_x(y) for y in grid]), np.array([best_y(x) for x in grid])
ax.plot(bx, grid, "C0", label="row's best x")
ax.plot(grid, by, "C1", label="column's best y")
for y in grid[np.isnan(bx)]:  # at the indifference point the best response is the whole interval
    ax.plot([0, 1], [y, y], "C0")
for x in grid[np.isnan(by)]:
    ax.plot([x, x], [0, 1], "C1")
equilibria_bos = eq.support_enumeration(A_bos, B_bos)
for x, y in equilibria_bos:
    ax.plot(x[0], y[0], "ko", ms=8)
ax.set(xlabel="x = P(row plays 0)", ylabel="y = P(column plays 0)", title="battle of the sexes")
ax.legend(loc="center right", fontsize=8)
plt.show()
for x, y in equilibria_bos:
    print(f"x = {np.round(x, 4)}, y = {np.round(y, 4)}, payoffs {np.round(g.expected_payoffs(U_bos, [x, y]), 4)}")
    assert g.is_nash(U_bos, [x, y])
assert len(equilibria_bos) == 3

# %% [markdown]
# **Polytopes and labels.** Shift the payoffs to be positive. The row player's best-response polytope
# $\mathcal{P} = \{x \ge 0 : B^\top x \le 1\}$ and the column player's $\mathcal{Q} = \{y \ge 0 : A y \le 1\}$ have the
# facets that name the actions: $x$ has label $i$ if $x_i = 0$ (row $i$ unused) and label $m+j$ if
# column $j$ is a best response. A pair of vertices whose labels cover all $m + n$ actions is an
# equilibrium (**vertex enumeration**). **Lemke-Howson** walks from the artificial pair $(0, 0)$: drop one
# label, pivot the variable that regains it in the other polytope, and repeat until the dropped label
# returns; each step is one simplex pivot, and the end is an equilibrium.
#
# **Learning in games.** Instead of solving, let the players adapt. In **fictitious play** (Brown 1951)
# each plays a best response to the other's empirical frequencies; in zero-sum games the frequencies
# converge to an equilibrium (Robinson 1951), in Shapley's 3 x 3 game they cycle for ever. In **regret
# matching** (Hart and Mas-Colell 2000) player $i$ keeps the regret $R_i(a) = \sum_t (u_i(a, s^t_{-i}) -
# u_i(s^t))$ of not having always played $a$ and plays $a$ with probability proportional to
# $\max(R_i(a), 0)$. Regret grows at most as $\sqrt{T}$, so the average strategies of two zero-sum
# players reach an equilibrium with NashConv $O(1/\sqrt{T})$; in general games they reach the larger
# set of coarse correlated equilibria.
#
# **Extensive form and CFR.** Poker has turns and hidden cards. A player's choice depends on its
# information set (own card and public history). CFR (Zinkevich et al. 2007) runs regret matching at
# every information set $I$ on the *counterfactual* regret, each term weighted by the probability
# $\pi_{-i}(I)$ that chance and the opponent reach $I$, and averages the policies weighted by the
# player's own reach. Kuhn poker (three cards, one bet) is the smallest interesting case: 12 information
# sets, and the value of the game for the first player is $-1/18$.
#
# ## 3. The distribution and communication pattern
#
# Regret matching is *uncoupled*: player $i$ needs its own payoffs and the others' current mixed
# strategies, never their payoffs or regrets. So each player can be a rank that owns its payoff tensor
# and regrets, and a round is an all-gather of the strategies: for $d = 1, \dots, K-1$ rank $i$ sends
# $s_i$ to rank $i+d$ and receives from rank $i-d$ in one `sendrecv`. There is no receive-from-any, and
# none is needed: in step $d$ every rank knows exactly whom it waits for, so the $K - 1$ exchanges never
# deadlock. Per round rank $i$ sends $K - 1$ messages of $8 n_i$ bytes; with $K$ ranks, one per player,
# the whole protocol costs $T (K-1)$ messages per rank, and in the alpha-beta model a round takes about
# $(K-1)(\alpha + 8 n \beta)$ plus the compute. The timeline shows two rounds of a three-player game.

# %%
U3 = g.random_nplayer_game([3, 2, 4], seed=SEED)
net = cluster.Network(alpha=1e-4, beta=1e-8)
traced = cluster.run(g.train_regret_matching, 3, args=(U3, 2), kwargs={"seconds_per_round": 2e-4},
                     network=net, trace=True, timeout=30)
cluster.plot_timeline(traced, title="regret matching, 3 players on 3 ranks, 2 rounds")
plt.show()
print("messages per rank:", [s.messages_sent for s in traced.stats], " bytes per rank:", [s.bytes_sent for s in traced.stats])
assert [s.messages_sent for s in traced.stats] == [2 * 2] * 3
assert [s.bytes_sent for s in traced.stats] == [2 * 2 * n * 8 for n in (3, 2, 4)]

# %% [markdown]
# CFR parallelises differently: the work of an iteration is a traversal of the game tree, and the
# subtrees below different chance outcomes (here the 6 deals of two cards) are independent until their
# regrets are added per information set. The library vectorises over the deals on one machine, the
# same axis along which large solvers split the tree over machines (an exercise in Section 8).
#
# ## 4. A minimal from-scratch implementation in NumPy
#
# **Support enumeration.** For every pair of supports $(I, J)$ of equal size, solve the two indifference
# systems, keep the solutions that are positive on the support, and check that no action outside pays
# more. In a non-degenerate game every equilibrium has supports of equal size, so this finds them all.

# %%
show(eq.support_enumeration, eq._indifferent)

# %% [markdown]
# **Vertex enumeration and Lemke-Howson.** `vertex_enumeration` lists the vertices of $\mathcal{P}$ and $\mathcal{Q}$ with
# their labels and pairs those that cover every label; `lemke_howson` keeps two tableaux, one column per
# label, and pivots with a lexicographic minimum-ratio test so the path is well defined.

# %%
show(eq.vertex_enumeration, eq.lemke_howson, eq._pivot)

# %% [markdown]
# The check: on seeded random games of several shapes, support enumeration and vertex enumeration find
# the same set of equilibria, an odd number of them, each with zero NashConv, and Lemke-Howson from every
# label ends at one of them.

# %%
for m, n, seed in [(2, 2, 1), (3, 3, 2), (4, 4, 3), (3, 5, 4), (5, 3, 5), (6, 6, 6)]:
    A, B = g.random_game(m, n, seed=seed)
    se, ve = eq.support_enumeration(A, B), eq.vertex_enumeration(A, B)
    assert eq.is_nondegenerate(A, B) and eq.same_equilibria(se, ve) and len(se) % 2 == 1
    assert all(g.nash_conv(g.bimatrix(A, B), [x, y]) < 1e-12 for x, y in se)
    lh = eq.lemke_howson_all(A, B)
    assert all(any(np.allclose(x, a) and np.allclose(y, b) for a, b in se) for x, y in lh)
    print(f"{m} x {n}, seed {seed}: {len(se)} equilibria; Lemke-Howson reaches {len(lh)} of them from {m + n} labels")

# %% [markdown]
# **Fictitious play and regret matching.** Fictitious play keeps play counts and adds a pure best response
# each round. Regret matching keeps regrets; the one-machine reference runs all players in one loop,
# and `missed` lets it reproduce a run in which some strategies were not heard (Section 6).

# %%
show(g.fictitious_play, g.regret_matching_strategy, g.regret_matching_update, g.reference_regret_matching)

# %% [markdown]
# **The protocol.** `train_regret_matching` is the per-rank version: the same update, with the
# others' strategies arriving by `sendrecv`. Each rank contracts the payoff tensor in one fixed order,
# so the ranks and the reference compute the same bits. The check runs every number of players in
# `PLAYERS` (one player is the trivial world of size 1; players have unequal numbers of actions) and
# compares the averages with `assert_array_equal`, not a tolerance.

# %%
show(g.train_regret_matching)

# %%
for M in PLAYERS:
    actions = [2 + (i % 3) for i in range(M)]
    U = g.random_nplayer_game(actions, seed=SEED + M)
    avg, missed, res = g.run_regret_matching(U, 50, timeout=60)
    ref, _ = g.reference_regret_matching(U, 50)
    assert missed == set()
    for a, r in zip(avg, ref):
        np.testing.assert_array_equal(a, r)  # bit for bit
    assert all(res.stats[i].messages_sent == 50 * (M - 1) for i in range(M))
    assert all(res.stats[i].bytes_sent == 50 * (M - 1) * actions[i] * 8 for i in range(M))
    print(f"M = {M} players, actions {actions}: equal to the reference; "
          f"{sum(s.messages_sent for s in res.stats)} messages, {sum(s.bytes_sent for s in res.stats)} bytes")

# %% [markdown]
# **CFR on Kuhn poker.** The traversal works on all 6 deals at once: at history $h$ the acting player's
# information set differs per deal (it holds a different card), so regrets are added with `np.add.at`.
# Updates alternate: player 0 updates against the current policy, the policy is re-matched, then player 1.

# %%
show(C._traverse, C.cfr_iteration)

# %% [markdown]
# Two references check the evaluation before we trust CFR's curve. Kuhn (1950) found the equilibria by
# hand: a family indexed by the probability $a \in [0, 1/3]$ that player 0 bets a jack. They must have value
# $-1/18$ and exploitability 0. And the best-response value, computed by one recursion per card, must
# equal the maximum over all $2^6$ pure strategies of the responder.

# %%
for a in (0.0, 0.15, 1 / 3):
    P = C.kuhn_nash_policy(a)
    assert abs(C.expected_value(P) + 1 / 18) < 1e-15 and abs(C.exploitability(P)) < 1e-15
rng = np.random.default_rng(SEED)
for _ in range(3):
    P = rng.dirichlet([1, 1], size=12)
    for i in (0, 1):
        assert abs(C.best_response_value(P, i) - C.reference_best_response_value(P, i)) < 1e-14
avg_cfr, curve_cfr = C.cfr(max(CFR_MARKS), track=CFR_MARKS)
print(f"{max(CFR_MARKS)} CFR iterations; exploitability of the average policy:")
print({t: f"{e:.2e}" for t, e in curve_cfr.items()})
print(f"value for player 0: {C.expected_value(avg_cfr):.5f} (the game's value is {-1 / 18:.5f})")
assert curve_cfr[max(CFR_MARKS)] < curve_cfr[CFR_MARKS[0]] / 20
assert abs(C.expected_value(avg_cfr) + 1 / 18) < 5e-3
for key in ("J", "Q", "K", "Jb", "Qb", "Kb"):
    print(f"  {key:>3}: P(bet) = {avg_cfr[C.INFOSETS.index(key), 1]:.3f}")

# %% [markdown]
# The learnt policy has Kuhn's shape: player 0 never opens with a queen and bets a king about three times
# as often as a jack; player 1 calls a bet with a king, folds a jack, and calls with a queen about a
# third of the time.
#
# ## 5. The same task with a production library: nashpy and OpenSpiel
#
# **nashpy** (Knight and Campbell) implements support enumeration, vertex enumeration, Lemke-Howson and
# fictitious play for bimatrix games. On the named non-degenerate games and on seeded random games we
# compare the sets of equilibria; on degenerate games (von Stengel's 3 x 2 example and games with small
# integer payoffs) we compare vertex enumeration, the method that is right there; and we run
# Lemke-Howson from the same dropped label on both sides.

# %%
import warnings

import nashpy

def nashpy_list(it):
    with warnings.catch_warnings():  # nashpy warns when it finds an even number; we compare, not read
        warnings.simplefilter("ignore")
        return list(it)

cases = {name: g.GAMES[name]() for name in ["matching pennies", "prisoner's dilemma", "battle of the sexes",
                                            "rock-paper-scissors", "Shapley's game"]}
cases.update({f"random 4x4 seed {s}": g.random_game(4, 4, seed=s) for s in range(RANDOM_GAMES)})
def contains(big, small):  # every equilibrium of ``small`` is in ``big``
    return all(any(np.allclose(x, a, atol=1e-8) and np.allclose(y, b, atol=1e-8) for a, b in big) for x, y in small)

print(f"{'game':>22} {'ours':>5} {'nashpy SE':>9} {'nashpy VE':>9} {'Lemke-Howson':>12}")
for name, (A, B) in cases.items():
    G = nashpy.Game(A, B)
    ours, se, ve = eq.support_enumeration(A, B), nashpy_list(G.support_enumeration()), nashpy_list(G.vertex_enumeration())
    lh_same = all(np.allclose(np.concatenate(eq.lemke_howson(A, B, k)),
                              np.concatenate(G.lemke_howson(initial_dropped_label=k)), atol=1e-10)
                  for k in range(sum(A.shape)))
    print(f"{name:>22} {len(ours):>5} {len(eq.sort_equilibria(se)):>9} {len(eq.sort_equilibria(ve)):>9} "
          f"{'equal' if lh_same else 'DIFFER':>12}")
    assert eq.is_nondegenerate(A, B) and lh_same and eq.same_equilibria(ours, ve) and contains(ours, se)
    if not name.startswith("random"):
        assert eq.same_equilibria(ours, se)
degenerate = {"degenerate 3x2": g.degenerate_game()}
degenerate.update({f"integers 4x4 seed {s}": g.random_game(4, 4, seed=s, integers=3) for s in range(RANDOM_GAMES)})
for name, (A, B) in degenerate.items():
    ours, theirs = eq.vertex_enumeration(A, B), nashpy_list(nashpy.Game(A, B).vertex_enumeration())
    print(f"{name:>22} {len(ours):>10} vertex enumeration {'equal' if eq.same_equilibria(ours, theirs) else 'DIFFER'}"
          f"{'' if eq.is_nondegenerate(A, B) else ' (degenerate)'}")
    assert eq.same_equilibria(ours, theirs)

# %% [markdown]
# Every equilibrium nashpy finds is one of ours, its vertex enumeration and Lemke-Howson agree with ours
# on every game, and its support enumeration agrees on the named games. On some random games, though,
# nashpy's support enumeration returns *fewer* equilibria than ours while its own vertex enumeration sides
# with us. The cause: nashpy checks "every support action is a best response" with exact floating-point
# equality, which rounding can defeat; our check uses a tolerance. The cell below shows it on a 3 x 5 game.
# Fictitious play agrees move for move once the first all-zero tie (which nashpy breaks at random) is
# removed by a given first move.

# %%
A, B = g.random_game(4, 3, seed=SEED)
first = [np.array([1, 0, 0, 0]), np.array([0, 0, 1])]
ours_fp, _ = g.fictitious_play(A, B, LEARN_ITERS // 4, counts=first)
theirs_fp = nashpy_list(nashpy.Game(A, B).fictitious_play(iterations=LEARN_ITERS // 4,
                                                        play_counts=[c.astype(float) for c in first]))[-1]
assert all(np.array_equal(o, t) for o, t in zip(ours_fp, theirs_fp))
print("fictitious play counts equal nashpy's:", [o.tolist() for o in ours_fp])
A, B = g.random_game(3, 5, seed=3)
G = nashpy.Game(A, B)
ours_se, theirs_se = eq.support_enumeration(A, B), nashpy_list(G.support_enumeration())
print(f"3 x 5 seed 3: ours {len(ours_se)} equilibria, nashpy's support enumeration {len(theirs_se)}, "
      f"nashpy's vertex enumeration {len(nashpy_list(G.vertex_enumeration()))}")
assert eq.same_equilibria(ours_se, nashpy_list(G.vertex_enumeration())) and len(theirs_se) < len(ours_se)

# %% [markdown]
# **OpenSpiel** (Lanctot et al. 2019) is DeepMind's framework for games. We run its `CFRSolver` on
# `pyspiel.load_game("kuhn_poker")` for the same iteration counts and measure the exploitability of its
# average policy with its own `exploitability` module. Its information states are named by the card's
# index and the history ("1pb" is our "Qpb"), so `to_openspiel_policy` maps our policy into an OpenSpiel
# `TabularPolicy`; then OpenSpiel can judge *our* policy too. The stated factor: our exploitability must
# be within 1 + 1e-6 of OpenSpiel's at every count (both solvers use alternating updates and uniform
# averaging, so anything larger would be a bug), and OpenSpiel's exploitability of our policy must equal
# ours to 1e-12.

# %%
import pyspiel
from open_spiel.python.algorithms import cfr as os_cfr
from open_spiel.python.algorithms import exploitability as os_exploitability

kuhn = pyspiel.load_game("kuhn_poker")
solver, curve_os = os_cfr.CFRSolver(kuhn), {}
for t in range(1, max(CFR_MARKS) + 1):
    solver.evaluate_and_update_policy()
    if t in CFR_MARKS:
        curve_os[t] = os_exploitability.exploitability(kuhn, solver.average_policy())
print(f"{'iterations':>10} {'ours':>10} {'OpenSpiel':>10} {'ratio':>8}")
for t in CFR_MARKS:
    print(f"{t:>10} {curve_cfr[t]:>10.3e} {curve_os[t]:>10.3e} {curve_cfr[t] / curve_os[t]:>8.5f}")
    assert abs(curve_cfr[t] / curve_os[t] - 1.0) < 1e-6
judged = os_exploitability.exploitability(kuhn, C.to_openspiel_policy(avg_cfr, kuhn))
print(f"OpenSpiel's exploitability of our policy {judged:.6e}, ours {C.exploitability(avg_cfr):.6e}")
assert abs(judged - C.exploitability(avg_cfr)) < 1e-12
gap = np.abs(avg_cfr - C.from_openspiel_policy(solver.average_policy())).max()
print(f"largest difference between the two average policies: {gap:.1e}")
assert gap < 1e-9

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **Lost messages.** With `Faults(loss=p)` each strategy message is lost with chance $p$; the receiver's
# `recv` raises `MessageLostError` when the message was due, and the player keeps the last strategy it
# heard from that peer. Regret matching tolerates stale information: it is still a no-regret procedure
# against the strategies the player *believes* the others play, so the averages still approach
# equilibrium, only more slowly. The run is reproducible: the reference, told which messages were
# missed, gives the same bits. We use a zero-sum game with an interior equilibrium.

# %%
A_zs, _ = g.random_game(4, 4, seed=SEED + 11, zero_sum=True)
U_zs = g.bimatrix(A_zs, -A_zs)
loss_curves = {}
for p in LOSSES:
    faults = cluster.Faults(loss=p, seed=SEED) if p > 0 else None
    avg, missed, res = g.run_regret_matching(U_zs, LEARN_ITERS, faults=faults, timeout=120)
    ref, curve = g.reference_regret_matching(U_zs, LEARN_ITERS, missed=missed, track=True)
    assert all(np.array_equal(a, r) for a, r in zip(avg, ref))
    loss_curves[p] = curve
    print(f"loss {p:.2f}: {len(missed):>5} of {2 * LEARN_ITERS} strategies not heard; "
          f"NashConv after {LEARN_ITERS} rounds {g.nash_conv(U_zs, avg):.4f}")
assert all(c[-1] < 0.1 for c in loss_curves.values())

# %% [markdown]
# **A crashed player.** `Faults(crash={1: n})` stops player 1 at its $(n+1)$-th send. Its peers get
# `PeerCrashedError`, stop waiting for it, and keep playing against its last strategy, which is now a fixed
# part of their environment. The survivors' averages again equal the reference's.

# %%
U3 = g.random_nplayer_game([3, 3, 3], seed=SEED + 5)
avg, missed, res = g.run_regret_matching(U3, 200, faults=cluster.Faults(crash={1: 99}), timeout=60)
ref, _ = g.reference_regret_matching(U3, 200, missed=missed)
assert avg[1] is None and all(np.array_equal(a, r) for a, r in zip(avg, ref) if a is not None)
print(f"player 1 crashed in round {min(t for t, i, j in missed)}; survivors' averages equal the reference; "
      f"{len(missed)} strategies not heard")

# %% [markdown]
# **Dynamics that do not converge.** Not every failure is a machine's. In Shapley's game fictitious play
# cycles around the unique (uniform) equilibrium with ever longer runs, and NashConv never falls below a
# constant; in rock-paper-scissors, a zero-sum game, it converges.

# %%
_, fp_rps = g.fictitious_play(*g.rock_paper_scissors(), LEARN_ITERS, track=True)
_, fp_shapley = g.fictitious_play(*g.shapley_game(), LEARN_ITERS, track=True)
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.loglog(np.arange(1, LEARN_ITERS + 1), fp_rps, label="rock-paper-scissors (zero-sum)")
ax.loglog(np.arange(1, LEARN_ITERS + 1), fp_shapley, label="Shapley's game")
ax.set(xlabel="round", ylabel="NashConv of the empirical frequencies", title="fictitious play")
ax.legend()
plt.show()
assert fp_shapley[LEARN_ITERS // 4:].min() > 0.1 and fp_rps[-1] < 0.05

# %% [markdown]
# **Degeneracy.** In a degenerate game equilibria come in connected sets, not points. Support enumeration
# with equal-size supports misses part of von Stengel's segment; vertex enumeration returns the extreme
# points, and every convex combination of the two ends on the segment is an equilibrium too.

# %%
A, B = g.degenerate_game()
print("support enumeration:", [(x.round(3).tolist(), y.round(3).tolist()) for x, y in eq.support_enumeration(A, B)])
print("vertex enumeration: ", [(x.round(3).tolist(), y.round(3).tolist()) for x, y in eq.vertex_enumeration(A, B)])
assert not eq.is_nondegenerate(A, B)
assert len(eq.vertex_enumeration(A, B)) > len(eq.support_enumeration(A, B))
for lam in np.linspace(0, 1, 5):
    assert g.is_nash(g.bimatrix(A, B), [np.array([1.0, 0, 0]), np.array([1 - lam / 3, lam / 3])])

# %% [markdown]
# ## 7. Evaluation: convergence, cost and time
#
# **Convergence of the learning dynamics.** NashConv of the average strategies against rounds, for
# fictitious play and regret matching on the random zero-sum game of Section 6, and the same for regret
# matching with lost messages. The dashed line is $1/\sqrt{T}$.

# %%
_, fp_zs = g.fictitious_play(A_zs, -A_zs, LEARN_ITERS, track=True)
t_axis = np.arange(1, LEARN_ITERS + 1)
fig, ax = plt.subplots(figsize=(7, 4.2))
ax.loglog(t_axis, fp_zs, label="fictitious play")
for p, c in loss_curves.items():
    ax.loglog(t_axis, c, label=f"regret matching, loss {p:g}")
ax.loglog(t_axis, 1 / np.sqrt(t_axis), "k--", lw=0.8, label="1 / sqrt(T)")
ax.set(xlabel="rounds T", ylabel="NashConv of the averages", title="4 x 4 zero-sum game")
ax.legend(fontsize=8)
plt.show()
slope = np.polyfit(np.log(t_axis[LEARN_ITERS // 10:]), np.log(loss_curves[0.0][LEARN_ITERS // 10:]), 1)[0]
print(f"regret matching: NashConv ~ T^{slope:.2f}")
assert slope < -0.4

# %% [markdown]
# **CFR, ours and OpenSpiel's.** Exploitability against iterations, and the time per iteration. The two
# curves coincide (they are the same algorithm); our traversal handles the 6 deals as one vector, which
# is where its time advantage comes from. The times are of the iterations alone, without the evaluations,
# over 200 fresh iterations each. `benchmarks/bench_cfr.py` repeats this to 10 000 iterations.

# %%
regret, cum, pol = np.zeros((12, 2)), np.zeros((12, 2)), C.uniform_policy()
t0 = time.perf_counter()
for _ in range(200):
    pol = C.cfr_iteration(regret, cum, pol)
per_ours = (time.perf_counter() - t0) / 200
fresh = os_cfr.CFRSolver(kuhn)
t0 = time.perf_counter()
for _ in range(200):
    fresh.evaluate_and_update_policy()
per_os = (time.perf_counter() - t0) / 200
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].loglog(CFR_MARKS, [curve_cfr[t] for t in CFR_MARKS], "o-", label="scaleoutai")
axes[0].loglog(CFR_MARKS, [curve_os[t] for t in CFR_MARKS], "x--", label="OpenSpiel CFRSolver")
axes[0].set(xlabel="iterations", ylabel="exploitability", title="CFR on Kuhn poker")
axes[0].legend()
axes[1].bar(["scaleoutai", "OpenSpiel"], [per_ours * 1e6, per_os * 1e6], color=["C0", "C1"])
axes[1].set(ylabel="microseconds per iteration", title="time per iteration")
plt.tight_layout()
plt.show()
print(f"time per iteration: ours {per_ours * 1e6:.0f} us, OpenSpiel {per_os * 1e6:.0f} us")

# %% [markdown]
# **The protocol's cost.** Messages and bytes grow as $K(K-1)$ per round with $K$ players on $K$ ranks;
# the simulated time of a round is $K-1$ latency-bound exchanges plus the compute (last column: the model
# $(K-1)\alpha$ plus the 0.1 ms of compute per round). The one-machine
# reference has no messages at all; distribution pays only when the players must stay apart (privacy
# of payoffs, separate owners) or when each player's payoff evaluation is expensive.

# %%
rows = []
for M in PLAYERS:
    U = g.random_nplayer_game([3] * M, seed=SEED + M)
    _, _, res = g.run_regret_matching(U, 20, network=net, seconds_per_round=1e-4, timeout=60)
    msgs, nbytes = sum(s.messages_sent for s in res.stats), sum(s.bytes_sent for s in res.stats)
    rows.append((M, msgs / 20, nbytes / 20, res.sim_time / 20))
    assert msgs == 20 * M * (M - 1)
print(f"{'K':>3} {'messages/round':>15} {'bytes/round':>12} {'simulated ms/round':>19} {'model (K-1)a + c':>18}")
for M, m, nb, s in rows:
    print(f"{M:>3} {m:>15.0f} {nb:>12.0f} {s * 1e3:>19.3f} {(M - 1) * net.alpha * 1e3 + 0.1:>18.3f}")

# %% [markdown]
# **The cost of exact equilibria.** Support enumeration solves two small systems per pair of equal-size
# supports, $\binom{2n}{n} - 1$ pairs; Lemke-Howson follows one path of pivots. On random $n \times n$ games:

# %%
enum_rows = []
for n in ENUM_SIZES:
    A, B = g.random_game(n, n, seed=SEED + n)
    t0 = time.perf_counter()
    se = eq.support_enumeration(A, B)
    t_se = time.perf_counter() - t0
    t0 = time.perf_counter()
    x, y = eq.lemke_howson(A, B, 0)
    t_lh = time.perf_counter() - t0
    assert any(np.allclose(x, a) and np.allclose(y, b) for a, b in se)
    enum_rows.append((n, comb(2 * n, n) - 1, len(se), t_se, t_lh))
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.semilogy([r[0] for r in enum_rows], [r[3] for r in enum_rows], "o-", label="support enumeration")
ax.semilogy([r[0] for r in enum_rows], [r[4] for r in enum_rows], "s-", label="Lemke-Howson (one label)")
ax.set(xlabel="n (actions per player)", ylabel="seconds", title="exact equilibria of random n x n games")
ax.legend()
plt.show()
for n, pairs, k, t_se, t_lh in enum_rows:
    print(f"n = {n}: {pairs:>5} support pairs, {k} equilibria, {t_se * 1e3:8.1f} ms; Lemke-Howson {t_lh * 1e3:6.2f} ms")

# %% [markdown]
# ## 8. Exercises
#
# 1. **Regret matching plus.** Replace the regrets by $R^+_t = \max(R^+_{t-1} + r_t, 0)$ (Tammelin 2014)
#    in `reference_regret_matching` and in the protocol, keep them bit for bit equal, and plot NashConv
#    against rounds beside plain regret matching on the 4 x 4 zero-sum game.
# 2. **Fewer messages.** In a two-player game each rank sends its strategy every round. Send it only every
#    $k$ rounds (the others keep the last one they heard, as after a loss) and measure NashConv at equal
#    bytes for $k = 1, 2, 4, 8$. Which $k$ is best for a fixed byte budget?
# 3. **Distributed CFR.** Split the 6 deals of Kuhn poker over $K$ ranks; each traverses its deals and the
#    regret and policy sums are combined with an all-reduce (Chapter 4) before the policy is re-matched.
#    Show that the average policy equals `cfr`'s to rounding for $K = 1, 2, 3, 6$, and count the bytes.
# 4. **Lemke-Howson's paths.** For random $n \times n$ games count the pivots Lemke-Howson needs from each
#    label, and find a label whose path reaches a different equilibrium than label 0. Why can a path from
#    some equilibrium to another be needed to find all of them?
# 5. **Coarse correlated equilibria.** Run regret matching on battle of the sexes and on a random 3-player
#    game. Show that the joint empirical distribution of play satisfies the coarse correlated equilibrium
#    inequalities up to a gap that falls as $1/\sqrt{T}$, while the product of the average strategies
#    need not be a Nash equilibrium.
# 6. **Lab 28: CFR+ on a cluster.** Solve Kuhn poker with a deck of $n_c$ cards by CFR+ (regret
#    matching+ with the regrets floored at zero, alternating updates, a linearly weighted average) with
#    the information sets sharded by card over K ranks, each rank holding only its shard of a checkpoint.
#    Decide what a rank must receive each update to compute its own cards' counterfactual values, send
#    only that, and beat vanilla CFR's exploitability at equal iterations for any K (`labs/lab28-cfr-plus`).
#
# ## 9. Research directions
#
# - **The complexity of equilibria.** Finding a Nash equilibrium of a two-player game is PPAD-complete, and
#   Lemke-Howson can take exponentially many pivots; which classes of games (and which approximations)
#   admit fast algorithms, and what practical solvers can certify, remain open.
#   - Daskalakis, Goldberg and Papadimitriou, "The Complexity of Computing a Nash Equilibrium", SIAM
#     Journal on Computing, 2009. PPAD-hardness for games with more players.
#   - Chen, Deng and Teng, "Settling the Complexity of Computing Two-Player Nash Equilibria", Journal of
#     the ACM, 2009. Even two players are PPAD-complete.
#   - Savani and von Stengel, "Hard-to-Solve Bimatrix Games", Econometrica, 2006. Games on which every
#     Lemke-Howson path is exponentially long.
#   - Gemp, Marris and Piliouras, "Approximating Nash Equilibria in Normal-Form Games via Stochastic
#     Optimization", ICLR, 2024. A loss for approximate equilibria with unbiased sampled estimates, so
#     plain SGD can search large games that exact solvers cannot enumerate.
# - **Scaling CFR to real games.** Limit and no-limit poker were solved or beaten with CFR variants run on
#   clusters, using abstraction, sampling and subgame solving; doing the same for games with more players,
#   longer horizons or continuous actions, without hand-made abstractions, is open.
#   - Zinkevich, Johanson, Bowling and Piccione, "Regret Minimization in Games with Incomplete
#     Information", NeurIPS, 2007. CFR and its regret bound.
#   - Bowling, Burch, Johanson and Tammelin, "Heads-up Limit Hold'em Poker Is Solved", Science, 2015.
#     CFR+ on a cluster, with the tree compressed to fit in memory.
#   - Brown and Sandholm, "Superhuman AI for Multiplayer Poker", Science, 2019. Pluribus: Monte Carlo CFR
#     and depth-limited search for six players.
#   - Schmid et al., "Student of Games: A unified learning algorithm for both perfect and imperfect
#     information games", Science Advances, 2023. One algorithm combining guided search, self-play and
#     counterfactual reasoning that plays chess, Go, poker and Scotland Yard.
# - **Learning instead of tabulating.** Replacing the regret tables by neural networks lets CFR-like methods
#   generalise across information sets, at the price of approximation error whose effect on
#   exploitability is poorly understood.
#   - Brown, Lerer, Gross and Sandholm, "Deep Counterfactual Regret Minimization", ICML, 2019. Regrets
#     predicted by networks trained on sampled traversals.
#   - Lanctot et al., "A Unified Game-Theoretic Approach to Multiagent Reinforcement Learning", NeurIPS,
#     2017. Policy-space response oracles, the bridge to Chapter 30.
# - **Uncoupled dynamics beyond zero-sum games.** No uncoupled dynamics converge to Nash equilibrium in all
#   games; regret-based learning reaches correlated equilibria, and the fastest rates in general games and
#   under delays and lost messages are active research.
#   - Hart and Mas-Colell, "A Simple Adaptive Procedure Leading to Correlated Equilibrium", Econometrica,
#     2000. Regret matching.
#   - Hart and Mas-Colell, "Uncoupled Dynamics Do Not Lead to Nash Equilibrium", American Economic Review,
#     2003. The impossibility result.
#   - Daskalakis, Fishelson and Golowich, "Near-Optimal No-Regret Learning in General Games", NeurIPS, 2021.
#     Optimistic updates with polylogarithmic regret.
#   - Zhou, Mertikopoulos, Bambos, Glynn and Tomlin, "Countering Feedback Delays in Multi-Agent Learning",
#     NeurIPS, 2017. What delayed feedback does to no-regret learning, and how to correct for it.
# - **Language models as players.** Agents built on language models now bargain, price and coordinate
#   with each other; whether they reach equilibria, cooperate, or need explicit game-theoretic scaffolding
#   is measured game by game with no theory yet.
#   - Akata, Schulz, Coda-Forno, Oh, Bethge and Schulz, "Playing repeated games with large language
#     models", Nature Human Behaviour, 2025. LLMs do well in repeated Prisoner's Dilemma variants but
#     coordinate poorly in Battle of the Sexes; asking them to predict the other player's move first helps.
#
# ## What's next
#
# Chapter 29 (Multi-agent systems) turns the question around: instead of predicting what self-interested
# agents do in a given game, it designs the rules (negotiation protocols, first-price, second-price and VCG
# auctions) so that the equilibrium is an outcome we want, and adds consensus among agents that may crash.
