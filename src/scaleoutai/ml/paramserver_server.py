"""The server side of the parameter server of Chapter 11: sharding rules, the wire format, the serve loop.

The communicator has no receive-from-anyone (MPI's ANY_SOURCE, a select() over sockets): a rank names
whom it waits for. So the servers keep a shared *virtual* timeline instead: each request says how long
its worker will compute before asking again, a worker answered at virtual time t will ask again at
t + that, and a server listens to the answered worker with the earliest such time (ties: lower rank),
which is the order select() would see. Every server computes the same timeline from the same requests,
so all make the same choices, and a server waits for worker k only after every server has answered k's
previous request: no cycle of waits, no deadlock.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import block_bounds

KIND_REQUEST, KIND_RETRY, KIND_DONE = 0, 1, 2
HEADER = 5  # int64 words: kind, clock, planned compute (float64 bits), number of push keys, of pull keys
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: neighbouring ids land on different shards


def owner_of(keys: np.ndarray, n_rows: int, servers: int, sharding: str = "range") -> np.ndarray:
    """Shard of each key. range: ``block_bounds(n_rows, M)`` (contiguous ids together, so hot low ids
    share a shard); hash: ((k * 0x9E3779B97F4A7C15 mod 2^64) >> 32) mod M (spreads neighbours)."""
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) and (keys.min() < 0 or keys.max() >= n_rows):
        raise ValueError(f"keys must be row ids 0..{n_rows - 1}, got {keys.min()}..{keys.max()}")
    if sharding == "range":
        his = np.array([hi for _, hi in block_bounds(n_rows, servers)], dtype=np.int64)
        return np.searchsorted(his, keys, side="right").astype(np.int64)
    if sharding == "hash":
        h = (keys.astype(np.uint64) * _GOLDEN) >> np.uint64(32)
        return (h % np.uint64(servers)).astype(np.int64)
    raise ValueError(f"sharding={sharding!r}: choose 'range' or 'hash'")


def backup_of(shard: int, servers: int) -> int:
    """The server that keeps the replica of ``shard`` (primary-backup, the next server on a ring)."""
    return (int(shard) + 1) % servers


def shard_keys(shard: int, n_rows: int, servers: int, sharding: str) -> np.ndarray:
    """The sorted keys of one shard, without building anything of n_rows size for range sharding."""
    if sharding == "range":
        lo, hi = block_bounds(n_rows, servers)[shard]
        return np.arange(lo, hi, dtype=np.int64)
    out = [c[owner_of(c, n_rows, servers, sharding) == shard]
           for c in np.array_split(np.arange(n_rows, dtype=np.int64), max(1, n_rows // 65536))]
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def pack(kind: int, clock: int, plan: float, push_keys: np.ndarray, pull_keys: np.ndarray, grads: np.ndarray,
         dtype: Any) -> np.ndarray:
    """One request as one message of bytes: header, push keys, pull keys, push rows (dtype)."""
    head = np.array([kind, clock, 0, len(push_keys), len(pull_keys)], dtype=np.int64)
    head[2:3] = np.array([plan], dtype=np.float64).view(np.int64)
    parts = [head, np.asarray(push_keys, np.int64), np.asarray(pull_keys, np.int64),
             np.ascontiguousarray(grads, dtype=dtype)]
    return np.concatenate([p.reshape(-1).view(np.uint8) for p in parts])


def unpack(msg: np.ndarray, d: int, dtype: Any) -> tuple[int, int, float, np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of ``pack``: (kind, clock, plan, push_keys, pull_keys, push_rows)."""
    head = msg[:HEADER * 8].view(np.int64)
    n_push, n_pull = int(head[3]), int(head[4])
    plan = float(head[2:3].view(np.float64)[0])
    a = HEADER * 8
    b = a + 8 * n_push
    c = b + 8 * n_pull
    rows = msg[c:].view(np.dtype(dtype)).reshape(n_push, d)
    return int(head[0]), int(head[1]), plan, msg[a:b].view(np.int64), msg[b:c].view(np.int64), rows


class _Replica:
    """One shard's rows (and Adagrad state) on one server."""

    def __init__(self, shard: int, cfg: Any, dtype: np.dtype):
        from .paramserver import init_rows

        self.keys = shard_keys(shard, cfg.n_rows, cfg.servers, cfg.sharding)
        self.rows = init_rows(self.keys, cfg.d, cfg.seed, dtype=dtype)
        self.acc = np.zeros_like(self.rows) if cfg.optimizer == "adagrad" else None

    def apply(self, keys: np.ndarray, g: np.ndarray, lr: float) -> None:
        from .paramserver import _apply

        loc = np.searchsorted(self.keys, keys)
        rows, acc = self.rows[loc], None if self.acc is None else self.acc[loc]
        _apply(rows, acc, g, lr)
        self.rows[loc] = rows
        if acc is not None:
            self.acc[loc] = acc


def _aggregate(parts: list[tuple[np.ndarray, np.ndarray]], d: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Sum the pushed rows of several workers per key, in worker order (deterministic float sums)."""
    keys = np.concatenate([k for k, _ in parts]) if parts else np.zeros(0, np.int64)
    if not len(keys):
        return keys, np.zeros((0, d), dtype)
    uk, inv = np.unique(keys, return_inverse=True)
    g = np.zeros((len(uk), d), dtype)
    np.add.at(g, inv, np.concatenate([x for _, x in parts]))
    return uk, g


def serve_shard(comm: Comm, cfg: Any) -> dict:
    """Server j: hold shard j (and, with replicas, the backup of shard j-1); answer each worker's pull of
    clock c once c - min_k(completed clocks) <= s; apply pushes (BSP: summed per clock, once every worker
    has pushed it, so the result is the reference's; SSP/ASP: at once, in arrival order)."""
    M, K, me, dt = cfg.servers, cfg.workers, comm.rank, np.dtype(cfg.dtype)
    held = [me] + ([(me - 1) % M] if cfg.replicate and M > 1 else [])
    reps = {j: _Replica(j, cfg, dt) for j in held}
    s, bsp = cfg.staleness, cfg.staleness == 0
    state = ["answered"] * K
    completed, clock, plan, vt = [0] * K, [0] * K, [0.0] * K, [0.0] * K
    pending: list[np.ndarray] = [np.zeros(0, np.int64)] * K
    buffered: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    applied, served, gaps = 0, 0, []

    def push(keys: np.ndarray, g: np.ndarray) -> None:
        own = owner_of(keys, cfg.n_rows, M, cfg.sharding)
        for j, rep in reps.items():
            sel = own == j
            if sel.any():
                rep.apply(keys[sel], g[sel], cfg.lr)

    while any(x != "done" for x in state):
        ready = [k for k in range(K) if state[k] == "answered"]
        if ready:
            k = min(ready, key=lambda q: (vt[q], q))
            now = vt[k]  # the virtual time of this event
            kind, c, plan[k], pk, qk, g = unpack(comm.recv(M + k), cfg.d, dt)
            if kind != KIND_RETRY:
                completed[k] = c
                if bsp:
                    buffered[k] = (pk, g)
                elif len(pk):
                    push(*_aggregate([(pk, g)], cfg.d, dt))
            state[k], clock[k], pending[k] = ("done" if kind == KIND_DONE else "waiting"), c, qk
        slowest = min(completed)
        if bsp and slowest > applied:  # every worker has pushed clock `applied`: apply their sum
            push(*_aggregate([buffered.pop(q) for q in sorted(buffered)], cfg.d, dt))
            applied = slowest
        go = [q for q in range(K) if state[q] == "waiting" and (s is None or clock[q] - slowest <= s)]
        if not ready and not go:  # cannot happen: the slowest waiting worker may always go on
            raise RuntimeError(f"server {me}: every worker waits and none may go on (clocks {clock})")
        for k in go:
            vt[k] = max(now, vt[k]) + plan[k]
            comm.send(_lookup(reps, pending[k], cfg, dt), M + k)
            served += len(pending[k])
            gaps.append((_clock(comm), k, clock[k], clock[k] - slowest))
            state[k] = "answered"
    return {"shards": {j: {"keys": r.keys, "rows": r.rows} for j, r in reps.items()}, "gaps": gaps,
            "rows_served": served}


def _lookup(reps: dict[int, _Replica], keys: np.ndarray, cfg: Any, dt: np.dtype) -> np.ndarray:
    out = np.empty((len(keys), cfg.d), dt)
    own = owner_of(keys, cfg.n_rows, cfg.servers, cfg.sharding)
    for j in np.unique(own):
        if int(j) not in reps:
            raise ValueError(f"server asked for keys of shard {j}, which it does not hold")
        sel = own == j
        rep = reps[int(j)]
        out[sel] = rep.rows[np.searchsorted(rep.keys, keys[sel])]
    return out


def _clock(comm: Comm) -> float:
    t = getattr(comm, "clock", None)
    return float(t) if t is not None else time.perf_counter()
