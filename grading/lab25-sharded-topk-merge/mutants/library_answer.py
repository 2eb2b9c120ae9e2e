# mutant: the course library's scatter-gather through an import path a grep does not see
# loses: distances, ids, small_shards, correct_process, round1, threshold, round2
import importlib


def two_round_topk(comm, queries, shard, offset, k):
    v = importlib.import_module("scaleoutai.serving." + "vec" + "tors")
    return v.search_shard(comm, queries, shard, offset, k)
