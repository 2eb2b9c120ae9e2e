# %% [markdown]
# # Chapter 28 solutions: Game theory
#
# Worked solutions to the exercises of `chapters/28-game-theory` (the instructor's manual, never in the
# student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import cfr as C
from scaleoutai.agents import equilibria as eq
from scaleoutai.agents import games as g
from scaleoutai.collectives import ring_allreduce

T0 = time.perf_counter()
A_zs, _ = g.random_game(4, 4, seed=11, zero_sum=True)  # the chapter's 4 x 4 zero-sum game (SEED + 11)
U_zs = g.bimatrix(A_zs, -A_zs)

# %% [markdown]
# ## Exercise 1 (coding): regret matching plus
#
# **Answer.** RM+ replaces the running regret by its clipped version, $R^+_t = \max(R^+_{t-1} + r_t, 0)$
# with $r_t(a) = u_i(a, s^t_{-i}) - u_i(s^t)$, and plays $s_i \propto R^+$ (uniform when $R^+ = 0$). The
# only change to the update is one `np.maximum`; the protocol is untouched, so the ranks and the one-machine
# loop still perform the same floating-point operations in the same order and stay equal bit for bit
# (checked with `assert_array_equal`, as the chapter does; with `plus=False` both equal the library's
# `reference_regret_matching`, which checks the refactor). RM+ forgets negative regret at once, so an
# action that becomes good again is played again immediately, without first paying back a large negative
# regret. On the zero-sum 4 x 4 game the NashConv of its uniform average ends below plain regret
# matching's after 2000 rounds. The bound proved for both is $O(1/\sqrt{T})$; RM+'s large practical gains
# (Tammelin's CFR+) come with *linearly weighted* averages and alternating updates, which this exercise does
# not use, so here the gain is modest.

# %%
def rm_update(payoffs, views, i, regret, total, plus):
    """One round for player i in place: add the instantaneous regret (clipped at 0 for RM+) and s_i."""
    v = g.action_values(payoffs, views, i)
    regret += v - views[i] @ v
    if plus:
        np.maximum(regret, 0.0, out=regret)
    total += views[i]


def reference_rm(payoffs, T, plus=False, track=False):
    """All players on one machine; returns the averages and NashConv of the averages per round."""
    n = payoffs.shape[1:]
    regret, total = [np.zeros(k) for k in n], [np.zeros(k) for k in n]
    curve = []
    for t in range(T):
        s = [g.regret_matching_strategy(r) for r in regret]
        for i in range(len(n)):
            rm_update(payoffs, s, i, regret[i], total[i], plus)
        if track:
            curve.append(g.nash_conv(payoffs, [x / (t + 1) for x in total]))
    return [x / T for x in total], np.array(curve)


def rm_protocol(comm, payoffs, T, plus=False):
    """Player comm.rank: each round exchange strategies with every other rank (sendrecv), then update."""
    M, i = payoffs.shape[0], comm.rank
    regret, total = np.zeros(payoffs.shape[1 + i]), np.zeros(payoffs.shape[1 + i])
    heard = [np.full(k, 1.0 / k) for k in payoffs.shape[1:]]
    for _ in range(T):
        heard[i] = g.regret_matching_strategy(regret)
        for d in range(1, M):
            heard[(i - d) % M] = comm.sendrecv(heard[i], (i + d) % M, (i - d) % M)
        rm_update(payoffs, heard, i, regret, total, plus)
    return total / T


T = 2000
for plus in (False, True):
    for U in (U_zs, g.random_nplayer_game([2, 3, 4], seed=1)):
        ranks = cluster.run(rm_protocol, U.shape[0], args=(U, 300, plus)).values
        ref, _ = reference_rm(U, 300, plus)
        for a, b in zip(ranks, ref):
            np.testing.assert_array_equal(a, b)  # bit for bit
        if not plus:  # and plain RM is the library's reference
            for a, b in zip(ref, g.reference_regret_matching(U, 300)[0]):
                np.testing.assert_array_equal(a, b)
_, rm_curve = reference_rm(U_zs, T, plus=False, track=True)
_, plus_curve = reference_rm(U_zs, T, plus=True, track=True)
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(np.arange(1, T + 1), rm_curve, label="regret matching")
ax.loglog(np.arange(1, T + 1), plus_curve, label="regret matching plus")
ax.set(xlabel="round", ylabel="NashConv of the averages", title="4 x 4 zero-sum game")
ax.legend()
plt.close(fig)
print(f"NashConv after {T} rounds: RM {rm_curve[-1]:.2e}, RM+ {plus_curve[-1]:.2e}")
assert plus_curve[-1] < rm_curve[-1] and plus_curve[-1] < 0.05

# %% [markdown]
# ## Exercise 2 (analysis): send the strategy only every k rounds
#
# **Answer.** Skipping rounds is exactly the chapter's loss model with a deterministic pattern: in a
# round $t$ with $t \bmod k \ne 0$ nobody sends and every player keeps the last strategy it heard, so the
# run equals `reference_regret_matching` with `missed` = every $(t, i, j)$ of a silent round (checked bit
# for bit against the protocol below). Bytes per rank for $T$ rounds are $\lceil T/k \rceil \cdot 8 n$
# (with $M - 1 = 1$ peer). At a fixed byte budget $\mathcal{B}$ the run may last
# $T = k \cdot \mathcal{B} / (8n)$ rounds.
#
# Which $k$ is best depends on two effects. A larger $k$ buys $k$ times as many rounds, and the regret
# term of NashConv falls as $\Delta\sqrt{n / (k T_1)}$ ($T_1$ the rounds of $k = 1$). But the players now
# accumulate regret against strategies they *heard*, not the ones actually played. In regret matching
# $R^t$ grows like $\sqrt{t}$ while each round changes it by $O(1)$, so a strategy drifts by
# $O(1/\sqrt{t})$ per round and by $O(k/\sqrt{t})$ over a silent stretch; summed over $T = kT_1$ rounds
# and divided by $T$ that error is of order $k/\sqrt{kT_1} = \sqrt{k/T_1}$, growing as $\sqrt{k}$ while
# the regret term shrinks as $1/\sqrt{k}$. On this game the staleness term dominates: NashConv at equal
# bytes *rises* with $k$ over $1, 2, 4, 8$, so $k = 1$ is best for a fixed byte budget. Skipping messages
# pays only when a round's compute is cheap and the byte budget is not the binding cost (then more rounds
# per byte also help the regret term), or with a method whose strategies move more slowly.

# %%
def rm_every_k(comm, payoffs, T, k):
    """Two-player regret matching that exchanges strategies only in rounds t with t % k == 0."""
    i, j = comm.rank, 1 - comm.rank
    regret, total = np.zeros(payoffs.shape[1 + i]), np.zeros(payoffs.shape[1 + i])
    heard = [np.full(n, 1.0 / n) for n in payoffs.shape[1:]]
    for t in range(T):
        heard[i] = g.regret_matching_strategy(regret)
        if t % k == 0:
            heard[j] = comm.sendrecv(heard[i], j, j)
        g.regret_matching_update(payoffs, heard, i, regret, total)
    return total / T


budget_rounds, n = 500, U_zs.shape[1]
results = {}
for k in (1, 2, 4, 8):
    T_k = budget_rounds * k  # the same number of messages, hence bytes, for every k
    res = cluster.run(rm_every_k, 2, args=(U_zs, T_k, k))
    silent = {(t, i, 1 - i) for t in range(T_k) if t % k for i in (0, 1)}
    ref, _ = g.reference_regret_matching(U_zs, T_k, missed=silent)
    for a, b in zip(res.values, ref):
        np.testing.assert_array_equal(a, b)
    assert [s.bytes_sent for s in res.stats] == [-(-T_k // k) * 8 * n] * 2
    results[k] = g.nash_conv(U_zs, res.values)
    print(f"k = {k}: {T_k} rounds, {res.stats[0].bytes_sent} bytes per rank, NashConv {results[k]:.4f}")
best_k = min(results, key=results.get)
assert best_k == 1 and results[8] > results[1]  # the observation the Markdown explains

# %% [markdown]
# ## Exercise 3 (coding): distributed CFR over the 6 deals
#
# **Answer.** The deals are independent subtrees until their regrets and policy sums meet at the
# information sets, so rank $r$ traverses only its block of deals and produces partial increments
# $\Delta R_r, \Delta S_r$ (12 x 2 each); one all-reduce of the 48 numbers sums them, and every rank adds
# the sum and re-matches the same policy. CFR's alternating updates need two all-reduces per iteration
# (player 0's increments before the policy is re-matched for player 1). The sums are equal to the
# one-machine traversal up to the order of floating-point additions, so the average policy equals `cfr`'s
# to rounding (1e-12) for $K = 1, 2, 3, 6$.
#
# Bytes: the ring all-reduce moves each of the $K$ blocks $K - 1$ times in the reduce-scatter and again
# in the all-gather, $2(K-1) \cdot 48 \cdot 8$ bytes over all ranks per all-reduce, hence
# $4(K-1) \cdot 384$ bytes per iteration: 0 for $K = 1$, 7680 for $K = 6$ — independent of the game's size
# only here; for hold'em the vectors are the regrets of $10^{14}$ information sets, which is why real
# solvers abstract the game or split the tree by public state instead of by deal.

# %%
def traverse_deals(h, reach, policy, player, regret, cum, deals):
    """Player 0's values below h for the deals listed; adds player's regrets and policy sums in place."""
    if h in C.TERMINALS:
        return C.utility(h)[deals]
    p = len(h) % 2
    idx = C._AT[h][deals]
    sigma = policy[idx]
    child = []
    for a, act in enumerate("pb"):
        r = reach.copy()
        r[p] = r[p] * sigma[:, a]
        child.append(traverse_deals(h + act, r, policy, player, regret, cum, deals))
    v = child[0] * sigma[:, 0] + child[1] * sigma[:, 1]
    if p == player:
        w = C.CHANCE * reach[1 - p] * (1.0 if p == 0 else -1.0)
        for a in range(2):
            np.add.at(regret[:, a], idx, w * (child[a] - v))
            np.add.at(cum[:, a], idx, sigma[:, a] * reach[p])
    return v


def distributed_cfr(comm, iterations):
    """CFR with the deals split in blocks over the ranks and one all-reduce per player update."""
    K, r = comm.size, comm.rank
    deals = np.arange(len(C.DEALS))[r * len(C.DEALS) // K:(r + 1) * len(C.DEALS) // K]
    regret, cum, policy = np.zeros((12, 2)), np.zeros((12, 2)), C.uniform_policy()
    for _ in range(iterations):
        for player in (0, 1):
            d_regret, d_cum = np.zeros((12, 2)), np.zeros((12, 2))
            traverse_deals("", np.ones((2, len(deals))), policy, player, d_regret, d_cum, deals)
            summed = ring_allreduce(comm, np.concatenate([d_regret.ravel(), d_cum.ravel()])) if K > 1 \
                else np.concatenate([d_regret.ravel(), d_cum.ravel()])
            regret += summed[:24].reshape(12, 2)
            cum += summed[24:].reshape(12, 2)
            policy = C._regret_matching(regret)
    return C.average_policy(cum)


ITERS = 200
want, _ = C.cfr(ITERS)
for K in (1, 2, 3, 6):
    res = cluster.run(distributed_cfr, K, args=(ITERS,))
    for got in res.values:
        assert np.abs(got - want).max() < 1e-12
    total_bytes = sum(s.bytes_sent for s in res.stats)
    assert total_bytes == ITERS * 2 * 2 * (K - 1) * 48 * 8
    print(f"K = {K}: average policy equals cfr's to {np.abs(res.values[0] - want).max():.1e}; "
          f"{total_bytes / ITERS:.0f} bytes per iteration over all ranks")

# %% [markdown]
# ## Exercise 4 (analysis): Lemke-Howson's paths
#
# **Answer.** Count the pivots by wrapping the library's pivot step; on random $n \times n$ games each
# label's path takes a handful of pivots (at least 2: one per polytope, and growing with $n$), and different labels
# often end at different equilibria. Some equilibria are reached from no label at all.
#
# **Why paths between equilibria are needed.** Fix a label $k$. In the graph of vertex pairs that carry
# every label except possibly $k$, the artificial equilibrium $(0, 0)$ and every Nash equilibrium have
# degree 1 (exactly one way to drop or pick up $k$), every other vertex pair degree 2. So the graph is a
# union of paths and cycles, and the degree-1 nodes are paired by the paths: the path from $(0, 0)$
# reaches one equilibrium, and the remaining equilibria are matched *in pairs* with each other (which is
# also why the count is odd). An equilibrium paired only with another equilibrium, for every label, is
# invisible from $(0, 0)$: to find it one has to start a path *at* an already found equilibrium and drop a
# label there (Shapley 1974; the index theory says the pairs have opposite index). The cell finds a game
# where the union over all $m + n$ labels from $(0, 0)$ still misses an equilibrium that support
# enumeration finds.

# %%
def pivots_per_label(A, B):
    """Run Lemke-Howson from every label, counting the pivot steps of each path."""
    counts, ends, real = [], [], eq._pivot

    def counted(*args, **kw):
        counts[-1] += 1
        return real(*args, **kw)

    eq._pivot = counted
    try:
        for k in range(sum(np.shape(A))):
            counts.append(0)
            ends.append(eq.lemke_howson(A, B, k))
    finally:
        eq._pivot = real
    return counts, ends


different, hidden = None, None
for n in (3, 4, 5):
    for seed in range(10):
        A, B = g.random_game(n, n, seed=seed)
        se = eq.support_enumeration(A, B)
        counts, ends = pivots_per_label(A, B)
        assert min(counts) >= 2
        for x, y in ends:  # every path ends at a true equilibrium
            assert g.nash_conv(g.bimatrix(A, B), [x, y]) < 1e-9
            assert any(np.allclose(np.r_[x, y], np.r_[a, b]) for a, b in se)
        if different is None:
            k = next((k for k, (x, y) in enumerate(ends) if not np.allclose(np.concatenate([x, y]),
                                                                         np.concatenate(ends[0]))), None)
            if k is not None:
                different = (n, seed, k, counts)
        if hidden is None and len(eq.sort_equilibria(ends)) < len(se):
            hidden = (n, seed, len(se), len(eq.sort_equilibria(ends)))
    print(f"n = {n}: pivots per label on the last game {counts}")
assert different is not None and hidden is not None
print(f"{different[0]}x{different[0]} seed {different[1]}: label {different[2]} ends at another equilibrium than label 0")
print(f"{hidden[0]}x{hidden[0]} seed {hidden[1]}: {hidden[2]} equilibria, only {hidden[3]} reachable from (0, 0)")

# %% [markdown]
# ## Exercise 5 (analysis): coarse correlated equilibria
#
# **Answer.** Let $z_T = \frac1T \sum_t \bigotimes_i s_i^t$ be the joint empirical distribution of play
# (the average of the product distributions the players drew from). The CCE inequalities ask, for every
# player $i$ and fixed deviation $a'$, $\mathbb{E}_{z}[u_i(a', a_{-i})] \le \mathbb{E}_{z}[u_i(a)] + \varepsilon$.
# By linearity the left minus the right side is exactly $\frac1T \sum_t (u_i(a', s^t_{-i}) - u_i(s^t)) =
# R^T_i(a')/T$, player $i$'s regret for $a'$. So the CCE gap of $z_T$ *is* the largest average regret, and
# regret matching guarantees $\max_{a'} R_i^T(a') \le \Delta_i \sqrt{n_i T}$ (Hart and Mas-Colell; $\Delta_i$
# the range of $u_i$), so the gap is at most $\Delta\sqrt{n/T}$, a $1/\sqrt{T}$ rate. The code checks the
# identity (gap computed from the joint tensor equals max regret / T), the bound at every checkpoint, and
# that the gap shrinks.
#
# The *product* of the average strategies $\bar s_1 \otimes \dots \otimes \bar s_N$ is a different object:
# the correlation that the joint distribution keeps (the players moved together over time) is lost, and
# the product need not be an equilibrium of any kind. On battle of the sexes below the product's NashConv
# stays near 0.03 while the CCE gap of $z_T$ falls to $5 \cdot 10^{-4}$ (on the random 3-player game the
# product is closer to Nash, but still at twice the CCE gap).

# %%
def rm_joint(U, T, marks):
    """Regret matching that also keeps the joint empirical distribution (average of product strategies)."""
    M, n = U.shape[0], U.shape[1:]
    regret, total, joint = [np.zeros(k) for k in n], [np.zeros(k) for k in n], np.zeros(n)
    out = {}
    for t in range(1, T + 1):
        s = [g.regret_matching_strategy(r) for r in regret]
        prod = s[0]
        for x in s[1:]:
            prod = np.multiply.outer(prod, x)
        joint += prod
        for i in range(M):
            g.regret_matching_update(U, s, i, regret[i], total[i])
        if t in marks:
            out[t] = (joint / t, [r.copy() for r in regret], [x / t for x in total])
    return out


def cce_gap(U, z):
    """max over players i and deviations a' of E_z[u_i(a', a_-i)] - E_z[u_i(a)]."""
    gaps = []
    for i in range(U.shape[0]):
        here = float((U[i] * z).sum())
        marg = z.sum(axis=i)  # distribution of the others' actions
        dev = np.moveaxis(U[i], i, 0).reshape(U.shape[1 + i], -1) @ marg.ravel()
        gaps.append(dev.max() - here)
    return max(gaps)


marks = [100, 400, 1600, 6400]
products = {}
for name, U in (("battle of the sexes", g.bimatrix(*g.battle_of_the_sexes())),
                ("random 3-player", g.random_nplayer_game([3, 3, 3], seed=7))):
    runs = rm_joint(U, max(marks), set(marks))
    gaps = []
    for t in marks:
        z, regret, avg = runs[t]
        gap = cce_gap(U, z)
        assert abs(gap - max(r.max() / t for r in regret)) < 1e-9  # the identity
        bound = max((U[i].max() - U[i].min()) * np.sqrt(U.shape[1 + i] / t) for i in range(U.shape[0]))
        assert gap <= bound + 1e-12
        gaps.append(max(gap, 0.0))
    prod_nc = g.nash_conv(U, runs[max(marks)][2])
    products[name] = (prod_nc, gaps[-1])
    print(f"{name}: CCE gap {['%.1e' % x for x in gaps]} at T = {marks}; NashConv of the product of averages "
          f"{prod_nc:.3f}")
    assert gaps[-1] < gaps[0]
nc, gap = products["battle of the sexes"]
assert nc > 10 * gap  # the product of averages is far from Nash while the joint is a near-CCE
print(f"whole file: {time.perf_counter() - T0:.1f} s")

# %% [markdown]
# ## Exercise 6 (lab): Lab 28, CFR+ with the information sets sharded by card
#
# The lab is `labs/lab28-cfr-plus`. Its reference solution is the solution blocks of
# `labs/lab28-cfr-plus/lab28-cfr-plus.py`; its hidden tests and mutants are in `grading/lab28-cfr-plus/`
# (`tests.py`, `rubric.yaml`, `mutants/`). It grades every rank's regrets and strategy sums against a
# one-machine CFR+ from the same checkpoint (K = 1, 2, 3, 5 and K > n_c, uneven and empty shards, float32 and
# float64, 2 real processes, seeded random checkpoints), the regret floor, the exploitability of the
# average policy by the grader's own best response (under a bound after 60 iterations and under vanilla
# CFR's at equal T), and every recorded message.
#
# **Key ideas of the answer.** Hold the acting player's own card fixed and the game becomes a small public
# tree over the histories. The counterfactual value of a terminal z for player i holding card c is
# w(c, z) = sum over c' != c of pi_j(c', z) u_i(c, c', z) / (n_c(n_c-1)): it needs the opponent's reach for
# every other card, which other ranks own, and nothing else from them. So per player update each rank
# sends its (b, 5) block of opponent reach probabilities at the five terminals to every other rank; it
# then backs w up its own cards' part of the tree (sigma-weighted at i's decisions, summed at the
# opponent's, whose probabilities are already inside w), adds the regrets and floors the sums at zero,
# and adds t times its own reach times sigma to the strategy sums. Regrets, strategy sums and policies never
# travel: 2 (K - 1) messages and 2 (K - 1)(5 b itemsize + 24) bytes per rank per iteration. The floor
# applies to the cumulative regret after the whole update (flooring the increments never lets a regret
# fall), and CFR+'s speed comes from the floor, the alternation and the linear average together: with a
# uniform average or simultaneous updates the grader's exploitability bound fails. The chapter's vanilla
# CFR pasted into the same protocol returns negative regrets and an exploitability about six times
# higher at 60 iterations, and loses every graded test.
