"""Replica routing: the simulation against queueing theory, and the policies' tails."""
import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import replicas as rp


def _load(n, c, rho, mu=1.0, dist="exp", seed=0):
    lam = rho * c * mu
    return datasets.poisson_arrivals(n, lam, seed=seed), datasets.service_times(n, 1.0 / mu, dist=dist, seed=seed + 1), lam


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_random_routing_matches_the_mm1_sojourn_quantiles(rho):
    arr, svc, lam = _load(200_000, 4, rho)
    res = rp.simulate(arr, svc, 4, "random")
    for p in (50, 90, 99):
        want = rp.mm1_sojourn_quantile(p / 100, lam / 4, 1.0)
        assert res.percentile(p) == pytest.approx(want, rel=0.06)


@pytest.mark.parametrize("c,rho", [(1, 0.7), (3, 0.8), (5, 0.9)])
def test_central_queue_matches_erlang_c(c, rho):
    arr, svc, lam = _load(200_000, c, rho)
    res = rp.simulate(arr, svc, c, "central_queue")
    assert res.latency.mean() == pytest.approx(rp.mmc_mean_sojourn(c, lam, 1.0), rel=0.05)
    waited = np.mean(res.latency - svc > 1e-6)  # times reach 1e5 s: rounding is ~1e-11
    assert waited == pytest.approx(rp.erlang_c(c, lam, 1.0), abs=0.015)
    wait99 = np.percentile(res.latency - svc, 99)
    assert wait99 == pytest.approx(rp.mmc_wait_quantile(0.99, c, lam, 1.0), rel=0.08)


def test_erlang_c_of_one_server_is_the_load():
    assert rp.erlang_c(1, 0.6, 1.0) == pytest.approx(0.6)
    assert rp.mmc_mean_sojourn(1, 0.6, 1.0) == pytest.approx(1 / (1 - 0.6))


def test_smarter_routing_shortens_the_tail_at_high_load():
    arr, svc, _ = _load(100_000, 8, 0.9)
    p99 = {pol: rp.simulate(arr, svc, 8, pol, seed=3).percentile(99) for pol in rp.POLICIES}
    assert p99["power_of_two"] < 0.5 * p99["random"]
    assert p99["least_outstanding"] <= p99["power_of_two"] * 1.05
    assert p99["central_queue"] <= p99["least_outstanding"] * 1.05
    assert p99["round_robin"] < p99["random"]


def test_one_replica_with_constant_service_is_a_deterministic_queue():
    arr = np.array([0.0, 0.5, 0.6, 5.0])
    res = rp.simulate(arr, np.ones(4), 1, "round_robin")
    np.testing.assert_allclose(res.latency, [1.0, 1.5, 2.4, 1.0])


def test_hedging_cuts_the_tail_of_a_slow_replica_for_a_little_extra_work():
    arr, svc, _ = _load(50_000, 4, 0.2, seed=5)   # replica 0 at 4x slower still keeps up (load 0.8)
    extra = datasets.service_times(50_000, 1.0, seed=99)
    plain = rp.simulate(arr, svc, 4, "round_robin", slow={0: 4.0})
    hedged = rp.simulate(arr, svc, 4, "round_robin", slow={0: 4.0}, hedge_after=3.0, hedge_services=extra)
    assert hedged.percentile(99) < 0.5 * plain.percentile(99)
    assert 0 < hedged.hedged < 0.3 * len(arr)
    assert hedged.busy.sum() > plain.busy.sum()


def test_a_hedge_never_makes_a_request_slower():
    arr, svc, _ = _load(5000, 3, 0.7, seed=2)
    a = rp.simulate(arr, svc, 3, "least_outstanding", seed=1)
    b = rp.simulate(arr, svc, 3, "least_outstanding", hedge_after=1e9, seed=1)
    np.testing.assert_array_equal(a.latency, b.latency)
    assert b.hedged == 0


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="policy must be one of"):
        rp.simulate(np.zeros(1), np.ones(1), 1, "fastest")
    with pytest.raises(ValueError, match="unstable queue"):
        rp.erlang_c(2, 3.0, 1.0)
    with pytest.raises(ValueError, match="hedging needs a per-replica router"):
        rp.simulate(np.zeros(1), np.ones(1), 2, "central_queue", hedge_after=1.0)
