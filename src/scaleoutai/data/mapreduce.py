"""MapReduce over the communicator (Chapter 6, Sections 2-4).

A job is ``mapper(record) -> iterable of (key, value)``, an optional ``combiner(key, values) -> value``
run on each rank before the shuffle, and ``reducer(key, values) -> result``. Rank r maps block r of the
records (``collectives.block_range``), sends every pair to the partition ``stable_hash(key) mod R``
(partition p lives on rank p mod K) with one ``all_to_all``, and reduces the keys of its partitions.

Invariant: the values reach the reducer in record order (blocks are contiguous and received in rank
order), so without a combiner the result equals ``reference_mapreduce`` exactly for any reducer and
any K; with a combiner it does whenever combining then reducing equals reducing (sum, max, union...).
Pairs travel pickled inside a uint8 array: ranks trust each other here (the grader does not).
"""
from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Comm
from ..collectives import all_gather, all_to_all, block_range

Mapper = Callable[[Any], Iterable[tuple[Hashable, Any]]]
Reducer = Callable[[Hashable, list], Any]


def stable_hash(key: Hashable) -> int:
    """A 64-bit hash that every process agrees on (Python's ``hash`` of a str is salted per process)."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")


def partition_of(key: Hashable, partitions: int) -> int:
    """Hash partitioning: key -> stable_hash(key) mod R."""
    return stable_hash(key) % partitions


def encode(obj: Any) -> np.ndarray:
    """Any picklable object as a uint8 array, the communicator's only payload type."""
    return np.frombuffer(pickle.dumps(obj, protocol=5), dtype=np.uint8)


def decode(arr: np.ndarray) -> Any:
    return pickle.loads(arr.tobytes())


def _group(pairs: Iterable[tuple[Hashable, Any]]) -> dict[Hashable, list]:
    groups: dict[Hashable, list] = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(value)
    return groups


def reference_mapreduce(records: Sequence[Any], mapper: Mapper, reducer: Reducer) -> dict[Hashable, Any]:
    """The sequential job: map every record in order, group by key, reduce each key."""
    groups = _group(pair for record in records for pair in mapper(record))
    return {key: reducer(key, values) for key, values in groups.items()}


@dataclass
class ShuffleStats:
    """What one rank's shuffle moved: pairs and payload bytes to every other rank, and kept locally."""

    pairs_sent: int = 0
    bytes_sent: int = 0
    pairs_kept: int = 0
    pairs_mapped: int = 0
    pairs_after_combine: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)


def run_mapreduce(comm: Comm, records: Sequence[Any], mapper: Mapper, reducer: Reducer,
                  combiner: Reducer | None = None, partitions: int | None = None,
                  map_seconds: float = 0.0, reduce_seconds: float = 0.0
                  ) -> tuple[dict[Hashable, Any], ShuffleStats]:
    """One MapReduce job on every rank; returns (this rank's reduced keys, its shuffle statistics).

    ``records`` is the whole input on every rank (each maps only its block). ``partitions`` (R,
    default K) hash buckets; partition p is reduced on rank p mod K. Merge the ranks' dicts for the
    full result (``gather_result``); the key sets are disjoint. ``map_seconds`` per record and
    ``reduce_seconds`` per received value are charged with ``comm.compute`` (the simulator's clock).
    """
    K, r = comm.size, comm.rank
    R = K if partitions is None else int(partitions)
    if R < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    lo, hi = block_range(len(records), K, r)
    stats = ShuffleStats()
    mapped = [pair for record in records[lo:hi] for pair in mapper(record)]
    stats.pairs_mapped = len(mapped)
    comm.compute(map_seconds * (hi - lo))
    if combiner is not None:  # one value per key leaves this rank: less to shuffle
        mapped = [(key, combiner(key, values)) for key, values in _group(mapped).items()]
    stats.pairs_after_combine = len(mapped)
    outgoing: list[list] = [[] for _ in range(K)]
    for key, value in mapped:
        p = partition_of(key, R)
        stats.per_partition[p] = stats.per_partition.get(p, 0) + 1
        outgoing[p % K].append((key, value))
    blocks = [encode(pairs) for pairs in outgoing]
    for dst, block in enumerate(blocks):
        if dst != r:
            stats.pairs_sent += len(outgoing[dst])
            stats.bytes_sent += block.nbytes
    stats.pairs_kept = len(outgoing[r])
    received = all_to_all(comm, blocks)
    incoming = [pair for src in range(K) for pair in decode(received[src])]  # rank order = record order
    comm.compute(reduce_seconds * len(incoming))
    groups = _group(incoming)
    return {key: reducer(key, values) for key, values in groups.items()}, stats


def gather_result(comm: Comm, mine: dict[Hashable, Any]) -> dict[Hashable, Any]:
    """Every rank's reduced keys merged on every rank (an all-gather of the pickled dicts)."""
    payload = encode(mine)
    sizes = all_gather(comm, np.array([payload.nbytes], dtype=np.int64))
    parts = all_gather(comm, payload)
    out: dict[Hashable, Any] = {}
    start = 0
    for n in sizes:
        out.update(decode(parts[start:start + int(n)]))
        start += int(n)
    return out


def shuffle_fraction(K: int) -> float:
    """Expected share of a rank's pairs that leave it when keys hash uniformly over R = K partitions."""
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    return (K - 1) / K


# --- the chapter's worked examples ------------------------------------------------------------------

def word_count_mapper(line: str) -> list[tuple[str, int]]:
    return [(word, 1) for word in line.split()]


def sum_reducer(key: Hashable, values: list) -> Any:
    return sum(values)


def index_mapper(doc: tuple[int, str]) -> list[tuple[str, int]]:
    """Inverted index: (doc_id, text) -> (word, doc_id) once per distinct word of the document."""
    doc_id, text = doc
    return [(word, doc_id) for word in dict.fromkeys(text.split())]


def postings_reducer(key: Hashable, values: list) -> list:
    return sorted(set(values))


def join_mapper(row: tuple[str, Hashable, Any]) -> list[tuple[Hashable, tuple[str, Any]]]:
    """Reduce-side equi-join: a row ("L" or "R", key, payload) is sent to its key's partition."""
    side, key, payload = row
    if side not in ("L", "R"):
        raise ValueError(f"join rows are ('L' or 'R', key, payload), got side {side!r}")
    return [(key, (side, payload))]


def join_reducer(key: Hashable, values: list) -> list[tuple[Any, Any]]:
    """Every (left, right) pair of payloads for the key, in input order: an inner join."""
    left = [v for side, v in values if side == "L"]
    right = [v for side, v in values if side == "R"]
    return [(a, b) for a in left for b in right]
