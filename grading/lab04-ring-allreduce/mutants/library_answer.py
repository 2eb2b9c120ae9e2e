# mutant: calls the course library's recursive doubling through an import path a grep does not see
# loses: correct_sim, correct_process, bandwidth, latency, schedule
import importlib


def halving_doubling_allreduce(comm, x):
    mod = importlib.import_module("scaleoutai." + "collec" + "tives")
    return getattr(mod, "recursive" + "_doubling_allreduce")(comm, x)
