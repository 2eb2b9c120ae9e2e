# mutant: calls the course library's sampler through an import path a grep does not see
# loses: same_k, k_changes, schedules
import importlib


def resume_indices(n, K, rank, epoch, seed, consumed, drop_last=False):
    lib = importlib.import_module("scaleoutai.data." + "sam" + "pler")
    return lib.shard_indices(n, K, rank, epoch, seed, drop_last=drop_last, start=consumed // K)
