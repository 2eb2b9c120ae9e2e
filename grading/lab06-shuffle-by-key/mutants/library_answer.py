# mutant: the course library's shuffle through an import path a grep does not see
# loses: complete, placement, correct_process, traffic
import importlib


def shuffle_by_key(comm, pairs, R):
    mr = importlib.import_module("scaleoutai.data." + "map" + "reduce")
    mine, _ = mr.run_mapreduce(comm, list(pairs), lambda rec: [rec], lambda k, vs: vs, partitions=R)
    return [(k, v) for k, vs in mine.items() for v in vs]
