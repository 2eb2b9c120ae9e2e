"""Chapter 29: alternating offers, sealed-bid / English / VCG auctions, FloodSet consensus, a ZI market.

Every protocol on the communicator is checked against its one-machine reference for several world sizes;
truthfulness is checked exhaustively on grids; Ray actors and mesa run for real and must agree with ours.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.agents import auctions as au
from scaleoutai.agents import mas

SPE = mas.Negotiator()
DELTAS = [(0.9, 0.9), (0.9, 0.5), (0.3, 0.95), (0.0, 0.7)]


# ----------------------------------------------------------------------------------------------- negotiation
@pytest.mark.parametrize("deltas", DELTAS)
def test_backward_induction_converges_to_the_rubinstein_split_at_the_proven_rate(deltas):
    x_star = mas.rubinstein_split(*deltas)
    for T in range(1, 60):
        v0 = mas.bargaining_shares(deltas, T)[0]
        assert abs(v0 - x_star) <= (deltas[0] * deltas[1]) ** ((T - 1) // 2) + 1e-12, T
    assert abs(mas.bargaining_shares(deltas, 400)[0] - x_star) < 1e-9
    assert mas.rubinstein_split(0.9, 0.9) == pytest.approx(1 / 1.9)  # equal patience: the first mover's edge


@pytest.mark.parametrize("T", [1, 2, 3, 4, 7, 20])
@pytest.mark.parametrize("deltas", DELTAS)
def test_spe_agents_on_two_ranks_agree_at_once_on_the_backward_induction_split(deltas, T):
    got, res = mas.run_negotiation(SPE, SPE, deltas, T)
    want = mas.reference_negotiation(SPE, SPE, deltas, T)
    assert got == want
    assert got["round"] == 0 and got["x1"] == pytest.approx(mas.bargaining_shares(deltas, T)[0], abs=1e-12)
    assert got["messages"] == 2 and [s.messages_sent for s in res.stats] == [1, 1]


@pytest.mark.parametrize("deltas", DELTAS[:3])
def test_no_fixed_demand_beats_the_spe_against_an_spe_opponent(deltas):
    T = 9
    base = mas.reference_negotiation(SPE, SPE, deltas, T)["utility"]
    for demand in np.linspace(0, 1, 41):
        dev = mas.Negotiator("fixed", demand=float(demand))
        assert mas.reference_negotiation(dev, SPE, deltas, T)["utility"][0] <= base[0] + 1e-12
        assert mas.reference_negotiation(SPE, dev, deltas, T)["utility"][1] <= base[1] + 1e-12


def test_concession_agents_on_two_ranks_equal_the_reference_for_every_pairing():
    es, reserves = [0.3, 1.0, 3.0], [0.0, 0.45]
    for (e1, r1), (e2, r2) in itertools.product(itertools.product(es, reserves), repeat=2):
        a, b = mas.Negotiator("concession", r1, e1), mas.Negotiator("concession", r2, e2)
        want = mas.reference_negotiation(a, b, (0.95, 0.95), 12)
        got, _ = mas.run_negotiation(a, b, (0.95, 0.95), 12)
        assert got == want
        assert got["round"] is not None and got["messages"] == 2 * (got["round"] + 1)
        assert got["x1"] >= r1 - 1e-12 and 1 - got["x1"] >= r2 - 1e-12  # nobody goes below its reserve


def test_a_boulware_agent_gets_more_than_a_conceder_and_a_later_deal():
    boulware, conceder = mas.Negotiator("concession", 0.1, 0.2), mas.Negotiator("concession", 0.1, 5.0)
    hard = mas.reference_negotiation(boulware, conceder, (0.99, 0.99), 20)
    soft = mas.reference_negotiation(conceder, conceder, (0.99, 0.99), 20)
    assert hard["x1"] > 0.6 and hard["x1"] > soft["x1"] and hard["round"] > soft["round"]


def test_incompatible_reserves_and_a_crashed_partner_end_without_a_deal():
    a, b = mas.Negotiator("concession", 0.7), mas.Negotiator("concession", 0.6)
    got, _ = mas.run_negotiation(a, b, (0.9, 0.9), 10)
    assert got["round"] is None and got["utility"] == (0.0, 0.0) and got["messages"] == 20
    slow = mas.Negotiator("concession", 0.0, 0.3)
    got, res = mas.run_negotiation(slow, slow, (0.9, 0.9), 10, faults=cluster.Faults(crash={1: 2}))
    assert got["round"] is None and isinstance(res.values[1], cluster.RankCrashed)


def test_bad_negotiation_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="discount factors"):
        mas.rubinstein_split(1.0, 0.5)
    with pytest.raises(ValueError, match="kind"):
        mas.Negotiator("greedy")
    with pytest.raises(cluster.RankError, match="two-agent"):
        cluster.run(mas.negotiate, 3, args=(SPE, (0.9, 0.9), 4), timeout=10)


# ------------------------------------------------------------------------------------------ single item
@pytest.mark.parametrize("rule", au.RULES)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
def test_sealed_bid_on_ranks_equals_the_reference_with_two_messages_per_bidder(n, rule):
    rng = np.random.default_rng(n)
    for values in (rng.random(n), np.round(rng.random(n), 1), np.full(n, 0.5)):  # ties too
        for strategy in (au.truthful, au.bne_first_price):
            got, res = au.run_sealed_bid(values, rule, strategy, reserve=0.2)
            bids = [strategy(v, n) for v in values]
            assert (got["winner"], got["price"]) == au.reference_auction(bids, rule, reserve=0.2)
            assert sum(s.messages_sent for s in res.stats) == 2 * n
            assert all(v == {"winner": got["winner"], "price": got["price"]} for v in res.values[1:])


def test_reference_auction_prices_by_hand():
    assert au.reference_auction([3, 7, 5], "first") == (1, 7.0)
    assert au.reference_auction([3, 7, 5], "second") == (1, 5.0)
    assert au.reference_auction([3, 7, 7], "second") == (1, 7.0)  # a tie: the lower index wins at 7
    assert au.reference_auction([3, 7], "second", reserve=6) == (1, 6.0)
    assert au.reference_auction([3, 4], "first", reserve=6) == (-1, 0.0)
    with pytest.raises(ValueError, match="'first' or 'second'"):
        au.reference_auction([1], "dutch")


@pytest.mark.parametrize("n", [2, 3])
def test_second_price_has_no_profitable_misreport_on_a_grid_and_first_price_has_many(n):
    grid = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert au.truthfulness_violations("second", grid, n) == []
    lies = au.truthfulness_violations("first", grid, n)
    assert lies and all(r < bids[i] for bids, i, r, _ in lies)  # every profitable lie is a shaded bid


@pytest.mark.parametrize("n", [2, 3, 5])
def test_first_price_bayes_nash_shading_is_the_best_shade_by_simulation(n):
    shades = np.linspace(0.3, 1.0, 71)
    mc = au.simulate_first_price(shades, n, trials=60_000, seed=n)
    exact = np.array([au.first_price_expected_utility(s, n) for s in shades])
    assert np.abs(mc - exact).max() < 0.006  # Monte Carlo agrees with the closed form
    assert abs(shades[np.argmax(exact)] - (n - 1) / n) <= 0.01
    assert abs(shades[np.argmax(mc)] - (n - 1) / n) <= 0.06
    assert au.first_price_expected_utility((n - 1) / n, n) == pytest.approx(1 / (n * (n + 1)))
    assert mc[-1] == 0.0 and mc.max() > 0.9 * exact.max()  # truthful bidding earns nothing


def test_revenue_equivalence_of_first_price_at_equilibrium_and_second_price_truthful():
    n, v = 4, np.random.default_rng(0).random((40_000, 4))
    top2 = np.sort(v, axis=1)[:, -2:]
    first, second = au.bne_first_price(1.0, n) * top2[:, 1].mean(), top2[:, 0].mean()
    assert first == pytest.approx((n - 1) / (n + 1), abs=0.01) and second == pytest.approx(0.6, abs=0.01)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_english_auction_on_ranks_equals_the_reference_and_sells_near_the_second_value(n):
    values = np.random.default_rng(n).random(n)
    got, res = au.run_english(values, 0.05)
    want = au.reference_english(values, 0.05)
    assert got == want and values[got["winner"]] >= values.max() - 0.05  # a tie within one step: lowest index
    second = np.sort(values)[-2] if n > 1 else 0.0
    assert abs(got["price"] - second) <= 0.05 + 1e-12
    assert sum(s.messages_sent for s in res.stats) == 2 * got["polled"] + n


def test_a_crashed_bidder_is_left_out_of_sealed_bid_and_english_auctions():
    values = [0.4, 0.9, 0.6]
    got, _ = au.run_sealed_bid(values, "second", faults=cluster.Faults(crash={2: 0}))
    assert got["bids"] == [0.4, None, 0.6] and (got["winner"], got["price"]) == (2, 0.4)
    got, _ = au.run_english(values, 0.1, faults=cluster.Faults(crash={2: 3}))  # bidder 1 answers 3 times
    assert got["winner"] == 2 and 0.4 <= got["price"] <= 0.5


# ------------------------------------------------------------------------------------------------ VCG
def _milp_welfare(V):
    from scipy.optimize import Bounds, LinearConstraint, milp

    n, size = V.shape
    m = size.bit_length() - 1
    cols = [(i, S) for i in range(n) for S in range(1, size)]  # x[i, S] = 1: bidder i gets exactly bundle S
    A = np.zeros((n + m, len(cols)))
    for c, (i, S) in enumerate(cols):
        A[i, c] = 1  # one bundle per bidder (XOR bids)
        for k in range(m):
            A[n + k, c] = (S >> k) & 1  # each item at most once
    res = milp(-np.array([V[i, S] for i, S in cols]), constraints=LinearConstraint(A, 0, 1),
               integrality=np.ones(len(cols)), bounds=Bounds(0, 1))
    assert res.success
    return -res.fun


@pytest.mark.parametrize("n, m", [(3, 2), (4, 2), (3, 3), (5, 3)])
def test_vcg_welfare_equals_scipy_milp_and_payments_are_clarke(n, m):
    rng = np.random.default_rng(10 * n + m)
    for _ in range(5):
        V = np.round(rng.random((n, 1 << m)) * 10, 1)
        V[:, 0] = 0
        out = au.vcg(V)
        assert out["welfare"] == pytest.approx(_milp_welfare(V), abs=1e-9)
        b, p = out["bundles"], out["payments"]
        assert all(b[i] & b[j] == 0 for i in range(n) for j in range(i + 1, n))  # no item sold twice
        for i in range(n):  # Clarke: the others' best welfare without i, minus theirs with i present
            without = _milp_welfare(np.delete(V, i, axis=0))
            assert p[i] == pytest.approx(without - (out["welfare"] - V[i, b[i]]), abs=1e-9)
            assert -1e-9 <= p[i] <= V[i, b[i]] + 1e-9  # no bidder pays more than it values what it gets


def test_vcg_example_by_hand_and_one_item_vcg_is_second_price():
    V = np.array([[0, 3, 2, 6], [0, 4, 1, 4], [0, 1, 3, 5.0]])  # bundles: {}, {A}, {B}, {A, B}
    out = au.vcg(V)
    assert out["bundles"] == [0, 1, 2] and out["welfare"] == 7.0 and list(out["payments"]) == [0.0, 3.0, 2.0]
    values = np.array([0.3, 0.8, 0.5, 0.7])
    one = au.vcg(np.stack([np.zeros(4), values], axis=1))
    assert one["bundles"] == [0, 1, 0, 0] and one["payments"][1] == 0.7 == au.reference_auction(values)[1]


def test_vcg_is_truthful_for_every_profile_and_misreport_on_a_two_item_grid():
    grid = np.array(list(itertools.product([0.0, 1.0, 2.0], repeat=3)))
    reports = np.concatenate([np.zeros((len(grid), 1)), grid], axis=1)  # 27 valuations of {A}, {B}, {A, B}
    profiles = reports[np.array(list(itertools.product(range(len(reports)), repeat=3)))]  # 27^3 profiles
    assert profiles.shape == (19683, 3, 4)
    assert len(au.vcg_violations(profiles, reports)) == 0
    pay_as_bid = profiles.copy()  # the same allocation but pay-as-bid is not truthful: a control
    b, _, _ = au.vcg_batch(pay_as_bid[:50])
    assert np.any(np.take_along_axis(pay_as_bid[:50], b[..., None], -1) > 0)


def test_vcg_is_truthful_on_random_three_item_profiles_with_four_bidders():
    rng = np.random.default_rng(3)
    profiles = np.round(rng.random((60, 4, 8)) * 4) / 2
    profiles[..., 0] = 0
    reports = np.round(rng.random((150, 8)) * 4) / 2
    reports[:, 0] = 0
    reports = np.concatenate([reports, np.zeros((1, 8)), profiles[:, 0] * 1.5])  # silence, overbidding
    assert len(au.vcg_violations(profiles, reports)) == 0


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_vcg_on_ranks_equals_vcg_and_leaves_a_silent_bidder_out(n):
    V = np.round(np.random.default_rng(n).random((n, 4)) * 5, 1)
    V[:, 0] = 0
    got, res = au.run_vcg(V)
    want = au.vcg(V)
    assert got["bundles"] == want["bundles"] and np.allclose(got["payments"], want["payments"], rtol=0, atol=0)
    assert sum(s.messages_sent for s in res.stats) == 2 * n
    if n >= 2:
        got, _ = au.run_vcg(V, faults=cluster.Faults(crash={1: 0}))
        rest = au.vcg(V[1:])
        assert got["present"] == list(range(1, n)) and got["bundles"][0] == 0 and got["payments"][0] == 0
        assert got["bundles"][1:] == rest["bundles"] and np.array_equal(got["payments"][1:], rest["payments"])
    with pytest.raises(ValueError, match="2\\^m"):
        au.run_vcg(np.zeros((2, 3)))


# ------------------------------------------------------------------------------------------ consensus
@pytest.mark.parametrize("K, f", [(1, 0), (2, 1), (3, 1), (3, 2), (4, 1), (4, 2), (5, 1)])
def test_floodset_keeps_agreement_validity_and_termination_under_every_crash_pattern(K, f):
    runs = 0
    for values in itertools.product([0, 1, 2][:K], repeat=K):
        for crash in mas.crash_patterns(K, f, f + 1):
            decisions = mas.reference_floodset(values, f, crash)
            assert all(mas.consensus_properties(values, decisions).values()), (values, crash, decisions)
            runs += 1
    assert runs > 0


def test_floodset_on_ranks_equals_the_reference_for_every_crash_pattern_of_four_agents():
    for values in [(0, 1, 1, 1), (2, 0, 1, 0), (1, 1, 1, 1)]:
        for crash in mas.crash_patterns(4, 1, 2):
            got, res = mas.run_floodset(values, 1, faults=cluster.Faults(crash=crash))
            assert got == mas.reference_floodset(values, 1, crash), (values, crash)
            if not crash:
                assert sum(s.messages_sent for s in res.stats) == 2 * 4 * 3  # (f + 1) K (K - 1)


def test_floodset_with_f_plus_one_crashes_can_disagree_and_one_more_round_repairs_it():
    values, crash = (0, 1, 1, 1), {0: 1, 1: 5}  # 0 reaches only rank 1; rank 1 then reaches only rank 2
    got, _ = mas.run_floodset(values, 1, faults=cluster.Faults(crash=crash))
    assert got == [None, None, 0, 1] and not mas.consensus_properties(values, got)["agreement"]
    bad = [c for c in mas.crash_patterns(4, 2, 2) if len(set(mas.reference_floodset(values, 1, c)) - {None}) > 1]
    assert bad and all(len(c) == 2 for c in bad)  # only two crashes in two rounds break it
    assert all(len(set(mas.reference_floodset(values, 2, c)) - {None}) <= 1 for c in mas.crash_patterns(4, 2, 3))


def test_lost_messages_break_floodset_without_any_crash():
    values = (0, 1, 1)
    drop = {0: {1, 3}, 1: {3}}  # rank 0's messages to rank 2 (both rounds) and rank 1's round-2 relay to it
    got, _ = mas.run_floodset(values, 1, faults=cluster.Faults(drop=drop))
    assert got == mas.reference_floodset(values, 1, drop=drop) == [0, 0, 1]
    rates = []
    for p in (0.0, 0.3):
        runs = [mas.run_floodset((0, 1, 1, 1, 1), 1, faults=cluster.Faults(loss=p, seed=s))[0] for s in range(40)]
        rates.append(np.mean([len(set(d)) > 1 for d in runs]))
    assert rates[0] == 0 and rates[1] > 0


# --------------------------------------------------------------------------------------------- market
def test_competitive_equilibrium_by_hand():
    ce = mas.competitive_equilibrium([10, 8, 6, 4], [3, 5, 7, 9])
    assert ce == {"quantity": 2, "low": 6.0, "high": 7.0, "price": 6.5, "surplus": 10.0}
    assert mas.competitive_equilibrium([1], [2])["quantity"] == 0


def _market(n=12):
    return np.linspace(60, 200, n), np.linspace(40, 180, n)  # equilibrium price 120, surplus from 6 trades


def test_zi_constrained_traders_reach_most_surplus_and_unconstrained_ones_less():
    values, costs = _market()
    ce = mas.competitive_equilibrium(values, costs)
    zic = [mas.zi_market(values, costs, 30, seed=s, price_max=200) for s in range(30)]
    ziu = [mas.zi_market(values, costs, 30, seed=s, price_max=200, constrained=False) for s in range(30)]
    eff_c, eff_u = np.mean([r["efficiency"] for r in zic]), np.mean([r["efficiency"] for r in ziu])
    assert eff_c > 0.9 and eff_u < eff_c - 0.1
    assert abs(np.mean(np.concatenate([r["prices"] for r in zic])) - ce["price"]) < 15
    assert mas.zi_market(values, costs, 30, seed=4)["trades"] == mas.zi_market(values, costs, 30, seed=4)["trades"]


def test_mesa_zero_intelligence_market_agrees_with_ours():
    mesa = pytest.importorskip("mesa")

    class Trader(mesa.Agent):
        def __init__(self, model, limit, buyer):
            super().__init__(model)
            self.limit, self.buyer, self.holding = limit, buyer, True

        def step(self):
            if self.holding:
                lo, hi = (0.0, self.limit) if self.buyer else (self.limit, self.model.top)
                self.model.post(self, self.model.rng.uniform(lo, hi))

    class Market(mesa.Model):
        def __init__(self, values, costs, seed):
            super().__init__(seed=seed)
            self.top, self.bid, self.ask, self.trades = 200.0, None, None, []
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

    values, costs = _market()
    ce = mas.competitive_equilibrium(values, costs)
    theirs, prices = [], []
    for s in range(30):
        model = Market(values, costs, seed=s)
        for _ in range(30):
            model.step()
        assert len(model.agents) == 24 and model.steps == 30
        theirs.append(sum(g for _, g in model.trades) / ce["surplus"])
        prices += [p for p, _ in model.trades]
    ours = np.mean([mas.zi_market(values, costs, 30, seed=s, price_max=200)["efficiency"] for s in range(30)])
    assert np.mean(theirs) > 0.9 and abs(np.mean(theirs) - ours) < 0.04
    assert abs(np.mean(prices) - ce["price"]) < 15


# ------------------------------------------------------------------------------------------------ Ray
@pytest.mark.slow
def test_an_auction_house_of_ray_actors_agrees_with_ours(ray_local):
    ray = ray_local

    @ray.remote(num_cpus=0)
    class Bidder:
        def __init__(self, value, n):
            self.value, self.n = value, n

        def bid(self, rule):
            return self.value if rule == "second" else (self.n - 1) / self.n * self.value

        def stays(self, price):
            return self.value >= price

    values = [0.35, 0.8, 0.55]
    bidders = [Bidder.remote(v, len(values)) for v in values]
    for rule in au.RULES:
        bids = ray.get([b.bid.remote(rule) for b in bidders], timeout=60)
        order = sorted(range(len(bids)), key=lambda i: (-bids[i], i))
        price = bids[order[0]] if rule == "first" else bids[order[1]]
        strategy = au.truthful if rule == "second" else au.bne_first_price
        ours, _ = au.run_sealed_bid(values, rule, strategy)
        assert (order[0], price) == (ours["winner"], ours["price"])
    active, k = list(range(len(values))), 0
    while True:  # the driver as the English auctioneer, polling the actors
        stay = ray.get([bidders[i].stays.remote(0.05 * k) for i in active], timeout=60)
        staying = [i for i, s in zip(active, stay) if s]
        if len(staying) < 2:
            break
        active, k = staying, k + 1
    assert (staying[0], 0.05 * k) == tuple(au.run_english(values, 0.05)[0][x] for x in ("winner", "price"))
