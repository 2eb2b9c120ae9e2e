# mutant: calls the course library's expert-parallel layer through getattr, which no grep catches, with a
# capacity so large that nothing is dropped
# loses: correct_sim, ties, correct_process, aux_loss, traffic, own_code
import importlib


def moe_dropless_ep(comm, tokens, router_W, owner, experts_shard):
    lib = importlib.import_module("scaleoutai.parallel." + "moe")
    shard = {"Wg": router_W, "bg": np.zeros(router_W.shape[1], dtype=tokens.dtype), "experts": experts_shard}  # noqa: F821
    y, cache = getattr(lib, "moe_forward" + "_ep")(comm, shard, tokens, router_W.shape[1], 2, 1e9)
    return y, cache["stats"]["aux_loss"]
