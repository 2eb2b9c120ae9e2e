"""Drift statistics against their definitions and scipy; the monitor's delay and false alarms."""
import numpy as np
import pytest
from scipy import stats

from scaleoutai.datasets import shifted_stream
from scaleoutai.serving.drift import (DriftMonitor, detection_delay, false_alarm_rate, fleet_psi, ks_statistic, ks_threshold,
                                      naive_ks, psi)


@pytest.mark.parametrize("n,m,shift", [(1, 1, 0.0), (7, 3, 0.3), (200, 50, 1.0), (500, 500, 0.0)])
def test_ks_statistic_equals_scipy_and_the_definition(n, m, shift):
    rng = np.random.default_rng(n + m)
    a, b = rng.standard_normal(n), shift + rng.standard_normal(m)
    got = ks_statistic(a, b)
    assert got == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
    assert got == pytest.approx(naive_ks(a, b), abs=1e-12)


def test_ks_statistic_handles_ties_like_scipy():
    a, b = np.array([0, 0, 1, 1, 2.0]), np.array([1, 1, 1, 2.0])
    assert ks_statistic(a, b) == pytest.approx(stats.ks_2samp(a, b).statistic)


def test_ks_threshold_matches_the_asymptotic_distribution():
    # P(sqrt(nm/(n+m)) D > c) -> alpha with c from the Kolmogorov distribution's tail
    c = ks_threshold(1000, 1000, alpha=0.05) / np.sqrt(2000 / 1e6)
    assert stats.kstwobign.sf(c) == pytest.approx(0.05, rel=0.02)


def test_psi_is_zero_for_the_same_sample_and_grows_with_the_shift():
    ref = np.random.default_rng(0).standard_normal(5000)
    assert psi(ref, ref) == pytest.approx(0.0, abs=1e-12)
    values = [psi(ref, np.random.default_rng(1).standard_normal(2000) + s) for s in (0.0, 0.25, 0.5, 1.0)]
    assert values[0] < 0.02 and all(a < b for a, b in zip(values, values[1:])) and values[-1] > 0.25


def test_psi_matches_a_hand_computed_example():
    ref = np.array([0, 1, 2, 3.0])       # quartile edges 0.75, 1.5, 2.25: one value per bin
    new = np.array([0, 0, 0, 3.0])       # shares 3/4, eps, eps, 1/4 (eps floors the empty bins)
    p, q, eps = np.array([0.75, 1e-4, 1e-4, 0.25]), np.full(4, 0.25), 1e-4
    assert psi(ref, new, bins=4, eps=eps) == pytest.approx(float(np.sum((p - q) * np.log(p / q))))


def test_monitor_detects_a_shift_after_the_change_and_rarely_before():
    ref = np.random.default_rng(42).standard_normal(2000)
    delays, false = [], []
    for seed in range(10):
        x = shifted_stream(6000, change_at=3000, shift=0.5, seed=seed)
        pos, vals, alarms = DriftMonitor(ref, window=400, every=50, statistic="ks").scan(x)
        delays.append(detection_delay(pos, alarms, 3000))
        false.append(false_alarm_rate(pos, alarms, 3000))
    assert max(delays) <= 400 and np.mean(false) < 0.05


def test_a_larger_window_detects_a_small_shift_that_a_small_window_misses():
    ref = np.random.default_rng(7).standard_normal(4000)
    x = shifted_stream(8000, change_at=4000, shift=0.15, seed=3)
    small = DriftMonitor(ref, window=100, every=100).scan(x)
    large = DriftMonitor(ref, window=2000, every=100).scan(x)
    assert detection_delay(*large[::2], 4000) < detection_delay(*small[::2], 4000)


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="statistic must be"):
        DriftMonitor(np.zeros(10), statistic="chi2")
    with pytest.raises(ValueError, match="at least bins=10"):
        psi(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="change_at must lie"):
        shifted_stream(10, 11)


def _fleet(comm, ref, stream):
    from scaleoutai.collectives import block_range
    lo, hi = block_range(len(stream), comm.size, comm.rank)
    return fleet_psi(comm, ref, stream[lo:hi])


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8, 40])
def test_fleet_psi_over_replicas_equals_psi_of_all_traffic(K):
    from scaleoutai import cluster
    ref = np.random.default_rng(0).standard_normal(1000)
    stream = shifted_stream(37, change_at=10, shift=0.7, seed=2)  # K = 40 leaves replicas with no traffic
    res = cluster.run(_fleet, K, args=(ref, stream), timeout=60)
    assert all(v == pytest.approx(psi(ref, stream), abs=1e-12) for v in res.values)


@pytest.mark.slow
def test_fleet_psi_on_processes_equals_psi_of_all_traffic():
    from scaleoutai import cluster
    ref = np.random.default_rng(0).standard_normal(1000)
    stream = shifted_stream(500, change_at=100, seed=3)
    res = cluster.run(_fleet, 2, backend="process", args=(ref, stream), timeout=120)
    assert res.values == [pytest.approx(psi(ref, stream), abs=1e-12)] * 2
