"""Near-duplicate detection with MinHash and LSH, on one machine and over K ranks (Chapter 36).

A page becomes the set S of its word k-shingles (k consecutive lower-case words), each hashed to 64
bits (the first 8 bytes of SHA-1, little-endian). For sets A and B, Jaccard J = |A & B| / |A | B|.

**MinHash** (Broder 1997; the signatures are in ``minhash``). Permutation p of num_perm:
h_p(x) = a_p fmix(x) + b_p mod 2^w with a_p odd (a bijection on w-bit words; fmix is MurmurHash3's
finalizer), and sig_p(S) = min over x in S of h_p(x).
For a random permutation P(sig_p(A) = sig_p(B)) = J, so the share of equal entries estimates J with
variance J(1 - J) / num_perm. w = 32 keeps uint32 signatures (token hash: the low 32 bits), w = 64
uint64: exactly datasketch's "affine32" and "affine64" schemes, so its MinHash gives the same bits.

**LSH banding.** Cut the signature into b bands of r rows (num_perm = b r); two pages are a candidate
pair when some band is equal in all r rows: P(candidate) = 1 - (1 - J^r)^b, an S-curve whose steepest
point sits near the threshold (1/b)^(1/r). Candidates are then verified by their exact Jaccard, and the
duplicate clusters are the connected components of verified pairs; each cluster keeps its smallest id.

**Distributed** (``dedup``, per rank): sign the shard; shuffle every (band, rows) key to the owner rank
hash(key) mod K (MapReduce's shuffle by key, Chapter 6); each owner pairs the pages in each bucket and
sends each pair to the rank holding its smaller id; that rank fetches the other page's shingles from its
holder and verifies; rank 0 joins the verified pairs into clusters and broadcasts the removed ids. The
result equals ``reference_dedup`` for every K; ``naive_dedup`` is the all-pairs definition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import all_to_all, block_bounds, broadcast
from .minhash import (_fmix, clean, estimate_jaccard, hash_shingles, jaccard, minhash, permutations, shingle_set,
                      shingles, signatures)

__all__ = ["clean", "shingles", "hash_shingles", "shingle_set", "jaccard", "permutations", "minhash",
           "signatures", "estimate_jaccard", "s_curve", "lsh_threshold", "choose_bands", "band_rows",
           "lsh_candidates", "verify", "clusters", "naive_dedup", "reference_dedup", "dedup", "run_dedup",
           "DedupResult"]

def s_curve(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """P(candidate) = 1 - (1 - s^r)^b for a pair of Jaccard s."""
    return 1.0 - (1.0 - np.asarray(s, dtype=float) ** rows) ** bands


def lsh_threshold(bands: int, rows: int) -> float:
    """(1/b)^(1/r): about where the S-curve rises steepest."""
    return (1.0 / bands) ** (1.0 / rows)


def _bands(num_perm: int, bands: int) -> int:
    if int(bands) != bands or bands < 1 or num_perm % bands:
        raise ValueError(f"num_perm={num_perm} must be divisible by bands={bands}: choose b r = num_perm "
                         f"(choose_bands gives one)")
    return num_perm // bands


def choose_bands(num_perm: int, threshold: float) -> tuple[int, int]:
    """The (b, r) with b r = num_perm whose (1/b)^(1/r) is closest to ``threshold``."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must lie in (0, 1), got {threshold!r}")
    pairs = [(b, num_perm // b) for b in range(1, num_perm + 1) if num_perm % b == 0]
    return min(pairs, key=lambda p: abs(lsh_threshold(*p) - threshold))


def band_rows(sigs: np.ndarray, ids: np.ndarray, bands: int) -> np.ndarray:
    """One uint64 row [band, id, v_1..v_r] per (page, band): the keys LSH groups by."""
    n, num_perm = sigs.shape
    r = _bands(num_perm, bands)
    out = np.empty((n * bands, 2 + r), dtype=np.uint64)
    out[:, 0] = np.tile(np.arange(bands, dtype=np.uint64), n)
    out[:, 1] = np.repeat(np.asarray(ids, dtype=np.uint64), bands)
    out[:, 2:] = sigs.reshape(n * bands, r)
    return out


def _bucket_pairs(rows: np.ndarray) -> set[tuple[int, int]]:
    """Pairs of ids that share a bucket (equal band and all r values)."""
    if len(rows) == 0:
        return set()
    key = np.delete(rows, 1, axis=1)
    _, label = np.unique(key, axis=0, return_inverse=True)
    order = np.lexsort((rows[:, 1], label.ravel()))
    label, ids = label.ravel()[order], rows[order, 1].astype(np.int64)
    edges = np.flatnonzero(np.diff(label)) + 1
    pairs: set[tuple[int, int]] = set()
    for start, stop in zip(np.concatenate([[0], edges]), np.concatenate([edges, [len(label)]])):
        if stop - start < 2:
            continue  # a bucket of one page makes no pair
        members = np.unique(ids[start:stop])
        pairs.update((int(a), int(b)) for i, a in enumerate(members) for b in members[i + 1:])
    return pairs


def lsh_candidates(sigs: np.ndarray, bands: int, ids: np.ndarray | None = None) -> set[tuple[int, int]]:
    """Pairs (i < j) equal in at least one band: the single-machine LSH index."""
    ids = np.arange(len(sigs)) if ids is None else np.asarray(ids)
    return _bucket_pairs(band_rows(sigs, ids, bands))


def verify(pairs: Sequence[tuple[int, int]], sets: dict[int, np.ndarray] | Sequence[np.ndarray],
           threshold: float) -> set[tuple[int, int]]:
    """The pairs whose exact Jaccard is at least ``threshold``."""
    return {(i, j) for i, j in pairs if jaccard(sets[i], sets[j]) >= threshold}


def clusters(n_or_ids: int | Sequence[int], pairs: Sequence[tuple[int, int]]) -> dict[int, int]:
    """Union-find over the pairs: id -> the smallest id of its connected component."""
    ids = range(n_or_ids) if isinstance(n_or_ids, (int, np.integer)) else n_or_ids
    parent = {int(i): int(i) for i in ids}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in sorted(pairs):
        a, b = find(int(i)), find(int(j))
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {i: find(i) for i in parent}


@dataclass
class DedupResult:
    """kept / removed ids (sorted), candidate and verified pairs, and per-rank counts."""

    kept: np.ndarray
    removed: np.ndarray
    candidates: set[tuple[int, int]]
    verified: set[tuple[int, int]]
    stats: list[dict[str, int]] | None = None
    run: Any = None


def _result(ids: Sequence[int], candidates: set, verified: set, **extra: Any) -> DedupResult:
    root = clusters(ids, verified)
    kept = np.array(sorted(i for i, c in root.items() if i == c), dtype=np.int64)
    removed = np.array(sorted(i for i, c in root.items() if i != c), dtype=np.int64)
    return DedupResult(kept, removed, candidates, verified, **extra)


def naive_dedup(sets: Sequence[np.ndarray], threshold: float) -> DedupResult:
    """The definition: exact Jaccard of all n(n-1)/2 pairs (every pair is a candidate)."""
    pairs = {(i, j) for i in range(len(sets)) for j in range(i + 1, len(sets))}
    return _result(range(len(sets)), pairs, verify(pairs, sets, threshold))


def reference_dedup(sets: Sequence[np.ndarray], threshold: float, num_perm: int = 128, bands: int = 32,
                    seed: int = 1, dtype: Any = np.uint32) -> DedupResult:
    """MinHash LSH on one machine: signatures, band buckets, exact verification, clusters."""
    perms = permutations(num_perm, seed, dtype)
    _bands(num_perm, bands)
    cand = lsh_candidates(signatures(sets, perms), bands)
    return _result(range(len(sets)), cand, verify(cand, sets, threshold))


def _pack_sets(sets: list[np.ndarray]) -> np.ndarray:
    """[count, len_1..len_count, values...] as one uint64 array (one message per peer)."""
    lens = np.array([len(s) for s in sets], dtype=np.uint64)
    return np.concatenate([np.array([len(sets)], np.uint64), lens] + [np.asarray(s, np.uint64) for s in sets])


def _unpack_sets(buf: np.ndarray) -> list[np.ndarray]:
    n = int(buf[0])
    lens, out, at = buf[1:1 + n].astype(np.int64), [], 1 + n
    for m in lens:
        out.append(buf[at:at + m])
        at += int(m)
    return out


def dedup(comm: Comm, ids: np.ndarray, sets: Sequence[np.ndarray], threshold: float, num_perm: int = 128,
          bands: int = 32, seed: int = 1, dtype: Any = np.uint32, seconds_per_doc: float = 0.0
          ) -> tuple[np.ndarray, dict[str, Any]]:
    """Per rank: this rank's pages (global ``ids``, shingle ``sets``) in, its keep mask out, plus counts.

    Six ``all_to_all``s and a broadcast: the page ids (a directory of holders: n ids per rank, fine here,
    a key-value service at web scale); band rows to owner hash(band, rows) mod K; candidate pairs to the
    holder of the smaller id; requests for the other page's shingles; the shingles back; verified pairs
    to rank 0, which broadcasts the removed ids. ``seconds_per_doc`` charges the signing on the
    simulator's clock (Section 7)."""
    K, me = comm.size, comm.rank
    ids = np.asarray(ids, dtype=np.int64)
    perms = permutations(num_perm, seed, dtype)
    _bands(num_perm, bands)
    sigs = signatures(sets, perms)
    comm.compute(seconds_per_doc * len(ids))
    # Who holds which page: every rank learns every rank's ids (n int64 per rank).
    holder = {int(i): r for r, got in enumerate(all_to_all(comm, [ids] * K)) for i in got}
    # 1. Shuffle by key: band rows to the owner of their bucket.
    rows = band_rows(sigs, ids, bands)
    key = np.delete(rows, 1, axis=1)
    h = np.full(len(rows), 0x9E3779B97F4A7C15, dtype=np.uint64)
    for c in range(key.shape[1]):
        h = _fmix(h ^ key[:, c], 64)
    owner = (h % np.uint64(K)).astype(np.int64)
    got = all_to_all(comm, [rows[owner == r] for r in range(K)])
    local = _bucket_pairs(np.concatenate(got)) if got else set()
    # 2. Each candidate pair to the holder of its smaller id (dedupes pairs found in several bands).
    out = [[] for _ in range(K)]
    for i, j in local:
        out[holder[i]].append((i, j))
    got = all_to_all(comm, [np.array(sorted(p), dtype=np.int64).reshape(-1, 2) for p in out])
    mine = sorted({(int(i), int(j)) for g in got for i, j in g})
    # 3. Fetch the other page's shingles from its holder, then verify.
    own = {int(i): s for i, s in zip(ids, sets)}
    want = sorted({j for _, j in mine if j not in own})
    asks = all_to_all(comm, [np.array([j for j in want if holder[j] == r], dtype=np.int64) for r in range(K)])
    replies = all_to_all(comm, [_pack_sets([own[int(j)] for j in a]) for a in asks])
    other = dict(own)
    for r, buf in enumerate(replies):
        asked = [j for j in want if holder[j] == r]
        other.update(zip(asked, _unpack_sets(buf)))
    good = sorted(verify(mine, other, threshold))
    # 4. Verified pairs to rank 0; it joins clusters and broadcasts the removed ids.
    got = all_to_all(comm, [np.array(good, dtype=np.int64).reshape(-1, 2) if r == 0
                            else np.zeros((0, 2), np.int64) for r in range(K)])
    removed = None
    if me == 0:
        edges = {(int(i), int(j)) for g in got for i, j in g}
        removed = _result(sorted(holder), set(), edges).removed
    removed = broadcast(comm, removed, root=0)
    stats = {"docs": len(ids), "band_rows_sent": int(np.sum(owner != me)), "candidates": len(mine),
             "fetched": len(want), "verified": len(good), "pairs": mine, "good": good}
    return ~np.isin(ids, removed), stats


def run_dedup(sets: Sequence[np.ndarray], K: int, threshold: float, num_perm: int = 128, bands: int = 32,
              seed: int = 1, dtype: Any = np.uint32, bounds: Sequence[tuple[int, int]] | None = None,
              timeout: float = 120.0, **run_kwargs: Any) -> DedupResult:
    """Driver: rank r holds pages bounds[r] (default ``block_bounds``, uneven or empty); gathers the result."""
    n = len(sets)
    bounds = list(bounds) if bounds is not None else block_bounds(n, K)
    if len(bounds) != K or bounds[0][0] != 0 or bounds[-1][1] != n or any(a[1] != b[0] for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"bounds must be K={K} contiguous (lo, hi) blocks covering 0..{n}, got {bounds}")
    res = cluster.run(_dedup_rank, K, args=(list(sets), bounds, threshold, num_perm, bands, seed, dtype),
                      timeout=timeout, **run_kwargs)
    keep = np.concatenate([v[0] for v in res.values])
    stats = [v[1] for v in res.values]
    cand = {p for s in stats for p in s.pop("pairs")}
    good = {p for s in stats for p in s.pop("good")}
    return DedupResult(np.flatnonzero(keep), np.flatnonzero(~keep), cand, good, stats, res)


def _dedup_rank(comm: Comm, sets: list[np.ndarray], bounds: list[tuple[int, int]], threshold: float,
                num_perm: int, bands: int, seed: int, dtype: Any) -> tuple[np.ndarray, dict[str, Any]]:
    lo, hi = bounds[comm.rank]
    return dedup(comm, np.arange(lo, hi), sets[lo:hi], threshold, num_perm, bands, seed, dtype)
