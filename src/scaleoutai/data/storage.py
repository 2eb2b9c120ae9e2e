"""Distributed storage: consistent hashing, replication, sharded files, read amplification (Chapter 8).

Consistent hashing: every physical node owns ``vnodes`` points on a ring of 2**64 positions
(``stable_hash((node, v))``); a key belongs to the first point clockwise from ``stable_hash(key)``, and
its r replicas to the next r - 1 *distinct* physical nodes clockwise. A node that joins takes about
1/(n+1) of the keys, all from its ring neighbours; a node that leaves hands on its 1/n. Modulo
placement (``naive_owners``: node ``hash mod n``) moves about n/(n+1) of the keys on a join.

Sharded files: N variable-length records cut into S contiguous shards (``collectives.block_bounds``),
shard s a file of concatenated record bytes and an index of S_s + 1 offsets; both written to a
temporary name and renamed, so a reader never sees half a shard. Read amplification = bytes fetched
from storage / bytes of the records asked for, for a reader that fetches aligned blocks.
"""
from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np

from ..cluster import Comm
from ..collectives import block_bounds
from .mapreduce import stable_hash
from .sampler import shard_indices


class HashRing:
    """A consistent-hash ring of physical nodes with ``vnodes`` virtual nodes each and ``replicas`` copies."""

    def __init__(self, nodes: Sequence[Hashable], vnodes: int = 64, replicas: int = 1) -> None:
        if isinstance(vnodes, bool) or not isinstance(vnodes, int) or vnodes < 1:
            raise ValueError(f"vnodes must be an integer >= 1, got {vnodes!r}")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise ValueError(f"replicas must be an integer >= 1, got {replicas!r}")
        self.vnodes, self.replicas = vnodes, replicas
        self.nodes: list[Hashable] = []
        self._points = np.zeros(0, dtype=np.uint64)
        self._owner = np.zeros(0, dtype=np.int64)  # index into self.nodes of each point
        for node in nodes:
            self.add(node)

    def _rebuild(self, points: list[int], owners: list[int]) -> None:
        order = np.argsort(np.asarray(points, dtype=np.uint64), kind="stable")
        self._points = np.asarray(points, dtype=np.uint64)[order]
        self._owner = np.asarray(owners, dtype=np.int64)[order]

    def add(self, node: Hashable) -> None:
        """A node joins: its vnodes points take the keys between each point and its predecessor."""
        if node in self.nodes:
            raise ValueError(f"node {node!r} is already on the ring")
        self.nodes.append(node)
        i = len(self.nodes) - 1
        points = self._points.tolist() + [stable_hash((node, v)) for v in range(self.vnodes)]
        self._rebuild(points, self._owner.tolist() + [i] * self.vnodes)

    def remove(self, node: Hashable) -> None:
        """A node leaves: each of its points hands its keys to the next point clockwise."""
        if node not in self.nodes:
            raise ValueError(f"node {node!r} is not on the ring (nodes: {self.nodes})")
        i = self.nodes.index(node)
        keep = self._owner != i
        owners = np.where(self._owner[keep] > i, self._owner[keep] - 1, self._owner[keep])
        self.nodes.pop(i)
        self._rebuild(self._points[keep].tolist(), owners.tolist())

    def _slots(self, keys: Sequence[Hashable]) -> np.ndarray:
        if not self.nodes:
            raise ValueError("the ring has no nodes: add one before placing keys")
        h = np.fromiter((stable_hash(k) for k in keys), dtype=np.uint64, count=len(keys))
        return np.searchsorted(self._points, h, side="left") % len(self._points)  # wraps past 2**64 - 1

    def owner(self, key: Hashable) -> Hashable:
        """The primary node of ``key``: the first point clockwise from its hash."""
        return self.nodes[int(self._owner[self._slots([key])[0]])]

    def owner_of_each(self, keys: Sequence[Hashable]) -> list[Hashable]:
        """Primary node of every key (vectorised lookup)."""
        return [self.nodes[i] for i in self._owner[self._slots(keys)]]

    def owners(self, key: Hashable) -> list[Hashable]:
        """The ``replicas`` distinct physical nodes clockwise from the key (fewer if the ring has fewer)."""
        want = min(self.replicas, len(self.nodes))
        slot, found = int(self._slots([key])[0]), []
        while len(found) < want:
            node = int(self._owner[slot])
            if node not in found:
                found.append(node)
            slot = (slot + 1) % len(self._points)
        return [self.nodes[i] for i in found]

    def load(self, keys: Sequence[Hashable]) -> dict[Hashable, int]:
        """Keys per node as primary owner (nodes with none included)."""
        counts = np.bincount(self._owner[self._slots(keys)], minlength=len(self.nodes))
        return {node: int(c) for node, c in zip(self.nodes, counts)}


def naive_owners(key: Hashable, nodes: Sequence[Hashable], replicas: int = 1) -> list[Hashable]:
    """Modulo placement: node (hash mod n), replicas on the next nodes of the list."""
    if not nodes:
        raise ValueError("naive_owners needs at least one node")
    i = stable_hash(key) % len(nodes)
    return [nodes[(i + j) % len(nodes)] for j in range(min(replicas, len(nodes)))]


Placement = HashRing | Sequence[Hashable] | Callable[[Hashable], Hashable]


def _primary(place: Placement, keys: Sequence[Hashable]) -> list[Hashable]:
    if isinstance(place, HashRing):
        return place.owner_of_each(keys)
    if callable(place):
        return [place(k) for k in keys]
    return [naive_owners(k, place)[0] for k in keys]  # a list of nodes means modulo placement


def moved_fraction(before: Placement, after: Placement, keys: Sequence[Hashable]) -> float:
    """Share of ``keys`` whose primary node differs between two placements (ring, node list = modulo, fn)."""
    if not len(keys):
        raise ValueError("moved_fraction needs at least one key")
    a, b = _primary(before, keys), _primary(after, keys)
    return sum(x != y for x, y in zip(a, b)) / len(keys)


def expected_moved_fraction(n: int, event: str = "join", scheme: str = "ring") -> float:
    """Expected share of keys moved when one node joins n nodes (1/(n+1)) or leaves n (1/n).

    Modulo placement keeps a key only if hash mod n == hash mod n', about 1/n' of keys for coprime
    moduli: n/(n+1) move on a join, (n-1)/n on a leave."""
    if event not in ("join", "leave"):
        raise ValueError(f"event must be 'join' or 'leave', got {event!r}")
    if scheme not in ("ring", "modulo"):
        raise ValueError(f"scheme must be 'ring' or 'modulo', got {scheme!r}")
    if n < 1 or (event == "leave" and n < 2):
        raise ValueError(f"n={n} nodes: a join needs n >= 1, a leave n >= 2")
    if scheme == "ring":
        return 1 / (n + 1) if event == "join" else 1 / n
    return n / (n + 1) if event == "join" else (n - 1) / n


def load_imbalance(counts: dict[Hashable, int] | Sequence[int]) -> float:
    """max load / mean load (1.0 is perfect balance)."""
    c = np.asarray(list(counts.values()) if isinstance(counts, dict) else counts, dtype=np.float64)
    return float(c.max() / c.mean()) if c.size and c.mean() > 0 else float("nan")


def live_owner(ring: HashRing, key: Hashable, down: set) -> Hashable:
    """The first of the key's replicas that is up: reads survive r - 1 failed replicas."""
    for node in ring.owners(key):
        if node not in down:
            return node
    raise LookupError(f"all {ring.replicas} replicas of {key!r} are down: the key is unavailable")


# ---- sharded files -------------------------------------------------------------------------------


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # readers see the old file or the whole new one, never half


def write_sharded(root: str | os.PathLike, records: Sequence[np.ndarray], shards: int) -> "ShardedDataset":
    """Write records into ``shards`` files (contiguous blocks) with offset indexes and a manifest."""
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards must be an integer >= 1, got {shards!r}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    dtype = records[0].dtype if len(records) else np.dtype(np.int32)
    bounds = block_bounds(len(records), shards)
    for s, (lo, hi) in enumerate(bounds):
        sizes = [records[i].nbytes for i in range(lo, hi)]
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        _atomic_write(root / f"shard-{s:05d}.bin", b"".join(np.ascontiguousarray(records[i], dtype).tobytes()
                                                            for i in range(lo, hi)))
        _atomic_write(root / f"shard-{s:05d}.idx", offsets.tobytes())
    manifest = {"n": len(records), "shards": shards, "dtype": np.dtype(dtype).str, "bounds": bounds}
    _atomic_write(root / "manifest.json", json.dumps(manifest).encode())  # last: it publishes the dataset
    return ShardedDataset(root)


class ShardedDataset:
    """Read access to a dataset written by ``write_sharded``: global index -> (shard, byte range)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        meta = json.loads((self.root / "manifest.json").read_text())
        self.n, self.shards, self.dtype = int(meta["n"]), int(meta["shards"]), np.dtype(meta["dtype"])
        self.starts = np.array([lo for lo, _ in meta["bounds"]] + [self.n], dtype=np.int64)
        self.offsets = [np.fromfile(self.root / f"shard-{s:05d}.idx", dtype=np.int64) for s in range(self.shards)]

    def __len__(self) -> int:
        return self.n

    def locate(self, i: int) -> tuple[int, int, int]:
        """(shard, first byte, end byte) of record i."""
        if not 0 <= i < self.n:
            raise IndexError(f"record {i} is outside the dataset of {self.n} records")
        s = int(np.searchsorted(self.starts, i, side="right")) - 1
        while self.starts[s + 1] == self.starts[s]:  # empty shards share a start: skip them
            s += 1
        j = i - int(self.starts[s])
        return s, int(self.offsets[s][j]), int(self.offsets[s][j + 1])

    def shard_bytes(self, s: int) -> int:
        return int(self.offsets[s][-1])

    def path(self, s: int) -> Path:
        return self.root / f"shard-{s:05d}.bin"


class BlockReader:
    """Reads records by fetching aligned blocks of ``block_bytes`` (None: whole shards) through an LRU
    cache of ``cache_blocks`` blocks; counts bytes fetched from the files and bytes of records returned."""

    def __init__(self, ds: ShardedDataset, block_bytes: int | None = 4096, cache_blocks: int = 1) -> None:
        if block_bytes is not None and (not isinstance(block_bytes, int) or block_bytes < 1):
            raise ValueError(f"block_bytes must be a positive integer or None (whole shards), got {block_bytes!r}")
        self.ds, self.block, self.cache_blocks = ds, block_bytes, max(1, int(cache_blocks))
        self.cache: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self.bytes_read = self.bytes_needed = self.fetches = 0

    def _fetch(self, s: int, b: int) -> bytes:
        key = (s, b)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        size = self.block or self.ds.shard_bytes(s)
        with open(self.ds.path(s), "rb") as f:
            f.seek(b * size)
            data = f.read(size)
        self.bytes_read += len(data)
        self.fetches += 1
        self.cache[key] = data
        if len(self.cache) > self.cache_blocks:
            self.cache.popitem(last=False)
        return data

    def read(self, i: int) -> np.ndarray:
        s, lo, hi = self.ds.locate(int(i))
        self.bytes_needed += hi - lo
        size = self.block or max(1, self.ds.shard_bytes(s))
        parts = [self._fetch(s, b) for b in range(lo // size, (hi - 1) // size + 1)] if hi > lo else []
        blob = b"".join(parts)
        first = (lo // size) * size
        return np.frombuffer(blob[lo - first: hi - first], dtype=self.ds.dtype).copy()

    @property
    def amplification(self) -> float:
        """bytes fetched / bytes needed (1.0: nothing read in vain)."""
        return self.bytes_read / self.bytes_needed if self.bytes_needed else float("nan")


def read_amplification(ds: ShardedDataset, order: Sequence[int], block_bytes: int | None,
                       cache_blocks: int = 1) -> float:
    """Read the records of ``order`` in that order through a BlockReader; return its amplification."""
    reader = BlockReader(ds, block_bytes, cache_blocks)
    for i in order:
        reader.read(int(i))
    return reader.amplification


def run_loader(comm: Comm, root: str, epoch: int = 0, seed: int = 0, drop_last: bool = False,
               block_bytes: int | None = 65536, start: int = 0) -> tuple[np.ndarray, list[np.ndarray], dict]:
    """Per rank: (its sampler indices, the records read from the shard files, read statistics)."""
    ds = ShardedDataset(root)
    mine = shard_indices(ds.n, comm.size, comm.rank, epoch, seed, drop_last=drop_last, start=start)
    reader = BlockReader(ds, block_bytes)
    records = [reader.read(int(i)) for i in mine]
    stats = {"bytes_read": reader.bytes_read, "bytes_needed": reader.bytes_needed, "fetches": reader.fetches}
    return mine, records, stats
