# mutant: hands out the next rank's slice on each call from state kept in the process, ignoring rank:
# right when one process asks for ranks 0, 1, ..., K-1 in turn, wrong on K separate processes
# loses: exactly_once, spec, resume
import numpy as np

_served = {}


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    key = (n, K, epoch, seed, drop_last)
    mine = _served.get(key, 0) % K
    _served[key] = mine + 1
    order = np.random.default_rng(seed + epoch).permutation(n).astype(np.int64)
    per_rank = n // K if drop_last else -(-n // K)
    order = order[:K * per_rank] if drop_last else np.resize(order, K * per_rank)
    return order[mine::K][start:].copy()
