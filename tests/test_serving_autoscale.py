"""The autoscaler (Chapter 23): the M/M/c tail against the simulator, the capacity table, a fleet that
changes size served exactly, and a diurnal day that meets the p99 SLO for less than peak provisioning."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import datasets
from scaleoutai.serving import autoscale as au
from scaleoutai.serving import replicas as rp


@pytest.mark.parametrize("lam", [0.3, 0.8])
def test_one_replica_tail_is_the_mm1_exponential(lam):
    for t in (0.5, 2.0, 7.0):
        assert au.mmc_sojourn_tail(t, 1, lam, 1.0) == pytest.approx(math.exp(-(1.0 - lam) * t), rel=1e-9)


@pytest.mark.parametrize("c, rho", [(2, 0.7), (8, 0.75)])
def test_the_mmc_tail_matches_the_central_queue_simulation(c, rho):
    n, lam = 100_000, rho * c
    arr, svc = datasets.poisson_arrivals(n, lam, seed=1), datasets.service_times(n, 1.0, seed=2)
    lat = rp.simulate(arr, svc, c, "central_queue").latency[n // 10:]  # past the empty start
    for t in (1.0, 3.0):
        assert np.mean(lat > t) == pytest.approx(au.mmc_sojourn_tail(t, c, lam, 1.0), rel=0.1)


def test_max_rate_puts_the_p99_on_the_slo_and_grows_with_replicas():
    rates = [au.max_rate(c, 2.0, 3.0) for c in range(1, 10)]
    assert all(b > a for a, b in zip(rates, rates[1:]))
    for c, r in zip(range(1, 10), rates):
        assert au.mmc_sojourn_tail(3.0, c, r, 2.0) == pytest.approx(0.01, rel=1e-6)
    assert au.replicas_for(rates[4], 2.0, 3.0) == 5 and au.replicas_for(rates[4] * 1.001, 2.0, 3.0) == 6


def test_an_slo_below_one_service_tail_is_refused():
    with pytest.raises(ValueError, match="must exceed"):
        au.replicas_for(1.0, 1.0, 4.0)


@pytest.mark.parametrize("c", [1, 4])
def test_a_fleet_always_up_is_the_central_queue(c):
    arr, svc = datasets.poisson_arrivals(3000, 0.8 * c, seed=3), datasets.service_times(3000, 1.0, seed=4)
    lat, _ = au.serve(arr, svc, np.zeros(c), np.full(c, np.inf))
    np.testing.assert_allclose(lat, rp.simulate(arr, svc, c, "central_queue").latency, rtol=1e-12)


def test_replicas_serve_only_between_up_and_down():
    arr, svc = np.array([0.0, 0.1, 5.0, 9.0]), np.array([1.0, 1.0, 1.0, 1.0])
    lat, last = au.serve(arr, svc, np.array([0.0, 2.0]), np.array([4.0, np.inf]))
    np.testing.assert_allclose(lat, [1.0, 1.9, 1.0, 1.0])  # 2nd waits for replica 0, the later ones go to 1
    np.testing.assert_allclose(last, [2.0, 10.0])


def test_diurnal_arrivals_follow_the_rate():
    D, period = 40_000.0, 20_000.0
    a = au.diurnal_arrivals(D, 5.0, amplitude=0.5, period=period, noise=0.0, seed=7)
    edges = np.arange(0, D + 1, 2000.0)
    counts, _ = np.histogram(a, edges)
    mid = (edges[:-1] + edges[1:]) / 2
    want = [float(np.mean(au.rate_at(np.linspace(lo, lo + 2000, 201), 5.0, 0.5, period))) * 2000 for lo in edges[:-1]]
    np.testing.assert_allclose(counts, want, rtol=0.08)
    assert counts[np.argmin(np.abs(mid - period / 2))] > 2.5 * counts[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_autoscaler_meets_the_slo_for_less_than_peak_provisioning(seed):
    D, mu, slo = 4 * 3600.0, 1.0, 8.0
    arr = au.diurnal_arrivals(D, 2.0, amplitude=0.7, period=D, seed=seed)
    svc = datasets.service_times(len(arr), 1.0 / mu, seed=seed + 10)
    auto = au.autoscale(arr, svc, mu, slo, D, interval=300, window=300, headroom=0.25, cold_start=60)
    peak = int(auto.schedule[:, 1].max())
    fixed = au.static(arr, svc, peak, D)
    assert auto.p99() <= slo and fixed.p99() <= slo
    assert auto.gpu_seconds < 0.85 * fixed.gpu_seconds
    assert auto.schedule[:, 1].min() < peak  # it did scale down
