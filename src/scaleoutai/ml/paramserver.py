"""A sharded key-value parameter server over the communicator (Chapter 11).

Ranks 0..M-1 are servers, ranks M..M+K-1 are workers. The table (an embedding table: one row of d
numbers per key) is split over the servers by ``range`` or ``hash`` sharding; no worker ever holds more
than the rows its mini-batch touches. Per clock c a worker sends each live server ONE request that
carries the push of clock c-1 (its gradient rows) and the pull of clock c (the keys it needs); the
server answers with the rows once the consistency model allows (``staleness`` s: BSP is s = 0, SSP is
s >= 1, ASP is s = None). The server side lives in ``paramserver_server``.

Model (Section 4): matrix factorisation on generated ratings (``datasets.low_rank_ratings``), keys 0..U-1 are users and U..U+I-1 items;
loss = 1/(2B) sum (u . v - r)^2 over the global batch of B ratings per clock, split over K workers with
``block_range``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds, block_range
from ..errors import PeerCrashedError
from .paramserver_server import (HEADER, KIND_DONE, KIND_REQUEST, KIND_RETRY, backup_of, owner_of, pack,
                                 serve_shard)

__all__ = ["init_rows", "owner_of", "backup_of", "batch_indices", "reference_train",
           "train_worker", "run_paramserver", "PSResult"]

_CHUNK = 1024  # rows generated together by init_rows: any server can make any row without the table


def init_rows(keys: np.ndarray, d: int, seed: int = 0, scale: float = 0.1, dtype: Any = np.float64) -> np.ndarray:
    """Initial rows of ``keys``: row k is the same whoever generates it (chunks of 1024 rows per seed),
    so a server makes its own shard and nobody builds the whole table."""
    keys = np.asarray(keys, dtype=np.int64)
    out = np.empty((len(keys), d), dtype=dtype)
    chunk = keys // _CHUNK
    for c in np.unique(chunk):
        sel = chunk == c
        block = np.random.default_rng([seed, int(c)]).standard_normal((_CHUNK, d)) * scale
        out[sel] = block[keys[sel] - c * _CHUNK]
    return out


def batch_indices(n: int, batch: int, clock: int, seed: int = 0) -> np.ndarray:
    """The global mini-batch of clock c: B consecutive entries of one seeded permutation of the n examples
    (wrapping around); worker w of K takes ``block_range(B, K, w)`` of it."""
    perm = np.random.default_rng([seed, 11]).permutation(n)
    return perm[(clock * batch + np.arange(batch)) % n]


def _grads(rows: np.ndarray, inv_u: np.ndarray, inv_i: np.ndarray, r: np.ndarray,
           batch: int) -> tuple[float, np.ndarray]:
    """Sum of squared errors and d loss / d rows for loss = 1/(2B) sum (u . v - r)^2."""
    u, v = rows[inv_u], rows[inv_i]
    err = np.einsum("ij,ij->i", u, v) - r
    g = np.zeros_like(rows)
    scale = (err / batch)[:, None].astype(rows.dtype)
    np.add.at(g, inv_u, scale * v)
    np.add.at(g, inv_i, scale * u)
    return float(np.dot(err, err)), g


def _apply(rows: np.ndarray, acc: np.ndarray | None, g: np.ndarray, lr: float, eps: float = 1e-8) -> None:
    """SGD (acc None): row -= lr g. Adagrad: G += g^2; row -= lr g / (sqrt(G) + eps). In place."""
    if acc is None:
        rows -= lr * g
    else:
        acc += g * g
        rows -= lr * g / (np.sqrt(acc) + eps)


def reference_train(n_rows: int, d: int, users: np.ndarray, items: np.ndarray, r: np.ndarray, n_users: int,
                    batch: int, steps: int, lr: float, optimizer: str = "sgd", seed: int = 0,
                    dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """One machine, the whole table: per clock, the loss of the global batch, then one SGD/Adagrad step
    on the rows it touched. Returns (table, losses). What BSP (s = 0) must equal, for every K and M."""
    table = init_rows(np.arange(n_rows), d, seed, dtype=dtype)
    acc = np.zeros_like(table) if optimizer == "adagrad" else None
    losses = np.zeros(steps)
    r = np.asarray(r, dtype=dtype)
    for c in range(steps):
        idx = batch_indices(len(r), batch, c, seed)
        keys, inv = np.unique(np.concatenate([users[idx], n_users + items[idx]]), return_inverse=True)
        sse, g = _grads(table[keys], inv[:len(idx)], inv[len(idx):], r[idx], batch)
        losses[c] = sse / (2 * batch)
        rows, a = table[keys], None if acc is None else acc[keys]
        _apply(rows, a, g, lr)
        table[keys] = rows
        if acc is not None:
            acc[keys] = a
    return table, losses


@dataclass(frozen=True)
class PSConfig:
    """What every rank of one run knows (picklable for the process backend)."""

    servers: int
    workers: int
    n_rows: int
    d: int
    n_users: int
    batch: int
    steps: int
    lr: float
    staleness: int | None = 0
    sharding: str = "range"
    optimizer: str = "sgd"
    replicate: bool = False
    compute_s: float = 0.0
    jitter: float = 0.0
    seed: int = 0
    dtype: str = "float64"


def _now(comm: Comm) -> float:
    clock = getattr(comm, "clock", None)  # simulated seconds on the simulator, wall seconds elsewhere
    return float(clock) if clock is not None else time.perf_counter()


def train_worker(comm: Comm, cfg: PSConfig, users: np.ndarray, items: np.ndarray, r: np.ndarray) -> dict:
    """Worker k = comm.rank - M: per clock, pull the rows its block of the global batch touches, compute
    their gradient, push it with the next request (to the owner and, with replicas, to the backup)."""
    M, K, dt = cfg.servers, cfg.workers, np.dtype(cfg.dtype)
    k = comm.rank - M
    dead: set[int] = set()
    sse = np.zeros(cfg.steps)
    push_keys, push_g = np.zeros(0, np.int64), np.zeros((0, cfg.d), dt)
    plan, slow, held = 0.0, 1.0, 0
    for c in range(cfg.steps + 1):
        if c < cfg.steps:
            idx = batch_indices(len(r), cfg.batch, c, cfg.seed)
            lo, hi = block_range(cfg.batch, K, k)
            idx = idx[lo:hi]
            keys, inv = np.unique(np.concatenate([users[idx], cfg.n_users + items[idx]]), return_inverse=True)
        else:
            keys = np.zeros(0, np.int64)
        kind = KIND_REQUEST if c < cfg.steps else KIND_DONE
        # the compute this clock will take, as far as the worker knows (its straggler factor as last measured):
        # the servers use it to listen to workers in the order their next requests will come
        nominal = cfg.compute_s * len(idx) * _jitter(cfg, k, c) if c < cfg.steps else 0.0
        plan = nominal * slow
        pushes = _route_push(push_keys, push_g, cfg, dead)
        pulls = _route_pull(keys, cfg, dead)
        for j in range(M):
            if j not in dead:
                comm.send(pack(kind, c, plan, pushes[j][0], pulls[j], pushes[j][1], dt), j)
        if c == cfg.steps:
            break
        rows = _collect(comm, keys, pulls, cfg, dead, c, plan, dt)
        held = max(held, rows.size)
        t0 = _now(comm)
        err, g = _grads(rows, inv[:len(idx)], inv[len(idx):], r[idx].astype(dt), cfg.batch)
        sse[c] = err
        comm.compute(nominal)
        if nominal > 0:
            slow = (_now(comm) - t0) / nominal
        push_keys, push_g = keys, g
    return {"sse": sse, "max_rows_held": held // max(cfg.d, 1), "dead": sorted(dead)}


def _jitter(cfg: PSConfig, k: int, c: int) -> float:
    """A transient straggler: this clock's compute of worker k is stretched by a lognormal factor of
    mean 1 (``jitter`` is its sigma), drawn from the seed so every run sees the same delays."""
    if cfg.jitter <= 0:
        return 1.0
    z = np.random.default_rng([cfg.seed, 7, k, c]).standard_normal()
    return float(np.exp(cfg.jitter * z - cfg.jitter ** 2 / 2))


def _route_pull(keys: np.ndarray, cfg: PSConfig, dead: set[int]) -> list[np.ndarray]:
    """Keys per server: the owner, or its backup once the owner is known to have crashed."""
    own = owner_of(keys, cfg.n_rows, cfg.servers, cfg.sharding)
    if dead:
        own = np.array([backup_of(j, cfg.servers) if j in dead else j for j in own], dtype=np.int64)
    return [keys[own == j] for j in range(cfg.servers)]


def _route_push(keys: np.ndarray, g: np.ndarray, cfg: PSConfig, dead: set[int]) -> list[tuple]:
    """(keys, rows) per server: each key to its owner and, with replicas, to the owner's backup too."""
    M = cfg.servers
    own = owner_of(keys, cfg.n_rows, M, cfg.sharding)
    out = []
    for j in range(M):
        sel = own == j
        if cfg.replicate and M > 1:
            sel |= own == (j - 1) % M  # j is the backup of shard j-1
        out.append((keys[sel], g[sel]))
    return out


def _collect(comm: Comm, keys: np.ndarray, pulls: list[np.ndarray], cfg: PSConfig, dead: set[int], c: int,
             plan: float, dt: np.dtype) -> np.ndarray:
    """Receive every server's rows; a server found crashed is marked dead and the pull is asked again of
    every live server (a retry request with no push), so its shard is served by its backup."""
    rows = np.empty((len(keys), cfg.d), dt)
    while True:
        missing = False
        for j in range(cfg.servers):
            if j in dead:
                continue
            try:
                got = comm.recv(j)
            except PeerCrashedError:
                if not cfg.replicate:
                    raise
                dead.add(j)
                missing = True
                continue
            rows[np.searchsorted(keys, pulls[j])] = got
        if not missing:
            return rows
        if len(dead) >= cfg.servers or any(backup_of(j, cfg.servers) in dead for j in dead):
            raise RuntimeError(f"servers {sorted(dead)} crashed with their backups: shard lost; replicate "
                               "on more servers")
        pulls[:] = _route_pull(keys, cfg, dead)
        empty_k, empty_g = np.zeros(0, np.int64), np.zeros((0, cfg.d), dt)
        for j in range(cfg.servers):
            if j not in dead:
                comm.send(pack(KIND_RETRY, c, plan, empty_k, pulls[j], empty_g, dt), j)


def _rank_main(comm: Comm, cfg: PSConfig, users: np.ndarray, items: np.ndarray, r: np.ndarray) -> dict:
    if comm.rank < cfg.servers:
        return serve_shard(comm, cfg)
    return train_worker(comm, cfg, users, items, r)


@dataclass
class PSResult:
    """What ``run_paramserver`` measured. ``gaps``: (server time, worker, clock, gap) at every served pull,
    gap = c - slowest worker's clock; ``bytes_per_worker``: bytes each worker sent over the whole run."""

    table: np.ndarray
    losses: np.ndarray
    gaps: np.ndarray
    max_gap: int
    bytes_per_worker: np.ndarray
    rows_served: np.ndarray
    max_rows_held: int
    sim_time: float | None
    dead: list[int] = field(default_factory=list)
    run: Any = None


def run_paramserver(users: np.ndarray, items: np.ndarray, r: np.ndarray, n_users: int, n_items: int, d: int,
                    servers: int, workers: int, batch: int, steps: int, lr: float, staleness: int | None = 0,
                    sharding: str = "range", optimizer: str = "sgd", replicate: bool = False,
                    compute_s: float = 0.0, jitter: float = 0.0, seed: int = 0, dtype: Any = np.float64, backend: str = "sim",
                    faults: cluster.Faults | None = None, network: cluster.Network | None = None,
                    timeout: float = 120.0) -> PSResult:
    """Train on M = ``servers`` server ranks and K = ``workers`` worker ranks; gather the table from the
    live replicas. BSP (staleness 0) equals ``reference_train`` for every K and M. Chapter 11, Section 4."""
    if sharding not in ("range", "hash"):
        raise ValueError(f"sharding={sharding!r}: choose 'range' or 'hash'")
    if optimizer not in ("sgd", "adagrad"):
        raise ValueError(f"optimizer={optimizer!r}: choose 'sgd' or 'adagrad'")
    if staleness is not None and (int(staleness) != staleness or staleness < 0):
        raise ValueError(f"staleness={staleness!r}: use an int s >= 0 (0 is BSP) or None (ASP)")
    for name, v in (("servers", servers), ("workers", workers), ("batch", batch), ("steps", steps), ("d", d)):
        if int(v) != v or v < 1:
            raise ValueError(f"run_paramserver needs {name} >= 1, got {v!r}")
    if not len(users) == len(items) == len(r):
        raise ValueError("users, items and r must have one entry per rating")
    cfg = PSConfig(int(servers), int(workers), n_users + n_items, int(d), int(n_users), int(batch), int(steps),
                   float(lr), staleness, sharding, optimizer, bool(replicate), float(compute_s), float(jitter), int(seed),
                   np.dtype(dtype).name)
    res = cluster.run(_rank_main, servers + workers, backend=backend, args=(cfg, users, items, r),
                      faults=faults, network=network, timeout=timeout)
    M = cfg.servers
    live = [j for j in range(M) if isinstance(res.values[j], dict)]
    table = np.empty((cfg.n_rows, d), np.dtype(dtype))
    for j in range(M):
        src = j if j in live else backup_of(j, M)
        shard = res.values[src]["shards"][j]
        table[shard["keys"]] = shard["rows"]
    wv = res.values[M:]
    losses = sum(v["sse"] for v in wv) / (2 * batch)
    gaps = np.asarray(res.values[live[0]]["gaps"], dtype=np.float64).reshape(-1, 4)
    return PSResult(table=table, losses=losses, gaps=gaps, max_gap=int(gaps[:, 3].max()) if len(gaps) else 0,
                    bytes_per_worker=np.array([res.stats[M + k].bytes_sent for k in range(workers)]),
                    rows_served=np.array([v["rows_served"] if isinstance(v, dict) else 0 for v in res.values[:M]]),
                    max_rows_held=max(v["max_rows_held"] for v in wv),
                    sim_time=res.sim_time, dead=[j for j in range(M) if j not in live], run=res)


def shard_sizes(n_rows: int, servers: int, sharding: str = "range") -> np.ndarray:
    """Rows per shard: ``block_bounds`` for range sharding, the hash's counts otherwise."""
    if sharding == "range":
        return np.array([hi - lo for lo, hi in block_bounds(n_rows, servers)])
    return np.bincount(owner_of(np.arange(n_rows), n_rows, servers, "hash"), minlength=servers)
