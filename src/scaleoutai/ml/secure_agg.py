"""Secure aggregation with double masking and Shamir-shared secrets (Chapter 14; Bonawitz et al., CCS 2017).

Encoding: fixed point in the ring Z_{2^32}. x -> round(x 2^f) mod 2^32 as uint32 (two's complement), so
uint32 addition wraps exactly and the sum of the encodings decodes to the sum of the rounded inputs as
long as |sum| < 2^31 / 2^f. All equalities below are exact in the encoding.

Protocol on K ranks: rank 0 is the server, ranks 1..n (n = K - 1) are the clients, t is the threshold.
1. Pair seeds. Every pair of clients i < j agrees a seed s_ij (256 bits): here i draws it and sends it
   to j directly (the server never sees it).
2. Shares. Client i draws a self-mask seed b_i and Shamir-shares, t-of-n over F_p (``shamir``), both b_i
   and its pair-seed secret (the list of its s_ij, j != i); client j gets the shares at x = j.
3. Masked input. Client i sends
       y_i = enc(x_i) + PRG(b_i) + sum_{j > i} PRG(s_ij) - sum_{j < i} PRG(s_ij)   (mod 2^32).
   Each y_i alone is uniform on Z_{2^32}^d whatever x_i; the pair masks cancel in sum_i y_i.
4. Unmasking. The clients whose y arrived by the deadline are the survivors U, the others are dropped, D.
   The server sends D to every survivor; each survivor answers with its shares of b_j for every j in U
   and of the pair secret of every j in D, never both for one client. From any t answers the server
   rebuilds b_j (j in U) and removes PRG(b_j), rebuilds s_dj (d in D) and removes the dangling pair
   masks, and outputs sum_{i in U} enc(x_i) exactly.
Invariant: for no client does the server ever hold t shares of both secrets, so a late y_d of a client
declared dropped stays masked by PRG(b_d); and the round succeeds iff |U| >= t and at least t survivors
answer in step 4 (survivors may drop during unmasking). Fewer is a RuntimeError that says so.

Still simplified, stated: there is no key agreement and no encryption. The pair seeds and self seeds
come from a seeded PRG (``pair_seed``, ``self_seed``: a trusted dealer, so runs repeat); the real protocol
derives s_ij by Diffie-Hellman and Shamir-shares one secret key instead of the list of pair seeds, and the
shares travel through the server encrypted for their recipient, where here each share is a counted
message addressed to its client. All clients finish steps 1-2 (a client that crashes during them ends
the run); a client drops in step 3 either by ``drop=True`` (it sends an empty vector: the server's
deadline expiring) or by a crash fault (``PeerCrashedError`` at the server, on the simulator). The
server is honest-but-curious: it follows the protocol (the malicious-server version adds signatures and
a consistency round).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..errors import PeerCrashedError
from .shamir import field_to_words, reconstruct, split, words_to_field

__all__ = ["FRAC_BITS", "encode", "decode", "prg", "pair_seed", "self_seed", "default_threshold", "mask",
           "reference_secure_sum", "secure_client", "secure_aggregate", "run_secure_aggregation"]

FRAC_BITS = 16
_SEED_WORDS = 4  # a seed is 4 uint64 words (256 bits)
_SEED_ELEMS = 2 * _SEED_WORDS  # ... and 8 field elements of 32 bits when secret-shared


def encode(x: np.ndarray, frac_bits: int = FRAC_BITS) -> np.ndarray:
    """round(x 2^f) mod 2^32 as uint32; a value outside [-2^31, 2^31) / 2^f is a ValueError."""
    q = np.round(np.asarray(x, dtype=np.float64) * 2.0 ** frac_bits)
    if q.size and (not np.all(np.isfinite(q)) or q.min() < -2 ** 31 or q.max() >= 2 ** 31):
        raise ValueError(f"values must be finite and within +-{2 ** (31 - frac_bits)} to fit {frac_bits} "
                         "fractional bits in 32; lower frac_bits or scale the inputs")
    return q.astype(np.int64).astype(np.uint32)


def decode(u: np.ndarray, frac_bits: int = FRAC_BITS) -> np.ndarray:
    """The signed value of each uint32 word, divided by 2^f."""
    return np.asarray(u, dtype=np.uint32).view(np.int32).astype(np.float64) / 2.0 ** frac_bits


def prg(seed: np.ndarray, n: int) -> np.ndarray:
    """n pseudorandom uint32 words expanded from a seed (NumPy's PCG64, keyed by the seed's words)."""
    return np.random.default_rng([int(s) for s in seed]).integers(0, 2 ** 32, size=n, dtype=np.uint32)


def pair_seed(session: int, i: int, j: int) -> np.ndarray:
    """The seed client i draws for the pair (i, j). Deterministic in ``session`` so runs repeat; a
    deployment derives it by key agreement (Diffie-Hellman)."""
    return np.random.default_rng([session, i, j, 7]).integers(0, 2 ** 63, size=_SEED_WORDS, dtype=np.uint64)


def self_seed(session: int, i: int) -> np.ndarray:
    """Client i's self-mask seed b_i (256 bits). Deterministic in ``session``; a deployment draws it from
    the OS (``secrets``)."""
    return np.random.default_rng([session, i, 0, 8]).integers(0, 2 ** 63, size=_SEED_WORDS, dtype=np.uint64)


def default_threshold(n: int) -> int:
    """t = floor(n/2) + 1: a majority of the n clients is needed to unmask (and suffices)."""
    return n // 2 + 1


def mask(enc: np.ndarray, me: int, seeds: dict[int, np.ndarray], self_mask: np.ndarray | None = None
         ) -> np.ndarray:
    """y = enc + PRG(b) + sum_{j > me} PRG(s_j) - sum_{j < me} PRG(s_j), uint32 arithmetic mod 2^32.

    ``self_mask`` is the seed b (None: no self-mask, the single-masking scheme)."""
    y = np.array(enc, dtype=np.uint32, copy=True).reshape(-1)
    if self_mask is not None:
        y = y + prg(self_mask, y.size)
    for j in sorted(seeds):
        m = prg(seeds[j], y.size)
        y = y + m if j > me else y - m
    return y.reshape(np.shape(enc))


def reference_secure_sum(xs: list[np.ndarray], survivors: list[int], frac_bits: int = FRAC_BITS
                         ) -> np.ndarray:
    """What the server must output: the encoded sum (uint32) of the survivors' encoded inputs."""
    total = np.zeros(np.shape(xs[0]), dtype=np.uint32)
    for i in survivors:
        total = total + encode(xs[i], frac_bits)
    return total


def secure_client(comm: Comm, x: np.ndarray, frac_bits: int, drop: bool, session: int, t: int) -> None:
    """Client rank: pair seeds, t-of-n shares of b_i and of its pair seeds, y_i, then its shares for unmasking."""
    K, r = comm.size, comm.rank
    enc = encode(x, frac_bits)
    seeds = {j: pair_seed(session, r, j) for j in range(r + 1, K)}
    for j, s in seeds.items():  # step 1: pair seeds (stands in for key agreement)
        comm.send(s, j)
    for i in range(1, r):
        seeds[i] = comm.recv(i)
    b = self_seed(session, r)  # step 2: t-of-n shares of b_i and of the pair-seed secret
    pair_words = np.concatenate([np.zeros(0, np.uint64)] + [seeds[j] for j in sorted(seeds)])
    secret = np.concatenate([words_to_field(b), words_to_field(pair_words)])
    shares = split(secret, K - 1, t, np.random.default_rng([session, r, 11]))
    held = {r: shares[r - 1]}
    for j in range(1, K):
        if j != r:
            comm.send(shares[j - 1], j)  # the real protocol: encrypted for j, relayed by the server
    for j in range(1, K):
        if j != r:
            held[j] = comm.recv(j)
    if drop:  # step 3: the deadline passes without this client's vector
        comm.send(np.zeros(0, np.uint32), 0)
        return
    comm.send(mask(enc, r, seeds, b).reshape(-1), 0)
    gone = {int(j) for j in comm.recv(0)}  # step 4: b-shares of survivors, pair-shares of the dropped
    comm.send(np.concatenate([held[j][:_SEED_ELEMS] for j in range(1, K) if j not in gone]
                             + [held[j][_SEED_ELEMS:] for j in sorted(gone)]).astype(np.uint64), 0)


def secure_aggregate(comm: Comm, x: np.ndarray | None, frac_bits: int = FRAC_BITS, drop: bool = False,
                     session: int = 0, threshold: int | None = None) -> dict[str, Any] | None:
    """Per rank: clients (ranks >= 1) mask and send x; the server (rank 0) returns the exact survivors' sum.

    The server returns {"sum": encoded uint32 sum, "value": decoded sum, "survivors", "dropped",
    "responders" (client ranks that answered the unmasking round), "seen" ({rank: masked vector}),
    "self_seeds" ({j in U: b_j}) and "pair_seeds" ({d in D: {j: s_dj}}) it rebuilt, and "shares"
    ({client: (self-seed shares, pair-secret shares) the server received})}; clients return None.
    ``threshold`` is t (default ``default_threshold(K - 1)``). On the server ``x`` only gives the shape.
    """
    K, r = comm.size, comm.rank
    n_clients = K - 1
    t = default_threshold(n_clients) if threshold is None else int(threshold)
    if not 1 <= t <= max(1, n_clients):
        raise ValueError(f"the threshold t must be in 1..{n_clients} (the number of clients), got {threshold!r}")
    if r != 0:
        secure_client(comm, x, frac_bits, drop, session, t)
        return None
    shape = np.shape(x)
    n = int(np.prod(shape))
    seen: dict[int, np.ndarray] = {}
    dropped = []
    for i in range(1, K):
        try:
            y = comm.recv(i)
        except PeerCrashedError:
            dropped.append(i)
            continue
        if y.size == 0:
            dropped.append(i)
        elif y.dtype != np.uint32 or y.size != n:
            raise ValueError(f"client {i} sent {y.dtype}{list(y.shape)}, expected uint32[{n}]")
        else:
            seen[i] = y
    survivors = sorted(seen)
    if len(survivors) < t:
        raise RuntimeError(f"only {len(survivors)} of {n_clients} clients sent a masked vector; the round "
                           f"needs at least t = {t} survivors to unmask the sum, so it is abandoned")
    total = np.zeros(n, dtype=np.uint32)
    for i in survivors:
        total = total + seen[i]
    width = len(survivors) * _SEED_ELEMS + len(dropped) * (n_clients - 1) * _SEED_ELEMS
    for i in survivors:
        comm.send(np.array(dropped, dtype=np.int64), i)
    answers: dict[int, np.ndarray] = {}
    for i in survivors:
        try:
            a = comm.recv(i)
        except PeerCrashedError:
            continue  # a survivor that drops during unmasking: its input stays in the sum, its shares are lost
        if a.dtype != np.uint64 or a.size != width:
            raise ValueError(f"client {i} answered {a.dtype}{list(a.shape)}, expected uint64[{width}]")
        answers[i] = a
    if len(answers) < t:
        raise RuntimeError(f"only {len(answers)} of the {len(survivors)} survivors answered the unmasking round "
                           f"(ranks {sorted(answers)}); t = {t} shares are needed to remove the masks")
    xs = sorted(answers)
    self_seeds, pair_seeds = {}, {}
    for slot, j in enumerate(survivors):  # self-masks of the survivors
        lo = slot * _SEED_ELEMS
        self_seeds[j] = field_to_words(reconstruct(xs, [answers[i][lo:lo + _SEED_ELEMS] for i in xs], t))
        total = total - prg(self_seeds[j], n)
    base, pair_len = len(survivors) * _SEED_ELEMS, (n_clients - 1) * _SEED_ELEMS
    for slot, d in enumerate(dropped):  # pair masks that the dropped clients left dangling
        lo = base + slot * pair_len
        words = field_to_words(reconstruct(xs, [answers[i][lo:lo + pair_len] for i in xs], t))
        pair_seeds[d] = dict(zip([j for j in range(1, K) if j != d], words.reshape(-1, _SEED_WORDS)))
        for i in survivors:
            m = prg(pair_seeds[d][i], n)
            total = total - m if d > i else total + m  # undo what i added (d > i) or subtracted (d < i)
    shares = {j: (len(xs) if j in survivors else 0, len(xs) if j in dropped else 0) for j in range(1, K)}
    return {"sum": total.reshape(shape), "value": decode(total, frac_bits).reshape(shape),
            "survivors": survivors, "dropped": dropped, "responders": xs, "seen": seen,
            "self_seeds": self_seeds, "pair_seeds": pair_seeds, "shares": shares}


def run_secure_aggregation(xs: list[np.ndarray], drop: tuple[int, ...] = (), backend: str = "sim",
                           faults: cluster.Faults | None = None, frac_bits: int = FRAC_BITS, session: int = 0,
                           threshold: int | None = None, timeout: float = 120.0
                           ) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: client c (rank c + 1) holds xs[c]; ``drop`` lists clients (0-based) that drop after the shares."""
    res = cluster.run(_secure_rank, len(xs) + 1, backend=backend,
                      args=(xs, tuple(drop), frac_bits, session, threshold), faults=faults, timeout=timeout)
    return res.values[0], res


def _secure_rank(comm: Comm, xs: list[np.ndarray], drop: tuple[int, ...], frac_bits: int, session: int,
                 threshold: int | None) -> Any:
    x = xs[0] if comm.rank == 0 else xs[comm.rank - 1]
    return secure_aggregate(comm, x, frac_bits, drop=(comm.rank - 1) in drop, session=session,
                            threshold=threshold)
