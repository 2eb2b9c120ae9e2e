# %% [markdown]
# # Lab 28: CFR+ with the information sets sharded over K ranks
#
# Chapter 28 solved Kuhn poker with vanilla **CFR**: regret matching at every information set on the
# counterfactual regret, with the policies averaged uniformly (weighted by the player's own reach). Its
# exploitability falls slowly, and the chapter's own research notes say how poker was actually solved:
# **CFR+** (Tammelin 2014; Bowling, Burch, Johanson and Tammelin, *Heads-up Limit Hold'em Poker Is
# Solved*, Science 2015), run on a cluster whose nodes each held a slice of the regret tables. This lab
# builds both halves: the CFR+ update and the sharded protocol.
#
# **CFR+** changes three things in the chapter's iteration:
#
# 1. **Regret matching+.** After each player's update the cumulative regrets are **floored at zero**,
#    R(I, a) <- max(R(I, a) + r(I, a), 0), where r is this iteration's counterfactual regret summed over
#    every deal. (Flooring the increments, or the regrets before adding, is not the same thing.) The
#    policy is R(I, .) normalised, and uniform (1/2, 1/2) where both entries are 0.
# 2. **Alternating updates**, as in the chapter: player 0 updates against the current policy, its
#    information sets are re-matched, then player 1 updates against the new policy.
# 3. **A linearly weighted average.** In iteration t (t = 1, 2, ...) the strategy sum of player i grows by
#    t * pi_i(I) * sigma(I, a), where pi_i(I) is player i's own probability of reaching I. The average
#    policy is S(I, .) normalised (uniform where 0). Late, good policies weigh more than early ones.
#
# **The game: Kuhn poker with N cards** (the chapter's game is N = 3). Cards 0 < 1 < ... < N-1; each
# player antes 1 and is dealt a different card, each of the N(N-1) deals with probability 1/(N(N-1));
# player 0 acts first; the actions are p (pass or fold) and b (bet or call), and the public histories are
# the chapter's: decisions `""`, `"p"`, `"b"`, `"pb"` (player 0 acts at `""` and `"pb"`, player 1 at `"p"`
# and `"b"`), terminals `"pp"`, `"bp"` (player 1 folds: +1 for player 0), `"pbp"` (player 0 folds: -1),
# and the showdowns `"bb"`, `"pbb"` (+-2) and `"pp"` (+-1), won by the higher card. An information set is
# (card, decision history): 4N of them. A table of them has shape (cards, 4, 2): row c, history index h
# (in the order `HIST`), action a (0 = p, 1 = b).
#
# **The sharding.** Rank r owns the information sets of the cards lo, lo+1, ..., lo+b-1 (a contiguous
# block; the blocks follow the rank order and may be uneven or empty, and K may exceed N): their regrets
# R and strategy sums S, shape (b, 4, 2), and nobody else has them. The tables do not start at zero: a
# rank is handed its shard of a checkpoint (R >= 0, S >= 0) written after iteration t0, and runs
# iterations t0+1, ..., t0+T. The sums a rank needs for its own cards run over the opponent's cards,
# which other ranks own, so each update needs one exchange.
#
# **The protocol.** For the update of player i in iteration t, every rank
#
# 1. computes the policy sigma of its cards from R (regret matching+),
# 2. computes, for each of its cards c, the **opponent's reach** pi_j(c, z) at each terminal z in the
#    order `TERM` (j = 1 - i; the product of j's own action probabilities along z when j holds c),
# 3. sends that block, **one array of shape (b, 5) in the tables' dtype**, to every other rank and
#    receives theirs (K - 1 messages out, K - 1 in; an empty shard sends a (0, 5) array), and puts the
#    N rows together in card order,
# 4. computes the counterfactual value of each terminal for each own card c, held by player i:
#    w(c, z) = sum over c' != c of pi_j(c', z) u_i(c, c', z) / (N(N-1)),
# 5. backs w up its part of the tree (at i's decisions the value is sigma-weighted and the regret is
#    the child's value minus it; at j's decisions the children's values add, since j's probabilities are
#    already inside w), adds the regrets and floors them at zero, and adds t * pi_i * sigma to S.
#
# Only reach probabilities cross the network: 2 (K - 1) messages per rank per iteration, and rank r sends
# 2 (K - 1) (5 b itemsize + 24) bytes per iteration, counting a 2-d array's 24-byte header. Neither
# regrets, strategy sums, policies nor the whole game's tables travel.
#
# **What the grader checks** (its own trace and recorded messages, its own CFR+ and best response):
# every rank's returned R and S against a one-machine CFR+ from the same checkpoint, for K = 1, 2, 3, 5
# and K > N, uneven and empty shards, float32 and float64, 2 real processes, seeded random checkpoints;
# the regrets floored at zero; from a zero checkpoint, the exploitability of the average policy (the
# grader's own best response) under a bound after T iterations and below vanilla CFR's at equal T; and
# each message: the right sender and receiver, 2T messages per ordered pair, each the sender's (b, 5)
# opponent reach of that update in the tables' dtype, and the bytes per iteration above.
# `scaleoutai.agents` (the chapter's CFR, regret matching and best response) cannot be imported in the
# grader.

# %% tags=["parameters"]
N_CARDS = 4  # smoke: 3
K = 3  # smoke: 2
T = 30  # smoke: 20

# %%
import numpy as np

from scaleoutai import cluster

HIST = ("", "p", "b", "pb")  # decision histories: player len(h) % 2 acts
TERM = ("pp", "bp", "pbp", "bb", "pbb")  # terminal histories, the columns of a reach block


# %%
def rm_plus(regret):
    """The policy of regret matching+: each row R(I, .) normalised, (1/2, 1/2) where it is all zero.
    regret has shape (..., 2) and entries >= 0; the result has its shape and dtype."""
    ### BEGIN SOLUTION
    regret = np.asarray(regret)
    clipped = np.clip(regret, 0, None)
    mass = clipped[..., :1] + clipped[..., 1:]
    even = np.full_like(clipped, 0.5)
    safe = np.where(mass > 0, mass, 1).astype(regret.dtype)
    return np.where(mass > 0, clipped / safe, even).astype(regret.dtype, copy=False)
    ### END SOLUTION


# %%
def terminal_reach(sigma, player):
    """pi_player(c, z) for each card c of sigma (b, 4, 2) and each terminal z in TERM: the product of
    `player`'s own action probabilities along z. Returns (b, 5) in sigma's dtype."""
    ### BEGIN SOLUTION
    sigma = np.asarray(sigma)
    out = np.ones((sigma.shape[0], len(TERM)), dtype=sigma.dtype)
    for col, z in enumerate(TERM):
        for depth in range(len(z)):
            if depth % 2 == player:  # the mover of prefix z[:depth] is depth % 2
                out[:, col] *= sigma[:, HIST.index(z[:depth]), "pb".index(z[depth])]
    return out
    ### END SOLUTION


# %%
def terminal_values(opp_reach, cards, player):
    """w(c, z) for the own cards `cards` (ints) held by `player`: sum over the opponent's cards c' != c of
    opp_reach[c', z] * u_player(c, c', z) / (N(N-1)), with N = len(opp_reach). Returns (len(cards), 5)."""
    ### BEGIN SOLUTION
    opp_reach = np.asarray(opp_reach)
    n = opp_reach.shape[0]
    kind = opp_reach.dtype
    mine = np.asarray(cards, dtype=np.int64).reshape(-1)
    order = np.sign(mine[:, None] - np.arange(n)[None, :]).astype(kind)  # +1 where my card is higher
    other = (mine[:, None] != np.arange(n)[None, :]).astype(kind)  # 1 where the deal is possible
    win_fold = 1 if player == 0 else -1  # "bp": player 1 folded; "pbp": player 0 folded
    stake = {"pp": (order, 1), "bb": (order, 2), "pbb": (order, 2), "bp": (other, win_fold),
             "pbp": (other, -win_fold)}
    w = np.empty((mine.size, len(TERM)), dtype=kind)
    for col, z in enumerate(TERM):
        pattern, size = stake[z]
        w[:, col] = (pattern @ opp_reach[:, col]) * kind.type(size)
    return w / kind.type(n * (n - 1))
    ### END SOLUTION


# %%
def update_player(regret, strat, sigma, w, player, t):
    """Player `player`'s CFR+ update of its own cards' information sets, in place on regret and strat
    (b, 4, 2): back w (b, 5) up the tree, add the regrets and floor them at zero, add t * pi * sigma to strat."""
    ### BEGIN SOLUTION
    kind = regret.dtype
    value = {z: w[:, col] for col, z in enumerate(TERM)}
    for h in sorted(HIST, key=len, reverse=True):  # children before parents
        kids = [value[h + a] for a in "pb"]
        hi = HIST.index(h)
        if len(h) % 2 == player:
            node = sigma[:, hi, 0] * kids[0] + sigma[:, hi, 1] * kids[1]
            for a in (0, 1):
                regret[:, hi, a] = np.maximum(regret[:, hi, a] + (kids[a] - node), 0)
        else:  # the opponent's move: its probabilities are inside w already
            node = kids[0] + kids[1]
        value[h] = node
    own = {0: {"": 1, "pb": sigma[:, 0, 0]}, 1: {"p": 1, "b": 1}}[player]
    for h, pi in own.items():
        hi = HIST.index(h)
        strat[:, hi, :] += (kind.type(t) * np.asarray(pi, dtype=kind))[..., None] * sigma[:, hi, :]
    ### END SOLUTION


# %%
def exchange_reach(comm, block):
    """Send this rank's (b, 5) block to every other rank, receive theirs, return all N rows in card order
    (the blocks follow the rank order)."""
    ### BEGIN SOLUTION
    parts = [None] * comm.size
    parts[comm.rank] = np.ascontiguousarray(block)
    for step in range(1, comm.size):
        to, frm = (comm.rank + step) % comm.size, (comm.rank - step) % comm.size
        parts[frm] = comm.sendrecv(parts[comm.rank], to, frm)
    return np.concatenate([np.asarray(p).reshape(-1, len(TERM)) for p in parts]).astype(block.dtype, copy=False)
    ### END SOLUTION


# %%
def cfr_plus(comm, n_cards, lo, regret, strat, t0, iterations):
    """Run CFR+ iterations t0+1 .. t0+iterations on this rank's shard (cards lo .. lo+b-1) of the checkpoint
    (regret, strat), each (b, 4, 2). Returns the new (regret, strat) in the checkpoint's dtype."""
    ### BEGIN SOLUTION
    regret, strat = np.array(regret, copy=True), np.array(strat, copy=True)
    cards = np.arange(lo, lo + regret.shape[0])
    sigma = rm_plus(regret)
    for t in range(t0 + 1, t0 + iterations + 1):
        for player in (0, 1):
            opp = exchange_reach(comm, terminal_reach(sigma, 1 - player))
            assert opp.shape[0] == n_cards, f"the blocks hold {opp.shape[0]} cards, not {n_cards}"
            w = terminal_values(opp, cards, player)
            update_player(regret, strat, sigma, w, player, t)
            sigma = rm_plus(regret)
    return regret, strat
    ### END SOLUTION


# %%
def average_policy(strat):
    """S(I, .) normalised, (1/2, 1/2) where S(I, .) is zero."""
    return rm_plus(strat)


def run_cfr_plus(comm, n_cards, lo, regret, strat, t0, iterations):
    """What the grader calls on every rank: [regret, strat] stacked, shape (2, b, 4, 2), in the input dtype."""
    R, S = cfr_plus(comm, int(n_cards), int(np.asarray(lo).reshape(-1)[0]), regret, strat, int(t0), int(iterations))
    return np.stack([np.asarray(R), np.asarray(S)])


# %% [markdown]
# Try it on the simulator: N_CARDS cards split unevenly over K ranks (rank 0 owns one card), T
# iterations from a zero checkpoint. The check gathers the shards, compares them with the same run on one
# rank (a single machine), computes the exploitability of the average policy with a small best response,
# and prints the bytes each rank sent beside the protocol's 2 T (K - 1) 5 b itemsize (the simulator here
# counts payloads; the grader adds each message's 24-byte header).


# %% tags=["demo"]
def best_response_value(policy, i):
    """max over player i's pure strategies of its payoff against policy (N, 4, 2), by recursion per card."""
    n = policy.shape[0]

    def payoff(z, mine, theirs):
        if z in ("bp", "pbp"):
            return (1 if z == "bp" else -1) * (1 if i == 0 else -1)
        return np.sign(mine - theirs) * (1 if z == "pp" else 2)

    def value(card, h, reach):
        if h in TERM:
            return sum(reach[c] * payoff(h, card, c) for c in range(n) if c != card)
        if len(h) % 2 == i:
            return max(value(card, h + a, reach) for a in "pb")
        row = policy[:, HIST.index(h)]
        return value(card, h + "p", reach * row[:, 0]) + value(card, h + "b", reach * row[:, 1])

    return sum(value(c, "", np.full(n, 1.0 / (n * (n - 1)))) for c in range(n))


def blocks(n, k):
    cuts = [0] + [1 + (n - 1) * j // (k - 1) for j in range(k)] if k > 1 else [0, n]  # rank 0: one card
    return [(cuts[r], cuts[r + 1]) for r in range(k)]


def worker(comm, n, t_end, bounds):
    lo, hi = bounds[comm.rank]
    zero = np.zeros((hi - lo, 4, 2))
    return run_cfr_plus(comm, n, lo, zero, zero, 0, t_end)


try:
    bounds = blocks(N_CARDS, K)
    res = cluster.run(worker, K, args=(N_CARDS, T, bounds), timeout=120)
    R, S = (np.concatenate([v[j] for v in res.values]) for j in (0, 1))
    one = cluster.run(worker, 1, args=(N_CARDS, T, [(0, N_CARDS)]), timeout=120).values[0]
    assert np.allclose(R, one[0], atol=1e-12) and np.allclose(S, one[1], atol=1e-12), "K ranks differ from one"
    assert (R >= 0).all(), "CFR+ regrets are floored at zero"
    avg = average_policy(S)
    gap = (best_response_value(avg, 0) + best_response_value(avg, 1)) / 2
    print(f"N = {N_CARDS}, K = {K}, T = {T}: exploitability of the average policy {gap:.2e}")
    print("bytes sent per rank:", [s.bytes_sent for s in res.stats], "| the protocol's:",
          [2 * T * (K - 1) * 5 * (hi - lo) * 8 for lo, hi in bounds])
except cluster.RankError as err:
    print("cfr_plus failed:", err.summary)

# %% tags=["public-tests"]
import public_tests
from scaleoutai.grading.public import run_checks

run_checks(public_tests, globals())  # every check; run_checks(public_tests, globals(), "name") runs one
