# mutant: the course library's hash shuffle through an import path a grep does not see, sorted afterwards
# loses: complete, sorted, balance, combine, correct_process, traffic
import importlib


def sort_shuffle(comm, pairs, combine=None, s=16):
    mr = importlib.import_module("scaleoutai.data." + "map" + "reduce")
    reducer = (lambda k, vs: [sum(vs)]) if combine == "sum" else (lambda k, vs: vs)
    mine, _ = mr.run_mapreduce(comm, [[p] for p in pairs] if comm.rank == 0 else [], lambda rec: rec, reducer)
    return sorted(((k, v) for k, vs in mine.items() for v in vs), key=lambda p: order(p[0]))  # noqa: F821
