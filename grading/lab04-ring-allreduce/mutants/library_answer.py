# mutant: calls the course library's answer through an import path a grep does not see
# loses: correct_sim, correct_process, bandwidth, send_recv_only
import importlib


def ring_allreduce(comm, x):
    mod = importlib.import_module("scaleoutai." + "collec" + "tives")
    return getattr(mod, "ring" + "_allreduce")(comm, x)
