# mutant: draws the order with torch.randperm (torch's DistributedSampler) instead of the lab's NumPy rule
# loses: spec, resume
import numpy as np
import torch


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).numpy().astype(np.int64)
    per_rank = n // K if drop_last else -(-n // K)
    order = order[:K * per_rank] if drop_last else np.resize(order, K * per_rank)
    return order[rank::K][start:].copy()
