# mutant: calls the course library's sharded gradient through an import path a grep does not see
# loses: sharded, communication
import importlib


def sharded_gradient(comm, X_shard, y_shard, w):
    lib = importlib.import_module("scaleoutai." + "shard" + "ing")
    return lib.local_weighted_gradient(X_shard, y_shard, w)
