# mutant: calls the course library's compressed all-reduce through an import path a grep does not see
# loses: allreduce, residual, correct_process, traffic, training
import importlib


def ef_topk_allreduce(comm, grad, k, residual):
    lib = importlib.import_module("scaleoutai." + "ml.compression")
    state = {"residual": residual}
    avg = lib.compressed_allreduce(comm, grad, lib.TopK(int(k), True), state)
    return avg, state["residual"]
