"""Shamir t-of-n secret sharing over a prime field (Chapter 14, Section 6; Shamir, CACM 1979).

To share a secret s in F_p among n parties, draw a_1..a_{t-1} uniformly from F_p and give party x
(x = 1..n) the value of the polynomial

    f(x) = s + a_1 x + a_2 x^2 + ... + a_{t-1} x^{t-1}   (mod p).

Any t shares determine f (degree t - 1) and so s = f(0), by Lagrange interpolation at 0:

    s = sum_{x in S} f(x) l_x,    l_x = prod_{z in S, z != x} z / (z - x)   (mod p),  |S| = t.

Any t - 1 shares are uniformly distributed on F_p^{t-1} whatever s is: for fixed s, the map from
(a_1..a_{t-1}) to (f(x_1)..f(x_{t-1})) is a bijection (a Vandermonde system), so t - 1 parties learn
nothing. A secret that is a vector is shared element by element with independent coefficients.
The default field is p = 2^61 - 1 (a Mersenne prime); a 256-bit seed is split into eight 32-bit
field elements by ``words_to_field``. Products of two elements need 122 bits, so the arithmetic runs on
Python integers (object arrays): fine for seeds and keys, not meant for model-sized vectors.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PRIME", "evaluate", "split", "lagrange_at_zero", "reconstruct", "words_to_field", "field_to_words"]

PRIME = 2 ** 61 - 1


def evaluate(coeffs: np.ndarray, x: int, p: int = PRIME) -> np.ndarray:
    """f(x) mod p by Horner's rule; ``coeffs`` has shape (t, m): row 0 the secrets, row k the x^k terms."""
    acc = np.zeros(np.shape(coeffs)[1:], dtype=object)
    for row in np.asarray(coeffs, dtype=object)[::-1]:
        acc = (acc * int(x) + row) % p
    return acc


def split(secret: np.ndarray, n: int, t: int, rng: np.random.Generator, p: int = PRIME) -> np.ndarray:
    """The n shares (x = 1..n) of every element of ``secret`` (integers in [0, p)), t of them to reconstruct.

    Returns a uint64 array of shape (n, m): row x - 1 is party x's share of each of the m elements.
    """
    s = np.asarray(secret, dtype=object).reshape(-1)
    if not 1 <= t <= n:
        raise ValueError(f"need 1 <= t <= n, got t={t!r}, n={n!r}")
    if n >= p:
        raise ValueError(f"n = {n} parties need n distinct non-zero points of F_p: choose p > n")
    if s.size and (min(s) < 0 or max(s) >= p):
        raise ValueError(f"secret elements must lie in [0, {p})")
    coeffs = [s] + [np.array([int(v) for v in rng.integers(0, p, size=s.size, dtype=np.uint64)], dtype=object)
                    for _ in range(t - 1)]
    poly = np.stack(coeffs)
    return np.stack([evaluate(poly, x, p) for x in range(1, n + 1)]).astype(np.uint64).reshape(n, s.size)


def lagrange_at_zero(xs: list[int], p: int = PRIME) -> list[int]:
    """l_x = prod_{z != x} z / (z - x) mod p for every x in ``xs`` (distinct, non-zero mod p)."""
    xs = [int(x) % p for x in xs]
    if len(set(xs)) != len(xs) or 0 in xs:
        raise ValueError(f"interpolation points must be distinct and non-zero mod p, got {xs}")
    out = []
    for x in xs:
        num, den = 1, 1
        for z in xs:
            if z != x:
                num, den = num * z % p, den * (z - x) % p
        out.append(num * pow(den, -1, p) % p)
    return out


def reconstruct(xs: list[int], shares: np.ndarray, t: int, p: int = PRIME) -> np.ndarray:
    """The secret (uint64, shape (m,)) from the shares ``shares[i]`` held by parties ``xs[i]``: needs >= t of them.

    Uses the first t; fewer than t is a ValueError (t - 1 shares say nothing about the secret).
    """
    if len(xs) < t:
        raise ValueError(f"{len(xs)} shares cannot reconstruct a {t}-of-n secret: at least t = {t} are needed")
    rows = np.asarray(shares, dtype=np.uint64)[:t].astype(object)
    acc = np.zeros(rows.shape[1:], dtype=object)
    for lam, row in zip(lagrange_at_zero(list(xs)[:t], p), rows):
        acc = (acc + row * lam) % p
    return acc.astype(np.uint64)


def words_to_field(words: np.ndarray) -> np.ndarray:
    """uint64 words -> 32-bit halves (low, high) as field elements < 2^32 < p: a 256-bit seed gives 8."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1)
    return np.stack([w & np.uint64(0xFFFFFFFF), w >> np.uint64(32)], axis=1).reshape(-1)


def field_to_words(elems: np.ndarray) -> np.ndarray:
    """The inverse of ``words_to_field``: pairs (low, high) of 32-bit elements -> uint64 words."""
    e = np.asarray(elems, dtype=np.uint64).reshape(-1, 2)
    if np.any(e >= np.uint64(2 ** 32)):
        raise ValueError("a field element above 2^32 is not half of a word: the shares were inconsistent")
    return e[:, 0] | (e[:, 1] << np.uint64(32))
