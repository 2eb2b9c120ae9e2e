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
# # Chapter 29. Multi-agent systems
#
# The agents of Chapter 27 shared one goal: a contract net or a blackboard only has to divide work well.
# Here every agent has its own interest and its own private information (what a deal is worth to it,
# what it would pay for an item) and nobody can order the others about. Three questions follow. How do
# two self-interested agents agree on a split (negotiation)? How does a group allocate scarce items when
# each bidder may lie about what they are worth (auctions and mechanism design)? And how do agents agree
# on anything at all when some of them crash in the middle of the protocol (consensus)? Every agent
# below is a rank of the communicator, so each protocol's messages and simulated time are counted, and
# crashes and lost messages come from `cluster.Faults`. Ray actors run an auction house for real, and
# mesa runs an agent-based market whose prices we compare with the competitive equilibrium.
#
# **Prerequisites:** Chapter 27 (Distributed AI: agents as ranks, contract net, announce-bid-award),
# Chapter 28 (Game theory: best responses, Nash equilibria, dominant strategies), and Chapter 2
# (Distributed-systems concepts: crash faults, synchronous rounds, the majority-replicated log).

# %% tags=["parameters"]
N_BIDDERS = 5  # smoke: 3
TRIALS = 200_000  # smoke: 40_000
HORIZON = 30  # smoke: 16
CONSENSUS_K = 5  # smoke: 4
FAULTS = 2  # smoke: 1
LOSS_SEEDS = 100  # smoke: 20
TRADERS = 20  # smoke: 12
MARKET_SEEDS = 40  # smoke: 15
BIDDER_COUNTS = [2, 4, 8, 16, 32]  # smoke: [2, 4, 8]
MAX_ITEMS = 7  # smoke: 5
SEED = 0

# %% [markdown]
# `N_BIDDERS` is the number of bidders $n$ in the auctions, `TRIALS` the Monte Carlo draws for the
# first-price analysis, `HORIZON` the number of rounds $T$ of the bargaining game, `CONSENSUS_K` the
# number of agents $K$ that must agree and `FAULTS` the crashes $f$ they must survive, `LOSS_SEEDS` the
# random runs per message-loss rate, `TRADERS` the buyers (and as many sellers) of the market and
# `MARKET_SEEDS` its repetitions, `BIDDER_COUNTS` the sizes of the cost sweep and `MAX_ITEMS` the
# largest number of items $m$ of the combinatorial auction.
#
# ## 1. Motivation: which ceiling binds
#
# No machine is too small here. The ceiling is **authority and information**: the data that decides the
# outcome (a buyer's value, a seller's cost, a firm's deadline) is private to each agent, the agents
# belong to different owners, and each one acts in its own interest. A central planner that wanted to
# allocate $m$ items optimally would need every bidder's value for every bundle, $2^m - 1$ numbers
# each, and would have to trust them. Protocols replace the planner: the rules are designed so that
# telling the truth is in each agent's interest (a mechanism), and so that the agents still agree when
# some of them fail.

# %%
import itertools
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import auctions
from scaleoutai.agents import mas

for m in (1, 5, 10, 20, 30):
    print(f"m = {m:>2} items: {2 ** m - 1:>13,} bundle values per bidder for a central planner")

# %% [markdown]
# ## 2. Core concepts
#
# **Alternating offers** (Rubinstein 1982). Two players split a pie of size 1. In round $t$ player
# $t \bmod 2$ proposes $(x_1, 1 - x_1)$ and the other accepts or rejects. A deal in round $t$ is worth
# $\delta_i^t x_i$ to player $i$ (the discount factor $\delta_i < 1$ is its impatience); after the
# horizon $T$ the pie is gone. A **subgame-perfect equilibrium** (SPE) is a strategy pair that is a Nash
# equilibrium (Chapter 28) in every subgame, so it contains no empty threats. With $T$ rounds,
# **backward induction** solves the game from the end: the last proposer takes everything, and in
# round $t$ the proposer offers the responder $j$ exactly what waiting is worth to it,
# $\delta_j v_{t+1}$, keeping $v_t = 1 - \delta_j v_{t+1}$. With $T = \infty$ the unique SPE is an
# immediate deal in which the first proposer gets
#
# $$x^* = \frac{1 - \delta_2}{1 - \delta_1 \delta_2},$$
#
# and the finite game converges to it: $|v_0 - x^*| \le (\delta_1 \delta_2)^{\lfloor (T-1)/2 \rfloor}$.
# Patience is power: the more patient player takes more, and with equal patience the first mover's
# edge vanishes as $\delta \to 1$.

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for d1, d2 in [(0.9, 0.9), (0.95, 0.7), (0.7, 0.95)]:
    Ts = np.arange(1, HORIZON + 1)
    v0 = [mas.bargaining_shares((d1, d2), T)[0] for T in Ts]
    x_star = mas.rubinstein_split(d1, d2)
    assert all(abs(v - x_star) <= (d1 * d2) ** ((T - 1) // 2) + 1e-12 for v, T in zip(v0, Ts))
    line, = ax.plot(Ts, v0, "o-", ms=3, label=f"delta = ({d1}, {d2})")
    ax.axhline(x_star, color=line.get_color(), ls="--", lw=0.8)
ax.set(xlabel="horizon T (rounds)", ylabel="first proposer's share v_0",
       title="backward induction (dots) converges to x* (dashed)")
ax.legend()
plt.show()
print(f"x*(0.9, 0.9) = {mas.rubinstein_split(0.9, 0.9):.4f}; after {HORIZON} rounds v_0 = "
      f"{mas.bargaining_shares((0.9, 0.9), HORIZON)[0]:.4f}")

# %% [markdown]
# **Auctions.** One item, $n$ bidders, bidder $i$ values it at $v_i$ and its utility is
# $v_i - \text{price}$ if it wins and 0 otherwise. In a **sealed-bid** auction everyone bids once;
# the highest bid wins. **First-price** charges the winner its bid, **second-price** (Vickrey 1961)
# the second-highest bid. In second-price, bidding $v_i$ is a **dominant strategy**: your bid only
# decides *whether* you win, never what you pay, so bidding anything else can only lose you an item
# worth more than its price or win you one worth less. In first-price, truth earns exactly nothing, and
# bidders shade: with values i.i.d. uniform on $[0, 1]$ the symmetric **Bayes-Nash equilibrium** is
# $b(v) = \frac{n-1}{n} v$. The **English** auction raises a price until one bidder is left; it ends at
# about the second-highest value, like second-price, but with many more messages.
#
# **VCG** generalises second-price to $m$ items sold as bundles. Bidder $i$ reports $b_i(S)$ for every
# bundle $S$; the mechanism chooses the allocation $a^*$ that maximises the reported welfare
# $\sum_i b_i(a_i)$ and charges the **Clarke payment**
# $p_i = \max_a \sum_{j \ne i} b_j(a) - \sum_{j \ne i} b_j(a^*)$, the welfare the others lose because
# $i$ is present. Its utility $v_i(a^*_i) + \sum_{j \ne i} b_j(a^*) - \max_a \sum_{j \ne i} b_j(a)$
# is the true welfare of $a^*$ minus a term $i$ cannot affect, so reporting the truth maximises it.
#
# **Consensus.** Each agent starts with a value and must decide one. **Agreement**: no two surviving
# agents decide differently. **Validity**: the decision is some agent's input (if all start with $v$,
# they decide $v$). **Termination**: every survivor decides. In synchronous rounds with at most $f$
# crash failures, **FloodSet** (Lynch 1996) floods the set $W$ of values seen for $f + 1$ rounds and
# decides $\min W$. With $f + 1$ crashes in those rounds, or a single unreliable link, it can fail;
# and no algorithm can do it in fewer than $f + 1$ rounds in the worst case.
#
# ## 3. The distribution and communication pattern
#
# Every agent is a rank. **Negotiation** is a ping-pong between two ranks: an offer $[t, x_1]$ and an
# answer, 2 messages per round, so an early deal is also a cheap one. **Sealed bids** form a star: the
# $n$ bidders on ranks $1..n$ send one number each to the auctioneer on rank 0, which receives them in
# rank order (it always knows whom it waits for: there is no receive-from-any) and answers each with
# $[\text{winner}, \text{price}]$, $2n$ messages. All bids arrive at one link at once, so on the
# single-port network they queue: the auction takes $n(2\alpha + 24\beta)$ for 8-byte bids and 16-byte
# answers. **FloodSet** is all-to-all: each of $f+1$ rounds every agent sends $W$ to the $K-1$ others,
# $(f+1) K (K-1)$ messages in all. The timelines show a sealed-bid auction and a FloodSet run.

# %%
net = cluster.Network(alpha=1e-4, beta=1e-9)
rng = np.random.default_rng(SEED)
values = np.round(rng.random(N_BIDDERS), 3)
sealed, sealed_run = auctions.run_sealed_bid(values, "second", network=net, trace=True)
assert abs(sealed_run.sim_time - N_BIDDERS * (2 * net.alpha + 24 * net.beta)) < 1e-12
flood, flood_run = mas.run_floodset([3, 1, 2, 1], 1, network=net, trace=True)
assert sum(s.messages_sent for s in flood_run.stats) == 2 * 4 * 3
fig, axes = plt.subplots(1, 2, figsize=(13, 3.5))
cluster.plot_timeline(sealed_run, ax=axes[0], title=f"sealed-bid: rank 0 the auctioneer, {N_BIDDERS} bidders")
cluster.plot_timeline(flood_run, ax=axes[1], title="FloodSet, K = 4, f = 1: two all-to-all rounds")
plt.tight_layout()
plt.show()
print(f"values {values.tolist()}: bidder {sealed['winner']} wins and pays {sealed['price']} "
      f"(the second-highest bid); FloodSet decisions {flood}")

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# **Negotiation.** `negotiate` is one rank's side of alternating offers; `Negotiator` holds the
# strategy. The SPE negotiator proposes $v_t$ and accepts any share at least $\delta_i v_{t+1}$, its
# own discounted continuation. The **time-dependent** negotiator (Faratin, Sierra and Jennings 1998)
# ignores the other side: it demands
# $s(t) = r + (1 - r)\bigl(1 - (t / (T-1))^{1/e}\bigr)$, falling from 1 to its reserve $r$ by the
# deadline, and accepts any offer at least what it would demand next round. A small exponent
# $e < 1$ (Boulware) holds out until late; $e > 1$ (Conceder) gives way early.

# %%
from scaleoutai.notebooks import show

show(mas.negotiate, mas.Negotiator, mas.bargaining_shares)

# %% [markdown]
# The check: the two-rank protocol equals the one-machine loop for every horizon, SPE agents settle
# in round 0 with 2 messages on the backward-induction split, and no fixed demand does better against
# an SPE opponent than the SPE itself (it is an equilibrium on this grid of deviations).

# %%
SPE = mas.Negotiator()
for deltas in [(0.9, 0.9), (0.95, 0.6), (0.5, 0.99)]:
    for T in (1, 2, 3, 8, HORIZON):
        got, _ = mas.run_negotiation(SPE, SPE, deltas, T)
        assert got == mas.reference_negotiation(SPE, SPE, deltas, T) and got["round"] == 0 and got["messages"] == 2
    base = mas.reference_negotiation(SPE, SPE, deltas, HORIZON)["utility"]
    for demand in np.linspace(0, 1, 101):
        dev = mas.Negotiator("fixed", demand=float(demand))
        assert mas.reference_negotiation(dev, SPE, deltas, HORIZON)["utility"][0] <= base[0] + 1e-12
        assert mas.reference_negotiation(SPE, dev, deltas, HORIZON)["utility"][1] <= base[1] + 1e-12
got, _ = mas.run_negotiation(SPE, SPE, (0.95, 0.6), HORIZON)
print(f"SPE with delta = (0.95, 0.6), T = {HORIZON}: x_1 = {got['x1']:.4f} in round 0 "
      f"(x* = {mas.rubinstein_split(0.95, 0.6):.4f}); 101 fixed demands never beat it")

# %% [markdown]
# Two time-dependent negotiators meet where the demand of one crosses what the other leaves; the plot
# shows player 1's demand and the share of player 1 that player 2's offer implies, for a Boulware
# player 1 against a Conceder. The deal and its round come from the two-rank protocol.

# %%
boulware, conceder = mas.Negotiator("concession", reserve=0.2, e=0.3), mas.Negotiator("concession", reserve=0.2, e=3.0)
deltas = (0.98, 0.98)
fig, ax = plt.subplots(figsize=(8, 4))
ts = np.arange(HORIZON)
ax.plot(ts, [boulware.target(t, deltas, HORIZON) for t in ts], label="player 1 demands (Boulware, e = 0.3)")
ax.plot(ts, [1 - conceder.target(t, deltas, HORIZON) for t in ts], label="player 2 leaves player 1 (Conceder, e = 3)")
outcomes = {}
for name, (a, b) in {"Boulware vs Conceder": (boulware, conceder), "Conceder vs Conceder": (conceder, conceder),
                     "Boulware vs Boulware": (boulware, boulware)}.items():
    got, _ = mas.run_negotiation(a, b, deltas, HORIZON)
    assert got == mas.reference_negotiation(a, b, deltas, HORIZON)
    outcomes[name] = got
deal = outcomes["Boulware vs Conceder"]
ax.plot([deal["round"]], [deal["x1"]], "k*", ms=14, label="the deal")
ax.set(xlabel="round t", ylabel="share of player 1", title="time-dependent concession")
ax.legend()
plt.show()
for name, o in outcomes.items():
    print(f"{name:>22}: deal in round {o['round']:>2}, x_1 = {o['x1']:.3f}, {o['messages']:>2} messages, "
          f"utilities ({o['utility'][0]:.3f}, {o['utility'][1]:.3f})")
assert outcomes["Boulware vs Conceder"]["x1"] > outcomes["Conceder vs Conceder"]["x1"]
assert outcomes["Boulware vs Boulware"]["round"] > outcomes["Conceder vs Conceder"]["round"]

# %% [markdown]
# Holding out pays against a conceder, but two Boulware agents settle late and lose much of the pie to
# discounting, and every extra round is two more messages.
#
# **Sealed-bid auctions.** `sealed_bid_auction` is the whole protocol per rank; `reference_auction`
# is the winner-and-price rule, shared by the auctioneer and the one-machine check.

# %%
show(auctions.sealed_bid_auction, auctions.reference_auction)

# %% [markdown]
# On every world size, including a single bidder, ties, and more bidders than distinct values, the
# ranks' outcome equals the reference with $2n$ messages. Then the exhaustive truthfulness check: for
# every true value of a bidder, every profile of the others' bids on a grid, and every misreport, the
# misreport never gains in second-price. In first-price it often does, and always by bidding less.

# %%
for n in (1, 2, 3, 5, 9):
    for rule in auctions.RULES:
        vals = np.round(np.random.default_rng(n).random(n), 1)
        got, res = auctions.run_sealed_bid(vals, rule)
        assert (got["winner"], got["price"]) == auctions.reference_auction(vals, rule)
        assert sum(s.messages_sent for s in res.stats) == 2 * n
grid = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
for n in (2, 3, 4):
    assert auctions.truthfulness_violations("second", grid, n) == []
lies = auctions.truthfulness_violations("first", grid, 3)
assert lies and all(r < bids[i] for bids, i, r, _ in lies)
clear = [x for x in lies if x[2] > max(b for j, b in enumerate(x[0]) if j != x[1])]  # still wins, no tie
bids, i, r, gain = max(clear, key=lambda x: x[3])
print(f"second-price: no profitable misreport in {len(grid) ** 3 * 3 * len(grid)} checks for n = 3; first-price: "
      f"{len(lies)} profitable ones, e.g. bidder {i} of value {bids[i]} against bids "
      f"{[b for j, b in enumerate(bids) if j != i]} gains {gain} by bidding {r}")

# %% [markdown]
# **First-price shading.** Against rivals who bid $\frac{n-1}{n} v$, a bidder who bids $s v$ wins with
# probability $\min(1, s v \frac{n}{n-1})^{n-1}$. Its expected utility, in closed form and by Monte Carlo,
# peaks at $s = \frac{n-1}{n}$ and is zero for truthful bidding ($s = 1$).

# %%
show(auctions.first_price_expected_utility)

# %%
shades = np.linspace(0.2, 1.0, 81)
fig, ax = plt.subplots(figsize=(8, 4))
for n in (2, 3, 5, 10):
    mc = auctions.simulate_first_price(shades, n, TRIALS, seed=SEED + n)
    exact = np.array([auctions.first_price_expected_utility(s, n) for s in shades])
    assert np.abs(mc - exact).max() < 4 / np.sqrt(TRIALS)
    assert abs(shades[np.argmax(mc)] - (n - 1) / n) <= 0.05 and mc[-1] == 0.0
    line, = ax.plot(shades, mc, label=f"n = {n} (Monte Carlo)")
    ax.plot(shades, exact, "--", color=line.get_color(), lw=0.8)
    ax.axvline((n - 1) / n, color=line.get_color(), ls=":", lw=0.8)
ax.set(xlabel="bid as a fraction s of the value", ylabel="expected utility",
       title="first-price: the best shade is (n - 1) / n (dotted); truth earns 0")
ax.legend()
plt.show()
v = np.random.default_rng(SEED).random((TRIALS, N_BIDDERS))
top = np.sort(v, axis=1)
rev_first, rev_second = auctions.bne_first_price(1.0, N_BIDDERS) * top[:, -1].mean(), top[:, -2].mean()
print(f"n = {N_BIDDERS}: revenue first-price (equilibrium) {rev_first:.4f}, second-price (truthful) "
      f"{rev_second:.4f}, theory (n - 1) / (n + 1) = {(N_BIDDERS - 1) / (N_BIDDERS + 1):.4f}")
assert abs(rev_first - rev_second) < 0.01  # revenue equivalence

# %% [markdown]
# The two formats earn the same in expectation (revenue equivalence), though first-price asks every
# bidder to know the value distribution and the number of rivals, and second-price asks nothing.
#
# **VCG.** `vcg_batch` enumerates all $(n+1)^m$ assignments of items to bidders (or to nobody),
# vectorised over any number of auctions at once, takes the welfare-maximising one and computes the
# Clarke payments. Bundles are bit masks: with two items, 1 is $\{A\}$, 2 is $\{B\}$, 3 is $\{A, B\}$.

# %%
show(auctions.vcg_batch, auctions.vcg_auction)

# %% [markdown]
# A worked example with complements: bidder 0 wants the pair, bidders 1 and 2 one item each. Then the
# exhaustive truthfulness check on two items and three bidders: every bidder values each non-empty
# bundle at 0, 1 or 2, so there are $27^3$ profiles, and for each we try all 27 misreports of each
# bidder. On the ranks the auction equals the one-machine VCG for every world size.

# %%
V = np.array([[0, 1, 1, 5], [0, 3, 0, 3], [0, 0, 3, 3.0]])  # bundles {}, {A}, {B}, {A, B}
out = auctions.vcg(V)
print(f"bundles {out['bundles']}, payments {out['payments'].tolist()}, welfare {out['welfare']}")
assert out["bundles"] == [0, 1, 2] and out["welfare"] == 6 and out["payments"].tolist() == [0.0, 2.0, 2.0]
grid3 = np.array(list(itertools.product([0.0, 1.0, 2.0], repeat=3)))
reports = np.concatenate([np.zeros((27, 1)), grid3], axis=1)
profiles = reports[np.array(list(itertools.product(range(27), repeat=3)))]
t0 = time.perf_counter()
viol = auctions.vcg_violations(profiles, reports)
assert len(viol) == 0
print(f"VCG: no profitable misreport in {len(profiles) * 3 * len(reports):,} checks "
      f"({time.perf_counter() - t0:.1f} s)")
for n in (1, 2, 3, 5):
    W = np.round(np.random.default_rng(n).random((n, 8)) * 5, 1)
    W[:, 0] = 0
    got, res = auctions.run_vcg(W)
    want = auctions.vcg(W)
    assert got["bundles"] == want["bundles"] and np.array_equal(got["payments"], want["payments"])

# %% [markdown]
# Each winner pays 2: without bidder 1, the pair would go to bidder 0 for 5 against bidder 2's 3. The
# sum of the payments is 4, less than the 5 bidder 0 offered for the pair: VCG can earn less than a
# losing bid, one of the reasons it is rare in practice (Ausubel and Milgrom 2006).
#
# **FloodSet.** `floodset` is one agent. It sends its set $W$ to every other agent in rank order, then
# receives from each; a peer that crashed, or whose message was lost, is silent this round (the
# synchronous model's timeout). `reference_floodset` replays the same rounds on one machine with the
# simulator's fault semantics: `Faults(crash={i: n})` stops agent $i$ before its $n$-th send, so a crash
# in round $r$ reaches a prefix of the peers.

# %%
show(mas.floodset, mas.reference_floodset)

# %% [markdown]
# The check enumerates every crash pattern of up to $f$ crashes (every choice of crashed agents, every
# round and every prefix of the peers it reaches) and every input vector in $\{0, 1\}^K$; all three
# properties hold in every run. On the ranks, the decisions equal the reference for every pattern.

# %%
t0 = time.perf_counter()
patterns = list(mas.crash_patterns(CONSENSUS_K, FAULTS, FAULTS + 1))
runs = 0
for inputs in itertools.product([0, 1], repeat=CONSENSUS_K):
    for crash in patterns:
        decisions = mas.reference_floodset(inputs, FAULTS, crash)
        assert all(mas.consensus_properties(inputs, decisions).values()), (inputs, crash)
        runs += 1
inputs = tuple(range(CONSENSUS_K))  # all distinct: the hardest input for agreement
for crash in patterns:
    got, _ = mas.run_floodset(inputs, FAULTS, faults=cluster.Faults(crash=crash))
    assert got == mas.reference_floodset(inputs, FAULTS, crash)
print(f"K = {CONSENSUS_K}, f = {FAULTS}: {len(patterns)} crash patterns x {2 ** CONSENSUS_K} inputs = {runs} runs, "
      f"all agree, valid, terminate; the ranks match the reference on all {len(patterns)} patterns "
      f"({time.perf_counter() - t0:.1f} s)")

# %% [markdown]
# ## 5. The same task with a production library: Ray actors and mesa
#
# **An auction house of Ray actors.** Each bidder is a Ray actor that holds its private value in its
# own process, and the driver is the auctioneer (rank 0's role). For sealed bids it asks every bidder at
# once and ranks the answers; for the English auction it polls the bidders still in, round by round,
# at a rising price. Winner, price and number of rounds must equal ours.

# %%
import logging
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # a setup without ipywidgets: tqdm.auto warns once
logging.getLogger("ray").setLevel(logging.ERROR)
import ray  # noqa: E402

INCREMENT = 0.01


def ray_sealed(bidders, rule):
    bids = ray.get([b.bid.remote(rule) for b in bidders], timeout=120)
    order = sorted(range(len(bids)), key=lambda i: (-bids[i], i))  # highest bid, then lowest index
    return order[0], bids[order[0]] if rule == "first" else bids[order[1]]


def ray_english(bidders, increment):
    active, k = list(range(len(bidders))), 0
    while True:
        stay = ray.get([bidders[i].stays.remote(k * increment) for i in active], timeout=120)
        staying = [i for i, s in zip(active, stay) if s]
        if len(staying) >= 2:
            active, k = staying, k + 1
        elif staying:
            return staying[0], k * increment, k + 1
        else:
            return active[0], (k - 1) * increment, k + 1  # all left at once: the previous price


t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
try:
    startup = time.perf_counter() - t0

    @ray.remote(num_cpus=0)
    class Bidder:
        def __init__(self, value, n):
            self.value, self.n = float(value), n

        def bid(self, rule):
            return self.value if rule == "second" else (self.n - 1) / self.n * self.value

        def stays(self, price):
            return self.value >= price

    bidders = [Bidder.remote(v, N_BIDDERS) for v in values]
    ray.get([b.__ray_ready__.remote() for b in bidders], timeout=120)
    t0 = time.perf_counter()
    ray_out = {rule: ray_sealed(bidders, rule) for rule in auctions.RULES}
    ray_out["english"] = ray_english(bidders, INCREMENT)
    ray_seconds = time.perf_counter() - t0
finally:
    ray.shutdown()
for rule, strategy in (("first", auctions.bne_first_price), ("second", auctions.truthful)):
    ours, _ = auctions.run_sealed_bid(values, rule, strategy)
    assert ray_out[rule] == (ours["winner"], ours["price"]), (rule, ray_out[rule], ours)
eng, eng_run = auctions.run_english(values, INCREMENT)
assert ray_out["english"] == (eng["winner"], eng["price"], eng["rounds"]), (ray_out["english"], eng)
print(f"Ray actors == ours: first-price {ray_out['first']}, second-price {ray_out['second']}, "
      f"English {ray_out['english'][:2]} after {eng['rounds']} rounds "
      f"(Ray start-up {startup:.1f} s, the three auctions {ray_seconds:.2f} s; "
      f"on the simulator the English auction took {eng_run.wall_time * 1e3:.0f} ms)")

# %% [markdown]
# Note the English price: the clock stops within one increment of the second-highest value, and a
# first-price winner pays $\frac{n-1}{n}$ of its own value. The same bidder wins all three.
#
# **The winner-determination problem as an integer program.** VCG's allocation is the combinatorial
# auction's winner-determination problem: choose $x_{i,S} \in \{0, 1\}$ (bidder $i$ gets exactly bundle
# $S$) to maximise $\sum b_i(S) x_{i,S}$ with at most one bundle per bidder and each item sold at most
# once. SciPy's MILP solver (HiGHS) solves it; its welfare must equal our enumeration's, and the Clarke
# payments computed from its optima must equal ours.

# %%
from scipy.optimize import Bounds, LinearConstraint, milp


def milp_welfare(V):
    n, size = V.shape
    m = size.bit_length() - 1
    cols = [(i, S) for i in range(n) for S in range(1, size)]
    A = np.zeros((n + m, len(cols)))
    for c, (i, S) in enumerate(cols):
        A[i, c] = 1
        A[n:, c] = [(S >> k) & 1 for k in range(m)]
    res = milp(-np.array([V[i, S] for i, S in cols]), constraints=LinearConstraint(A, 0, 1),
               integrality=np.ones(len(cols)), bounds=Bounds(0, 1))
    assert res.success, res.message
    return -res.fun


rng = np.random.default_rng(SEED)
for n, m in [(3, 2), (4, 3), (5, 3), (N_BIDDERS, 4)]:
    for _ in range(3):
        W = np.round(rng.random((n, 1 << m)) * 10, 1)
        W[:, 0] = 0
        out = auctions.vcg(W)
        assert abs(out["welfare"] - milp_welfare(W)) < 1e-9
        for i in range(n):
            clarke = milp_welfare(np.delete(W, i, axis=0)) - (out["welfare"] - W[i, out["bundles"][i]])
            assert abs(out["payments"][i] - clarke) < 1e-9
print("VCG welfare and Clarke payments equal those from SciPy's MILP (HiGHS) on every instance")

# %% [markdown]
# **A market of zero-intelligence traders in mesa.** Gode and Sunder (1993) asked how much of a market's
# efficiency comes from the traders' intelligence. Their traders bid at random: a **ZI-C** buyer with
# value $v$ bids uniformly in $[0, v]$ and a seller with cost $c$ asks uniformly in $[c, \bar p]$ (they
# never trade at a loss); a ZI-U trader ignores its value. The market is a **continuous double auction**:
# a bid at or above the standing ask trades at the ask, an ask at or below the standing bid trades at the
# bid, and a trade clears the book. Every trader holds one unit. The model below is written in mesa 3:
# traders are `mesa.Agent`s, the book lives in the `mesa.Model`, and each step activates all agents in a
# random order (`model.agents.shuffle_do`). Our `zi_market` implements the same rules in NumPy; the two
# use different random streams, so we compare them over `MARKET_SEEDS` runs, and both against the
# competitive equilibrium computed from supply and demand.

# %%
import mesa


class Trader(mesa.Agent):
    def __init__(self, model, limit, buyer):
        super().__init__(model)
        self.limit, self.buyer, self.holding = limit, buyer, True

    def step(self):
        if self.holding:
            lo, hi = (0.0, self.limit) if self.buyer else (self.limit, self.model.top)
            self.model.post(self, self.model.rng.uniform(lo, hi))


class DoubleAuction(mesa.Model):
    def __init__(self, values, costs, top, seed):
        super().__init__(seed=seed)
        self.top, self.bid, self.ask, self.trades = top, None, None, []
        Trader.create_agents(self, len(values), list(values), True)
        Trader.create_agents(self, len(costs), list(costs), False)

    def post(self, agent, price):
        book, other = ("bid", "ask") if agent.buyer else ("ask", "bid")
        standing = getattr(self, other)
        if standing is not None and (price >= standing[0] if agent.buyer else price <= standing[0]):
            buyer, seller = (agent, standing[1]) if agent.buyer else (standing[1], agent)
            buyer.holding = seller.holding = False
            self.trades.append((standing[0], buyer.limit - seller.limit))
            self.bid = self.ask = None
        elif getattr(self, book) is None or (price > self.bid[0] if agent.buyer else price < self.ask[0]):
            setattr(self, book, (price, agent))

    def step(self):
        self.agents.shuffle_do("step")


TOP, STEPS = 200.0, 30
buyers = np.linspace(60, TOP, TRADERS)
sellers = np.linspace(40, TOP - 20, TRADERS)
ce = mas.competitive_equilibrium(buyers, sellers)
mesa_eff, mesa_prices = [], []
for s in range(MARKET_SEEDS):
    model = DoubleAuction(buyers, sellers, TOP, seed=SEED + s)
    for _ in range(STEPS):
        model.step()
    assert len(model.agents) == 2 * TRADERS and model.steps == STEPS
    mesa_eff.append(sum(g for _, g in model.trades) / ce["surplus"])
    mesa_prices.append([p for p, _ in model.trades])
ours = [mas.zi_market(buyers, sellers, STEPS, seed=SEED + s, price_max=TOP) for s in range(MARKET_SEEDS)]
ours_u = [mas.zi_market(buyers, sellers, STEPS, seed=SEED + s, price_max=TOP, constrained=False)
          for s in range(MARKET_SEEDS)]
eff = {"mesa ZI-C": np.mean(mesa_eff), "ours ZI-C": np.mean([o["efficiency"] for o in ours]),
       "ours ZI-U": np.mean([o["efficiency"] for o in ours_u])}
late = lambda runs: np.mean([np.mean(p[len(p) // 2:]) for p in runs if len(p) > 1])  # noqa: E731
print(f"competitive equilibrium: q = {ce['quantity']}, price in [{ce['low']:.1f}, {ce['high']:.1f}]")
print("allocative efficiency: " + ", ".join(f"{k} {v:.3f}" for k, v in eff.items()))
late_mesa, late_ours = late(mesa_prices), late([o["prices"] for o in ours])
print(f"mean price of the later trades: mesa {late_mesa:.1f}, ours {late_ours:.1f}")
assert eff["mesa ZI-C"] > 0.9 and abs(eff["mesa ZI-C"] - eff["ours ZI-C"]) < 0.04
assert eff["ours ZI-U"] < eff["ours ZI-C"] - 0.1
assert abs(late_mesa - ce["price"]) < 0.1 * ce["price"] and abs(late_ours - ce["price"]) < 0.1 * ce["price"]

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
demand, supply = np.sort(buyers)[::-1], np.sort(sellers)
axes[0].step(np.arange(TRADERS + 1), np.r_[demand, demand[-1]], where="post", label="demand (values)")
axes[0].step(np.arange(TRADERS + 1), np.r_[supply, supply[-1]], where="post", label="supply (costs)")
axes[0].axhspan(ce["low"], ce["high"], color="grey", alpha=0.3, label="equilibrium prices")
axes[0].set(xlabel="units", ylabel="price", title="supply and demand")
axes[0].legend()
for s in range(3):
    axes[1].plot(mesa_prices[s], "o-", ms=3, color="C0", alpha=0.6, label="mesa ZI-C" if s == 0 else None)
    axes[1].plot(ours[s]["prices"], "s--", ms=3, color="C1", alpha=0.6, label="ours ZI-C" if s == 0 else None)
axes[1].axhspan(ce["low"], ce["high"], color="grey", alpha=0.3)
axes[1].set(xlabel="trade number", ylabel="price", title="transaction prices, three runs each")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The constraint "never trade at a loss" plus the market rules give most of the surplus without any
# intelligence. Single prices scatter widely, since a high-value buyer may meet a low-cost seller at
# any price between them, but they scatter around the equilibrium, and the later trades, among the
# traders closer to the margin, average close to it. Remove the constraint (ZI-U) and efficiency
# drops: loss-making trades happen, and extra-marginal traders displace intra-marginal ones.
#
# ## 6. Failure modes and fault tolerance
#
# **$f + 1$ crashes in $f + 1$ rounds.** FloodSet's argument is that some round among the $f + 1$ has
# no crash, and after a clean round everyone alive holds the same $W$. Spend one crash per round and
# a value can travel along a chain of agents that each crash right after passing it on to a single
# peer. The search below finds such patterns among those with $f + 1$ crashes; with one more round the
# same patterns are harmless.

# %%
f = FAULTS
inputs = (0,) + (1,) * (CONSENSUS_K - 1)
breaking = [c for c in mas.crash_patterns(CONSENSUS_K, f + 1, f + 1) if len(c) == f + 1
            and not mas.consensus_properties(inputs, mas.reference_floodset(inputs, f, c))["agreement"]]
assert breaking
crash = breaking[0]
got, res = mas.run_floodset(inputs, f, faults=cluster.Faults(crash=crash))
assert got == mas.reference_floodset(inputs, f, crash) and len(set(got) - {None}) == 2
repaired, _ = mas.run_floodset(inputs, f + 1, faults=cluster.Faults(crash=crash))
assert len(set(repaired) - {None}) == 1
print(f"inputs {inputs}, crashes {crash} (agent: sends before it stops): decisions {got}")
print(f"{len(breaking)} of the patterns with {f + 1} crashes break agreement in {f + 1} rounds; "
      f"with {f + 2} rounds the first one gives {repaired}")

# %% [markdown]
# **Lost messages.** FloodSet assumes reliable links: a message that is due and missing means its sender
# crashed. With a lossy link the same silence comes from a live agent, and the round structure no
# longer bounds what can be missed. `Faults(loss=p)` loses each message with probability $p$; the
# receiver's `recv` raises `MessageLostError` when the message was due, and `Faults(drop=...)` loses
# chosen messages. First three lost messages and no crash: agent 0's two messages to agent 2 and agent
# 1's relay to it in round 2, so agent 2 never hears of the value 0. Then random loss. With three
# agents and two rounds only 12 messages exist, so the reference can try all $2^{12}$ sets of lost
# messages and give the exact probability of disagreement for every $p$; the simulator's own random
# loss on the ranks must match it. Extra rounds make disagreement rarer, but no finite number of
# rounds makes agreement certain over a lossy link (the coordinated-attack problem).

# %%
drop = {0: {1, 3}, 1: {3}}  # the sender's message numbers: agent 0 sends to 1, 2, 1, 2; agent 1 to 0, 2, 0, 2
got, _ = mas.run_floodset((0, 1, 2), 1, faults=cluster.Faults(drop=drop))
assert got == mas.reference_floodset((0, 1, 2), 1, drop=drop) == [0, 0, 1]
print(f"three lost messages, no crash: decisions {got}")
inputs, sends = (0, 1, 2), 4  # three agents, f = 1, two rounds: each agent sends 4 messages, 12 in all
lost_count, disagrees = [], []
for mask in range(1 << 12):  # every set of lost messages, on the one-machine reference
    lost = {i: {k for k in range(sends) if mask >> (i * sends + k) & 1} for i in range(3)}
    lost_count.append(bin(mask).count("1"))
    disagrees.append(len(set(mas.reference_floodset(inputs, 1, drop=lost))) > 1)
lost_count, disagrees = np.array(lost_count), np.array(disagrees)
exact = lambda p: float(np.sum(disagrees * p ** lost_count * (1 - p) ** (12 - lost_count)))  # noqa: E731


def sampled(p, rounds, trials=3000, seed=SEED):
    rng = np.random.default_rng([seed, rounds, int(p * 1000)])
    out = 0
    for _ in range(trials):
        lost = rng.random((3, rounds * 2)) < p
        out += len(set(mas.reference_floodset(inputs, 1, rounds=rounds, drop={i: set(np.flatnonzero(lost[i]))
                                                                             for i in range(3)}))) > 1
    return out / trials


ps = np.linspace(0, 0.6, 13)
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(ps, [exact(p) for p in ps], "k-", label="2 rounds, exact (all 4096 loss patterns)")
for rounds in (3, 4):
    ax.plot(ps[::2], [sampled(p, rounds) for p in ps[::2]], "o--", label=f"{rounds} rounds, sampled")
on_ranks = {}
for p in (0.3, 0.5):  # the simulator's own random loss, on the ranks
    runs = [mas.run_floodset(inputs, 1, faults=cluster.Faults(loss=p, seed=s))[0] for s in range(LOSS_SEEDS)]
    on_ranks[p] = np.mean([len(set(d)) > 1 for d in runs])
    sd = np.sqrt(exact(p) * (1 - exact(p)) / LOSS_SEEDS)
    assert abs(on_ranks[p] - exact(p)) <= 4 * sd + 1 / LOSS_SEEDS, (p, on_ranks[p], exact(p))
ax.plot(list(on_ranks), list(on_ranks.values()), "r*", ms=12, label=f"2 rounds on the ranks ({LOSS_SEEDS} runs)")
ax.set(xlabel="message loss probability p", ylabel="probability that the agents disagree",
       title="FloodSet, K = 3, f = 1, no crashes")
ax.legend()
plt.show()
print(f"p = 0.1: exact {exact(0.1):.4f}; p = 0.3: exact {exact(0.3):.4f}, on the ranks {on_ranks[0.3]:.2f}; "
      f"4 rounds at p = 0.3: {sampled(0.3, 4):.4f}")
assert exact(0.0) == 0 and exact(0.1) > 0 and sampled(0.3, 4) < exact(0.3)

# %% [markdown]
# **Crashed bidders and negotiators.** An auctioneer that waits for a crashed bidder would wait forever;
# on the simulator the perfect failure detector raises `PeerCrashedError`, and the auctioneer treats the
# bidder as absent. A bargainer whose partner crashes ends without a deal.

# %%
got, _ = auctions.run_sealed_bid(values, "second", faults=cluster.Faults(crash={int(np.argmax(values)) + 1: 0}))
rest = [None if i == np.argmax(values) else v for i, v in enumerate(values)]
assert (got["winner"], got["price"]) == auctions.reference_auction(rest, "second")
slow = mas.Negotiator("concession", 0.1, 0.3)
talk, res = mas.run_negotiation(slow, slow, (0.95, 0.95), HORIZON, faults=cluster.Faults(crash={1: 3}))
assert talk["round"] is None and isinstance(res.values[1], cluster.RankCrashed)
print(f"the top bidder crashed: bidder {got['winner']} wins at {got['price']}; negotiation with a crashed "
      f"partner: no deal after {talk['messages']} messages")

# %% [markdown]
# **Synchronous flooding and Chapter 2's majority log.** FloodSet survives any $f < K$ crashes, but only
# because the synchronous model lets a missing message prove a crash. Chapter 2's replicated log
# needs a majority, $K \ge 2f + 1$, and in exchange stays safe when messages are merely late. With
# $K$ agents and more and more crashed followers the log stops committing at $\lceil K/2 \rceil$
# crashes while FloodSet, given $f$ equal to the crashes, still agrees.

# %%
from scaleoutai.foundations import consensus as ch2

rows = []
for crashed in range(CONSENSUS_K):
    down = {r: 0 for r in range(1, crashed + 1)}  # followers that crash at their first send
    log = cluster.run(ch2.replicate_log, CONSENSUS_K, args=([7, 8, 9],), faults=cluster.Faults(crash=down),
                      timeout=60)
    commits = log.values[0]["commit_index"] + 1
    agreed, _ = mas.run_floodset(tuple(range(CONSENSUS_K)), crashed, faults=cluster.Faults(crash=down))
    rows.append((crashed, commits, set(agreed) - {None}))
    print(f"{crashed} crashed: majority log commits {commits} of 3 entries; "
          f"FloodSet with f = {crashed} decides {set(agreed) - {None}}")
assert all((c == 3) == (k < CONSENSUS_K / 2) and len(s) == 1 for k, c, s in rows)

# %% [markdown]
# ## 7. Evaluation: messages, time and compute
#
# The cost of a protocol among agents is its messages and its latency, and for mechanisms also the
# computation of the outcome. **Sealed bid against English.** Sealed bids take $2n$ messages and
# $n(2\alpha + 24\beta)$ of time on one port; the English clock polls every active bidder at every
# price step, so its messages grow with $n$ times the number of steps, set by the increment.

# %%
sweep = {}
for n in BIDDER_COUNTS:
    vals = np.random.default_rng(SEED + n).random(n)
    _, s_run = auctions.run_sealed_bid(vals, "second", network=net)
    e_out, e_run = auctions.run_english(vals, INCREMENT, network=net)
    assert abs(s_run.sim_time - n * (2 * net.alpha + 24 * net.beta)) < 1e-12
    sweep[n] = (sum(s.messages_sent for s in s_run.stats), s_run.sim_time,
                sum(s.messages_sent for s in e_run.stats), e_run.sim_time, e_out["rounds"])
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
ns = list(sweep)
axes[0].loglog(ns, [sweep[n][0] for n in ns], "o-", label="sealed bid")
axes[0].loglog(ns, [sweep[n][2] for n in ns], "s-", label=f"English, increment {INCREMENT}")
axes[0].set(xlabel="bidders n", ylabel="messages", title="messages per auction")
axes[1].loglog(ns, [sweep[n][1] * 1e3 for n in ns], "o-", label="sealed bid")
axes[1].loglog(ns, [sweep[n][3] * 1e3 for n in ns], "s-", label="English")
axes[1].set(xlabel="bidders n", ylabel="simulated ms", title=f"time, alpha = {net.alpha:g} s, beta = {net.beta:g} s/B")
for ax in axes:
    ax.legend()
plt.tight_layout()
plt.show()
print(f"{'n':>3} {'sealed msgs':>11} {'sealed ms':>9} {'English msgs':>12} {'English ms':>10} {'rounds':>6}")
for n, (sm, st, em, et, r) in sweep.items():
    print(f"{n:>3} {sm:>11} {st * 1e3:>9.3f} {em:>12} {et * 1e3:>10.3f} {r:>6}")
assert all(sweep[n][2] > sweep[n][0] for n in ns)

# %% [markdown]
# **FloodSet.** Messages are $(f+1) K (K-1)$ exactly; the sets grow as values spread, so bytes grow
# faster than messages. **VCG's computation.** Our enumeration visits $(n+1)^m$ allocations: the time
# grows exponentially in the number of items, which is why winner determination (NP-hard in general)
# is solved by integer programming or restricted bidding languages in practice.

# %%
flood_cost = {}
for K in (2, 3, 4, 6, 8, 12):
    for fk in (0, 1, 2):
        _, r = mas.run_floodset(tuple(range(K)), fk, network=net)
        msgs = sum(s.messages_sent for s in r.stats)
        assert msgs == (fk + 1) * K * (K - 1)
        flood_cost[K, fk] = (msgs, sum(s.bytes_sent for s in r.stats), r.sim_time)
vcg_time, milp_time = {}, {}
n = 4
for m in range(1, MAX_ITEMS + 1):
    W = np.random.default_rng(m).random((n, 1 << m))
    W[:, 0] = 0
    t0 = time.perf_counter()
    welfare = auctions.vcg(W)["welfare"]
    vcg_time[m] = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert abs(milp_welfare(W) - welfare) < 1e-9
    [milp_welfare(np.delete(W, i, axis=0)) for i in range(n)]  # the n solves that Clarke payments need
    milp_time[m] = time.perf_counter() - t0
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for fk in (0, 1, 2):
    Ks = sorted({K for K, g in flood_cost if g == fk})
    axes[0].plot(Ks, [flood_cost[K, fk][2] * 1e3 for K in Ks], "o-", label=f"f = {fk} ({fk + 1} rounds)")
axes[0].set(xlabel="agents K", ylabel="simulated ms", title="FloodSet latency")
axes[0].legend()
ms = list(vcg_time)
axes[1].semilogy(ms, [vcg_time[m] for m in ms], "o-", label="VCG by enumeration (with payments)")
axes[1].semilogy(ms, [milp_time[m] for m in ms], "s-", label="VCG by MILP (n + 1 solves)")
axes[1].set(xlabel="items m", ylabel="seconds", title=f"computing the outcome, n = {n} bidders")
axes[1].legend()
plt.tight_layout()
plt.show()
print(f"FloodSet K = 12, f = 2: {flood_cost[12, 2][0]} messages, {flood_cost[12, 2][1]} bytes; "
      f"VCG m = {MAX_ITEMS}: {(n + 1) ** MAX_ITEMS:,} allocations in {vcg_time[MAX_ITEMS]:.3f} s by enumeration, "
      f"{milp_time[MAX_ITEMS]:.3f} s by MILP")
growth = [vcg_time[m + 1] / vcg_time[m] for m in range(3, MAX_ITEMS)]
print("enumeration time ratio per extra item (from m = 3):", [round(g, 1) for g in growth])

# %% [markdown]
# The English auction reveals more (every price at which each bidder drops out), which is why it is
# used where values are correlated; the sealed-bid auction is the cheap one. FloodSet's latency grows
# with $f + 1$ rounds and with the incast of $K - 1$ messages per round at every agent. Enumeration
# grows by a factor $n + 1$ per item; the MILP solver pays a fixed overhead per solve and grows far
# more slowly on these instances, so it wins once $(n+1)^m$ is large, and it is what real combinatorial
# auctions use (with search and bidding languages on top).
#
# ## 8. Exercises
#
# 1. **Outside options.** Give player 2 an outside option worth $w$ it can take instead of answering.
#    Extend `Negotiator` and find, by backward induction, for which $w$ the SPE split changes (the
#    outside-option principle says: only when $w$ exceeds what the SPE gives player 2).
# 2. **Reserve prices.** With $n = 2$ bidders and values uniform on $[0, 1]$, sweep the reserve of the
#    second-price auction from 0 to 1 by Monte Carlo and find the revenue-maximising reserve (Myerson's
#    theory predicts 1/2 for any $n$). Is the auction still truthful with a reserve?
# 3. **Shill bids in VCG.** Find a profile on the two-item grid where one bidder gains by bidding under
#    two names (two ranks it controls). VCG is truthful but not false-name-proof.
# 4. **Early stopping.** Change FloodSet so an agent that sees no new crash in a round decides early
#    (Dolev, Reischuk and Strong 1990). Count rounds over all crash patterns against $f + 1$.
# 5. **Acknowledged floods.** Make FloodSet tolerate message loss by resending until acknowledged, and
#    measure the extra messages at $p = 0.1$. Which property do you now have to give up, and when?
# 6. **Smarter traders.** Replace ZI-C by ZIP traders (Cliff and Bruten 1997) in the mesa model: each
#    trader moves its price towards the last trade. How much faster do prices converge?
#
# ## 9. Research directions
#
# - **Negotiating with unknown, learning opponents.** Real negotiators do not know each other's
#   discount factors or reserves; strategies that model the opponent from its offers, and agents
#   that negotiate in natural language, trade off exploitation against the risk of no deal, and there
#   is no equilibrium theory for most of these settings.
#   - Baarslag, Hendrikx, Hindriks and Jonker, "Learning about the opponent in automated bilateral
#     negotiation: a comprehensive survey of opponent modeling techniques", Autonomous Agents and
#     Multi-Agent Systems, 2016. What can be learned from offers, and what it is worth.
#   - Lewis, Yarats, Dauphin, Parikh and Batra, "Deal or No Deal? End-to-End Learning for Negotiation
#     Dialogues", EMNLP, 2017. Agents that negotiate in language, trained by self-play.
#   - Bianchi, Chia, Yuksekgonul, Tagliabue, Jurafsky and Zou, "How Well Can LLMs Negotiate?
#     NegotiationArena Platform and Analysis", ICML, 2024. Ultimatum, trading and price negotiations
#     between LLM agents, showing payoff gains from simple behavioural tactics and human-like anchoring.
# - **Designing mechanisms by learning.** Revenue-optimal auctions are known for one item (Myerson) but
#   not for several; neural networks trained to maximise revenue subject to (approximate)
#   incentive compatibility find new mechanisms, and certifying their truthfulness is open.
#   - Dutting, Feng, Narasimhan, Parkes and Ravindranath, "Optimal Auctions through Deep Learning",
#     ICML, 2019. RegretNet: auctions as networks, with regret as the truthfulness penalty.
#   - Dütting, Mirrokni, Paes Leme, Xu and Zuo, "Mechanism Design for Large Language Models", WWW, 2024.
#     A token-by-token auction in which bidders' preferences are language models, with incentive
#     properties reduced to a monotonicity condition and a second-price-style payment.
# - **Combinatorial auctions at scale.** Winner determination is NP-hard, and VCG with an approximate
#   allocation is no longer truthful; mechanisms that are both computationally feasible and
#   incentive compatible, and bidding languages that keep the elicitation small, are open.
#   - Sandholm, "Algorithm for optimal winner determination in combinatorial auctions", Artificial
#     Intelligence, 2002. Search-based winner determination for thousands of bids.
#   - Nisan and Ronen, "Computationally Feasible VCG Mechanisms", Journal of Artificial Intelligence
#     Research, 2007. Why approximation breaks VCG, and second-chance mechanisms.
#   - Soumalias, Weissteiner, Heiss and Seuken, "Machine Learning-Powered Combinatorial Clock Auction",
#     AAAI, 2024. Learns bidder preferences from demand queries only, reaching higher efficiency in fewer
#     rounds than the combinatorial clock auction used for spectrum.
# - **Agreement when the network is neither synchronous nor reliable.** FloodSet needs both; the
#   Fischer-Lynch-Paterson result rules out deterministic consensus with one crash under asynchrony.
#   Partial synchrony, randomisation and the cost of agreement among many agents (blockchains, swarms
#   of robots) remain active.
#   - Fischer, Lynch and Paterson, "Impossibility of Distributed Consensus with One Faulty Process",
#     Journal of the ACM, 1985. The FLP impossibility.
#   - Dwork, Lynch and Stockmeyer, "Consensus in the Presence of Partial Synchrony", Journal of the
#     ACM, 1988. Safety always, termination once the network behaves.
# - **How much intelligence do markets need?** Zero-intelligence traders reach high efficiency in some
#   markets and not in others; which market rules make outcomes robust to naive or adversarial
#   algorithmic traders is still studied.
#   - Gode and Sunder, "Allocative Efficiency of Markets with Zero-Intelligence Traders: Market as a
#     Partial Substitute for Individual Rationality", Journal of Political Economy, 1993.
#   - Cliff and Bruten, "Zero is Not Enough: On the Lower Limit of Agent Intelligence for Continuous
#     Double Auction Markets", HP Laboratories technical report, 1997. Where ZI traders fail.
#   - Fish, Gonczarowski and Shorrer, "Algorithmic Collusion by Large Language Models", arXiv preprint,
#     2024. LLM pricing agents in a repeated oligopoly reach supracompetitive prices without being told to,
#     and small wording changes in their instructions move how far.
#
# ## What's next
#
# Chapter 30 (Multi-agent RL) lets the agents learn their strategies instead of having them written:
# independent learners, a centralised critic with decentralised actors, and self-play, where the
# equilibria of Chapter 28 and the incentives of this chapter reappear as what learning converges to
# (or fails to).
