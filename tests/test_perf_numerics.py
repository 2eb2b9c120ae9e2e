"""Floating-point summation (Appendix A): every sum against math.fsum with explicit bounds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai.perf import numerics as nm

DTYPES = [np.float16, np.float32, np.float64]
U = {np.float16: 2.0 ** -11, np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}
LENGTHS = [1, 2, 3, 5, 64, 1000]


def data(n: int, dtype, seed: int = 0, signed: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, n) if signed else rng.uniform(0, 1, n)).astype(dtype)


def gamma(m: float, u: float) -> float:
    """Higham's gamma_m = m u / (1 - m u): the rounding factor of m operations."""
    return math.inf if m * u >= 1 else m * u / (1 - m * u)


def abs_sum(x: np.ndarray) -> float:
    return math.fsum(np.abs(x.astype(np.float64)).tolist())


def halves(x: np.ndarray):
    """Recursive halving, the textbook pairwise sum: the reference tree for n a power of two."""
    if x.size == 1:
        return x[0]
    m = x.size // 2
    return halves(x[:m]) + halves(x[m:])


def test_unit_roundoff_is_half_the_machine_epsilon():
    for dt in DTYPES:
        assert nm.unit_roundoff(dt) == U[dt]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("signed", [True, False])
def test_naive_pairwise_and_kahan_sums_are_within_their_bounds_of_fsum(dtype, signed):
    u = U[dtype]
    for n in LENGTHS:
        x = data(n, dtype, seed=n, signed=signed)
        exact, S = nm.exact_sum(x), abs_sum(x)
        assert abs(float(nm.naive_sum(x)) - exact) <= gamma(n - 1, u) * S
        assert abs(float(nm.pairwise_sum(x)) - exact) <= gamma(math.ceil(math.log2(n)), u) * S
        assert abs(float(nm.kahan_sum(x)) - exact) <= (2 * u + 2 * n * u * u) * S
        for method in ("naive", "pairwise", "kahan"):  # the library's bound is never below the error
            assert abs(float(getattr(nm, f"{method}_sum")(x)) - exact) <= nm.sum_error_bound(x, method)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_sum_keeps_the_dtype_it_was_given(dtype):
    x = data(7, dtype)
    for f in (nm.naive_sum, nm.pairwise_sum, nm.kahan_sum):
        assert f(x).dtype == np.dtype(dtype)
    assert nm.tree_sum(x, 3).dtype == np.dtype(dtype)
    assert nm.naive_sum(x.astype(np.float64), dtype=dtype).dtype == np.dtype(dtype)


def test_pairwise_sum_is_recursive_halving_bit_for_bit_when_n_is_a_power_of_two():
    for n in (1, 2, 4, 64, 1024):
        x = data(n, np.float32, seed=n)
        assert nm.pairwise_sum(x) == halves(x)


def test_compensation_recovers_what_the_naive_sum_drops():
    # 1 followed by 10^4 values each below float32's half-ulp at 1: the naive sum never moves
    x = np.array([1.0] + [1e-8] * 10_000, dtype=np.float32)
    exact = nm.exact_sum(x)
    assert nm.naive_sum(x) == np.float32(1.0)
    assert abs(float(nm.kahan_sum(x)) - exact) <= 2 * U[np.float32] * abs_sum(x)
    assert abs(float(nm.pairwise_sum(x)) - exact) <= 14 * U[np.float32] * abs_sum(x)  # ceil(log2 10001) = 14


def test_counting_to_4000_in_float16_stalls_at_2048_unless_compensated():
    ones = np.ones(4000, dtype=np.float16)
    assert nm.naive_sum(ones) == 2048  # 2048 + 1 rounds back to 2048 (spacing 2 there, ties to even)
    assert nm.kahan_sum(ones) == 4000 and nm.pairwise_sum(ones) == 4000


@pytest.mark.parametrize("dtype", DTYPES)
def test_tree_and_ring_sums_are_within_their_bound_for_every_K_and_root(dtype):
    u = U[dtype]
    for n in (1, 5, 100):
        x = data(n, dtype, seed=100 + n)
        exact, S = nm.exact_sum(x), abs_sum(x)
        for K in (1, 2, 3, 5, n + 3):  # K > n: some workers hold an empty shard
            per_shard = max(math.ceil(n / K) - 1, 0)
            for order, depth in (("ring", K - 1), ("tree", math.ceil(math.log2(K)))):
                for first in range(K):
                    got = nm.tree_sum(x, K, order=order, first=first)
                    assert abs(float(got) - exact) <= gamma(per_shard + depth, u) * S, (n, K, order, first)
                    assert abs(float(got) - exact) <= nm.sum_error_bound(x, "tree", K=K, order=order)


def test_one_shard_is_the_naive_sum_and_the_ring_adds_the_rotated_partials_in_turn():
    x = data(1000, np.float32, seed=3)
    assert nm.tree_sum(x, 1, order="ring") == nm.naive_sum(x) == nm.tree_sum(x, 1, order="tree")
    K, first = 5, 2
    partials = [nm.naive_sum(s) for s in np.array_split(x, K)]
    s = partials[first]
    for k in list(range(first + 1, K)) + list(range(first)):
        s = s + partials[k]
    assert nm.tree_sum(x, K, order="ring", first=first) == s


def test_the_same_float32_shards_in_other_orders_give_other_bits():
    x = data(1000, np.float32, seed=11, signed=False)
    results = {float(nm.tree_sum(x, K, order=o, first=f)) for K in (1, 2, 3, 5, 8)
               for o in ("ring", "tree") for f in range(K)}
    assert len(results) > 1  # addition is not associative
    spread = max(results) - min(results)
    assert spread <= 2 * gamma(1000, U[np.float32]) * abs_sum(x)


def test_naive_variance_cancels_catastrophically_and_two_pass_does_not():
    rng = np.random.default_rng(5)
    x = (1e4 + rng.standard_normal(10_000)).astype(np.float32)
    true = float(np.var(x.astype(np.float64)))
    naive = abs(float(nm.naive_variance(x)) - true) / true
    two_pass = abs(float(nm.two_pass_variance(x)) - true) / true
    assert naive > 0.1, naive
    assert two_pass < 1e-4, two_pass


def test_empty_input_sums_to_zero_and_exact_sum_is_fsum():
    for f in (nm.naive_sum, nm.pairwise_sum, nm.kahan_sum):
        assert f(np.array([], dtype=np.float32)) == 0
    assert nm.tree_sum(np.array([], dtype=np.float64), 3) == 0
    assert nm.exact_sum([1e16, 1.0, -1e16]) == 1.0


@pytest.mark.parametrize("call, message", [
    (lambda: nm.naive_sum(np.arange(3)), "dtype=np.float32"),
    (lambda: nm.kahan_sum([1.0, np.inf]), "finite"),
    (lambda: nm.tree_sum([1.0, 2.0], 0), "K >= 1"),
    (lambda: nm.tree_sum([1.0, 2.0], 2, order="star"), "'ring' or 'tree'"),
    (lambda: nm.tree_sum([1.0, 2.0], 2, first=2), "0..1"),
    (lambda: nm.sum_error_bound([1.0], "magic"), "method must be"),
    (lambda: nm.unit_roundoff(np.int32), "float16, float32 or float64"),
])
def test_bad_input_is_one_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
