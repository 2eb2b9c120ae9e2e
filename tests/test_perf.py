"""Tests for scaleoutai.perf (Chapters 3 and 5): closed forms, fits, the timing harness, and the
alpha-beta formulas checked against the simulator running real send/recv collectives."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai import perf
from scaleoutai.perf import (COLLECTIVES, collective_bytes_per_rank, collective_time, fit_alpha_beta, measure)

ALPHA, BETA = 1e-6, 1e-9  # hand-checked values below use n = 1e6 bytes: alpha + n beta = 1.001e-3 s
N = 1e6
C = ALPHA + N * BETA


# ---- speedup, efficiency, Amdahl, Gustafson, Karp-Flatt ---------------------------------------
def test_speedup_and_efficiency_from_times():
    assert perf.speedup(8.0, 2.0) == 4.0
    assert perf.efficiency(8.0, 2.0, 4) == 1.0
    assert perf.efficiency(8.0, 4.0, 4) == 0.5
    np.testing.assert_allclose(perf.speedup(12.0, np.array([12.0, 6.0, 4.0])), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(perf.efficiency(12.0, np.array([12.0, 6.0, 4.0]), [1, 2, 4]), [1.0, 1.0, 0.75])


def test_amdahl_matches_hand_values_and_approaches_one_over_s():
    assert perf.amdahl_speedup(0.0, 16) == pytest.approx(16.0)
    assert perf.amdahl_speedup(1.0, 16) == pytest.approx(1.0)
    assert perf.amdahl_speedup(0.1, 10) == pytest.approx(1 / (0.1 + 0.09))
    p = np.array([1, 2, 8, 64, 1024, 10**7])
    s = perf.amdahl_speedup(0.05, p)
    assert np.all(np.diff(s) > 0) and np.all(s < 1 / 0.05)
    assert s[-1] == pytest.approx(20.0, rel=1e-4)


def test_gustafson_is_linear_in_p_with_slope_one_minus_s():
    p = np.arange(1, 65)
    g = perf.gustafson_speedup(0.2, p)
    assert g[0] == pytest.approx(1.0)
    np.testing.assert_allclose(np.diff(g), 0.8)
    assert perf.gustafson_speedup(0.0, 32) == 32.0


@pytest.mark.parametrize("s", [0.0, 0.03, 0.25, 0.9])
def test_karp_flatt_recovers_serial_fraction_of_an_amdahl_program(s):
    p = np.array([2, 3, 8, 100])
    np.testing.assert_allclose(perf.karp_flatt(perf.amdahl_speedup(s, p), p), s, atol=1e-12)


# ---- stragglers -----------------------------------------------------------------------------
def test_straggler_step_time_is_the_slowest_worker_per_step():
    assert perf.straggler_step_time([0.1, 0.3, 0.2]) == 0.3
    np.testing.assert_array_equal(perf.straggler_step_time([[1.0, 2.0, 3.0], [4.0, 1.0, 1.0]]), [3.0, 4.0])


def test_expected_max_normal_matches_exact_values_and_grows_with_p():
    mu, sigma = 1.0, 0.1
    # E[max of 2 iid normals] = mu + sigma / sqrt(pi); Monte Carlo error at 200k samples ~ 0.002 sigma
    assert perf.expected_max_normal(mu, sigma, 1) == pytest.approx(mu, abs=0.01 * sigma)
    assert perf.expected_max_normal(mu, sigma, 2) == pytest.approx(mu + sigma / math.sqrt(math.pi), abs=0.01 * sigma)
    m = [perf.expected_max_normal(mu, sigma, p, samples=20_000) for p in (2, 8, 64)]
    assert m[0] < m[1] < m[2] < mu + sigma * math.sqrt(2 * math.log(64))
    assert perf.expected_max_normal(mu, sigma, 8, samples=5000, seed=3) == perf.expected_max_normal(
        mu, sigma, 8, samples=5000, seed=3)


# ---- alpha-beta closed forms ----------------------------------------------------------------
HAND = [  # (name, p, time / C or exact seconds)
    ("broadcast", 4, 2 * C), ("broadcast", 5, 3 * C), ("reduce", 8, 3 * C),
    ("scatter", 4, 3 * ALPHA + 0.75 * N * BETA), ("gather", 4, 3 * (ALPHA + 0.25 * N * BETA)),  # incast: 3 blocks in turn
    ("naive_allreduce", 4, 6 * C),  # 3 copies into rank 0, 3 out ("tree_allreduce", 4, 4 * C),
    ("ring_allreduce", 4, 6 * (ALPHA + 0.25 * N * BETA)),
    ("recursive_doubling_allreduce", 8, 3 * C), ("recursive_doubling_allreduce", 6, 4 * C),
    ("reduce_scatter", 4, 3 * (ALPHA + 0.25 * N * BETA)), ("all_gather", 4, 3 * (ALPHA + 0.25 * N * BETA)),
    ("all_to_all", 4, 3 * (ALPHA + 0.25 * N * BETA)),
]


@pytest.mark.parametrize("name,p,expected", HAND)
def test_collective_time_matches_hand_checked_value(name, p, expected):
    assert collective_time(name, N, p, ALPHA, BETA) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name,p,expected", [
    ("broadcast", 8, 3 * N), ("reduce", 8, N), ("scatter", 4, 0.75 * N), ("gather", 4, 0.25 * N),
    ("naive_allreduce", 4, 3 * N), ("tree_allreduce", 5, 3 * N), ("ring_allreduce", 4, 1.5 * N),
    ("recursive_doubling_allreduce", 8, 3 * N), ("recursive_doubling_allreduce", 6, 3 * N),
    ("reduce_scatter", 4, 0.75 * N), ("all_gather", 4, 0.75 * N), ("all_to_all", 4, 0.75 * N)])
def test_collective_bytes_per_rank_matches_hand_checked_value(name, p, expected):
    assert collective_bytes_per_rank(name, N, p) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", COLLECTIVES)
def test_one_rank_communicates_nothing(name):
    assert collective_time(name, N, 1, ALPHA, BETA) == 0.0
    assert collective_bytes_per_rank(name, N, 1) == 0.0


def test_collective_time_accepts_arrays_of_p_and_sizes():
    p = np.array([1, 2, 4, 8])
    np.testing.assert_allclose(collective_time("ring_allreduce", N, p, ALPHA, BETA),
                               2 * (p - 1) * (ALPHA + N / p * BETA))
    np.testing.assert_allclose(collective_time("broadcast", [0, N], 8, ALPHA, BETA), [3 * ALPHA, 3 * C])


def test_ring_beats_tree_for_large_messages_and_loses_for_small_ones():
    def ring_over_tree(n):
        ring = collective_time("ring_allreduce", n, 64, ALPHA, BETA)
        return ring / collective_time("tree_allreduce", n, 64, ALPHA, BETA)

    assert ring_over_tree(1e9) < 1 < ring_over_tree(8)


def test_crossover_bytes_equalises_latency_and_bandwidth_terms():
    n_star = perf.crossover_bytes(ALPHA, BETA)
    assert n_star == pytest.approx(1000.0)
    assert n_star * BETA == pytest.approx(ALPHA)


def test_fit_alpha_beta_recovers_known_parameters_from_noisy_times():
    alpha, beta = 5e-6, 1e-10  # 5 us latency, 10 GB/s
    rng = np.random.default_rng(42)
    n = np.repeat(np.geomspace(1e2, 1e8, 13), 5)
    t = alpha + beta * n + rng.normal(0.0, 2e-8, n.size)  # timer jitter, 0.4% of alpha
    fit = fit_alpha_beta(n, t)
    assert fit.alpha == pytest.approx(alpha, rel=0.02)
    assert fit.beta == pytest.approx(beta, rel=0.001)
    assert fit.bandwidth == pytest.approx(1e10, rel=0.001)
    assert fit.r2 > 0.999
    assert fit.predict(1e6) == pytest.approx(alpha + beta * 1e6, rel=0.001)
    exact = fit_alpha_beta([1, 10, 100], [1.1, 2.0, 11.0])
    assert (exact.alpha, exact.beta, exact.r2) == (pytest.approx(1.0), pytest.approx(0.1), pytest.approx(1.0))


# ---- the formulas against the simulator: real send/recv collectives ------------------------------
def ring_allreduce(comm, x):
    """Reduce-scatter then all-gather over np.array_split chunks; rank r sends to r + 1."""
    p, r = comm.size, comm.rank
    chunks = [c.copy() for c in np.array_split(x, p)]
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        comm.send(chunks[(r - step) % p], right)
        i = (r - step - 1) % p
        chunks[i] = chunks[i] + comm.recv(left)
    for step in range(p - 1):
        comm.send(chunks[(r + 1 - step) % p], right)
        chunks[(r - step) % p] = comm.recv(left)
    return np.concatenate(chunks)


def binomial_broadcast(comm, x):
    """Root 0 sends to 0 + 2^k for k descending; a rank receives from r - lowbit(r), then forwards."""
    p, r = comm.size, comm.rank
    if r == 0:
        data, top = x, math.ceil(math.log2(p))
    else:
        top = (r & -r).bit_length() - 1
        data = comm.recv(r - (1 << top))
    for k in reversed(range(top)):
        if r + (1 << k) < p:
            comm.send(data, r + (1 << k))
    return data


def pairwise_all_to_all(comm, x):
    p, r = comm.size, comm.rank
    blocks = np.array_split(x, p)
    out = [None] * p
    out[r] = blocks[r]
    for s in range(1, p):
        comm.send(blocks[(r + s) % p], (r + s) % p)
        out[(r - s) % p] = comm.recv((r - s) % p)
    return np.concatenate(out)


def recursive_doubling_allreduce(comm, x):
    acc, k = x.copy(), 1
    while k < comm.size:
        comm.send(acc, comm.rank ^ k)
        acc = acc + comm.recv(comm.rank ^ k)
        k *= 2
    return acc


def _sim(fn, p, data):
    return cluster.run(lambda comm: fn(comm, data[comm.rank]), p, backend="sim",
                       network=cluster.Network(ALPHA, BETA), timeout=60)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 4, 8])
def test_simulated_ring_allreduce_time_and_bytes_equal_the_closed_form(p):
    data = np.random.default_rng(p).normal(size=(p, 24 * p))
    res = _sim(ring_allreduce, p, data)
    for v in res.values:
        np.testing.assert_allclose(v, data.sum(axis=0), rtol=1e-12)
    nbytes = data[0].nbytes
    assert res.sim_time == pytest.approx(collective_time("ring_allreduce", nbytes, p, ALPHA, BETA), rel=1e-9)
    assert max(s.bytes_sent for s in res.stats) == collective_bytes_per_rank("ring_allreduce", nbytes, p)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 5, 8])
def test_simulated_binomial_broadcast_time_and_bytes_equal_the_closed_form(p):
    data = np.zeros((p, 100), dtype=np.float32)
    data[0] = np.arange(100)
    res = _sim(binomial_broadcast, p, data)
    for v in res.values:
        np.testing.assert_array_equal(v, data[0])
    nbytes = data[0].nbytes
    assert res.sim_time == pytest.approx(collective_time("broadcast", nbytes, p, ALPHA, BETA), rel=1e-9)
    assert max(s.bytes_sent for s in res.stats) == collective_bytes_per_rank("broadcast", nbytes, p)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name,fn,p", [("all_to_all", pairwise_all_to_all, 4),
                                       ("all_to_all", pairwise_all_to_all, 5),
                                       ("recursive_doubling_allreduce", recursive_doubling_allreduce, 8)])
def test_simulated_collective_time_equals_the_closed_form(name, fn, p):
    data = np.random.default_rng(0).normal(size=(p, 10 * p))
    res = _sim(fn, p, data)
    for r, v in enumerate(res.values):
        if name == "all_to_all":  # rank r ends with block r of every rank, in rank order
            np.testing.assert_array_equal(v, np.concatenate([np.array_split(data[q], p)[r] for q in range(p)]))
        else:
            np.testing.assert_allclose(v, data.sum(axis=0), rtol=1e-12)
    assert res.sim_time == pytest.approx(collective_time(name, data[0].nbytes, p, ALPHA, BETA), rel=1e-9)


# ---- roofline ---------------------------------------------------------------------------------
def test_roofline_is_min_of_compute_and_memory_roofs_and_bends_at_the_ridge():
    peak, bw = 100e12, 2e12
    assert perf.ridge_point(peak, bw) == 50.0
    np.testing.assert_allclose(perf.roofline([1.0, 50.0, 1000.0], peak, bw), [2e12, 100e12, 100e12])
    assert perf.roofline(0.0, peak, bw) == 0.0


# ---- timing harness -----------------------------------------------------------------------------
class ScriptedWork:
    """A callable whose duration on a fake clock is scripted, so timings are known exactly."""

    def __init__(self, durations):
        self.durations, self.calls, self.now, self.seen = list(durations), 0, 0.0, []

    def clock(self):
        return self.now

    def __call__(self, *args, **kwargs):
        self.seen.append((args, kwargs))
        self.now += self.durations[self.calls]
        self.calls += 1


def test_measure_runs_warmup_plus_repeats_and_reports_scripted_times():
    work = ScriptedWork([1.0, 1.0, 0.003, 0.001, 0.005, 0.002, 0.004])
    t = measure(work, 7, warmup=2, repeats=5, timer=work.clock, key="v")
    assert work.calls == 7 and work.seen[0] == ((7,), {"key": "v"})
    np.testing.assert_allclose(t.times, [0.003, 0.001, 0.005, 0.002, 0.004], rtol=1e-9)
    assert t.median == pytest.approx(0.003) and t.mean == pytest.approx(0.003) and t.min == pytest.approx(0.001)
    assert t.iqr == pytest.approx(0.002) and t.std == pytest.approx(math.sqrt(2.5) * 1e-3)
    lo, hi = t.ci95
    assert t.min <= lo <= t.median <= hi <= max(t.times) and lo < hi and t.ci95 == (lo, hi)
    assert str(t) == "3 ms ± 1.58 ms (median of 5, IQR 2 ms)"


def test_measure_with_the_real_clock_returns_one_time_per_repeat():
    calls = []
    t = measure(calls.append, 1, warmup=0, repeats=3)
    assert len(calls) == 3 and len(t.times) == 3 and all(x >= 0 for x in t.times)
    single = perf.Timing((0.5,))
    assert single.std == 0.0 and single.ci95 == (0.5, 0.5)


# ---- scaling and cost ------------------------------------------------------------------------
def test_scaling_table_rows_are_sorted_and_relative_to_smallest_p():
    rows = perf.scaling_table({4: 3.0, 1: 10.0, 2: 5.0})
    assert [r["p"] for r in rows] == [1, 2, 4]
    assert rows[2] == {"p": 4, "time": 3.0, "speedup": pytest.approx(10 / 3), "efficiency": pytest.approx(10 / 12)}
    no_one = perf.scaling_table({2: 10.0, 4: 6.0})
    assert no_one[0]["speedup"] == 1.0 and no_one[0]["efficiency"] == 1.0
    assert no_one[1]["efficiency"] == pytest.approx((10 / 6) * 2 / 4)
    serial = perf.scaling_table({2: 10.0, 4: 6.0}, baseline=18.0)
    assert serial[1]["speedup"] == pytest.approx(3.0) and serial[1]["efficiency"] == pytest.approx(0.75)


def test_run_cost_is_price_times_workers_times_hours():
    assert perf.run_cost(2.0, 4, 1800) == pytest.approx(4.0)
    assert perf.run_cost(3.0, 8, 0) == 0.0


# ---- every ValueError is one readable line ---------------------------------------------------------
BAD = [
    (lambda: perf.speedup(0, 1), "t1 must be > 0"),
    (lambda: perf.efficiency(1, -2, 2), "tp must be > 0"),
    (lambda: perf.efficiency(1, 1, 0), "must be >= 1"),
    (lambda: perf.efficiency(1, 1, 1.5), "whole number"),
    (lambda: perf.amdahl_speedup(1.2, 4), r"serial_fraction .* \[0, 1\]"),
    (lambda: perf.gustafson_speedup(-0.1, 4), r"\[0, 1\]"),
    (lambda: perf.karp_flatt(2.0, 1), "must be >= 2"),
    (lambda: perf.straggler_step_time([]), "times is empty"),
    (lambda: perf.straggler_step_time(1.0), "one time per worker"),
    (lambda: perf.expected_max_normal(1.0, -1.0, 4), "sigma must be >= 0"),
    (lambda: collective_time("allreduce", 8, 4, 1, 1), "unknown collective 'allreduce': choose one of broadcast"),
    (lambda: collective_time("broadcast", -8, 4, 1, 1), "nbytes must be >= 0"),
    (lambda: collective_bytes_per_rank("ring_allreduce", 8, 0), "must be >= 1"),
    (lambda: collective_time("broadcast", 8, 4, float("nan"), 1), "alpha must be finite"),
    (lambda: perf.crossover_bytes(1e-6, 0), "beta must be > 0"),
    (lambda: fit_alpha_beta([8, 8, 8], [1, 2, 3]), "at least 2 distinct message sizes"),
    (lambda: fit_alpha_beta([8, 16], [1, 2, 3]), "one time per size"),
    (lambda: fit_alpha_beta("abc", [1]), "nbytes must be a number"),
    (lambda: perf.roofline(1.0, 0, 1), "peak_flops must be > 0"),
    (lambda: perf.ridge_point(1, -1), "peak_bandwidth must be > 0"),
    (lambda: measure(lambda: None, repeats=0), "repeats must be a whole number >= 1"),
    (lambda: measure(lambda: None, warmup=-1), "warmup must be a whole number >= 0"),
    (lambda: measure(42), "needs a callable"),
    (lambda: perf.Timing(()), "at least one"),
    (lambda: perf.scaling_table({}), "non-empty dict"),
    (lambda: perf.scaling_table({0: 1.0}), "worker counts"),
    (lambda: perf.scaling_table({1: 0.0}), "seconds"),
    (lambda: perf.run_cost(-1, 2, 3), "price_per_hour must be >= 0"),
]


@pytest.mark.parametrize("call,message", BAD)
def test_bad_input_raises_one_readable_line(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


# ---- plots ----------------------------------------------------------------------------------------
@pytest.fixture
def agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plot_roofline_draws_the_roof_and_puts_points_on_it(agg):
    peak, bw = 100e12, 2e12
    ax = perf.plot_roofline(peak, bw, points={"axpy": 1 / 12, "gemm": 500.0})
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    roof = ax.lines[0]
    assert max(roof.get_ydata()) == pytest.approx(peak)
    marks = {ln.get_label().split(" ")[0]: ln for ln in ax.lines if ln.get_label().startswith(("axpy", "gemm"))}
    assert marks["axpy"].get_ydata()[0] == pytest.approx(bw / 12)
    assert marks["gemm"].get_ydata()[0] == pytest.approx(peak)
    texts = [t.get_text() for t in ax.texts]
    assert "memory-bound" in texts and "compute-bound" in texts


def test_plot_scaling_draws_speedup_ideal_and_efficiency(agg):
    times = {1: 10.0, 2: 5.5, 4: 3.2, 8: 2.0}
    ax = perf.plot_scaling(times, title="sweep")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [1.0, 10 / 5.5, 10 / 3.2, 5.0])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [1, 2, 4, 8])
    (twin,) = [a for a in ax.figure.axes if a is not ax]
    np.testing.assert_allclose(twin.lines[0].get_ydata(), [1.0, 10 / 11, 10 / 12.8, 10 / 16])
    assert ax.get_title() == "sweep"
