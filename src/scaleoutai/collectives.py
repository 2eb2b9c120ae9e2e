"""Chapter 4: collective communication built from point-to-point ``comm.send`` / ``comm.recv`` only.

A step where a rank both sends and receives is written ``comm.sendrecv`` (MPI_Sendrecv): on the
simulator it is exactly send then recv; on real processes it saves copies (the payload leaves without
one, and with ``out`` the incoming bytes land in place).

Every function is called on every rank of a group of K = comm.size ranks, for any K >= 1, any length
(including lengths not divisible by K or shorter than K) and any numeric dtype; reductions take
``op`` in {"sum", "max", "min"}. Blocks are ``np.array_split(x, K)`` along axis 0. Costs in the
alpha-beta model (n bytes per rank) are in ``scaleoutai.perf.collective_time``:

    broadcast, reduce (binomial tree)   ceil(log2 K) (alpha + n beta)
    naive_allreduce (flat)              K (alpha + n beta), the root moves (K-1) n bytes each way
    tree_allreduce                      2 ceil(log2 K) (alpha + n beta)
    ring_allreduce                      2 (K-1) (alpha + n/K beta): bandwidth-optimal
    recursive_doubling_allreduce        log2 K (alpha + n beta), +2 steps when K is not a power of 2
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import numpy as np

from .cluster import Comm

OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sum": np.add,
    "max": np.maximum,
    "min": np.minimum,
}

__all__ = ["OPS", "broadcast", "scatter", "gather", "reduce", "naive_allreduce", "tree_allreduce",
           "ring_allreduce", "recursive_doubling_allreduce", "reduce_scatter", "all_gather", "all_to_all",
           "ALLREDUCES"]


def _op(op: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    try:
        return OPS[op]
    except (KeyError, TypeError):
        raise ValueError(f"op={op!r} is not supported: choose one of {sorted(OPS)}") from None


def _array(x: Any, name: str = "x") -> np.ndarray:
    if isinstance(x, np.generic):
        return np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array, got {type(x).__name__} (wrap it with np.asarray(...))")
    return x


def _root(comm: Comm, root: int) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < comm.size:
        raise ValueError(f"root={root!r} is not a rank: choose 0..{comm.size - 1}")
    return int(root)


# --- one-to-all and all-to-one ------------------------------------------------------------------

def broadcast(comm: Comm, x: np.ndarray | None, root: int = 0) -> np.ndarray:
    """Binomial-tree broadcast: after round k, 2^k ranks hold x. ``x`` is ignored on non-roots."""
    root = _root(comm, root)
    K, rel = comm.size, (comm.rank - root) % comm.size
    data = _array(x).copy() if rel == 0 else None
    mask = 1
    while mask < K:  # receive once, from the rank that differs in my lowest set bit
        if rel & mask:
            data = comm.recv((rel - mask + root) % K)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:  # then forward to the ranks below me in the tree, farthest first
        if rel + mask < K:
            comm.send(data, (rel + mask + root) % K)
        mask >>= 1
    return data


def _flat_broadcast(comm: Comm, x: np.ndarray | None, root: int) -> np.ndarray:
    """Naive broadcast: the root sends the whole array to every other rank, one after another."""
    if comm.rank == root:
        data = _array(x)
        for dst in range(comm.size):
            if dst != root:
                comm.send(data, dst)
        return data.copy()
    return comm.recv(root)


def reduce(comm: Comm, x: np.ndarray, root: int = 0, op: str = "sum") -> np.ndarray | None:
    """Binomial-tree reduction to ``root`` (the broadcast tree run backwards). Non-roots get None."""
    root, f = _root(comm, root), _op(op)
    K, rel = comm.size, (comm.rank - root) % comm.size
    acc = _array(x).copy()
    mask = 1
    while mask < K:
        if rel & mask:
            comm.send(acc, (rel - mask + root) % K)
            return None
        if rel + mask < K:
            acc = f(acc, comm.recv((rel + mask + root) % K))
        mask <<= 1
    return acc


def _flat_reduce(comm: Comm, x: np.ndarray, root: int, op: str) -> np.ndarray | None:
    """Naive reduction: every rank sends its whole array to the root, which combines them in rank order."""
    f = _op(op)
    x = _array(x)
    if comm.rank != root:
        comm.send(x, root)
        return None
    acc = None
    for src in range(comm.size):
        part = x if src == root else comm.recv(src)
        acc = part.copy() if acc is None else f(acc, part)
    return acc


def scatter(comm: Comm, x: np.ndarray | None, root: int = 0) -> np.ndarray:
    """The root splits ``x`` into ``np.array_split(x, K)`` and sends block r to rank r."""
    root = _root(comm, root)
    if comm.rank != root:
        return comm.recv(root)
    blocks = np.array_split(_array(x), comm.size)
    for dst in range(comm.size):
        if dst != root:
            comm.send(blocks[dst], dst)
    return blocks[root].copy()


def gather(comm: Comm, x: np.ndarray, root: int = 0) -> np.ndarray | None:
    """Every rank sends its block to the root, which returns them concatenated in rank order."""
    root = _root(comm, root)
    x = np.atleast_1d(_array(x))
    if comm.rank != root:
        comm.send(x, root)
        return None
    return np.concatenate([x if src == root else comm.recv(src) for src in range(comm.size)])


# --- all-reduce: four algorithms, one answer -----------------------------------------------------

def naive_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """Flat reduce to rank 0, then flat broadcast: rank 0 moves (K-1) n bytes each way."""
    _op(op)
    return _flat_broadcast(comm, _flat_reduce(comm, x, 0, op), 0)


def tree_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """Binomial reduce to rank 0, then binomial broadcast: 2 ceil(log2 K) steps of the full array."""
    return broadcast(comm, reduce(comm, x, 0, op), 0)


def block_bounds(n: int, K: int) -> list[tuple[int, int]]:
    """[start, stop) of each of K blocks of n items, exactly as ``np.array_split`` cuts them.

    The one split rule of the course (shards of data, ZeRO partitions, tensor-parallel columns, ring
    blocks): the first n mod K blocks hold ceil(n/K) items, the rest floor(n/K); with K > n the last
    K - n blocks are empty.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"block_bounds needs a count n >= 0, got {n!r}")
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"block_bounds needs K >= 1 blocks, got {K!r}")
    q, extra = divmod(int(n), int(K))
    edges = np.cumsum([0] + [q + (j < extra) for j in range(int(K))])
    return [(int(edges[j]), int(edges[j + 1])) for j in range(int(K))]


def block_range(n: int, K: int, r: int) -> tuple[int, int]:
    """[start, stop) of block r of ``block_bounds(n, K)``: what rank r of K owns."""
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r < K:
        raise ValueError(f"rank={r!r} is not one of the K={K} ranks: choose 0..{K - 1}")
    return block_bounds(n, K)[r]


def worker_range(n: int, K: int, r: int) -> range:
    """The items rank r holds when rank 0 coordinates (federated clients, hospital sites): all n on
    rank 0 when K = 1; else block r - 1 of ``block_bounds(n, K - 1)`` on ranks 1..K-1, none on rank 0."""
    if K == 1:
        return range(n)
    if r == 0:
        return range(0)
    lo, hi = block_range(n, K - 1, r - 1)
    return range(lo, hi)


@lru_cache(maxsize=64)
def _blocks(n: int, K: int) -> tuple[slice, ...]:
    """The ring's blocks as slices, shared by all K ranks of a run (each would otherwise cut K of them)."""
    return tuple(slice(lo, hi) for lo, hi in block_bounds(n, K))


def reduce_scatter(comm: Comm, x: np.ndarray, op: str = "sum", out: np.ndarray | None = None) -> np.ndarray:
    """Ring reduce-scatter: rank r returns block r of ``np.array_split(op-reduction of all x, K)``.

    K-1 steps; at step s rank r sends block (r-s-1) mod K to r+1 and folds block (r-s-2) mod K from r-1,
    received in place (a posted receive: ``comm.sendrecv(..., out=)``).
    With ``out`` (shaped like x) the partial results are written there, and block r is returned as a
    view of it: ``ring_allreduce`` then gathers in the same buffer.
    """
    f = _op(op)
    x = _array(x)
    K, r = comm.size, comm.rank
    blk = _blocks(len(x), K)
    acc = np.empty_like(x) if out is None else out
    right, left = (r + 1) % K, (r - 1) % K
    for s in range(K - 1):
        i = (r - s - 2) % K
        # A posted receive straight into the block it folds into (both sides know its size), then
        # the fold in place: op(got, mine), identical bits to op(mine, got) for sum, max and min.
        got = comm.sendrecv((x if s == 0 else acc)[blk[(r - s - 1) % K]], right, left, acc[blk[i]])
        f(got, x[blk[i]], got)
    if K == 1:
        acc[...] = x
    return acc[blk[r]] if out is not None else acc[blk[r]].copy()


def all_gather(comm: Comm, block: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Ring all-gather: every rank returns all ranks' blocks concatenated in rank order.

    Without ``out`` blocks may differ in size arbitrarily. With ``out`` the blocks are those of
    ``np.array_split(out, K)``, received in place (this rank's block is copied in unless it is already
    that view), and ``out`` is returned.
    """
    K, r = comm.size, comm.rank
    block = np.atleast_1d(_array(block, "block"))
    if out is None:
        parts: list[np.ndarray | None] = [None] * K
        parts[r] = block  # no copy: send and concatenate copy it already
        for s in range(K - 1):
            parts[(r - s - 1) % K] = comm.sendrecv(parts[(r - s) % K], (r + 1) % K, (r - 1) % K)
        return np.concatenate(parts)
    blk = _blocks(len(out), K)
    if not np.may_share_memory(block, out[blk[r]]):
        out[blk[r]] = block
    right, left = (r + 1) % K, (r - 1) % K
    for s in range(K - 1):  # received in place: no copy of the block on processes
        comm.sendrecv(out[blk[(r - s) % K]], right, left, out[blk[(r - s - 1) % K]])
    return out


def ring_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """Ring all-reduce = reduce-scatter + all-gather on the flattened array, in one output buffer.

    Each rank sends exactly 2(K-1) messages holding 2(K-1)/K of the data: bandwidth-optimal. Sharing
    the buffer means no block is copied twice: at 16 MiB the copies cost as much as the reductions.
    """
    x = _array(x)
    out = np.empty_like(x.reshape(-1))
    mine = reduce_scatter(comm, x.reshape(-1), op, out=out)
    return all_gather(comm, mine, out=out).reshape(x.shape)


def recursive_doubling_allreduce(comm: Comm, x: np.ndarray, op: str = "sum") -> np.ndarray:
    """Recursive doubling: in round k rank r exchanges its partial result with rank r XOR 2^k.

    For K not a power of two, with P the largest power of two <= K and R = K - P: the first 2R ranks pair
    up, the even one hands its data to the odd one and sits out, P ranks double, and the result returns.
    """
    f = _op(op)
    K, r = comm.size, comm.rank
    acc = _array(x).copy()
    P = 1 << (K.bit_length() - 1)
    R = K - P
    if r < 2 * R:  # fold the extra ranks in
        if r % 2 == 0:
            comm.send(acc, r + 1)
            return comm.recv(r + 1)
        acc = f(comm.recv(r - 1), acc)
        v = r // 2
    else:
        v = r - R
    mask = 1
    while mask < P:
        pv = v ^ mask
        peer = 2 * pv + 1 if pv < R else pv + R
        other = comm.sendrecv(acc, peer, peer)
        acc = f(other, acc) if pv < v else f(acc, other)  # same order on both sides: identical bits
        mask <<= 1
    if r < 2 * R:
        comm.send(acc, r - 1)
    return acc


ALLREDUCES: dict[str, Callable[..., np.ndarray]] = {
    "naive": naive_allreduce,
    "tree": tree_allreduce,
    "ring": ring_allreduce,
    "recursive_doubling": recursive_doubling_allreduce,
}


def all_to_all(comm: Comm, blocks: list[np.ndarray]) -> list[np.ndarray]:
    """Pairwise exchange: ``blocks[j]`` goes to rank j; returns what each rank j sent to this rank.

    K-1 rounds; in round s rank r sends to r+s and receives from r-s, so every link is used once.
    """
    K, r = comm.size, comm.rank
    if not isinstance(blocks, (list, tuple)) or len(blocks) != K:
        got = len(blocks) if isinstance(blocks, (list, tuple)) else type(blocks).__name__
        raise ValueError(f"all_to_all needs a list of {K} blocks (one per rank), got {got}")
    out: list[np.ndarray | None] = [None] * K
    out[r] = _array(blocks[r], f"blocks[{r}]").copy()
    for s in range(1, K):
        dst, src = (r + s) % K, (r - s) % K
        out[src] = comm.sendrecv(_array(blocks[dst], f"blocks[{dst}]"), dst, src)
    return out
