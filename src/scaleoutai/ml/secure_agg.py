"""Secure aggregation by pairwise masking, with dropout recovery (Chapter 14; Bonawitz et al. CCS 2017, simplified).

Encoding: fixed point in the ring Z_{2^32}. x -> round(x 2^f) mod 2^32 as uint32 (two's complement), so
uint32 addition wraps exactly and the sum of the encodings decodes to the sum of the rounded inputs as
long as |sum| < 2^31 / 2^f. All equalities below are exact in the encoding.

Protocol on K ranks: rank 0 is the server, ranks 1..K-1 are the clients.
1. Every pair of clients i < j agrees a seed s_ij: here i draws it and sends it to j directly, which
   stands in for a Diffie-Hellman key agreement (the server never sees the seeds in this step).
2. Client i sends y_i = enc(x_i) + sum_{j > i} PRG(s_ij) - sum_{j < i} PRG(s_ij) (mod 2^32). Each y_i
   alone is uniform on Z_{2^32}^d, whatever x_i; the masks cancel in sum_i y_i.
3. Clients that drop before step 2 leave masks dangling. The server tells the survivors who dropped;
   each survivor i reveals s_ij for every dropped j, and the server removes PRG(s_ij) with i's sign.

Simplifications, stated: the real protocol Shamir-shares every client's key t-of-n, so the dropped
clients' masks can be rebuilt even if some survivors drop during recovery, and adds a self-mask b_i
so that a late vector from a "dropped" client cannot be unmasked; here a survivor reveals its own pair
seeds and a survivor that drops during recovery ends the round with an error. A client drops either by
``drop=True`` (it sends an empty vector: the server's deadline expiring) or by a crash fault injected
after its seeds were sent (``PeerCrashedError`` at the server, on the simulator).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..errors import PeerCrashedError

__all__ = ["FRAC_BITS", "encode", "decode", "prg", "pair_seed", "mask", "reference_secure_sum",
           "secure_aggregate", "run_secure_aggregation"]

FRAC_BITS = 16
_SEED_WORDS = 4  # a pair seed is 4 uint64 words (256 bits)


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
    """n pseudorandom uint32 words expanded from a pair seed (Philox, keyed by the seed's words)."""
    return np.random.default_rng([int(s) for s in seed]).integers(0, 2 ** 32, size=n, dtype=np.uint32)


def pair_seed(session: int, i: int, j: int) -> np.ndarray:
    """The seed client i draws for the pair (i, j). Deterministic in ``session`` so runs repeat; a
    deployment draws it from the OS (``secrets``) or derives it by key agreement."""
    return np.random.default_rng([session, i, j, 7]).integers(0, 2 ** 63, size=_SEED_WORDS, dtype=np.uint64)


def mask(enc: np.ndarray, me: int, seeds: dict[int, np.ndarray]) -> np.ndarray:
    """y = enc + sum_{j > me} PRG(s_j) - sum_{j < me} PRG(s_j), uint32 arithmetic mod 2^32."""
    y = np.array(enc, dtype=np.uint32, copy=True).reshape(-1)
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


def secure_aggregate(comm: Comm, x: np.ndarray | None, frac_bits: int = FRAC_BITS, drop: bool = False,
                     session: int = 0) -> dict[str, Any] | None:
    """Per rank: clients (ranks >= 1) mask and send x; the server (rank 0) returns the exact survivors' sum.

    The server returns {"sum": encoded uint32 sum, "value": decoded sum, "survivors": client ranks,
    "dropped": client ranks, "seen": {rank: the masked vector it received}}; clients return None.
    On the server ``x`` only gives the shape (its own value is not summed).
    """
    K, r = comm.size, comm.rank
    if r != 0:
        enc = encode(x, frac_bits)
        seeds = {j: pair_seed(session, r, j) for j in range(r + 1, K)}
        for j, s in seeds.items():
            comm.send(s, j)
        for i in range(1, r):
            seeds[i] = comm.recv(i)
        if drop:
            comm.send(np.zeros(0, np.uint32), 0)
            return None
        comm.send(mask(enc, r, seeds).reshape(-1), 0)
        gone = comm.recv(0)
        comm.send(np.stack([seeds[int(j)] for j in gone]) if len(gone) else np.zeros((0, _SEED_WORDS), np.uint64), 0)
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
    total = np.zeros(n, dtype=np.uint32)
    for i in survivors:
        total = total + seen[i]
    gone = np.array(dropped, dtype=np.int64)
    for i in survivors:
        comm.send(gone, i)
    for i in survivors:
        try:
            revealed = comm.recv(i)
        except PeerCrashedError:
            raise RuntimeError(f"client {i} dropped during recovery; without secret-shared keys "
                               "(the full protocol) its pair masks cannot be removed") from None
        for j, s in zip(dropped, revealed):
            m = prg(s, n)
            total = total - m if j > i else total + m  # undo what i added (j > i) or subtracted (j < i)
    return {"sum": total.reshape(shape), "value": decode(total, frac_bits).reshape(shape),
            "survivors": survivors, "dropped": dropped, "seen": seen}


def run_secure_aggregation(xs: list[np.ndarray], drop: tuple[int, ...] = (), backend: str = "sim",
                           faults: cluster.Faults | None = None, frac_bits: int = FRAC_BITS, session: int = 0,
                           timeout: float = 120.0) -> tuple[dict[str, Any], cluster.RunResult]:
    """Driver: client c (rank c + 1) holds xs[c]; ``drop`` lists clients (0-based) that drop after masking."""
    res = cluster.run(_secure_rank, len(xs) + 1, backend=backend, args=(xs, tuple(drop), frac_bits, session),
                      faults=faults, timeout=timeout)
    return res.values[0], res


def _secure_rank(comm: Comm, xs: list[np.ndarray], drop: tuple[int, ...], frac_bits: int, session: int) -> Any:
    x = xs[0] if comm.rank == 0 else xs[comm.rank - 1]
    return secure_aggregate(comm, x, frac_bits, drop=(comm.rank - 1) in drop, session=session)
