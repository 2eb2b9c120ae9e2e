"""MinHash signatures of shingle sets, the first half of near-duplicate detection (Chapter 36, Section 2).

A page becomes the set S of its word k-shingles (k consecutive lower-case words), each hashed to 64
bits (the first 8 bytes of SHA-1, little-endian). For sets A and B, Jaccard J = |A & B| / |A | B|.
Permutation p of num_perm: h_p(x) = a_p fmix(x) + b_p mod 2^w with a_p odd (a bijection on w-bit words;
fmix is MurmurHash3's finalizer), and sig_p(S) = min over x in S of h_p(x); P(sig_p(A) = sig_p(B)) = J.
w = 32 or 64: datasketch's "affine32" and "affine64" schemes, bit for bit. ``dedup`` bands these
signatures (LSH) and verifies the candidates.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Sequence

import numpy as np

_WIDTH = {np.dtype(np.uint32): 32, np.dtype(np.uint64): 64}
_FMIX = {32: (16, 0x85EBCA6B, 13, 0xC2B2AE35, 16), 64: (33, 0xFF51AFD7ED558CCD, 33, 0xC4CEB9FE1A85EC53, 33)}


def clean(text: str, boilerplate: set[str] | frozenset[str] = frozenset()) -> str:
    """Drop the lines found in ``boilerplate`` (compared stripped) and empty lines; collapse spaces."""
    lines = (" ".join(ln.split()) for ln in text.splitlines())
    return "\n".join(ln for ln in lines if ln and ln not in boilerplate)


def shingles(text: str, k: int = 5) -> list[str]:
    """The distinct word k-shingles of the lower-cased text, in first-seen order (a text of fewer than
    k words is one shingle of all its words; no words, no shingles)."""
    if int(k) != k or k < 1:
        raise ValueError(f"shingle length k must be an integer >= 1, got {k!r}")
    words = re.findall(r"[a-z0-9]+", text.lower())
    grams = [" ".join(words[i:i + k]) for i in range(max(1, len(words) - k + 1))] if words else []
    return list(dict.fromkeys(grams))


def hash_shingles(grams: Sequence[str]) -> np.ndarray:
    """Sorted distinct 64-bit hashes: the first 8 bytes of SHA-1 of the UTF-8 shingle, little-endian
    (datasketch's sha1_hash64; its sha1_hash32 is the low 32 bits of the same value)."""
    h = np.fromiter((int.from_bytes(hashlib.sha1(g.encode()).digest()[:8], "little") for g in grams),
                    dtype=np.uint64, count=len(grams))
    return np.unique(h)


def shingle_set(text: str, k: int = 5) -> np.ndarray:
    """``hash_shingles(shingles(text, k))``: a page as a sorted uint64 set."""
    return hash_shingles(shingles(text, k))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A & B| / |A | B| of two sorted distinct arrays; two empty sets are identical (1.0)."""
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def _dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _WIDTH:
        raise ValueError(f"signature dtype must be uint32 or uint64, got {dt}")
    return dt


def permutations(num_perm: int, seed: int = 1, dtype: Any = np.uint32) -> np.ndarray:
    """(2, num_perm) array of (a, b), a odd: the affine permutations h -> a h + b mod 2^w."""
    dt = _dtype(dtype)
    if int(num_perm) != num_perm or num_perm < 1:
        raise ValueError(f"num_perm must be an integer >= 1, got {num_perm!r}")
    rng = np.random.default_rng(seed)
    w = _WIDTH[dt]
    a = rng.integers(0, 2 ** (w - 1), size=int(num_perm), dtype=np.uint64).astype(dt) * dt.type(2) + dt.type(1)
    b = rng.integers(0, 2 ** w - 1, size=int(num_perm), dtype=np.uint64, endpoint=True).astype(dt)
    return np.stack([a, b])


def _fmix(h: np.ndarray, w: int) -> np.ndarray:
    s1, m1, s2, m2, s3 = (h.dtype.type(c) for c in _FMIX[w])
    h = h ^ (h >> s1)
    h = h * m1
    h = h ^ (h >> s2)
    h = h * m2
    return h ^ (h >> s3)


def minhash(hashes: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """sig_p = min over the set of a_p fmix(x) + b_p (mod 2^w); the empty set gives 2^w - 1 everywhere."""
    dt = _dtype(perms.dtype)
    w = _WIDTH[dt]
    if len(hashes) == 0:
        return np.full(perms.shape[1], np.iinfo(dt).max, dtype=dt)
    x = _fmix(np.asarray(hashes, dtype=np.uint64).astype(dt), w)  # uint32: the low 32 bits
    with np.errstate(over="ignore"):
        return (x[:, None] * perms[0][None, :] + perms[1][None, :]).min(axis=0)


def signatures(sets: Sequence[np.ndarray], perms: np.ndarray) -> np.ndarray:
    """(n, num_perm) signatures of the sets (dtype of ``perms``)."""
    out = np.empty((len(sets), perms.shape[1]), dtype=perms.dtype)
    for i, s in enumerate(sets):
        out[i] = minhash(s, perms)
    return out


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """The share of equal signature entries: an unbiased estimate of J."""
    return float(np.mean(np.asarray(sig_a) == np.asarray(sig_b)))
