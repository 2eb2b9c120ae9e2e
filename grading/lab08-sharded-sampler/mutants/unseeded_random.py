# mutant: shuffles with Python's random module, never seeded: every process and every call draws its own order
# loses: exactly_once, spec, resume, deterministic
import random

import numpy as np


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    order = list(range(n))
    random.shuffle(order)
    order = np.array(order, dtype=np.int64)
    per_rank = n // K if drop_last else -(-n // K)
    order = order[:K * per_rank] if drop_last else np.resize(order, K * per_rank)
    return order[rank::K][start:].copy()
