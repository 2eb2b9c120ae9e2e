# %% [markdown]
# # Chapter 29 solutions: Multi-agent systems
#
# Worked solutions to the exercises of `chapters/29-multi-agent-systems` (the instructor's manual, never
# in the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import itertools
import time
from dataclasses import dataclass

import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import auctions
from scaleoutai.agents import mas

T0 = time.perf_counter()

# %% [markdown]
# ## Exercise 1 (coding): an outside option for player 2
#
# **Answer.** When player 2 *responds* (even rounds $t$) it may now accept, reject, or leave with $w$. It
# accepts an offer as soon as it is worth at least $\max(\delta_2 v_{t+1}, w)$, so backward induction
# becomes
# $$v_t = 1 - \max(\delta_2 v_{t+1}, w) \quad (t \text{ even}), \qquad v_t = 1 - \delta_1 v_{t+1} \quad (t \text{ odd}),
# \qquad v_T = 0,$$
# and player 1 still proposes $v_0$ in round 0, which player 2 accepts. In the infinite game the SPE gives
# player 2 $1 - x^* = \delta_2 (1 - \delta_1) / (1 - \delta_1 \delta_2)$; then the option is an empty threat
# while $w \le 1 - x^*$ (rejecting already pays more than leaving) and binds when $w > 1 - x^*$: player 2
# gets exactly $w$ and player 1 keeps $1 - w$ (the *outside-option principle*: the option caps what
# player 1 can keep, it does not add to the SPE share). With a finite horizon the last even rounds give
# player 2 less than $1 - x^*$, so a small $w$ already binds there, but its effect on round 0 is damped by
# $(\delta_1 \delta_2)^{\lfloor (T-1)/2 \rfloor}$, the same bound as the chapter's convergence. The code
# extends `Negotiator` (an SPE player that knows $w$, and a player 2 that may opt out), plays it on two
# ranks, and checks the threshold.

# %%
OPT_OUT = 2.0  # a third answer besides accept (1) and reject (0)


def shares_with_option(deltas, horizon, w):
    """Backward induction when player 2, as responder, may take w instead of answering."""
    d1, d2 = deltas
    v = np.zeros(horizon + 1)
    for t in range(horizon - 1, -1, -1):
        v[t] = 1 - (max(d2 * v[t + 1], w) if t % 2 == 0 else d1 * v[t + 1])
    return v


@dataclass(frozen=True)
class OptionNegotiator(mas.Negotiator):
    """An SPE negotiator that knows player 2's outside option w (player 2 takes it when it pays more)."""

    w: float = 0.0

    def target(self, t, deltas, horizon):
        return float(shares_with_option(deltas, horizon, self.w)[t])

    def accepts(self, player, t, share, deltas, horizon):
        nxt = shares_with_option(deltas, horizon, self.w)[t + 1]
        return share >= max(deltas[player] * nxt, self.w if player == 1 else 0.0) - 1e-12

    def opts_out(self, player, t, share, deltas, horizon):
        return player == 1 and not self.accepts(player, t, share, deltas, horizon) and \
            self.w > deltas[1] * shares_with_option(deltas, horizon, self.w)[t + 1]


def negotiate_with_option(comm, players, deltas, horizon):
    """Alternating offers on 2 ranks; player 2 may answer OPT_OUT, which ends the talks with w for it."""
    p, other, me = comm.rank, 1 - comm.rank, players[comm.rank]
    for t in range(horizon):
        if t % 2 == p:
            mine = me.target(t, deltas, horizon)
            x1 = mine if p == 0 else 1.0 - mine
            comm.send(np.array([t, x1]), other)
            answer = comm.recv(other)[0]
            if answer == 1.0:
                return {"round": t, "x1": x1}
            if answer == OPT_OUT:
                return {"round": t, "x1": None}
        else:
            _, x1 = comm.recv(other)
            share = float(x1) if p == 0 else 1.0 - float(x1)
            if me.accepts(p, t, share, deltas, horizon):
                comm.send(np.array([1.0]), other)
                return {"round": t, "x1": float(x1)}
            leave = hasattr(me, "opts_out") and me.opts_out(p, t, share, deltas, horizon)
            comm.send(np.array([OPT_OUT if leave else 0.0]), other)
            if leave:
                return {"round": t, "x1": None}
    return {"round": None, "x1": None}


deltas, T = (0.9, 0.8), 30
x_star = mas.rubinstein_split(*deltas)
np.testing.assert_allclose(shares_with_option(deltas, T, 0.0), mas.bargaining_shares(deltas, T), atol=0)
damping = (deltas[0] * deltas[1]) ** ((T - 1) // 2)
print(f"x* = {x_star:.4f}: player 2's SPE share 1 - x* = {1 - x_star:.4f}")
for w in np.linspace(0.0, 0.9, 19):
    spe = OptionNegotiator(w=float(w))
    got = cluster.run(negotiate_with_option, 2, args=((spe, spe), deltas, T)).values[0]
    assert got["round"] == 0 and abs(got["x1"] - shares_with_option(deltas, T, w)[0]) < 1e-12
    # the outside-option principle, up to the finite-horizon damping
    assert abs(got["x1"] - (1 - max(w, 1 - x_star))) <= damping + 1e-12
    if w > 1 - x_star + damping:
        assert abs(got["x1"] - (1 - w)) < 1e-12  # the option binds at once: player 2 gets exactly w
    for demand in np.linspace(0, 1, 11):  # no fixed demand of player 1 beats the SPE proposal
        dev = mas.Negotiator(kind="fixed", demand=float(demand))
        out = cluster.run(negotiate_with_option, 2, args=((dev, spe), deltas, 4)).values[0]
        u1 = 0.0 if out["x1"] is None else deltas[0] ** out["round"] * out["x1"]
        assert u1 <= shares_with_option(deltas, 4, w)[0] + 1e-12
print("the split changes only once w exceeds 1 - x* (up to the horizon's damping "
      f"{damping:.1e}); above it player 1 keeps exactly 1 - w")

# %% [markdown]
# ## Exercise 2 (analysis): the reserve price of a second-price auction
#
# **Answer.** With reserve $r$ the auction sells only if the top bid is at least $r$ and charges
# $\max(\text{second bid}, r)$. For $n = 2$ values uniform on $[0, 1]$, with $v_{(1)} \ge v_{(2)}$,
# $$R(r) = \mathbb{E}[v_{(2)} \mathbf{1}\{v_{(2)} \ge r\}] + r \Pr[v_{(2)} < r \le v_{(1)}]
#        = \Bigl(\tfrac13 - r^2 + \tfrac23 r^3\Bigr) + r \cdot 2r(1-r) = \tfrac13 + r^2 - \tfrac43 r^3,$$
# using the density $2(1-x)$ of $v_{(2)}$. $R'(r) = 2r - 4r^2 = 0$ gives $r^* = 1/2$ and
# $R(1/2) = 5/12 \approx 0.417$ against $1/3$ without a reserve. Myerson: the optimal reserve solves
# $\phi(r) = r - (1 - F(r))/f(r) = 2r - 1 = 0$, independent of $n$. The Monte Carlo sweep finds the
# maximum at $0.5$ and follows the closed form within its error.
#
# **Still truthful.** Yes: the reserve acts as one more (phantom) bid from the seller. The price is still
# set by others (the second bid or the reserve) and your bid only decides whether you win, so bidding
# your value remains dominant: you win exactly when your value beats $\max(\text{others}, r)$. The brute
# force over a grid confirms no misreport ever gains, for several reserves.

# %%
rng = np.random.default_rng(0)
TRIALS = 200_000
v = np.sort(rng.random((TRIALS, 2)), axis=1)
reserves = np.linspace(0, 1, 41)
revenue = np.array([np.where(v[:, 1] >= r, np.maximum(v[:, 0], r), 0.0).mean() for r in reserves])
closed = 1 / 3 + reserves ** 2 - 4 / 3 * reserves ** 3
assert np.abs(revenue - closed).max() < 4 * 0.5 / np.sqrt(TRIALS)  # payments lie in [0, 1]
assert abs(reserves[np.argmax(revenue)] - 0.5) <= 0.025
for bids in [(0.3, 0.7), (0.2, 0.4), (0.6, 0.55), (0.1, 0.05)]:  # the vectorised rule is the library's
    for r in (0.0, 0.25, 0.5):
        winner, price = auctions.reference_auction(list(bids), "second", reserve=r)
        b = sorted(bids)
        assert (price if winner >= 0 else 0.0) == (max(b[0], r) if b[1] >= r else 0.0)
grid = np.linspace(0, 1, 11)
for r in (0.0, 0.3, 0.5):
    for value, other, lie in itertools.product(grid, grid, grid):
        def utility(bid):
            winner, price = auctions.reference_auction([bid, other], "second", reserve=r)
            return value - price if winner == 0 else 0.0
        assert utility(lie) <= utility(value) + 1e-12
print(f"best reserve {reserves[np.argmax(revenue)]:.3f}, revenue {revenue.max():.4f} (5/12 = {5 / 12:.4f}); "
      f"no reserve {revenue[0]:.4f} (1/3); truthful with a reserve on {3 * 11 ** 3} checks")

# %% [markdown]
# ## Exercise 3 (coding): a false-name bid in VCG
#
# **Answer.** Two items A and B. An honest bidder wants only the pair, at $h = 3$; the manipulator values
# each item at 2 and the pair at 4 (additive). Truthfully, VCG gives it the pair (welfare 4 > 3) at the
# Clarke price 3 (what the honest bidder loses): utility $4 - 3 = 1$. Under two names, one bidding 2 for A
# alone and one 2 for B alone, VCG still gives it A and B, but each name is charged
# $\max(3, 2) - 2 = 1$: the other name already "covers" most of the honest bid, so the total payment is
# 2 and the utility 2. It gets worse: if each name bids 4, each is charged $\max(3, 4) - 4 = 0$, and the
# manipulator takes both items for free (utility 4, the best split on the grid). VCG is truthful for a *fixed* set of bidders, but with complementary values the
# Clarke payments are not monotone in the set of bidders (adding bidders can lower revenue), so it is not
# false-name-proof (Yokoo, Sakurai and Matsubara 2004). The search below enumerates honest values and
# additive manipulators on a grid, finds every profitable split, and confirms that no single-name
# misreport (over all 125 reports on the grid) beats truth for the same profile.

# %%
grid5 = np.arange(5.0)
found = []
for h, x, y in itertools.product(grid5, grid5, grid5):
    truth = np.array([[0, 0, 0, h], [0, x, y, x + y]])
    bundles, pay, _ = auctions.vcg_batch(truth)
    value_of = {0: 0.0, 1: x, 2: y, 3: x + y}
    u_truth = value_of[int(bundles[1])] - pay[1]
    splits = np.array([[[0, 0, 0, h], [0, p, 0, p], [0, 0, q, q]] for p in grid5 for q in grid5])
    b2, p2, _ = auctions.vcg_batch(splits)  # vectorised over every pair of false names
    u_split = np.array([value_of[int(a) | int(b)] for a, b in b2[:, 1:]]) - p2[:, 1:].sum(axis=1)
    if u_split.max() > u_truth + 1e-9:
        k = int(np.argmax(u_split))
        found.append((h, x, y, u_truth, u_split[k], splits[k]))
assert found
h, x, y, u_t, u_s, names = next(f for f in found if f[:3] == (3.0, 2.0, 2.0))
assert u_t == 1.0 and u_s == 4.0  # the best split on the grid: each name bids 4 and pays nothing
honest_split = np.array([[0, 0, 0, h], [0, 2, 0, 2], [0, 0, 2, 2]])  # the names report the true item values
b2, p2, _ = auctions.vcg_batch(honest_split)
assert b2.tolist() == [0, 1, 2] and p2.tolist() == [0.0, 1.0, 1.0]  # max(3, 2) - 2 = 1 per name
reports = np.array([[0, a, b, c] for a, b, c in itertools.product(grid5, grid5, grid5)])
batch = np.array([[[0, 0, 0, h], r] for r in reports])
b1, p1, _ = auctions.vcg_batch(batch)
u_single = np.array([{0: 0, 1: x, 2: y, 3: x + y}[int(b)] for b in b1[:, 1]]) - p1[:, 1]
assert u_single.max() <= u_t + 1e-9  # truthful under one name
print(f"{len(found)} profiles with a profitable split; e.g. honest pair value {h}, manipulator items {x}, {y}: "
      f"truth earns {u_t}, two names (A: {names[1][1]}, B: {names[2][2]}) earn {u_s}")

# %% [markdown]
# ## Exercise 4 (coding): early-stopping FloodSet
#
# **Answer.** Agent $i$ remembers the set of peers it heard from in the previous round (all $K - 1$ before
# round 1). If in round $r$ it hears from the same set (no new crash), it decides $\min W$ at the end of
# round $r$, sends its decision in round $r + 1$ and halts; an undecided agent that receives a decision
# adopts it, relays it once and halts; anyone still undecided after round $f + 1$ decides $\min W$ as
# before. With $c \le f$ actual crashes an agent sees a "new crash" in at most $c$ rounds, so it decides by
# round $c + 1$ and everybody by round $\min(f + 1, c + 2)$ (Dolev, Reischuk and Strong 1990): with no crash
# at all, everyone decides after 1 round and the decisions travel in round 2, instead of $f + 1$ rounds.
#
# *Why agreement survives.* If $i$ heard from the same peers in rounds $r-1$ and $r$, every value known to
# any live agent at the end of round $r - 1$ reached $i$ in round $r$ (a value hidden from $i$ would need a
# peer that crashed before sending to $i$ in round $r$: a new crash). So $\min W_i$ is the minimum any
# agent can still reach, and the agents deciding later either adopt it or compute the same minimum. The
# enumeration below checks agreement, validity and termination on every crash pattern with at most $f$
# crashes, for every input in $\{0,1\}^K$, and counts the rounds.

# %%
def early_floodset(values, f, crash=None):
    """FloodSet with early deciding, on one machine with the chapter's crash semantics (rank-order sends,
    crash {i: n} stops i before its n-th send). Returns decisions and the round each agent decided."""
    K, crash = len(values), crash or {}
    W = [{int(v)} for v in values]
    sent, alive = [0] * K, [True] * K
    last_heard = [set(range(K)) - {i} for i in range(K)]
    decided, when, halted, to_relay = [None] * K, [None] * K, [False] * K, [False] * K
    r = 0
    while not all(halted[i] or not alive[i] for i in range(K)):
        r += 1
        inbox = [[] for _ in range(K)]
        for i in range(K):
            if not alive[i] or halted[i]:
                continue
            msg = ("decide", decided[i]) if to_relay[i] else ("W", set(W[i]))
            for j in range(K):
                if j == i:
                    continue
                if i in crash and sent[i] >= crash[i]:  # it stops before this send
                    alive[i] = False
                    break
                inbox[j].append((i, msg))
                sent[i] += 1
            if alive[i] and to_relay[i]:
                halted[i] = True
        for j in range(K):
            if not alive[j] or halted[j] or decided[j] is not None:
                continue
            heard = {i for i, _ in inbox[j]}
            got = [m[1] for _, m in inbox[j] if m[0] == "decide"]
            for _, m in inbox[j]:
                if m[0] == "W":
                    W[j] |= m[1]
            if got:
                decided[j], when[j], to_relay[j] = got[0], r, True
            elif heard == last_heard[j] or r == f + 1:
                decided[j], when[j], to_relay[j] = min(W[j]), r, True
            last_heard[j] = heard
        if r > f + 3:
            raise RuntimeError("did not stop")
    return [decided[i] if alive[i] else None for i in range(K)], [when[i] if alive[i] else None for i in range(K)]


K, f = 4, 2
patterns = list(mas.crash_patterns(K, f, f + 2))
worst, total = {}, 0
for inputs in itertools.product([0, 1], repeat=K):
    for crash in patterns:
        decisions, rounds = early_floodset(inputs, f, crash)
        props = mas.consensus_properties(inputs, decisions)
        assert props["agreement"] and props["validity"] and props["termination"], (inputs, crash)
        c = len(crash)
        last = max(x for x in rounds if x is not None)
        assert last <= min(f + 1, c + 2)  # Dolev-Reischuk-Strong's bound
        worst[c] = max(worst.get(c, 0), last)
        total += 1
assert worst[0] == 1  # no crash: everybody decides after one round
# with no crash-pattern argument the plain algorithm always uses f + 1 rounds
print(f"K = {K}, f = {f}: {total} runs all correct; latest decision round by number of crashes c: {worst} "
      f"(plain FloodSet: always {f + 1})")

# %% [markdown]
# ## Exercise 5 (analysis): floods that resend until acknowledged
#
# **Answer.** Each logical message (an agent's $W$ to one peer in one round) is resent until its
# acknowledgement comes back; the receiver acknowledges every copy (it cannot know whether its earlier
# ack got through). One attempt costs the data message, plus an ack when the data arrived; it succeeds
# when both arrive, with probability $(1-p)^2$. So the number of attempts is geometric with mean
# $1/(1-p)^2$ and the expected messages per logical message are
# $$\frac{1 + (1 - p)}{(1-p)^2} = \frac{2 - p}{(1 - p)^2} \approx 2.35 \text{ at } p = 0.1,$$
# against 1 for plain FloodSet: $2.35\times$ the messages ($(f+1)K(K-1)$ logical messages in all). The
# Monte Carlo run of the whole protocol (K = 5, f = 2) matches the formula.
#
# **What is given up.** The synchronous round bound. A round now ends only when every message of the
# round was acknowledged, which takes an unbounded number of attempts, so the protocol still terminates
# with probability 1 but no longer within a known time. Worse, with crashes: a peer that never acks may be
# crashed *or* behind a lossy link, and waiting for it forever blocks termination. A timeout restores
# termination but then a live agent is treated as crashed, and agreement can fail exactly as in Section 6
# (the coordinated-attack problem: no finite number of retries makes agreement certain). So one keeps
# agreement and gives up bounded-time termination (as long as there is loss but no crash), or keeps
# termination and risks agreement once crashes and loss mix.

# %%
def acked_flood_cost(K, f, p, rng):
    """Messages of one FloodSet run in which every message is resent until acknowledged (no crash)."""
    logical = (f + 1) * K * (K - 1)
    messages = 0
    for _ in range(logical):
        while True:
            messages += 1  # the data
            if rng.random() < p:
                continue  # lost: the sender times out and resends
            messages += 1  # the ack
            if rng.random() >= p:
                break
    return messages, logical


rng = np.random.default_rng(5)
K, f, p = 5, 2, 0.1
costs = np.array([acked_flood_cost(K, f, p, rng)[0] for _ in range(400)])
logical = (f + 1) * K * (K - 1)
per_message = costs / logical
expected = (2 - p) / (1 - p) ** 2
sd = per_message.std() / np.sqrt(len(per_message))
assert abs(per_message.mean() - expected) < 4 * sd
decisions, _ = mas.run_floodset(tuple(range(K)), f)  # with every message delivered, plain FloodSet agrees
assert len(set(decisions)) == 1
print(f"p = {p}: {per_message.mean():.3f} messages per logical message (formula {expected:.3f}); "
      f"{costs.mean():.0f} instead of {logical} messages per run")

# %% [markdown]
# ## Exercise 6 (analysis): ZIP traders against ZI-C
#
# **Answer.** A ZIP trader (Cliff and Bruten 1997) quotes $p = \lambda (1 + \mu)$ for a seller (cost
# $\lambda$, margin $\mu \ge 0$) and $p = \lambda(1 - \mu)$ for a buyer, and after every trade at price $q$
# moves its quote towards a target just beyond $q$ by the Widrow-Hoff rule $p \leftarrow p + \beta(\tau -
# p)$, never crossing its limit. ZI-C has no memory: its quotes are as random on day 10 as on day 1, so
# its prices keep scattering around the equilibrium. ZIP's quotes contract on the equilibrium price over
# the trading days. We measure Smith's convergence coefficient $\alpha = 100\,\sqrt{\overline{(q -
# P_0)^2}} / P_0$ per day (the root-mean-square deviation of the day's trade prices from the
# competitive-equilibrium price $P_0$), on the chapter's market, over seeds. ZIP's $\alpha$ falls day by day
# to about a third of ZI-C's, which stays flat: in those terms ZIP converges within a few days while ZI-C
# never does. (This is a simplified ZIP: fixed $\beta = 0.3$, targets 2% beyond the last price, no momentum.)

# %%
def market_day(v, c, rng, quotes=None, beta=0.3, steps=30):
    """One trading day of a continuous double auction. quotes=None: ZI-C; else ZIP quotes (updated in place)."""
    nb, n = len(v), len(v) + len(c)
    active, bid, ask, prices = np.ones(n, dtype=bool), None, None, []
    limit = np.r_[v, c]
    for _ in range(steps):
        for k in rng.permutation(n):
            if not active[k]:
                continue
            if quotes is None:
                price = rng.uniform(0, v[k]) if k < nb else rng.uniform(c[k - nb], TOP)
            else:
                price = quotes[k]
            if k < nb and ask is not None and price >= ask[0] or k >= nb and bid is not None and price <= bid[0]:
                q, other = (ask if k < nb else bid)
                prices.append(q)
                active[[k, other]] = False
                bid = ask = None
                if quotes is not None:  # every ZIP trader moves towards just beyond the last price
                    target = np.where(np.arange(n) < nb, 1.02 * q, 0.98 * q)
                    quotes += beta * (target - quotes)
                    quotes[:nb] = np.minimum(quotes[:nb], limit[:nb])
                    quotes[nb:] = np.maximum(quotes[nb:], limit[nb:])
            elif k < nb and (bid is None or price > bid[0]):
                bid = (price, k)
            elif k >= nb and (ask is None or price < ask[0]):
                ask = (price, k)
    return np.array(prices)


TOP, TRADERS, DAYS, SEEDS = 200.0, 20, 10, 10
buyers, sellers = np.linspace(60, TOP, TRADERS), np.linspace(40, TOP - 20, TRADERS)
P0 = mas.competitive_equilibrium(buyers, sellers)["price"]
alpha = {"ZI-C": np.zeros(DAYS), "ZIP": np.zeros(DAYS)}
for s in range(SEEDS):
    rng = np.random.default_rng(s)
    quotes = np.r_[buyers * (1 - rng.uniform(0.05, 0.35, TRADERS)), sellers * (1 + rng.uniform(0.05, 0.35, TRADERS))]
    for d in range(DAYS):
        for name, q in (("ZI-C", None), ("ZIP", quotes)):
            prices = market_day(buyers, sellers, rng, q)
            alpha[name][d] += 100 * np.sqrt(np.mean((prices - P0) ** 2)) / P0 / SEEDS
print("Smith's alpha per day (%):")
for name, a in alpha.items():
    print(f"  {name:>4}: " + " ".join(f"{x:5.1f}" for x in a))
assert alpha["ZIP"][-1] < alpha["ZIP"][0] and alpha["ZIP"][-1] < 0.5 * alpha["ZI-C"][-1]
assert abs(alpha["ZI-C"][-1] - alpha["ZI-C"][0]) < 0.3 * alpha["ZI-C"][0]  # ZI-C does not learn
print(f"whole file: {time.perf_counter() - T0:.1f} s")
