# mutant: trains with the course library's flat DDP through an import path a grep does not see
# loses: train_sim, train_process, frozen, cross_node, messages
import importlib


def ddp_train(comm, X, Y, params, steps, lr, G, bucket_bytes, frozen=()):
    lib = importlib.import_module("scaleoutai.parallel." + "d" + "dp")
    return lib.train_ddp(comm, [(X, Y)], params, steps, lr, bucket_bytes, frozen=frozen)[0]
