# mutant: calls the course library's expert-parallel layer through getattr, which no grep catches
# loses: correct_sim, drops, correct_process, traffic, own_code
import importlib


def moe_forward_ep(comm, tokens, router_W, experts_shard, k, capacity_factor):
    lib = importlib.import_module("scaleoutai.parallel." + "moe")
    return getattr(lib, "moe_forward" + "_ep")(comm, experts_shard, tokens, router_W.shape[1], k, capacity_factor)
