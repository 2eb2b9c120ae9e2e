"""The deterministic distributed sampler (Chapter 8, Sections 2-4).

Every rank computes the indices it reads in an epoch from (n, K, rank, epoch, seed) alone, with no
message, and the K lists together are the epoch. This is the rule of
``torch.utils.data.DistributedSampler`` (torch 2.x), step by step:

1. order: a permutation of range(n) drawn from seed + epoch (``shuffle=True``), else range(n);
2. make the length a multiple of K:
   - ``drop_last=False`` (default) **pads** by repeating the order from its start until the length is
     K * ceil(n/K): n mod K samples (0 < pad < K) are read twice in that epoch, and with K > n some
     are read more often; every sample is read at least once;
   - ``drop_last=True`` **drops** the tail of the order down to K * floor(n/K): n mod K samples are not
     read in that epoch (different ones every epoch when shuffled), none is read twice;
3. rank r takes every K-th index from position r: ``order[r::K]`` (interleaved, not contiguous blocks);
4. resume: ``start=i`` returns that list without its first i entries, the tail a rank still has to
   read after a crash at sample i of its epoch.

``generator="torch"`` draws step 1 with ``torch.randperm(n, generator=torch.Generator().manual_seed(seed
+ epoch))``, which makes the lists identical to torch's sampler; the default ``"numpy"`` draws it with
``np.random.default_rng(seed + epoch).permutation(n)``: the same rule and sizes, another order.
"""
from __future__ import annotations

import numpy as np

from ..cluster import Comm
from ..collectives import all_gather

GENERATORS = ("numpy", "torch")


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def per_rank_count(n: int, K: int, drop_last: bool = False) -> int:
    """Indices per rank in one epoch: ceil(n/K) when padding, floor(n/K) when dropping (torch's num_samples)."""
    n, K = _count("n", n, 0), _count("K", K, 1)
    return n // K if drop_last else -(-n // K)


def epoch_order(n: int, epoch: int, seed: int = 0, shuffle: bool = True, generator: str = "numpy") -> np.ndarray:
    """Step 1: the epoch's order of range(n), a permutation drawn from seed + epoch (or range(n))."""
    n = _count("n", n, 0)
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    if generator == "torch":
        import torch

        g = torch.Generator()
        g.manual_seed(int(seed) + int(epoch))
        return torch.randperm(n, generator=g).numpy().astype(np.int64)
    return np.random.default_rng(int(seed) + int(epoch)).permutation(n).astype(np.int64)


def shard_indices(n: int, K: int, rank: int, epoch: int = 0, seed: int = 0, shuffle: bool = True,
                  drop_last: bool = False, start: int = 0, generator: str = "numpy") -> np.ndarray:
    """The indices rank ``rank`` of K reads in ``epoch``, from position ``start`` of its list (int64).

    order -> pad to K*ceil(n/K) by repeating from the start (or drop to K*floor(n/K)) -> order[rank::K]
    -> [start:]. Needs n >= 1 when padding (there is nothing to repeat in an empty dataset).
    """
    n, K = _count("n", n, 0), _count("K", K, 1)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < K:
        raise ValueError(f"rank={rank!r} is not one of the K={K} ranks: choose 0..{K - 1}")
    start = _count("start", start, 0)
    if n == 0 and not drop_last:
        raise ValueError("n=0: an empty dataset cannot be padded; pass drop_last=True or a dataset with samples")
    order = epoch_order(n, epoch, seed, shuffle, generator)
    total = K * per_rank_count(n, K, drop_last)
    # np.resize repeats the order cyclically: torch's indices + indices[:pad], or indices * m when pad > n.
    order = order[:total] if drop_last else np.resize(order, total)
    return order[rank::K][start:].copy()


def reference_epoch(n: int, K: int, epoch: int = 0, seed: int = 0, shuffle: bool = True,
                    drop_last: bool = False, generator: str = "numpy") -> list[np.ndarray]:
    """Single-machine reference: all K ranks' lists, computed in one place."""
    return [shard_indices(n, K, r, epoch, seed, shuffle, drop_last, 0, generator) for r in range(K)]


def torch_indices(n: int, K: int, rank: int, epoch: int = 0, seed: int = 0, shuffle: bool = True,
                  drop_last: bool = False) -> np.ndarray:
    """What ``torch.utils.data.DistributedSampler`` yields for rank ``rank`` after ``set_epoch(epoch)``."""
    from torch.utils.data import DistributedSampler

    sampler = DistributedSampler(range(n), num_replicas=K, rank=rank, shuffle=shuffle, seed=seed,
                                 drop_last=drop_last)
    sampler.set_epoch(epoch)
    return np.fromiter(iter(sampler), dtype=np.int64, count=len(sampler))


def resume_position(steps_done: int, batch_size: int) -> int:
    """Where a rank resumes in its epoch list after ``steps_done`` optimizer steps of ``batch_size``."""
    return _count("steps_done", steps_done, 0) * _count("batch_size", batch_size, 1)


def run_sampler(comm: Comm, n: int, epoch: int = 0, seed: int = 0, shuffle: bool = True,
                drop_last: bool = False, start: int = 0, generator: str = "numpy"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per rank: (my indices, every rank's indices gathered in rank order).

    The indices are computed locally; the all-gather only lets a test see that their union is the epoch.
    Every rank's list has the same length, so the gathered array reshapes to (K, per-rank count).
    """
    mine = shard_indices(n, comm.size, comm.rank, epoch, seed, shuffle, drop_last, start, generator)
    return mine, all_gather(comm, mine)


def epoch_counts(lists: list[np.ndarray], n: int) -> np.ndarray:
    """How many times each of the n samples is read over all ranks' lists (1 everywhere = exactly once)."""
    joined = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists]) if lists else np.zeros(0, np.int64)
    return np.bincount(joined, minlength=n)
