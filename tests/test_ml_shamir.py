"""Chapter 14: Shamir t-of-n secret sharing over F_p: any t shares reconstruct, t - 1 reveal nothing."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scaleoutai.ml import shamir as sh


@pytest.mark.parametrize("n,t", [(1, 1), (3, 2), (5, 3), (7, 7), (10, 4)])
def test_any_t_shares_reconstruct_the_secret(n, t):
    rng = np.random.default_rng(n * 10 + t)
    secret = rng.integers(0, sh.PRIME, size=6, dtype=np.uint64)
    shares = sh.split(secret, n, t, rng)
    assert shares.shape == (n, 6) and shares.dtype == np.uint64 and np.all(shares < np.uint64(sh.PRIME))
    for subset in itertools.islice(itertools.combinations(range(1, n + 1), t), 40):
        order = list(rng.permutation(subset))  # any t parties, in any order
        got = sh.reconstruct(order, shares[[x - 1 for x in order]], t)
        np.testing.assert_array_equal(got, secret)
    if t < n:  # more than t consistent shares: the first t are used and agree
        np.testing.assert_array_equal(sh.reconstruct(list(range(1, n + 1)), shares, t), secret)


def test_fewer_than_t_shares_are_refused():
    rng = np.random.default_rng(0)
    shares = sh.split(np.array([5, 7], dtype=np.uint64), 5, 3, rng)
    with pytest.raises(ValueError, match="at least t = 3"):
        sh.reconstruct([1, 2], shares[:2], 3)
    with pytest.raises(ValueError, match="distinct"):
        sh.reconstruct([1, 1, 2], shares[[0, 0, 1]], 3)
    with pytest.raises(ValueError, match="1 <= t <= n"):
        sh.split(np.array([1], dtype=np.uint64), 3, 4, rng)
    with pytest.raises(ValueError, match=r"\[0, 7\)"):
        sh.split(np.array([9], dtype=np.uint64), 3, 2, rng, p=7)


def test_reconstruction_is_lagrange_interpolation_at_zero_on_a_small_prime():
    p, t = 13, 3
    coeffs = np.array([[4], [9], [11]], dtype=object)  # f(x) = 4 + 9x + 11x^2 mod 13
    pts = [2, 5, 12]
    vals = np.stack([sh.evaluate(coeffs, x, p) for x in pts])
    assert [int(v[0]) for v in vals] == [(4 + 9 * x + 11 * x * x) % p for x in pts]
    assert int(sh.reconstruct(pts, vals.astype(np.uint64), t, p=p)[0]) == 4
    lam = sh.lagrange_at_zero(pts, p)
    assert sum(lam) % p == 1  # interpolating the constant polynomial 1


@pytest.mark.parametrize("p,t,xs", [(7, 3, (1, 2)), (11, 2, (4,)), (5, 4, (1, 3, 4))])
def test_t_minus_one_shares_are_exactly_uniform_whatever_the_secret(p, t, xs):
    # enumerate every polynomial: for each secret, the t - 1 shares hit each of the p^(t-1) tuples exactly once
    for secret in range(p):
        counts: dict[tuple[int, ...], int] = {}
        for tail in itertools.product(range(p), repeat=t - 1):
            coeffs = np.array([[secret], *[[a] for a in tail]], dtype=object)
            key = tuple(int(sh.evaluate(coeffs, x, p)[0]) for x in xs)
            counts[key] = counts.get(key, 0) + 1
        assert len(counts) == p ** (t - 1) and set(counts.values()) == {1}, secret


def test_t_minus_one_shares_of_split_pass_a_chi_square_uniformity_check():
    p, n, t, draws = 17, 4, 3, 6000
    rng = np.random.default_rng(1)
    secret = np.full(draws, 3, dtype=np.uint64)  # the same secret, shared `draws` times independently
    shares = sh.split(secret, n, t, rng, p=p)  # shape (n, draws)
    pair = shares[0].astype(np.int64) * p + shares[2].astype(np.int64)  # parties 1 and 3 together
    counts = np.bincount(pair, minlength=p * p)
    chi2 = np.sum((counts - draws / p ** 2) ** 2 / (draws / p ** 2))
    assert chi2 < 367.9  # the 99.9th percentile of chi-square(288)


def test_a_256_bit_seed_round_trips_through_field_elements():
    rng = np.random.default_rng(2)
    words = rng.integers(0, 2 ** 63, size=4, dtype=np.uint64) | np.uint64(1 << 63)  # top bits set too
    elems = sh.words_to_field(words)
    assert elems.shape == (8,) and np.all(elems < np.uint64(2 ** 32))
    np.testing.assert_array_equal(sh.field_to_words(elems), words)
    shares = sh.split(elems, 5, 3, rng)
    np.testing.assert_array_equal(sh.field_to_words(sh.reconstruct([5, 1, 3], shares[[4, 0, 2]], 3)), words)
