# mutant: calls the course library's sampler through an import path a grep does not see
# loses: exactly_once, spec, resume, deterministic, reshuffled, no_messages
import importlib


def shard_indices(n, K, rank, epoch, seed, drop_last=False, start=0):
    lib = importlib.import_module("scaleoutai.data." + "sam" + "pler")
    return lib.shard_indices(n, K, rank, epoch, seed, drop_last=drop_last, start=start)
